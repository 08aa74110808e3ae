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

from nova_pcpu_ext import exception
from nova_pcpu_ext import ratio_audit
from nova_pcpu_ext.tests.unit import base
from nova_pcpu_ext.tests.unit import fakes


@ddt.ddt
class BadRatioTest(base.TestCase):

    @ddt.unpack
    @ddt.data(
        ('VCPU', 0.0, ratio_audit.FAILURE),
        ('MEMORY_MB', -1.0, ratio_audit.FAILURE),
        ('DISK_GB', math.nan, ratio_audit.FAILURE),
        ('VCPU', math.inf, ratio_audit.FAILURE),
        ('PCPU', 2.0, ratio_audit.WARNING),
        ('PCPU', 0.0, ratio_audit.WARNING),
    )
    def test_bad(self, rc, ratio, severity):
        self.assertEqual([(rc, ratio, severity)], list(ratio_audit._bad_ratios(
            {rc: {'total': 4, 'allocation_ratio': ratio}})))

    @ddt.data(('VCPU', 16.0), ('MEMORY_MB', 0.5), ('PCPU', 1.0),
              ('CUSTOM_FPGA', 0.0))
    @ddt.unpack
    def test_good(self, rc, ratio):
        self.assertEqual([], list(ratio_audit._bad_ratios(
            {rc: {'total': 4, 'allocation_ratio': ratio}})))


class FixRatiosTest(base.TestCase):

    def test_rule_of_this_config(self):
        self.flags(group=None, cpu_allocation_ratio=0.0,
                   initial_cpu_allocation_ratio=8.0, ram_allocation_ratio=1.5)
        self.assertEqual({'VCPU': 8.0, 'MEMORY_MB': 1.5, 'DISK_GB': 1.0,
                          'PCPU': 1.0}, ratio_audit.fix_ratios(self.conf.conf))

    def test_overrides_win(self):
        self.flags(group=None, cpu_allocation_ratio=16.0)
        self.assertEqual(2.0, ratio_audit.fix_ratios(
            self.conf.conf, {'VCPU': 2.0})['VCPU'])

    def test_invalid_config_is_an_error(self):
        self.flags(group=None, disk_allocation_ratio=math.inf)
        self.assertRaises(exception.InvalidConfig, ratio_audit.fix_ratios,
                          self.conf.conf)


class AuditInventoriesTest(base.TestCase):

    RATIOS = {'VCPU': 4.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0, 'PCPU': 1.0}

    def inventories(self):
        return {'VCPU': {'total': 8, 'reserved': 1, 'allocation_ratio': 0.0},
                'PCPU': {'total': 4, 'allocation_ratio': 2.0},
                'DISK_GB': {'total': 100, 'allocation_ratio': 1.0}}

    def test_report_only_writes_nothing(self):
        placement = fakes.FakePlacement(self.inventories())
        findings = ratio_audit.audit_inventories(placement, self.RATIOS)
        self.assertEqual([('PCPU', False), ('VCPU', False)],
                         [(f.problem.split()[0], f.fixed) for f in findings])
        self.assertEqual([], placement.writes)

    def test_fix_writes_the_whole_inventory_once(self):
        placement = fakes.FakePlacement(self.inventories())
        findings = ratio_audit.audit_inventories(placement, self.RATIOS,
                                                 fix=True)
        self.assertEqual([True, True], [f.fixed for f in findings])
        expected = self.inventories()
        expected['VCPU']['allocation_ratio'] = 4.0
        expected['PCPU']['allocation_ratio'] = 1.0
        self.assertEqual([expected], placement.writes)

    def test_conflicts_are_retried_with_a_new_decision(self):
        placement = fakes.FakePlacement(self.inventories(), conflicts=2)
        findings = ratio_audit.audit_inventories(placement, self.RATIOS,
                                                 fix=True)
        self.assertEqual(3, len(placement.writes))
        # The other writer's VCPU ratio is kept; only PCPU was still bad.
        self.assertEqual(8.0, placement.stored['VCPU']['allocation_ratio'])
        self.assertEqual(1.0, placement.stored['PCPU']['allocation_ratio'])
        self.assertEqual([
            ('PCPU allocation_ratio 2.0 is not 1.0',
             'set allocation_ratio to 1.0', True),
            ('VCPU allocation_ratio 0.0 is not a positive number',
             'fixed by nova-compute: allocation_ratio is 8.0', True)],
            [(f.problem, f.action, f.fixed) for f in findings])

    def test_a_lost_answer_to_a_write_that_landed(self):
        """The write landed, its answer was lost, the retry met a 409."""
        placement = fakes.FakePlacement(self.inventories())
        replace = placement.replace_inventories

        def landed_then_conflict(uuid, generation, inventories):
            replace(uuid, generation, inventories)
            return False

        placement.replace_inventories = landed_then_conflict
        findings = ratio_audit.audit_inventories(placement, self.RATIOS,
                                                 fix=True)
        self.assertEqual(1, len(placement.writes))
        self.assertEqual(
            [('PCPU', 'set allocation_ratio to 1.0', True),
             ('VCPU', 'set allocation_ratio to 4.0', True)],
            [(f.problem.split()[0], f.action, f.fixed) for f in findings])

    def test_endless_conflicts_stop_with_nothing_written(self):
        placement = fakes.FakePlacement(self.inventories(), conflicts=99)
        error = self.assertRaises(
            exception.ServiceError, ratio_audit.audit_inventories, placement,
            self.RATIOS, fix=True)
        self.assertIn('compute1 (rp-uuid) changed during each of 5 attempts',
                      str(error))
        self.assertEqual(2.0, placement.stored['PCPU']['allocation_ratio'])

    def test_error_after_fixes_says_how_many(self):
        placement = fakes.FakePlacement(self.inventories())
        placement.providers = lambda **query: [
            {'uuid': 'rp-uuid', 'name': 'compute1'},
            {'uuid': 'other', 'name': 'compute2'}]
        inventories = placement.inventories
        reads = []

        def fail_for_other(uuid):
            # Read to find what to fix, then to fix it: it fails then.
            reads.append(uuid)
            if reads.count('other') == 2:
                raise exception.ServiceError('placement: GET ...: 503.')
            return inventories(uuid)

        placement.inventories = fail_for_other
        error = self.assertRaises(
            exception.ServiceError, ratio_audit.audit_inventories, placement,
            self.RATIOS, fix=True)
        self.assertEqual('placement: GET ...: 503. 2 allocation ratios were '
                         'fixed before; run the audit again for the rest.',
                         str(error))

    def deleted(self, placement, method):
        """``placement`` with provider ``gone`` first; ``method`` 404s it."""
        placement.providers = lambda **query: [
            {'uuid': 'gone', 'name': 'ironic1'},
            {'uuid': 'rp-uuid', 'name': 'compute1'}]
        stock = getattr(placement, method)

        def gone_or_stock(uuid, *args):
            if uuid == 'gone':
                raise exception.ProviderGone(uuid)
            return stock(uuid, *args)

        setattr(placement, method, gone_or_stock)
        return placement

    def assertGoneAndFixed(self, findings):
        self.assertEqual([
            ('gone', 'note', 'ironic1', 'deleted during the run',
             'none: skipped', False),
            ('inventory', 'warning', 'compute1', 'PCPU allocation_ratio 2.0 '
             'is not 1.0', 'set allocation_ratio to 1.0', True),
            ('inventory', 'failure', 'compute1', 'VCPU allocation_ratio 0.0 '
             'is not a positive number', 'set allocation_ratio to 4.0',
             True)],
            [(f.check, f.severity, f.provider_name, f.problem, f.action,
              f.fixed) for f in findings])

    def test_a_provider_deleted_before_it_is_read_is_noted(self):
        placement = self.deleted(fakes.FakePlacement(self.inventories()),
                                 'inventories')

        self.assertGoneAndFixed(ratio_audit.audit_inventories(
            placement, self.RATIOS, fix=True))
        self.assertEqual(1, len(placement.writes))

    def test_a_provider_deleted_before_it_is_written_is_noted(self):
        placement = self.deleted(fakes.FakePlacement(self.inventories()),
                                 'replace_inventories')

        self.assertGoneAndFixed(ratio_audit.audit_inventories(
            placement, self.RATIOS, fix=True))


class RatioChangesTest(base.TestCase):

    HELD = {'VCPU': {'total': 8, 'allocation_ratio': 16.0},
            'MEMORY_MB': {'total': 8, 'allocation_ratio': 1.5},
            'DISK_GB': {'total': 8, 'allocation_ratio': 0.0}}

    def test_a_configured_ratio_overrides_the_held_one(self):
        self.flags(group=None, cpu_allocation_ratio=8.0)
        placement = fakes.FakePlacement(self.HELD)

        findings = ratio_audit.ratio_changes(placement, self.conf.conf)

        self.assertEqual(
            [('VCPU allocation_ratio 16.0 becomes 8.0', '[DEFAULT] '
              'cpu_allocation_ratio = 8.0 overrides the ratio placement '
              'holds, as in Nova; unset it on that compute to keep 16.0')],
            [(f.problem, f.action) for f in findings])

    def test_held_ratios_are_kept_whatever_the_initial_ones(self):
        # Ratios born under the defaults before 2023.1, or set through
        # placement; the unusable DISK_GB ratio is the audit's finding.
        self.flags(group=None, initial_cpu_allocation_ratio=2.0,
                   initial_ram_allocation_ratio=1.0, ram_allocation_ratio=0.0)

        self.assertEqual([], ratio_audit.ratio_changes(
            fakes.FakePlacement(self.HELD), self.conf.conf))

    def test_only_compute_node_providers(self):
        self.flags(group=None, cpu_allocation_ratio=8.0)
        placement = fakes.FakePlacement(self.HELD)
        placement.providers = lambda **query: [
            {'uuid': 'child', 'name': 'compute1_gpu',
             'root_provider_uuid': 'rp-uuid'}]

        self.assertEqual([], ratio_audit.ratio_changes(placement,
                                                       self.conf.conf))

    def test_compute_nodes_by_their_trait_in_one_request(self):
        """A sharing provider or another service's root is not judged."""
        self.flags(group=None, cpu_allocation_ratio=8.0)
        placement = fakes.FakePlacement(self.HELD)
        asked = []
        node = {'uuid': 'rp-uuid', 'name': 'compute1'}
        others = [{'uuid': 'nfs', 'name': 'nfs'},
                  {'uuid': 'neutron', 'name': 'agent1'}]

        def providers(**query):
            asked.append(query)
            return [node] if query else [node] + others

        placement.providers = providers

        findings = ratio_audit.ratio_changes(placement, self.conf.conf)

        self.assertEqual(['compute1'], [f.provider_name for f in findings])
        self.assertEqual([{'required': 'COMPUTE_NODE'}], asked)

    def test_a_deleted_compute_node_is_noted(self):
        self.flags(group=None, cpu_allocation_ratio=8.0)
        placement = fakes.FakePlacement(self.HELD)
        placement.providers = lambda **query: [
            {'uuid': 'gone', 'name': 'compute0'},
            {'uuid': 'rp-uuid', 'name': 'compute1'}]
        inventories = placement.inventories

        def gone_or_read(uuid):
            if uuid == 'gone':
                raise exception.ProviderGone(uuid)
            return inventories(uuid)

        placement.inventories = gone_or_read

        findings = ratio_audit.ratio_changes(placement, self.conf.conf)

        self.assertEqual([('gone', 'note', 'compute0'),
                          ('ratio', 'warning', 'compute1')],
                         [(f.check, f.severity, f.provider_name)
                          for f in findings])
