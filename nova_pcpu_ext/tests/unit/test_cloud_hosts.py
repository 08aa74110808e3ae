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

from nova_pcpu_ext import cloud_hosts
from nova_pcpu_ext import exception
from nova_pcpu_ext.tests.unit import base
from nova_pcpu_ext.tests.unit import fakes


class ComputeNodesTest(base.TestCase):

    def test_legacy_and_new_style_by_their_trees(self):
        placement = fakes.FakePlacement({})
        providers = [
            {'uuid': 'legacy', 'name': 'legacy'},
            {'uuid': 'legacy-ht', 'name': 'legacy-ht'},
            {'uuid': 'new', 'name': 'new'},
            # PCPU below the root: the tree reports it.
            {'uuid': 'nested-pcpu', 'name': 'nested-pcpu'},
            {'uuid': 'child', 'name': 'nested-pcpu_numa0',
             'root_provider_uuid': 'nested-pcpu'},
            {'uuid': 'gpu', 'name': 'legacy_gpu',
             'root_provider_uuid': 'legacy'},
            # Neither: shared storage, a bare metal node.
            {'uuid': 'nfs', 'name': 'nfs'},
            {'uuid': 'ironic', 'name': 'ironic'}]
        inventories = {
            'legacy': {'VCPU': {}, 'MEMORY_MB': {}},
            'legacy-ht': {'VCPU': {}},
            'new': {'VCPU': {}, 'PCPU': {}},
            'nested-pcpu': {'VCPU': {}, 'MEMORY_MB': {}},
            'child': {'PCPU': {}},
            'gpu': {'VGPU': {}},
            'nfs': {'DISK_GB': {}},
            'ironic': {'CUSTOM_BAREMETAL': {}}}
        placement.providers = lambda **query: (
            [providers[1], providers[2]] if query else providers)
        placement.inventories = lambda uuid: (1, inventories[uuid])

        nodes = cloud_hosts.compute_nodes(placement)

        self.assertEqual(['legacy', 'legacy-ht'],
                         [p['name'] for p in nodes.legacy])
        self.assertEqual(['new', 'nested-pcpu'],
                         [p['name'] for p in nodes.new_style])
        self.assertEqual({'legacy-ht', 'new'}, nodes.hyperthreaded)

    def test_a_deleted_provider_is_in_neither_list(self):
        placement = fakes.FakePlacement({'VCPU': {}})
        providers = [{'uuid': 'gone', 'name': 'gone'},
                     {'uuid': 'legacy', 'name': 'legacy'}]
        placement.providers = lambda **query: [] if query else providers

        def gone_or_read(uuid):
            if uuid == 'gone':
                raise exception.ProviderGone(uuid)
            return 1, {'VCPU': {}}

        placement.inventories = gone_or_read

        nodes = cloud_hosts.compute_nodes(placement)

        self.assertEqual((['legacy'], []), (
            [p['name'] for p in nodes.legacy],
            [p['name'] for p in nodes.new_style]))


class LackingTraitTest(base.TestCase):

    TARGETS = [{'uuid': 'a', 'name': 'a'}, {'uuid': 'b', 'name': 'b'}]

    def placement(self, known):
        placement = fakes.FakePlacement({})
        placement.asked = []

        def get(url, *keys):
            placement.asked.append(url)
            return [['CUSTOM_X'] if known else []]

        def providers(**query):
            placement.asked.append(query)
            return [{'uuid': 'b', 'name': 'b'}]

        placement.get, placement.providers = get, providers
        return placement

    def test_providers_without_the_trait(self):
        placement = self.placement(known=True)
        self.assertEqual(['a'], [p['name'] for p in cloud_hosts.lacking_trait(
            placement, self.TARGETS, 'CUSTOM_X')])
        self.assertEqual(['/traits?name=in:CUSTOM_X',
                          {'required': 'CUSTOM_X'}], placement.asked)

    def test_a_trait_placement_does_not_know(self):
        """Placement refuses to filter by it: nobody has it."""
        placement = self.placement(known=False)
        self.assertEqual(self.TARGETS, cloud_hosts.lacking_trait(
            placement, self.TARGETS, 'CUSTOM_X'))
        self.assertEqual(['/traits?name=in:CUSTOM_X'], placement.asked)

    def test_nothing_asked_without_targets(self):
        placement = self.placement(known=True)
        self.assertEqual([], cloud_hosts.lacking_trait(placement, [],
                                                       'CUSTOM_X'))
        self.assertEqual([], placement.asked)
