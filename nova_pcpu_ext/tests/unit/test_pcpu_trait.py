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

from nova.compute import provider_tree

from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext.tests.unit import base

TRAIT = pcpu_trait.TRAIT


class MarkTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = provider_tree.ProviderTree()
        self.tree.new_root('node1', 'uuid1')
        self.tree.update_traits('node1', ['CUSTOM_OPERATOR'])

    def mark(self, inventory, child_inventory=None):
        def update():
            self.tree.update_inventory('node1', inventory)
            if child_inventory is not None:
                if not self.tree.exists('child1'):
                    self.tree.new_child('child1', 'uuid1', uuid='uuid2')
                self.tree.update_inventory('child1', child_inventory)

        pcpu_trait.PcpuTraitMixin._mark_pcpu(update, self.tree, 'node1')
        return self.tree.data('node1').traits

    def test_host_reporting_pcpu_gets_the_trait(self):
        traits = self.mark({'PCPU': {'total': 2}, 'VCPU': {'total': 2}})
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'}, traits)
        self.assertIn('Compute node node1 reports PCPU inventory: adding',
                      self.logger.output)

    def test_legacy_host_gets_none(self):
        self.assertEqual({'CUSTOM_OPERATOR'},
                         self.mark({'VCPU': {'total': 4}}))
        self.assertEqual('', self.logger.output)

    def test_pcpu_of_a_child_marks_the_compute_node(self):
        traits = self.mark({'VCPU': {'total': 4}}, {'PCPU': {'total': 2}})
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'}, traits)
        self.assertEqual(set(), self.tree.data('child1').traits)

    def test_trait_goes_with_the_pcpu_inventory(self):
        self.mark({'PCPU': {'total': 2}})
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'},
                         self.mark({'PCPU': {'total': 2}}))
        self.assertEqual({'CUSTOM_OPERATOR'},
                         self.mark({'VCPU': {'total': 4}}))
        self.assertIn('Compute node node1 no longer reports PCPU '
                      'inventory: removing', self.logger.output)
        self.assertEqual(2, self.logger.output.count('Compute node node1'))
