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

import copy
import math

import ddt

from nova_pcpu_ext import audit
from nova_pcpu_ext import exception
from nova_pcpu_ext.tests.unit import base


class FakePlacement(object):
    """Placement's state for one provider; conflicts on the first writes."""

    def __init__(self, inventories, conflicts=0):
        self.generation = 1
        self.stored = inventories
        self.conflicts = conflicts
        self.writes = []

    def providers(self, **query):
        return [{'uuid': 'rp-uuid', 'name': 'compute1'}]

    def inventories(self, uuid):
        return self.generation, copy.deepcopy(self.stored)

    def replace_inventories(self, uuid, generation, inventories):
        self.writes.append(inventories)
        if self.conflicts:
            # Another writer got there first and repaired VCPU.
            self.conflicts -= 1
            self.generation += 1
            self.stored['VCPU']['allocation_ratio'] = 8.0
            return False
        self.generation, self.stored = generation + 1, inventories
        return True


@ddt.ddt
class BadRatioTest(base.TestCase):

    @ddt.unpack
    @ddt.data(
        ('VCPU', 0.0, audit.FAILURE),
        ('MEMORY_MB', -1.0, audit.FAILURE),
        ('DISK_GB', math.nan, audit.FAILURE),
        ('VCPU', math.inf, audit.FAILURE),
        ('PCPU', 2.0, audit.WARNING),
        ('PCPU', 0.0, audit.WARNING),
    )
    def test_bad(self, rc, ratio, severity):
        self.assertEqual([(rc, ratio, severity)], list(audit._bad_ratios(
            {rc: {'total': 4, 'allocation_ratio': ratio}})))

    @ddt.data(('VCPU', 16.0), ('MEMORY_MB', 0.5), ('PCPU', 1.0),
              ('CUSTOM_FPGA', 0.0))
    @ddt.unpack
    def test_good(self, rc, ratio):
        self.assertEqual([], list(audit._bad_ratios(
            {rc: {'total': 4, 'allocation_ratio': ratio}})))


class FixRatiosTest(base.TestCase):

    def test_rule_of_this_config(self):
        self.flags(group=None, cpu_allocation_ratio=0.0,
                   initial_cpu_allocation_ratio=8.0, ram_allocation_ratio=1.5)
        self.assertEqual({'VCPU': 8.0, 'MEMORY_MB': 1.5, 'DISK_GB': 1.0,
                          'PCPU': 1.0}, audit.fix_ratios(self.conf.conf))

    def test_overrides_win(self):
        self.flags(group=None, cpu_allocation_ratio=16.0)
        self.assertEqual(2.0, audit.fix_ratios(
            self.conf.conf, {'VCPU': 2.0})['VCPU'])

    def test_invalid_config_is_an_error(self):
        self.flags(group=None, disk_allocation_ratio=math.inf)
        self.assertRaises(exception.InvalidConfig, audit.fix_ratios,
                          self.conf.conf)


class AuditInventoriesTest(base.TestCase):

    RATIOS = {'VCPU': 4.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0, 'PCPU': 1.0}

    def inventories(self):
        return {'VCPU': {'total': 8, 'reserved': 1, 'allocation_ratio': 0.0},
                'PCPU': {'total': 4, 'allocation_ratio': 2.0},
                'DISK_GB': {'total': 100, 'allocation_ratio': 1.0}}

    def test_report_only_writes_nothing(self):
        placement = FakePlacement(self.inventories())
        findings = audit.audit_inventories(placement, self.RATIOS)
        self.assertEqual([('PCPU', False), ('VCPU', False)],
                         [(f.problem.split()[0], f.fixed) for f in findings])
        self.assertEqual([], placement.writes)

    def test_fix_writes_the_whole_inventory_once(self):
        placement = FakePlacement(self.inventories())
        findings = audit.audit_inventories(placement, self.RATIOS, fix=True)
        self.assertEqual([True, True], [f.fixed for f in findings])
        expected = self.inventories()
        expected['VCPU']['allocation_ratio'] = 4.0
        expected['PCPU']['allocation_ratio'] = 1.0
        self.assertEqual([expected], placement.writes)

    def test_conflicts_are_retried_with_a_new_decision(self):
        placement = FakePlacement(self.inventories(), conflicts=2)
        findings = audit.audit_inventories(placement, self.RATIOS, fix=True)
        self.assertEqual(3, len(placement.writes))
        # The other writer's VCPU ratio is kept; only PCPU was still bad.
        self.assertEqual(8.0, placement.stored['VCPU']['allocation_ratio'])
        self.assertEqual(1.0, placement.stored['PCPU']['allocation_ratio'])
        self.assertEqual(['PCPU allocation_ratio 2.0 is not 1.0'],
                         [f.problem for f in findings])

    def test_endless_conflicts_stop_with_nothing_written(self):
        placement = FakePlacement(self.inventories(), conflicts=99)
        error = self.assertRaises(
            exception.ServiceError, audit.audit_inventories, placement,
            self.RATIOS, fix=True)
        self.assertIn('compute1 (rp-uuid) changed during each of 5 attempts',
                      str(error))
        self.assertEqual(2.0, placement.stored['PCPU']['allocation_ratio'])

    def test_error_after_fixes_says_how_many(self):
        placement = FakePlacement(self.inventories())
        placement.providers = lambda **query: [
            {'uuid': 'rp-uuid', 'name': 'compute1'},
            {'uuid': 'other', 'name': 'compute2'}]
        inventories = placement.inventories

        def fail_for_other(uuid):
            if uuid == 'other':
                raise exception.ServiceError('placement: GET ...: 503.')
            return inventories(uuid)

        placement.inventories = fail_for_other
        error = self.assertRaises(
            exception.ServiceError, audit.audit_inventories, placement,
            self.RATIOS, fix=True)
        self.assertEqual('placement: GET ...: 503. 2 allocation ratios were '
                         'fixed before; run the audit again for the rest.',
                         str(error))


class RatioChangesTest(base.TestCase):

    def test_usable_ratios_the_rule_changes(self):
        self.flags(group=None, cpu_allocation_ratio=8.0)
        placement = FakePlacement({
            'VCPU': {'total': 8, 'allocation_ratio': 16.0},
            'MEMORY_MB': {'total': 8, 'allocation_ratio': 1.0},
            'DISK_GB': {'total': 8, 'allocation_ratio': 0.0}})

        findings = audit.ratio_changes(placement, self.conf.conf)

        self.assertEqual(
            [('VCPU allocation_ratio 16.0 becomes 8.0', 'to keep 16.0, set '
              '[DEFAULT] cpu_allocation_ratio = 16.0 on its compute')],
            [(f.problem, f.action) for f in findings])


class FakeCompute(object):
    """Servers per node; counts the listings."""

    def __init__(self, servers, images=None):
        self.servers = servers
        self.images = images or {}
        self.listings = []

    def node_hosts(self):
        return {'compute1': 'host1'}

    def servers_on_node(self, node, host):
        self.listings.append(host)
        return [s for s in self.servers
                if s['OS-EXT-SRV-ATTR:hypervisor_hostname'] == node]

    def image_properties(self, image_id):
        return self.images.get(image_id)


class IsolateServersTest(base.TestCase):

    def server(self, uuid, node='compute1', image='', **extra_specs):
        return {'id': uuid, 'OS-EXT-SRV-ATTR:host': node,
                'OS-EXT-SRV-ATTR:hypervisor_hostname': node,
                'image': {'id': image} if image else '',
                'flavor': {'original_name': 'pinned',
                           'extra_specs': extra_specs}}

    def placement(self, providers):
        """``{name: (inventories, allocations)}``, all hyperthreaded."""
        placement = FakePlacement({})
        placement.providers = lambda **query: [
            {'uuid': name, 'name': name} for name in providers]
        placement.inventories = lambda uuid: (1, providers[uuid][0])
        placement.allocations = lambda uuid: providers[uuid][1]
        return placement

    def test_which_servers_and_why(self):
        isolate = {'hw:cpu_policy': 'dedicated',
                   'hw:cpu_thread_policy': 'isolate'}
        placement = self.placement({'compute1': ({'PCPU': {}, 'VCPU': {}}, {
            'flavor': {'VCPU': 2}, 'image': {'VCPU': 1},
            'trait': {'VCPU': 1}, 'on-pcpu': {'PCPU': 1},
            'prefer': {'VCPU': 1}, 'require': {'VCPU': 1},
            'dedicated': {'VCPU': 1}, 'image-gone': {'VCPU': 1},
            'flavor-wins': {'VCPU': 1}, 'migration': {'VCPU': 1}})})
        compute = FakeCompute([
            self.server('flavor', **isolate),
            self.server('image', image='isolate-image'),
            self.server('trait', **{
                'hw:cpu_policy': 'dedicated',
                'trait:HW_CPU_HYPERTHREADING': 'forbidden'}),
            self.server('on-pcpu', **isolate),
            self.server('prefer', **{'hw:cpu_policy': 'dedicated',
                                     'hw:cpu_thread_policy': 'prefer'}),
            self.server('require', **{'hw:cpu_policy': 'dedicated',
                                      'hw:cpu_thread_policy': 'require'}),
            self.server('dedicated', **{'hw:cpu_policy': 'dedicated'}),
            self.server('image-gone', image='deleted'),
            self.server('flavor-wins', image='isolate-image',
                        **{'hw:cpu_thread_policy': 'prefer'}),
        ], images={'isolate-image': {'hw_cpu_thread_policy': 'isolate'}})

        found = audit.isolate_servers(placement, compute)

        self.assertEqual(
            [('flavor', 'flavor hw:cpu_thread_policy=isolate', 2),
             ('image', 'image hw_cpu_thread_policy=isolate', 1),
             ('trait', 'flavor trait:HW_CPU_HYPERTHREADING=forbidden', 1)],
            [(f.server['id'], f.reason, f.vcpus) for f in found])
        self.assertFalse(any(f.legacy for f in found))

    def test_one_listing_per_host_with_vcpu_consumers(self):
        placement = self.placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}, 'b': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {}),
            'compute3': ({'VCPU': {}}, {'c': {'PCPU': 1}})})
        compute = FakeCompute([self.server('a', **{
            'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'})])

        found = audit.isolate_servers(placement, compute)

        self.assertEqual(['host1'], compute.listings)
        self.assertEqual([('a', True)],
                         [(f.server['id'], f.legacy) for f in found])

    def test_one_host(self):
        placement = self.placement({
            'compute1': ({'VCPU': {}}, {'a': {'VCPU': 1}}),
            'compute2': ({'VCPU': {}}, {'b': {'VCPU': 1}})})
        compute = FakeCompute([])

        audit.isolate_servers(placement, compute, host='compute2')

        self.assertEqual(['compute2'], compute.listings)
