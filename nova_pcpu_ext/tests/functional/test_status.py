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

"""``nova-pcpu-ext-status upgrade check`` run as operators do."""

from nova_pcpu_ext.tests.functional import base  # noqa: F401  isort:skip

import collections
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import time
from unittest import mock
import uuid

import ddt
import fixtures
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from nova.api.openstack import api_version_request
from nova.tests import fixtures as nova_fixtures
import testtools

from nova_pcpu_ext import clients
from nova_pcpu_ext.cmd import common
from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext.tests.functional.base import DEDICATED
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests.functional.base import NO_HYPERTHREADS
from nova_pcpu_ext.tests.functional import operator_commands
from nova_pcpu_ext.tests.functional.operator_commands import ACTIVATED
from nova_pcpu_ext.tests.functional.operator_commands import Command
from nova_pcpu_ext.tests.functional.operator_commands import FaultyProxy
from nova_pcpu_ext.tests.functional import test_console_scripts
from nova_pcpu_ext.tests import placement_server
from nova_pcpu_ext.tests.placement_server import TOKEN

PROG = 'nova-pcpu-ext-status'
CHECKS = ('Configuration', 'Placement allocation ratios',
          'Allocation ratios to be changed',
          'Servers that forbid hyperthreads on hyperthreaded hosts',
          'Servers that forbid hyperthreads and can hardly move',
          'Legacy hosts and the isolate fallback mode')
LEGACY_HOSTS = CHECKS[5]
#: The legacy hosts check's result for a cloud without legacy hosts.
NO_LEGACY = (0, (
    "No legacy host: every compute node reports PCPU, so [pcpu_ext] "
    "isolate_fallback_mode = drop (the default) costs this cloud nothing, "
    "and so does Nova's own [workarounds] disable_fallback_pcpu_query = "
    "True, which drops the VCPU fallback query for every pinned request."))
LEGACY_ONLY = '[pcpu_ext]\nisolate_fallback_mode = legacy_only\n'
FILTER_OFF = '[pcpu_ext]\nrequest_filters =\n'
#: The details of the checks of the fallback mode without the filter.
JUDGED_AS_STOCK = (
    'The isolate_vcpu_fallback request filter is off in this nova.conf (not '
    'in [pcpu_ext] request_filters): judged as stock Nova schedules, its '
    'VCPU fallback query offering pinned requests, isolate ones included, '
    'every legacy host (no PCPU inventory). Run the check with the '
    'nova.conf that switches the filter on to see what its mode costs.')
#: Servers show the image properties Nova stored at boot (microversion
#: 2.98, from Nova 2025.1).
STORED_IMAGE_PROPERTIES = api_version_request.max_api_version() >= (
    api_version_request.APIVersionRequest('2.98'))


def assert_victims(test, details, *found):
    """``details`` name each ``(server, reason)`` of ``found``, no more."""
    test.assertTrue(details.startswith(
        '%d servers that forbid hyperthreads run on hyperthreaded hosts '
        '(bug 1889633): ' % len(found)), details)
    for server, reason in found:
        test.assertIn('%s on compute1 (%s)' % (server['id'], reason),
                      details)


def check(status, **kwargs):
    """Exit code and ``{check: (result, details)}`` of a JSON run."""
    result = status('upgrade', 'check', '--json', **kwargs)
    status.test.assertTrue(result.stdout, result.stderr)
    checks = json.loads(result.stdout)['checks']
    return result.returncode, {c['check']: (c['result'], c['details'])
                               for c in checks}


@ddt.ddt
class ConfigurationCheckTest(testtools.TestCase):
    """The configuration check needs nova.conf and nothing else."""

    def check(self, nova_conf):
        status = Command(self, PROG, 'http://127.0.0.1:%d' %
                         placement_server.free_port())
        _code, checks = check(status, nova_conf=nova_conf)
        self.assertEqual(CHECKS, tuple(checks))
        return checks['Configuration']

    def test_valid(self):
        self.assertEqual((0, None), self.check(ACTIVATED))

    def test_scheduler_entry_or_command(self):
        # Without the entry, the check looks for a scheduler on this host.
        self.useFixture(test_console_scripts.SchedulerProcessesLock())
        missing = self.check('')
        scheduler = subprocess.Popen(
            ['bash', '-c', 'exec -a nova-pcpu-ext-scheduler sleep 60'])
        self.addCleanup(scheduler.wait)
        self.addCleanup(scheduler.kill)
        with_command = self.check('')

        self.assertEqual(1, missing[0])
        self.assertIn('available_filters lacks nova_pcpu_ext.scheduler.'
                      'activate and no scheduler on this host runs '
                      'nova_pcpu_ext.cmd.scheduler', missing[1])
        self.assertEqual((0, None), with_command)

    def script(self, name, imports):
        """A script file ``name`` whose text imports ``imports``."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, name)
        with open(path, 'w') as script:
            script.write('#!%s\n# from %s import main\nimport sys\n'
                         'print("ready", flush=True)\nimport time\n'
                         'time.sleep(60)\n' % (sys.executable, imports))
        os.chmod(path, 0o755)
        return path

    def start(self, *command):
        process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                   text=True)
        self.addCleanup(process.wait)
        self.addCleanup(process.kill)
        return process

    def assertRecognised(self, start_scheduler):
        """Stock first: only the extension's scheduler clears the warning.

        ``start_scheduler(imports)`` starts a ``nova-scheduler`` whose
        script imports ``imports``.
        """
        self.useFixture(test_console_scripts.SchedulerProcessesLock())
        start_scheduler('nova.cmd.scheduler')
        self.assertEqual(1, self.check('')[0])
        start_scheduler('nova_pcpu_ext.cmd.scheduler')
        self.assertEqual((0, None), self.check(''))

    def test_nova_scheduler_running_the_extension(self):
        """The image of the kolla recipe: nova-scheduler runs ours.

        The console script's command line: the interpreter, then the
        script.
        """
        def start_scheduler(imports):
            process = self.start(self.script('nova-scheduler', imports))
            self.assertEqual('ready\n', process.stdout.readline())

        self.assertRecognised(start_scheduler)

    def test_scheduler_master_process_title(self):
        """Nova's threading mode with workers retitles the master process.

        cotyledon's title, with the start of the command line.
        """
        def start_scheduler(imports):
            title = 'nova-scheduler: master process [%s --config-file x]' % (
                self.script('nova-scheduler', imports))
            self.start('bash', '-c', 'exec -a "$0" sleep 60', title)

        self.assertRecognised(start_scheduler)

    @ddt.unpack
    @ddt.data(
        (ACTIVATED + '[pcpu_ext]\nrequest_filters = isolate\n', 2,
         '[pcpu_ext] request_filters: unknown plugin isolate'),
        (ACTIVATED + '[DEFAULT]\nram_allocation_ratio = -1.0\n', 2,
         '[DEFAULT] ram_allocation_ratio = -1.0 is invalid: Should be '
         'greater than or equal to 0. Set a positive ratio'),
        (ACTIVATED + '[DEFAULT]\ninitial_cpu_allocation_ratio = inf\n', 2,
         'initial_cpu_allocation_ratio = inf is not a finite number'),
    )
    def test_problem(self, nova_conf, expected_code, expected_details):
        code, details = self.check(nova_conf)
        self.assertEqual(expected_code, code)
        self.assertIn(expected_details, details)


class PlacementChecksTest(testtools.TestCase):
    """Ratios, credentials and faults, against placement alone."""

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(placement_server.PlacementServer())
        self.placement = operator_commands.Placement(self.server)
        self.status = Command(self, PROG, self.server.endpoint)

    def nova_conf(self, extra='', endpoint=None, token=TOKEN):
        return ACTIVATED + extra + (
            '[placement]\nauth_type = admin_token\ntoken = %s\n'
            'endpoint = %s\n' % (token, endpoint or self.server.endpoint))

    def test_clean_placement_passes(self):
        self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 4.0},
            'PCPU': {'total': 4}})

        table = self.status('upgrade', 'check')
        code, checks = check(self.status)

        self.assertEqual(0, table.returncode)
        self.assertIn('Result: Success', table.stdout)
        self.assertEqual((0, dict({name: (0, None) for name in CHECKS},
                                  **{LEGACY_HOSTS: NO_LEGACY})),
                         (code, checks))

    def test_legacy_hosts_without_servers(self):
        """A legacy host is a cost of drop even before it runs a server.

        Compute node providers are the roots with VCPU or PCPU in their
        tree: shared storage and a tree reporting PCPU below its root are
        no legacy hosts.
        """
        self.placement.provider('legacy', {'VCPU': {'total': 8}})
        nested = self.placement.provider('nested', {
            'VCPU': {'total': 8}, 'MEMORY_MB': {'total': 4096}})
        self.placement.provider('nested_numa0', {'PCPU': {'total': 4}},
                                parent=nested)
        self.placement.provider('nfs', {'DISK_GB': {'total': 100}})

        code, drop = check(self.status)
        _code, legacy_only = check(self.status, nova_conf=self.nova_conf(
            LEGACY_ONLY))

        self.assertEqual(1, code)
        self.assertEqual((1, (
            '1 legacy hosts (no PCPU inventory: vcpu_pin_set, or no '
            'dedicated CPUs; 0 with hyperthreads): legacy; 0 isolate servers '
            'run on them. With [pcpu_ext] isolate_fallback_mode = drop none '
            'of them takes an isolate server, nor is the destination of a '
            'move (migrate, resize, evacuate, unshelve) of one, although '
            'Nova places and pins such servers correctly there. To keep '
            'them, set [pcpu_ext] isolate_fallback_mode = legacy_only on the '
            'schedulers, with the pcpu_trait resource tracker mixin on the '
            'computes that report PCPU (nova-pcpu-ext-compute); or configure '
            'them with [compute] cpu_dedicated_set.')), drop[LEGACY_HOSTS])
        # The tree reporting PCPU lacks the trait of the mixin.
        self.assertEqual(1, legacy_only[LEGACY_HOSTS][0])
        self.assertTrue(legacy_only[LEGACY_HOSTS][1].startswith(
            '1 compute nodes report PCPU without the '
            'CUSTOM_PCPU_EXT_REPORTS_PCPU trait: nested. '),
            legacy_only[LEGACY_HOSTS][1])

    def test_request_filter_not_activated_here(self):
        """What the checks of the mode assume is said first."""
        self.placement.provider('legacy', {'VCPU': {'total': 8}})
        self.useFixture(test_console_scripts.SchedulerProcessesLock())

        _code, activated = check(self.status)
        _code, not_activated = check(self.status, nova_conf=self.nova_conf(
        ).replace(ACTIVATED, ''))

        assumed = (
            'Judged as if the schedulers ran the isolate_vcpu_fallback '
            'request filter in drop mode, as this nova.conf configures it; '
            'no scheduler activates it on this host (see the Configuration '
            'check), and a scheduler that does not makes the VCPU fallback '
            'query as stock Nova.')
        self.assertEqual(1, not_activated['Configuration'][0])
        self.assertEqual((0, None), activated[CHECKS[4]])
        self.assertEqual((0, assumed), not_activated[CHECKS[4]])
        self.assertEqual(1, not_activated[LEGACY_HOSTS][0])
        self.assertEqual(assumed + ' ' + activated[LEGACY_HOSTS][1],
                         not_activated[LEGACY_HOSTS][1])

    def test_bad_ratios(self):
        zero = self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 0.0},
            'MEMORY_MB': {'total': 4096, 'allocation_ratio': 0.0}})
        self.placement.provider('compute2', {
            'PCPU': {'total': 4, 'allocation_ratio': 2.0}})

        code, checks = check(self.status)

        self.assertEqual(2, code)
        self.assertEqual((2, (
            'Bad allocation ratios: 3 found, the worst on compute1 (%s): '
            'MEMORY_MB allocation_ratio 0.0 is not a positive number. Run '
            'nova-pcpu-ext-manage placement audit for the list and '
            'placement audit --fix to repair them.' % zero)),
            checks['Placement allocation ratios'])
        # Unusable ratios are not reported twice.
        self.assertEqual((0, None),
                         checks['Allocation ratios to be changed'])

    def test_ratios_to_be_changed(self):
        # Born under the defaults before 2023.1; it reports PCPU, so it is
        # no legacy host, which drop would warn of.
        self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 16.0},
            'PCPU': {'total': 4, 'allocation_ratio': 1.0},
            'MEMORY_MB': {'total': 4096, 'allocation_ratio': 1.5},
            'DISK_GB': {'total': 100, 'allocation_ratio': 1.0}},
            traits=['COMPUTE_NODE'])

        _code, configured = check(self.status, nova_conf=self.nova_conf(
            '[DEFAULT]\ncpu_allocation_ratio = 8.0\n'))
        code, defaults = check(self.status)

        self.assertEqual(1, configured['Allocation ratios to be changed'][0])
        self.assertIn('1 found, the worst on compute1',
                      configured['Allocation ratios to be changed'][1])
        self.assertIn('VCPU allocation_ratio 16.0 becomes 8.0',
                      configured['Allocation ratios to be changed'][1])
        self.assertEqual((0, (0, None)), (
            code, defaults['Allocation ratios to be changed']))

    def test_a_bad_option_replaces_no_other_result(self):
        self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 4.0}})

        code, checks = check(self.status, nova_conf=self.nova_conf(
            '[DEFAULT]\ncpu_allocation_ratio = nan\n'
            '[pcpu_ext]\nrequest_filters = isolate\n'))

        self.assertEqual(2, code)
        nan = '[DEFAULT] cpu_allocation_ratio = nan is not a finite number'
        configuration = checks['Configuration']
        self.assertEqual(2, configuration[0])
        self.assertIn(nan, configuration[1])
        self.assertIn('[pcpu_ext] request_filters: unknown plugin isolate',
                      configuration[1])
        self.assertEqual(1, configuration[1].count(nan))
        for name in ('Placement allocation ratios',
                     'Allocation ratios to be changed'):
            self.assertEqual(2, checks[name][0])
            self.assertIn(nan, checks[name][1])
        # No isolate_vcpu_fallback in request_filters: judged as stock Nova.
        self.assertEqual((0, None), checks[CHECKS[3]])
        for name in CHECKS[4:]:
            self.assertEqual((0, JUDGED_AS_STOCK), checks[name])

    def test_stopped_placement(self):
        self.server.stop()

        code, checks = check(self.status)

        self.assertEqual(2, code)
        self.assertEqual(0, checks['Configuration'][0])
        for name in CHECKS[1:]:
            self.assertEqual(2, checks[name][0])
            self.assertTrue(checks[name][1].startswith(
                'placement: GET %s/resource_providers: cannot connect. '
                'Check that placement is up' % self.server.endpoint))

    def test_timeout(self):
        # Accepts connections but never answers.
        silent = socket.socket()
        self.addCleanup(silent.close)
        silent.bind(('127.0.0.1', 0))
        silent.listen()

        code, checks = check(self.status, nova_conf=self.nova_conf(
            '[placement]\ntimeout = 1\n',
            endpoint='http://127.0.0.1:%d' % silent.getsockname()[1]))

        self.assertEqual(2, code)
        self.assertIn('timed out', checks[CHECKS[1]][1])

    def test_non_admin_is_told_so(self):
        _code, checks = check(self.status, nova_conf=self.nova_conf(
            token='demo'))

        self.assertIn('403 Forbidden: the user needs the admin role',
                      checks[CHECKS[1]][1])

    def test_no_credentials(self):
        _code, checks = check(self.status, nova_conf=ACTIVATED)

        self.assertEqual((2, 'no credentials: set auth_type and its options '
                          'in [placement] of nova.conf'), checks[CHECKS[1]])

    def test_dropped_connections_are_retried(self):
        drop_two = operator_commands.drop_first(2)
        proxy = self.useFixture(FaultyProxy(self.server.endpoint, drop_two))

        code, _checks = check(Command(self, PROG, proxy.endpoint))

        self.assertEqual((0, 2), (code, len(drop_two.dropped)))

    def test_unexpected_error_exits_255_with_one_line(self):
        rp_uuid = self.placement.provider('compute1', {
            'VCPU': {'total': 8}})
        inventories = '/resource_providers/%s/inventories' % rp_uuid

        def corrupt_ratio(method, path):
            if path == inventories:
                return 200, {'resource_provider_generation': 1,
                             'inventories': {'VCPU': {
                                 'total': 8, 'allocation_ratio': 'x'}}}

        proxy = self.useFixture(FaultyProxy(self.server.endpoint,
                                            corrupt_ratio))
        result = Command(self, PROG, proxy.endpoint)('upgrade', 'check')

        operator_commands.assert_one_line_error(
            self, result, PROG, 'unexpected error: TypeError: ',
            'allocation_ratios.py:', code=255)

    def test_ratios_of_compute_nodes_only(self):
        """Only compute node providers, with Nova's COMPUTE_NODE trait.

        No compute writes the ratios of a sharing provider or of another
        service's provider, whatever nova.conf says.
        """
        node = self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 16.0}},
            traits=['COMPUTE_NODE'])
        self.placement.provider('nfs', {
            'DISK_GB': {'total': 100, 'allocation_ratio': 2.0}},
            traits=['MISC_SHARES_VIA_AGGREGATE'])
        self.placement.provider('not-nova', {
            'VCPU': {'total': 8, 'allocation_ratio': 16.0}})

        _code, checks = check(self.status, nova_conf=self.nova_conf(
            '[DEFAULT]\ncpu_allocation_ratio = 8.0\n'
            'disk_allocation_ratio = 1.0\n'))

        self.assertEqual((1, (
            'Allocation ratios the allocation_ratios rule of this nova.conf '
            'changes: 1 found, the worst on compute1 (%s): VCPU '
            'allocation_ratio 16.0 becomes 8.0. A ratio set in nova.conf '
            'overrides the one placement holds, with or without the plugin: '
            'unset it on the computes whose ratio must stay.' % node)),
            checks['Allocation ratios to be changed'])

    def test_a_provider_deleted_during_the_run(self):
        """Deleted after the listing, before its inventory is read.

        Placement's own 404 for it is a note of the check that met it,
        which stays a success; the other checks judge the others.
        """
        self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 8.0},
            'PCPU': {'total': 4}}, traits=['COMPUTE_NODE'])
        compute2 = self.placement.provider('compute2', {
            'VCPU': {'total': 8, 'allocation_ratio': 16.0},
            'PCPU': {'total': 4}}, traits=['COMPUTE_NODE'])
        ironic = self.placement.provider('ironic1', {
            'CUSTOM_BAREMETAL_GOLD': {'total': 1}}, traits=['COMPUTE_NODE'])
        path = '/resource_providers/%s/inventories' % ironic
        deleted = []

        def delete_first(method, request_path):
            if request_path == path and not deleted:
                deleted.append(self.placement.call(
                    'DELETE', '/resource_providers/%s' % ironic))

        proxy = self.useFixture(FaultyProxy(self.server.endpoint,
                                            delete_first))
        code, checks = check(Command(self, PROG, proxy.endpoint),
                             nova_conf=self.nova_conf(
                                 '[DEFAULT]\ncpu_allocation_ratio = 8.0\n',
                                 endpoint=proxy.endpoint))

        self.assertIn(('GET', path, 404), proxy.statuses)
        self.assertEqual(1, code)
        self.assertEqual((0, 'Resource providers deleted during the run, '
                             'skipped: ironic1 (%s).' % ironic),
                         checks['Placement allocation ratios'])
        self.assertEqual(1, checks['Allocation ratios to be changed'][0])
        self.assertIn('1 found, the worst on compute2 (%s): VCPU '
                      'allocation_ratio 16.0 becomes 8.0' % compute2,
                      checks['Allocation ratios to be changed'][1])
        self.assertEqual(dict({name: (0, None) for name in CHECKS[3:5]},
                              **{'Configuration': (0, None),
                                 LEGACY_HOSTS: NO_LEGACY}),
                         {name: checks[name] for name in
                          ('Configuration',) + CHECKS[3:]})


class _IsolateChecksBase(operator_commands.OperatorCommandTestBase):

    def isolate_checks(self, extra_conf=''):
        code, checks = check(self.status, extra_conf=extra_conf)
        return code, {name: checks[name] for name in CHECKS[3:]}


class IsolateChecksOnStockNovaTest(_IsolateChecksBase):
    """What stock Nova without its late check leaves, found."""

    extension = False

    def test_isolate_servers_on_vcpu(self):
        # Six dedicated cores: each isolate server takes a whole one.
        rp_uuid = self.start_host(
            'compute1', dict(HYPERTHREADED, cpu_cores=7), dedicated='0-11',
            shared='12-13')
        flavor_isolate = self.boot(ISOLATE)
        image = self.isolate_image()
        image_isolate = self._create_server(image_uuid=image['id'],
                                            flavor_id=self._create_flavor())
        trait_forbidden = self.boot_forbidding_hyperthreads(rp_uuid)
        not_isolate = [self.boot(DEDICATED), self.boot({}), self.boot(dict(
            DEDICATED, **{'hw:cpu_thread_policy': 'prefer'}))]

        code, checks = self.isolate_checks()

        self.assertEqual(2, code)
        result, details = checks[CHECKS[3]]
        self.assertEqual(2, result)
        assert_victims(
            self, details,
            (flavor_isolate, 'flavor hw:cpu_thread_policy=isolate'),
            (image_isolate, 'image hw_cpu_thread_policy=isolate'),
            (trait_forbidden, 'flavor trait:HW_CPU_HYPERTHREADING=forbidden'))
        for server in not_isolate:
            self.assertNotIn(server['id'], details)
        self.assertIn('nova-pcpu-ext-manage heal isolate', details)
        self.assertEqual((0, None), checks[CHECKS[4]])

    def isolate_image(self):
        return self.glance.create(None, {
            'name': 'isolate', 'status': 'active', 'size': 1,
            'container_format': 'bare', 'disk_format': 'raw',
            'visibility': 'public', 'properties': {
                'hw_cpu_policy': 'dedicated',
                'hw_cpu_thread_policy': 'isolate'}})

    def boot_forbidding_hyperthreads(self, rp_uuid):
        """A pinned server forbidding hyperthreads, booted on VCPU.

        Stock Nova's fallback query carries an explicit forbidden trait:
        this server reaches VCPU of compute1 only while compute1 reports
        neither the trait nor free PCPU, as if it had gained hyperthreads
        (a firmware change) since. Both are hidden while it boots.
        """
        self.hide_hyperthreads_and_pcpu(rp_uuid, True)
        server = self.boot(dict(DEDICATED, **{
            'trait:HW_CPU_HYPERTHREADING': 'forbidden'}))
        self.hide_hyperthreads_and_pcpu(rp_uuid, False)
        allocation = self.placement.get(
            '/allocations/%s' % server['id']).body['allocations']
        self.assertEqual(1, allocation[rp_uuid]['resources']['VCPU'])
        return server

    def hide_hyperthreads_and_pcpu(self, rp_uuid, hide):
        url = '/resource_providers/%s/' % rp_uuid
        traits = self.placement.get(url + 'traits', version='1.6').body
        names = set(traits['traits']) - {'HW_CPU_HYPERTHREADING'}
        if not hide:
            names.add('HW_CPU_HYPERTHREADING')
        self.assertEqual(200, self.placement.put(
            url + 'traits', dict(traits, traits=list(names)),
            version='1.6').status)
        if 'PCPU' not in self.placement.get(url + 'inventories').body[
                'inventories']:
            return  # a legacy host
        pcpu = self.placement.get(url + 'inventories/PCPU').body
        pcpu['reserved'] = pcpu['total'] if hide else 0
        # 1.26: reserved may equal total.
        self.assertEqual(200, self.placement.put(
            url + 'inventories/PCPU', pcpu, version='1.26').status)

    def test_isolate_servers_on_legacy_hosts(self):
        self.start_host('legacy', HYPERTHREADED, vcpu_pin_set='0-3')
        server = self.boot(ISOLATE)

        code, without_destination = self.isolate_checks()
        self.start_host('compute2', NO_HYPERTHREADS, dedicated='0-3')
        _code, with_destination = self.isolate_checks()

        self.assertEqual(1, code)
        self.assertEqual((0, None), without_destination[CHECKS[3]])
        self.assertEqual((1, (
            '1 isolate servers run on hyperthreaded hosts configured with '
            'vcpu_pin_set (no PCPU inventory): %s on legacy (flavor '
            'hw:cpu_thread_policy=isolate). Nova pinned each on one thread '
            'per core and reserved the siblings: they are isolated, not bug '
            '1889633, and nova-pcpu-ext-manage heal isolate moves them only '
            'with --include-legacy. With the isolate_vcpu_fallback request '
            'filter in drop mode they can move (migrate, resize, evacuate, '
            'unshelve) only to enabled hosts without hyperthreads that '
            'report PCPU; 0 of them each have room on one now, if moved '
            'alone.' % server['id'])),
            without_destination[CHECKS[4]])
        self.assertTrue(with_destination[CHECKS[4]][1].endswith(
            'in drop mode they can move (migrate, resize, evacuate, '
            'unshelve) only to enabled hosts without hyperthreads that '
            'report PCPU; 1 of them each have room on one now, if moved '
            'alone.'))

    def legacy_cloud(self):
        """An isolate server on a legacy host with and one without HT.

        Stock Nova places them through its VCPU fallback query.
        """
        self.start_host('legacy-ht', HYPERTHREADED, vcpu_pin_set='0-3')
        self.start_host('legacy', NO_HYPERTHREADS, vcpu_pin_set='0-3')
        self.admin_api.microversion = '2.74'
        flavor = self._create_flavor(vcpu=1, extra_spec=ISOLATE)
        return [self._create_server(flavor_id=flavor, host=host,
                                    networks='none', api=self.admin_api)
                for host in ('legacy-ht', 'legacy')]

    def test_modes_that_leave_legacy_hosts_out(self):
        self.legacy_cloud()

        code, drop = check(self.status)
        legacy_only_code, legacy_only = check(self.status,
                                              extra_conf=LEGACY_ONLY)

        self.assertEqual(1, code)
        result, details = drop[LEGACY_HOSTS]
        self.assertEqual(1, result)
        self.assertRegex(details, (
            r'^2 legacy hosts \(no PCPU inventory: vcpu_pin_set, or no '
            r'dedicated CPUs; 1 with hyperthreads\): '
            r'(legacy-ht, legacy|legacy, legacy-ht); 2 isolate servers run '
            r'on them\. With \[pcpu_ext\] isolate_fallback_mode = drop none '
            r'of them takes an isolate server, nor is the destination of a '
            r'move \(migrate, resize, evacuate, unshelve\) of one, although '
            r'Nova places and pins such servers correctly there\. To keep '
            r'them, set \[pcpu_ext\] isolate_fallback_mode = legacy_only on '
            r'the schedulers, '))
        # legacy_only keeps them all: nothing to report.
        self.assertEqual((0, {name: (0, None) for name in CHECKS}),
                         (legacy_only_code, legacy_only))

    def test_without_the_request_filter_judged_as_stock_nova(self):
        """Not as drop: the fallback query offers them every legacy host."""
        self.legacy_cloud()

        code, checks = check(self.status, extra_conf=FILTER_OFF)

        self.assertEqual(0, code)
        self.assertEqual((0, JUDGED_AS_STOCK), checks[CHECKS[4]])
        self.assertEqual((0, JUDGED_AS_STOCK), checks[LEGACY_HOSTS])

    def test_hardly_move_from_legacy_hosts_without_hyperthreads(self):
        """In drop mode only hosts reporting PCPU without HT take them."""
        on_ht, without_ht = self.legacy_cloud()

        _code, drop = check(self.status)

        result, details = drop[CHECKS[4]]
        self.assertEqual(1, result)
        self.assertTrue(details.startswith(
            '2 isolate servers run on legacy hosts (no PCPU inventory: '
            'vcpu_pin_set, or no dedicated CPUs), 1 on hosts without '
            'hyperthreads: '), details)
        for server, host in ((on_ht, 'legacy-ht'), (without_ht, 'legacy')):
            self.assertIn('%s on %s (flavor hw:cpu_thread_policy=isolate)' % (
                server['id'], host), details)
        self.assertIn(
            'Nova pinned each on whole cores (on hyperthreaded hosts one '
            'thread per core, the siblings reserved): they are isolated, not '
            'bug 1889633, and nova-pcpu-ext-manage heal isolate moves those '
            'on hyperthreaded hosts only with --include-legacy, the others '
            'never. With the isolate_vcpu_fallback request filter in drop '
            'mode they can move (migrate, resize, evacuate, unshelve) only '
            'to enabled hosts without hyperthreads that report PCPU; 0 of '
            'them each have room on one now, if moved alone.', details)
        self.assertEqual((0, None), drop[CHECKS[3]])

    def test_forbidden_trait_on_a_legacy_host_is_not_isolated(self):
        """Only the isolate thread policy pins one thread per core there.

        A pinned server forbidding the trait without that policy shares
        its cores: it is the failure, beside legacy isolation.
        """
        rp_uuid = self.start_host('legacy', HYPERTHREADED,
                                  vcpu_pin_set='0-3')
        isolated = self.boot(ISOLATE)
        forbidding = self.boot_forbidding_hyperthreads(rp_uuid)

        code, checks = self.isolate_checks()

        self.assertEqual(2, code)
        self.assertIn('1 servers that forbid hyperthreads run on '
                      'hyperthreaded hosts (bug 1889633): %s on legacy '
                      '(flavor trait:HW_CPU_HYPERTHREADING=forbidden)' %
                      forbidding['id'], checks[CHECKS[3]][1])
        self.assertIn('1 isolate servers run on hyperthreaded hosts '
                      'configured with vcpu_pin_set (no PCPU inventory): %s '
                      'on legacy (flavor hw:cpu_thread_policy=isolate).' %
                      isolated['id'], checks[CHECKS[4]][1])

    def test_servers_of_a_down_cell_are_not_a_success(self):
        self.start_hyperthreaded_host()
        server = self.boot(ISOLATE)
        # The build goes on after ACTIVE (it tells the scheduler); a cell
        # down before it ends fails the build and frees the allocation.
        self._wait_for_instance_action_event(
            server, 'create', 'compute__do_build_and_run_instance', 'success')
        self.useFixture(nova_fixtures.DownCellFixture())

        code, checks = self.isolate_checks()

        self.assertEqual(1, code, checks)
        for name in CHECKS[3:5]:
            self.assertEqual((1, 'The Compute API could not show 1 servers '
                                 'of 1 hyperthreaded hosts (compute1): is a '
                                 'cell down?'), checks[name])
        self.assertEqual(NO_LEGACY, checks[LEGACY_HOSTS])

    def test_an_image_changed_after_boot(self):
        """Unsure, unless the server shows what Nova scheduled it with."""
        self.start_hyperthreaded_host()
        image = self.isolate_image()
        server = self._create_server(image_uuid=image['id'],
                                     flavor_id=self._create_flavor(vcpu=1))
        # As glance does on a property change.
        self.glance.update(None, image['id'], {
            'updated_at': datetime.datetime.now(datetime.timezone.utc),
            'properties': {'hw_cpu_thread_policy': 'prefer'}})

        code, checks = self.isolate_checks()

        if STORED_IMAGE_PROPERTIES:
            self.assertEqual(2, code)
            self.assertIn('1 servers that forbid hyperthreads run on '
                          'hyperthreaded hosts (bug 1889633): %s on compute1 '
                          '(image hw_cpu_thread_policy=isolate)' %
                          server['id'], checks[CHECKS[3]][1])
            return
        self.assertEqual(1, code)
        self.assertEqual(
            (1, '1 servers are unsure: %s on compute1: image %s changed '
                'after the server was created; check their thread policy '
                'by hand.' % (server['id'], image['id'])), checks[CHECKS[3]])


class ExtensionIsolateChecksTest(_IsolateChecksBase):
    """With the extension on, the same servers leave nothing to report."""

    def test_clean_cloud(self):
        """No legacy host either: drop costs it nothing, and it is told."""
        self.start_hyperthreaded_host()
        self.boot(ISOLATE, expected_state='ERROR')
        self.boot(DEDICATED)
        self.boot({})

        code, checks = check(self.status)
        _code, workaround = check(self.status, extra_conf=(
            '[workarounds]\ndisable_fallback_pcpu_query = true\n'))

        self.assertEqual((0, dict({name: (0, None) for name in CHECKS},
                                  **{LEGACY_HOSTS: NO_LEGACY})),
                         (code, checks))
        self.assertEqual(NO_LEGACY, workaround[LEGACY_HOSTS])

    def remove_trait(self, rp_uuid, trait):
        url = '/resource_providers/%s/traits' % rp_uuid
        traits = self.placement.get(url, version='1.6').body
        self.assertIn(trait, traits['traits'])
        traits['traits'].remove(trait)
        self.assertEqual(200, self.placement.put(url, traits,
                                                 version='1.6').status)

    def test_legacy_only_and_a_compute_without_the_mixin(self):
        """A host reporting PCPU without the trait, named in legacy_only.

        As a compute that does not run the pcpu_trait mixin leaves it:
        the trait its compute reported is removed through placement.
        """
        self.start_host('compute1', NO_HYPERTHREADS, dedicated='0-3')
        without_mixin = self.start_hyperthreaded_host('compute2')
        self.remove_trait(without_mixin, pcpu_trait.TRAIT)

        code, legacy_only = check(self.status, extra_conf=LEGACY_ONLY)
        _code, drop = check(self.status)

        self.assertEqual(1, code)
        self.assertEqual((1, (
            '1 compute nodes report PCPU without the '
            'CUSTOM_PCPU_EXT_REPORTS_PCPU trait: compute2. Their computes do '
            'not run the pcpu_trait resource tracker mixin, so with '
            '[pcpu_ext] isolate_fallback_mode = legacy_only the VCPU '
            'fallback query still offers them to pinned requests, as stock '
            'Nova does (hyperthreaded ones to isolate requests too: bug '
            '1889633). Run nova-pcpu-ext-compute there with pcpu_trait in '
            '[pcpu_ext] resource_tracker_mixins (the default): the trait is '
            'reported when the compute starts. ' + NO_LEGACY[1])),
            legacy_only[LEGACY_HOSTS])
        for name in CHECKS[:5]:
            self.assertEqual((0, None), legacy_only[name])
        # Drop does not read the trait.
        self.assertEqual(NO_LEGACY, drop[LEGACY_HOSTS])


class RequestCountTest(_IsolateChecksBase):
    """What a run asks grows with the servers found, not with the hosts."""

    extension = False

    def setUp(self):
        super().setUp()
        self.proxy = self.useFixture(FaultyProxy(
            self.placement_server.endpoint, self.respond))
        self.status = Command(self, PROG, self.proxy.endpoint,
                              self.compute_api.endpoint)
        #: Seconds the first request for allocations is held.
        self.hold_allocations = 0

    def respond(self, method, path):
        if self.hold_allocations and path.endswith('/allocations'):
            time.sleep(self.hold_allocations)
            self.hold_allocations = 0

    def seed(self):
        """Two hosts with an isolate server each; three more providers."""
        self.admin_api.microversion = '2.74'
        flavor = self._create_flavor(vcpu=1, extra_spec=ISOLATE)
        servers = []
        for host in ('compute1', 'compute2'):
            self.start_hyperthreaded_host(host)
            servers.append(self._create_server(
                flavor_id=flavor, host=host, networks='none',
                api=self.admin_api))
        placement = operator_commands.Placement(self.placement_server)
        for n in range(3):
            rp_uuid = placement.provider('seeded%d' % n, {
                'VCPU': {'total': 8}, 'PCPU': {'total': 4}},
                traits=['HW_CPU_HYPERTHREADING'])
        # A consumer that is no server, as a migration's.
        self.migration = str(uuid.uuid4())
        placement.call('PUT', '/allocations/%s' % self.migration, {
            'allocations': {rp_uuid: {'resources': {'VCPU': 1}}},
            'project_id': str(uuid.uuid4()), 'user_id': str(uuid.uuid4())})
        return servers

    def placement_requests(self):
        """``{path with IDs: count}`` of placement's requests, each once."""
        asked = [path for _method, path, _status in self.proxy.statuses]
        self.assertEqual(len(asked), len(set(asked)), self.proxy.statuses)
        return dict(collections.Counter(
            re.sub('[0-9a-f-]{36}', 'ID', path) for path in asked))

    def test_each_answer_once_one_listing_the_same_findings(self):
        servers = self.seed()

        code, checks = self.isolate_checks()

        self.assertEqual(2, code, checks)
        for server in servers:
            self.assertIn(server['id'], checks[CHECKS[3]][1])
        # Five providers, all hyperthreaded; two servers found.
        self.assertEqual({
            '/resource_providers': 1,
            '/resource_providers?required=COMPUTE_NODE': 1,
            '/resource_providers?required=HW_CPU_HYPERTHREADING': 1,
            '/resource_providers/ID/inventories': 5,
            '/resource_providers/ID/allocations': 5,
            '/allocations/ID': 2}, self.placement_requests())
        images = ['/v2.1/images/%s' % servers[0]['image']['id']]
        self.assertEqual(
            ['/v2.1/', '/v2.1/servers/detail?all_tenants=1&limit=1000&'
             'sort_key=uuid&sort_dir=asc',
             '/v2.1/servers/%s' % self.migration] +
            ([] if STORED_IMAGE_PROPERTIES else images),
            self.compute_api.requests)

        # The listing of each host is what each host's scan read before:
        # the plans are the same.
        plans = [self.manage.json('heal', 'isolate', '--dry-run', *args)
                 for args in [()] + [('--host', host) for host in (
                     'compute1', 'compute2', 'seeded0', 'seeded1',
                     'seeded2')]]
        code, whole = plans[0]
        self.assertEqual(2, len(whole))
        self.assertEqual(code, max(code for code, _plan in plans[1:]))
        self.assertEqual(sorted(whole, key=str), sorted(
            (move for _code, plan in plans[1:] for move in plan), key=str))

    def test_legacy_only_asks_two_more(self):
        """Whether placement knows the trait, then who has it: no more."""
        self.seed()
        placement = operator_commands.Placement(self.placement_server)
        placement.provider('marked', {'VCPU': {'total': 8},
                                      'PCPU': {'total': 4}},
                           traits=['HW_CPU_HYPERTHREADING', pcpu_trait.TRAIT])

        code, checks = check(self.status, extra_conf=LEGACY_ONLY)

        self.assertEqual(2, code, checks)
        self.assertEqual(1, checks[LEGACY_HOSTS][0])
        self.assertTrue(checks[LEGACY_HOSTS][1].startswith(
            '5 compute nodes report PCPU without the '
            'CUSTOM_PCPU_EXT_REPORTS_PCPU trait: compute1, compute2, '
            'seeded0, seeded1, seeded2. '), checks[LEGACY_HOSTS][1])
        self.assertEqual({
            '/resource_providers': 1,
            '/resource_providers?required=COMPUTE_NODE': 1,
            '/resource_providers?required=HW_CPU_HYPERTHREADING': 1,
            '/resource_providers/ID/inventories': 6,
            '/resource_providers/ID/allocations': 6,
            '/allocations/ID': 2,
            '/traits?name=in:CUSTOM_PCPU_EXT_REPORTS_PCPU': 1,
            '/resource_providers?required=CUSTOM_PCPU_EXT_REPORTS_PCPU': 1},
            self.placement_requests())

    def compute_client(self):
        return clients.Compute(ks_adapter.Adapter(
            ks_session.Session(), service_type='compute',
            endpoint_override=self.compute_api.endpoint,
            additional_headers={'X-Auth-Token': TOKEN}))

    def test_ranges_of_nova_s_listing(self):
        servers = self.seed()
        compute = self.compute_client()
        first, last = sorted(server['id'] for server in servers)
        # The split falls on a consumer that is no server: the next stands
        # in, as Nova answers 400 for a marker that is no server.
        no_server = str(uuid.UUID(int=uuid.UUID(first).int + 1))
        del self.compute_api.requests[:]

        # Two ranges of pages of one server.
        with mock.patch.object(clients, 'PAGE', 2), mock.patch.object(
                clients, 'RANGES', 2):
            found = compute.servers({first, no_server, last})

        self.assertEqual({first, last}, set(found))
        pages = [path for path in self.compute_api.requests
                 if path.startswith('/v2.1/servers/detail')]
        self.assertEqual(
            ['/v2.1/servers/detail?all_tenants=1&limit=1&sort_key=uuid&'
             'sort_dir=asc&marker=%s' % last],
            [path for path in pages if last in path and 'marker' in path])
        self.assertNotIn(no_server, ''.join(pages))

    def test_a_marker_deleted_after_it_was_chosen(self):
        servers = self.seed()
        compute = self.compute_client()
        first, last = sorted(server['id'] for server in servers)
        chosen = compute._markers

        def chosen_then_deleted(wanted):
            markers = chosen(wanted)
            self._delete_server({'id': markers[0]})
            return markers

        # Nova finds markers among deleted servers too, so the range that
        # starts after ``last`` is read, not refused.
        with mock.patch.object(clients, 'PAGE', 2), mock.patch.object(
                clients, 'RANGES', 2), mock.patch.object(
                compute, '_markers', chosen_then_deleted):
            found = compute.servers({first, last})

        self.assertEqual({first}, set(found))

    def test_progress_of_a_long_run_on_stderr(self):
        self.seed()
        # The run lasts longer than the quiet start of its progress.
        self.hold_allocations = common.PROGRESS_INTERVAL + 1

        result = self.status('upgrade', 'check', '--json')

        self.assertEqual(2, result.returncode, result.stderr)
        json.loads(result.stdout)
        lines = result.stderr.splitlines()
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, r'^%s: [a-z ]+: \d+( of \d+)?$' % PROG)
