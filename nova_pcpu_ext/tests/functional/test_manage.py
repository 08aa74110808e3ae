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

"""``nova-pcpu-ext-manage`` run as operators do, against real services."""

from nova_pcpu_ext.tests.functional import base  # noqa: F401  isort:skip

import urllib.parse

import fixtures
from lxml import etree
from nova import exception as nova_exception
from nova.tests.functional import integrated_helpers
import testtools

from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests.functional.base import NO_HYPERTHREADS
from nova_pcpu_ext.tests.functional import operator_commands
from nova_pcpu_ext.tests.functional.operator_commands import Command
from nova_pcpu_ext.tests.functional.operator_commands import FaultyProxy
from nova_pcpu_ext.tests import placement_server

PROG = 'nova-pcpu-ext-manage'


class PlacementAuditTest(testtools.TestCase):
    """``placement audit`` against placement alone."""

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(placement_server.PlacementServer())
        self.placement = operator_commands.Placement(self.server)
        self.manage = Command(self, PROG, self.server.endpoint)

    def seed_damage(self):
        """Zero ratios (bug 1789654) on one provider, PCPU 2.0 on another."""
        zero = self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 0.0},
            'MEMORY_MB': {'total': 4096, 'reserved': 512,
                          'allocation_ratio': 0.0},
            'DISK_GB': {'total': 100, 'allocation_ratio': 1.0},
        }, traits=['CUSTOM_KEEP_ME'])
        pcpu = self.placement.provider('compute2', {
            'PCPU': {'total': 4, 'allocation_ratio': 2.0}})
        return zero, pcpu

    def audit(self, *args, manage=None, **kwargs):
        """Exit code and sorted findings, as tuples."""
        code, findings = (manage or self.manage).json(
            'placement', 'audit', *args, **kwargs)
        return code, sorted(
            (f['provider_name'], f['severity'], f['problem'], f['action'],
             f['fixed']) for f in findings)

    def test_clean_placement(self):
        self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 16.0},
            'PCPU': {'total': 4}})

        result = self.manage('placement', 'audit', '--fix')

        self.assertEqual((0, 'Nothing found.\n'),
                         (result.returncode, result.stdout))

    def test_damage_is_found_fixed_and_gone(self):
        zero, pcpu = self.seed_damage()
        nova_conf = (
            '[DEFAULT]\ncpu_allocation_ratio = 16.0\n[placement]\n'
            'auth_type = admin_token\ntoken = %s\nendpoint = %s\n' % (
                placement_server.TOKEN, self.server.endpoint))
        before = self.placement.inventories(zero)

        found = self.audit(nova_conf=nova_conf)
        fixed = self.audit('--fix', '--ratio', 'MEMORY_MB=1.5',
                           nova_conf=nova_conf)
        again = self.audit(nova_conf=nova_conf)

        self.assertEqual((1, [
            ('compute1', 'failure', 'MEMORY_MB allocation_ratio 0.0 is not '
             'a positive number', '--fix sets allocation_ratio to 1.0',
             False),
            ('compute1', 'failure', 'VCPU allocation_ratio 0.0 is not a '
             'positive number', '--fix sets allocation_ratio to 16.0',
             False),
            ('compute2', 'warning', 'PCPU allocation_ratio 2.0 is not 1.0',
             '--fix sets allocation_ratio to 1.0', False)]), found)
        self.assertEqual((0, [
            ('compute1', 'failure', 'MEMORY_MB allocation_ratio 0.0 is not '
             'a positive number', 'set allocation_ratio to 1.5', True),
            ('compute1', 'failure', 'VCPU allocation_ratio 0.0 is not a '
             'positive number', 'set allocation_ratio to 16.0', True),
            ('compute2', 'warning', 'PCPU allocation_ratio 2.0 is not 1.0',
             'set allocation_ratio to 1.0', True)]), fixed)
        self.assertEqual((0, []), again)
        self.assertEqual({'VCPU': 16.0, 'MEMORY_MB': 1.5, 'DISK_GB': 1.0},
                         self.placement.ratios(zero))
        self.assertEqual({'PCPU': 1.0}, self.placement.ratios(pcpu))
        # Nothing but the ratios changed: one write, traits and the rest of
        # the inventory kept.
        after = self.placement.inventories(zero)
        self.assertEqual(before['resource_provider_generation'] + 1,
                         after['resource_provider_generation'])
        for inventory in before['inventories'].values():
            del inventory['allocation_ratio']
        for inventory in after['inventories'].values():
            del inventory['allocation_ratio']
        self.assertEqual(before['inventories'], after['inventories'])
        self.assertEqual(['CUSTOM_KEEP_ME'], self.placement.traits(zero))

    def test_dry_run_changes_nothing(self):
        zero, _pcpu = self.seed_damage()
        before = self.placement.inventories(zero)

        code, findings = self.audit('--fix', '--dry-run')

        self.assertEqual(1, code)
        self.assertEqual(3, len(findings))
        self.assertFalse(any(f[-1] for f in findings))
        self.assertEqual(before, self.placement.inventories(zero))

    def test_one_host_or_provider(self):
        zero, pcpu = self.seed_damage()

        by_host = self.audit('--fix', '--host', 'compute2')
        by_provider = self.audit('--provider', zero)

        self.assertEqual([('compute2', True)],
                         [(f[0], f[-1]) for f in by_host[1]])
        self.assertEqual({'PCPU': 1.0}, self.placement.ratios(pcpu))
        self.assertEqual(['compute1', 'compute1'],
                         [f[0] for f in by_provider[1]])
        self.assertEqual(0.0, self.placement.ratios(zero)['VCPU'])

    def test_conflict_during_fix_is_retried(self):
        """Another writer changes the inventory between read and write."""
        zero, _pcpu = self.seed_damage()
        path = '/resource_providers/%s/inventories' % zero

        concurrent_writes = []

        def write_concurrently_first(method, request_path):
            if (method, request_path) == ('PUT', path) and \
                    not concurrent_writes:
                current = self.placement.inventories(zero)
                current['inventories']['VCPU']['total'] = 16
                concurrent_writes.append(
                    self.placement.call('PUT', path, current))

        proxy = self.useFixture(FaultyProxy(self.server.endpoint,
                                            write_concurrently_first))
        result = Command(self, PROG, proxy.endpoint)(
            'placement', 'audit', '--fix')

        self.assertEqual(0, result.returncode, result.stdout)
        puts = [s for s in proxy.statuses if s[:2] == ('PUT', path)]
        self.assertEqual([409, 200], [s[2] for s in puts])
        inventories = self.placement.inventories(zero)['inventories']
        self.assertEqual(16, inventories['VCPU']['total'])
        self.assertEqual(4.0, inventories['VCPU']['allocation_ratio'])

    def test_server_errors_write_nothing(self):
        zero, _pcpu = self.seed_damage()
        before = self.placement.inventories(zero)
        proxy = self.useFixture(FaultyProxy(
            self.server.endpoint,
            lambda method, path: 503 if method == 'PUT' else None))

        result = Command(self, PROG, proxy.endpoint)(
            'placement', 'audit', '--fix')

        operator_commands.assert_one_line_error(
            self, result, PROG,
            'placement: PUT %s/resource_providers/' % proxy.endpoint,
            '503 Service Unavailable', 'Check that placement is up')
        # The first PUT and its three retries, then nothing more.
        self.assertEqual(4, len([s for s in proxy.statuses
                                 if s[0] == 'PUT']))
        self.assertEqual(before, self.placement.inventories(zero))

    def test_dropped_connections_are_retried(self):
        zero, _pcpu = self.seed_damage()
        drop_two = operator_commands.drop_first(2)
        proxy = self.useFixture(FaultyProxy(self.server.endpoint, drop_two))

        code, findings = self.audit(
            '--fix', manage=Command(self, PROG, proxy.endpoint))

        self.assertEqual((0, 3), (code, len(findings)))
        self.assertEqual(2, len(drop_two.dropped))
        self.assertEqual(4.0, self.placement.ratios(zero)['VCPU'])

    def test_bad_ratio_option_is_a_usage_error(self):
        result = self.manage('placement', 'audit', '--fix', '--ratio',
                             'PCPU=2.0')

        self.assertEqual(2, result.returncode)
        self.assertIn("'PCPU=2.0': expected RESOURCE_CLASS=RATIO with one "
                      "of VCPU, MEMORY_MB, DISK_GB", result.stderr)


class LiveMigrationOverFakeLibvirt(fixtures.Fixture):
    """Completes libvirt live migrations between the test's computes.

    As Nova's functional tests do: the destination defines the domain, the
    source's migration job completes.
    """

    def __init__(self, computes):
        super().__init__()
        self.computes = computes

    def _setUp(self):
        def migrate(domain, destination, params, flags):
            host = urllib.parse.urlparse(destination).hostname
            self.computes[host].driver._host.get_connection().createXML(
                params['destination_xml'], 'flags are ignored')
            uuid = etree.fromstring(params['destination_xml']).find(
                './uuid').text
            assert uuid == domain.UUIDString()
            domain.complete_job()

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', migrate))


class HealIsolateTest(operator_commands.OperatorCommandTestBase,
                      integrated_helpers.InstanceHelperMixin):
    """An isolate server stock Nova put on VCPU, moved with the extension.

    Stock Nova without its late check places the server; the scheduler is
    then restarted with the extension, as an operator enabling it would.
    """

    extension = False
    # Moves run asynchronously behind the API's 202, as in a deployment.
    CAST_AS_CALL = False

    def setUp(self):
        super().setUp()
        self.useFixture(LiveMigrationOverFakeLibvirt(self.computes))
        self.ht_rp = self.start_hyperthreaded_host('compute1')
        self.server = self.boot(ISOLATE)
        self.assertEqual({'VCPU': 1}, self.cpu_usages(self.ht_rp))
        self.extension = True
        self.scheduler.stop()
        self.scheduler = self._setup_scheduler_service()

    def start_host_without_hyperthreads(self):
        # The CPU sets are process-wide flags: the same as compute1's, or
        # compute1 would drop its VCPU inventory on its next update.
        return self.start_host('compute2', dict(NO_HYPERTHREADS, cpu_cores=8),
                               dedicated='0-3', shared='4-7')

    def cpu_usages(self, rp_uuid):
        return {rc: used for rc, used in self.usages(rp_uuid).items()
                if 'CPU' in rc}

    def heal(self, *args):
        result = self.manage('heal', 'isolate', '--format', 'json', *args)
        return result, operator_commands.json.loads(result.stdout)

    def assertStillOnVcpu(self):
        server = self.admin_api.get_server(self.server['id'])
        self.assertEqual(('ACTIVE', 'compute1'), (
            server['status'], server['OS-EXT-SRV-ATTR:host']))
        self.assertEqual({'VCPU': 1}, self.cpu_usages(self.ht_rp))

    def test_heal_moves_the_server_onto_pcpu(self):
        no_ht_rp = self.start_host_without_hyperthreads()

        dry_run, planned = self.heal('--dry-run')
        self.assertStillOnVcpu()
        result, moves = self.heal()
        again = self.manage('heal', 'isolate')

        self.assertEqual(1, dry_run.returncode)
        self.assertEqual([(self.server['id'], 'compute1', 'VCPU:1',
                           'dry run: would live-migrate')],
                         [(m['server'], m['from_host'], m['before'],
                           m['result']) for m in planned])
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([{'server': self.server['id'],
                           'from_host': 'compute1', 'to_host': 'compute2',
                           'before': 'VCPU:1', 'after': 'PCPU:1',
                           'result': 'healed', 'healed': True}], moves)
        self.assertIn('[1/1] %s: healed' % self.server['id'], result.stderr)
        server = self.admin_api.get_server(self.server['id'])
        self.assertEqual(('ACTIVE', 'compute2'), (
            server['status'], server['OS-EXT-SRV-ATTR:host']))
        self.assertEqual({}, self.cpu_usages(self.ht_rp))
        self.assertEqual({'PCPU': 1}, self.cpu_usages(no_ht_rp))
        self.assertEqual((0, 'Nothing found.\n'),
                         (again.returncode, again.stdout))

    def test_cold_migration(self):
        no_ht_rp = self.start_host_without_hyperthreads()
        # As Nova's functional tests do: there are no disks to copy.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'migrate_disk_and_power_off', return_value='{}'))

        result, moves = self.heal('--cold')

        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([('compute2', 'PCPU:1', 'healed')],
                         [(m['to_host'], m['after'], m['result'])
                          for m in moves])
        server = self.admin_api.get_server(self.server['id'])
        self.assertEqual(('ACTIVE', 'compute2'), (
            server['status'], server['OS-EXT-SRV-ATTR:host']))
        self.assertEqual({'PCPU': 1}, self.cpu_usages(no_ht_rp))
        self.assertEqual({}, self.cpu_usages(self.ht_rp))

    def test_no_eligible_destination(self):
        dry_run, planned = self.heal('--dry-run')
        result, moves = self.heal()

        self.assertEqual(1, dry_run.returncode)
        self.assertEqual(1, result.returncode)
        for listed in (planned, moves):
            self.assertEqual(
                [(self.server['id'], 'no eligible destination: no host '
                  'without hyperthreads has a free PCPU')],
                [(m['server'], m['result']) for m in listed])
        self.assertStillOnVcpu()

    def test_failed_move_leaves_the_server_running(self):
        self.start_host_without_hyperthreads()
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'check_can_live_migrate_destination',
            side_effect=nova_exception.MigrationPreCheckError(
                reason='refused by the test')))

        result, moves = self.heal()

        self.assertEqual(1, result.returncode)
        move, = moves
        self.assertEqual(
            {'server': self.server['id'], 'from_host': 'compute1',
             'to_host': 'compute1', 'before': 'VCPU:1', 'after': 'VCPU:1',
             'result': 'failed, left ACTIVE on compute1: '
                       'compute_check_can_live_migrate_destination: '
                       'Migration pre-check error: refused by the test',
             'healed': False}, move)
        self.assertStillOnVcpu()
