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

import math

import ddt

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
