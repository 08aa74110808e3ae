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

import fixtures
from nova import objects

from nova_pcpu_ext import exception
from nova_pcpu_ext import nova_db
from nova_pcpu_ext.tests.unit import base

objects.register_all()


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
    return objects.CellMapping(uuid=name + '-uuid', name=name,
                               database_connection='sqlite://',
                               transport_url='none:///')


class AsShownTest(base.TestCase):

    def test_as_the_compute_api_shows_it(self):
        shown = nova_db._as_shown(instance(
            'a', task_state='migrating', image_ref='image',
            system_metadata={'image_hw_cpu_thread_policy': 'isolate',
                             'owner_user_name': 'alice'}))
        self.assertEqual({
            'id': 'a', 'name': 'a', 'status': 'MIGRATING',
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
        shown = nova_db._as_shown(instance('a', system_metadata={
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
        self.map({'a': 'cell1', 'b': 'cell2', 'building': None})
        self.instances.side_effect = lambda context, filters, **kw: [
            instance(uuid) for uuid in filters['uuid']]

        found = self.database.servers({'a', 'b', 'building', 'gone'})

        self.assertEqual({'a', 'b'}, set(found))
        self.assertEqual({}, self.database.down_cells)
        self.assertEqual(
            [['a'], ['b']], sorted(call.args[1]['uuid'] for call in
                                   self.instances.call_args_list))

    def test_in_batches(self):
        uuids = ['%04d' % n for n in range(nova_db.BATCH + 1)]
        self.map(dict.fromkeys(uuids, 'cell1'))
        self.instances.return_value = []

        self.database.servers(set(uuids))

        self.assertEqual([nova_db.BATCH, 1], [
            len(call.args[1]['uuid'])
            for call in self.instances.call_args_list])
        self.assertEqual(2, self.mappings.call_count)

    def test_servers_of_a_cell_that_does_not_answer_are_unknown(self):
        self.map({'a': 'cell1', 'b': 'cell2'})

        def read(context, filters, **kwargs):
            if filters['uuid'] == ['b']:
                raise RuntimeError('connection refused')
            return [instance('a')]
        self.instances.side_effect = read

        found = self.database.servers({'a', 'b'})

        self.assertEqual('ACTIVE', found['a']['status'])
        self.assertEqual({'id': 'b', 'status': 'UNKNOWN'}, found['b'])
        self.assertEqual({'cell2': 'connection refused'},
                         self.database.down_cells)

    def test_an_api_database_that_cannot_be_read(self):
        self.mappings.side_effect = RuntimeError('access denied')
        error = self.assertRaises(exception.DatabaseError,
                                  self.database.servers, {'a'})
        self.assertEqual("Nova's API database ([api_database] connection) "
                         "cannot be read: access denied", str(error))
