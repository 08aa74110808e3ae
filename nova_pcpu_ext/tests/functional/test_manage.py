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

import json
import os
import signal
import subprocess
import time
import urllib.parse
import uuid

import fixtures
from lxml import etree
from nova import context as nova_context
from nova import exception as nova_exception
from nova.tests.functional import integrated_helpers
import testtools

from nova_pcpu_ext import compute
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
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

    def deleting(self, method, rp_uuid):
        """The command through a proxy that deletes ``rp_uuid`` for real.

        Through placement, just before placement gets the first ``method``
        of its inventories: placement answers that with its own 404.
        """
        path = '/resource_providers/%s/inventories' % rp_uuid
        deleted = []

        def delete_first(request_method, request_path):
            if (request_method, request_path) == (method, path) and \
                    not deleted:
                deleted.append(self.placement.call(
                    'DELETE', '/resource_providers/%s' % rp_uuid))

        proxy = self.useFixture(FaultyProxy(self.server.endpoint,
                                            delete_first))
        return proxy, Command(self, PROG, proxy.endpoint)

    def test_a_provider_deleted_before_its_inventory_is_read(self):
        """A note; the others are audited and fixed, nothing is left."""
        self.seed_damage()
        gone = self.placement.provider('compute3', {
            'VCPU': {'total': 8, 'allocation_ratio': 0.0}})
        proxy, manage = self.deleting('GET', gone)

        fixed = self.audit('--fix', manage=manage)

        self.assertIn(('GET', '/resource_providers/%s/inventories' % gone,
                       404), proxy.statuses)
        self.assertEqual((0, [
            ('compute1', 'failure', 'MEMORY_MB allocation_ratio 0.0 is not '
             'a positive number', 'set allocation_ratio to 1.0', True),
            ('compute1', 'failure', 'VCPU allocation_ratio 0.0 is not a '
             'positive number', 'set allocation_ratio to 4.0', True),
            ('compute2', 'warning', 'PCPU allocation_ratio 2.0 is not 1.0',
             'set allocation_ratio to 1.0', True),
            ('compute3', 'note', 'deleted during the run', 'none: skipped',
             False)]), fixed)

    def test_a_provider_deleted_before_its_inventory_is_written(self):
        """``--fix`` goes on past it, to the providers after it."""
        zero, pcpu = self.seed_damage()
        proxy, manage = self.deleting('PUT', zero)

        result = manage('placement', 'audit', '--fix')

        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn(('PUT', '/resource_providers/%s/inventories' % zero,
                       404), proxy.statuses)
        self.assertEqual({'PCPU': 1.0}, self.placement.ratios(pcpu))
        note, = [line for line in result.stdout.splitlines()
                 if line.startswith('| note ')]
        self.assertEqual(['note', 'compute1', 'deleted during the run',
                          'none: skipped'],
                         [cell.strip() for cell in note.split('|')[1:-1]])
        self.assertIn('FIXED: set allocation_ratio to 1.0', result.stdout)


class ListingPagesTest(operator_commands.OperatorCommandTestBase):
    """Compute API listings longer than a page of Nova's.

    Nova's ``[api] max_limit`` is 2, and its next links name an address
    that refuses connections, as behind a proxy terminating TLS without
    ``[api] compute_link_prefix``. compute1's service host is
    ``compute1``, its compute node ``compute1.example``, listed after a
    page of the others.
    """

    extension = False

    def start_service(self, name, host=None, **kwargs):
        if name == 'compute':
            host = host.partition('.')[0]
        return super().start_service(name, host=host, **kwargs)

    def test_every_page_read_at_the_command_s_endpoint(self):
        # The CPU sets are process-wide flags: the same for every host.
        for hostname in ('compute2', 'compute3', 'compute1.example'):
            self.start_host(hostname, dict(HYPERTHREADED, cpu_cores=6),
                            dedicated='0-7', shared='8-11')
        self.admin_api.microversion = '2.74'
        flavor = self._create_flavor(vcpu=1, extra_spec=ISOLATE)
        servers = {self._create_server(
            flavor_id=flavor, host='compute1', networks='none',
            api=self.admin_api)['id'] for _ in range(3)}
        self.flags(max_limit=2, compute_link_prefix='http://127.0.0.1:9/',
                   group='api')
        del self.compute_api.requests[:]

        whole_cloud = self.manage.json('heal', 'isolate', '--dry-run')
        by_host = self.manage.json('heal', 'isolate', '--dry-run', '--host',
                                   'compute1')

        for _code, plan in (whole_cloud, by_host):
            self.assertEqual(servers, {move['server'] for move in plan})
        asked = self.compute_api.requests
        # Each from a listing of two pages, none asked about alone.
        self.assertEqual([], [path for path in asked if path in {
            '/v2.1/servers/' + server for server in servers}])
        self.assertEqual(2, len([path for path in asked if path.startswith(
            '/v2.1/servers/detail?all_tenants=1&limit=1000&')]))
        self.assertEqual(2, len([path for path in asked if path.startswith(
            '/v2.1/servers/detail?all_tenants=1&host=compute1')]))
        self.assertEqual(['/v2.1/os-hypervisors/detail', (
            '/v2.1/os-hypervisors/detail?marker=%s' % self.admin_api.api_get(
                '/os-hypervisors?hypervisor_hostname_pattern=compute3'
            ).body['hypervisors'][0]['id'])],
            [path for path in asked if 'hypervisors' in path])


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
    """Isolate servers stock Nova put on VCPU, moved with the extension.

    Stock Nova without its late check places the servers; the scheduler is
    then restarted with the extension, as an operator enabling it would.
    compute1's service host is ``compute1``, its compute node (and resource
    provider) ``compute1.example``, as on clouds whose libvirt names hosts
    by FQDN.
    """

    extension = False
    # Moves run asynchronously behind the API's 202, as in a deployment.
    CAST_AS_CALL = False

    def setUp(self):
        super().setUp()
        self.useFixture(LiveMigrationOverFakeLibvirt(self.computes))
        # As Nova's functional tests do: there are no disks to copy.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'migrate_disk_and_power_off', return_value='{}'))
        # Four dedicated cores: an isolate server takes a whole one.
        self.ht_rp = self.start_host(
            'compute1.example', dict(HYPERTHREADED, cpu_cores=6),
            dedicated='0-7', shared='8-11')

    def start_service(self, name, host=None, **kwargs):
        if name == 'compute':
            host = host.partition('.')[0]
        return super().start_service(name, host=host, **kwargs)

    def start_host_without_hyperthreads(self):
        # The CPU sets are process-wide flags: the same as compute1's, or
        # compute1 would drop its VCPU inventory on its next update.
        return self.start_host('compute2', dict(NO_HYPERTHREADS,
                                                cpu_cores=12),
                               dedicated='0-7', shared='8-11')

    def cpu_usages(self, rp_uuid):
        return {rc: used for rc, used in self.usages(rp_uuid).items()
                if 'CPU' in rc}

    def heal(self, *args, **kwargs):
        result = self.manage('heal', 'isolate', '--format', 'json', *args,
                             **kwargs)
        self.assertTrue(result.stdout, result.stderr)
        return result, json.loads(result.stdout)

    def where(self, server):
        server = self.admin_api.get_server(server['id'])
        return server['status'], server['OS-EXT-SRV-ATTR:host']

    def compute_proxy(self, respond):
        """``self.manage`` through a :class:`FaultyProxy` of the API."""
        upstream = self.manage.compute_endpoint
        proxy = self.useFixture(FaultyProxy(upstream.rpartition('/')[0],
                                            respond))
        self.manage.compute_endpoint = proxy.endpoint + '/v2.1'
        return proxy

    def test_heal_moves_the_server_onto_pcpu(self):
        server = self.boot(ISOLATE)
        self.enable_extension()
        no_ht_rp = self.start_host_without_hyperthreads()

        dry_run, planned = self.heal('--dry-run')
        self.assertEqual(('ACTIVE', 'compute1'), self.where(server))
        result, moves = self.heal()
        again = self.manage('heal', 'isolate')

        self.assertEqual(1, dry_run.returncode)
        self.assertEqual([(server['id'], 'compute1', 'ACTIVE', 'VCPU:1',
                           'dry run: would live-migrate (room on compute2)')],
                         [(m['server'], m['from_host'], m['status'],
                           m['before'], m['result']) for m in planned])
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([{'server': server['id'], 'from_host': 'compute1',
                           'status': 'ACTIVE', 'to_host': 'compute2',
                           'before': 'VCPU:1', 'after': 'PCPU:1',
                           'result': 'healed', 'healed': True,
                           'cell': None}], moves)
        self.assertIn('[1/1] %s: healed' % server['id'], result.stderr)
        self.assertEqual(('ACTIVE', 'compute2'), self.where(server))
        self.assertEqual({}, self.cpu_usages(self.ht_rp))
        self.assertEqual({'PCPU': 1}, self.cpu_usages(no_ht_rp))
        self.assertEqual((0, 'Nothing found.\n'),
                         (again.returncode, again.stdout))

    def test_servers_read_from_nova_s_databases(self):
        """Found in a copy of the databases, moved through the API."""
        server = self.boot(ISOLATE)
        self.enable_extension()
        no_ht_rp = self.start_host_without_hyperthreads()

        result, moves = self.heal(extra_conf=self.nova_databases())

        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([(server['id'], 'compute1', 'compute2', 'healed')],
                         [(m['server'], m['from_host'], m['to_host'],
                           m['result']) for m in moves])
        self.assertEqual({'PCPU': 1}, self.cpu_usages(no_ht_rp))

    def test_moves_made_as_the_operator(self):
        """Nova records the cloud of clouds.yaml as the mover."""
        server = self.boot(ISOLATE)
        self.enable_extension()
        self.start_host_without_hyperthreads()
        clouds = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'clouds.yaml')
        with open(clouds, 'w') as out:
            token = self.compute_api.OPERATOR_TOKEN
            # openstacksdk before 4.0 takes the token from auth_token.
            json.dump({'clouds': {'operator': {
                'auth_type': 'admin_token', 'auth_token': token, 'auth': {
                    'endpoint': self.compute_api.endpoint,
                    'token': token}}}}, out)

        unknown = self.manage('--os-cloud', 'nowhere', 'heal', 'isolate',
                              env={'OS_CLIENT_CONFIG_FILE': clouds})
        result, moves = self.heal(env={'OS_CLIENT_CONFIG_FILE': clouds,
                                       'OS_CLOUD': 'operator'})

        operator_commands.assert_one_line_error(
            self, unknown, 'nova-pcpu-ext-manage', '--os-cloud nowhere: ')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual(['healed'], [move['result'] for move in moves])
        # The [placement] credentials' user is ``admin``.
        self.assertEqual(['operator'], [
            action['user_id'] for action in
            self.api.get_instance_actions(server['id'])
            if action['action'] == 'live-migration'])

    def test_each_state_moves_as_nova_allows(self):
        """ACTIVE and PAUSED live, SHUTOFF cold; each ends as it was."""
        active, paused, shutoff, locked = (self.boot(ISOLATE)
                                           for _ in range(4))
        self.admin_api.post_server_action(paused['id'], {'pause': None})
        self._wait_for_state_change(paused, 'PAUSED')
        self.admin_api.post_server_action(shutoff['id'], {'os-stop': None})
        self._wait_for_state_change(shutoff, 'SHUTOFF')
        self.admin_api.post_server_action(locked['id'], {'lock': None})
        self.enable_extension()
        no_ht_rp = self.start_host_without_hyperthreads()

        result, moves = self.heal('--max-parallel', '2')

        self.assertEqual(3, result.returncode, result.stderr)
        self.assertEqual(
            {active['id']: ('ACTIVE', 'compute2', 'PCPU:1', 'healed'),
             paused['id']: ('PAUSED', 'compute2', 'PCPU:1', 'healed'),
             shutoff['id']: ('SHUTOFF', 'compute2', 'PCPU:1', 'healed'),
             locked['id']: ('ACTIVE', '', '', 'skipped: locked')},
            {m['server']: (m['status'], m['to_host'], m['after'],
                           m['result']) for m in moves})
        self.assertEqual(('ACTIVE', 'compute2'), self.where(active))
        self.assertEqual(('PAUSED', 'compute2'), self.where(paused))
        self.assertEqual(('SHUTOFF', 'compute2'), self.where(shutoff))
        self.assertEqual(('ACTIVE', 'compute1'), self.where(locked))
        self.assertEqual({'PCPU': 3}, self.cpu_usages(no_ht_rp))
        self.assertEqual({'VCPU': 1}, self.cpu_usages(self.ht_rp))
        actions = {action['action'] for server in (active, paused, shutoff)
                   for action in self.admin_api.api_get(
                       '/servers/%s/os-instance-actions' % server['id']
                   ).body['instanceActions']}
        self.assertEqual({'create', 'pause', 'stop', 'live-migration',
                          'migrate', 'confirmResize'}, actions)

    def test_max_count_moves_that_many_and_leaves_the_rest(self):
        """As heal_allocations --max-count: run again until exit 0."""
        servers = {self.boot(ISOLATE)['id'] for _ in range(2)}
        self.enable_extension()
        no_ht_rp = self.start_host_without_hyperthreads()

        zero = self.manage('heal', 'isolate', '--max-count', '0')
        dry_run, planned = self.heal('--max-count', '1', '--dry-run')
        first, moved = self.heal('--max-count', '1')

        self.assertEqual(2, zero.returncode, zero.stderr)
        self.assertIn("argument --max-count: '0': give a whole number of 1 "
                      "or more", zero.stderr)
        self.assertEqual(1, dry_run.returncode, dry_run.stderr)
        left = 'not attempted: --max-count 1 reached; left for the next run'
        self.assertEqual([left], [m['result'] for m in planned
                                  if not m['result'].startswith('dry run')])
        self.assertEqual(1, first.returncode, first.stderr)
        self.assertEqual(['healed', left],
                         sorted(m['result'] for m in moved))
        (healed,) = [m['server'] for m in moved if m['healed']]
        (rest,) = servers - {healed}
        self.assertEqual(('ACTIVE', 'compute1'), self.where({'id': rest}))

        second, moved_next = self.heal('--max-count', '1')

        self.assertEqual(0, second.returncode, second.stderr)
        self.assertEqual([(rest, 'compute2', 'healed')],
                         [(m['server'], m['to_host'], m['result'])
                          for m in moved_next])
        self.assertEqual({'PCPU': 2}, self.cpu_usages(no_ht_rp))
        self.assertEqual({}, self.cpu_usages(self.ht_rp))

    def test_cold_migration(self):
        server = self.boot(ISOLATE)
        self.enable_extension()
        no_ht_rp = self.start_host_without_hyperthreads()

        result, moves = self.heal('--cold')

        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([('compute2', 'PCPU:1', 'healed')],
                         [(m['to_host'], m['after'], m['result'])
                          for m in moves])
        self.assertEqual(('ACTIVE', 'compute2'), self.where(server))
        self.assertEqual({'PCPU': 1}, self.cpu_usages(no_ht_rp))
        self.assertEqual({}, self.cpu_usages(self.ht_rp))

    def test_a_resize_nova_confirmed_first(self):
        """[DEFAULT] resize_confirm_window confirms before the command."""
        server = self.boot(ISOLATE)
        self.admin_api.post_server_action(server['id'], {'os-stop': None})
        self._wait_for_state_change(server, 'SHUTOFF')
        self.enable_extension()
        self.start_host_without_hyperthreads()
        self.flags(resize_confirm_window=1)

        def confirm_first(method, path):
            if path.endswith('/action') and method == 'POST' and \
                    self.where(server)[0] == 'VERIFY_RESIZE':
                time.sleep(1.1)
                self.computes['compute2'].manager._poll_unconfirmed_resizes(
                    nova_context.get_admin_context())
                self._wait_for_state_change(server, 'SHUTOFF')

        proxy = self.compute_proxy(confirm_first)
        result, moves = self.heal()

        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([('SHUTOFF', 'compute2', 'healed')],
                         [(m['status'], m['to_host'], m['result'])
                          for m in moves])
        self.assertEqual(('SHUTOFF', 'compute2'), self.where(server))
        # The command's confirmation came second and was refused.
        self.assertIn(('POST', '/v2.1/servers/%s/action' % server['id'], 409),
                      proxy.statuses)

    def test_a_server_moved_meanwhile_is_skipped(self):
        server = self.boot(ISOLATE)
        self.enable_extension()
        self.start_host_without_hyperthreads()

        def move_first(method, path):
            if path == '/v2.1/servers/%s' % server['id'] and \
                    self.where(server)[1] == 'compute1':
                self.admin_api.microversion = '2.53'
                self.admin_api.post_server_action(server['id'], {
                    'os-migrateLive': {'host': None,
                                       'block_migration': 'auto'}})
                self._wait_for_server_parameter(server, {
                    'OS-EXT-SRV-ATTR:host': 'compute2', 'status': 'ACTIVE'})

        self.compute_proxy(move_first)
        result, moves = self.heal()

        self.assertEqual(3, result.returncode, result.stderr)
        self.assertEqual(
            [(server['id'], 'skipped: moved to compute2 since the run '
              'started')], [(m['server'], m['result']) for m in moves])
        self.assertEqual(('ACTIVE', 'compute2'), self.where(server))

    def test_hosts_by_service_host_or_node(self):
        server = self.boot(ISOLATE)
        self.enable_extension()

        by_host = self.heal('--dry-run', '--host', 'compute1')[1]
        by_node = self.heal('--dry-run', '--host', 'compute1.example')[1]
        audit_by_host = self.manage('placement', 'audit', '--host',
                                    'compute1')
        unknown = [
            self.manage('heal', 'isolate', '--host', 'compute9'),
            self.manage('placement', 'audit', '--host', 'compute9'),
            self.manage('placement', 'audit', '--provider', server['id'])]

        self.assertEqual([server['id']], [m['server'] for m in by_host])
        self.assertEqual(by_host, by_node)
        self.assertEqual((0, 'Nothing found.\n'),
                         (audit_by_host.returncode, audit_by_host.stdout))
        for result, message in zip(unknown, [
                '--host compute9: no compute host or compute node has '
                'this name.'] * 2 + [
                '--provider %s: no resource provider has this UUID.' %
                server['id']]):
            operator_commands.assert_one_line_error(self, result, PROG,
                                                    message)

    def test_no_eligible_destination(self):
        """The only host without hyperthreads is disabled."""
        server = self.boot(ISOLATE)
        self.enable_extension()
        self.start_host_without_hyperthreads()
        self.disable_service('compute2')

        dry_run, planned = self.heal('--dry-run')
        result, moves = self.heal()

        self.assertEqual(3, dry_run.returncode)
        self.assertEqual(3, result.returncode)
        for listed in (planned, moves):
            self.assertEqual(
                [(server['id'], 'no eligible destination: no enabled host '
                  'without hyperthreads has room for DISK_GB:20, '
                  'MEMORY_MB:2048, PCPU:1')],
                [(m['server'], m['result']) for m in listed])
        self.assertEqual(('ACTIVE', 'compute1'), self.where(server))

    def test_nested_and_sharing_resources(self):
        """A device nested under each node, a pool shared by both.

        As Neutron makes its providers: a child of each compute node, and
        a provider sharing through an aggregate. The flavor asks for one
        of each, the device in a granular group.
        """
        placement = operator_commands.Placement(self.placement_server)
        pool = placement.provider(
            'licenses', {'CUSTOM_LICENSE': {'total': 10}},
            traits=['MISC_SHARES_VIA_AGGREGATE'])
        aggregate = str(uuid.uuid4())
        devices = {}

        def add_host(name, rp_uuid):
            devices[name] = placement.provider(
                '%s:device' % name, {'CUSTOM_DEVICE': {'total': 2}},
                parent=rp_uuid)
            placement.join_aggregate(rp_uuid, aggregate)

        placement.join_aggregate(pool, aggregate)
        add_host('compute1.example', self.ht_rp)
        server = self.boot(dict(ISOLATE, **{
            'resources1:CUSTOM_DEVICE': '1',
            'resources:CUSTOM_LICENSE': '1'}))
        self.enable_extension()
        no_ht_rp = self.start_host_without_hyperthreads()
        add_host('compute2', no_ht_rp)

        _dry_run, planned = self.heal('--dry-run')
        result, moves = self.heal()

        self.assertEqual(
            [(server['id'], 'dry run: would live-migrate (room on '
              'compute2)')], [(m['server'], m['result']) for m in planned])
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual([('compute2', 'PCPU:1', 'healed')],
                         [(m['to_host'], m['after'], m['result'])
                          for m in moves])
        self.assertEqual(
            {no_ht_rp: {'PCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
             devices['compute2']: {'CUSTOM_DEVICE': 1},
             pool: {'CUSTOM_LICENSE': 1}},
            {rp: allocation['resources'] for rp, allocation in
             self.placement.get('/allocations/%s' % server['id']).body[
                 'allocations'].items()})

    def test_failed_move_leaves_the_server_running(self):
        server = self.boot(ISOLATE)
        self.enable_extension()
        self.start_host_without_hyperthreads()
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'check_can_live_migrate_destination',
            side_effect=nova_exception.MigrationPreCheckError(
                reason='refused by the test')))

        result, moves = self.heal()

        self.assertEqual(3, result.returncode)
        self.assertEqual(
            [{'server': server['id'], 'from_host': 'compute1',
              'status': 'ACTIVE', 'to_host': 'compute1', 'before': 'VCPU:1',
              'after': 'VCPU:1',
              'result': 'failed, left ACTIVE on compute1: '
                        'compute_check_can_live_migrate_destination: '
                        'Migration pre-check error: refused by the test',
              'healed': False, 'cell': None}], moves)
        self.assertEqual(('ACTIVE', 'compute1'), self.where(server))
        self.assertEqual({'VCPU': 1}, self.cpu_usages(self.ht_rp))


class HealIsolateLegacyOnlyTest(operator_commands.OperatorCommandTestBase,
                                integrated_helpers.InstanceHelperMixin):
    """In legacy_only mode a legacy host with hyperthreads takes the victim.

    Nova pins an ``isolate`` server there on one thread per core, so the
    move heals it. The computes run the extension's mixins from the start,
    the scheduler stock Nova until the victim booted on compute1
    (``legacy`` disabled meanwhile).
    """

    extension = False
    CAST_AS_CALL = False

    def setUp(self):
        super().setUp()
        compute.activate_plugins()
        # As Nova's functional tests do: there are no disks to copy.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'migrate_disk_and_power_off', return_value='{}'))
        self.legacy_rp = self.start_host('legacy', HYPERTHREADED,
                                         vcpu_pin_set='0-3')
        self.disable_service('legacy')
        self.start_hyperthreaded_host()
        self.victim = self.boot(ISOLATE)
        self.extension = True
        self.flags(isolate_fallback_mode='legacy_only', group='pcpu_ext')
        self.scheduler.stop()
        self.scheduler = self._setup_scheduler_service()
        service, = self.admin_api.get_services(binary='nova-compute',
                                               host='legacy')
        self.admin_api.put_service(service['id'], {'status': 'enabled'})

    def test_healed_on_a_legacy_host_with_hyperthreads(self):
        # The CPU options are process-wide: legacy's, or its update during
        # the move would report PCPU. compute1, the source, may lose it.
        self.flags(cpu_dedicated_set=None, cpu_shared_set=None,
                   group='compute')
        self.flags(vcpu_pin_set='0-3')

        result = self.manage(
            'heal', 'isolate', '--cold', '--format', 'json',
            extra_conf='[pcpu_ext]\nisolate_fallback_mode = legacy_only\n')

        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual(
            [(self.victim['id'], 'compute1', 'legacy', 'VCPU:1', 'VCPU:1',
              'healed')],
            [(m['server'], m['from_host'], m['to_host'], m['before'],
              m['after'], m['result']) for m in json.loads(result.stdout)])
        self.assertEqual('VCPU', next(
            rc for rc in self.usages(self.legacy_rp) if 'CPU' in rc))


class HealLegacyIsolationTest(operator_commands.OperatorCommandTestBase,
                              integrated_helpers.InstanceHelperMixin):
    """Legacy isolation and the bug's victim, told apart.

    ``legacy`` pins from ``vcpu_pin_set``: Nova pins an isolate server
    there on one thread per core and reserves the siblings. ``compute1``
    reports PCPU, so an isolate server on its VCPU is the bug's. Each host
    is started, and its server booted, while the process-wide CPU options
    are its own.
    """

    extension = False
    CAST_AS_CALL = False

    def setUp(self):
        super().setUp()
        self.useFixture(LiveMigrationOverFakeLibvirt(self.computes))
        self.start_host('legacy', HYPERTHREADED, vcpu_pin_set='0-3')
        self.legacy = self.boot(ISOLATE)
        # Disabled, so that the victim lands on compute1.
        self.disable_service('legacy')
        self.start_hyperthreaded_host()
        self.victim = self.boot(ISOLATE)
        self.extension = True
        self.scheduler.stop()
        self.scheduler = self._setup_scheduler_service()
        self.no_ht_rp = self.start_host(
            'compute2', dict(NO_HYPERTHREADS, cpu_cores=8), dedicated='0-3',
            shared='4-7')

    def heal(self, *args):
        result = self.manage('heal', 'isolate', '--format', 'json', *args)
        self.assertTrue(result.stdout, result.stderr)
        return result.returncode, [(m['server'], m['from_host'],
                                    m['result'])
                                   for m in json.loads(result.stdout)]

    def host(self, server):
        return self.admin_api.get_server(server['id'])['OS-EXT-SRV-ATTR:host']

    def test_heal_moves_the_victim_and_leaves_legacy_isolation(self):
        skipped = (self.legacy['id'], 'legacy', 'skipped: isolated as Nova '
                   'means it on a vcpu_pin_set host (one thread per core, '
                   'siblings reserved); --include-legacy moves it')

        dry_run = self.heal('--dry-run')
        healed = self.heal()
        again = self.heal()
        included = self.heal('--dry-run', '--include-legacy')

        self.assertEqual((1, [
            (self.victim['id'], 'compute1',
             'dry run: would live-migrate (room on compute2)'), skipped]),
            dry_run)
        self.assertEqual(
            (0, [(self.victim['id'], 'compute1', 'healed'), skipped]),
            healed)
        self.assertEqual((0, [skipped]), again)
        self.assertEqual((1, [(self.legacy['id'], 'legacy', 'dry run: would '
                               'live-migrate (room on compute2)')]), included)
        self.assertEqual('compute2', self.host(self.victim))
        self.assertEqual('legacy', self.host(self.legacy))
        self.assertEqual({'PCPU': 1}, self.cpu_usages(self.no_ht_rp))

    def cpu_usages(self, rp_uuid):
        return {rc: used for rc, used in self.usages(rp_uuid).items()
                if 'CPU' in rc}


class HealIsolateInterruptTest(operator_commands.OperatorCommandTestBase,
                               integrated_helpers.InstanceHelperMixin):
    """Ctrl-C during ``heal isolate``, while a live migration runs.

    The hypervisor holds each victim's live migration, as a long one
    would take, until the test releases it.
    """

    extension = False
    CAST_AS_CALL = False

    def setUp(self):
        super().setUp()
        self.useFixture(LiveMigrationOverFakeLibvirt(self.computes))
        self.start_hyperthreaded_host()
        self.victims = {server['id']: server
                        for server in (self.boot(ISOLATE), self.boot(ISOLATE))}
        self.extension = True
        self.scheduler.stop()
        self.scheduler = self._setup_scheduler_service()
        self.start_host('compute2', dict(NO_HYPERTHREADS, cpu_cores=8),
                        dedicated='0-3', shared='4-7')
        # A runner ignoring SIGINT (nohup, a background job) passes that on
        # to its children: the command is to hear it as from a terminal.
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.addCleanup(signal.signal, signal.SIGINT, signal.SIG_IGN)

    def hold_live_migrations(self):
        """A gate on each victim's migration in fakelibvirt, by server."""
        libvirt = self.computes['compute1'].driver._host.get_connection()
        return {victim: base.Gate(self, libvirt.lookupByUUIDString(victim),
                                  'migrateToURI3') for victim in self.victims}

    def start_manage(self, *args):
        """The command as a process of its own; its output goes to files."""
        folder = self.useFixture(fixtures.TempDir()).path
        paths = [os.path.join(folder, name) for name in ('stdout', 'stderr')]
        with open(paths[0], 'w') as stdout, open(paths[1], 'w') as stderr:
            process = subprocess.Popen(
                self.manage.argv(*args), stdin=subprocess.DEVNULL,
                stdout=stdout, stderr=stderr)
        self.addCleanup(process.wait)
        self.addCleanup(process.kill)
        return (process, *paths)

    def first_held(self, gates, process, stderr):
        """The server whose migration the hypervisor holds first."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            for victim, gate in gates.items():
                if gate.reached.is_set():
                    return victim
            time.sleep(0.1)
        with open(stderr) as err:
            self.fail('no migration started: %s' % err.read())

    def test_ctrl_c_prints_every_row_and_exits_130(self):
        gates = self.hold_live_migrations()
        process, stdout, stderr = self.start_manage(
            'heal', 'isolate', '--format', 'json', '--timeout', '600')
        moving = self.first_held(gates, process, stderr)

        process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        code = process.wait(120)
        took = time.monotonic() - interrupted

        with open(stdout) as out, open(stderr) as err:
            printed, progress = out.read(), err.read()
        self.assertEqual(130, code, progress)
        self.assertNotIn('Traceback', progress)
        self.assertIn('%s: live-migrating ACTIVE from compute1' % moving,
                      progress)
        # The move's --timeout is not waited for, nor the migration.
        self.assertLess(took, 15)
        other, = set(self.victims) - {moving}
        self.assertEqual(
            {moving: ('compute1', 'interrupted while running: MIGRATING '
                      '(migrating) when last seen; check it with openstack '
                      'server show'),
             other: ('', 'not started: the run was interrupted')},
            {m['server']: (m['to_host'], m['result'])
             for m in json.loads(printed)})
        # Nova goes on with the move started; the other was never tried.
        gates[moving].release.set()
        self._wait_for_server_parameter(self.victims[moving], {
            'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
            'OS-EXT-SRV-ATTR:host': 'compute2'}, max_retries=60)
        self.assertFalse(gates[other].reached.is_set())
        self.assertEqual('compute1', self.admin_api.get_server(other)[
            'OS-EXT-SRV-ATTR:host'])
