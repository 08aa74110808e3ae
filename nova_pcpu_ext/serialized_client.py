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

Here every read-modify-write of the cache runs under the lock of the root
provider tree it concerns: the resource tracker's whole snapshot-to-flush,
the compute status update, invalidation and deletion, and the report
client's own mutators. Trees are independent in placement (an ironic
compute owns one tree per node), so they do not queue behind each other.

Nova 2024.1 to 2026.1 snapshot the whole cache in the resource tracker's
update, and their flush deletes from placement every cached provider
missing from the snapshot. There the update also holds the lock of the
cache itself, which every operation that may add a tree to the cache
takes too: no tree joins the cache during the update but through it.
Which snapshot a Nova takes is read from the resource tracker's code when
the plugin is loaded.
"""

import collections
import contextlib
import functools
import threading
import time
import weakref

import nova.conf
from nova import exception as nova_exception
from nova.scheduler.client import report
from oslo_log import log as logging

from nova_pcpu_ext import compat
from nova_pcpu_ext import plugins

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

_CLIENT = 'nova.scheduler.client.report:SchedulerReportClient.'
_RT_MODULE = 'nova.compute.resource_tracker'
_RT_UPDATE = _RT_MODULE + ':ResourceTracker._update_to_placement'
_STATUS_UPDATE = ('nova.compute.manager:ComputeVirtAPI.'
                  'update_compute_provider_status')
_STATUS_CHANGE = ('nova.compute.manager:ComputeManager.'
                  '_update_compute_provider_status')
#: The report client methods the resource tracker's update may take its
#: snapshot with: of the whole provider cache (Nova 2024.1 to 2026.1), and
#: of the updated node's tree alone (Nova 2026.2).
_WHOLE_CACHE_SNAPSHOT = 'get_provider_tree_and_ensure_root'
_SUBTREE_SNAPSHOT = 'get_provider_subtree_and_ensure_root'
#: Whether the report client has the subtree snapshot, to serialize it.
_HAS_SUBTREE_METHOD = hasattr(report.SchedulerReportClient,
                              _SUBTREE_SNAPSHOT)

#: The name of the lock of the provider cache itself. NOTE: the empty
#: string sorts before every root UUID and name, so a thread taking it
#: with trees takes it first, in the global order.
WHOLE_CACHE = ''

#: Attempts of a compute status update that meets a generation conflict.
STATUS_ATTEMPTS = 4

#: What reading a provider tree into the cache raises on a placement error
#: answer (the tree itself, its aggregates, its sharing providers).
_TREE_READ_FAILURES = (
    nova_exception.ResourceProviderRetrievalFailed,
    nova_exception.ResourceProviderAggregateRetrievalFailed,
)

#: Flush failures after which Nova has already invalidated what it must
#: (just the tree around the failing provider, or the whole cache on a
#: reshape conflict). Any other failure, such as a connection error or a
#: timeout, can leave the cache half-updated.
_INVALIDATED_BY_NOVA = (
    nova_exception.ResourceProviderSyncFailed,
    nova_exception.PlacementAPIConflict,
    nova_exception.ReshapeFailed,
)


@functools.lru_cache(maxsize=None)
def snapshots_whole_cache():
    """Whether the resource tracker's update snapshots the whole cache.

    Read from what ``ResourceTracker._update_to_placement`` calls, not from
    what the report client has: a build with the subtree method whose
    resource tracker still snapshots the whole cache also flushes the
    whole cache, deleting a provider cached meanwhile. An update calling
    both is taken for whole-cache: holding more costs waits, never a
    provider.

    :raises IncompatibleNova: when it calls neither.
    """
    tree = compat.source_tree(_RT_MODULE)
    if tree is None:
        LOG.warning('Without the source of %s, nova-pcpu-ext cannot tell '
                    'what the resource tracker snapshots, and holds the '
                    'whole provider cache in every resource tracker '
                    'update.', _RT_MODULE)
        return True
    return _WHOLE_CACHE_SNAPSHOT in compat.require_any_call(
        _RT_UPDATE, tree, (_WHOLE_CACHE_SNAPSHOT, _SUBTREE_SNAPSHOT))


def _left(deadline):
    """Seconds left until ``deadline`` (a monotonic time), or None."""
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


def _lock_name(root_uuid):
    if root_uuid == WHOLE_CACHE:
        return 'the provider cache'
    return 'provider tree %s' % root_uuid


class TreeLockTimeout(Exception):
    """A tree lock was not granted within the time given."""

    def __init__(self, holder):
        super().__init__('provider tree held by %s' % holder)
        #: What the holding thread was doing.
        self.holder = holder


class _TreeLock(object):
    """A lock granted first come, first served.

    A status update queued behind a periodic update gets the tree next, not
    after whichever thread happens to wake first.
    """

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._queue = collections.deque()
        self._locked = False
        # calls left for the holder to make before it lets go
        self._left = []
        #: What the holding thread is doing.
        self.operation = None

    def acquire(self, operation, warn_after, warn, timeout=None):
        """Take the lock; call ``warn(holder)`` once past ``warn_after``.

        :param timeout: seconds to wait at most, or None for no limit.
        :returns: whether it warned.
        :raises TreeLockTimeout: when ``timeout`` has passed.
        """
        me = object()
        with self._cond:
            self._queue.append(me)
            try:
                warned = self._wait_for_turn(me, warn_after, warn, timeout)
                self._locked, self.operation = True, operation
            finally:
                self._leave_queue(me)
        return warned

    def take_or_leave(self, operation, call):
        """Take the lock if it is free, else leave ``call`` to its holder.

        :returns: whether it took the lock.
        """
        with self._cond:
            # NOTE: ahead of any waiter: the caller holds it for a moment
            # and never waits, so no waiter is held up for long.
            if self._locked:
                self._left.append(call)
                return False
            self._locked, self.operation = True, operation
            return True

    def _wait_for_turn(self, me, warn_after, warn, timeout):
        started = time.monotonic()
        warned = False
        while self._locked or self._queue[0] is not me:
            waited = time.monotonic() - started
            if timeout is not None and waited >= timeout:
                raise TreeLockTimeout(self.operation)
            if not warned and waited >= warn_after:
                warn(self.operation)
                warned = True
            limits = [limit for limit in (timeout, warn_after)
                      if limit is not None and limit > waited]
            self._cond.wait(min(limits) - waited if limits else None)
        return warned

    def _leave_queue(self, me):
        # NOTE: also when the wait raised (a timeout, GreenletExit, a
        # signal handler's exception): a waiter left at the head of the
        # queue would keep every later one waiting for ever.
        first = self._queue[0] is me
        self._queue.remove(me)
        if first and not self._locked:
            self._cond.notify_all()

    def release(self):
        """Let go, unless calls were left for the holder: return those."""
        with self._cond:
            left, self._left = self._left, []
            if not left:
                self._locked, self.operation = False, None
                self._cond.notify_all()
            return left


class ProviderLocks(object):
    """One :class:`_TreeLock` per root provider UUID, while in use.

    Re-entrant: a thread holding a tree may ask for it again. The table
    holds locks weakly: the lock of a tree that no thread holds or waits
    for is gone. A thread holding several trees takes them in one global
    order (sorted UUIDs), so two threads never wait for each other.
    """

    def __init__(self):
        self._guard = threading.Lock()
        self._locks = weakref.WeakValueDictionary()
        # per thread: .held, roots in the order taken; .unlocked, see
        # unlocked(); .status_change, see _status_change()
        self._local = threading.local()

    def _state(self):
        """The calling thread's state, made on first use."""
        local = self._local
        if not hasattr(local, 'held'):
            local.held, local.unlocked = [], False
            local.status_change = None
        return local

    def held(self):
        """Root UUIDs whose locks the calling thread holds."""
        return self._state().held

    def holder(self, root_uuid):
        """The operation holding a tree's lock, or None."""
        tree_lock = self._locks.get(root_uuid)
        return tree_lock.operation if tree_lock is not None else None

    def _lock(self, root_uuid):
        with self._guard:
            tree_lock = self._locks.get(root_uuid)
            if tree_lock is None:
                tree_lock = self._locks[root_uuid] = _TreeLock()
            return tree_lock

    @contextlib.contextmanager
    def _hold_one(self, root_uuid, operation, deadline):
        held = self.held()
        if root_uuid in held:
            yield
            return
        tree_lock = self._lock(root_uuid)
        started = time.monotonic()

        def warn(holder):
            LOG.warning('%(operation)s has waited %(waited).1fs for '
                        '%(lock)s, held by %(holder)s; still waiting.',
                        {'operation': operation,
                         'waited': time.monotonic() - started,
                         'lock': _lock_name(root_uuid), 'holder': holder})

        if tree_lock.acquire(operation,
                             CONF.pcpu_ext.provider_lock_warn_seconds, warn,
                             _left(deadline)):
            LOG.info('%(operation)s got %(lock)s after %(waited).1fs.',
                     {'operation': operation, 'lock': _lock_name(root_uuid),
                      'waited': time.monotonic() - started})
        held.append(root_uuid)
        try:
            yield
        finally:
            held.remove(root_uuid)
            self._let_go(root_uuid, tree_lock)

    @staticmethod
    def _let_go(root_uuid, tree_lock):
        """Make the calls left for the holder, then release the lock."""
        while True:
            left = tree_lock.release()
            if not left:
                return
            for call in left:
                try:
                    call()
                except Exception:
                    LOG.exception('A call left to the holder of %s failed.',
                                  _lock_name(root_uuid))

    @contextlib.contextmanager
    def hold(self, root_uuids, operation, timeout=None):
        """Hold the locks of these trees, taken in the global order.

        :param timeout: seconds to wait for all of them at most, or None.
        :raises TreeLockTimeout: when a lock was not granted in time.
        """
        if self._state().unlocked:
            yield
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with contextlib.ExitStack() as stack:
            for root_uuid in sorted(set(root_uuids)):
                stack.enter_context(
                    self._hold_one(root_uuid, operation, deadline))
            yield

    @contextlib.contextmanager
    def unlocked(self):
        """Let the calling thread, holding no tree, take no tree lock.

        For an operation that gave up waiting for its tree: the report
        client methods it calls take the tree's lock too and would wait
        again.
        """
        state = self._state()
        state.unlocked = True
        try:
            yield
        finally:
            state.unlocked = False

    def call_holding(self, root_uuid, operation, call):
        """Call ``call`` holding a tree's lock, without waiting for it.

        At once when the calling thread holds the lock or no thread does;
        otherwise the thread holding it makes the call just before it lets
        the lock go.
        """
        held = self.held()
        if root_uuid in held:
            call()
            return
        tree_lock = self._lock(root_uuid)
        if not tree_lock.take_or_leave(operation, call):
            return
        held.append(root_uuid)
        try:
            call()
        finally:
            held.remove(root_uuid)
            self._let_go(root_uuid, tree_lock)


def _may_add_tree(client):
    """Whether the calling thread may add a tree to the provider cache.

    Where the resource tracker's update snapshots the whole cache, its
    flush deletes from placement a provider added to the cache meanwhile
    (or, added before the snapshot, writes back the traits it read over a
    change made since): only the holder of the cache lock adds trees.
    """
    return (not snapshots_whole_cache() or
            WHOLE_CACHE in client.provider_locks.held())


@contextlib.contextmanager
def _update_locks(client, rp_uuid, operation):
    """Hold what the resource tracker's update of one node snapshots."""
    if not snapshots_whole_cache():
        with client.provider_lock(rp_uuid, operation):
            yield
        return
    locks = client.provider_locks
    # NOTE: the cache first: once it is held, only this thread adds trees,
    # so the trees cached now are all the snapshot and the flush touch.
    with locks.hold([WHOLE_CACHE], operation):
        roots = [client.root_of(rp_uuid)]
        roots += [root.uuid for root in list(client._provider_tree.roots)]
        with locks.hold(roots, operation):
            yield


def serialize_update(stock):
    """Wrap ``ResourceTracker._update_to_placement`` in its tree's lock.

    The whole snapshot-to-flush of one compute node is one tree operation;
    where the snapshot is the whole cache, one operation on every tree.
    """
    @functools.wraps(stock)
    def _update_to_placement(self, context, compute_node, *args, **kwargs):
        with _update_locks(self.reportclient, compute_node.uuid,
                           'resource tracker update of %s' %
                           compute_node.hypervisor_hostname):
            return stock(self, context, compute_node, *args, **kwargs)
    return _update_to_placement


class _StatusChange(object):
    """One enabling or disabling of the compute service, over its nodes.

    Its waits for tree locks share one deadline, ``[pcpu_ext]
    provider_lock_timeout`` after it began; past it, a node whose tree is
    held gets its trait updated at once without the lock.
    """

    def __init__(self):
        self.started = time.monotonic()
        timeout = CONF.pcpu_ext.provider_lock_timeout
        self.deadline = self.started + timeout if timeout else None
        # (provider, holder) updated without the lock, after the first
        self.unlocked = []
        # (provider, holder) left to the next periodic update
        self.left = []
        self._warned = False

    def timeout(self):
        """Seconds the next wait for a tree may take, or None."""
        return _left(self.deadline)

    def went_ahead(self, rp_uuid, holder):
        """The status update of a provider goes ahead without its lock."""
        if self._warned:
            self.unlocked.append((rp_uuid, holder))
            return
        self._warned = True
        LOG.warning('Compute status update of provider %(provider)s waited '
                    '%(waited).1fs for its provider tree, held by '
                    '%(holder)s, and goes ahead without the lock '
                    '([pcpu_ext] provider_lock_timeout). Should that '
                    'operation undo the change, the next periodic resource '
                    'update re-syncs the trait from the service record.',
                    {'provider': rp_uuid, 'holder': holder,
                     'waited': time.monotonic() - self.started})

    def log_end(self):
        if self.unlocked:
            LOG.warning('The same compute status change updated the trait '
                        'of %(count)d more provider(s) at once without the '
                        'lock, their trees still held: %(providers)s.',
                        {'count': len(self.unlocked),
                         'providers': _listing(self.unlocked)})
        if self.left:
            LOG.warning('Compute status change left the trait of %(count)d '
                        'provider(s) to the next periodic resource update, '
                        'which syncs it from the service record: '
                        '%(providers)s. Their trees are not cached, and the '
                        'update holding the whole provider cache past '
                        '[pcpu_ext] provider_lock_timeout would delete a '
                        'provider loaded meanwhile.',
                        {'count': len(self.left),
                         'providers': _listing(self.left)})


def _listing(providers):
    """``uuid (held by operation), ...`` for the log."""
    return ', '.join('%s (held by %s)' % (rp_uuid, holder)
                     for rp_uuid, holder in providers)


@contextlib.contextmanager
def _status_change(client):
    """The status change the calling thread makes; begun here if none."""
    state = client.provider_locks._state()
    if state.status_change is not None:
        yield state.status_change
        return
    change = state.status_change = _StatusChange()
    try:
        yield change
    finally:
        state.status_change = None
        change.log_end()


def bound_status_change(stock):
    """Wrap ``ComputeManager._update_compute_provider_status``.

    Nova updates the status trait of the compute's nodes one by one, each
    through ``ComputeVirtAPI.update_compute_provider_status``: the whole
    change, not each node, waits ``[pcpu_ext] provider_lock_timeout`` for
    trees at most. The API waits for it (``long_rpc_timeout``).
    """
    @functools.wraps(stock)
    def _update_compute_provider_status(self, context, enabled, *args,
                                        **kwargs):
        with _status_change(self.reportclient):
            return stock(self, context, enabled, *args, **kwargs)
    return _update_compute_provider_status


def serialize_status_update(stock):
    """Wrap ``ComputeVirtAPI.update_compute_provider_status``.

    The traits read-modify-write is one tree operation, and a generation
    conflict is retried with a fresh read of the traits. Past the status
    change's deadline (see :class:`_StatusChange`) the update runs without
    tree locks, as in Nova: a status change is not held up for long by a
    periodic update that is stuck, for example in a conductor call.
    """
    @functools.wraps(stock)
    def update_compute_provider_status(self, context, rp_uuid, *args,
                                       **kwargs):
        client = self.reportclient
        update = functools.partial(_update_status, stock, self, context,
                                   rp_uuid, *args, **kwargs)
        with _status_change(client) as change:
            try:
                with client.provider_lock(rp_uuid, 'compute status update',
                                          change.timeout()):
                    return update()
            except TreeLockTimeout as error:
                # NOTE: raised by the wait for the lock only: update() waits
                # for no lock with a timeout.
                holder = error.holder
            with client.provider_locks.unlocked():
                if (client._provider_tree.exists(rp_uuid) or
                        _may_add_tree(client)):
                    change.went_ahead(rp_uuid, holder)
                    return update()
                change.left.append((rp_uuid, holder))
    return update_compute_provider_status


def _load_tree(client, context, rp_uuid):
    """Cache a provider's tree as placement holds it; never create it.

    A provider missing from placement is left to Nova, which logs it. Its
    own ``_ensure_resource_provider`` would create one deleted since the
    read, named after its UUID.
    """
    providers = client.get_providers_in_tree(context, rp_uuid)
    if not providers:
        return
    client._provider_tree.populate_from_iterable(providers)
    try:
        for provider in providers:
            client._refresh_associations(context, provider['uuid'],
                                         force=True)
    except Exception:
        # NOTE: no tree stays cached that was read only in part: the next
        # update loads it again.
        client._clear_provider_cache_for_tree(rp_uuid)
        raise


def _load_status_tree(client, context, rp_uuid):
    """:func:`_load_tree` for a status update, failing as Nova's read.

    Stock Nova reads only the provider's traits there, and a placement
    error reading them is a WARNING naming the provider (the report client
    has logged the answer already), not a traceback.
    """
    try:
        _load_tree(client, context, rp_uuid)
    except _TREE_READ_FAILURES as error:
        raise nova_exception.ResourceProviderTraitRetrievalFailed(
            uuid=rp_uuid) from error


def _update_status(stock, virtapi, context, rp_uuid, *args, **kwargs):
    """Nova's compute status update, retried on a generation conflict."""
    client = virtapi.reportclient
    for attempt in range(1, STATUS_ATTEMPTS + 1):
        # Nova writes the traits back to the cache: after a cache clear,
        # load the tree first.
        if (not client._provider_tree.exists(rp_uuid) and
                _may_add_tree(client)):
            _load_status_tree(client, context, rp_uuid)
        try:
            return stock(virtapi, context, rp_uuid, *args, **kwargs)
        except nova_exception.ResourceProviderUpdateConflict:
            if attempt == STATUS_ATTEMPTS:
                raise
            LOG.info('Generation conflict updating the compute status '
                     'trait of provider %s; retrying with fresh traits '
                     '(attempt %d of %d).', rp_uuid, attempt + 1,
                     STATUS_ATTEMPTS)


class SerializedReportClientMixin(plugins.ReportClientMixin):
    """Serializes every read-modify-write of the provider cache.

    Every override takes the parameters it needs and passes the rest on
    unchanged.
    """

    nova_symbols = (
        (_CLIENT + 'update_from_provider_tree',
         ('self', 'context', 'new_tree')),
        (_CLIENT + 'get_provider_tree_and_ensure_root',
         ('self', 'context', 'rp_uuid')),
        (_CLIENT + 'get_providers_in_tree', ('self', 'context', 'uuid')),
        # NOTE: how Nova fills its cache from what it read of a tree; the
        # status update loads a tree so, without creating a provider.
        (_CLIENT + '_refresh_associations',
         ('self', 'context', 'rp_uuid', '*', 'force')),
        ('nova.compute.provider_tree:ProviderTree.populate_from_iterable',
         ('self', 'provider_dicts')),
        (_CLIENT + 'clear_provider_cache', ('self', '*', 'init')),
        (_CLIENT + '_clear_provider_cache_for_tree', ('self', 'rp_uuid')),
        (_CLIENT + '_ensure_resource_provider',
         ('self', 'context', 'uuid', '*', 'name', 'parent_provider_uuid')),
        (_CLIENT + 'set_inventory_for_provider',
         ('self', 'context', 'rp_uuid')),
        (_CLIENT + 'set_traits_for_provider', ('self', 'context', 'rp_uuid')),
        (_CLIENT + 'set_aggregates_for_provider',
         ('self', 'context', 'rp_uuid')),
        (_CLIENT + 'invalidate_resource_provider', ('self', 'name_or_uuid')),
        (_CLIENT + 'delete_resource_provider',
         ('self', 'context', 'compute_node')),
        (_RT_UPDATE, ('self', 'context', 'compute_node')),
        (_STATUS_UPDATE, ('self', 'context', 'rp_uuid')),
        (_STATUS_CHANGE, ('self', 'context', 'enabled')),
    )

    method_wrappers = {
        _RT_UPDATE: serialize_update,
        _STATUS_UPDATE: serialize_status_update,
        _STATUS_CHANGE: bound_status_change,
    }

    @classmethod
    def validate_config(cls, conf):
        # NOTE: what the resource tracker snapshots is no configuration,
        # but this runs as the plugin loads, before Nova is patched: a
        # Nova that snapshots neither way stops the service there.
        super().validate_config(conf)
        snapshots_whole_cache()

    def __init__(self, *args, **kwargs):
        self.provider_locks = ProviderLocks()
        # per thread: .failed, roots whose write failed in the current flush
        self._flush = threading.local()
        super().__init__(*args, **kwargs)

    def root_of(self, name_or_uuid):
        """The root UUID of the cached tree holding a provider, or itself."""
        try:
            return self._provider_tree.get_provider_uuids_in_tree(
                name_or_uuid)[0]
        except ValueError:
            return name_or_uuid

    @contextlib.contextmanager
    def provider_lock(self, name_or_uuid, operation, timeout=None):
        """Hold the lock of the tree of one provider.

        The lock is named by the tree's root UUID, whether the caller names
        the provider or a child by name or UUID. If the tree changed while
        waiting, the lock of the tree the provider is in now is taken. A
        tree not in the cache, or gone from it while waiting, comes with
        the cache lock where the resource tracker snapshots the whole cache
        (see :func:`_may_add_tree`).

        :param timeout: seconds to wait at most, or None.
        :raises TreeLockTimeout: when the lock was not granted in time.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        # NOTE: asked with the locks the caller held before, not with the
        # tree's lock taken below: counted, that one would keep the cache
        # lock from a tree that left the cache while this thread waited (a
        # SIGHUP, a failed flush), and the tree would never be loaded.
        held = list(self.provider_locks.held())
        while True:
            root_uuid = self.root_of(name_or_uuid)
            with_cache = self._needs_cache_lock(root_uuid, held)
            locks = [root_uuid] + ([WHOLE_CACHE] if with_cache else [])
            with self.provider_locks.hold(locks, operation,
                                          _left(deadline)):
                if (self.root_of(name_or_uuid) == root_uuid and
                        (with_cache or
                         not self._needs_cache_lock(root_uuid, held))):
                    yield
                    return

    def _needs_cache_lock(self, root_uuid, held):
        """Whether a tree's lock must come with the cache lock.

        Holding the lock of a tree not in the cache, a thread may add it.
        NOTE: a thread already holding other trees, but not the cache,
        cannot take the cache lock in the global order; nothing in Nova
        adds a tree from there.

        :param held: the locks the thread held before asking for the tree.
        """
        if (not snapshots_whole_cache() or
                self._provider_tree.exists(root_uuid)):
            return False
        return not held or WHOLE_CACHE in held

    @contextlib.contextmanager
    def _writing(self, rp_uuid, operation):
        """Hold a provider's tree lock; note the tree if the write fails."""
        with self.provider_lock(rp_uuid, operation):
            try:
                yield
            except Exception:
                failed = getattr(self._flush, 'failed', None)
                if failed is not None:
                    failed.add(self.root_of(rp_uuid))
                raise

    # Cache-wide: each tree under its lock, so no flush loses its tree
    # midway, and without waiting for any.

    def clear_provider_cache(self, init=False, **kwargs):
        # NOTE: Nova's constructor makes the cache with init=True; so does
        # rebuilding the placement session later (safe_connect on
        # EndpointNotFound), which must not swap the cache under a flush.
        if getattr(self, '_provider_tree', None) is None:
            return super().clear_provider_cache(init=init, **kwargs)
        if not init:
            LOG.info("Clearing the report client's provider cache.")
        for root in list(self._provider_tree.roots):
            # NOTE: a tree another thread holds (a stuck update, say) is
            # cleared by that thread as it lets the tree go: a SIGHUP or a
            # new placement session waits for nobody.
            self.provider_locks.call_holding(
                root.uuid, 'provider cache clear', functools.partial(
                    super()._clear_provider_cache_for_tree, root.uuid))
        self._association_refresh_time = {}

    # The flush: a failure leaves the trees it could not write invalidated,
    # not half-updated, so the next update rebuilds them from placement.

    def update_from_provider_tree(self, context, new_tree, *args, **kwargs):
        roots = [root.uuid for root in new_tree.roots]
        with self.provider_locks.hold(roots, 'provider tree flush'):
            self._flush.failed = set()
            try:
                return super().update_from_provider_tree(
                    context, new_tree, *args, **kwargs)
            except _INVALIDATED_BY_NOVA:
                raise
            except Exception as error:
                failed = sorted(self._flush.failed or roots)
                LOG.warning('Flushing provider trees %(roots)s to placement '
                            'failed (%(error)s); they are rebuilt from '
                            'placement on the next update.',
                            {'roots': ', '.join(failed), 'error': error})
                for root_uuid in failed:
                    self._clear_provider_cache_for_tree(root_uuid)
                raise
            finally:
                self._flush.failed = None

    # Tree-scoped operations on the cache.

    def get_provider_tree_and_ensure_root(self, context, rp_uuid, *args,
                                          **kwargs):
        with self.provider_lock(rp_uuid, 'provider tree snapshot'):
            return super().get_provider_tree_and_ensure_root(
                context, rp_uuid, *args, **kwargs)

    if _HAS_SUBTREE_METHOD:
        def get_provider_subtree_and_ensure_root(self, context, rp_uuid,
                                                 *args, **kwargs):
            with self.provider_lock(rp_uuid, 'provider tree snapshot'):
                return super().get_provider_subtree_and_ensure_root(
                    context, rp_uuid, *args, **kwargs)

    def _ensure_resource_provider(self, context, uuid, name=None,
                                  parent_provider_uuid=None, **kwargs):
        # NOTE: no *args: Nova's callers pass name and parent_provider_uuid
        # by keyword, and so would they a parameter added after them.
        with self._writing(parent_provider_uuid or uuid, 'provider ensure'):
            return super()._ensure_resource_provider(
                context, uuid, name=name,
                parent_provider_uuid=parent_provider_uuid, **kwargs)

    def _clear_provider_cache_for_tree(self, rp_uuid, *args, **kwargs):
        with self.provider_lock(rp_uuid, 'tree invalidation'):
            return super()._clear_provider_cache_for_tree(
                rp_uuid, *args, **kwargs)

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
        with self._writing(rp_uuid, 'inventory update'):
            return super().set_inventory_for_provider(
                context, rp_uuid, *args, **kwargs)

    def set_traits_for_provider(self, context, rp_uuid, *args, **kwargs):
        with self._writing(rp_uuid, 'traits update'):
            return super().set_traits_for_provider(
                context, rp_uuid, *args, **kwargs)

    def set_aggregates_for_provider(self, context, rp_uuid, *args, **kwargs):
        with self._writing(rp_uuid, 'aggregates update'):
            return super().set_aggregates_for_provider(
                context, rp_uuid, *args, **kwargs)
