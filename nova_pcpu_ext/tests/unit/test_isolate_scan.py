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

import dataclasses
from unittest import mock

import ddt

from nova_pcpu_ext import exception
from nova_pcpu_ext import isolate_scan
from nova_pcpu_ext import server_fields
from nova_pcpu_ext.tests.unit import base
from nova_pcpu_ext.tests.unit import fakes


class FakeCompute(object):
    """Servers per node; counts the listings and single look-ups.

    A listing of the whole cloud is ``'all'`` in ``listings``.
    """

    def __init__(self, servers, images=None, hosts=None):
        self.by_uuid = {server['id']: server for server in servers}
        self.images = images or {}
        self.hosts = hosts or {'compute1': 'host1'}
        self.listings = []
        self.looked_up = []

    def node_hosts(self):
        return self.hosts

    def servers(self, wanted, progress):
        self.listings.append('all')
        progress(len(self.by_uuid))
        return {uuid: server for uuid, server in self.by_uuid.items()
                if uuid in wanted}

    def servers_on_node(self, node, host):
        self.listings.append(host)
        return [s for s in self.by_uuid.values()
                if s.get('OS-EXT-SRV-ATTR:hypervisor_hostname') == node]

    def server(self, uuid):
        self.looked_up.append(uuid)
        return self.by_uuid.get(uuid)

    def image(self, image_id):
        return self.images.get(image_id)


def server(uuid, node='compute1', image='', created='2026-06-01T00:00:00Z',
           **extra_specs):
    return {'id': uuid, 'status': 'ACTIVE', 'OS-EXT-SRV-ATTR:host': node,
            'OS-EXT-SRV-ATTR:hypervisor_hostname': node,
            'image': {'id': image} if image else '', 'created': created,
            'flavor': {'original_name': 'pinned',
                       'extra_specs': extra_specs}}


def image(image_id, updated='2026-01-01T00:00:00Z', **properties):
    return {'id': image_id, 'updated': updated, 'metadata': properties}


ISOLATE = {'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}


def fake_placement(providers, elsewhere=None, trees=None, sharing=()):
    """``{name: (inventories, {consumer: resources})}``, all hyperthreaded.

    Every consumer holds what it holds on its provider, and what
    ``elsewhere`` says (``{consumer: {provider: resources}}``); ``trees``
    gives the providers of a provider's tree, ``{name: [provider]}``;
    ``sharing`` names the providers sharing resources.
    """
    trees = trees or {}

    def listing(in_tree=None, required=None, name=None):
        if in_tree:
            return [{'uuid': member, 'name': member}
                    for member in trees.get(in_tree, [in_tree])]
        if required == isolate_scan.SHARING:
            return [{'uuid': member, 'name': member} for member in sharing]
        listed = [{'uuid': provider, 'name': provider}
                  for provider in providers if name in (None, provider)]
        if required is None and name is None:
            listed += [{'uuid': member, 'name': member,
                        'root_provider_uuid': root}
                       for root, members in trees.items()
                       for member in members if member != root]
        return listed

    placement = fakes.FakePlacement({})
    placement.providers = listing
    placement.inventories = lambda uuid: (1, providers[uuid][0])
    placement.allocations = mock.Mock(
        side_effect=lambda uuid: providers[uuid][1])
    placement.consumer_allocations = mock.Mock(side_effect=lambda consumer: (
        dict(next({name: held[consumer]} for name, (_inventories, held)
                  in providers.items() if consumer in held),
             **(elsewhere or {}).get(consumer, {}))))
    return placement


@ddt.ddt
class IsolateReasonTest(base.TestCase):

    IMAGES = {'isolate': image('isolate', hw_cpu_thread_policy='isolate'),
              'changed': image('changed', updated='2026-07-01T00:00:00Z',
                               hw_cpu_thread_policy='isolate'),
              'plain-changed': image('plain-changed',
                                     updated='2026-07-01T00:00:00Z'),
              'undated': image('undated', updated=None,
                               hw_cpu_thread_policy='isolate')}

    @ddt.unpack
    @ddt.data(
        ({'hw:cpu_thread_policy': 'isolate'}, '',
         ('flavor hw:cpu_thread_policy=isolate', '')),
        ({'trait:HW_CPU_HYPERTHREADING': 'forbidden'}, '',
         ('flavor trait:HW_CPU_HYPERTHREADING=forbidden', '')),
        ({'hw:cpu_thread_policy': 'prefer',
          'trait:HW_CPU_HYPERTHREADING': 'forbidden'}, '',
         ('flavor trait:HW_CPU_HYPERTHREADING=forbidden', '')),
        ({'hw:cpu_policy': 'dedicated'}, 'isolate',
         ('image hw_cpu_thread_policy=isolate', '')),
        # The flavor's thread policy wins, as in Nova.
        ({'hw:cpu_thread_policy': 'prefer'}, 'isolate', ('', '')),
        ({'hw:cpu_policy': 'dedicated'}, 'deleted', ('', '')),
        ({'hw:cpu_policy': 'dedicated'}, 'changed',
         ('image hw_cpu_thread_policy=isolate',
          'image changed changed after the server was created')),
        ({'hw:cpu_policy': 'dedicated'}, 'plain-changed',
         ('', 'image plain-changed changed after the server was created')),
        ({'hw:cpu_policy': 'dedicated'}, 'undated',
         ('image hw_cpu_thread_policy=isolate', '')),
        # A server pinned by nothing is not unsure of its thread policy.
        ({}, 'plain-changed', ('', '')),
        ({'hw:cpu_policy': 'dedicated',
          'hw:cpu_thread_policy': 'require'}, '', ('', '')),
    )
    def test_reason(self, extra_specs, image_id, expected):
        self.assertEqual(expected, isolate_scan.isolate_reason(
            server('a', image=image_id, **extra_specs),
            FakeCompute([], self.IMAGES)))

    @ddt.data(({'hw_cpu_thread_policy': 'isolate'},
               'image hw_cpu_thread_policy=isolate'), ({}, ''))
    @ddt.unpack
    def test_stored_image_properties_are_never_unsure(self, properties,
                                                      reason):
        """Where the server shows what Nova scheduled it with (2.98)."""
        pinned = server('a', image='changed', **{'hw:cpu_policy':
                                                 'dedicated'})
        pinned['image']['properties'] = properties
        compute = FakeCompute([], self.IMAGES)
        compute.image = None  # not to be asked

        self.assertEqual((reason, ''), isolate_scan.isolate_reason(pinned,
                                                                   compute))


def fake_database(down_cells=(), cell_nodes=()):
    """A NovaDatabase whose cells answered but ``down_cells``."""
    database = mock.Mock(down_cells=dict(down_cells),
                         cell_nodes=dict(cell_nodes))
    database.cell_reads.return_value = []
    return database


@ddt.ddt
class IsolateServersTest(base.TestCase):

    def test_every_consumer_of_a_hyperthreaded_host_is_judged(self):
        placement = fake_placement({'compute1': ({'PCPU': {}, 'VCPU': {}}, {
            'flavor': {'VCPU': 2}, 'on-pcpu': {'PCPU': 1},
            'shared': {'VCPU': 1}, 'plain': {'VCPU': 1},
            'migration': {'VCPU': 1}})})
        compute = FakeCompute([
            server('flavor', **ISOLATE),
            server('on-pcpu', **ISOLATE),
            server('shared', **{'trait:HW_CPU_HYPERTHREADING': 'forbidden'}),
            server('plain')])

        scan = isolate_scan.isolate_servers(placement, compute)

        self.assertEqual(
            [('flavor', 'flavor hw:cpu_thread_policy=isolate', {'VCPU': 2},
              True),
             ('on-pcpu', 'flavor hw:cpu_thread_policy=isolate', {'PCPU': 1},
              True),
             ('shared', 'flavor trait:HW_CPU_HYPERTHREADING=forbidden',
              {'VCPU': 1}, False)],
            [(f.server['id'], f.reason, f.held, f.dedicated)
             for f in scan.found])
        self.assertFalse(any(f.nested for f in scan.found))
        # Isolate on PCPU of a hyperthreaded host: only Nova's reshape of
        # a legacy host gives that.
        self.assertEqual(
            {'flavor': (False, False), 'on-pcpu': (True, True),
             'shared': (False, False)},
            {f.server['id']: (f.legacy, f.reshaped) for f in scan.found})
        # Only the migration's allocation was not in the listing.
        self.assertEqual(['migration'], compute.looked_up)
        self.assertEqual({}, scan.unseen)

    def candidates_scan(self, placement, *candidates):
        database = fake_database()
        database.candidates.return_value = {
            candidate['id']: candidate for candidate in candidates}
        compute = FakeCompute([])
        scan = isolate_scan.isolate_servers(placement, compute,
                                            database=database)
        self.assertEqual(([], []), (compute.listings, compute.looked_up))
        database.servers.assert_not_called()
        return scan

    def test_candidates_of_nova_s_databases_read_by_host(self):
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}, 'b': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'c': {'VCPU': 1}})})

        scan = self.candidates_scan(placement, server('a', **ISOLATE))

        self.assertEqual(['a'], [f.server['id'] for f in scan.found])
        self.assertEqual({'compute1': {'VCPU': 1}}, scan.found[0].allocations)
        # Where candidates run, not every host; none asked about alone.
        placement.allocations.assert_called_once_with('compute1')
        placement.consumer_allocations.assert_not_called()

    def test_hosts_of_candidates_moves_read_too(self):
        """An evacuation's source holds the server until it starts again."""
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'a': {'VCPU': 1}}),
            'compute3': ({'VCPU': {}}, {'b': {'VCPU': 1}})})

        scan = self.candidates_scan(placement, dict(
            server('a', node='compute2', **ISOLATE),
            **{server_fields.MOVE_NODES: {'compute1', 'compute2'}}))

        self.assertEqual([('a', {'compute2': {'VCPU': 1}})],
                         [(f.server['id'], f.allocations) for f in scan.found])
        self.assertEqual([('a', 'compute1')], [
            (moved.server['id'], moved.provider['name'])
            for moved in scan.elsewhere])
        self.assertEqual(['compute1', 'compute2'], sorted(
            read.args[0] for read in placement.allocations.call_args_list))

    @ddt.data(({'compute1': ['compute1', 'gpu']}, ()), ({}, ('nfs',)))
    @ddt.unpack
    def test_candidates_that_may_hold_more_asked_about_alone(self, trees,
                                                             sharing):
        """What they hold of a nested or a sharing provider counts."""
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'b': {'VCPU': 1}})},
            elsewhere={'a': {'gpu': {'VGPU': 1}}}, trees=trees,
            sharing=sharing)

        scan = self.candidates_scan(placement, server('a', **ISOLATE),
                                    server('b', node='compute2', **ISOLATE))

        self.assertEqual({'VCPU': 1, 'VGPU': 1}, scan.found[0].held)
        # With a sharing provider, every candidate may hold some of it.
        self.assertEqual(['a'] + (['b'] if sharing else []), [
            read.args[0] for read in
            placement.consumer_allocations.call_args_list])

    def test_a_cell_down_costs_the_hosts_of_that_cell_alone(self):
        """The hosts no cell that answered has: their consumers, not judged.

        Those of the cells that answered are read as when all answer.
        """
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}, 'c': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'b': {'VCPU': 1}, 'd': {'VCPU': 1}})})
        database = fake_database(down_cells={'cell2': 'refused'},
                                 cell_nodes={'cell1': {'compute1'}})
        database.candidates.return_value = {'a': server('a', **ISOLATE)}
        database.servers.return_value = {
            consumer: {'id': consumer, 'status': 'UNKNOWN',
                       server_fields.CELL: 'cell2'} for consumer in 'bd'}

        scan = isolate_scan.isolate_servers(placement, FakeCompute([]),
                                            database=database)

        database.servers.assert_called_once_with({'b', 'd'}, mock.ANY)
        self.assertEqual(['compute1', 'compute2'], sorted(
            read.args[0] for read in placement.allocations.call_args_list))
        self.assertEqual(['a'], [f.server['id'] for f in scan.found])
        self.assertEqual({'compute2': ['b', 'd']}, scan.unseen)
        self.assertEqual({'compute2': 'cell2'}, scan.unseen_cells)
        self.assertEqual([('cell2', {'compute2': ['b', 'd']})],
                         scan.unseen_by_cell())

    def test_one_listing_of_the_cloud(self):
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}, 'b': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'c': {'VCPU': 1}}),
            'compute3': ({'VCPU': {}}, {})})
        compute = FakeCompute([server('a', **ISOLATE), server('b'),
                               server('c', node='compute2', **ISOLATE)])
        progress = []

        scan = isolate_scan.isolate_servers(
            placement, compute,
            progress=lambda *args: progress.append(args))

        self.assertEqual(['all'], compute.listings)
        self.assertEqual([('a', True), ('c', True)],
                         [(f.server['id'], f.legacy) for f in scan.found])
        self.assertIn(('reading allocations', 3, 3), progress)
        self.assertIn(('listing servers', 3, None), progress)

    def test_no_listing_without_consumers(self):
        placement = fake_placement({'compute1': ({'VCPU': {}}, {})})
        compute = FakeCompute([server('a', **ISOLATE)])
        self.assertEqual(([], {}, frozenset(), [], [], [], {}, {}),
                         dataclasses.astuple(
                             isolate_scan.isolate_servers(placement, compute)))
        self.assertEqual([], compute.listings)

    def test_one_host_listed_alone(self):
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'b': {'VCPU': 1}})})
        compute = FakeCompute([server('a', **ISOLATE),
                               server('b', node='compute2', **ISOLATE)],
                              hosts={'compute1': 'host1',
                                     'compute2': 'host2'})

        scan = isolate_scan.isolate_servers(placement, compute, host='host2')

        self.assertEqual(['host2'], compute.listings)
        self.assertEqual(['b'], [f.server['id'] for f in scan.found])

    def test_legacy_isolation_is_isolate_on_a_host_without_pcpu(self):
        """As Nova pins one thread per core there, for isolate only."""
        placement = fake_placement({
            'legacy': ({'VCPU': {}}, {'isolate': {'VCPU': 1},
                                      'image': {'VCPU': 1},
                                      'forbidden': {'VCPU': 1}}),
            'new': ({'VCPU': {}, 'PCPU': {}}, {'victim': {'VCPU': 1}})})
        compute = FakeCompute([
            server('isolate', node='legacy', **ISOLATE),
            server('image', node='legacy', image='isolate',
                   **{'hw:cpu_policy': 'dedicated'}),
            # Pinned as prefer: it shares its cores, whatever the host.
            server('forbidden', node='legacy', **{
                'hw:cpu_policy': 'dedicated',
                'trait:HW_CPU_HYPERTHREADING': 'forbidden'}),
            server('victim', node='new', **ISOLATE)],
            images={'isolate': image('isolate',
                                     hw_cpu_thread_policy='isolate')},
            hosts={'legacy': 'legacy', 'new': 'new'})

        scan = isolate_scan.isolate_servers(placement, compute)

        self.assertEqual(
            {'isolate': True, 'image': True, 'forbidden': False,
             'victim': False},
            {f.server['id']: f.legacy for f in scan.found})

    def test_nested_providers_of_the_tree(self):
        """Children of the node are nested; other providers share."""
        placement = fake_placement(
            {'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1},
                                         'b': {'VCPU': 1}})},
            elsewhere={'a': {'gpu': {'VGPU': 1}, 'nfs': {'DISK_GB': 1}}},
            trees={'compute1': ['compute1', 'gpu', 'nic']})
        compute = FakeCompute([server('a', **ISOLATE),
                               server('b', **ISOLATE)])

        found = isolate_scan.isolate_servers(placement, compute).found

        self.assertEqual(
            [('a', {'gpu'}, {'VCPU': 1, 'VGPU': 1, 'DISK_GB': 1}),
             ('b', set(), {'VCPU': 1})],
            [(f.server['id'], f.nested, f.held) for f in found])

    def test_servers_the_listing_cannot_show_are_unseen(self):
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'b': {'VCPU': 1}, 'c': {'VCPU': 1}})})
        compute = FakeCompute([
            server('a', **ISOLATE),
            # A down cell's record: no host, status UNKNOWN.
            dict(server('b', **ISOLATE), status='UNKNOWN',
                 **{'OS-EXT-SRV-ATTR:hypervisor_hostname': None}),
            server('c', **ISOLATE)])
        del compute.by_uuid['c']['OS-EXT-SRV-ATTR:hypervisor_hostname']

        scan = isolate_scan.isolate_servers(placement, compute)

        self.assertEqual(['a', 'c'], [f.server['id'] for f in scan.found])
        self.assertEqual({'compute2': ['b']}, scan.unseen)
        self.assertEqual([], compute.looked_up)

    def test_servers_running_elsewhere_are_not_judged_here(self):
        """Judged where they run: what they hold here a move left."""
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'evacuated': {'VCPU': 1},
                                        'migrating': {'VCPU': 1}})})
        compute = FakeCompute([
            server('evacuated', node='compute2', **ISOLATE),
            dict(server('migrating', node='compute3', **ISOLATE),
                 **{'OS-EXT-STS:task_state': 'resize_migrating'})])

        scan = isolate_scan.isolate_servers(placement, compute)

        self.assertEqual([], scan.found)
        self.assertEqual(
            [('evacuated', 'compute2', 'compute1', 'left by a move; an '
              'evacuation\'s stays until the compute of compute1 starts '
              'again'),
             ('migrating', 'compute3', 'compute1',
              'a move in progress (task resize_migrating)')],
            [(moved.server['id'], moved.runs_on, moved.provider['name'],
              moved.why) for moved in scan.elsewhere])

    def test_what_an_evacuated_server_left_on_its_source_is_not_held(self):
        placement = fake_placement(
            {'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}})},
            elsewhere={'a': {'source': {'VCPU': 1, 'MEMORY_MB': 512},
                             'nfs': {'DISK_GB': 1}}})
        compute = FakeCompute([server('a', **ISOLATE)])

        found, = isolate_scan.isolate_servers(placement, compute).found

        self.assertEqual({'compute1': {'VCPU': 1}, 'nfs': {'DISK_GB': 1}},
                         found.allocations)

    @ddt.data(False, True)
    def test_a_provider_deleted_during_the_scan_is_skipped(self, databases):
        placement = fake_placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'b': {'VCPU': 1}}),
            'compute3': ({'VCPU': {}}, {'c': {'VCPU': 1}})})
        read_allocations, read_inventories = (placement.allocations,
                                              placement.inventories)

        def gone_after_listing(read, name):
            def read_unless_gone(uuid):
                if uuid == name:
                    raise exception.ProviderGone(uuid)
                return read(uuid)
            return read_unless_gone

        placement.allocations = gone_after_listing(read_allocations,
                                                   'compute2')
        placement.inventories = gone_after_listing(read_inventories,
                                                   'compute3')
        servers = [server(uuid, node=node, **ISOLATE) for uuid, node in (
            ('a', 'compute1'), ('b', 'compute2'), ('c', 'compute3'))]

        scan = self.candidates_scan(placement, *servers) if databases else \
            isolate_scan.isolate_servers(placement, FakeCompute(servers))

        self.assertEqual(['a'], [f.server['id'] for f in scan.found])
        self.assertEqual(['compute2', 'compute3'],
                         [provider['name'] for provider in scan.gone])

    def test_a_host_of_a_node_the_compute_api_does_not_list(self):
        placement = fake_placement({
            'compute2': ({'VCPU': {}}, {'c': {'VCPU': 1}})})
        compute = FakeCompute([server('c', node='compute2', **ISOLATE)])

        scan = isolate_scan.isolate_servers(placement, compute,
                                            host='compute2')

        # Its name is the best guess of its host.
        self.assertEqual(['compute2'], compute.listings)
        self.assertEqual(['c'], [f.server['id'] for f in scan.found])

    def test_one_host_by_service_host_or_node(self):
        placement = fake_placement({
            'node1.example': ({'VCPU': {}}, {'a': {'VCPU': 1}}),
            'node2.example': ({'VCPU': {}}, {'b': {'VCPU': 1}})})
        hosts = {'node1.example': 'node1', 'node2.example': 'node2'}

        for host in ('node2', 'node2.example'):
            compute = FakeCompute([], hosts=hosts)
            isolate_scan.isolate_servers(placement, compute, host=host)
            self.assertEqual(['node2'], compute.listings)

    def test_unknown_host(self):
        placement = fake_placement({'compute1': ({'VCPU': {}}, {})})
        error = self.assertRaises(
            exception.NotFound, isolate_scan.isolate_servers, placement,
            FakeCompute([]), host='compute9')
        self.assertEqual('--host compute9: no compute host or compute node '
                         'has this name.', str(error))

    def test_known_host_without_hyperthreads(self):
        placement = fake_placement({'compute1': ({'VCPU': {}}, {})})
        placement.providers = lambda **query: (
            [] if 'required' in query else [{'uuid': 'x', 'name': 'other'}])
        compute = FakeCompute([], hosts={'other': 'host2'})
        scan = isolate_scan.isolate_servers(placement, compute, host='host2')
        self.assertEqual(([], {}), (scan.found, scan.unseen))


class LegacyHostsScanTest(base.TestCase):
    """Legacy hosts without hyperthreads, scanned when asked."""

    def placement(self):
        placement = fake_placement({
            'ht': ({'VCPU': {}}, {'on-ht': {'VCPU': 1}}),
            'noht': ({'VCPU': {}}, {'isolate': {'VCPU': 1},
                                    'forbidden': {'VCPU': 1},
                                    'dedicated': {'VCPU': 1},
                                    'down': {'VCPU': 1}})})
        every = placement.providers
        placement.providers = lambda **query: [
            provider for provider in every(**query)
            if 'required' not in query or provider['name'] == 'ht']
        return placement

    def compute(self):
        return FakeCompute([
            server('on-ht', node='ht', **ISOLATE),
            server('isolate', node='noht', **ISOLATE),
            # Nova's fallback query carries the forbidden trait: met there.
            server('forbidden', node='noht', **{
                'hw:cpu_policy': 'dedicated',
                'trait:HW_CPU_HYPERTHREADING': 'forbidden'}),
            server('dedicated', node='noht', **{
                'hw:cpu_policy': 'dedicated'}),
            dict(server('down', node='noht', **ISOLATE), status='UNKNOWN')])

    def test_only_isolate_servers_of_legacy_hosts_without_ht(self):
        placement = self.placement()

        scan = isolate_scan.isolate_servers(
            placement, self.compute(),
            legacy_hosts=[{'uuid': 'noht', 'name': 'noht'},
                          {'uuid': 'ht', 'name': 'ht'}])

        self.assertEqual(
            [('on-ht', True, True), ('isolate', True, False)],
            [(f.server['id'], f.legacy, f.hyperthreaded) for f in scan.found])
        self.assertEqual({'noht': ['down']}, scan.unseen)
        self.assertEqual({'noht'}, scan.without_ht)

    def test_not_asked(self):
        scan = isolate_scan.isolate_servers(self.placement(), self.compute())

        self.assertEqual(['on-ht'], [f.server['id'] for f in scan.found])
        self.assertEqual(({}, frozenset()), (scan.unseen, scan.without_ht))
