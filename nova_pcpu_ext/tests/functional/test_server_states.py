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

"""The same findings for a server in every state, however it is read.

Stock Nova without its late check leaves one victim of bug 1889633 per
state a server can be in (:mod:`..differential.states`); ``upgrade
check``, ``heal isolate --dry-run`` and ``placement audit`` then read the
cloud through the Compute API and from Nova's databases, and must judge
each alike; ``placement audit --fix`` leaves nothing to fix, and ``heal
isolate`` moves servers ``upgrade check`` no longer finds. One cloud holds
every state here; ``tox -e explore -- --states N`` runs generated clouds
of some of them.
"""

from nova_pcpu_ext.tests.functional import base  # noqa: F401  isort:skip

import collections
import json
import re
import threading
import time
import uuid

import fixtures
from nova.compute import task_states
from nova.compute import vm_states
from nova.conductor import manager as conductor_manager
from nova import context as nova_context
from nova import objects
from nova import test
from nova.tests.functional import integrated_helpers
from nova.virt.libvirt import driver

from nova_pcpu_ext import nova_db
from nova_pcpu_ext.tests.differential import states
from nova_pcpu_ext.tests.differential.states import IN_PLACE
from nova_pcpu_ext.tests.differential.states import MOVES
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests.functional.base import NO_HYPERTHREADS
from nova_pcpu_ext.tests.functional import operator_commands
from nova_pcpu_ext.tests.functional.test_manage import (
    LiveMigrationOverFakeLibvirt)
from nova_pcpu_ext.tests.functional import test_status
from nova_pcpu_ext.tests.functional.test_status import check
from nova_pcpu_ext.tests.functional.test_status import CHECKS

ON_HT = CHECKS[3]
#: Seven cores of two threads, as many as Nova's fake host has; six
#: dedicated, and an isolate server takes a whole one. The CPU sets are
#: process-wide flags: every host has them.
HOST = dict(HYPERTHREADED, cpu_cores=7)
DEDICATED_SET, SHARED_SET = '0-11', '12-13'
UUID = re.compile('[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                  '[0-9a-f]{12}')
#: What ``heal isolate`` finds of the server of each state: a victim where
#: it runs, or one holding resources of a host it does not run on.
EXPECTED = dict(
    dict.fromkeys(('ACTIVE', 'SHUTOFF', 'PAUSED', 'SUSPENDED', 'RESCUED',
                   'ERROR with a host', 'SHELVED', 'SOFT_DELETED',
                   'flavor deleted', 'image deleted', 'VERIFY_RESIZE'),
                  ['victim']),
    evacuated=['elsewhere', 'victim'],
    **dict.fromkeys(('resize in flight', 'cold migration in flight',
                     'live migration in flight'), ['elsewhere']),
    **dict.fromkeys(('SHELVED_OFFLOADED', 'ERROR without a host',
                     'BUILD before a host', 'consumer without a server'),
                    []))
#: The actions after an ACTIVE boot that leave a server in a state, each
#: with the status it waits for.
ACTIONS = {
    'SHUTOFF': [({'os-stop': None}, 'SHUTOFF')],
    'PAUSED': [({'pause': None}, 'PAUSED')],
    'SUSPENDED': [({'suspend': None}, 'SUSPENDED')],
    'RESCUED': [({'rescue': None}, 'RESCUE')],
    'ERROR with a host': [({'os-resetState': {'state': 'error'}}, 'ERROR')],
    'SHELVED': [({'shelve': None}, 'SHELVED')],
    'SHELVED_OFFLOADED': [({'shelve': None}, 'SHELVED'),
                          ({'shelveOffload': None}, 'SHELVED_OFFLOADED')],
}
#: What ``heal isolate`` does with the server of each state, the cloud
#: settled and the extension enabled: moved where Nova can migrate it.
HEALED = dict(
    dict.fromkeys(('ACTIVE', 'PAUSED', 'SHUTOFF', 'flavor deleted',
                   'image deleted', 'live migration in flight',
                   'BUILD before a host'), ['healed']),
    **{state: ['skipped: %s servers cannot be migrated' % status]
       for state, status in (
           ('ERROR with a host', 'ERROR'), ('RESCUED', 'RESCUE'),
           ('SHELVED', 'SHELVED'), ('SOFT_DELETED', 'SOFT_DELETED'),
           ('SUSPENDED', 'SUSPENDED'), ('VERIFY_RESIZE', 'VERIFY_RESIZE'),
           ('resize in flight', 'VERIFY_RESIZE'),
           ('cold migration in flight', 'VERIFY_RESIZE'))},
    evacuated=['healed', 'skipped: runs on compute2, not on compute4, '
               'whose resources it holds: left by a move; an evacuation\'s '
               'stays until the compute of compute4 starts again'])
#: What separates the servers a check names, and them from the words
#: before and after them.
LISTED = re.compile(r'\. |: |; |, | and ')
ISOLATE_IMAGE = {'hw_cpu_policy': 'dedicated',
                 'hw_cpu_thread_policy': 'isolate'}


class Hold(object):
    """Holds the calls of a method for some servers until each is freed.

    ``server_of(*args, **kwargs)`` names the server of a call; the calls
    of other servers run at once, but the first call after
    :meth:`hold_next` (a server whose UUID the caller cannot know before
    the call is made). ``result``, if given, stands in for the method.
    """

    def __init__(self, test, cls, name, server_of, result=None):
        self.servers = set()
        self.lock = threading.Lock()
        self.next = False
        self.reached = collections.defaultdict(threading.Event)
        self.freed = collections.defaultdict(threading.Event)
        # Never leave a service thread waiting behind a failed test.
        test.addCleanup(lambda: [event.set() for event in
                                 list(self.freed.values())])
        run = result or getattr(cls, name)

        def held(*args, **kwargs):
            server = server_of(*args, **kwargs)
            with self.lock:
                if self.next:
                    self.servers.add(server)
                    self.next = False
            if server in self.servers:
                self.reached[server].set()
                self.freed[server].wait(base.TIMEOUT)
            return run(*args, **kwargs)

        test.useFixture(fixtures.MonkeyPatch(
            '%s.%s.%s' % (cls.__module__, cls.__name__, name), held))

    def hold_next(self):
        with self.lock:
            self.next = True

    def wait(self, test, server):
        test.assertTrue(self.reached[server['id']].wait(base.TIMEOUT),
                        'never held: %s' % server['id'])

    def free(self, server):
        self.freed[server['id']].set()


class ServerStatesTest(operator_commands.OperatorCommandTestBase,
                       integrated_helpers.InstanceHelperMixin):
    """One isolate victim per state, judged alike by both reading paths."""

    extension = False
    # Moves and builds run behind the API's 202, so some can be held.
    CAST_AS_CALL = False
    # A server in every state, each command run both ways: 122 s on CI
    # with two workers, 231 s beside two other workers on a slower
    # two-core machine, near the suite's OS_TEST_TIMEOUT.
    TIMEOUT_SCALING_FACTOR = 2

    def setUp(self):
        super().setUp()
        self.useFixture(LiveMigrationOverFakeLibvirt(self.computes))
        # A deleted server is SOFT_DELETED until reclaimed; a shelved one
        # stays on its host until offloaded.
        self.flags(reclaim_instance_interval=3600)
        self.flags(shelved_offload_time=-1)
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        # 2.30: a live migration's block_migration may be auto, a service
        # is forced down by host and binary, an evacuated server is ACTIVE
        # again (SHUTOFF from 2.95), and a server needs no network.
        self.admin_api.microversion = '2.30'
        # Held on the source before the disks would be copied; the others
        # go on at once, with no disks to copy, as in Nova's tests.
        self.disks = Hold(
            self, driver.LibvirtDriver, 'migrate_disk_and_power_off',
            lambda _driver, _context, instance, *args, **kwargs:
            instance.uuid, result=lambda *args, **kwargs: '{}')
        # Nova's fake host keeps no instance files to rescue from: the
        # hypervisor's part is done at once, Nova's own runs.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.rescue',
            lambda *args, **kwargs: None))
        # Held once the scheduler claimed resources, before the build
        # request becomes an instance of the cell: BUILD without a host.
        self.scheduled = Hold(
            self, conductor_manager.ComputeTaskManager,
            '_schedule_instances',
            lambda _manager, _context, spec, *args, **kwargs:
            spec.instance_uuid)
        # Room for the servers booted first, which the scheduler spreads.
        for host in states.HOSTS:
            self.start_host(host, HOST, DEDICATED_SET, SHARED_SET)

    def flavor(self, extra_spec=ISOLATE, vcpu=1):
        return self._create_flavor(vcpu=vcpu, memory_mb=256, disk=1,
                                   ephemeral=0, extra_spec=extra_spec)

    def post(self, flavor_id=None, image_uuid=None, az=None):
        """A server being created, not waited for."""
        server = self._build_server(
            flavor_id=flavor_id or self.flavor(), image_uuid=image_uuid,
            az=az)
        # An admin's: a host is named.
        return self.admin_api.post_server({'server': server})

    def action(self, server, body, status):
        self.admin_api.post_server_action(server['id'], body)
        return self.wait_for_status(server, status)

    def wait_for_status(self, server, status):
        """The server once it has ``status``.

        Nova's helpers wait for a fault too where the status is ERROR,
        and a reset to ERROR leaves none.
        """
        deadline = time.monotonic() + base.TIMEOUT
        while True:
            shown = self.admin_api.get_server(server['id'])
            if shown['status'] == status:
                return shown
            self.assertLess(time.monotonic(), deadline, shown)
            time.sleep(0.1)

    def isolate_image(self):
        return self.glance.create(None, {
            'name': 'isolate', 'status': 'active', 'size': 1,
            'container_format': 'bare', 'disk_format': 'raw',
            'visibility': 'public', 'properties': ISOLATE_IMAGE})

    def states_in_place(self, scenario):
        """``{state: server}`` of the servers that stay where they run."""
        image = self.isolate_image()
        deleted_flavor = self.flavor()
        # One after the other: Nova's cell database fixture can deadlock
        # under builds at the same time in native threads.
        servers = {}
        for name in IN_PLACE:
            if name not in scenario.states:
                continue
            flavor_id, image_uuid = {
                'flavor deleted': (deleted_flavor, None),
                'image deleted': (self.flavor(extra_spec={}), image['id']),
            }.get(name, (None, None))
            servers[name] = self._wait_for_state_change(self.post(
                flavor_id=flavor_id, image_uuid=image_uuid,
                az='nova:' + scenario.host_of(name)), 'ACTIVE')
        for name, server in servers.items():
            for body, status in ACTIONS.get(name, ()):
                self.action(server, body, status)
        if 'SOFT_DELETED' in servers:
            self.admin_api.delete_server(servers['SOFT_DELETED']['id'])
            self._wait_for_state_change(servers['SOFT_DELETED'],
                                        'SOFT_DELETED')
        self.admin_api.delete_flavor(deleted_flavor)
        self.glance.delete(None, image['id'])
        return servers

    def evacuated(self):
        """A server evacuated from compute4, which stays down."""
        self.start_host('compute4', HOST, DEDICATED_SET, SHARED_SET)
        server = self._wait_for_state_change(
            self.post(az='nova:compute4'), 'ACTIVE')
        self.computes['compute4'].stop()
        self.admin_api.force_down_service('compute4', 'nova-compute', True)
        return self._evacuate_server(server, expected_state='ACTIVE')

    def moves(self, servers):
        """Each move of ``servers``, those in flight held.

        To compute5 or wherever else there is room.
        """
        if not set(MOVES) & set(servers):
            return
        self.start_host('compute5', HOST, DEDICATED_SET, SHARED_SET)
        if 'VERIFY_RESIZE' in servers:
            self.action(servers['VERIFY_RESIZE'],
                        {'resize': {'flavorRef': self.flavor(vcpu=2)}},
                        'VERIFY_RESIZE')
        held = {
            'resize in flight': lambda: {
                'resize': {'flavorRef': self.flavor(vcpu=2)}},
            'cold migration in flight': lambda: {'migrate': None},
        }
        for name, body in held.items():
            if name in servers:
                self.disks.servers.add(servers[name]['id'])
                self.admin_api.post_server_action(servers[name]['id'],
                                                  body())
        live = servers.get('live migration in flight')
        if live:
            libvirt = self.computes[live['OS-EXT-SRV-ATTR:host']].driver.\
                _host.get_connection()
            self.live = base.Gate(
                self, libvirt.lookupByUUIDString(live['id']), 'migrateToURI3')
            self.admin_api.post_server_action(live['id'], {
                'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
            self.assertTrue(self.live.reached.wait(base.TIMEOUT))
        for name in held:
            if name in servers:
                self.disks.wait(self, servers[name])

    def without_a_host(self, scenario):
        """``{state: server}`` of servers that never reached a host."""
        servers = {}
        if 'ERROR without a host' in scenario.states:
            servers['ERROR without a host'] = self._wait_for_state_change(
                self.post(flavor_id=self.flavor(vcpu=64)), 'ERROR')
        if 'BUILD before a host' in scenario.states:
            # Held from the API's 202 on: the conductor may schedule it
            # before the answer is read.
            self.scheduled.hold_next()
            building = servers['BUILD before a host'] = self.post()
            self.scheduled.wait(self, building)
        return servers

    def consumer_without_server(self):
        """A consumer with no server, as a deleted server's left behind."""
        consumer = str(uuid.uuid4())
        response = self.placement.put('/allocations/%s' % consumer, {
            'allocations': {self.compute_rp_uuids['compute1']: {
                'resources': {'VCPU': 1, 'MEMORY_MB': 256}}},
            'project_id': self.api.project_id, 'user_id': 'admin',
            'consumer_generation': None}, version='1.28')
        self.assertEqual(204, response.status, response.body)
        return {'id': consumer}

    def build(self, scenario):
        """``{state: server}`` of a cloud of ``scenario``'s states."""
        servers = self.states_in_place(scenario)
        if 'evacuated' in scenario.states:
            servers['evacuated'] = self.evacuated()
        self.moves(servers)
        servers.update(self.without_a_host(scenario))
        if 'consumer without a server' in scenario.states:
            servers['consumer without a server'] = (
                self.consumer_without_server())
        for host, resource_class, ratio in scenario.damage:
            url = '/resource_providers/%s/inventories' % (
                self.compute_rp_uuids[host])
            current = self.placement.get(url).body
            current['inventories'][resource_class]['allocation_ratio'] = ratio
            # 1.26: placement takes a capacity of 0 from then on.
            response = self.placement.put(url, {
                'resource_provider_generation': current[
                    'resource_provider_generation'],
                'inventories': current['inventories']}, version='1.26')
            self.assertEqual(200, response.status, response.body)
        return servers

    def heal_dry_run(self, extra_conf=''):
        result = self.manage('heal', 'isolate', '--dry-run', '--format',
                             'json', extra_conf=extra_conf)
        self.assertTrue(result.stdout, result.stderr)
        return result.returncode, json.loads(result.stdout)

    def run_commands(self, extra_conf=''):
        """Exit codes and findings of one reading path.

        Those of ``upgrade check``, ``heal isolate --dry-run`` and
        ``placement audit``, which reads no server: the same by both.
        """
        code, checks = check(self.status, extra_conf=extra_conf)
        heal_code, rows = self.heal_dry_run(extra_conf)
        audit = self.manage.json('placement', 'audit', extra_conf=extra_conf)
        return code, checks, heal_code, rows, audit

    def judge(self, scenario):
        """The operator tools on a cloud of ``scenario``, as the docs say.

        * Through the Compute API and from Nova's databases, the same
          findings and exit codes, but what ``cli/nova-pcpu-ext-status``
          names (a deleted image's properties before microversion 2.98);
        * ``placement audit --fix``, then ``placement audit`` finds
          nothing left to fix;
        * ``heal isolate``, then ``upgrade check`` names none of the
          servers heal moved, and each runs where heal says.

        :returns: the run through the Compute API and heal's rows.
        """
        servers = self.build(scenario)
        through_api = self.run_commands()
        from_databases = self.run_commands(self.nova_databases())
        self.settle(servers)

        expected = {state: EXPECTED[state] for state in servers}
        api_expected = dict(expected)
        api_runs = [self.by_state(servers, through_api),
                    self.normalised(through_api)]
        db_runs = [self.by_state(servers, from_databases),
                   self.normalised(from_databases)]
        if ('image deleted' in servers and
                not test_status.STORED_IMAGE_PROPERTIES):
            # The Compute API shows an image's properties as they are
            # now, and a deleted image's not at all: only the databases
            # keep what the server was booted with.
            api_expected['image deleted'] = []
            for by_state, checks in (api_runs, db_runs):
                del by_state['image deleted']
                checks[2].pop(ON_HT, None)
        self.assertEqual(api_runs, db_runs)
        self.assertEqual(api_expected, self.found(servers, through_api))
        self.assertEqual(expected, self.found(servers, from_databases))
        self.assert_audit_fixes_what_it_finds()
        return through_api, self.heal(servers)

    def assert_audit_fixes_what_it_finds(self):
        _code, fixed = self.manage.json('placement', 'audit', '--fix')
        code, left = self.manage.json('placement', 'audit')
        self.assertEqual((0, []), (code, left), fixed)

    def heal(self, servers):
        """heal isolate's rows, onto a host without hyperthreads.

        The operator enables the extension first, as the docs say.
        """
        self.enable_extension()
        self.start_host('compute6', dict(NO_HYPERTHREADS, cpu_cores=14),
                        DEDICATED_SET, SHARED_SET)
        result = self.manage('heal', 'isolate', '--format', 'json')
        rows = json.loads(result.stdout)
        _code, checks = check(self.status)
        named = set(UUID.findall(checks[ON_HT][1] or ''))
        healed = {row['server'] for row in rows if row['healed']}
        self.assertEqual(set(), healed & named, checks[ON_HT])
        for server in healed:
            self.assertEqual('compute6', self.admin_api.get_server(
                server)['OS-EXT-SRV-ATTR:host'])
        return {state: [row['result'] for row in rows
                        if row['server'] == server['id']]
                for state, server in servers.items()}

    def test_every_state_alike_through_the_api_and_the_databases(self):
        through_api, healed = self.judge(states.EVERY_STATE)

        expected = dict(HEALED)
        if not test_status.STORED_IMAGE_PROPERTIES:
            # heal reads the Compute API, which shows no properties of a
            # deleted image before 2.98: the server is not found.
            del expected['image deleted']
        # Servers skipped (locked, busy, not movable): for the operator
        # to look at, not for a run again.
        self.assertEqual((2, 3), (through_api[0], through_api[2]))
        self.assertEqual(expected, {state: results for state, results in
                                    healed.items() if results})

    def settle(self, servers):
        """Let each held server go on, one at a time.

        Before the services stop, which would wait for them; one at a
        time, as Nova's cell database fixture can deadlock under builds
        and moves at the same time in native threads.
        """
        if 'BUILD before a host' in servers:
            self.scheduled.free(servers['BUILD before a host'])
            self._wait_for_state_change(servers['BUILD before a host'],
                                        'ACTIVE')
        for state in ('resize in flight', 'cold migration in flight'):
            if state in servers:
                self.disks.free(servers[state])
                self._wait_for_state_change(servers[state], 'VERIFY_RESIZE')
        if 'live migration in flight' in servers:
            self.live.release.set()
            self._wait_for_migration_status(
                servers['live migration in flight'], ['completed'])

    @staticmethod
    def found(servers, run):
        """``{state: what heal isolate found of its server}``."""
        rows = run[3]
        return {state: sorted(
            'elsewhere' if row['result'].startswith('skipped: runs on')
            else 'victim' for row in rows if row['server'] == server['id'])
            for state, server in servers.items()}

    @staticmethod
    def by_state(servers, run):
        """``{state: its server's heal rows}`` of a run, sorted.

        Without the server's cell, which only Nova's databases show, and
        which destinations of the one cell here are kept to.
        """
        rows = [dict(row, cell=None, result=row['result'].replace(
            ' in its cell', '')) for row in run[3]]
        return {state: sorted(json.dumps(row, sort_keys=True)
                              for row in rows if row['server'] == server[
                                  'id'])
                for state, server in servers.items()}

    @staticmethod
    def normalised(run):
        """Exit codes and checks without the order servers are named in.

        The checks name servers in the order they were read, which
        differs by path; each server's findings are compared by its
        rows.
        """
        code, checks, heal_code, _rows, audit = run
        return code, heal_code, {
            name: (result, sorted(part.rstrip('.') for part in LISTED.split(
                UUID.sub('<server>', details or ''))))
            for name, (result, details) in checks.items()}, audit


class CandidateQueryTest(test.TestCase):
    """The candidate query on rows of each kind, in Nova's own schema.

    Not the fields of Nova's objects alone: its SQL, with soft-deleted and
    deleted instances and migrations that did or did not end.
    """

    def setUp(self):
        super().setUp()
        self.cell = nova_context.target_cell(
            nova_context.get_admin_context(),
            self.cell_mappings['cell1']).__enter__()

    def instance(self, extra_specs, **fields):
        values = dict(
            uuid=str(uuid.uuid4()), project_id='project', user_id='user',
            display_name='server', host='compute1', node='compute1',
            locked=False, image_ref='', system_metadata={},
            vm_state=vm_states.ACTIVE, task_state=None,
            flavor=objects.Flavor(
                id=1, flavorid='1', name='pinned', vcpus=1, memory_mb=256,
                root_gb=1, ephemeral_gb=0, swap=0, extra_specs=extra_specs),
            old_flavor=None, new_flavor=None)
        if 'compute_id' in objects.Instance.fields:
            # Nova 2023.2 and later: a node comes with its record's ID.
            values['compute_id'] = 1
        values.update(fields)
        created = objects.Instance(self.cell, **values)
        created.create()
        return created

    def migration(self, server, status, dest):
        values = dict(
            instance_uuid=server.uuid, status=status,
            migration_type='live-migration', source_compute='compute1',
            source_node='compute1', dest_compute=dest, dest_node=dest)
        if 'dest_compute_id' in objects.Migration.fields:
            values['dest_compute_id'] = 2  # as for the instance's node
        objects.Migration(self.cell, **values).create()

    def test_soft_deleted_and_moving_servers(self):
        soft_deleted = self.instance(ISOLATE,
                                     vm_state=vm_states.SOFT_DELETED)
        moving = self.instance(ISOLATE, task_state=task_states.MIGRATING)
        self.migration(moving, 'running', 'compute2')
        self.migration(moving, 'completed', 'compute3')
        self.instance(ISOLATE).destroy()
        self.instance({'hw:cpu_policy': 'dedicated'})

        candidates = nova_db._candidates(self.cell)
        shown = nova_db._read(self.cell, sorted(candidates))

        self.assertEqual({soft_deleted.uuid: set(),
                          moving.uuid: {'compute1', 'compute2'}},
                         candidates)
        self.assertEqual({soft_deleted.uuid: 'SOFT_DELETED',
                          moving.uuid: 'MIGRATING'},
                         {server: shown[server]['status']
                          for server in shown})
