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

import datetime
import os
import sqlite3
import subprocess
import sys
import time
import uuid

import fixtures
from nova import objects
from oslo_db import exception as db_exception
from oslo_utils.fixture import uuidsentinel as uuids
import sqlalchemy as sa

from nova_pcpu_ext import exception
from nova_pcpu_ext import nova_db
from nova_pcpu_ext import server_fields
from nova_pcpu_ext.tests.unit import base

objects.register_all()

A, B, BUILDING, GONE = uuids.a, uuids.b, uuids.building, uuids.gone


def instance(uuid, **fields):
    values = dict(
        uuid=uuid, display_name=uuid, vm_state='active', task_state=None,
        host='host1', node='node1', locked=False, image_ref='',
        created_at=datetime.datetime(2026, 1, 2, 3, 4, 5),
        system_metadata={}, flavor=objects.Flavor(
            name='pinned', vcpus=2, memory_mb=512, root_gb=1,
            ephemeral_gb=0, swap=0, extra_specs={}))
    values.update(fields)
    return objects.Instance(**values)


def cell(name, url='sqlite://'):
    return objects.CellMapping(uuid=getattr(uuids, name), name=name,
                               database_connection=url,
                               transport_url='none:///')


class ImportTest(base.TestCase):

    def test_imported_without_eventlet_s_monkey_patching(self):
        result = subprocess.run(
            [sys.executable, '-c', 'import sys, eventlet.patcher, '
             'nova_pcpu_ext.nova_db; '
             'sys.exit(eventlet.patcher.is_monkey_patched("thread"))'],
            env=dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='0'))
        self.assertEqual(0, result.returncode)


class AsShownTest(base.TestCase):

    def test_as_the_compute_api_shows_it(self):
        shown = nova_db._as_shown(instance(
            A, task_state='migrating', image_ref='image',
            system_metadata={'image_hw_cpu_thread_policy': 'isolate',
                             'owner_user_name': 'alice'}))
        self.assertEqual({
            'id': A, 'name': A, 'status': 'MIGRATING',
            'OS-EXT-STS:task_state': 'migrating',
            'OS-EXT-SRV-ATTR:host': 'host1',
            'OS-EXT-SRV-ATTR:hypervisor_hostname': 'node1', 'locked': False,
            'created': '2026-01-02T03:04:05Z',
            'flavor': {'vcpus': 2, 'ram': 512, 'disk': 1, 'ephemeral': 0,
                       'swap': 0, 'original_name': 'pinned',
                       'extra_specs': {}},
            'image': {'id': 'image',
                      'properties': {'hw_cpu_thread_policy': 'isolate'}}},
            shown)

    def test_booted_from_volume_its_volume_s_image_properties(self):
        shown = nova_db._as_shown(instance(A, system_metadata={
            'image_hw_cpu_policy': 'dedicated'}))
        self.assertEqual({'id': '', 'properties': {
            'hw_cpu_policy': 'dedicated'}}, shown['image'])


class ServersTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='api_database', connection='sqlite://')
        self.flags(group='database', connection='sqlite://')
        self.cells = {'cell1': cell('cell1'), 'cell2': cell('cell2')}
        self.mappings = self.patch('InstanceMappingList.get_by_instance_uuids')
        self.instances = self.patch('InstanceList.get_by_filters')
        self.useFixture(fixtures.MockPatch('nova.db.api.api.configure'))
        self.database = nova_db.NovaDatabase(self.conf.conf)

    def patch(self, name):
        return self.useFixture(fixtures.MockPatch('nova.objects.' + name)).mock

    def map(self, placed):
        """``placed``: ``{UUID: cell name or None}``."""
        self.mappings.side_effect = lambda context, uuids: [
            objects.InstanceMapping(
                instance_uuid=uuid, cell_mapping=self.cells.get(placed[uuid]))
            for uuid in uuids if uuid in placed]

    def test_each_cell_read_for_its_servers(self):
        self.map({A: 'cell1', B: 'cell2', BUILDING: None})
        self.instances.side_effect = lambda context, filters, **kw: [
            instance(uuid) for uuid in filters['uuid']]

        found = self.database.servers({A, B, BUILDING, GONE})

        self.assertEqual({A, B}, set(found))
        self.assertEqual({}, self.database.down_cells)
        self.assertEqual({(A,), (B,)}, {
            tuple(call.args[1]['uuid'])
            for call in self.instances.call_args_list})

    def test_in_batches(self):
        wanted = [str(uuid.UUID(int=n)) for n in range(nova_db.BATCH + 1)]
        self.map(dict.fromkeys(wanted, 'cell1'))
        self.instances.return_value = []

        self.database.servers(set(wanted))

        self.assertEqual([nova_db.BATCH, 1], [
            len(call.args[1]['uuid'])
            for call in self.instances.call_args_list])
        self.assertEqual(2, self.mappings.call_count)

    def test_servers_of_a_cell_that_does_not_answer_are_unknown(self):
        self.map({A: 'cell1', B: 'cell2'})

        def read(context, filters, **kwargs):
            if filters['uuid'] == [B]:
                raise db_exception.DBConnectionError(
                    'connection refused\n[SQL: SELECT 1]')
            return [instance(A)]
        self.instances.side_effect = read

        found = self.database.servers({A, B})
        asked = self.instances.call_count
        again = self.database.servers({A, B})

        self.assertEqual('ACTIVE', found[A]['status'])
        self.assertEqual('cell1', found[A][server_fields.CELL])
        self.assertEqual({'id': B, 'status': 'UNKNOWN',
                          server_fields.CELL: 'cell2'}, found[B])
        self.assertEqual(['cell2'], list(self.database.down_cells))
        self.assertRegex(
            self.database.down_cells['cell2'],
            r'^connection refused \(after \d+\.\d s; \[pcpu_ext\] '
            r'database_timeout = 30 s bounds each connection and '
            r'statement\)$')
        # A cell that did not answer is not asked again: its wait is paid
        # once a run.
        self.assertEqual(found, again)
        self.assertEqual(asked + 1, self.instances.call_count)
        self.assertEqual([('cell1', True), ('cell2', False)], [
            (read.name, read.answered) for read in sorted(
                self.database.cells.values(), key=lambda read: read.name)])

    def test_a_cell_whose_objects_fail_is_named_not_down(self):
        self.map({A: 'cell1'})
        self.instances.side_effect = ValueError('bad JSON')

        error = self.assertRaises(exception.NovaDataError,
                                  self.database.servers, {A})

        self.assertTrue(str(error).startswith(
            "Cell cell1: its database answered, but Nova's objects could "
            "not read its servers: ValueError: bad JSON (at "), error)
        self.assertEqual({}, self.database.down_cells)

    def test_one_engine_a_cell_released_after_each_reading(self):
        made = self.useFixture(fixtures.MockPatch(
            'nova.db.main.api.create_context_manager')).mock
        self.map({A: 'cell1', B: 'cell2'})
        self.instances.return_value = []

        self.database.servers({A, B})
        self.database.servers({A})

        self.assertEqual(2, made.call_count)
        # Every cell's engine after each reading.
        self.assertEqual(4, made.return_value.dispose_pool.call_count)

    def test_an_api_database_that_cannot_be_read(self):
        self.mappings.side_effect = sa.exc.OperationalError(
            'SELECT', {}, 'access denied')
        error = self.assertRaises(exception.DatabaseError,
                                  self.database.servers, {A})
        self.assertTrue(str(error).startswith(
            "Nova's API database ([api_database] connection) cannot be "
            "read: (builtins.str) access denied (after "), error)
        self.assertIn('[pcpu_ext] database_timeout = 30 s', str(error))

    def test_mappings_nova_s_objects_cannot_read(self):
        self.mappings.side_effect = KeyError('cell_mapping')
        error = self.assertRaises(exception.NovaDataError,
                                  self.database.servers, {A})
        self.assertTrue(str(error).startswith(
            "Nova's API database answered, but Nova's objects could not "
            "read its mappings: KeyError: 'cell_mapping' (at "), error)

    def nodes(self, *names):
        return self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._compute_nodes',
            return_value=frozenset(names))).mock

    def test_candidates_of_every_cell_but_cell0(self):
        self.nodes('compute1')
        cell0 = objects.CellMapping(
            uuid=objects.CellMapping.CELL0_UUID, name='cell0',
            database_connection='sqlite://', transport_url='none:///')
        self.patch('CellMappingList.get_all').return_value = [
            cell0, self.cells['cell1'], self.cells['cell2']]
        asked = self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._candidates')).mock
        asked.side_effect = [{A: set()}, {B: {'compute1', 'compute2'}}]
        self.instances.side_effect = lambda context, filters, **kw: [
            instance(uuid) for uuid in filters['uuid']]

        found = self.database.candidates()

        self.assertEqual({A: set(), B: {'compute1', 'compute2'}}, {
            uuid: server[server_fields.MOVE_NODES]
            for uuid, server in found.items()})
        self.assertEqual({A: 'cell1', B: 'cell2'}, {
            uuid: server[server_fields.CELL]
            for uuid, server in found.items()})
        self.assertEqual(2, asked.call_count)
        self.assertEqual({'cell1': {'compute1'}, 'cell2': {'compute1'}},
                         self.database.cell_nodes)

    def test_candidates_read_ahead_once(self):
        self.nodes()
        self.patch('CellMappingList.get_all').return_value = [
            self.cells['cell1']]
        asked = self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._candidates',
            return_value={A: set()})).mock
        self.instances.side_effect = lambda context, filters, **kw: [
            instance(uuid) for uuid in filters['uuid']]

        self.database.read_candidates_ahead()
        found = [self.database.candidates() for _twice in range(2)]

        self.assertEqual([[A], [A]], [list(each) for each in found])
        asked.assert_called_once()

    def test_candidates_of_the_cells_that_answer(self):
        """A cell that does not answer costs that cell alone."""
        self.nodes('compute1')
        self.patch('CellMappingList.get_all').return_value = [
            self.cells['cell1'], self.cells['cell2']]

        def read(context):
            if context.db_connection is self.database._database(
                    self.cells['cell2']):
                raise db_exception.DBConnectionError('refused')
            return {A: set()}
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._candidates', side_effect=read))
        self.instances.side_effect = lambda context, filters, **kw: [
            instance(uuid) for uuid in filters['uuid']]

        self.assertEqual([A], list(self.database.candidates()))
        self.assertEqual(['cell2'], list(self.database.down_cells))
        self.assertTrue(self.database.down_cells['cell2'].startswith(
            'refused (after '))
        self.assertEqual({'cell1': {'compute1'}}, self.database.cell_nodes)

    def test_an_account_that_may_not_read_compute_nodes(self):
        """Granted what earlier releases read: the cell still answers."""
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._compute_nodes',
            side_effect=sa.exc.OperationalError('SELECT', {}, 'denied')))
        self.patch('CellMappingList.get_all').return_value = [
            self.cells['cell1']]
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._candidates', return_value={A: set()}))
        self.instances.side_effect = lambda context, filters, **kw: [
            instance(uuid) for uuid in filters['uuid']]

        self.assertEqual([A], list(self.database.candidates()))
        self.assertEqual(({}, {}), (self.database.down_cells,
                                    self.database.cell_nodes))

    def test_an_account_that_may_not_read_the_mappings_counted(self):
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._mapped',
            side_effect=sa.exc.OperationalError('SELECT', {}, 'denied')))
        self.map({A: 'cell1'})
        self.instances.return_value = []
        self.database.servers({A})

        read, = self.database.cell_reads()
        self.assertEqual(('cell1', True, None, ''),
                         (read.name, read.answered, read.hosts, read.maps))

    def test_what_each_cell_maps(self):
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._mapped', return_value=(
                {1: 600, 2: 3}, {1: 5000})))
        self.cells['cell1'].id, self.cells['cell2'].id = 1, 2
        self.map({A: 'cell1', B: 'cell2'})
        self.instances.side_effect = db_exception.DBConnectionError('no')
        self.database.servers({A, B})

        self.assertEqual(
            [('cell1', 'the cell maps 600 compute hosts and 5000 servers'),
             ('cell2', 'the cell maps 3 compute hosts and 0 servers')],
            [(read.name, read.maps) for read in self.database.cell_reads()])


READ_WRITE = 'mysql+pymysql://nova:rw-secret@db1:3306/nova_cell1?charset=utf8'
BOUNDS = 'connect_timeout=30&read_timeout=30&write_timeout=30'


class ConnectionTest(base.TestCase):
    """Which account each database is opened with, and its bounds."""

    def setUp(self):
        super().setUp()
        self.flags(group='api_database', connection='sqlite:///api.db')
        self.useFixture(fixtures.MockPatch('nova.db.api.api.configure'))
        self.made = self.useFixture(fixtures.MockPatch(
            'nova.db.main.api.create_context_manager')).mock
        self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceList.get_by_filters', return_value=[]))
        self.templated = self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._templated_cells',
            return_value=set())).mock

    def read(self, *cells):
        """The NovaDatabase that read ``cells``' servers, one server each."""
        mappings = {c.uuid: c for c in cells}
        self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceMappingList.get_by_instance_uuids',
            side_effect=lambda context, batch: [
                objects.InstanceMapping(instance_uuid=uuid,
                                        cell_mapping=mappings[uuid])
                for uuid in batch]))
        database = nova_db.NovaDatabase(self.conf.conf)
        database.servers(set(mappings))
        return database

    def opened(self, *cells):
        """The URL each of ``cells`` is opened with."""
        self.assertEqual({}, self.read(*cells).down_cells)
        return [c.args[0] for c in self.made.call_args_list]

    def test_the_cell_mapping_s_url_by_default(self):
        self.flags(group='database', connection=READ_WRITE)
        self.assertEqual([READ_WRITE + '&' + BOUNDS],
                         self.opened(cell('cell1', READ_WRITE)))

    def test_the_operator_s_template_filled_per_cell(self):
        self.flags(cell_database_connection=(
            'mysql+pymysql://reader:ro-secret@{hostname}:{port}/{path}'))
        self.flags(group='database', connection=READ_WRITE)
        other = 'mysql+pymysql://nova:rw-secret@db2:3307/nova_cell2'
        self.assertEqual(sorted([
            'mysql+pymysql://reader:ro-secret@db1:3306/nova_cell1?' + BOUNDS,
            'mysql+pymysql://reader:ro-secret@db2:3307/nova_cell2?' + BOUNDS]),
            sorted(self.opened(cell('cell1', READ_WRITE),
                               cell('cell2', other))))

    def test_a_template_field_it_does_not_know(self):
        self.flags(cell_database_connection='sqlite:///{cell_name}.db')
        self.flags(group='database', connection=READ_WRITE)
        error = self.assertRaises(exception.InvalidConfig, self.opened,
                                  cell('cell1', READ_WRITE))
        self.assertEqual(
            "[pcpu_ext] cell_database_connection cannot be filled: "
            "KeyError: 'cell_name'; its fields are {scheme}, {username}, "
            "{password}, {hostname}, {port}, {host}, {path}, {query}, "
            "{fragment}.",
            str(error))
        self.assertNotIn('secret', str(error))

    def test_the_replica_of_the_cell_database_connection_names(self):
        replica = 'mysql+pymysql://nova:rw-secret@replica/nova_cell1'
        other = 'mysql+pymysql://nova:rw-secret@db2/nova_cell2'
        self.flags(group='database', connection=READ_WRITE,
                   slave_connection=replica)
        self.assertEqual(sorted([replica + '?' + BOUNDS,
                                 other + '?' + BOUNDS]),
                         sorted(self.opened(cell('cell1', READ_WRITE),
                                            cell('cell2', other))))
        # Nova's own engines of each cell would open it too.
        self.assertIsNone(self.conf.conf.database.slave_connection)

    def test_the_api_database_s_replica(self):
        self.flags(group='api_database',
                   slave_connection='sqlite:///api-replica.db')
        database = nova_db.NovaDatabase(self.conf.conf)
        self.assertEqual('sqlite:///api-replica.db?timeout=30',
                         self.conf.conf.api_database.connection)
        self.assertIsNone(self.conf.conf.api_database.slave_connection)
        self.assertEqual('[api_database] slave_connection',
                         database.api_option)

    def test_a_template_without_database_connection(self):
        self.templated.return_value = {uuids.cell1}
        error = self.assertRaises(exception.InvalidConfig, self.opened,
                                  cell('cell1', READ_WRITE))
        self.assertEqual(
            'The database_connection of the mapping of cell cell1 is a '
            'template, filled from [database] connection, which nova.conf '
            'does not set: set [database] connection to an account that '
            'may read the cell databases.', str(error))
        self.made.assert_not_called()

    def test_a_template_with_database_connection(self):
        self.templated.return_value = {uuids.cell1}
        self.flags(group='database', connection=READ_WRITE)
        self.assertEqual([READ_WRITE + '&' + BOUNDS],
                         self.opened(cell('cell1', READ_WRITE)))
        self.templated.assert_not_called()

    def test_the_template_s_host_keeps_the_port_and_ipv6_brackets(self):
        self.flags(cell_database_connection=(
            'mysql+pymysql://reader:ro@{host}/{path}|{hostname}|{port}'))
        self.flags(group='database', connection=READ_WRITE)
        self.assertEqual(sorted([
            'mysql+pymysql://reader:ro@[fd00::1]:3307/nova_cell1|'
            '[fd00::1]|3307?' + BOUNDS,
            'mysql+pymysql://reader:ro@db2/nova_cell2|db2|?' + BOUNDS]),
            sorted(self.opened(
                cell('cell1', 'mysql+pymysql://nova:x@[fd00::1]:3307/'
                              'nova_cell1'),
                cell('cell2', 'mysql+pymysql://nova:x@db2/nova_cell2'))))

    def test_a_password_holding_what_ends_a_url_s_parts(self):
        """As SQLAlchemy, and so Nova, reads it: "#", "?", "/", "[" too."""
        password = 'Sup3rS#cr?t/x[y'
        url = 'mysql+pymysql://nova:%s@db1:3307/nova_cell1' % password
        self.flags(group='database', connection=READ_WRITE)
        self.flags(cell_database_connection=(
            '{scheme}://{username}:{password}@{host}/{path}'))
        opened, = self.opened(cell('cell1', url))
        self.assertEqual(password, sa.engine.make_url(opened).password)
        self.assertEqual(3307, sa.engine.make_url(opened).port)

    def test_a_cell_url_that_does_not_parse_is_that_cell_down(self):
        self.flags(group='database', connection=READ_WRITE)
        for url in ('mysql+pymysql://nova:Sup3rS@db1:3306x/nova',
                    'mysql+pymysql://nova@db1:Sup3rSecret/nova',
                    'Sup3rSecret'):
            self.made.reset_mock()
            database = self.read(cell('cell1', url),
                                 cell('cell2', READ_WRITE))
            self.assertEqual({
                'cell1': "the database_connection of its cell mapping is "
                         "not a URL SQLAlchemy can parse (not shown: it may "
                         "hold a password)"}, database.down_cells)
            self.assertEqual([READ_WRITE + '&' + BOUNDS], [
                c.args[0] for c in self.made.call_args_list])

    def test_a_driver_that_is_not_installed_is_that_cell_down(self):
        self.flags(group='database', connection=READ_WRITE)
        self.made.side_effect = ModuleNotFoundError(
            "No module named 'pymysql'")
        database = self.read(cell('cell1', READ_WRITE))
        self.assertEqual({
            'cell1': "the driver of its URL cannot be loaded: No module "
                     "named 'pymysql'"}, database.down_cells)

    def test_a_driver_s_message_never_shows_the_password(self):
        url = 'mysql+pymysql://nova:rw/secret@db1/nova_cell1'
        self.flags(group='database', connection=url)
        self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceList.get_by_filters',
            side_effect=sa.exc.OperationalError(
                'SELECT', {}, 'denied for nova:rw/secret or rw%2Fsecret')))
        why = self.read(cell('cell1', url)).down_cells['cell1']
        self.assertIn('denied for nova:*** or ***', why)
        self.assertNotIn('secret', why)

    def test_a_connection_of_its_own_per_cell(self):
        own = 'mysql+pymysql://reader:ro@db1-replica:3307/nova_cell1'
        other = 'mysql+pymysql://reader:ro@db2-replica/nova_cell2'
        self.flags(group='database', connection=READ_WRITE,
                   slave_connection='mysql://nova:rw@replica/nova_cell1')
        self.flags(cell_database_connection='sqlite:///{path}.db')
        self.flags(cell_database_connections=[
            'cell1 = ' + own, '%s=%s' % (uuids.cell2, other)])
        self.assertEqual(sorted([own + '?' + BOUNDS, other + '?' + BOUNDS]),
                         sorted(self.opened(cell('cell1', READ_WRITE),
                                            cell('cell2', READ_WRITE))))

    def test_a_connection_of_its_own_not_cell_equals_url(self):
        self.flags(cell_database_connections=['mysql://u:Secret@h/db'])
        error = self.assertRaises(exception.InvalidConfig,
                                  nova_db.NovaDatabase, self.conf.conf)
        self.assertEqual(
            '[pcpu_ext] cell_database_connections: value 1 of 1 is not '
            'CELL=URL, a cell mapping\'s name or UUID, "=" and the URL to '
            'read it with (not shown: it may hold a password).', str(error))

    def test_a_connection_of_its_own_for_a_cell_no_mapping_has(self):
        self.flags(cell_database_connections=['cel1=mysql://u:Secret@h/db'])
        self.useFixture(fixtures.MockPatch(
            'nova.objects.CellMappingList.get_all',
            return_value=[cell('cell1'), cell('cell2')]))
        error = self.assertRaises(
            exception.InvalidConfig,
            nova_db.NovaDatabase(self.conf.conf).candidates)
        self.assertEqual(
            '[pcpu_ext] cell_database_connections names cel1, which no cell '
            'mapping (but cell0) has: the cells are cell1, cell2.',
            str(error))


class BoundsTest(base.TestCase):

    def test_postgresql_without_statement_bound(self):
        """PgBouncer refuses the startup parameter of the bound."""
        self.assertEqual(
            'postgresql://u:p@h/n?connect_timeout=5',
            nova_db._bounded('postgresql://u:p@h/n', 5, statements=False))
        self.assertEqual(
            'mysql+pymysql://u:p@h/n?connect_timeout=5&read_timeout=5'
            '&write_timeout=5',
            nova_db._bounded('mysql+pymysql://u:p@h/n', 5, statements=False))

    def test_each_driver_s_timeouts(self):
        for url, bounded in [
                ('mysql+pymysql://u:p@h/n',
                 'mysql+pymysql://u:p@h/n?connect_timeout=5&read_timeout=5'
                 '&write_timeout=5'),
                ('postgresql://u:p@h/n',
                 'postgresql://u:p@h/n?connect_timeout=5'
                 '&options=-c+statement_timeout%3D5000'),
                ('sqlite:///n.db', 'sqlite:///n.db?timeout=5')]:
            self.assertEqual(bounded, nova_db._bounded(url, 5))

    def test_what_the_url_says_is_kept(self):
        self.assertEqual(
            'mysql://u:p@h/n?connect_timeout=5&read_timeout=600'
            '&write_timeout=5',
            nova_db._bounded('mysql://u:p@h/n?read_timeout=600', 5))
        self.assertEqual('sqlite:///n.db?timeout=9',
                         nova_db._bounded('sqlite:///n.db?timeout=9', 5))

    def test_a_url_that_does_not_parse_is_left_alone(self):
        self.assertEqual('not a url', nova_db._bounded('not a url', 5))


class HangingDatabaseTest(base.TestCase):
    """A cell database held by another's lock ends at the bound."""

    def test_a_locked_sqlite_database(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'cell1.db')
        holder = sqlite3.connect(path, isolation_level=None)
        self.addCleanup(holder.close)
        holder.execute('CREATE TABLE held (id INTEGER)')
        holder.execute('BEGIN EXCLUSIVE')
        self.addCleanup(holder.execute, 'ROLLBACK')
        self.flags(group='api_database', connection='sqlite://')
        self.flags(group='database', connection='sqlite://')
        self.flags(database_timeout=1)
        self.useFixture(fixtures.MockPatch('nova.db.api.api.configure'))
        self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceMappingList.get_by_instance_uuids',
            return_value=[objects.InstanceMapping(
                instance_uuid=A,
                cell_mapping=cell('cell1', 'sqlite:///' + path))]))
        database = nova_db.NovaDatabase(self.conf.conf)

        started = time.monotonic()
        found = database.servers({A})
        waited = time.monotonic() - started

        self.assertEqual({A: {'id': A, 'status': 'UNKNOWN',
                              server_fields.CELL: 'cell1'}}, found)
        why = database.down_cells['cell1']
        self.assertTrue(why.startswith('(sqlite3.OperationalError) '
                                       'database is locked (after '), why)
        self.assertIn('[pcpu_ext] database_timeout = 1 s', why)
        # A second each for the statements that met the lock (one or two
        # by oslo.db's release); SQLite's own default is 5 s.
        self.assertLess(waited, 4)
