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

"""Report client wrapper ``serialized``: no lost ProviderTree update.

nova-compute keeps one cached ProviderTree in its report client, shared by
every thread that talks to placement. ``ProviderTree`` locks each call on
its own and the report client not at all, so read-modify-write sequences
interleave: a status update made between the resource tracker's snapshot
and its flush is silently undone by the flush.

Here every read-modify-write of the cache runs under a re-entrant lock of
the root provider tree it concerns: the resource tracker's whole
snapshot-to-flush, the compute status update, invalidation and deletion,
and the report client's own mutators. Trees are independent in placement
(an ironic compute owns one tree per node), so they do not queue behind
each other. Clearing the whole cache takes each tree's lock in turn, so it
never pulls a tree from under a flush.
"""

import contextlib
import functools
import threading
import time

import nova.conf
from nova import exception as nova_exception
from oslo_log import log as logging

from nova_pcpu_ext import plugins

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

_CLIENT = 'nova.scheduler.client.report:SchedulerReportClient.'
_RT_UPDATE = ('nova.compute.resource_tracker:ResourceTracker.'
              '_update_to_placement')
_STATUS_UPDATE = ('nova.compute.manager:ComputeVirtAPI.'
                  'update_compute_provider_status')

#: Attempts of a compute status update that meets a generation conflict.
STATUS_ATTEMPTS = 4

#: Flush failures after which Nova has already invalidated what it must
#: (just the tree around the failing provider, or the whole cache on a
#: reshape conflict). Any other failure, such as a connection error or a
#: timeout, can leave the cache half-updated.
_INVALIDATED_BY_NOVA = (
    nova_exception.ResourceProviderSyncFailed,
    nova_exception.PlacementAPIConflict,
    nova_exception.ReshapeFailed,
)


class _TreeLock(object):
    """A re-entrant lock that knows what its holder is doing."""

    def __init__(self):
        self.lock = threading.RLock()
        self.operation = None


class ProviderLocks(object):
    """One :class:`_TreeLock` per root provider UUID."""

    def __init__(self):
        self._guard = threading.Lock()
        self._locks = {}

    def _lock(self, root_uuid):
        with self._guard:
            tree_lock = self._locks.get(root_uuid)
            if tree_lock is None:
                tree_lock = self._locks[root_uuid] = _TreeLock()
            return tree_lock

    def _acquire(self, root_uuid, operation):
        tree_lock = self._lock(root_uuid)
        if not tree_lock.lock.acquire(blocking=False):
            holder = tree_lock.operation
            started = time.monotonic()
            tree_lock.lock.acquire()
            waited = time.monotonic() - started
            if waited >= CONF.pcpu_ext.provider_lock_warn_seconds:
                LOG.warning('%(operation)s waited %(waited).3fs for provider '
                            'tree %(root)s, held by %(holder)s.',
                            {'operation': operation, 'waited': waited,
                             'root': root_uuid, 'holder': holder})
        outer = tree_lock.operation
        tree_lock.operation = tree_lock.operation or operation
        return tree_lock, outer

    @contextlib.contextmanager
    def hold(self, root_uuids, operation):
        """Hold the locks of these trees, taken in a fixed order."""
        held = []
        try:
            for root_uuid in sorted(set(root_uuids)):
                held.append(self._acquire(root_uuid, operation))
            yield
        finally:
            for tree_lock, outer in reversed(held):
                tree_lock.operation = outer
                tree_lock.lock.release()


def serialize_update(stock):
    """Wrap ``ResourceTracker._update_to_placement`` in its tree's lock.

    The whole snapshot-to-flush of one compute node is one tree operation.
    """
    from nova.scheduler.client import report
    # NOTE: older Nova snapshots and flushes the whole provider cache, not
    # only the node's own tree: then every cached tree takes part.
    whole_cache = not hasattr(report.SchedulerReportClient,
                              'get_provider_subtree_and_ensure_root')

    @functools.wraps(stock)
    def _update_to_placement(self, context, compute_node, startup):
        client = self.reportclient
        roots = [compute_node.uuid]
        if whole_cache:
            roots += [root.uuid for root in list(client._provider_tree.roots)]
        with client.provider_locks.hold(
                roots, 'resource tracker update of %s' %
                compute_node.hypervisor_hostname):
            return stock(self, context, compute_node, startup)
    return _update_to_placement


def serialize_status_update(stock):
    """Wrap ``ComputeVirtAPI.update_compute_provider_status``.

    The traits read-modify-write is one tree operation, and a generation
    conflict is retried with a fresh read of the traits.
    """
    @functools.wraps(stock)
    def update_compute_provider_status(self, context, rp_uuid, enabled):
        client = self.reportclient
        for attempt in range(1, STATUS_ATTEMPTS + 1):
            with client.provider_lock(rp_uuid, 'compute status update'):
                # The traits are written back to the cache: after a cache
                # clear, load the tree first rather than fail on it.
                if not client._provider_tree.exists(rp_uuid):
                    client._ensure_resource_provider(context, rp_uuid)
                try:
                    return stock(self, context, rp_uuid, enabled)
                except nova_exception.ResourceProviderUpdateConflict:
                    if attempt == STATUS_ATTEMPTS:
                        raise
                    LOG.info('Generation conflict updating the compute '
                             'status trait of provider %s; retrying with '
                             'fresh traits (attempt %d of %d).', rp_uuid,
                             attempt + 1, STATUS_ATTEMPTS)
    return update_compute_provider_status


class SerializedReportClientMixin(plugins.ReportClientMixin):
    """Serializes every read-modify-write of the provider cache."""

    nova_symbols = (
        (_CLIENT + 'update_from_provider_tree',
         ('self', 'context', 'new_tree', 'allocations')),
        (_CLIENT + 'get_provider_tree_and_ensure_root',
         ('self', 'context', 'rp_uuid')),
        (_CLIENT + 'clear_provider_cache', ('self', 'init')),
        (_CLIENT + '_clear_provider_cache_for_tree', ('self', 'rp_uuid')),
        (_CLIENT + '_ensure_resource_provider',
         ('self', 'context', 'uuid', 'name', 'parent_provider_uuid')),
        (_CLIENT + 'set_traits_for_provider', ('self', 'context', 'rp_uuid')),
        (_CLIENT + 'invalidate_resource_provider', ('self', 'name_or_uuid')),
        (_CLIENT + 'delete_resource_provider',
         ('self', 'context', 'compute_node')),
        (_RT_UPDATE, ('self', 'context', 'compute_node', 'startup')),
        (_STATUS_UPDATE, ('self', 'context', 'rp_uuid', 'enabled')),
    )

    method_wrappers = {
        _RT_UPDATE: serialize_update,
        _STATUS_UPDATE: serialize_status_update,
    }

    def __init__(self, *args, **kwargs):
        self.provider_locks = ProviderLocks()
        super().__init__(*args, **kwargs)

    def _root_of(self, name_or_uuid):
        """The root UUID of the cached tree holding a provider, or itself."""
        try:
            return self._provider_tree.get_provider_uuids_in_tree(
                name_or_uuid)[0]
        except ValueError:
            return name_or_uuid

    def provider_lock(self, name_or_uuid, operation):
        """Hold the lock of the tree of one provider."""
        return self.provider_locks.hold([self._root_of(name_or_uuid)],
                                        operation)

    # Cache-wide: each tree in turn, so no flush loses its tree midway.

    def clear_provider_cache(self, init=False):
        if init:
            return super().clear_provider_cache(init=True)
        LOG.info("Clearing the report client's provider cache.")
        for root in list(self._provider_tree.roots):
            self._clear_provider_cache_for_tree(root.uuid)
        self._association_refresh_time = {}

    # The flush: a failure leaves the trees invalidated, not half-updated,
    # so the next update rebuilds them from placement.

    def update_from_provider_tree(self, context, new_tree, allocations=None):
        roots = [root.uuid for root in new_tree.roots]
        with self.provider_locks.hold(roots, 'provider tree flush'):
            try:
                return super().update_from_provider_tree(
                    context, new_tree, allocations=allocations)
            except _INVALIDATED_BY_NOVA:
                raise
            except Exception as error:
                LOG.warning('Flushing provider trees %(roots)s to placement '
                            'failed (%(error)s); they are rebuilt from '
                            'placement on the next update.',
                            {'roots': ', '.join(roots), 'error': error})
                for root_uuid in roots:
                    self._clear_provider_cache_for_tree(root_uuid)
                raise

    # Tree-scoped mutators of the cache.

    def get_provider_tree_and_ensure_root(self, context, rp_uuid, *args,
                                          **kwargs):
        with self.provider_lock(rp_uuid, 'provider tree snapshot'):
            return super().get_provider_tree_and_ensure_root(
                context, rp_uuid, *args, **kwargs)

    def get_provider_subtree_and_ensure_root(self, context, rp_uuid, *args,
                                             **kwargs):
        with self.provider_lock(rp_uuid, 'provider tree snapshot'):
            return super().get_provider_subtree_and_ensure_root(
                context, rp_uuid, *args, **kwargs)

    def _ensure_resource_provider(self, context, uuid, name=None,
                                  parent_provider_uuid=None):
        with self.provider_lock(parent_provider_uuid or uuid,
                                'provider ensure'):
            return super()._ensure_resource_provider(
                context, uuid, name=name,
                parent_provider_uuid=parent_provider_uuid)

    def _clear_provider_cache_for_tree(self, rp_uuid):
        with self.provider_lock(rp_uuid, 'tree invalidation'):
            return super()._clear_provider_cache_for_tree(rp_uuid)

    def invalidate_resource_provider(self, name_or_uuid, *args, **kwargs):
        with self.provider_lock(name_or_uuid, 'provider invalidation'):
            return super().invalidate_resource_provider(
                name_or_uuid, *args, **kwargs)

    def delete_resource_provider(self, context, compute_node, *args,
                                 **kwargs):
        with self.provider_lock(compute_node.uuid, 'provider deletion'):
            return super().delete_resource_provider(
                context, compute_node, *args, **kwargs)

    def set_inventory_for_provider(self, context, rp_uuid, *args, **kwargs):
        with self.provider_lock(rp_uuid, 'inventory update'):
            return super().set_inventory_for_provider(
                context, rp_uuid, *args, **kwargs)

    def set_traits_for_provider(self, context, rp_uuid, *args, **kwargs):
        with self.provider_lock(rp_uuid, 'traits update'):
            return super().set_traits_for_provider(
                context, rp_uuid, *args, **kwargs)

    def set_aggregates_for_provider(self, context, rp_uuid, *args, **kwargs):
        with self.provider_lock(rp_uuid, 'aggregates update'):
            return super().set_aggregates_for_provider(
                context, rp_uuid, *args, **kwargs)
