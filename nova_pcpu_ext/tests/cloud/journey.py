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

"""The operator's journey, on the ``ext`` deployment.

It starts as stock Nova with servers and the two bugs' damage, is switched
on one service at a time while a load boots and deletes servers and
disables and enables computes, is repaired with the operator commands,
switched off again the same way and back on. Each step follows
doc/source/install/switching.rst ("Switching it on in a running cloud",
"Switching it off"), through the devstack plugin, and ends with the
extension active.
"""

import collections
import concurrent.futures
import contextlib
import functools
import itertools
import random
import re
import threading
import time

from nova_pcpu_ext import heal
from nova_pcpu_ext.tests.cloud import deploy
from nova_pcpu_ext.tests.cloud import drills
from nova_pcpu_ext.tests.cloud import processes
from nova_pcpu_ext.tests.cloud import progress
from nova_pcpu_ext.tests import grenade

HYPERTHREADING = 'HW_CPU_HYPERTHREADING'
#: {mode: seconds of load before and after the restarts of a step}
SIZES = {'short': 3, 'full': 60}
#: The series the journey's deployment starts on (Nova 31), and the
#: upgrades an operator makes from it: the SLURP jump to 2026.1, skipping
#: 2025.2, then 2026.2.
STARTS_ON = '2025.1'
UPGRADES = ('2026.1', '2026.2')
#: The configured VCPU ratio the ext computes write (Nova's initial 4.0).
VCPU_RATIO = 4.0
#: Seconds a restarted service has to be back.
BACK_TIMEOUT = 120
#: Computes restarted at once, in the first of two batches (the batches
#: of install/large-cloud.rst): the other batch serves boots meanwhile.
COMPUTE_BATCH = 2
#: The compute the grenade resources disable; the load leaves it alone.
GRENADE_DISABLED_HOST = 'ht'
#: Never disabled by the load: it has room for a server of every kind, so
#: that every boot has a host (the journey requires no No valid host).
ALWAYS_ENABLED_HOST = 'noht'
#: The cloud's past: ``ht`` was born under Nova's defaults before 2023.1,
#: an operator set ``legacy-ht``'s VCPU ratio through placement, and
#: ``noht`` holds 0.0 (bug 1789654; deploy.COMPUTES).
BORN_BEFORE_2023_1 = 'ht'
SET_THROUGH_PLACEMENT = ('legacy-ht', 'VCPU', 8.0)
ZERO_RATIO = ('noht', 'VCPU')
RATED = ('VCPU', 'MEMORY_MB', 'DISK_GB')
#: The upgrade checks of the isolate servers.
ON_HYPERTHREADED_HOSTS = ('Servers that forbid hyperthreads on '
                          'hyperthreaded hosts')
HARDLY_MOVE = 'Servers that forbid hyperthreads and can hardly move'
#: The upgrade check of what the request filter's mode costs legacy hosts:
#: the cloud runs drop, and legacy-ht stays a legacy host.
LEGACY_HOSTS = 'Legacy hosts and the isolate fallback mode'
#: What stays not passed once the victim is healed: legacy-ht's warnings.
LEGACY_WARNINGS = [LEGACY_HOSTS, HARDLY_MOVE]


class Load:
    """Boots and deletes servers, disables and enables computes.

    Two threads until :meth:`stop`: one boots a server of each kind in
    turn, waits for it and deletes it; one disables a compute and enables
    it again. Every API error and every server not ACTIVE is recorded; a
    server that ends in ERROR while a service restarts (``restarts``:
    [start, end or None while it lasts, the host or service] of each) is
    counted apart. While :meth:`paused`, neither starts anything.
    """

    def __init__(self, target, flavors, hosts, restarts):
        self.target = target
        self.flavors = flavors
        self.hosts = hosts
        self.restarts = restarts
        self.rng = random.Random(drills.SEED)
        self.kinds = itertools.cycle(flavors)
        self.stopped = threading.Event()
        self.resumed = threading.Event()
        self.resumed.set()
        self.scheduler_has_extension = False
        self.outcomes = collections.Counter()
        self.api_errors, self.anomalies, self.restarted = [], [], []
        self.turns = [threading.Lock(), threading.Lock()]
        self.threads = [threading.Thread(target=self._guard, args=args)
                        for args in zip((self._boot, self._status_change),
                                        self.turns)]

    def start(self):
        for thread in self.threads:
            thread.start()
        return self

    def booted(self):
        """Servers booted so far, whatever became of them."""
        return sum(self.outcomes[outcome] for outcome in (
            'ACTIVE', 'No valid host', 'restart', 'other'))

    def stop(self):
        self.stopped.set()
        for thread in self.threads:
            thread.join()
        figures = {
            'servers booted': self.booted(),
            'servers ACTIVE': self.outcomes['ACTIVE'],
            'servers with No valid host': self.outcomes['No valid host'],
            'servers in ERROR while a service restarted': self.outcomes[
                'restart'],
            'servers ending otherwise': self.outcomes['other'],
            'status changes': self.outcomes['status change'],
            'API errors': len(self.api_errors),
            'anomalies': self.anomalies + self.api_errors,
            'servers in ERROR while a service restarted, and why':
                self.restarted,
        }
        return figures

    @contextlib.contextmanager
    def paused(self):
        """Nothing new starts meanwhile; what is in flight ends first."""
        self.resumed.clear()
        for turn in self.turns:
            turn.acquire()
        try:
            yield
        finally:
            for turn in self.turns:
                turn.release()
            self.resumed.set()

    def _guard(self, function, turn):
        while not self.stopped.is_set():
            # A thread taking its turn again at once would starve paused().
            self.resumed.wait()
            with turn:
                try:
                    function()
                except Exception as error:
                    self.api_errors.append('%s: %s: %s' % (
                        function.__name__, type(error).__name__, error))
                    time.sleep(1)

    def _boot(self):
        kind = next(self.kinds)
        scheduled_by_extension = self.scheduler_has_extension
        booted = time.time()
        server_id = drills.boot(self.target, self.flavors[kind])
        host = None
        try:
            server = drills.wait_for_servers(
                self.target, [server_id], 120)[server_id]
            host = server.get('OS-EXT-SRV-ATTR:host')
            # Judged only if the extension's scheduler ran throughout.
            self._judge(kind, server, scheduled_by_extension and
                        self.scheduler_has_extension, (booted, time.time()))
        finally:
            drills.delete_servers(self.target, [server_id])
            # A compute that finishes a deletion as it starts again frees
            # the server's allocation before its record shows the CPUs
            # unpinned, which it writes before it answers calls: a boot
            # meanwhile finds no room in NUMATopologyFilter that placement
            # offers, in stock Nova as with the extension.
            drills._wait(lambda: not any(
                end is None and restarted == host
                for _start, end, restarted in self.restarts), BACK_TIMEOUT)

    def _judge(self, kind, server, scheduled_by_extension, lifetime):
        fault = server.get('fault', {}).get('message', '')
        what = '%s %s %s: %s' % (kind, server['id'], server['status'], fault)
        held = drills.holdings(self.target, server['id'])
        if server['status'] == 'ACTIVE':
            self.outcomes['ACTIVE'] += 1
        elif drills.NO_VALID_HOST.search(fault):
            self.outcomes['No valid host'] += 1
        elif any(start <= lifetime[1] and lifetime[0] <= (end or time.time())
                 for start, end, _restarted in self.restarts):
            # A boot in flight when the scheduler or a compute stops:
            # its reply lost (MessagingTimeout), or its build interrupted
            # and errored at the compute's start; its allocation stays
            # until it is deleted, as Nova leaves it.
            self.outcomes['restart'] += 1
            self.restarted.append(what)
            return
        else:
            self.outcomes['other'] += 1
            self.anomalies.append(what)
        if not drills.matches_flavor(kind, server['status'], held_sum(held)):
            self.anomalies.append('%s holds %s' % (what, held))
        if kind == 'isolate' and scheduled_by_extension and (
                on_hyperthreaded_host(self.target, held)):
            self.anomalies.append('isolate server %s on a hyperthreaded '
                                  'host' % server['id'])

    def _status_change(self):
        host = self.rng.choice(self.hosts)
        try:
            self.target.set_disabled(host, True)
            self.outcomes['status change'] += 1
            self.stopped.wait(self.rng.uniform(0.5, 2))
        finally:
            self.target.set_disabled(host, False)
            self.outcomes['status change'] += 1
        self.stopped.wait(self.rng.uniform(0.5, 2))


def on_hyperthreaded_host(target, holding):
    """Whether ``holding`` has resources of a hyperthreaded provider."""
    return any(HYPERTHREADING in target.placement(
        '/resource_providers/%s/traits' % uuid)['traits'] for uuid in holding)


def slowest(back_in):
    """The longest of ``{service: seconds until back}``; None if one is not."""
    return None if None in back_in.values() else max(back_in.values())


def results(checks):
    """{check name: result} of an upgrade check's checks."""
    return {name: result for name, (result, _) in checks.items()}


def not_passed(checks):
    """Names of the upgrade checks that did not pass, sorted."""
    return sorted(name for name, (result, _) in checks.items() if result)


def nova_not_passed(table):
    """Names of the checks not passed in nova-status's table, sorted.

    nova-status prints a table only: "| Check: NAME |", then "| Result:
    RESULT |" for each.
    """
    cells = re.findall(r'^\| (Check|Result): (.*?) *\|$', table, re.M)
    return sorted(name for (_, name), (_, result) in zip(cells[::2],
                                                         cells[1::2])
                  if result != 'Success')


def held_sum(holding):
    held = collections.Counter()
    for resources in holding.values():
        held.update(resources)
    return held


class Journey:

    def __init__(self, cloud, mode):
        self.cloud = cloud
        self.deployment = cloud.deployments[-1]
        self.target = drills.Target(cloud, self.deployment)
        self.load_seconds = SIZES[mode]
        self.flavors = {kind: drills.flavor(self.target, 'drill-' + kind,
                                            specs)
                        for kind, specs in drills.KINDS.items()}
        self.workload = {}  # {server id: kind}
        # Isolate servers on VCPU of a new-style hyperthreaded host (the
        # bug's victims) and of a legacy one (isolated as Nova means it).
        self.victim_ids, self.legacy_ids = [], []
        self.legacy_places = {}  # {server id: as seeded}
        self.past_ratios = {}  # {host: {resource class: ratio}} as seeded
        self.steps, self.seconds = {}, {}
        # Processes of this deployment that ran stock Nova: the log check
        # judges their records as stock's.
        self.stock_pids = set()
        # [start, end or None, the host or service] of each restart
        self.restarts = []
        # (start, end) in which some service ran stock Nova.
        self.stock_windows = [[time.time(), None]]

    # What an operator runs ------------------------------------------------

    def upgrade_check(self):
        """(exit code, {check name: (result, details)})."""
        code, out = self.deployment.upgrade_check()
        return code, {c['check']: (c['result'], c['details'])
                      for c in out['checks']}

    def heal(self, *options):
        return self.deployment.heal_isolate(*options)

    # The state of the cloud -----------------------------------------------

    def servers(self):
        """{id: (status, host)} of the workload."""
        return {s['id']: (s['status'], s.get('OS-EXT-SRV-ATTR:host'))
                for s in self.target.compute(
                    'GET', '/servers/detail?all_tenants=1')['servers']
                if s['id'] in self.workload}

    def inconsistencies(self):
        """What placement holds that does not match the servers."""
        servers = {s['id']: s for s in self.target.compute(
            'GET', '/servers/detail?all_tenants=1')['servers']}
        found = []
        for server_id, kind in self.workload.items():
            server = servers.get(server_id)
            held = held_sum(drills.holdings(self.target, server_id))
            if server is None:
                found.append('server %s is gone' % server_id)
            elif not drills.matches_flavor(kind, 'ACTIVE', held):
                found.append('%s %s holds %s' % (kind, server_id,
                                                 dict(held)))
        for host, uuid in self.target.providers.items():
            consumers = self.target.placement(
                '/resource_providers/%s/allocations' % uuid)['allocations']
            found += ['%s: allocation of %s, which is no server' % (host, c)
                      for c in consumers if c not in servers]
        return found

    def lost_status_changes(self):
        """Hosts whose trait disagrees with their service, after a settle."""
        def disagreeing():
            services = self.target.services()
            return sorted(host for host in self.target.providers if (
                services[host]['status'] == 'disabled') != (
                drills.DISABLED in self.target.traits(host)))
        drills._wait(lambda: not disagreeing(), 5 * deploy.UPDATE_INTERVAL)
        return disagreeing()

    def ratio(self, host, resource_class='VCPU'):
        return self.ratios()[host][resource_class]

    def ratios(self):
        """{host: {resource class: allocation ratio}} in placement."""
        return {host: {rc: inventory['allocation_ratio'] for rc, inventory
                       in self.target.placement(
                           '/resource_providers/%s/inventories' % uuid)[
                           'inventories'].items() if rc in RATED}
                for host, uuid in self.target.providers.items()}

    def ratios_changed(self):
        """Ratios not as the cloud's past left them, but the 0.0 repaired."""
        expected = {host: dict(ratios)
                    for host, ratios in self.past_ratios.items()}
        host, rc = ZERO_RATIO
        expected[host][rc] = VCPU_RATIO
        return sorted('%s %s %s -> %s' % (host, rc, expected[host].get(rc),
                                          ratio)
                      for host, ratios in self.ratios().items()
                      for rc, ratio in ratios.items()
                      if expected.get(host, {}).get(rc) != ratio)

    def set_ratios_through_placement(self, host, ratios):
        """As ``openstack resource provider inventory class set`` does."""
        path = '/resource_providers/%s/inventories' % (
            self.target.providers[host])
        inventories = self.target.placement(path)
        for rc, ratio in ratios.items():
            inventories['inventories'][rc]['allocation_ratio'] = ratio
        self.target.conn.placement.put(path, json=inventories,
                                       microversion='1.26', raise_exc=True)

    # Restarts ---------------------------------------------------------------

    def back(self, service):
        """Whether a restarted ``service`` is back.

        A compute when it answers a call (its host's uptime); the
        scheduler, which takes none from the API, when its service record
        shows a report. The load's status changes change a compute's
        record too, so that cannot tell a compute's report.
        """
        if service == 'scheduler':
            (record,) = self.target.compute(
                'GET', '/os-services?binary=nova-scheduler')['services']
            return record['updated_at']
        return self.target.answers(service)

    def pids(self, service):
        group = self.target.procs.running().get(
            self.deployment.service(service))
        return {p.pid for p in processes.process_table() if p.pgid == group}

    def restart(self, on, name, service, start):
        """Stop ``service`` and ``start()`` it; seconds until it is back.

        ``on``: whether the extension is being switched on or off, or
        None if it stays on (an upgrade).
        """
        window = [time.time(), None, name]
        self.restarts.append(window)
        stock = self.pids(service)
        self.target.procs.stop(self.deployment.service(service))
        before = self.back(name) if name == 'scheduler' else None
        start()
        back = drills._wait(lambda: self.back(name) != before,
                            BACK_TIMEOUT)
        window[1] = time.time()
        if on is not None:
            self.stock_pids |= stock if on else self.pids(service)
        return back

    def services(self):
        """{name: (service, start)} of what is restarted."""
        services = {'scheduler': (
            'nova-scheduler', lambda: self.target.procs.start_again(
                self.deployment.service('nova-scheduler')))}
        for c in self.deployment.computes:
            services[c.host] = ('compute-' + c.host,
                                lambda c=c: self.deployment.start_compute(c))
        return services

    def roll(self, on, load=None):
        """Switch every service; seconds until each reports.

        On: the scheduler first, then the computes in two batches; off:
        the reverse. Also the seconds from noht's report until placement
        has its ratio.
        """
        self.deployment.switch_extension(on)
        if not on:
            self.stock_windows.append([time.time(), None])
        back_in, ratio_fixed = {}, None
        services = self.services()
        scheduler = {'scheduler': services.pop('scheduler')}
        batches = [scheduler] + self.batches(services)
        for batch in batches if on else batches[1:] + batches[:1]:
            if batch is scheduler and load:
                # From its stop on, a stock scheduler may take a request.
                load.scheduler_has_extension = False
            back_in.update(self.restart_together(on, batch))
            if batch is scheduler and load:
                load.scheduler_has_extension = on
            if on and 'noht' in batch:
                ratio_fixed = drills._wait(
                    lambda: self.ratio('noht') == VCPU_RATIO,
                    2 * deploy.UPDATE_INTERVAL)
        if on:
            self.stock_windows[-1][1] = time.time()
        return back_in, ratio_fixed

    @staticmethod
    def batches(computes):
        """The two batches of ``computes`` ({host: ...}), in their order."""
        hosts = list(computes)
        return [{host: computes[host] for host in batch}
                for batch in (hosts[:COMPUTE_BATCH], hosts[COMPUTE_BATCH:])]

    def all_at_once(self):
        """Switch every service on at once; seconds until each reports."""
        self.deployment.switch_extension(True)
        back_in = self.restart_together(True, self.services())
        self.stock_windows[-1][1] = time.time()
        return back_in

    def restart_together(self, on, services):
        """:meth:`restart` ``services`` ({name: (service, start)}) at once.

        Seconds until each is back.
        """
        with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
            futures = {name: pool.submit(self.restart, on, name, *service)
                       for name, service in services.items()}
            return {name: f.result() for name, f in futures.items()}

    def under_load(self, on):
        """:meth:`roll` under load, with what the load and the cloud saw."""
        before = self.servers()
        load = self.load()
        load.scheduler_has_extension = not on
        try:
            time.sleep(self.load_seconds)
            back_in, ratio_fixed = self.roll(on, load)
            time.sleep(self.load_seconds)
        finally:
            figures = load.stop()
        figures.update(self.after_restarts(before, back_in, figures))
        return figures, ratio_fixed

    def load(self):
        """A :class:`Load` started on the hosts it may disable."""
        return Load(self.target, self.flavors, sorted(
            set(self.target.providers) - {GRENADE_DISABLED_HOST,
                                          ALWAYS_ENABLED_HOST}),
            self.restarts).start()

    def after_restarts(self, before, back_in, load_figures):
        """What a step's restarts under load left.

        ``before``: :meth:`servers` before the step; ``back_in``: the
        seconds until each restarted service was back.
        """
        after = self.servers()
        return {
            'workload servers changed': sorted(
                '%s: %s -> %s' % (i, before[i], after.get(i))
                for i in before if after.get(i) != before[i]),
            'status changes lost': self.lost_status_changes(),
            'placement inconsistencies': self.inconsistencies(),
            'ratios changed': self.ratios_changed(),
            'seconds until each restarted service was back': back_in,
            'slowest return after a restart (s)': slowest(back_in),
            'servers in ERROR per restart': round(load_figures[
                'servers in ERROR while a service restarted'] / len(
                    back_in), 2),
        }

    # The steps --------------------------------------------------------------

    def without_late_check(self, seed):
        """``seed()`` with Nova's late check for bug 1889633 stripped.

        As clouds ran before Victoria's check: the scheduler and the
        new-style hyperthreaded compute restart together without it, and
        as they were afterwards.
        """
        scheduler = self.deployment.service('nova-scheduler')
        argv, env, _cwd = self.target.procs.commands[scheduler]
        release = self.deployment.releases['controllers']
        (ht,) = [c for c in self.deployment.computes if c.host == 'ht']

        def restart(stripped):
            strip = [release.python, '-m', 'nova_pcpu_ext.tests.late_check']
            start = self.target.procs.start
            self.restart_together(False, {
                'scheduler': ('nova-scheduler', lambda: start(
                    scheduler, (strip if stripped else []) + argv, env=env,
                    cwd=release.prefix)),
                'ht': ('compute-ht', lambda: self.deployment.start_compute(
                    ht, strip_late_check=stripped))})

        restart(stripped=True)
        try:
            return seed()
        finally:
            restart(stripped=False)

    def stock_with_damage(self):
        """Servers of every kind, and the two bugs' damage made certain."""
        self.target.compute(
            'PUT', '/os-quota-sets/%s' % self.target.conn.current_project_id,
            {'quota_set': {'instances': -1, 'cores': -1, 'ram': -1}})
        # ht's options were unset when the defaults changed; its ratios stay.
        deploy.unset_options(
            deploy.conf_path_of(self.deployment.dir, 'ht'), 'DEFAULT',
            deploy.INITIAL_RATIOS_BEFORE_2023_1)
        host, rc, ratio = SET_THROUGH_PLACEMENT
        self.set_ratios_through_placement(host, {rc: ratio})
        # A victim of the bug on VCPU of ht, the only core of its
        # cpu_dedicated_set pinned; isolate servers on legacy-ht, isolated
        # as Nova means it there; a dedicated one on noht, which keeps room
        # for the repair.
        plan = (('isolate', 'ht', None),
                ('isolate', 'legacy-ht', None),
                ('isolate', 'legacy-ht', 'os-stop'),
                ('dedicated', 'noht', 'pause'),
                ('shared', None, 'os-stop'), ('shared', None, 'pause'),
                ('shared', None, None))

        def seed():
            ids = [drills.boot(self.target, self.flavors[kind], host,
                               'journey')
                   for kind, host, _ in plan]
            return ids, drills.wait_for_servers(self.target, ids, 300)

        ids, servers = self.without_late_check(seed)
        self.workload = {i: kind for i, (kind, _, _) in zip(ids, plan)}
        self.victim_ids, self.legacy_ids = ids[:1], ids[1:3]
        actions = [(i, action, {'os-stop': 'SHUTOFF', 'pause': 'PAUSED'}[
            action]) for i, (_, _, action) in zip(ids, plan) if action]
        for server_id, action, _ in actions:
            self.target.compute('POST', '/servers/%s/action' % server_id,
                                {action: None})
        drills._wait(lambda: all(self.servers()[i][0] == status
                                 for i, _, status in actions), 120)
        self.past_ratios = self.ratios()
        self.legacy_places = self.places(self.legacy_ids)
        return {
            'workload': dict(collections.Counter(
                '%s %s' % (self.workload[i], status)
                for i, (status, _) in self.servers().items())),
            'isolate servers on VCPU of ht': self.on_vcpu_of(
                self.victim_ids, 'ht', servers),
            'isolate servers on VCPU of legacy-ht': self.on_vcpu_of(
                self.legacy_ids, 'legacy-ht', servers),
            'ht ratios (born before 2023.1)': self.past_ratios['ht'],
            'legacy-ht VCPU ratio (set through placement)':
                self.ratio('legacy-ht'),
            'noht VCPU allocation ratio': self.ratio('noht'),
        }

    def on_vcpu_of(self, server_ids, host, servers):
        return sum(servers[i]['OS-EXT-SRV-ATTR:host'] == host and
                   'VCPU' in held_sum(drills.holdings(self.target, i))
                   for i in server_ids)

    def places(self, server_ids):
        """{server id: (status, host, allocations)} of these servers."""
        statuses = self.servers()
        return {i: statuses[i] + (drills.holdings(self.target, i),)
                for i in server_ids}

    def before(self):
        code, checks = self.upgrade_check()
        dry_code, rows = self.heal('--dry-run')
        listed = {r['server']: r['result'] for r in rows}
        ratios = checks['Placement allocation ratios']
        victims = checks[ON_HYPERTHREADED_HOSTS]
        legacy = checks[HARDLY_MOVE]
        return {
            'upgrade check exit code': code,
            'upgrade check results': results(checks),
            'ratio 0.0 of noht reported': 'noht' in (ratios[1] or ''),
            'ratios to be changed': checks[
                'Allocation ratios to be changed'][0],
            'victims reported on ht': sum(
                '%s on ht' % i in (victims[1] or '') for i in self.victim_ids),
            'isolate servers reported on legacy-ht': sum(
                '%s on legacy-ht' % i in (legacy[1] or '')
                for i in self.legacy_ids),
            'heal --dry-run exit code': dry_code,
            'heal --dry-run rows': listed,
            'victims listed with a destination': sum(
                re.match(r'dry run: would .* \(room on \S+\)$',
                         listed.get(i, '')) is not None
                for i in self.victim_ids),
            'legacy servers listed as skipped': self.skipped_as_legacy(
                listed),
        }

    def skipped_as_legacy(self, listed):
        return sum(listed.get(i) == heal.LEGACY for i in self.legacy_ids)

    def rolling_enable(self):
        figures, ratio_fixed = self.under_load(on=True)
        figures['noht ratio fixed after its restart (s)'] = ratio_fixed
        return figures

    def repair(self):
        before = self.servers()
        code, rows = self.heal('--cold')
        again_code, again = self.heal()
        check_code, checks = self.upgrade_check()
        after = self.servers()
        placed = {}
        for server_id in self.victim_ids:
            holding = drills.holdings(self.target, server_id)
            placed[server_id] = (after[server_id][0], sorted(
                '%s:%s' % (rc, n) for resources in holding.values()
                for rc, n in resources.items() if 'CPU' in rc),
                on_hyperthreaded_host(self.target, holding))
        return {
            'heal exit code': code,
            'heal rows': {r['server']: r['result'] for r in rows},
            'victims healed': sum(
                status == before[i][0] and cpus == ['PCPU:1'] and not ht
                for i, (status, cpus, ht) in placed.items()),
            'where the victims are': placed,
            'legacy servers moved or changed': self.legacy_moved(),
            'second heal exit code, legacy rows, other rows': '%d, %d, %d' % (
                again_code, self.skipped_as_legacy(
                    {r['server']: r['result'] for r in again}),
                sum(r['server'] not in self.legacy_ids for r in again)),
            'upgrade check exit code': check_code,
            'upgrade check results': results(checks),
            'upgrade checks not passed': not_passed(checks),
            'placement inconsistencies': self.inconsistencies(),
            'ratios changed': self.ratios_changed(),
        }

    def legacy_moved(self):
        """Legacy isolate servers not as they were after the seeding."""
        now = self.places(self.legacy_ids)
        return sorted(i for i in self.legacy_ids
                      if now[i] != self.legacy_places[i])

    def rollback(self):
        figures, _ = self.under_load(on=False)
        code, checks = self.upgrade_check()
        figures.update({
            'upgrade check exit code': code,
            'upgrade check results': results(checks),
            'upgrade checks not passed': not_passed(checks),
        })
        return figures

    def back_on(self):
        before = self.servers()
        back_in = self.all_at_once()
        after = self.servers()
        return {
            'slowest return after a restart (s)': slowest(back_in),
            'workload servers changed': sorted(
                i for i in before if after.get(i) != before[i]),
            'placement inconsistencies': self.inconsistencies(),
            'status changes lost': self.lost_status_changes(),
            'ratios changed': self.ratios_changed(),
        }

    # Upgrades -------------------------------------------------------------

    def both_checks(self):
        """Exit code and checks not passed: nova-status's, the extension's."""
        nova_code, out = self.deployment.command('nova-status', 'upgrade',
                                                 'check')
        code, checks = self.upgrade_check()
        return nova_code, nova_not_passed(out), code, not_passed(checks)

    def versions(self):
        """What every part of the deployment runs, as a line."""
        releases = self.deployment.releases
        computes = sorted({releases[c.host].versions['nova']
                           for c in self.deployment.computes})
        return 'placement %s, controllers %s, computes %s' % (
            releases['placement'].versions['placement'],
            releases['controllers'].versions['nova'], ' and '.join(computes))

    def upgrade(self, series):
        """Upgrade to ``series`` under load, as install/upgrading.rst says.

        placement and the controllers first (their database migrations
        with the new release's tools), while the load pauses; then the
        computes in two batches, so that computes of the old release serve
        boots beside the new controllers and the new computes (one boot at
        least between the batches); the online data migrations last.
        """
        new = self.cloud.releases[series]
        nova_before, _, ext_before, _ = self.both_checks()
        before = self.servers()
        load = self.load()
        load.scheduler_has_extension = True
        back_in, services = {}, self.services()
        try:
            time.sleep(self.load_seconds)
            with load.paused():
                back_in['controllers'] = self.upgrade_controllers(new)
            del services['scheduler']
            first, second = self.batches(services)
            self.deployment.run_on(new, list(first))
            back_in.update(self.restart_together(None, first))
            # Computes of both releases serve boots: one ends at least
            # before the second batch restarts.
            booted = load.booted()
            drills._wait(lambda: load.booted() > booted, BACK_TIMEOUT)
            self.deployment.run_on(new, list(second))
            back_in.update(self.restart_together(None, second))
            mixed = load.booted() - booted
            self.deployment.manage('db', 'online_data_migrations')
            time.sleep(self.load_seconds)
        finally:
            figures = load.stop()
        (nova_after, nova_not_passed, ext_after,
         not_passed_after) = self.both_checks()
        figures.update(self.after_restarts(before, back_in, figures))
        figures.update({
            'versions': self.versions(),
            'servers booted while computes were of two releases': mixed,
            'nova-status upgrade check exit code before, after': '%d, %d' % (
                nova_before, nova_after),
            'nova-status checks not passed after': nova_not_passed,
            'extension upgrade check exit code before, after': '%d, %d' % (
                ext_before, ext_after),
            'extension upgrade checks not passed after': not_passed_after,
        })
        return figures

    def upgrade_controllers(self, release):
        """placement, then the Nova controllers, on ``release``.

        The seconds they were down. The computes stay on their release.
        """
        deployment, procs = self.deployment, self.target.procs
        window = [time.time(), None, 'controllers']
        self.restarts.append(window)
        start = time.monotonic()
        deployment.run_on(deployment.releases['controllers'], [
            c.host for c in deployment.computes])
        procs.stop(deployment.service('placement'))
        deployment.run_on(release, ['placement'])
        deployment.start_placement()  # placement-manage db sync first
        # Killed after 10 s: 2026.1's never exit on SIGTERM (their parent
        # processes wait for an RPC server they never started), and the
        # load pauses, so no request is in flight.
        procs.stop(*[deployment.service(name)
                     for name in deployment.controllers()], timeout=10)
        deployment.run_on(release, ['controllers'])
        deployment.manage('api_db', 'sync')
        deployment.sync_cell_databases()
        deployment.start_services()
        window[1] = time.time()
        return round(time.monotonic() - start, 1)

    def run(self):
        steps = [('stock with damage', self.stock_with_damage),
                 ('before', self.before),
                 ('rolling enable', self.rolling_enable),
                 ('repair', self.repair),
                 ('rollback', self.rollback),
                 ('back on', self.back_on)] + [
                     ('upgrade to ' + series,
                      functools.partial(self.upgrade, series))
                     for series in UPGRADES]
        for name, step in steps:
            start = time.monotonic()
            try:
                # grenade's resources span the rollback, back on and the
                # upgrades.
                created = self.grenade('create') if name == 'rollback' else 0
                self.steps[name] = step()
                if created != 0:
                    self.steps[name]['grenade resources created'] = created
                if name == steps[-1][0]:
                    self.steps[name]['grenade resources verified'] = (
                        self.grenade('verify'))
            except Exception as error:
                self.steps[name] = {'error': '%s: %s' % (
                    type(error).__name__, error)}
            self.seconds[name] = round(time.monotonic() - start, 1)
            progress.line('journey step %s: %.0f s' % (
                name, self.seconds[name]))
            if 'error' in self.steps[name]:
                break
        self.clean_up()
        return {'steps': self.steps, 'seconds': self.seconds,
                'rows': rows(self.steps),
                'stock_pids': sorted(self.stock_pids),
                'stock_windows': [(start, end or time.time())
                                  for start, end in self.stock_windows]}

    def grenade(self, phase):
        """True once resources.sh PHASE ran, or its error."""
        try:
            grenade.run_resources(
                phase, self.deployment.dir, self.cloud.os_env(),
                NOVA_PCPU_EXT_GRENADE_DISABLED_HOST=GRENADE_DISABLED_HOST,
                NOVA_PCPU_EXT_GRENADE_IMAGE=deploy.IMAGE_NAME)
        except Exception as error:
            return '%s: %s' % (type(error).__name__, error)
        return True

    def clean_up(self):
        """Leave room for tempest and the drills, and the ratios they expect.

        The operator sets the ratios of the cloud's past back through
        placement; the extension keeps them.
        """
        self.grenade('destroy')
        drills.delete_servers(self.target, list(self.workload))
        for host in (BORN_BEFORE_2023_1, SET_THROUGH_PLACEMENT[0]):
            self.set_ratios_through_placement(host, {
                'VCPU': VCPU_RATIO, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0})


# The verdict ------------------------------------------------------------

Check = collections.namedtuple('Check', 'step figure requirement test')


def _none(value):
    return not value


def _back(value):
    return value is not None


#: What every step that restarts services must show: nothing changed,
#: placement consistent, every service back.
AFTER_RESTARTS = (
    ('workload servers changed', 'none', _none),
    ('ratios changed', 'none', _none),
    ('placement inconsistencies', 'none', _none),
    ('status changes lost', 'none', _none),
    ('slowest return after a restart (s)', 'back', _back),
)
#: And those under load, in addition.
UNDER_LOAD = (
    ('servers with No valid host', '0', lambda v: v == 0),
    # One boot at a time: a restart ends at most the one in flight.
    ('servers in ERROR per restart', '<= 1', lambda v: v <= 1),
    ('servers ending otherwise', '0', lambda v: v == 0),
    ('API errors', '0', lambda v: v == 0),
    ('anomalies', 'none', _none),
)

CHECKS = (
    Check('stock with damage', 'isolate servers on VCPU of ht', '1',
          lambda v: v == 1),
    Check('stock with damage', 'isolate servers on VCPU of legacy-ht', '2',
          lambda v: v == 2),
    Check('stock with damage', 'ht ratios (born before 2023.1)',
          'VCPU 16.0, MEMORY_MB 1.5', lambda v: (
              v.get('VCPU'), v.get('MEMORY_MB')) == (16.0, 1.5)),
    Check('stock with damage', 'legacy-ht VCPU ratio (set through placement)',
          str(SET_THROUGH_PLACEMENT[2]),
          lambda v: v == SET_THROUGH_PLACEMENT[2]),
    Check('stock with damage', 'noht VCPU allocation ratio', '0.0',
          lambda v: v == 0.0),
    Check('before', 'upgrade check exit code', '2 (failures)',
          lambda v: v == 2),
    Check('before', 'ratio 0.0 of noht reported', 'True', lambda v: v),
    Check('before', 'ratios to be changed', '0 (none)', lambda v: v == 0),
    Check('before', 'victims reported on ht', '1', lambda v: v == 1),
    Check('before', 'isolate servers reported on legacy-ht', '2',
          lambda v: v == 2),
    Check('before', 'victims listed with a destination', '1',
          lambda v: v == 1),
    Check('before', 'legacy servers listed as skipped', '2',
          lambda v: v == 2),
    Check('rolling enable', 'noht ratio fixed after its restart (s)',
          '<= %s (one periodic update)' % (2 * deploy.UPDATE_INTERVAL), _back),
    Check('repair', 'victims healed', '1', lambda v: v == 1),
    Check('repair', 'heal exit code', '0', lambda v: v == 0),
    Check('repair', 'legacy servers moved or changed', 'none', _none),
    Check('repair', 'second heal exit code, legacy rows, other rows',
          '0, 2, 0', lambda v: v == '0, 2, 0'),
    Check('repair', 'upgrade check exit code', '1 (the legacy warnings)',
          lambda v: v == 1),
    Check('repair', 'upgrade checks not passed', ', '.join(LEGACY_WARNINGS),
          lambda v: v == LEGACY_WARNINGS),
    Check('repair', 'placement inconsistencies', 'none', _none),
    Check('repair', 'ratios changed', 'none', _none),
    Check('rollback', 'upgrade check exit code',
          '1 (request filter not active; the legacy warnings)',
          lambda v: v == 1),
    Check('rollback', 'upgrade checks not passed',
          ', '.join(['Configuration'] + LEGACY_WARNINGS),
          lambda v: v == ['Configuration'] + LEGACY_WARNINGS),
    Check('rollback', 'grenade resources created', 'True',
          lambda v: v is True),
    Check('upgrade to ' + UPGRADES[-1], 'grenade resources verified', 'True',
          lambda v: v is True),
) + tuple(Check(step, *check)
          for step in ('rolling enable', 'rollback', 'back on') + tuple(
              'upgrade to ' + series for series in UPGRADES)
          for check in AFTER_RESTARTS + (
              UNDER_LOAD if step != 'back on' else ())) + tuple(
    Check('upgrade to ' + series, *check) for series in UPGRADES
    for check in (
        ('nova-status upgrade check exit code before, after', '0, 0',
         lambda v: v == '0, 0'),
        ('nova-status checks not passed after', 'none', _none),
        # The legacy servers stay: their warning (exit 1) is all.
        ('extension upgrade check exit code before, after', '1, 1',
         lambda v: v == '1, 1'),
        ('extension upgrade checks not passed after',
         ', '.join(LEGACY_WARNINGS), lambda v: v == LEGACY_WARNINGS),
        ('servers booted while computes were of two releases', '>= 1',
         lambda v: v >= 1)))


def rows(steps):
    """One row per figure: step, figure, value, requirement, ok."""
    checks = {(c.step, c.figure): c for c in CHECKS}
    result = []
    for step, figures in steps.items():
        for figure, value in figures.items():
            check = checks.get((step, figure))
            if figure == 'error':
                result.append({'step': step, 'figure': figure,
                               'value': value, 'requirement': 'no error',
                               'ok': False})
            elif check or not isinstance(value, (dict, list)):
                result.append({
                    'step': step, 'figure': figure,
                    'value': _brief(value),
                    'requirement': check.requirement if check else '',
                    'ok': bool(check.test(value)) if check else None})
    seen = {(r['step'], r['figure']) for r in result}
    result += [{'step': c.step, 'figure': c.figure, 'value': None,
                'requirement': c.requirement, 'ok': False}
               for c in CHECKS if (c.step, c.figure) not in seen]
    return result


def _brief(value):
    """A list or dict as its length in the table; the JSON has it all."""
    return len(value) if isinstance(value, (dict, list)) else value


def failures(results):
    return ['journey %(step)s: %(figure)s is %(value)s, needs '
            '%(requirement)s' % row for row in results['rows']
            if row['ok'] is False]


def table(results):
    lines = ['%-18s %-48s %-12s %s' % ('step', 'figure', 'value', 'needs')]
    for row in results['rows']:
        verdict = {True: 'met', False: 'NOT MET', None: ''}[row['ok']]
        lines.append('%-18s %-48s %-12s %s' % (
            row['step'], row['figure'], row['value'],
            ('%s: %s' % (row['requirement'], verdict)) if verdict else ''))
    lines.append('seconds per step: %s' % results['seconds'])
    return '\n'.join(lines)


def run(cloud, mode):
    return Journey(cloud, mode).run()
