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

import fixtures
from keystoneauth1 import exceptions as ks_exc
from nova.compute import provider_tree
import nova.conf
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
import os_traits
import requests

from nova_pcpu_ext import serialized_client


DISABLED = 'COMPUTE_STATUS_DISABLED'


def unavailable():
    """Placement's answer while it is down behind a proxy."""
    response = requests.Response()
    response.status_code = 503
    response.headers['Content-Type'] = 'application/json'
    response._content = (b'{"errors": [{"status": 503, "title": '
                         b'"Service Unavailable"}]}')
    return response


def dropped():
    raise ks_exc.ConnectFailure('connection dropped')


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

    def fail_first_inventory_put(self, fault):
        """Answer the next flush's inventory write with ``fault()``.

        :returns: the URLs answered so, filled as it happens.
        """
        stock = self.client.put

        def put(url, *args, **kwargs):
            if url.endswith('/inventories') and not faults:
                faults.append(url)
                return fault()
            return stock(url, *args, **kwargs)

        faults = []
        self.useFixture(fixtures.MockPatchObject(self.client, 'put', put))
        # The flush has inventory to write, and fails writing it.
        self.flags(reserved_host_memory_mb=1024)
        return faults


class StockRaceTest(_RaceTestBase):
    extension = False

    def test_bug_status_update_lost_by_flush(self):
        status_done_first = self.race_disable_with_flush()

        self.assertTrue(status_done_first)
        self.assertNotIn(DISABLED, self.traits(self.rp_uuid))
        # Wrong until the next periodic update re-syncs the trait from the
        # service record.
        self.periodic()
        self.assertIn(DISABLED, self.traits(self.rp_uuid))


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

    def test_reset_during_flush_does_not_wait_and_tree_is_rebuilt(self):
        gate = base.Gate(self, self.client, 'set_inventory_for_provider')
        periodic = self.in_thread(self.periodic)
        self.assertTrue(gate.reached.wait(base.TIMEOUT))
        reset = self.in_thread(self.compute.manager.reset)
        reset.join(base.TIMEOUT / 2)
        self.assertFalse(reset.is_alive(), 'the reset waited for the flush')
        self.assertTrue(self.client._provider_tree.exists(self.rp_uuid),
                        'the tree was cleared under its flush')
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
        faults = self.fail_first_inventory_put(fault)
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
        self._fail_first_inventory_put(unavailable)
        self._then_next_periodic_repairs()

    def test_dropped_connection_mid_flush(self):
        self._fail_first_inventory_put(dropped)
        self.assertIn('rebuilt from placement on the next update',
                      self.stdlog.logger.output)
        self._then_next_periodic_repairs()


class _SessionRebuildTest(_RaceTestBase):
    """Nova rebuilds its placement session when the endpoint is not found.

    ``safe_connect`` then makes a new client, which clears the provider
    cache (``clear_provider_cache(init=True)``), here while the periodic
    update is in the middle of its flush.
    """

    def rebuild_during_flush(self):
        """:returns: whether the rebuild finished before the flush did."""
        stock_get = self.client.get
        endpoint_lost = threading.local()

        def get(url, *args, **kwargs):
            if getattr(endpoint_lost, 'now', False):
                raise ks_exc.EndpointNotFound()
            return stock_get(url, *args, **kwargs)

        def lose_endpoint():
            endpoint_lost.now = True
            self.client._get_resource_provider(
                nova_context.get_admin_context(), self.rp_uuid)

        self.useFixture(fixtures.MockPatchObject(self.client, 'get', get))
        gate = base.Gate(self, self.client, 'set_inventory_for_provider')
        periodic = self.in_thread(self.periodic)
        self.assertTrue(gate.reached.wait(base.TIMEOUT))
        rebuild = self.in_thread(lose_endpoint)
        rebuild.join(base.TIMEOUT / 2)
        rebuild_done_first = not rebuild.is_alive()
        gate.release.set()
        self.join(periodic, rebuild)
        self.assertIn('The placement API endpoint was not found.',
                      self.stdlog.logger.output)
        return rebuild_done_first


class StockSessionRebuildTest(_SessionRebuildTest):
    extension = False

    def test_bug_rebuild_during_flush_breaks_periodic(self):
        self.assertTrue(self.rebuild_during_flush())
        self.assertIn('No such provider', self.stdlog.logger.output)


class SerializedSessionRebuildTest(_SessionRebuildTest):

    def test_rebuild_during_flush_does_not_wait_and_tree_is_rebuilt(self):
        cache = self.client._provider_tree

        self.assertTrue(self.rebuild_during_flush(),
                        'the rebuild waited for the flush')

        self.assertNotIn('No such provider', self.stdlog.logger.output)
        self.assertPeriodicSucceeded()
        self.assertIs(cache, self.client._provider_tree)
        self.assertFalse(self.client._provider_tree.exists(self.rp_uuid))
        self.periodic()
        self.assertCacheMatchesPlacement()


class _StuckConductorTest(_RaceTestBase):
    """A disable while the periodic update waits for nova-conductor.

    The update holds its tree from snapshot to flush; its conductor call
    (the service record, for the status trait) is where a stuck conductor
    or message broker holds it.
    """

    LOCK_TIMEOUT = 2.0

    def setUp(self):
        super().setUp()
        self.flags(provider_lock_timeout=self.LOCK_TIMEOUT, group='pcpu_ext')

    def disable_behind_stuck_periodic(self):
        """:returns: seconds the disable took; the periodic is still held."""
        conductor = base.Gate(self, self.compute.manager.rt,
                              '_sync_compute_service_disabled_trait')
        periodic = self.in_thread(self.periodic)
        self.assertTrue(conductor.reached.wait(base.TIMEOUT))

        started = time.monotonic()
        disable = self.in_thread(self.disable_service)
        disable.join(base.TIMEOUT / 2)
        took = time.monotonic() - started
        self.assertFalse(disable.is_alive(),
                         'the disable waited for the stuck periodic update')
        self.assertFalse(conductor.returned.is_set())
        self.assertIn(DISABLED, self.traits(self.rp_uuid))

        conductor.release.set()
        self.join(periodic, disable)
        self.assertPeriodicSucceeded()
        # NOTE: the conductor answers after the disable: the periodic update
        # reads the service as disabled and keeps the trait.
        self.assertIn(DISABLED, self.traits(self.rp_uuid))
        self.assertCacheMatchesPlacement()
        return took


class StockStuckConductorTest(_StuckConductorTest):
    extension = False

    def test_disable_does_not_wait(self):
        took = self.disable_behind_stuck_periodic()
        self.assertLess(took, self.LOCK_TIMEOUT)


class SerializedStuckConductorTest(_StuckConductorTest):

    def test_disable_waits_provider_lock_timeout_at_most(self):
        took = self.disable_behind_stuck_periodic()

        self.assertGreaterEqual(took, self.LOCK_TIMEOUT)
        self.assertLess(took, self.LOCK_TIMEOUT + 5)
        log = self.stdlog.logger.output
        self.assertIn(
            'Compute status update of provider %s waited %.1fs for its '
            'provider tree, held by resource tracker update of compute1, '
            'and goes ahead without the lock' % (self.rp_uuid,
                                                 self.LOCK_TIMEOUT), log)
        self.assertEqual(1, log.count('goes ahead without the lock'))


def status_storm(test, seconds, update_status):
    """Periodic updates of compute1 and status changes, at once.

    :param update_status: ``update_status(enabled)`` writes the status to
        placement after the service record changed.
    :returns: whether the service ended disabled, and how many status
        changes started while a periodic update ran.
    """
    service = objects.Service.get_by_compute_host(
        nova_context.get_admin_context(), 'compute1')
    periodic_running = threading.Event()
    deadline = time.monotonic() + seconds
    state = {'disabled': False, 'overlaps': 0}

    def periodics():
        while time.monotonic() < deadline:
            periodic_running.set()
            try:
                test.periodic()
            finally:
                periodic_running.clear()

    def toggles():
        while time.monotonic() < deadline:
            state['disabled'] = not state['disabled']
            service.disabled = state['disabled']
            service.save()
            # Started while a periodic update holds the tree.
            state['overlaps'] += periodic_running.is_set()
            update_status(not state['disabled'])

    test.join(test.in_thread(periodics), test.in_thread(toggles))
    return state['disabled'], state['overlaps']


class SerializedStressTest(_RaceTestBase):
    """Periodic updates and status changes of one tree lose nothing.

    For a bounded time; the test fails unless they really overlapped.
    """

    SECONDS = 4

    def test_no_lost_update(self):
        ctxt = nova_context.get_admin_context()
        disabled, overlaps = status_storm(
            self, self.SECONDS, lambda enabled: (
                self.compute.manager.virtapi.update_compute_provider_status(
                    ctxt, self.rp_uuid, enabled)))

        self.assertGreater(overlaps, 0, 'no status update overlapped a '
                           'periodic update: the test proved nothing')
        self.assertPeriodicSucceeded()
        self.assertEqual(disabled, DISABLED in self.traits(self.rp_uuid))
        self.assertCacheMatchesPlacement()


class SerializedStatusAfterResetTest(_RaceTestBase):

    def test_status_update_after_cache_clear(self):
        self.compute.manager.reset()
        self.assertFalse(self.client._provider_tree.exists(self.rp_uuid))

        self.compute.manager.virtapi.update_compute_provider_status(
            nova_context.get_admin_context(), self.rp_uuid, False)

        self.assertIn(DISABLED, self.traits(self.rp_uuid))
        self.assertCacheMatchesPlacement()


class SerializedStatusFindsItsTreeTest(_RaceTestBase):
    """A status change queued behind an update whose tree then goes.

    The periodic update is held between its snapshot and its flush; the
    disable queues for the tree; the tree leaves the cache before the
    update lets it go. Where the update snapshots the whole cache (Nova
    2024.1 to 2026.1), the status change loads the tree again under the
    cache lock; on Nova 2026.2 under the tree's lock alone.
    """

    def wait_for_waiter(self):
        tree_lock = self.client.provider_locks._lock(self.rp_uuid)
        deadline = time.monotonic() + base.TIMEOUT
        while not tree_lock._queue and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(1, len(tree_lock._queue),
                         'the status change did not queue for the tree')

    def disable_queued_behind_update(self, meanwhile):
        """Disable while the update holds the tree; ``meanwhile()`` then."""
        flush = base.Gate(self, self.client, 'update_from_provider_tree')
        periodic = self.in_thread(self.periodic)
        self.assertTrue(flush.reached.wait(base.TIMEOUT))
        disable = self.in_thread(self.disable_service)
        self.wait_for_waiter()
        meanwhile()
        flush.release.set()
        self.join(periodic, disable)

    def assertDisabledReachedPlacement(self):
        log = self.stdlog.logger.output
        self.assertNotIn('No such provider', log)
        self.assertNotIn('An error occurred while updating '
                         'COMPUTE_STATUS_DISABLED trait', log)
        self.assertIn(DISABLED, self.traits(self.rp_uuid))
        self.assertCacheMatchesPlacement()

    def test_reset_while_the_status_change_waits(self):
        def reset():
            self.join(self.in_thread(self.compute.manager.reset))
            self.assertTrue(self.client._provider_tree.exists(self.rp_uuid))

        self.disable_queued_behind_update(reset)

        self.assertPeriodicSucceeded()
        self.assertDisabledReachedPlacement()

    def fail_flush_while_the_status_change_waits(self, fault):
        faults = self.fail_first_inventory_put(fault)

        self.disable_queued_behind_update(lambda: None)

        self.assertEqual(1, len(faults))
        self.assertIn('Error updating resources for node',
                      self.stdlog.logger.output)
        self.assertDisabledReachedPlacement()

    def test_flush_invalidated_by_nova_while_the_status_change_waits(self):
        self.fail_flush_while_the_status_change_waits(unavailable)
        self.assertIn('Failed to update inventory', self.stdlog.logger.output)

    def test_flush_dropped_while_the_status_change_waits(self):
        self.fail_flush_while_the_status_change_waits(dropped)
        self.assertIn('rebuilt from placement on the next update',
                      self.stdlog.logger.output)


class SerializedProviderDeletedWhileLoadingTest(_RaceTestBase):

    def test_status_update_never_creates_a_provider(self):
        """The provider goes just after the status update read its tree."""
        url = '/resource_providers/%s' % self.rp_uuid
        stock = self.client.get_providers_in_tree
        deleted = []

        def get_providers_in_tree(context, uuid):
            providers = stock(context, uuid)
            if not deleted:
                deleted.append(self.placement.delete(url).status)
            return providers

        self.compute.manager.reset()
        self.useFixture(fixtures.MockPatchObject(
            self.client, 'get_providers_in_tree', get_providers_in_tree))

        self.disable_service()

        self.assertEqual([204], deleted)
        self.assertEqual(404, self.placement.get(url).status,
                         'the status update created the provider')
        self.assertIn('An error occurred while updating '
                      'COMPUTE_STATUS_DISABLED trait',
                      self.stdlog.logger.output)
        self.assertFalse(self.client._provider_tree.exists(self.rp_uuid),
                         'a half-loaded tree stays in the cache')


class _DeletedProviderTest(object):

    def test_status_update_never_recreates_a_deleted_provider(self):
        self.compute.manager.reset()
        url = '/resource_providers/%s' % self.rp_uuid
        self.assertEqual(204, self.placement.delete(url).status)

        self.disable_service()

        self.assertEqual(404, self.placement.get(url).status)
        self.assertIn('An error occurred while updating '
                      'COMPUTE_STATUS_DISABLED trait',
                      self.stdlog.logger.output)


class StockDeletedProviderTest(_DeletedProviderTest, _RaceTestBase):
    extension = False


class SerializedDeletedProviderTest(_DeletedProviderTest, _RaceTestBase):
    pass


LOW = '00000000-0000-0000-0000-000000000001'
HIGH = 'ffffffff-ffff-ffff-ffff-fffffffffffe'


class SerializedLockOrderTest(_RaceTestBase):
    """Threads that need several trees never wait for each other."""

    def setUp(self):
        super().setUp()
        self.ctxt = nova_context.get_admin_context()
        # A sharing provider (as shared storage) and another node's tree,
        # one sorting before the compute's tree and one after it.
        aggregate = '11111111-2222-3333-4444-555555555555'
        for uuid, name in ((LOW, 'shared-storage'), (HIGH, 'node-high')):
            self.placement.post('/resource_providers', {
                'uuid': uuid, 'name': name}, version='1.20')
        self.client.set_aggregates_for_provider(
            self.ctxt, self.rp_uuid, [aggregate])
        self.client._ensure_resource_provider(self.ctxt, LOW)
        self.client.set_aggregates_for_provider(self.ctxt, LOW, [aggregate])
        self.client.set_traits_for_provider(
            self.ctxt, LOW, [os_traits.MISC_SHARES_VIA_AGGREGATE])
        self.client._ensure_resource_provider(self.ctxt, HIGH)

    def wait_for_holder(self, root_uuid, operation):
        deadline = time.monotonic() + base.TIMEOUT
        while (self.client.provider_locks.holder(root_uuid) != operation and
               time.monotonic() < deadline):
            time.sleep(0.01)
        self.assertEqual(operation,
                         self.client.provider_locks.holder(root_uuid))

    def test_cache_clear_inside_a_flush_keeps_the_order(self):
        """A failed reshape of one tree clears the cache mid-flush.

        Meanwhile another thread flushes every cached tree: it holds the
        sharing provider's tree and waits for the reshaped one.
        """
        reached, release = threading.Event(), threading.Event()

        def conflicting_reshape(*args, **kwargs):
            reached.set()
            release.wait(base.TIMEOUT)
            raise nova_exception.PlacementReshapeConflict(error='injected')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.'
            '_set_up_and_do_reshape', conflicting_reshape))
        high_tree = provider_tree.ProviderTree()
        high_tree.new_root('node-high', HIGH, generation=0)
        whole_cache = self.client.get_provider_tree_and_ensure_root(
            self.ctxt, self.rp_uuid)
        self.assertEqual({LOW, self.rp_uuid, HIGH},
                         {root.uuid for root in whole_cache.roots})

        def reshape():
            self.assertRaises(
                nova_exception.PlacementReshapeConflict,
                self.client.update_from_provider_tree, self.ctxt, high_tree,
                allocations={})

        reshaping = self.in_thread(reshape)
        self.assertTrue(reached.wait(base.TIMEOUT))
        flushing = self.in_thread(self.client.update_from_provider_tree,
                                  self.ctxt, whole_cache)
        self.wait_for_holder(LOW, 'provider tree flush')
        time.sleep(0.2)  # let the flush queue for the reshaped tree
        release.set()
        self.join(reshaping, flushing)

        # The trees the reshape did not hold were cleared after it.
        self.assertFalse(self.client._provider_tree.exists(LOW))
        self.assertFalse(self.client._provider_tree.exists(self.rp_uuid))

    def test_failed_tree_alone_is_invalidated(self):
        stock = self.client.put

        def put(url, *args, **kwargs):
            if url == '/resource_providers/%s/inventories' % HIGH:
                raise ks_exc.ConnectTimeout('timed out')
            return stock(url, *args, **kwargs)

        self.useFixture(fixtures.MockPatchObject(self.client, 'put', put))
        whole_cache = self.client.get_provider_tree_and_ensure_root(
            self.ctxt, self.rp_uuid)
        for uuid in (self.rp_uuid, HIGH):
            whole_cache.update_inventory(uuid, {'CUSTOM_NEW': {
                'total': 1, 'reserved': 0, 'min_unit': 1, 'max_unit': 1,
                'step_size': 1, 'allocation_ratio': 1.0}})

        self.assertRaises(ks_exc.ConnectTimeout,
                          self.client.update_from_provider_tree, self.ctxt,
                          whole_cache)

        self.assertFalse(self.client._provider_tree.exists(HIGH))
        self.assertTrue(self.client._provider_tree.exists(self.rp_uuid))
        self.assertTrue(self.client._provider_tree.exists(LOW))
        self.assertIn('Flushing provider trees %s to placement failed' % HIGH,
                      self.stdlog.logger.output)

    def test_lock_named_by_root_whatever_the_caller_names(self):
        child = '22222222-0000-0000-0000-000000000000'
        self.client._ensure_resource_provider(
            self.ctxt, child, 'compute1-child',
            parent_provider_uuid=self.rp_uuid)
        for name_or_uuid in ('compute1', child, self.rp_uuid):
            with self.client.provider_lock(name_or_uuid, name_or_uuid):
                self.assertEqual(
                    name_or_uuid,
                    self.client.provider_locks.holder(self.rp_uuid))
        self.assertIsNone(self.client.provider_locks.holder(self.rp_uuid))


class SnapshotModeTest(_RaceTestBase):
    """The resource tracker's update holds what this Nova snapshots.

    Nova 2024.1 to 2026.1 snapshot the whole provider cache in the update:
    it holds every cached tree. Later Nova snapshots the node's subtree:
    it holds that tree alone. CI runs this on series of both kinds.
    """

    def setUp(self):
        super().setUp()
        ctxt = nova_context.get_admin_context()
        self.placement.post('/resource_providers', {
            'uuid': HIGH, 'name': 'node-high'}, version='1.20')
        self.client._ensure_resource_provider(ctxt, HIGH)

    def test_update_holds_what_it_snapshots(self):
        flush = base.Gate(self, self.client, 'update_from_provider_tree')
        periodic = self.in_thread(self.periodic)
        self.assertTrue(flush.reached.wait(base.TIMEOUT))

        holder = self.client.provider_locks.holder(HIGH)
        flush.release.set()
        self.join(periodic)
        self.assertEqual(
            'resource tracker update of compute1'
            if serialized_client.snapshots_whole_cache() else None, holder)
        self.assertPeriodicSucceeded()


class _MultiNodeTestBase(base.ExtensionTestBase):
    """One nova-compute owning several nodes, as an ironic compute does.

    Nova's fake driver with one provider tree per node; every node's
    tree is cached once the first periodic update has run.
    """

    NODES = ('compute1', 'compute1-node2')

    def setUp(self):
        super().setUp()
        self.flags(compute_driver='fake.PredictableNodeUUIDDriver')
        self.configure()
        self.compute = self.start_service('compute', host='compute1')
        self.computes['compute1'] = self.compute
        self.compute.manager.driver._set_nodes(list(self.NODES))
        self.periodic()
        self.client = self.compute.manager.reportclient
        self.ctxt = nova_context.get_admin_context()
        self.rp_uuids = [self.compute.manager.rt.compute_nodes[node].uuid
                         for node in self.NODES]

    def configure(self):
        """Set options before the compute service starts."""

    def pause(self, obj, name, about):
        """Hold the first call of ``obj.name`` about ``about``.

        :param about: what the call's second argument must be.
        :returns: (reached, release) events.
        """
        reached, release = threading.Event(), threading.Event()
        stock = getattr(obj, name)

        def paused(first, second, *args, **kwargs):
            if second == about and not reached.is_set():
                reached.set()
                release.wait(base.TIMEOUT)
            return stock(first, second, *args, **kwargs)

        setattr(obj, name, paused)
        self.addCleanup(delattr, obj, name)
        self.addCleanup(release.set)
        return reached, release

    def pause_update_provider_tree(self, nodename):
        """Hold the driver's update_provider_tree of one node, once.

        The resource tracker has taken its snapshot by then.
        """
        return self.pause(self.compute.manager.driver, 'update_provider_tree',
                          nodename)

    def save_service_disabled(self):
        """The service record, as the API saves it before its RPC call."""
        service = objects.Service.get_by_compute_host(self.ctxt, 'compute1')
        service.disabled = True
        service.save()


class UncachedNodeDuringUpdateTest(_MultiNodeTestBase):
    """A status update loads a node's tree while another node updates.

    Nova 2024.1 to 2026.1 snapshot the whole provider cache in the resource
    tracker's update and delete from placement every cached provider
    missing from the snapshot when they flush it.
    """

    AGGREGATE = '7c5d2b2e-61b5-4c0e-9e62-6a1f5a0c2f11'

    @staticmethod
    def status_wait():
        """Seconds to give the status update of the other node.

        One where it waits for the update (a whole-cache snapshot); the
        whole timeout where it need not: its seven placement calls took
        over a second on a loaded machine.
        """
        return 1 if serialized_client.snapshots_whole_cache() else (
            base.TIMEOUT)

    def test_status_update_of_uncached_node_loses_nothing(self):
        node1, node2 = self.rp_uuids
        # The operator's: what a deleted and re-created provider lacks.
        self._set_aggregate(node2, self.AGGREGATE)
        self.compute.manager.reset()
        self.assertFalse(self.client._provider_tree.exists(node2))
        reached, release = self.pause_update_provider_tree(self.NODES[0])
        update = self.in_thread(
            self.compute.manager.rt.update_available_resource, self.ctxt,
            self.NODES[0])
        self.assertTrue(reached.wait(base.TIMEOUT))

        self.save_service_disabled()
        status = self.in_thread(
            self.compute.manager.virtapi.update_compute_provider_status,
            self.ctxt, node2, False)
        status.join(self.status_wait())
        status_waited = status.is_alive()
        release.set()
        self.join(update, status)

        self.assertEqual(200, self.placement.get(
            '/resource_providers/%s' % node2).status, 'provider deleted')
        self.assertEqual([self.AGGREGATE],
                         self._get_provider_aggregates(node2))
        self.assertIn(DISABLED, self.traits(node2))
        # NOTE: Nova 2026.2 snapshots the updated node's tree alone: the
        # status update of another node need not wait.
        self.assertEqual(serialized_client.snapshots_whole_cache(),
                         status_waited)

    def test_uncached_node_loaded_before_the_snapshot_keeps_its_trait(self):
        node1, node2 = self.rp_uuids
        self.compute.manager.reset()
        # NOTE: Nova 2026.2 snapshots the updated node's tree alone.
        snapshot = base.Gate(self, self.client, (
            'get_provider_subtree_and_ensure_root'
            if hasattr(self.client, 'get_provider_subtree_and_ensure_root')
            else 'get_provider_tree_and_ensure_root'))
        driver, release_driver = self.pause_update_provider_tree(
            self.NODES[0])
        traits_read, traits_release = self.pause(
            self.client, 'get_provider_traits', node2)
        update = self.in_thread(
            self.compute.manager.rt.update_available_resource, self.ctxt,
            self.NODES[0])
        self.assertTrue(snapshot.reached.wait(base.TIMEOUT))

        # The status update loads node2, reading its traits...
        self.save_service_disabled()
        status = self.in_thread(
            self.compute.manager.virtapi.update_compute_provider_status,
            self.ctxt, node2, False)
        loaded_during_update = traits_read.wait(self.status_wait())
        # ... the update snapshots, and the status update writes.
        snapshot.release.set()
        self.assertTrue(driver.wait(base.TIMEOUT))
        traits_release.set()
        if loaded_during_update:
            status.join(base.TIMEOUT)
        release_driver.set()
        self.join(update, status)

        self.assertIn(DISABLED, self.traits(node2))
        self.assertEqual(200, self.placement.get(
            '/resource_providers/%s' % node2).status, 'provider deleted')
        self.assertEqual(not serialized_client.snapshots_whole_cache(),
                         loaded_during_update)


class StatusChangeBehindStuckUpdateTest(_MultiNodeTestBase):
    """A disable of a many-node compute while an update is stuck.

    The resource update of the first node waits for nova-conductor while
    holding its tree, and on Nova 2024.1 to 2026.1 every cached tree. Nova
    updates the status trait of each node in turn.
    """

    NODES = ('compute1',) + tuple('compute1-node%d' % i for i in range(4))
    LOCK_TIMEOUT = 2.0

    def setUp(self):
        super().setUp()
        self.flags(provider_lock_timeout=self.LOCK_TIMEOUT, group='pcpu_ext')

    def test_one_deadline_for_all_nodes(self):
        conductor = base.Gate(self, self.compute.manager.rt,
                              '_sync_compute_service_disabled_trait')
        update = self.in_thread(
            self.compute.manager.rt.update_available_resource, self.ctxt,
            self.NODES[0])
        self.assertTrue(conductor.reached.wait(base.TIMEOUT))

        started = time.monotonic()
        disable = self.in_thread(self.disable_service)
        disable.join(base.TIMEOUT)
        took = time.monotonic() - started
        self.assertFalse(disable.is_alive())
        for rp_uuid in self.rp_uuids:
            self.assertIn(DISABLED, self.traits(rp_uuid))
        conductor.release.set()
        self.join(update, disable)

        # NOTE: waiting for each node's tree in turn takes
        # len(NODES) * LOCK_TIMEOUT where the update holds every tree.
        self.assertGreaterEqual(took, self.LOCK_TIMEOUT)
        self.assertLess(took, self.LOCK_TIMEOUT + 4)
        log = self.stdlog.logger.output
        self.assertEqual(1, log.count('goes ahead without the lock'))
        if serialized_client.snapshots_whole_cache():
            self.assertIn('The same compute status change updated the '
                          'trait of %d more provider(s) at once without the '
                          'lock' % (len(self.NODES) - 1), log)
        # The held update's flush may have written back the traits it read
        # before the disable; the next one re-syncs them.
        self.periodic()
        for rp_uuid in self.rp_uuids:
            self.assertIn(DISABLED, self.traits(rp_uuid))


class ParallelNodeUpdatesTest(_MultiNodeTestBase):
    """Status changes while the nodes of one compute update in parallel.

    Nova 2026.2 runs the per-node updates of the periodic task in
    ``[compute] update_resources_max_workers`` threads.
    """

    NODES = ('compute1',) + tuple('compute1-node%d' % i for i in range(3))
    SECONDS = 4

    def configure(self):
        if 'update_resources_max_workers' not in nova.conf.CONF.compute:
            self.skipTest('this Nova updates the nodes of a compute one by '
                          'one: no [compute] update_resources_max_workers')
        self.flags(update_resources_max_workers=len(self.NODES),
                   group='compute')

    def count_parallel_updates(self):
        """The most per-node updates seen running at once, as it grows."""
        driver = self.compute.manager.driver
        stock = driver.get_available_resource
        guard = threading.Lock()
        running, most = [0], [0]

        def get_available_resource(nodename):
            with guard:
                running[0] += 1
                most[0] = max(most[0], running[0])
            try:
                # NOTE: long enough for the other workers to start too.
                time.sleep(0.05)
                return stock(nodename)
            finally:
                with guard:
                    running[0] -= 1

        self.useFixture(fixtures.MockPatchObject(
            driver, 'get_available_resource', get_available_resource))
        return most

    def test_status_changes_during_parallel_updates(self):
        most = self.count_parallel_updates()
        # NOTE: Nova's status change, over every node; a failure is logged.
        disabled, overlaps = status_storm(
            self, self.SECONDS, lambda enabled: (
                self.compute.manager._update_compute_provider_status(
                    self.ctxt, enabled)))

        self.assertGreater(most[0], 1, 'the nodes never updated in '
                           'parallel: the test proved nothing')
        self.assertGreater(overlaps, 0, 'no status change overlapped a '
                           'periodic update: the test proved nothing')
        log = self.stdlog.logger.output
        self.assertNotIn('Error updating resources for node', log)
        self.assertNotIn('An error occurred while updating', log)
        self.assertNotIn('goes ahead without the lock', log)
        for rp_uuid in self.rp_uuids:
            self.assertEqual(disabled, DISABLED in self.traits(rp_uuid),
                             rp_uuid)
            cached = self.client._provider_tree.data(rp_uuid)
            self.assertEqual(self.traits(rp_uuid), cached.traits)
            self.assertEqual(self.placement.get(
                '/resource_providers/%s' % rp_uuid).body['generation'],
                cached.generation)
