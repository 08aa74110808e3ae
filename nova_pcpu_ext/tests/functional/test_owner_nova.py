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

"""Nova 34's ``OWNER_NOVA`` requirement with nova-pcpu-ext active.

Nova 34 computes (service version 73 on) report ``OWNER_NOVA`` on their
providers, and once every compute does, the scheduler's ``owner_nova_filter``
requires it of the root provider of every placement query. The extension's
queries and provider updates must keep both.
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

from urllib import parse

from nova import context as nova_context
from nova import objects
from nova.scheduler import request_filter
from nova import version
import os_traits
import testtools

from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests.functional.base import NO_HYPERTHREADS

OWNER = os_traits.OWNER_NOVA
HYPERTHREADING = os_traits.HW_CPU_HYPERTHREADING
DISABLED = os_traits.COMPUTE_STATUS_DISABLED
#: The compute service version from which the pre-filter applies, or None.
OWNER_VERSION = getattr(request_filter, 'MIN_COMPUTE_VERSION_OWNER_TRAIT',
                        None)


def _traits(query, param):
    """The traits a placement query string lists under ``param``."""
    return {trait for value in parse.parse_qs(query).get(param, [])
            for trait in value.split(',')}


@testtools.skipIf(OWNER_VERSION is None,
                  'Nova %s has no OWNER_NOVA pre-filter: Nova 34 (2026.2) '
                  'adds it' % version.version_string())
class _OwnerNovaTestBase(base.ExtensionTestBase):

    def start_hosts(self, second):
        """compute1: hyperthreaded, cpu_dedicated_set; compute2: no threads.

        :param second: how compute2 is configured, ``'new'``
            (``cpu_dedicated_set``) or ``'legacy'`` (``vcpu_pin_set``).
        """
        ht_rp = self.start_host('compute1', HYPERTHREADED, dedicated='0-1',
                                shared='2-3')
        if second == 'new':
            no_ht_rp = self.start_host('compute2', NO_HYPERTHREADS,
                                       dedicated='0-1', shared='2-3')
        else:
            no_ht_rp = self.start_host('compute2', NO_HYPERTHREADS,
                                       vcpu_pin_set='0-3')
        # NOTE: what makes owner_nova_filter require the trait.
        self.assertGreaterEqual(
            objects.service.get_minimum_version_all_cells(
                nova_context.get_admin_context(), ['nova-compute']),
            OWNER_VERSION)
        for rp_uuid in (ht_rp, no_ht_rp):
            self.assertIn(OWNER, self.traits(rp_uuid))
        return ht_rp, no_ht_rp

    def assertQueriesKeepOwner(self, count):
        """``count`` queries, each requiring OWNER_NOVA.

        The first, for PCPU, forbids hyperthreads; the VCPU fallback query
        of ``legacy_only`` mode forbids the hosts that report PCPU.
        """
        self.assertEqual(count, len(self.placement_queries))
        for query in self.placement_queries:
            self.assertIn(OWNER, _traits(query, 'root_required'))
        self.assertIn('!' + HYPERTHREADING,
                      _traits(self.placement_queries[0], 'required'))
        for query in self.placement_queries[1:]:
            self.assertIn('!' + pcpu_trait.TRAIT,
                          _traits(query, 'root_required'))

    def remove_owner(self, rp_uuid):
        """Take OWNER_NOVA off a provider in placement behind Nova's back."""
        url = '/resource_providers/%s/traits' % rp_uuid
        current = self.placement.get(url, version='1.6').body
        self.placement.put(url, {
            'traits': sorted(set(current['traits']) - {OWNER}),
            'resource_provider_generation':
                current['resource_provider_generation']}, version='1.6')

    def restore_owner(self, hostname):
        """What a SIGHUP and the next periodic update do."""
        self.computes[hostname].manager.reset()
        self.periodic(hostname)

    def set_service_status(self, status, hostname='compute1'):
        self.admin_api.microversion = '2.53'
        service = self.admin_api.get_services(
            binary='nova-compute', host=hostname)[0]
        self.admin_api.put_service(service['id'], {'status': status})


class RequestFilterKeepsOwnerTest(_OwnerNovaTestBase):
    """Both modes of the request filter keep the OWNER_NOVA requirement."""

    def test_drop_mode(self):
        _ht_rp, no_ht_rp = self.start_hosts('new')

        server = self.boot(ISOLATE)

        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({'PCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(no_ht_rp))
        self.assertQueriesKeepOwner(1)

    def test_legacy_only_mode(self):
        self.flags(isolate_fallback_mode='legacy_only', group='pcpu_ext')
        _ht_rp, legacy_rp = self.start_hosts('legacy')

        server = self.boot(ISOLATE)

        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(legacy_rp))
        self.assertQueriesKeepOwner(2)

    def test_legacy_only_fallback_query_rejects_provider_without_owner(self):
        """The requirement reaches placement in the query the filter edits.

        Only the VCPU fallback query can match the legacy host: without
        OWNER_NOVA it must not.
        """
        self.flags(isolate_fallback_mode='legacy_only', group='pcpu_ext')
        _ht_rp, legacy_rp = self.start_hosts('legacy')
        self.remove_owner(legacy_rp)

        server = self.boot(ISOLATE, expected_state='ERROR')

        self.assertIn('No valid host', server['fault']['message'])
        self.assertQueriesKeepOwner(2)
        self.restore_owner('compute2')
        self.assertIn(OWNER, self.traits(legacy_rp))
        server = self.boot(ISOLATE)
        self.assertEqual('compute2', server['OS-EXT-SRV-ATTR:host'])


class WrappersKeepOwnerTest(_OwnerNovaTestBase):
    """The ratio and status wrappers keep OWNER_NOVA on the provider."""

    def setUp(self):
        super().setUp()
        self.rp_uuid, _no_ht_rp = self.start_hosts('new')

    def assertServesUnpinned(self):
        """A server that only compute1 can take lands there."""
        self.set_service_status('disabled', 'compute2')
        server = self.boot({})
        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])

    def test_ratio_update_keeps_owner(self):
        self.flags(cpu_allocation_ratio=2.0)
        self.periodic()
        self.assertEqual(2.0, self._get_provider_inventory(
            self.rp_uuid)['VCPU']['allocation_ratio'])
        self.assertIn(OWNER, self.traits(self.rp_uuid))
        self.assertServesUnpinned()

    def test_ratio_update_restores_owner(self):
        self.flags(cpu_allocation_ratio=2.0)
        self.remove_owner(self.rp_uuid)
        self.restore_owner('compute1')
        self.assertEqual(2.0, self._get_provider_inventory(
            self.rp_uuid)['VCPU']['allocation_ratio'])
        self.assertIn(OWNER, self.traits(self.rp_uuid))

    def test_status_updates_keep_owner(self):
        self.set_service_status('disabled')
        self.assertLessEqual({OWNER, DISABLED}, self.traits(self.rp_uuid))
        self.set_service_status('enabled')
        traits = self.traits(self.rp_uuid)
        self.assertIn(OWNER, traits)
        self.assertNotIn(DISABLED, traits)
        self.assertServesUnpinned()

    def test_status_update_after_cache_clear_keeps_owner(self):
        self.computes['compute1'].manager.reset()
        self.set_service_status('disabled')
        self.assertLessEqual({OWNER, DISABLED}, self.traits(self.rp_uuid))

    def test_status_update_raced_with_flush_keeps_owner(self):
        self.race_disable_with_flush()
        self.assertLessEqual({OWNER, DISABLED}, self.traits(self.rp_uuid))
        self.set_service_status('enabled')
        self.assertServesUnpinned()
