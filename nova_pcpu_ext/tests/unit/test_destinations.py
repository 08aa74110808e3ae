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

from nova_pcpu_ext import destinations
from nova_pcpu_ext import isolate_scan
from nova_pcpu_ext.tests.unit import base
from nova_pcpu_ext.tests.unit import fakes


class DestinationRequestsTest(base.TestCase):

    NO_HT = ('!HW_CPU_HYPERTHREADING', '!COMPUTE_STATUS_DISABLED')
    LEGACY = ('!CUSTOM_PCPU_EXT_REPORTS_PCPU', '!COMPUTE_STATUS_DISABLED')

    def found(self, held, dedicated, nested=None, isolate=True):
        allocations = {'node': dict(held, MEMORY_MB=512)}
        allocations.update(nested or {})
        return isolate_scan.IsolateServer({}, {'uuid': 'node'}, 'why',
                                          allocations, legacy=False,
                                          dedicated=dedicated,
                                          nested=frozenset(nested or ()),
                                          isolate=isolate)

    def test_dedicated_asks_for_pcpu(self):
        found = self.found({'VCPU': 2}, dedicated=True)
        self.assertEqual([([{'PCPU': 2, 'MEMORY_MB': 512}], self.NO_HT)],
                         destinations.destination_requests(found))

    def test_legacy_only_asks_for_vcpu_of_a_legacy_host(self):
        """With hyperthreads for isolate, as the scheduler's fallback."""
        isolate = self.found({'VCPU': 2}, dedicated=True)
        forbidden = self.found({'VCPU': 2}, dedicated=True, isolate=False)
        self.assertEqual([([{'PCPU': 2, 'MEMORY_MB': 512}], self.NO_HT),
                          ([{'VCPU': 2, 'MEMORY_MB': 512}], self.LEGACY)],
                         destinations.destination_requests(isolate,
                                                           'legacy_only'))
        self.assertEqual(
            ([{'VCPU': 2, 'MEMORY_MB': 512}],
             self.LEGACY + ('!HW_CPU_HYPERTHREADING',)),
            destinations.destination_requests(forbidden, 'legacy_only')[1])

    def test_others_ask_for_what_they_hold(self):
        found = self.found({'VCPU': 1, 'PCPU': 1}, dedicated=False)
        self.assertEqual(
            [([{'VCPU': 1, 'PCPU': 1, 'MEMORY_MB': 512}], self.NO_HT)],
            destinations.destination_requests(found, 'legacy_only'))

    def test_a_group_per_nested_provider_sharing_ones_unnumbered(self):
        found = self.found({'VCPU': 1}, dedicated=True, nested={
            'gpu2': {'VGPU': 1}, 'gpu1': {'VGPU': 2}})
        found.allocations['nfs'] = {'DISK_GB': 10}
        self.assertEqual(
            [([{'PCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 10}, {'VGPU': 2},
               {'VGPU': 1}], self.NO_HT)],
            destinations.destination_requests(found))

    def test_destination_asks_the_queries_in_turn(self):
        asked = []
        placement = fakes.FakePlacement({})
        placement.candidate = lambda groups, root_required, among: (
            asked.append((groups, root_required)) or
            ('node2' if len(asked) == 2 else None))

        self.assertEqual('node2', destinations.destination(
            placement, self.found({'VCPU': 1}, dedicated=True),
            'legacy_only'))
        self.assertEqual(
            [([{'PCPU': 1, 'MEMORY_MB': 512}], self.NO_HT),
             ([{'VCPU': 1, 'MEMORY_MB': 512}], self.LEGACY)],
            asked)
