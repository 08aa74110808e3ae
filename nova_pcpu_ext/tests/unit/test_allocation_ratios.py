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
from nova.compute import provider_tree
from nova import objects

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import exception
from nova_pcpu_ext.tests.unit import base

NAN = math.nan
INF = math.inf


@ddt.ddt
class EffectiveRatioTest(base.TestCase):

    @ddt.unpack
    @ddt.data(
        # configured, initial, held, expected
        (2.0, 8.0, 3.0, 2.0),    # configured wins
        (None, 8.0, None, 8.0),  # unset: initial
        (0.0, 8.0, None, 8.0),   # 0.0 means unset
        (None, None, None, 4.0),  # nothing: built-in default
        (0.0, 0.0, None, 4.0),
        (None, 0.0, 3.0, 3.0),   # what placement holds
        (None, 8.0, 3.0, 3.0),   # held beats initial
        (None, 8.0, 0.0, 8.0),   # zero held is not kept
        (None, 8.0, NAN, 8.0),
        (None, NAN, INF, 4.0),
        (INF, None, None, 4.0),
        (-1.0, None, None, 4.0),
    )
    def test_rule(self, configured, initial, held, expected):
        self.assertEqual(expected, allocation_ratios.effective_ratio(
            configured, initial, 4.0, held))


@ddt.ddt
class ValidateConfigTest(base.TestCase):

    @ddt.data('cpu_allocation_ratio', 'ram_allocation_ratio',
              'disk_allocation_ratio', 'initial_cpu_allocation_ratio',
              'initial_ram_allocation_ratio', 'initial_disk_allocation_ratio')
    def test_non_finite_rejected(self, option):
        for value in (NAN, INF):
            self.flags(group=None, **{option: value})
            error = self.assertRaises(
                exception.InvalidConfig,
                allocation_ratios.AllocationRatiosMixin.validate_config,
                self.conf.conf)
            self.assertIn('[DEFAULT] %s = %s is not a finite number' % (
                option, value), str(error))

    def test_zero_accepted_with_a_warning_unset_silently(self):
        self.flags(group=None, cpu_allocation_ratio=0.0,
                   initial_ram_allocation_ratio=0.0, ram_allocation_ratio=None)
        allocation_ratios.AllocationRatiosMixin.validate_config(
            self.conf.conf)
        self.assertEqual(
            "[DEFAULT] cpu_allocation_ratio = 0.0 means unset: the next "
            "ratio of Nova's precedence applies, down to the default.\n"
            "[DEFAULT] initial_ram_allocation_ratio = 0.0 means unset: the "
            "next ratio of Nova's precedence applies, down to the "
            "default.\n", self.logger.output)


class ConfiguredRatiosTest(base.TestCase):

    def test_held_ratios_are_kept_new_inventory_gets_initial(self):
        # A node born when the initial defaults were 16.0 and 1.5.
        self.flags(group=None, initial_disk_allocation_ratio=2.0)

        self.assertEqual(
            {'VCPU': 16.0, 'MEMORY_MB': 1.5, 'DISK_GB': 2.0},
            allocation_ratios.configured_ratios(
                self.conf.conf, {'VCPU': 16.0, 'MEMORY_MB': 1.5}))


class Driver(object):
    """Reports what a driver reports, ratios included."""

    def __init__(self, root, child=None):
        self.root, self.child = root, child

    def update_provider_tree(self, provider_tree, nodename):
        provider_tree.update_inventory(nodename, copy.deepcopy(self.root))
        if self.child is not None:
            provider_tree.update_inventory('child1',
                                           copy.deepcopy(self.child))


class Tracker(object):
    """The part of Nova's resource tracker the mixin overrides."""

    def __init__(self, host, driver):
        self.driver = driver
        self.copied = []
        self.updates = True

    def _copy_resources(self, compute_node, resources):
        self.copied.append(resources['hypervisor_hostname'])

    def _update_to_placement(self, context, compute_node):
        if self.updates:
            self.driver.update_provider_tree(
                self.tree, compute_node.hypervisor_hostname)


class MixedTracker(allocation_ratios.AllocationRatiosMixin, Tracker):
    pass


def inventory(ratio, *classes):
    return {rc: {'total': 4, 'allocation_ratio': ratio} for rc in classes}


class MixinTest(base.TestCase):
    """Cases the mutation run found untested (tools/mutation)."""

    def setUp(self):
        super().setUp()
        objects.register_all()
        self.tree = provider_tree.ProviderTree()
        self.tree.new_root('node1', 'uuid1')
        self.tree.new_child('child1', 'uuid1', uuid='uuid2')
        # What placement holds: a node born with the old initial ratios.
        self.tree.update_inventory('node1', {
            'VCPU': {'total': 4, 'allocation_ratio': 16.0},
            'MEMORY_MB': {'total': 4, 'allocation_ratio': 1.5}})
        self.node = objects.ComputeNode(hypervisor_hostname='node1')

    def tracker(self, root, child=None):
        tracker = MixedTracker('host1', Driver(root, child))
        tracker.tree = self.tree
        return tracker

    def ratios(self, name):
        return {rc: inv['allocation_ratio'] for rc, inv in
                self.tree.data(name).inventory.items()}

    def node_ratios(self):
        return (self.node.cpu_allocation_ratio,
                self.node.ram_allocation_ratio,
                self.node.disk_allocation_ratio)

    def test_placement_gets_the_rule_and_pcpu_one(self):
        # Kills the mutants of _apply_ratios: held ratios read before the
        # driver's update, the root only, PCPU everywhere, stale written.
        self.flags(group=None, disk_allocation_ratio=2.0,
                   initial_disk_allocation_ratio=3.0)
        tracker = self.tracker(
            inventory(0.0, 'VCPU', 'MEMORY_MB', 'DISK_GB', 'PCPU'),
            inventory(0.0, 'VCPU', 'PCPU'))

        tracker._update_to_placement(None, self.node)

        self.assertEqual({'VCPU': 16.0, 'MEMORY_MB': 1.5, 'DISK_GB': 2.0,
                          'PCPU': 1.0}, self.ratios('node1'))
        self.assertEqual({'VCPU': 0.0, 'PCPU': 1.0}, self.ratios('child1'))
        # The ComputeNode follows what placement was sent.
        self.assertEqual((16.0, 1.5, 2.0), self.node_ratios())

    def test_only_the_root_gets_the_rule(self):
        # Kills ``uuid <= root_uuid``: a child whose uuid sorts before
        # the root's got the root's ratios.
        self.tree.new_child('child0', 'uuid1', uuid='uuid0')
        self.tree.update_inventory('child0', inventory(0.0, 'VCPU'))
        self.tracker(inventory(0.0, 'VCPU'))._update_to_placement(
            None, self.node)
        self.assertEqual({'VCPU': 0.0}, self.ratios('child0'))

    def test_ratios_above_the_rule_are_lowered(self):
        # Kills ``!=`` into ``<`` in the stale test of _apply_ratios.
        self.flags(group=None, disk_allocation_ratio=2.0)
        tracker = self.tracker(inventory(16.0, 'PCPU', 'DISK_GB'))
        tracker._update_to_placement(None, self.node)
        self.assertEqual({'PCPU': 1.0, 'DISK_GB': 2.0}, self.ratios('node1'))

    def test_compute_node_keeps_its_ratios_until_placement_is_sent(self):
        # Kills the mutants of _copy_resources: before the first update to
        # placement, the ComputeNode's own ratios stand for what placement
        # holds; afterwards, what was sent.
        self.node.cpu_allocation_ratio = 16.0
        self.node.ram_allocation_ratio = 0.0
        tracker = self.tracker(inventory(0.0, 'VCPU', 'MEMORY_MB'))

        tracker._copy_resources(self.node, {'hypervisor_hostname': 'node1'})

        self.assertEqual(['node1'], tracker.copied)
        self.assertEqual((16.0, 1.0, 1.0), self.node_ratios())

        self.flags(group=None, ram_allocation_ratio=2.0)
        tracker._update_to_placement(None, self.node)
        self.node.cpu_allocation_ratio = 3.0
        tracker._copy_resources(self.node, {'hypervisor_hostname': 'node1'})
        self.assertEqual((16.0, 2.0, 1.0), self.node_ratios())

    def test_no_placement_update_leaves_the_compute_node(self):
        # Kills ``if not ratios`` in _update_to_placement: Nova updated no
        # provider of the node, so no ratio was sent to follow.
        tracker = self.tracker(inventory(0.0, 'VCPU'))
        tracker.updates = False
        self.node.cpu_allocation_ratio = 5.0
        tracker._update_to_placement(None, self.node)
        self.assertEqual(5.0, self.node.cpu_allocation_ratio)


class UnreadableConf(object):
    """oslo.config's answer to a ratio it cannot read from its files."""

    config_file = config_dir = []

    def __getattr__(self, name):
        raise ValueError('Value for option %s is not valid: could not '
                         'convert string to float' % name)


class RuleEdgesTest(base.TestCase):
    """Cases the mutation run found untested (tools/mutation)."""

    def test_a_ratio_below_one_is_usable(self):
        # Kills ``ratio > 1`` in is_usable.
        self.assertEqual(0.5, allocation_ratios.effective_ratio(
            0.5, 8.0, 4.0))

    def test_built_in_defaults(self):
        # Kills the NumberReplacer mutants of RATIOS' defaults.
        self.flags(group=None, initial_cpu_allocation_ratio=0.0,
                   initial_ram_allocation_ratio=0.0,
                   initial_disk_allocation_ratio=0.0)
        self.assertEqual({'VCPU': 4.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0},
                         allocation_ratios.configured_ratios(self.conf.conf))

    def test_an_unreadable_ratio_is_named(self):
        # Kills ``'%s. Set ...' + invalid_value(...)``.
        error = self.assertRaises(
            exception.InvalidConfig,
            allocation_ratios.validate_ratio_options, UnreadableConf())
        self.assertEqual(
            '[DEFAULT] cpu_allocation_ratio = None is invalid: could not '
            'convert string to float. Set a positive ratio such as 1.5, or '
            'leave it unset for the default.', str(error))
