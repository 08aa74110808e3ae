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

"""Resource tracker mixin ``allocation_ratios`` against real Nova and real
placement (Nova bug 1789654).
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

from nova import context as nova_context
from nova import objects

from nova_pcpu_ext import compute
from nova_pcpu_ext import exception

RC_FIELDS = {'VCPU': 'cpu_allocation_ratio',
             'MEMORY_MB': 'ram_allocation_ratio',
             'DISK_GB': 'disk_allocation_ratio'}
DEFAULTS = {'VCPU': 4.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0, 'PCPU': 1.0}


class _RatiosTestBase(base.ExtensionTestBase):

    def start(self):
        return self.start_host('compute1', base.HYPERTHREADED,
                               dedicated='0-1', shared='2-3')

    def placement_ratios(self, rp_uuid):
        return {rc: inv['allocation_ratio'] for rc, inv in
                self._get_provider_inventory(rp_uuid).items()}

    def compute_node(self):
        return objects.ComputeNode.get_by_nodename(
            nova_context.get_admin_context(), 'compute1')

    def compute_node_ratios(self):
        node = self.compute_node()
        return {rc: getattr(node, field) for rc, field in RC_FIELDS.items()}

    def restart(self):
        self.computes['compute1'] = self.restart_compute_service('compute1')

    def set_placement_ratios(self, rp_uuid, ratios):
        """Change allocation ratios through the placement API."""
        url = '/resource_providers/%s/inventories' % rp_uuid
        inventories = self.placement.get(url).body
        for rc, ratio in ratios.items():
            inventories['inventories'][rc]['allocation_ratio'] = ratio
        resp = self.placement.put(url, inventories, version='1.26')
        self.assertEqual(200, resp.status, resp.body)

    def seed_zero_ratios(self, rp_uuid):
        """Write 0.0 ratios into the ComputeNode row and placement."""
        node = self.compute_node()
        for field in RC_FIELDS.values():
            setattr(node, field, 0.0)
        node.save()
        self.set_placement_ratios(rp_uuid, dict.fromkeys(RC_FIELDS, 0.0))

    def set_ratio_in_placement_and_refresh(self, rp_uuid):
        """An operator sets VCPU 3.0 in placement; the compute sees it.

        As if [compute] resource_provider_association_refresh seconds had
        passed: the next periodic refreshes the cache from placement.
        """
        self.set_placement_ratios(rp_uuid, {'VCPU': 3.0})
        self.computes['compute1'].manager.reportclient.\
            _association_refresh_time.clear()


class StockNovaTest(_RatiosTestBase):
    extension = False

    def test_bug_unset_ratio_keeps_stale_value(self):
        self.flags(cpu_allocation_ratio=2.0)
        rp_uuid = self.start()
        self.flags(cpu_allocation_ratio=None)

        self.restart()
        self._run_periodics()

        # The operator unset the ratio: placement keeps the old value while
        # the ComputeNode went back to the default, so they disagree.
        self.assertEqual(2.0, self.placement_ratios(rp_uuid)['VCPU'])
        self.assertEqual(4.0, self.compute_node_ratios()['VCPU'])

    def test_bug_initial_zero_ratio_gives_zero_capacity(self):
        self.flags(initial_cpu_allocation_ratio=0.0)

        rp_uuid = self.start()

        self.assertEqual(0.0, self.placement_ratios(rp_uuid)['VCPU'])
        self.assertEqual(0.0, self.compute_node_ratios()['VCPU'])


class AllocationRatiosTest(_RatiosTestBase):

    def test_zero_ratios_give_defaults(self):
        self.flags(cpu_allocation_ratio=0.0, initial_cpu_allocation_ratio=0.0,
                   ram_allocation_ratio=0.0, initial_ram_allocation_ratio=0.0,
                   disk_allocation_ratio=0.0,
                   initial_disk_allocation_ratio=0.0)

        rp_uuid = self.start()

        self.assertEqual(DEFAULTS, self.placement_ratios(rp_uuid))
        self.assertEqual({rc: DEFAULTS[rc] for rc in RC_FIELDS},
                         self.compute_node_ratios())

    def test_explicit_ratio_then_unset_is_kept_in_both(self):
        self.flags(cpu_allocation_ratio=2.0, ram_allocation_ratio=1.5,
                   disk_allocation_ratio=3.0)
        rp_uuid = self.start()
        explicit = {'VCPU': 2.0, 'MEMORY_MB': 1.5, 'DISK_GB': 3.0}
        self.assertEqual(dict(explicit, PCPU=1.0),
                         self.placement_ratios(rp_uuid))
        self.assertEqual(explicit, self.compute_node_ratios())

        self.flags(cpu_allocation_ratio=None, ram_allocation_ratio=None,
                   disk_allocation_ratio=None)
        self.restart()

        # As in Nova, placement keeps what it holds; unlike stock Nova
        # (StockNovaTest), the ComputeNode says the same.
        self.assertEqual(dict(explicit, PCPU=1.0),
                         self.placement_ratios(rp_uuid))
        self.assertEqual(explicit, self.compute_node_ratios())

    def test_initial_ratios_used_when_unset(self):
        self.flags(initial_cpu_allocation_ratio=8.0)

        rp_uuid = self.start()

        self.assertEqual(8.0, self.placement_ratios(rp_uuid)['VCPU'])
        self.assertEqual(8.0, self.compute_node_ratios()['VCPU'])

    def test_zero_ratios_in_compute_node_and_placement_are_repaired(self):
        rp_uuid = self.start()
        self.seed_zero_ratios(rp_uuid)
        self.assertEqual(0.0, self.placement_ratios(rp_uuid)['VCPU'])

        self.restart()

        self.assertEqual(DEFAULTS, self.placement_ratios(rp_uuid))
        self.assertEqual({rc: DEFAULTS[rc] for rc in RC_FIELDS},
                         self.compute_node_ratios())

    def test_ratio_set_through_placement_survives_and_reaches_compute_node(
            self):
        rp_uuid = self.start()
        self.set_ratio_in_placement_and_refresh(rp_uuid)

        self._run_periodics()
        self._run_periodics()

        self.assertEqual(3.0, self.placement_ratios(rp_uuid)['VCPU'])
        self.assertEqual(3.0, self.compute_node_ratios()['VCPU'])

    def test_configured_ratio_wins_over_placement(self):
        self.flags(cpu_allocation_ratio=2.0)
        rp_uuid = self.start()
        self.set_ratio_in_placement_and_refresh(rp_uuid)

        self._run_periodics()

        self.assertEqual(2.0, self.placement_ratios(rp_uuid)['VCPU'])
        self.assertEqual(2.0, self.compute_node_ratios()['VCPU'])


class SwitchOnInAnOldCloudTest(_RatiosTestBase):
    """Stock Nova first, then the extension, on the same node."""

    extension = False

    def switch_on(self):
        compute.activate_plugins()
        self.restart()
        self._run_periodics()

    def test_ratios_born_under_the_defaults_before_2023_1_are_kept(self):
        # Nova's initial_* defaults were 16.0 and 1.5 before 2023.1; clouds
        # born then keep them with the options unset.
        self.flags(initial_cpu_allocation_ratio=16.0,
                   initial_ram_allocation_ratio=1.5)
        rp_uuid = self.start()
        self.flags(initial_cpu_allocation_ratio=None,
                   initial_ram_allocation_ratio=None)

        self.switch_on()

        old = {'VCPU': 16.0, 'MEMORY_MB': 1.5, 'DISK_GB': 1.0}
        self.assertEqual(dict(old, PCPU=1.0), self.placement_ratios(rp_uuid))
        self.assertEqual(old, self.compute_node_ratios())

    def test_a_ratio_set_through_placement_survives_switching_on(self):
        rp_uuid = self.start()
        self.set_placement_ratios(rp_uuid, {'VCPU': 8.0})

        self.switch_on()
        self._run_periodics()

        self.assertEqual(8.0, self.placement_ratios(rp_uuid)['VCPU'])
        self.assertEqual(8.0, self.compute_node_ratios()['VCPU'])

    def test_a_zero_ratio_left_by_stock_is_repaired(self):
        rp_uuid = self.start()
        self.seed_zero_ratios(rp_uuid)

        self.switch_on()

        self.assertEqual(DEFAULTS, self.placement_ratios(rp_uuid))
        self.assertEqual({rc: DEFAULTS[rc] for rc in RC_FIELDS},
                         self.compute_node_ratios())


class StartupErrorTest(base.ExtensionTestBase):
    extension = False

    def test_non_finite_ratio_stops_activation(self):
        for option, value in (('cpu_allocation_ratio', 'nan'),
                              ('initial_disk_allocation_ratio', 'inf')):
            self.flags(**{option: float(value)})
            error = self.assertRaises(exception.InvalidConfig,
                                      compute.activate_plugins)
            self.assertIn('[DEFAULT] %s = %s' % (option, value), str(error))
            self.flags(**{option: None})
