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
import subprocess
import sys
import uuid

import fixtures
from nova import objects
from oslo_utils.fixture import uuidsentinel as uuids

from nova_pcpu_ext import audit
from nova_pcpu_ext import exception
from nova_pcpu_ext import nova_db
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


def cell(name):
    return objects.CellMapping(uuid=getattr(uuids, name), name=name,
                               database_connection='sqlite://',
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
            'id': A, 'name': A, 'status': 'ACTIVE',
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
                raise RuntimeError('connection refused')
            return [instance(A)]
        self.instances.side_effect = read

        found = self.database.servers({A, B})

        self.assertEqual('ACTIVE', found[A]['status'])
        self.assertEqual({'id': B, 'status': 'UNKNOWN'}, found[B])
        self.assertEqual({'cell2': 'connection refused'},
                         self.database.down_cells)

    def test_an_api_database_that_cannot_be_read(self):
        self.mappings.side_effect = RuntimeError('access denied')
        error = self.assertRaises(exception.DatabaseError,
                                  self.database.servers, {A})
        self.assertEqual("Nova's API database ([api_database] connection) "
                         "cannot be read: access denied", str(error))

    def test_candidates_of_every_cell_but_cell0(self):
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
            uuid: server[audit.MOVE_NODES] for uuid, server in found.items()})
        self.assertEqual(2, asked.call_count)

    def test_candidates_read_ahead_once(self):
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

    def test_no_candidates_while_a_cell_does_not_answer(self):
        self.patch('CellMappingList.get_all').return_value = [
            self.cells['cell1']]
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.nova_db._candidates',
            side_effect=RuntimeError('refused')))

        self.assertIsNone(self.database.candidates())
        self.assertEqual({'cell1': 'refused'}, self.database.down_cells)
