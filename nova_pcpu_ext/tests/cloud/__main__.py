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

"""A whole cloud on this machine: Nova with the extension, and with
``--stock`` stock Nova beside it. The extension's deployment goes through
the operator's journey (if asked) while tempest runs on stock, then
through the fault and load drills (stock too in their full form), and
tempest on the extension's once stock is stopped.

``python -m nova_pcpu_ext.tests.cloud [--no-libvirt] [--no-tempest]
[--stock] [--journey [short|full|none]] [--drills short|full|none]
[--keep | --stop] [--work-dir DIR]``; ``tox -e cloud`` and ``tox -e
cloud-periodic`` install what it needs first. Ends with ``results:
<json>``; exits 1 if a check failed.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import shutil
import signal
import sys
import threading
import time

from nova_pcpu_ext.tests.cloud import backing
from nova_pcpu_ext.tests.cloud import deploy
from nova_pcpu_ext.tests.cloud import drills
from nova_pcpu_ext.tests.cloud import journey
from nova_pcpu_ext.tests.cloud import logs
from nova_pcpu_ext.tests.cloud import processes
from nova_pcpu_ext.tests.cloud import progress
from nova_pcpu_ext.tests.cloud import releases
from nova_pcpu_ext.tests.cloud import tempest_run
from nova_pcpu_ext.tests import placement_server

DEPLOYMENTS = (('stock', False), ('ext', True))
# Stopped last, so that no service logs errors about those gone before.
STOP_LAST = ('keystone', 'rabbitmq', 'mariadb', deploy.CELL2_SERVER, 'epmd')
#: Seconds a Nova service has to exit at the end of a run, before it is
#: killed: nothing is judged by how it shuts down then, and Nova 2026.2's
#: libvirt compute in native threading does not finish its own shutdown
#: within the 30 s that the journey's and drills' restarts give it.
FINAL_STOP_SECONDS = 5


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='tox -e cloud --', description=(
        'Deploy stock Nova and Nova with nova-pcpu-ext on this machine and '
        'run tempest against both.'))
    parser.add_argument('--work-dir', default='.cloud',
                        help='Where pid files, logs, databases and results '
                             'go (default: %(default)s).')
    parser.add_argument('--no-libvirt', action='store_true',
                        help='Leave out the real-libvirt computes, for '
                             'machines that cannot run libvirtd.')
    parser.add_argument('--no-tempest', action='store_true',
                        help='Skip the tempest runs.')
    parser.add_argument('--stock', action='store_true',
                        help='Deploy stock Nova beside the extension, '
                             'to show that the project\'s tempest tests of '
                             'the bugs fail there and, in the full drills, '
                             'stock\'s figures beside the extension\'s.')
    parser.add_argument('--journey', nargs='?', const='short',
                        choices=('short', 'full', 'none'), default='none',
                        help='The operator\'s journey first: the extension '
                             'deployment starts as stock Nova with damage, '
                             'is switched on under load, repaired, switched '
                             'off and on again; short (as the periodic run '
                             'runs it), full (a minute of load around each '
                             'step\'s restarts) or none (default: '
                             '%(default)s).')
    parser.add_argument('--drills', choices=('short', 'full', 'none'),
                        default='short',
                        help='The fault and load drills to run after '
                             'tempest: the short form (a few minutes, as '
                             'the check run runs it), the full form (as '
                             'the periodic run does), or none (default: '
                             '%(default)s).')
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--keep', action='store_true',
                      help='Leave the extension deployment running and '
                           'print its openrc.')
    mode.add_argument('--stop', action='store_true',
                      help='Stop a cloud left running by --keep.')
    return parser.parse_args(argv)


class Phases:
    """Wall time of each phase of the run, and when it ran."""

    def __init__(self):
        self.seconds = {}
        self.windows = {}

    def __call__(self, name, function, *args):
        start, began = time.monotonic(), time.time()
        progress.line('%s: started' % name)
        try:
            return function(*args)
        finally:
            self.seconds[name] = round(time.monotonic() - start, 1)
            self.windows[name] = (began, time.time())
            progress.line('%s: %.0f s' % (name, self.seconds[name]))


class MemorySampler(threading.Thread):
    """Peak resident memory of the cloud's processes and guests."""

    def __init__(self, procs):
        super().__init__(daemon=True)
        self.procs = procs
        self.peak_mib = 0
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.wait(2):
            groups = set(self.procs.running().values())
            total = sum(processes.rss_kib(process.pid)
                        for process in processes.process_table()
                        if process.pgid in groups or
                        process.name.startswith('qemu-system'))
            self.peak_mib = max(self.peak_mib, total // 1024)


class Cloud:

    def __init__(self, args):
        self.args = args
        self.names = [name for name, _ in DEPLOYMENTS
                      if args.stock or name != 'stock']
        self.dir = os.path.abspath(args.work_dir)
        self.procs = processes.Processes(self.dir)

    def fresh(self):
        if self.procs.running():
            sys.exit('a cloud is running from %s: stop it with --stop' %
                     self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.procs = processes.Processes(self.dir)
        names = ['mariadb', deploy.CELL2_SERVER, 'rabbitmq', 'keystone',
                 'glance', 'network']
        for name in self.names:
            names += ['%s-placement' % name, '%s-nova-api' % name]
        self.ports = {name: placement_server.free_port() for name in names}

    def up(self, phases):
        self.db = backing.MariaDB(self.procs, self.dir, self.ports['mariadb'])
        self.cell2_db = backing.MariaDB(
            self.procs, self.dir, self.ports[deploy.CELL2_SERVER],
            deploy.CELL2_SERVER)
        self.rabbit = backing.RabbitMQ(self.procs, self.dir,
                                       self.ports['rabbitmq'])
        self.shared = deploy.SharedServices(self.procs, self.dir, self.db,
                                            self.ports)

        def identity_and_images():
            # One after the other: two mariadb-install-db at once failed
            # once (exit 1), just after the packages were installed.
            self.db.start()
            self.cell2_db.start()
            self.shared.start_keystone()
            self.shared.register(
                self.names,
                {name: 'http://127.0.0.1:%d' % self.ports[name + '-placement']
                 for name in self.names},
                {name: 'http://127.0.0.1:%d/v2.1' %
                 self.ports[name + '-nova-api'] for name in self.names})
            self.shared.start_glance()
            self.shared.start_network_standin()
            self.image_id = self.shared.upload_image()

        backing_services = [identity_and_images, self.rabbit.start]
        if self.args.journey != 'none':
            backing_services.append(self.build_releases)
        if not self.args.no_libvirt:
            libvirt = backing.Libvirt(self.procs, self.dir)
            backing_services.append(libvirt.start)
        phases('backing services', _together, backing_services)

        self.deployments = [
            deploy.NovaDeployment(
                name, extension, self.shared, self.rabbit,
                {'placement': self.ports[name + '-placement'],
                 'nova-api': self.ports[name + '-nova-api']},
                libvirt=not self.args.no_libvirt,
                cell_servers={'cell1': self.db, 'cell2': self.cell2_db})
            for name, extension in DEPLOYMENTS if name in self.names]
        # The journey switches the extension on itself, in a cloud with a
        # past, and upgrades it.
        if self.args.journey != 'none':
            self.deployments[-1].run_on(self.releases[journey.STARTS_ON])
            self.deployments[-1].extension = False
            self.deployments[-1].born_before_2023_1 = (
                journey.BORN_BEFORE_2023_1,)
        phases('nova deployments', _together,
               [lambda d=d: self.deploy(d) for d in self.deployments])

    def build_releases(self):
        """The virtualenv of each release the journey's deployment runs."""
        self.releases = {series: releases.build(series, self.dir)
                         for series in (journey.STARTS_ON,) + journey.UPGRADES}

    def deploy(self, deployment):
        deployment.start_placement()
        deployment.configure()
        deployment.start_services()
        deployment.start_computes()
        deployment.wait_for_computes()
        deployment.flavor_ids = deployment.create_flavors()

    def named(self, name):
        """The deployment ``name`` in a list, or an empty list."""
        return [d for d in self.deployments if d.name == name]

    def test(self, phases, deployments):
        results = {}
        if self.args.no_tempest:
            return results
        for deployment in deployments:
            results[deployment.name] = phases(
                'tempest ' + deployment.name, tempest_run.run, deployment,
                self.image_id, deployment.flavor_ids,
                not self.args.no_libvirt, self.dir)
        return results

    def check_swapped_compute(self):
        """kolla's health check finds its compute by the name nova-compute."""
        ext = self.deployments[-1]
        if deploy.KOLLA_SWAPPED not in {c.host for c in ext.computes}:
            return []
        name = ext.process_name('compute-' + deploy.KOLLA_SWAPPED)
        return [] if name == 'nova-compute' else [
            'the kolla-swapped compute runs as %r, not nova-compute' % name]

    def stop(self, keep=()):
        """Stop every process of the cloud except ``keep``.

        True if no other process of the cloud is left.
        """
        prefixes = [name + '-' for name, _ in DEPLOYMENTS
                    if not any(k.startswith(name + '-') for k in keep)]
        self._stop([n for n in self.procs.running() if n not in keep],
                   prefixes)
        return not [n for n in self.procs.running() if n not in keep]

    def stop_stock(self):
        """Stop stock's processes and guests, not the extension's."""
        self._stop([n for n in self.procs.running()
                    if n.startswith('stock-')], ['stock-'])

    def _stop(self, names, prefixes):
        """Stop ``names``, Nova's first, and the guests of ``prefixes``."""
        nova = [n for n in names if '-compute-' in n or '-nova-' in n]
        self.procs.stop(*nova, timeout=FINAL_STOP_SECONDS)
        if prefixes and backing.Libvirt.answers():
            # Guests outlive their compute: remove them before libvirtd.
            backing.Libvirt.destroy_domains(prefixes)
        rest = [n for n in names if n not in nova]
        self.procs.stop(*[n for n in rest if n not in STOP_LAST])
        for name in STOP_LAST:
            if name in rest:
                self.procs.stop(name)

    def os_env(self):
        """The admin's OS_* variables for the extension deployment."""
        return {'OS_AUTH_URL': self.shared.keystone_url,
                'OS_USERNAME': 'admin',
                'OS_PASSWORD': deploy.ADMIN_PASSWORD,
                'OS_PROJECT_NAME': 'admin',
                'OS_USER_DOMAIN_NAME': 'Default',
                'OS_PROJECT_DOMAIN_NAME': 'Default',
                'OS_REGION_NAME': DEPLOYMENTS[-1][0],
                'OS_IDENTITY_API_VERSION': '3'}

    def openrc(self):
        path = os.path.join(self.dir, 'openrc')
        with open(path, 'w') as f:
            f.write('export %s\n' % ' '.join(
                '%s=%s' % item for item in sorted(self.os_env().items())))
        return path


def _together(functions):
    """Run ``functions`` in threads; raise the first error."""
    with concurrent.futures.ThreadPoolExecutor(len(functions)) as pool:
        for future in [pool.submit(f) for f in functions]:
            future.result()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    cloud = Cloud(args)
    if args.stop:
        stopped = cloud.stop()
        print('cloud stopped' if stopped else 'processes left: %s' %
              cloud.procs.running())
        return 0 if stopped else 1

    # SIGTERM (and Ctrl-C) end the run through the same clean-up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit('terminated'))
    cloud.fresh()
    phases = Phases()
    sampler = MemorySampler(cloud.procs)
    sampler.start()
    results, failures, kept = {}, [], ()
    drill_results = journey_results = None
    try:
        phases('up', cloud.up, phases)
        # The journey changes the extension deployment only: tempest runs
        # on stock meanwhile.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            if args.journey != 'none':
                journeying = pool.submit(phases, 'journey', journey.run,
                                         cloud, args.journey)
            results = cloud.test(phases, cloud.named('stock'))
            # Once stock's part is done, its services would only slow the
            # extension's runs. The short drills judge the extension
            # alone: stock's figures are never judged.
            if cloud.named('stock') and not drills.on_stock_too(
                    args.drills):
                phases('stop stock', cloud.stop_stock)
            if args.journey != 'none':
                journey_results = journeying.result()
                failures += journey.failures(journey_results)
        if args.drills != 'none':
            drill_results = phases('drills', drills.run, cloud, args.drills)
            failures += drills.failures(drill_results)
        if cloud.named('stock') and drills.on_stock_too(args.drills):
            phases('stop stock', cloud.stop_stock)
        results.update(cloud.test(phases, cloud.named('ext')))
        if not args.no_tempest:
            failures += tempest_run.verdict(results, not args.no_libvirt,
                                            'stock' in cloud.names)
        failures += cloud.check_swapped_compute()
        if args.keep:
            kept = [n for n in cloud.procs.running()
                    if not n.startswith('stock-')]
    except Exception as error:
        failures.append('run: %s: %s' % (type(error).__name__, error))
    finally:
        sampler.stopped.set()
        if not phases('stop', cloud.stop, kept):
            failures.append('processes left running: %s' %
                            cloud.procs.running())

    events = [('stop of %s' % logs.owner(name)[1], logs.owner(name)[0],
               start, end) for name, start, end in cloud.procs.stops]
    events += drill_results['events'] if drill_results else []
    events += [('tempest', name.split()[1], start, end) for name, (
        start, end) in phases.windows.items() if name.startswith('tempest ')]
    lock_timeouts = logs.lock_timeouts(cloud.procs.log_dir)
    events += lock_timeouts
    unexpected, allowed = logs.unexpected_errors(
        cloud.procs.log_dir, *(
            (journey_results['stock_pids'], journey_results['stock_windows'])
            if journey_results else ((), ())), events=events)
    failures += ['log %s: %s' % entry for entry in unexpected[:30]]
    ext_services = ['ext-nova-scheduler.log'] + [
        'ext-compute-%s.log' % c.host for c in cloud.deployments[-1].computes
    ] if hasattr(cloud, 'deployments') else []
    failures += ['no activation lines in %s' % name for name in
                 logs.missing_activation(cloud.procs.log_dir, ext_services)]

    if journey_results:
        print(journey.table(journey_results))
    if results:
        print(tempest_run.table(results))
    if drill_results:
        print(drills.table(drill_results))
    summary = {
        'tempest': {name: {test_id: status for test_id, (status, _)
                           in tests.items()}
                    for name, tests in results.items()},
        'journey': journey_results,
        'drills': drill_results,
        'phases_s': phases.seconds,
        'peak_rss_mib': sampler.peak_mib,
        'allowlisted_log_lines': allowed,
        'lock_timeouts': lock_timeouts,
        'failures': failures,
    }
    path = os.path.join(cloud.dir, 'results.json')
    with open(path, 'w') as f:
        json.dump(summary, f, indent=2)
    print('phases (s): %s' % phases.seconds)
    print('peak RSS of the cloud: %d MiB' % sampler.peak_mib)
    print('status updates past provider_lock_timeout (informational): %s' %
          dict(collections.Counter(
              '%s-%s' % (deployment, name.split()[-1])
              for name, deployment, _, _ in lock_timeouts)))
    for failure in failures:
        print('FAILED: %s' % failure)
    if kept:
        print('extension deployment left running; source %s and use the '
              'openstack client; stop it with: tox -e cloud -- --stop' %
              cloud.openrc())
    print('results: %s' % path)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
