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

"""Report client wrapper ``serialized`` against real Nova and real placement.
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

import threading
import time

from keystoneauth1 import exceptions as ks_exc
from nova import context as nova_context
from nova import objects
import requests


DISABLED = 'COMPUTE_STATUS_DISABLED'


class _RaceTestBase(base.ExtensionTestBase):

    def setUp(self):
        super().setUp()
        self.rp_uuid = self.start_host('compute1', base.HYPERTHREADED,
                                       dedicated='0-1', shared='2-3')
        self.compute = self.computes['compute1']
        self.client = self.compute.manager.reportclient

    def assertCacheMatchesPlacement(self):
        cached = self.client._provider_tree.data(self.rp_uuid)
        url = '/resource_providers/%s' % self.rp_uuid
        self.assertEqual(self.placement.get(url).body['generation'],
                         cached.generation)
        self.assertEqual(
            self.placement.get(url + '/inventories').body['inventories'],
            cached.inventory)
        self.assertEqual(self.traits(self.rp_uuid), cached.traits)

    def assertPeriodicSucceeded(self):
        self.assertNotIn('Error updating resources for node',
                         self.stdlog.logger.output)


class StockRaceTest(_RaceTestBase):
    extension = False

    def test_bug_status_update_lost_by_flush(self):
        status_done_first = self.race_disable_with_flush()

        self.assertTrue(status_done_first)
        self.assertNotIn(DISABLED, self.traits(self.rp_uuid))


class SerializedRaceTest(_RaceTestBase):

    def test_status_update_waits_for_flush_and_survives(self):
        status_done_first = self.race_disable_with_flush()

        self.assertFalse(status_done_first,
                         'the status update did not wait for the flush')
        self.assertIn(DISABLED, self.traits(self.rp_uuid))
        self.periodic()
        self.assertIn(DISABLED, self.traits(self.rp_uuid))


class StockResetTest(_RaceTestBase):
    extension = False

    def test_bug_reset_during_flush_breaks_periodic(self):
        gate = base.Gate(self, self.client, 'set_inventory_for_provider')
        periodic = self.in_thread(self.periodic)
        self.assertTrue(gate.reached.wait(base.TIMEOUT))
        reset = self.in_thread(self.compute.manager.reset)
        reset.join(base.TIMEOUT)
        gate.release.set()
        self.join(periodic, reset)

        self.assertIn('No such provider', self.stdlog.logger.output)


class SerializedFaultTest(_RaceTestBase):

    def test_reset_during_flush_waits_and_tree_is_rebuilt(self):
        gate = base.Gate(self, self.client, 'set_inventory_for_provider')
        periodic = self.in_thread(self.periodic)
        self.assertTrue(gate.reached.wait(base.TIMEOUT))
        reset = self.in_thread(self.compute.manager.reset)
        reset.join(1)
        self.assertTrue(reset.is_alive(), 'the reset did not wait')
        gate.release.set()
        self.join(periodic, reset)

        self.assertNotIn('No such provider', self.stdlog.logger.output)
        self.assertPeriodicSucceeded()
        self.assertFalse(self.client._provider_tree.exists(self.rp_uuid))
        self.periodic()
        self.assertCacheMatchesPlacement()

    def test_conflict_on_first_flush_is_retried(self):
        gate = base.Gate(self, self.client, 'update_from_provider_tree')
        self.flags(reserved_host_memory_mb=1024)
        periodic = self.in_thread(self.periodic)
        self.assertTrue(gate.reached.wait(base.TIMEOUT))
        # Someone else changes the provider: the cached generation is stale.
        self.placement.put('/traits/CUSTOM_OUT_OF_BAND', None, version='1.6')
        url = '/resource_providers/%s/traits' % self.rp_uuid
        current = self.placement.get(url, version='1.6').body
        self.placement.put(url, {
            'resource_provider_generation':
                current['resource_provider_generation'],
            'traits': current['traits'] + ['CUSTOM_OUT_OF_BAND']},
            version='1.6')
        gate.release.set()
        self.join(periodic)

        self.assertIn('Got 409', self.stdlog.logger.output)
        self.assertPeriodicSucceeded()
        self.assertIn('CUSTOM_OUT_OF_BAND', self.traits(self.rp_uuid))
        self.assertEqual(1024, self._get_provider_inventory(
            self.rp_uuid)['MEMORY_MB']['reserved'])
        self.assertCacheMatchesPlacement()

    def _fail_first_inventory_put(self, fault):
        stock = self.client.put

        def put(url, *args, **kwargs):
            if url.endswith('/inventories') and not faults:
                faults.append(url)
                return fault()
            return stock(url, *args, **kwargs)

        faults = []
        self.client.put = put
        self.addCleanup(delattr, self.client, 'put')
        self.flags(reserved_host_memory_mb=1024)
        self.periodic()
        self.assertEqual(1, len(faults))

    def _then_next_periodic_repairs(self):
        self.assertFalse(self.client._provider_tree.exists(self.rp_uuid),
                         'the cache kept a half-updated tree')
        self.periodic()
        self.assertEqual(1024, self._get_provider_inventory(
            self.rp_uuid)['MEMORY_MB']['reserved'])
        self.assertCacheMatchesPlacement()

    def test_placement_503_mid_flush(self):
        def unavailable():
            response = requests.Response()
            response.status_code = 503
            response.headers['Content-Type'] = 'application/json'
            response._content = (b'{"errors": [{"status": 503, "title": '
                                 b'"Service Unavailable"}]}')
            return response

        self._fail_first_inventory_put(unavailable)
        self._then_next_periodic_repairs()

    def test_dropped_connection_mid_flush(self):
        def dropped():
            raise ks_exc.ConnectFailure('connection dropped')

        self._fail_first_inventory_put(dropped)
        self.assertIn('rebuilt from placement on the next update',
                      self.stdlog.logger.output)
        self._then_next_periodic_repairs()


class SerializedStressTest(_RaceTestBase):
    """Writers of the same cache, for a bounded time, lose nothing."""

    SECONDS = 4
    PROVIDERS = 3

    def test_no_lost_update(self):
        ctxt = nova_context.get_admin_context()
        service = objects.Service.get_by_compute_host(ctxt, 'compute1')
        # Providers of other trees owned by the same compute, as ironic's.
        extra = [self.placement.post('/resource_providers', {
            'name': 'node-%d' % i}, version='1.20').body['uuid']
            for i in range(self.PROVIDERS)]
        intended = {}
        stop = threading.Event()
        deadline = time.monotonic() + self.SECONDS

        def running():
            return not stop.is_set() and time.monotonic() < deadline

        def periodics():
            while running():
                self.periodic()

        def toggles():
            disabled = False
            while running():
                disabled = not disabled
                service.disabled = disabled
                service.save()
                self.compute.manager.virtapi.update_compute_provider_status(
                    ctxt, self.rp_uuid, not disabled)
                intended['disabled'] = disabled

        def writes(rp_uuid):
            total = 0
            while running():
                total += 1
                with self.client.provider_lock(rp_uuid, 'stress writer'):
                    self.client._ensure_resource_provider(ctxt, rp_uuid)
                    self.client.set_inventory_for_provider(
                        ctxt, rp_uuid, {'CUSTOM_STRESS': {
                            'total': total, 'reserved': 0, 'min_unit': 1,
                            'max_unit': total, 'step_size': 1,
                            'allocation_ratio': 1.0}})
                    self.client.set_traits_for_provider(
                        ctxt, rp_uuid, ['CUSTOM_STRESS_%d' % total])
                intended[rp_uuid] = total

        threads = [self.in_thread(periodics), self.in_thread(toggles)] + [
            self.in_thread(writes, rp_uuid) for rp_uuid in extra]
        try:
            self.join(*threads)
        finally:
            stop.set()

        self.assertPeriodicSucceeded()
        self.assertEqual(intended['disabled'],
                         DISABLED in self.traits(self.rp_uuid))
        for rp_uuid in extra:
            total = intended[rp_uuid]
            self.assertEqual(total, self._get_provider_inventory(
                rp_uuid)['CUSTOM_STRESS']['total'])
            self.assertEqual({'CUSTOM_STRESS_%d' % total},
                             self.traits(rp_uuid))


class SerializedStatusAfterResetTest(_RaceTestBase):

    def test_status_update_after_cache_clear(self):
        self.compute.manager.reset()
        self.assertFalse(self.client._provider_tree.exists(self.rp_uuid))

        self.compute.manager.virtapi.update_compute_provider_status(
            nova_context.get_admin_context(), self.rp_uuid, False)

        self.assertIn(DISABLED, self.traits(self.rp_uuid))
        self.assertCacheMatchesPlacement()
