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

"""Request filter ``isolate_vcpu_fallback`` against real Nova (bug 1889633).
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

import time

import fixtures
from nova.scheduler import utils as scheduler_utils
import testscenarios

from nova_pcpu_ext import activation
from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext.tests.functional.base import DEDICATED
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests.functional.base import NO_HYPERTHREADS
from nova_pcpu_ext.tests.functional import operator_commands
from nova_pcpu_ext.tests import future_nova

FORBIDS_HT = 'required=%21HW_CPU_HYPERTHREADING'
#: In root_required, with the traits Nova adds there.
FORBIDS_PCPU_HOSTS = '%21' + pcpu_trait.TRAIT
#: What the filter logs for a request it acts on.
ACTED = 'asks for the isolate CPU thread policy'


class _IsolateTestBase(base.ExtensionTestBase):

    def start_new_style_host(self, hostname, topology=HYPERTHREADED):
        return self.start_host(hostname, topology, dedicated='0-1',
                               shared='2-3')

    def start_legacy_host(self, hostname, topology):
        return self.start_host(hostname, topology, vcpu_pin_set='0-3')


class StockNovaTest(_IsolateTestBase):
    extension = False

    def test_bug_1889633_isolate_instance_consumes_vcpu(self):
        """The fallback query puts an isolate instance on a hyperthreaded host.

        Without the extension and without Nova's late check in hardware.py.
        """
        self.useFixture(base.StripIsolateMitigation())
        rp_uuid = self.start_new_style_host('compute1')

        self.boot(ISOLATE)

        self.assertEqual(2, len(self.placement_queries))
        self.assertIn(FORBIDS_HT, self.placement_queries[0])
        self.assertNotIn(FORBIDS_HT, self.placement_queries[1])
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(rp_uuid))


class DropModeTest(_IsolateTestBase):

    def test_isolate_instance_rejected_on_hyperthreaded_host(self):
        self.useFixture(base.StripIsolateMitigation())
        rp_uuid = self.start_new_style_host('compute1')

        server = self.boot(ISOLATE, expected_state='ERROR')

        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual({}, self.usages(rp_uuid))
        self.assertEqual(1, len(self.placement_queries))
        self.assertIn(FORBIDS_HT, self.placement_queries[0])
        self.assertIn('which forbids HW_CPU_HYPERTHREADING: not making the '
                      'VCPU fallback placement query',
                      self.stdlog.logger.output)

    def test_explicit_forbidden_trait_keeps_legacy_host_without_ht(self):
        """Nova's fallback query carries an explicit trait already."""
        rp_uuid = self.start_legacy_host('compute1', NO_HYPERTHREADS)

        server = self.boot(dict(DEDICATED, **{
            'trait:HW_CPU_HYPERTHREADING': 'forbidden'}))

        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(rp_uuid))
        self.assertEqual(2, len(self.placement_queries))
        for query in self.placement_queries:
            self.assertIn(FORBIDS_HT, query)
        self.assertNotIn(ACTED, self.stdlog.logger.output)

    def test_mixed_cloud_isolate_lands_on_host_without_hyperthreads(self):
        ht_rp = self.start_new_style_host('compute1')
        no_ht_rp = self.start_new_style_host('compute2', NO_HYPERTHREADS)

        for _ in range(2):
            server = self.boot(ISOLATE)
            self.assertEqual('compute2',
                             server['OS-EXT-SRV-ATTR:host'])

        self.assertEqual({}, self.usages(ht_rp))
        self.assertEqual({'PCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 40},
                         self.usages(no_ht_rp))

    def test_dedicated_without_thread_policy_keeps_fallback(self):
        rp_uuid = self.start_legacy_host('compute1', HYPERTHREADED)

        self.boot(DEDICATED)

        self.assertEqual(2, len(self.placement_queries))
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(rp_uuid))

    def test_unpinned_makes_one_query(self):
        rp_uuid = self.start_new_style_host('compute1')

        self.boot({})

        self.assertEqual(1, len(self.placement_queries))
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(rp_uuid))

    def test_workaround_set_changes_nothing(self):
        self.flags(disable_fallback_pcpu_query=True, group='workarounds')
        self.start_new_style_host('compute1')

        self.boot(ISOLATE, expected_state='ERROR')

        self.assertEqual(1, len(self.placement_queries))
        self.assertNotIn(ACTED, self.stdlog.logger.output)


class LegacyOnlyModeTest(_IsolateTestBase):
    """The fallback yields legacy hosts only, with or without hyperthreads.

    Nova's late check is stripped: a host reporting PCPU that the fallback
    offered would take the isolate instance on VCPU, as in bug 1889633.
    """

    def setUp(self):
        super().setUp()
        self.flags(isolate_fallback_mode='legacy_only', group='pcpu_ext')
        self.useFixture(base.StripIsolateMitigation())

    def _isolate_refused_on_new_style_host_kept_on_legacy(self, topology):
        new_rp = self.start_new_style_host('compute1')
        self.assertIn(pcpu_trait.TRAIT, self.traits(new_rp))

        self.boot(ISOLATE, expected_state='ERROR')

        self.assertEqual({}, self.usages(new_rp))
        self.assertEqual(2, len(self.placement_queries))
        self.assertNotIn(FORBIDS_PCPU_HOSTS, self.placement_queries[0])
        self.assertIn(FORBIDS_PCPU_HOSTS, self.placement_queries[1])
        self.assertNotIn(FORBIDS_HT, self.placement_queries[1])

        legacy_rp = self.start_legacy_host('compute2', topology)
        self.assertNotIn(pcpu_trait.TRAIT, self.traits(legacy_rp))
        server = self.boot(ISOLATE)

        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(legacy_rp))
        self.assertEqual({}, self.usages(new_rp))

    def test_legacy_host_with_hyperthreads_keeps_isolate(self):
        self._isolate_refused_on_new_style_host_kept_on_legacy(HYPERTHREADED)

    def test_legacy_host_without_hyperthreads_keeps_isolate(self):
        self._isolate_refused_on_new_style_host_kept_on_legacy(
            NO_HYPERTHREADS)

    def test_a_cloud_of_legacy_hosts_only(self):
        """No compute reports the trait: the fallback query is stock's.

        Placement refuses a query that forbids a trait it does not know.
        """
        legacy_rp = self.start_legacy_host('compute1', HYPERTHREADED)

        server = self.boot(ISOLATE)

        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(legacy_rp))
        self.assertNotIn(FORBIDS_PCPU_HOSTS, self.placement_queries[1])

    def test_other_pinned_requests_keep_pcpu_and_legacy_hosts(self):
        # NOTE: each boot right after its host starts: the computes of this
        # process share one configuration.
        new_rp = self.start_new_style_host('compute1', NO_HYPERTHREADS)
        on_new = self.boot(DEDICATED)
        legacy_rp = self.start_legacy_host('compute2', HYPERTHREADED)
        on_legacy = self._create_server(
            flavor_id=self._create_flavor(vcpu=1, extra_spec=DEDICATED),
            host='compute2')

        self.assertEqual('compute1', on_new['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('compute2', on_legacy['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({'PCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(new_rp))
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(legacy_rp))
        self.assertEqual(4, len(self.placement_queries))
        for query in self.placement_queries[1::2]:
            self.assertIn(FORBIDS_PCPU_HOSTS, query)
        self.assertNotIn(ACTED, self.stdlog.logger.output)

    def test_host_converted_back_to_legacy_loses_the_trait(self):
        rp_uuid = self.start_new_style_host('compute1', NO_HYPERTHREADS)
        self.assertIn(pcpu_trait.TRAIT, self.traits(rp_uuid))

        self.flags(cpu_dedicated_set=None, cpu_shared_set=None,
                   group='compute')
        self.flags(vcpu_pin_set='0-3')
        self.restart_compute_service('compute1')

        self.assertNotIn(pcpu_trait.TRAIT, self.traits(rp_uuid))
        self.assertNotIn('PCPU', self._get_provider_inventory(rp_uuid))


class _LegacyCloudBase(_IsolateTestBase):
    """A cloud of legacy hosts only, placement served over HTTP.

    One host with hyperthreads and one without. No compute reports PCPU,
    so nothing there creates the trait ``legacy_only`` forbids, and a
    trait no provider carries can be deleted. Nova's services reach
    placement through a proxy that injects faults (``self.proxied``).
    """

    #: The path of the scheduler's question about the trait.
    TRAIT_PATH = '/traits/%s' % pcpu_trait.TRAIT
    #: Nova's ``[placement] timeout``: ample for a loaded machine.
    TIMEOUT = 5

    def setUp(self):
        self.proxied = operator_commands.PlacementBehindProxy(self.TIMEOUT)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.functional.fixtures.PlacementFixture',
            lambda: self.proxied))
        super().setUp()
        self.flags(isolate_fallback_mode='legacy_only', group='pcpu_ext')
        self.legacy_rps = {
            self.start_legacy_host('compute1', HYPERTHREADED),
            self.start_legacy_host('compute2', NO_HYPERTHREADS)}

    def fail_trait_calls(self, answer):
        """Answer ``answer`` to every call of the trait's URL."""
        self.proxied.fault = lambda method, path: (
            answer if path == self.TRAIT_PATH else None)

    def assert_placed_as_stock(self, extra_spec):
        """The pinned request lands on a legacy host, consuming VCPU."""
        server = self.boot(extra_spec)
        rp_uuid = self.compute_rp_uuids[server['OS-EXT-SRV-ATTR:host']]
        self.assertIn(rp_uuid, self.legacy_rps)
        self.assertEqual(
            {rp_uuid: {'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20}},
            {rp: allocation['resources'] for rp, allocation in
             self._get_allocations_by_server_uuid(server['id']).items()})
        self.assertNotIn('TypeError', self.stdlog.logger.output)
        return server


class StockLegacyCloudTest(_LegacyCloudBase):
    """What stock Nova places in a cloud of legacy hosts."""

    extension = False

    def test_pinned_requests_placed_on_legacy_hosts(self):
        for extra_spec in (ISOLATE, DEDICATED):
            self.assert_placed_as_stock(extra_spec)
        self.assertEqual(4, len(self.placement_queries))


class LegacyOnlyWithoutItsTraitTest(_LegacyCloudBase):
    """legacy_only places what stock places while placement lacks the trait.

    Placement answers 400 to a query forbidding a trait it does not know,
    and Nova's scheduler then fails the boot with a TypeError.
    """

    def test_trait_refused_by_placement_policy(self):
        """(a) placement:traits:update stricter than its default."""
        self.proxied.fault = lambda method, path: (
            403 if (method, path) == ('PUT', self.TRAIT_PATH) else None)

        for extra_spec in (ISOLATE, DEDICATED):
            self.assert_placed_as_stock(extra_spec)
        for query in self.placement_queries:
            self.assertNotIn(FORBIDS_PCPU_HOSTS, query)

    def test_trait_deleted_after_a_pinned_boot(self):
        """(b) Nothing carries the trait, so it can be deleted."""
        self.placement.put(self.TRAIT_PATH, None, version='1.6')
        self.assert_placed_as_stock(ISOLATE)
        self.assertIn(FORBIDS_PCPU_HOSTS, self.placement_queries[-1])

        self.assertEqual(204, self.placement.delete(
            self.TRAIT_PATH, version='1.6').status)
        for extra_spec in (ISOLATE, DEDICATED):
            self.assert_placed_as_stock(extra_spec)
            self.assertNotIn(FORBIDS_PCPU_HOSTS, self.placement_queries[-1])

    def test_transient_failure_of_the_trait_calls(self):
        """(c) Placement back for the query after failing the trait."""
        self.fail_trait_calls(503)
        self.assert_placed_as_stock(ISOLATE)
        self.proxied.fault = None
        self.assert_placed_as_stock(DEDICATED)

    def test_each_fault_of_the_trait_check(self):
        """The fallback is stock's, the cause logged once a change.

        Two requests a fault, one for a timeout (it takes that long).
        """
        def slow(method, path):
            if path == self.TRAIT_PATH:
                time.sleep(self.TIMEOUT + 1)

        faults = [(status, '(%d ' % status, 2) for status in
                  (400, 403, 409, 500, 503)]
        faults += [(operator_commands.FaultyProxy.DROP, 'Remote end closed',
                    2), (slow, 'timed out', 1)]
        for answer, problem, requests in faults:
            if callable(answer):
                self.proxied.fault = answer
            else:
                self.fail_trait_calls(answer)
            for _request in range(requests):
                self._delete_server(self.assert_placed_as_stock(DEDICATED))
            self.assertEqual(1, len([
                line for line in self.stdlog.logger.output.splitlines()
                if 'Cannot ask placement whether it knows the trait' in line
                and problem in line]), problem)
        for query in self.placement_queries:
            self.assertNotIn(FORBIDS_PCPU_HOSTS, query)
        self.assertNotIn('Traceback', self.stdlog.logger.output)


class TruncatedFallbackTest(testscenarios.WithScenarios, _IsolateTestBase):
    """``[scheduler] max_placement_results`` cuts the fallback's answer.

    With Nova's late check in place, a hyperthreaded host reporting PCPU
    and a legacy host with room. Where placement answers the fallback with
    the host reporting PCPU first, stock Nova finds no valid host.
    """

    scenarios = [
        ('stock', {'extension': False, 'mode': None}),
        ('drop', {'extension': True, 'mode': 'drop'}),
        ('legacy_only', {'extension': True, 'mode': 'legacy_only'}),
    ]

    def setUp(self):
        super().setUp()
        if self.mode:
            self.flags(isolate_fallback_mode=self.mode, group='pcpu_ext')

    def first_fallback_candidate(self):
        """The host placement answers stock Nova's fallback query with."""
        answer = self.placement.get(
            '/allocation_candidates?limit=1&resources=DISK_GB:20,'
            'MEMORY_MB:2048,VCPU:1&root_required='
            '!COMPUTE_STATUS_DISABLED', version='1.36').body
        return list(answer['provider_summaries'])

    def test_isolate_with_one_result_per_query(self):
        new_rp = self.start_new_style_host('compute1')
        legacy_rp = self.start_legacy_host('compute2', HYPERTHREADED)
        self.flags(max_placement_results=1, group='scheduler')
        lands = {
            'stock': self.first_fallback_candidate() == [legacy_rp],
            'drop': False,
            'legacy_only': True,
        }[self.mode or 'stock']

        server = self.boot(ISOLATE,
                           expected_state='ACTIVE' if lands else 'ERROR')

        self.assertEqual({}, self.usages(new_rp))
        if lands:
            self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
            self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                             self.usages(legacy_rp))
        else:
            self.assertIn('No valid host', server['fault']['message'])

    def test_isolate_with_room_for_every_host(self):
        """Without the cut, stock Nova finds the legacy host."""
        new_rp = self.start_new_style_host('compute1')
        legacy_rp = self.start_legacy_host('compute2', HYPERTHREADED)

        server = self.boot(ISOLATE, expected_state=(
            'ERROR' if self.mode == 'drop' else 'ACTIVE'))

        self.assertEqual({}, self.usages(new_rp))
        if self.mode != 'drop':
            self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
            self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                             self.usages(legacy_rp))


class NovaWithoutFallbackQueryTest(_IsolateTestBase):
    """A future Nova that no longer makes the VCPU fallback query.

    nova-scheduler runs the installed Nova's scheduler manager with the
    fallback query removed, as its TODO foresees.
    """

    def setUp(self):
        # NOTE: before the scheduler service starts and activates.
        self.useFixture(future_nova.SchedulerWithoutFallbackQuery())
        super().setUp()

    def test_request_filter_stands_aside(self):
        ht_rp = self.start_new_style_host('compute1')
        no_ht_rp = self.start_new_style_host('compute2', NO_HYPERTHREADS)

        server = self.boot(ISOLATE)

        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({}, self.usages(ht_rp))
        self.assertEqual({'PCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(no_ht_rp))
        self.assertEqual(1, len(self.placement_queries))
        self.assertIn(FORBIDS_HT, self.placement_queries[0])
        self.assertFalse(activation.is_patched(
            scheduler_utils, 'resources_from_request_spec'))
        self.assertEqual(1, self.stdlog.logger.output.count(
            'nova-scheduler makes no VCPU fallback placement query'))
        self.assertIn('have nothing to fix and stand aside',
                      self.stdlog.logger.output)
