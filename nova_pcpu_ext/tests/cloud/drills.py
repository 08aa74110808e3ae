# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Fault and load drills on the loopback cloud, stock Nova beside Nova with
the extension: the same faults, at the same time, with the same seed.

Each drill measures figures on both deployments (the extension's alone in
the short form); a figure with a requirement must meet it on the extension
deployment (stock's value is shown beside it, whatever it is, never
judged). See doc/source/contributor/reliability.rst.
"""

import calendar
import collections
import concurrent.futures
import os
import random
import re
import signal
import threading
import time

from oslo_config import cfg

from nova_pcpu_ext import conf as pcpu_conf
from nova_pcpu_ext.tests.cloud import deploy
from nova_pcpu_ext.tests.cloud import logs
from nova_pcpu_ext.tests.cloud import progress

#: update_resources_interval of every compute of the cloud in the drills.
INTERVAL = deploy.DRILL_UPDATE_INTERVAL
DISABLED = 'COMPUTE_STATUS_DISABLED'
REAL_LIBVIRT_HOSTS = {c.host for c in deploy.COMPUTES if not c.fake}
SEED = 1889633
#: After placement answers again, a compute's periodic update may still be
#: waiting out its last connect retry (keystoneauth waits 0.5 s, doubling
#: each retry: 2 s before the third), and the next one follows an interval
#: later: 4 s. Three times that leaves room for a loaded machine (ext
#: took 4.4 s both during a whole CI run and alone on 2 cores, stock 2.1
#: to 4.0 s); a compute that stops trying meets the 30 s limit.
PLACEMENT_CONVERGES = 3 * (2 ** (deploy.PLACEMENT_CONNECT_RETRIES - 2) +
                           2 * INTERVAL)
#: Per form: the status storm's seconds, the boot storm's servers.
SIZES = {'short': (30, 16), 'full': (120, 40)}


class Target:
    """The APIs of one deployment, as an operator's tools see them."""

    def __init__(self, cloud, deployment):
        self.name = deployment.name
        self.deployment = deployment
        self.procs = cloud.procs
        self.conn = cloud.shared.admin(deployment.name)
        self.image_id = cloud.image_id
        hypervisors = self.compute('GET', '/os-hypervisors/detail')
        self.providers = {h['service']['host']: h['id']
                          for h in hypervisors['hypervisors']}
        self.service_ids = {host: s['id']
                            for host, s in self.services().items()}
        self.request_ids = {}  # {server id: id of the request booting it}

    def compute(self, method, path, body=None, microversion='2.53'):
        response = self.conn.compute.request(
            path, method, json=body, microversion=microversion,
            raise_exc=True)
        return response.json() if response.content else None

    def placement(self, path, microversion='1.26'):
        return self.conn.placement.get(
            path, microversion=microversion, raise_exc=True).json()

    def services(self):
        """{host: service} of the computes."""
        return {s['host']: s for s in self.compute(
            'GET', '/os-services?binary=nova-compute')['services']}

    def set_disabled(self, host, disabled):
        """Disable or enable a compute as an operator does; seconds taken."""
        start = time.monotonic()
        self.compute('PUT', '/os-services/%s' % self.service_ids[host],
                     {'status': 'disabled' if disabled else 'enabled'})
        return time.monotonic() - start

    def traits(self, host):
        return set(self.placement('/resource_providers/%s/traits' %
                                  self.providers[host])['traits'])

    def provider_state(self):
        """{host: (inventories, traits)} as placement holds them.

        Without the real-libvirt host's memory size: the figure libvirt
        reports on this machine drifts, and the compute writes it to
        placement as it does.
        """
        state = {}
        for host, uuid in self.providers.items():
            inventories = self.placement('/resource_providers/%s/inventories'
                                         % uuid)['inventories']
            if host in REAL_LIBVIRT_HOSTS and 'MEMORY_MB' in inventories:
                for field in ('total', 'max_unit'):
                    del inventories['MEMORY_MB'][field]
            state[host] = (inventories, self.traits(host))
        return state

    def reported_since(self, host, since):
        """Whether ``host``'s compute reported its state after ``since``."""
        return _epoch(self.services()[host]['updated_at']) > since

    def answers(self, host):
        """Whether ``host``'s compute answers a call (its uptime)."""
        return self.compute('GET', '/os-hypervisors/%s/uptime' %
                            self.providers[host], microversion='2.87')[
            'hypervisor']['uptime']

    def computes_alive(self):
        return all(self.procs.pid(self.deployment.service(
            'compute-' + c.host)) in self.procs.running().values()
            for c in self.deployment.computes)

    def log(self, service):
        return self.procs.log_path(self.deployment.service(service))


def on_each(targets, function, *args):
    """``function(target, *args)`` on every target at once; {name: result}."""
    with concurrent.futures.ThreadPoolExecutor(len(targets)) as pool:
        futures = {t.name: pool.submit(function, t, *args) for t in targets}
        return {name: future.result() for name, future in futures.items()}


class LogWindow:
    """The records a set of log files gain from now on."""

    def __init__(self, paths):
        self.offsets = {path: _size(path) for path in paths}

    def records(self):
        for path, offset in self.offsets.items():
            with open(path, errors='replace') as f:
                f.seek(offset)
                yield from logs.records(f)

    def errors(self):
        return [r for r in self.records() if logs.is_error(r)]


def _size(path):
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


# Before the drills ---------------------------------------------------------

def updates_every_interval(target):
    """Every compute restarted to update its resources each INTERVAL."""
    target.deployment.restart_computes(INTERVAL)
    return {
        'every compute back (s)': _wait(lambda: all(
            target.answers(c.host) for c in target.deployment.computes),
            120),
        'computes alive': target.computes_alive(),
    }


# Drill 1 ------------------------------------------------------------------

def status_storm(target, seconds):
    """Disable and enable every compute at random; watch placement.

    Each change is held for a random time, during which its thread reads
    the provider's traits every 0.2 s; a poller compares every service's
    state with its trait meanwhile.
    """
    rng = random.Random(SEED)
    hosts = sorted(target.providers)
    # The same holds for each host on both deployments.
    holds = {host: [rng.uniform(0.2, 2.0) for _ in range(int(seconds) * 5)]
             for host in hosts}
    latencies = []
    samples = {host: [] for host in hosts}  # (time, service, trait)
    end = time.monotonic() + seconds
    stopped = threading.Event()

    def change(host, disabled, hold):
        latencies.append(target.set_disabled(host, disabled))
        until = time.monotonic() + hold
        seen = []
        while not seen or time.monotonic() < until:
            seen.append((DISABLED in target.traits(host)) == disabled)
            time.sleep(0.2)
        return collections.Counter(changes=1, lost=not any(seen),
                                   undone=any(seen) and not seen[-1])

    def storm(host):
        counts, disabled = collections.Counter(), False
        for hold in holds[host]:
            if time.monotonic() >= end:
                break
            disabled = not disabled
            counts += change(host, disabled, hold)
        if disabled:
            counts += change(host, False, 2 * INTERVAL)
        return counts

    def poll():
        # Two requests a round: the services, and the disabled providers.
        while not stopped.is_set():
            services = target.services()
            disabled = {p['uuid'] for p in target.placement(
                '/resource_providers?required=' + DISABLED)[
                    'resource_providers']}
            now = time.monotonic()
            for host in hosts:
                samples[host].append((
                    now, services[host]['status'] == 'disabled',
                    target.providers[host] in disabled))
            time.sleep(0.1)

    poller = threading.Thread(target=poll)
    poller.start()
    with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
        counts = sum(pool.map(storm, hosts), collections.Counter())
    stopped.set()
    poller.join()
    windows = [w for host in hosts for w in disagreements(samples[host])]
    longest = max(windows, default=0)
    latencies.sort()
    return {
        'status changes': counts['changes'],
        'lost updates': counts['lost'],
        'changes undone in placement later': counts['undone'],
        'longest disagreement (s)': round(longest, 1),
        'longest disagreement less the slowest call (s)': round(
            longest - latencies[-1], 1),
        'disagreement beyond one interval (s)': round(
            sum(w for w in windows if w > INTERVAL), 1),
        'disagreements over half an interval (s)': sorted(
            round(w, 2) for w in windows if w > INTERVAL / 2),
        'disable/enable call median (s)': round(
            latencies[len(latencies) // 2], 2),
        'disable/enable call p99 (s)': round(
            latencies[int(len(latencies) * 0.99)], 2),
    }


def disagreements(samples):
    """Lengths of the windows in which service and trait disagree."""
    windows, since = [], None
    for t, service, trait in samples:
        if service != trait and since is None:
            since = t
        elif service == trait and since is not None:
            windows.append(t - since)
            since = None
    if since is not None:
        windows.append(float('inf'))
    return windows


# Drill 2 ------------------------------------------------------------------

def placement_restart(target, down_seconds=5):
    """Stop placement while computes update; a disable happens meanwhile."""
    expected = target.provider_state()
    expected['ht'][1].add(DISABLED)
    window = LogWindow([target.log('compute-' + c.host)
                        for c in target.deployment.computes])
    name = target.deployment.service('placement')
    target.procs.stop(name)
    stopped = time.monotonic()
    target.set_disabled('ht', True)
    time.sleep(down_seconds)
    target.procs.start_again(name)
    target.procs.wait_for_http(name, target.deployment.placement_url)
    down = time.monotonic() - stopped
    converged = _wait(lambda: target.provider_state() == expected, 30)
    during = window.errors()
    after = LogWindow(window.offsets)
    time.sleep(3 * INTERVAL)
    figures = {
        'converged after placement answered (s)': converged,
        'computes alive': target.computes_alive(),
        # Nova logs each failed periodic update: one or two a second is
        # a compute waiting for placement, not a loop.
        'compute error records per compute and second down': round(
            len(during) / len(target.deployment.computes) / down, 1),
        'compute error records after convergence': len(after.errors()),
    }
    target.set_disabled('ht', False)
    return figures


# Drill 3 ------------------------------------------------------------------

def rabbitmq_restart(targets):
    """Restart RabbitMQ under both deployments; then disable and boot."""
    procs = targets[0].procs
    procs.stop('rabbitmq')
    stopped = time.time()
    procs.start_again('rabbitmq')
    procs.wait_for_port('rabbitmq', targets[0].deployment.rabbit.port, 90)
    return on_each(targets, after_rabbitmq_restart, stopped)


def after_rabbitmq_restart(target, stopped):
    # A report published before the conductor declared its queue again
    # is lost; its compute waits rpc_response_timeout (60 s).
    reports = report_times(target, stopped, 150)
    # The compute's RPC server reconnects on a connection of its own, which
    # can come back after its state reports: a call published before it
    # declared its queue again is dropped, and nova-api waits
    # rpc_response_timeout for the answer. Disable once noht listens.
    deployment = target.deployment
    listening = _wait(lambda: deployment.rabbit.consumers(
        deployment.vhost(deployment.cell_of('noht')), 'compute.noht'), 90)
    target.set_disabled('noht', True)
    in_placement_at_return = DISABLED in target.traits('noht')
    target.set_disabled('noht', False)
    server = boot(target, flavor(target, 'drill-shared', {}))
    status = wait_for_servers(target, [server], 120)[server]['status']
    delete_servers(target, [server])
    return {
        'all computes reported after restart (s)': None if None in
        reports.values() else max(reports.values()),
        'report after restart per host (s)': reports,
        'noht listening after the reports (s)': listening,
        'disable in placement when the call returned':
            in_placement_at_return,
        'server booted after restart': status,
    }


def report_times(target, since, timeout):
    """Seconds from now until each compute reports after ``since``.

    {host: seconds}; None for a host with no report within ``timeout``.
    """
    start = time.monotonic()
    times = dict.fromkeys(target.providers)
    while None in times.values() and time.monotonic() - start < timeout:
        try:
            services = target.services()
        except Exception:
            services = {}  # nova-api reconnecting: not yet
        for host, service in services.items():
            if (host in times and times[host] is None and
                    _epoch(service['updated_at']) > since):
                times[host] = round(time.monotonic() - start, 1)
        time.sleep(0.2)
    return times


def _epoch(timestamp):
    """Seconds since the epoch of an API timestamp (UTC)."""
    return calendar.timegm(time.strptime(timestamp[:19], '%Y-%m-%dT%H:%M:%S'))


def _wait(condition, timeout):
    """Seconds until ``condition()``, or None after ``timeout``.

    A failing API (a service starting again) counts as not yet.
    """
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if condition():
                return round(time.monotonic() - start, 1)
        except Exception:
            pass
        time.sleep(0.2)
    return None


# Drill 4 ------------------------------------------------------------------

def compute_kill(target, host='noht'):
    """kill -9 a compute while it writes its status to placement."""
    expected = target.provider_state()
    expected[host][1].add(DISABLED)
    name = target.deployment.service('compute-' + host)
    ratios, names, stopped = [], [], threading.Event()

    def watch():
        while not stopped.is_set():
            try:
                for uuid in target.providers.values():
                    ratios.extend(i['allocation_ratio'] for i in
                                  target.placement(
                                      '/resource_providers/%s/inventories'
                                      % uuid)['inventories'].values())
                names.append([p['name'] for p in target.placement(
                    '/resource_providers')['resource_providers']])
            except Exception:
                pass
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    # Not waited for: the API waits for the dead compute's answer until
    # rpc_response_timeout (60 s).
    threading.Thread(target=target.set_disabled, args=(host, True),
                     daemon=True).start()
    # Within the call, while the compute writes the trait (about 0.2 s).
    time.sleep(random.Random(SEED).uniform(0.05, 0.25))
    target.procs.kill(name)
    restarted = time.time()
    target.procs.start_again(name)
    converged = _wait(lambda: target.reported_since(host, restarted) and
                      target.provider_state() == expected, 120)
    stopped.set()
    watcher.join()
    target.set_disabled(host, False)
    uuid_like = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-')
    return {
        'converged after restart (s, start-up included)': converged,
        'lowest allocation ratio seen': min(ratios, default=None),
        'duplicate or UUID-named providers': max(
            (len(n) - len(set(n)) + sum(1 for x in n if uuid_like.match(x))
             for n in names), default=0),
        'computes alive': target.computes_alive(),
    }


# Drill 5 ------------------------------------------------------------------

KINDS = {
    'isolate': {'hw:cpu_policy': 'dedicated',
                'hw:cpu_thread_policy': 'isolate'},
    'dedicated': {'hw:cpu_policy': 'dedicated'},
    'shared': {},
}
RAM, DISK = 128, 1
# Nova's NoValidHost, and MaxRetriesExceeded, its subclass for a build
# that failed on the chosen host and every alternate.
NO_VALID_HOST = re.compile(
    r'No valid host|Exhausted all hosts available for retrying')
#: Each kind's placement query as Nova makes it for a new-style host (the
#: extension refuses isolate on a hyperthreaded one), with a disabled
#: compute left out as Nova's compute status filter does.
ROOM = {
    'isolate': 'PCPU:1&required=!HW_CPU_HYPERTHREADING,!%s' % DISABLED,
    'dedicated': 'PCPU:1&required=!%s' % DISABLED,
    'shared': 'VCPU:1&required=!%s' % DISABLED,
}


def flavor(target, name, extra_specs):
    """A one-CPU flavor, created on first use."""
    flavors = target.compute('GET', '/flavors')['flavors']
    for existing in flavors:
        if existing['name'] == name:
            return existing['id']
    flavor_id = target.compute('POST', '/flavors', {'flavor': {
        'name': name, 'ram': RAM, 'vcpus': 1, 'disk': DISK}})['flavor']['id']
    if extra_specs:
        target.compute('POST', '/flavors/%s/os-extra_specs' % flavor_id,
                       {'extra_specs': extra_specs})
    return flavor_id


def boot(target, flavor_id, host=None, name='drill'):
    """The new server's id; its request id is kept in the target.

    On ``host`` if given (admin, microversion 2.74), else where the
    scheduler chooses.
    """
    body = {'name': name, 'imageRef': target.image_id,
            'flavorRef': flavor_id, 'networks': 'none'}
    if host:
        body['host'] = host
    response = target.conn.compute.request(
        '/servers', 'POST', microversion='2.74' if host else '2.53',
        raise_exc=True, json={'server': body})
    server_id = response.json()['server']['id']
    target.request_ids[server_id] = response.headers[
        'x-openstack-request-id']
    return server_id


def wait_for_servers(target, server_ids, timeout):
    """{id: server} once each is ACTIVE or ERROR (or at ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        servers = {s['id']: s for s in target.compute(
            'GET', '/servers/detail?all_tenants=1')['servers']
            if s['id'] in server_ids}
        if time.monotonic() > deadline or all(
                s['status'] in ('ACTIVE', 'ERROR')
                for s in servers.values()):
            return servers
        time.sleep(1)


def delete_servers(target, server_ids, timeout=120):
    for server_id in server_ids:
        target.compute('DELETE', '/servers/%s' % server_id)
    _wait(lambda: not [s for s in target.compute(
        'GET', '/servers?all_tenants=1')['servers']
        if s['id'] in server_ids], timeout)


def boot_storm(target, count):
    """Boot ``count`` mixed servers as fast as the API takes them."""
    kinds = (['isolate', 'dedicated'] * (count // 4) +
             ['shared'] * (count - count // 4 * 2))
    random.Random(SEED).shuffle(kinds)
    flavors = {kind: flavor(target, 'drill-' + kind, specs)
               for kind, specs in KINDS.items()}
    target.compute('PUT', '/os-quota-sets/%s' % target.conn.current_project_id,
                   {'quota_set': {'instances': -1, 'cores': -1, 'ram': -1}})
    window = LogWindow([target.log('placement')])
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(lambda kind: boot(target, flavors[kind]), kinds))
    servers = wait_for_servers(target, ids, 600)
    records = [r for r in window.records() if '/allocation_candidates' in r]
    room = {kind: has_room(target, kind) for kind in KINDS}
    outcomes = collections.Counter()
    on_vcpu = mismatched = 0
    anomalies, placed = [], collections.Counter()
    queries = collections.Counter()
    for server_id, kind in zip(ids, kinds):
        server = servers[server_id]
        placed['%s %s on %s' % (kind, server['status'], server.get(
            'OS-EXT-SRV-ATTR:host'))] += 1
        if server['status'] == 'ACTIVE':
            outcomes['ACTIVE'] += 1
        elif NO_VALID_HOST.search(server.get('fault', {}).get('message', '')):
            outcomes['No valid host'] += 1
            outcomes['refused with room'] += room[kind]
        else:
            outcomes['other'] += 1
            anomalies.append('%s %s: %s' % (kind, server['status'], server.get(
                'fault', {}).get('message')))
        resources = target.placement('/allocations/%s' % server_id)[
            'allocations']
        held = collections.Counter()
        for allocation in resources.values():
            held.update(allocation['resources'])
        if not matches_flavor(kind, server['status'], held):
            mismatched += 1
            anomalies.append('%s %s: holds %s' % (kind, server['status'],
                                                  dict(held)))
        if kind == 'isolate':
            on_vcpu += 'VCPU' in held
            request_id = target.request_ids[server_id]
            queries[sum(request_id in r for r in records)] += 1
    delete_servers(target, ids)
    return {
        'servers ACTIVE': outcomes['ACTIVE'],
        'servers with No valid host': outcomes['No valid host'],
        'of them with room left for their kind': outcomes['refused with room'],
        'servers ending otherwise': outcomes['other'],
        'where they went': dict(placed),
        'anomalies': anomalies,
        'isolate servers on VCPU': on_vcpu,
        'allocations not matching the flavor': mismatched,
        'placement queries per isolate request': ', '.join(
            '%d (x%d)' % item for item in sorted(queries.items())),
    }


def holdings(target, consumer):
    """{provider uuid: {resource class: amount}} of ``consumer``."""
    return {uuid: allocation['resources'] for uuid, allocation in
            target.placement('/allocations/%s' % consumer)[
                'allocations'].items()}


def has_room(target, kind):
    """Whether an enabled new-style host has room for a ``kind`` server.

    Asked once the storm has settled: servers only took room meanwhile, so
    room left now was there when any of them was refused. Legacy hosts
    (no PCPU inventory) are left out: their room for a pinned or a shared
    server is Nova's NUMA fit, which placement does not know.
    """
    answer = target.placement(
        '/allocation_candidates?resources=MEMORY_MB:%d,DISK_GB:%d,%s' % (
            RAM, DISK, ROOM[kind]), microversion='1.27')
    return any('PCPU' in summary['resources']
               for summary in answer['provider_summaries'].values())


def matches_flavor(kind, status, held):
    """One CPU, the flavor's memory and disk; nothing if not ACTIVE.

    A pinned server may hold VCPU: the fallback query places it on a
    legacy (vcpu_pin_set) host, which the isolate figure counts apart.
    """
    if status != 'ACTIVE':
        return not held
    cpus = ({'VCPU': 1},) if kind == 'shared' else ({'PCPU': 1}, {'VCPU': 1})
    return any(dict(held) == dict(c, MEMORY_MB=RAM, DISK_GB=DISK)
               for c in cpus)


# Drill 6 ------------------------------------------------------------------

#: (service, section, option, invalid value); the short form tries the
#: first four.
BAD_OPTIONS = (
    ('compute-ht', 'pcpu_ext', 'report_client', 'no_such_client'),
    ('compute-ht', 'DEFAULT', 'cpu_allocation_ratio', '-1'),
    ('nova-scheduler', 'pcpu_ext', 'request_filters', 'no_such_filter'),
    ('compute-ht', 'pcpu_ext', 'isolate_fallback_mode', 'sometimes'),
    ('compute-ht', 'pcpu_ext', 'resource_tracker_mixins', 'no_such_mixin'),
    ('compute-ht', 'pcpu_ext', 'provider_lock_warn_seconds', '-1'),
    ('compute-ht', 'DEFAULT', 'ram_allocation_ratio', 'lots'),
    ('compute-ht', 'DEFAULT', 'disk_allocation_ratio', 'nan'),
    ('compute-ht', 'DEFAULT', 'initial_cpu_allocation_ratio', 'inf'),
    ('compute-ht', 'DEFAULT', 'initial_ram_allocation_ratio', '-0.5'),
    ('compute-ht', 'DEFAULT', 'initial_disk_allocation_ratio', 'many'),
)
STARTED = re.compile(r'Starting \S+ node')


def bad_config(target, options):
    """Start services with one invalid option each, then restore them.

    The services stop first; then every option is tried at once, each in
    a process of its own.
    """
    services = sorted({target.deployment.service(o[0]) for o in options})
    target.procs.stop(*services)
    try:
        with concurrent.futures.ThreadPoolExecutor(len(options)) as pool:
            outcomes = dict(zip([o[2] for o in options], pool.map(
                lambda o: start_with(target, *o), options)))
    finally:
        restored = time.time()
        for service in services:
            target.procs.start_again(service)
    back = _wait(lambda: all(
        _epoch(s['updated_at']) > restored
        for s in target.compute('GET', '/os-services')['services']
        if s['host'] == 'ht' or s['binary'] == 'nova-scheduler'), 120)
    one_line = [o for o, outcome in outcomes.items()
                if outcome == 'stopped, one line']
    return {
        'stopped with one line naming option and value': '%d of %d' % (
            len(one_line), len(options)),
        'outcomes': outcomes,
        'other computes alive': target.computes_alive(),
        'back after restoring (s)': back,
    }


def start_with(target, service, section, option, value):
    """Start the stopped ``service`` with ``option = value``; its fate."""
    name = target.deployment.service(service)
    argv, env, cwd = target.procs.commands[name]
    trial = 'drill-%s-%s' % (name, option)
    log = target.procs.log_path(trial)
    # A last config file overrides the service's own.
    override = os.path.join(target.procs.log_dir, trial + '.conf')
    sections = {'DEFAULT': {'log_file': log}}
    sections.setdefault(section, {})[option] = value
    deploy.write_conf(override, sections)
    if os.path.exists(log):
        os.unlink(log)
    argv = [log if i and argv[i - 1] == '--log-file' else arg
            for i, arg in enumerate(argv)] + ['--config-file', override]
    target.procs.start(trial, argv, env=env, cwd=cwd)
    started_at = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and trial in target.procs.running():
        if started_at is None and STARTED.search(_read(log)):
            started_at = time.monotonic()
        if started_at and time.monotonic() - started_at > 5:
            break
        time.sleep(0.5)
    stopped = trial not in target.procs.running()
    target.procs.stop(trial)
    text = _read(log)
    errors = [r for r in logs.records(text.splitlines(True))
              if logs.is_error(r)]
    if not stopped:
        outcome = 'kept running'
    elif len(errors) == 1 and names(errors[0], option, value):
        outcome = 'stopped, one line'
    else:
        outcome = 'stopped, %d error records' % len(errors)
    if 'Traceback' in text:
        outcome += ', traceback logged'
    return outcome


def names(record, *words):
    """Whether ``record`` is one line whose message holds every word."""
    message = record.rstrip('\n').partition('] ')[2]
    return '\n' not in record.rstrip('\n') and all(
        re.search(r'(?<![\w.-])%s(?![\w.])' % re.escape(word), message)
        for word in words)


def _read(path):
    try:
        with open(path, errors='replace') as f:
            return f.read()
    except FileNotFoundError:
        return ''


# Drill 7 ------------------------------------------------------------------

#: Seconds a status change may take beyond provider_lock_timeout.
LOCK_TIMEOUT_MARGIN = 2
#: Records of the extension's status update waiting for its tree.
WAITED = re.compile(r'compute status update has waited|Compute status update '
                    r'of provider \S+ waited .* goes ahead without the lock')


def conductor_freeze(target, host='noht', seconds=20, tries=3):
    """:func:`freeze_once` until the freeze caught what it is for.

    That is the periodic update reading placement, and on the extension
    its status update waiting for the tree lock: a freeze that came too
    late (the update already past its conductor call) proves nothing and
    is tried again; ``tries`` that all miss on the extension are a defect.
    """
    for attempt in range(1, tries + 1):
        figures = freeze_once(target, host, seconds)
        if figures['periodic update caught reading placement'] and (
                figures['status update waited for the tree lock'] or
                not target.deployment.extension):
            break
    figures['freezes tried'] = attempt
    return figures


def freeze_once(target, host, seconds):
    """Disable a compute while its cell's conductor is frozen.

    The conductor's process group gets SIGSTOP just after ``host``'s
    periodic update read its allocations from placement: that update's
    next conductor call is its read of the service record, inside
    ``_update_to_placement`` (the extension's tree lock). Two seconds
    later ``host`` is disabled; after ``seconds`` the conductor gets
    SIGCONT and ``host`` is enabled again.
    """
    timeout = provider_lock_timeout(target, host)
    window = LogWindow([target.log('compute-' + host)])
    conductor = target.deployment.service(
        'nova-conductor-' + target.deployment.cell_of(host))
    read_placement = wait_for_allocations_read(target, host)
    target.procs.send_signal(conductor, signal.SIGSTOP)
    thaw = threading.Timer(seconds, target.procs.send_signal,
                           (conductor, signal.SIGCONT))
    thaw.start()
    try:
        time.sleep(2)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            call = pool.submit(target.set_disabled, host, True)
            in_placement = _wait(lambda: DISABLED in target.traits(host),
                                 seconds + 10)
            call_seconds = call.result()
        thaw.join()
    finally:
        # NOTE: at once if the drill failed: a frozen conductor would
        # stall every later drill.
        thaw.cancel()
        target.procs.send_signal(conductor, signal.SIGCONT)
    target.set_disabled(host, False)
    services = target.services()
    follow = _wait(lambda: all(
        (DISABLED in target.traits(h)) == (s['status'] == 'disabled')
        for h, s in services.items()), 30)
    return {
        'provider_lock_timeout (s)': timeout,
        'periodic update caught reading placement': read_placement,
        'status update waited for the tree lock': any(
            WAITED.search(r) for r in window.records()),
        'disable in placement after (s)': in_placement,
        'disable in placement by provider_lock_timeout + %d s' %
        LOCK_TIMEOUT_MARGIN: None if timeout is None else bool(
            timeout and in_placement is not None and
            in_placement <= timeout + LOCK_TIMEOUT_MARGIN),
        'disable call (s)': round(call_seconds, 1),
        'traits follow service status after thaw (s)': follow,
        'computes alive': target.computes_alive(),
    }


def provider_lock_timeout(target, host):
    """``host``'s [pcpu_ext] provider_lock_timeout; None on stock Nova."""
    if not target.deployment.extension:
        return None
    conf = cfg.ConfigOpts()
    pcpu_conf.register_opts(conf)
    path = deploy.conf_path_of(target.deployment.dir, host)
    conf(['--config-file', path], default_config_files=[],
         default_config_dirs=[])
    return conf.pcpu_ext.provider_lock_timeout


def wait_for_allocations_read(target, host, timeout=10):
    """Until ``host``'s compute reads its allocations; whether it did.

    Placement logs each request as it answers; the file is read every
    5 ms to catch the update before its conductor call.
    """
    needle = '"GET /resource_providers/%s/allocations"' % (
        target.providers[host])
    with open(target.log('placement'), errors='replace') as f:
        f.seek(0, os.SEEK_END)
        deadline, text = time.monotonic() + timeout, ''
        while time.monotonic() < deadline:
            text = text[-len(needle):] + f.read()
            if needle in text:
                return True
            time.sleep(0.005)
    return False


# Drill 8 ------------------------------------------------------------------

#: The cell whose database server the drill stops, and its compute.
DOWN_CELL, DOWN_HOST = 'cell2', 'cell2-ht'
#: Servers booted while it is down.
BOOTS_WHILE_DOWN = 4


def cell_database_down(targets):
    """Stop cell2's database server a while; start it again.

    Under every deployment, while servers boot and the operator commands
    run. Before: a server on cell2's compute and the upgrade check's exit
    code. While down: boots, which must go to cell1, and the commands,
    which must say that cell2 alone is down. Once back: that server and
    placement's inventories and traits as they were, and the upgrade
    check's exit code as before.
    """
    before = on_each(targets, before_cell_down)
    procs = targets[0].procs
    procs.stop(deploy.CELL2_SERVER)
    try:
        during = on_each(targets, while_cell_down)
    finally:
        procs.start_again(deploy.CELL2_SERVER)
        targets[0].deployment.cell_servers[DOWN_CELL].wait()
    back = time.time()
    return on_each(targets, lambda target: after_cell_back(
        target, before[target.name], during[target.name], back))


def before_cell_down(target):
    server_id = boot(target, flavor(target, 'drill-shared', {}), DOWN_HOST)
    status = wait_for_servers(target, [server_id], 120)[server_id]['status']
    return {'server': server_id, 'status': status,
            'allocations': holdings(target, server_id),
            'providers': target.provider_state(),
            'check': target.deployment.upgrade_check()[0]}


def while_cell_down(target):
    """Boot in cell1 while the upgrade check and heal's dry run run."""
    deployment = target.deployment
    flavor_id = flavor(target, 'drill-shared', {})
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        checked = pool.submit(deployment.upgrade_check)
        dry_run = pool.submit(deployment.heal_isolate, '--dry-run')
        ids = [boot(target, flavor_id) for _ in range(BOOTS_WHILE_DOWN)]
        servers = wait_for_servers(target, ids, 300)
        (check_code, check), (heal_code, rows) = (checked.result(),
                                                  dry_run.result())
    cell1 = {c.host for c in deployment.computes if c.cell == 'cell1'}
    cells = {c['cell']: c for c in check['cells']}
    hosts = collections.Counter(c.cell for c in deployment.computes)
    reported = ', '.join('%s %s, %s hosts' % (name, c['state'], c['hosts'])
                         for name, c in sorted(cells.items()))
    deployed = ', '.join('%s %s, %d hosts' % (
        cell, 'down' if cell == DOWN_CELL else 'up', hosts[cell])
        for cell in deploy.CELLS)
    return {'ids': ids, 'check': check_code, 'figures': {
        'servers booted meanwhile, ACTIVE in cell1': '%d of %d' % (sum(
            s['status'] == 'ACTIVE' and s['OS-EXT-SRV-ATTR:host'] in cell1
            for s in servers.values()), len(ids)),
        'upgrade check: cells as deployed': reported == deployed,
        'cells: reported, deployed': [reported, deployed],
        'upgrade check: why cell2 is down': cells.get(DOWN_CELL, {}).get(
            'reason'),
        'heal dry run exit code': heal_code,
        'heal dry run: servers not judged': ', '.join(
            '%s on %s' % (r['cell'], r['from_host']) for r in rows
            if r['result'].startswith('not judged')),
        'heal dry run: other rows': len([
            r for r in rows if not r['result'].startswith('not judged')]),
    }}


def after_cell_back(target, before, during, back):
    server_id = before['server']
    reported = report_times(target, back, 150)[DOWN_HOST]
    servers = {s['id']: s for s in target.compute(
        'GET', '/servers/detail?all_tenants=1')['servers']}
    server = servers.get(server_id, {})
    as_before = (server.get('status'), server.get('OS-EXT-SRV-ATTR:host'),
                 holdings(target, server_id)) == (
        before['status'], DOWN_HOST, before['allocations'])
    state = target.provider_state()
    changed = sorted(host for host, held in before['providers'].items()
                     if state.get(host) != held)
    check_code = target.deployment.upgrade_check()[0]
    delete_servers(target, [server_id] + during['ids'])
    return dict(during['figures'], **{
        'upgrade check exit code: before, cell2 down, back': '%s, %s, %s' % (
            before['check'], during['check'], check_code),
        'cell2 compute reported again (s)': reported,
        'servers missing once cell2 is back': len(
            [i for i in [server_id] + during['ids'] if i not in servers]),
        'cell2 server as before': as_before,
        'hosts with other inventories or traits': len(changed),
        'hosts changed': changed,
    })


# Running them -------------------------------------------------------------

Check = collections.namedtuple('Check', 'drill figure requirement test')

#: What each figure must be on the extension deployment.
CHECKS = (
    Check('status storm', 'lost updates', '0', lambda v: v == 0),
    # Stock Nova's race: a periodic flush of an older snapshot puts the
    # trait back. How long service and trait disagree is reported only:
    # it is the API call's own time on a loaded machine.
    Check('status storm', 'changes undone in placement later', '0',
          lambda v: v == 0),
    Check('placement restart', 'converged after placement answered (s)',
          '<= %s' % PLACEMENT_CONVERGES, lambda v: v is not None and
          v <= PLACEMENT_CONVERGES),
    Check('placement restart', 'computes alive', 'True', lambda v: v),
    Check('placement restart',
          'compute error records per compute and second down', '<= 2',
          lambda v: v <= 2),
    Check('placement restart', 'compute error records after convergence',
          '0', lambda v: v == 0),
    Check('rabbitmq restart', 'all computes reported after restart (s)',
          'reported', lambda v: v is not None),
    Check('rabbitmq restart', 'disable in placement when the call returned',
          'True', lambda v: v),
    Check('rabbitmq restart', 'server booted after restart', 'ACTIVE',
          lambda v: v == 'ACTIVE'),
    Check('updates every second', 'every compute back (s)', 'back',
          lambda v: v is not None),
    Check('updates every second', 'computes alive', 'True', lambda v: v),
    Check('compute kill', 'converged after restart (s, start-up included)',
          'converged', lambda v: v is not None),
    Check('compute kill', 'lowest allocation ratio seen', '> 0',
          lambda v: v is not None and v > 0),
    Check('compute kill', 'duplicate or UUID-named providers', '0',
          lambda v: v == 0),
    Check('compute kill', 'computes alive', 'True', lambda v: v),
    # A refusal is judged only where placement still had room: the storm
    # fills the cloud on purpose, and ext refuses isolate servers that
    # only a hyperthreaded host could take.
    Check('boot storm', 'of them with room left for their kind', '0',
          lambda v: v == 0),
    Check('boot storm', 'servers ending otherwise', '0', lambda v: v == 0),
    Check('boot storm', 'isolate servers on VCPU', '0', lambda v: v == 0),
    Check('boot storm', 'allocations not matching the flavor', '0',
          lambda v: v == 0),
    Check('boot storm', 'placement queries per isolate request',
          'all 1', lambda v: re.fullmatch(r'1 \(x\d+\)', v) is not None),
    Check('bad config', 'stopped with one line naming option and value',
          'all', lambda v: v.split(' of ')[0] == v.split(' of ')[1]),
    Check('bad config', 'other computes alive', 'True', lambda v: v),
    Check('bad config', 'back after restoring (s)', 'back',
          lambda v: v is not None),
    Check('conductor freeze', 'status update waited for the tree lock',
          'True', lambda v: v),
    Check('conductor freeze', 'disable in placement by provider_lock_timeout '
          '+ %d s' % LOCK_TIMEOUT_MARGIN, 'True', lambda v: v),
    Check('conductor freeze', 'traits follow service status after thaw (s)',
          'converged', lambda v: v is not None),
    Check('conductor freeze', 'computes alive', 'True', lambda v: v),
    Check('cell database down', 'servers booted meanwhile, ACTIVE in cell1',
          'all', lambda v: v == '%d of %d' % (
              BOOTS_WHILE_DOWN, BOOTS_WHILE_DOWN)),
    # The exit code for a cell down, where no check fails; the same
    # verdict as before once the cell is back.
    Check('cell database down',
          'upgrade check exit code: before, cell2 down, back', 'x, 3, x',
          lambda v: v.split(', ')[1] == '3' and
          v.split(', ')[0] == v.split(', ')[2]),
    Check('cell database down', 'upgrade check: cells as deployed',
          'True', lambda v: v),
    Check('cell database down', 'upgrade check: why cell2 is down',
          'a reason', lambda v: bool(v)),
    Check('cell database down', 'heal dry run exit code', '4',
          lambda v: v == 4),
    Check('cell database down', 'heal dry run: servers not judged',
          '%s on %s' % (DOWN_CELL, DOWN_HOST),
          lambda v: v == '%s on %s' % (DOWN_CELL, DOWN_HOST)),
    Check('cell database down', 'heal dry run: other rows', '0',
          lambda v: v == 0),
    Check('cell database down', 'cell2 compute reported again (s)',
          'reported', lambda v: v is not None),
    Check('cell database down', 'servers missing once cell2 is back', '0',
          lambda v: v == 0),
    Check('cell database down', 'cell2 server as before', 'True',
          lambda v: v),
    Check('cell database down', 'hosts with other inventories or traits',
          '0', lambda v: v == 0),
)


def on_stock_too(mode):
    """Whether the drills of ``mode`` run on stock as well: the full form's.

    Stock's figures are shown, never judged.
    """
    return mode == 'full'


def drills(mode):
    """(name, function(targets)) in the order they run."""
    seconds, servers = SIZES[mode]
    chosen = [
        ('updates every second', lambda ts: on_each(
            ts, updates_every_interval)),
        ('status storm', lambda ts: on_each(ts, status_storm, seconds)),
        ('placement restart', lambda ts: on_each(ts, placement_restart)),
        ('rabbitmq restart', rabbitmq_restart),
        ('compute kill', lambda ts: on_each(ts, compute_kill)),
        ('boot storm', lambda ts: on_each(ts, boot_storm, servers)),
    ]
    # The short form leaves it out: test_console_scripts starts the
    # services with such options on every series.
    if mode == 'full':
        chosen.append(('bad config', lambda ts: on_each(
            ts, bad_config, BAD_OPTIONS)))
    chosen.append(('conductor freeze', lambda ts: on_each(
        ts, conductor_freeze)))
    chosen.append(('cell database down', cell_database_down))
    return chosen


def run(cloud, mode):
    """Every drill; {'rows': [...], 'seconds': {}}.

    On both deployments in the full form, the extension's in the short.

    ``retried_after_reset``: per drill and deployment, the drill's own
    requests sent again after a connection reset (see
    :class:`deploy.ResetRetry`); ``events``: ('drill NAME', '*', start,
    end) of each drill, for the log check.
    """
    targets = [Target(cloud, d) for d in cloud.deployments
               if d.extension or on_stock_too(mode)]
    figures, seconds, retried, events = {}, {}, {}, []
    for name, drill in drills(mode):
        start, began = time.monotonic(), time.time()
        before = {t.name: len(t.conn.retried) for t in targets}
        try:
            figures[name] = drill(targets)
        except Exception as error:
            figures[name] = {'ext': {'error': '%s: %s' % (
                type(error).__name__, error)}}
        seconds[name] = round(time.monotonic() - start, 1)
        progress.line('drill %s: %.0f s' % (name, seconds[name]))
        events.append(('drill ' + name, '*', began, time.time()))
        retried[name] = {t.name: len(t.conn.retried) - before[t.name]
                         for t in targets}
    return {'mode': mode, 'seconds': seconds, 'figures': figures,
            'retried_after_reset': retried, 'rows': rows(figures),
            'events': events}


def rows(figures):
    """One row per figure: drill, figure, stock, ext, requirement, ok."""
    checks = {(c.drill, c.figure): c for c in CHECKS}
    result = []
    for drill, by_target in figures.items():
        stock, ext = by_target.get('stock', {}), by_target.get('ext', {})
        for figure in dict.fromkeys(list(ext) + list(stock)):
            if isinstance(ext.get(figure, stock.get(figure)), (dict, list)):
                continue  # detail, in the JSON only
            check = checks.get((drill, figure))
            requirement, ok = '', None
            if check:
                requirement = check.requirement
                ok = figure in ext and bool(check.test(ext[figure]))
            elif figure == 'error':
                requirement, ok = 'no error', 'error' not in ext
            # The short form runs on the extension's deployment alone.
            result.append({'drill': drill, 'figure': figure,
                           'stock': stock.get(figure) if stock else 'not run',
                           'ext': ext.get(figure),
                           'requirement': requirement, 'ok': ok})
    missing = {(c.drill, c.figure) for c in CHECKS if c.drill in figures} - {
        (r['drill'], r['figure']) for r in result}
    result += [{'drill': d, 'figure': f, 'stock': None, 'ext': None,
                'requirement': 'measured', 'ok': False}
               for d, f in sorted(missing)]
    return result


def failures(results):
    return ['drill %(drill)s: %(figure)s is %(ext)s on ext, needs '
            '%(requirement)s' % row for row in results['rows']
            if row['ok'] is False]


def table(results):
    lines = ['%-18s %-46s %-14s %-14s %s' % (
        'drill', 'figure', 'stock', 'ext', 'ext needs')]
    for row in results['rows']:
        verdict = {True: 'met', False: 'NOT MET', None: ''}[row['ok']]
        lines.append('%-18s %-46s %-14s %-14s %s' % (
            row['drill'], row['figure'], row['stock'], row['ext'],
            ('%s: %s' % (row['requirement'], verdict)) if verdict else ''))
    lines.append('seconds per drill: %s' % results['seconds'])
    lines.append('requests retried after a connection reset: %s' %
                 results['retried_after_reset'])
    return '\n'.join(lines)
