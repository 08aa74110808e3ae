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

import ast
import functools
import gc
import inspect
import re
import subprocess
import sys
import threading
import time
from unittest import mock
import weakref

import fixtures
from nova.compute import provider_tree
from nova import exception as nova_exception
from nova.scheduler.client import report

from nova_pcpu_ext import activation
from nova_pcpu_ext import compat
from nova_pcpu_ext import compute
from nova_pcpu_ext import exception
from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests.unit import base


def logged_wait(log):
    """The seconds provider a's status update logged it waited.

    What the log says, not the timeout: more on a loaded machine.
    """
    found = re.search(r'Compute status update of provider a waited '
                      r'([0-9.]+)s for its provider tree', log)
    assert found, log
    return float(found.group(1))


class Interrupted(BaseException):
    """Raised into a wait, as GreenletExit or KeyboardInterrupt are."""


def wait_until(condition, seconds=5):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


class ProviderLocksTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.locks = serialized_client.ProviderLocks()

    def test_reentrant(self):
        with self.locks.hold(['a'], 'outer'):
            with self.locks.hold(['a', 'b'], 'inner'):
                self.assertEqual('outer', self.locks.holder('a'))
                self.assertEqual('inner', self.locks.holder('b'))
                self.assertEqual(['a', 'b'], self.locks.held())
            self.assertEqual('outer', self.locks.holder('a'))
            self.assertIsNone(self.locks.holder('b'))
        self.assertIsNone(self.locks.holder('a'))
        self.assertEqual([], self.locks.held())

    def _holder(self, root, operation):
        holding, release = threading.Event(), threading.Event()

        def hold():
            with self.locks.hold([root], operation):
                holding.set()
                release.wait(10)

        thread = threading.Thread(target=hold)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(release.set)
        holding.wait(10)
        return release

    def _waiter(self, root, operation, acquired):
        def hold():
            with self.locks.hold([root], operation):
                acquired.append(operation)

        # NOTE: a daemon, so that a waiter stuck by a bug fails its test
        # without hanging the test run.
        thread = threading.Thread(target=hold, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        return thread

    def test_independent_trees_do_not_wait(self):
        self._holder('a', 'periodic')
        acquired = []
        self._waiter('b', 'status', acquired).join(5)
        self.assertEqual(['status'], acquired)

    def test_stuck_holder_is_reported_while_waiting(self):
        self.flags(provider_lock_warn_seconds=0.1)
        release = self._holder('a', 'resource tracker update of node1')
        started = time.monotonic()
        waiter = self._waiter('a', 'compute status update', [])

        deadline = time.monotonic() + 5
        while ('still waiting' not in self.logger.output and
               time.monotonic() < deadline):
            time.sleep(0.05)
        self.assertTrue(waiter.is_alive(), 'the waiter did not wait')
        self._assert_waited(r'compute status update has waited ([0-9.]+)s',
                            started)
        self.assertIn('for provider tree a, held by resource tracker update '
                      'of node1; still waiting.', self.logger.output)
        release.set()
        waiter.join(5)
        self._assert_waited(r'compute status update got provider tree a '
                            r'after ([0-9.]+)s\.', started)

    def test_stuck_holder_is_reported_just_after_boot(self):
        # The monotonic clock starts near 0 at boot. Kills the mutants of
        # ``time.monotonic() - started`` into ``%``, which equals it only
        # while the clock reads more than the wait.
        booted = time.monotonic() - 0.001
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.serialized_client.time',
            monotonic=lambda: time.monotonic() - booted))
        self.test_stuck_holder_is_reported_while_waiting()

    def _assert_waited(self, pattern, started):
        """The wait the log reports is between 0.1 s and the test's.

        Kills the mutants of ``time.monotonic() - started`` in the log.
        """
        waited = float(re.search(pattern, self.logger.output).group(1))
        self.assertGreaterEqual(waited, 0.1)
        self.assertLessEqual(waited, time.monotonic() - started + 0.05)

    def test_short_wait_is_not_logged(self):
        release = self._holder('a', 'periodic')
        threading.Timer(0.1, release.set).start()
        with self.locks.hold(['a'], 'status'):
            pass
        self.assertNotIn('waited', self.logger.output)

    def test_first_come_first_served(self):
        release = self._holder('a', 'periodic')
        tree_lock = self.locks._lock('a')
        acquired = []
        waiters = []
        for operation in ('status 1', 'periodic 2', 'status 3'):
            waiters.append(self._waiter('a', operation, acquired))
            deadline = time.monotonic() + 5
            while (len(tree_lock._queue) < len(waiters) and
                   time.monotonic() < deadline):
                time.sleep(0.01)
        release.set()
        for waiter in waiters:
            waiter.join(5)
        self.assertEqual(['status 1', 'periodic 2', 'status 3'], acquired)

    def test_lock_goes_when_unused(self):
        with self.locks.hold(['a'], 'periodic'):
            lock = weakref.ref(self.locks._lock('a'))
        gc.collect()
        self.assertIsNone(lock())
        self.assertEqual({}, dict(self.locks._locks))

    def test_call_holding_a_free_tree_runs_now(self):
        calls = []

        def call():
            calls.append((self.locks.holder('a'), list(self.locks.held())))

        self.locks.call_holding('a', 'clear', call)
        self.assertEqual([('clear', ['a'])], calls)
        self.assertIsNone(self.locks.holder('a'))
        self.assertEqual([], self.locks.held())

    def test_call_holding_a_free_tree_holds_it_while_it_runs(self):
        # Kills ReplaceTrueWithFalse 2 (the lock taken but not marked).
        timeouts = []

        def other_thread():
            try:
                with self.locks.hold(['a'], 'status', timeout=0.1):
                    pass
            except serialized_client.TreeLockTimeout as error:
                timeouts.append(error.holder)

        def call():
            thread = threading.Thread(target=other_thread)
            thread.start()
            thread.join(5)

        self.locks.call_holding('a', 'clear', call)
        self.assertEqual(['clear'], timeouts)

    def test_call_holding_a_tree_held_here_runs_now(self):
        calls = []
        with self.locks.hold(['a'], 'flush'):
            self.locks.call_holding(
                'a', 'clear', lambda: calls.append(self.locks.holder('a')))
            self.assertEqual(['flush'], calls)

    def test_call_holding_a_held_tree_is_left_to_its_holder(self):
        release = self._holder('a', 'periodic')
        acquired = []
        waiter = self._waiter('a', 'status', acquired)
        wait_until(lambda: len(self.locks._lock('a')._queue) == 1)
        calls = []

        def call():
            calls.append((threading.current_thread(), list(acquired)))

        started = time.monotonic()
        self.locks.call_holding('a', 'clear', call)
        self.assertLess(time.monotonic() - started, 1)
        self.assertEqual([], calls)
        release.set()
        waiter.join(5)

        # Made by the holder, before the next thread got the lock.
        self.assertEqual(1, len(calls))
        self.assertIsNot(threading.current_thread(), calls[0][0])
        self.assertEqual([], calls[0][1])
        self.assertEqual(['status'], acquired)

    def test_failed_call_left_to_the_holder_still_releases(self):
        release = self._holder('a', 'periodic')

        def call():
            raise RuntimeError('injected')

        self.locks.call_holding('a', 'clear', call)
        release.set()
        acquired = []
        self._waiter('a', 'next', acquired).join(5)
        self.assertEqual(['next'], acquired)
        self.assertIn('A call left to the holder of provider tree a failed',
                      self.logger.output)

    def _interrupt_first_wait(self, tree_lock):
        """The first wait raises once woken, after letting others run."""
        stock_wait = tree_lock._cond.wait
        interrupted = []

        def wait(timeout=None):
            if interrupted:
                return stock_wait(timeout)
            interrupted.append(threading.current_thread())
            stock_wait(timeout)
            # NOTE: the other waiters, woken too, check the queue meanwhile
            # and wait again.
            stock_wait(0.2)
            raise Interrupted()

        tree_lock._cond.wait = wait
        return interrupted

    def test_interrupted_waiter_leaves_the_queue(self):
        # NOTE: no warning to wake the next waiter: only the interrupted
        # one's leaving may (kills ReplaceComparisonOperator_Is_IsNot 2).
        self.flags(provider_lock_warn_seconds=60)
        release = self._holder('a', 'periodic')
        tree_lock = self.locks._lock('a')
        self._interrupt_first_wait(tree_lock)
        outcomes = []

        def interrupted_waiter():
            try:
                with self.locks.hold(['a'], 'interrupted'):
                    outcomes.append('interrupted got the lock')
            except Interrupted:
                outcomes.append('interrupted')

        waiter = threading.Thread(target=interrupted_waiter)
        waiter.start()
        self.addCleanup(waiter.join, 10)
        wait_until(lambda: len(tree_lock._queue) == 1)
        next_waiter = self._waiter('a', 'status', outcomes)
        wait_until(lambda: len(tree_lock._queue) == 2)
        release.set()

        next_waiter.join(5)
        self.assertFalse(next_waiter.is_alive(),
                         'the next waiter waits for ever')
        self.assertEqual(['interrupted', 'status'], outcomes)
        self.assertEqual(0, len(tree_lock._queue))

    def test_wait_gives_up_after_timeout(self):
        release = self._holder('a', 'periodic')
        tree_lock = self.locks._lock('a')
        started = time.monotonic()

        def hold():
            with self.locks.hold(['a'], 'status', timeout=0.2):
                pass

        error = self.assertRaises(serialized_client.TreeLockTimeout, hold)
        self.assertGreaterEqual(time.monotonic() - started, 0.2)
        self.assertEqual('periodic', error.holder)
        self.assertEqual('provider tree held by periodic', str(error))
        self.assertEqual(0, len(tree_lock._queue))
        self.assertEqual([], self.locks.held())
        release.set()
        acquired = []
        self._waiter('a', 'next', acquired).join(5)
        self.assertEqual(['next'], acquired)

    def test_no_wait_goes_past_the_timeout(self):
        # Kills ReplaceBinaryOperator_Sub_Add 2 (a wait of the timeout plus
        # the time waited already), and the mutants that spin: Sub_Mod 2
        # and those keeping a limit already passed (line 200).
        self.flags(provider_lock_warn_seconds=0.1)
        self._holder('a', 'periodic')
        tree_lock = self.locks._lock('a')
        stock_wait = tree_lock._cond.wait
        waits = []

        def wait(timeout=None):
            waits.append(timeout)
            return stock_wait(timeout)

        tree_lock._cond.wait = wait
        self.assertRaises(serialized_client.TreeLockTimeout,
                          self.locks.hold(['a'], 'status',
                                          timeout=0.3).__enter__)
        # The wait until the warning, then the rest of the timeout: a few
        # waits at most, as a wait returns early only when notified.
        self.assertGreaterEqual(len(waits), 2)
        self.assertLessEqual(len(waits), 4, waits)
        self.assertLessEqual(waits[0], 0.1)
        self.assertLessEqual(max(waits[1:]), 0.2)

    def test_one_timeout_for_all_the_trees(self):
        release_a = self._holder('a', 'periodic a')
        self._holder('b', 'periodic b')
        threading.Timer(0.5, release_a.set).start()
        started = time.monotonic()

        def hold():
            with self.locks.hold(['a', 'b'], 'status', timeout=1.0):
                pass

        error = self.assertRaises(serialized_client.TreeLockTimeout, hold)
        self.assertEqual('periodic b', error.holder)
        # NOTE: 1.5 s with a timeout per tree.
        self.assertLess(time.monotonic() - started, 1.4)

    def test_cache_lock_is_taken_first(self):
        with self.locks.hold(['b', serialized_client.WHOLE_CACHE, 'a'],
                             'update'):
            self.assertEqual([serialized_client.WHOLE_CACHE, 'a', 'b'],
                             self.locks.held())

    def test_wait_for_the_cache_names_it(self):
        self.flags(provider_lock_warn_seconds=0.1)
        release = self._holder(serialized_client.WHOLE_CACHE, 'periodic')
        threading.Timer(0.3, release.set).start()
        with self.locks.hold([serialized_client.WHOLE_CACHE], 'status'):
            pass
        self.assertIn('status has waited', self.logger.output)
        self.assertIn('for the provider cache, held by periodic; still '
                      'waiting.', self.logger.output)

    def test_unlocked_thread_takes_no_lock(self):
        self._holder('a', 'periodic')
        with self.locks.unlocked():
            with self.locks.hold(['a'], 'fall-back'):
                self.assertEqual('periodic', self.locks.holder('a'))
                self.assertEqual([], self.locks.held())
        self.assertRaises(serialized_client.TreeLockTimeout,
                          self.locks.hold(['a'], 'locked again',
                                          timeout=0.1).__enter__)


class SerializedClientTest(base.TestCase):
    """The mixin composed with Nova's report client; no placement."""

    def setUp(self):
        super().setUp()
        composed = activation.compose(
            report.SchedulerReportClient,
            [serialized_client.SerializedReportClientMixin])
        self.client = composed(adapter=mock.Mock())
        self.client._provider_tree.new_root('node-a', 'a')
        self.client._provider_tree.new_root('node-b', 'b')

    def _holding(self, root, work):
        """In a thread: hold ``root``, wait for ``go``, then ``work()``."""
        holding, go = threading.Event(), threading.Event()
        errors = []

        def hold():
            with self.client.provider_lock(root, 'provider tree flush'):
                holding.set()
                go.wait(10)
                try:
                    work()
                except Exception as error:
                    errors.append(error)

        thread = threading.Thread(target=hold)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(go.set)
        self.assertTrue(holding.wait(10))
        return go, thread, errors

    def test_session_rebuild_leaves_a_held_tree_to_its_holder(self):
        cache = self.client._provider_tree
        seen = []

        def write_then_read():
            self.client._provider_tree.update_traits('a', ['CUSTOM_X'])
            seen.append(self.client._provider_tree.data('a').traits)

        go, holder, errors = self._holding('a', write_then_read)
        started = time.monotonic()
        self.client._create_client()
        self.assertLess(time.monotonic() - started, 1)
        self.assertFalse(self.client._provider_tree.exists('b'))
        go.set()
        holder.join(5)

        self.assertEqual([], errors)
        self.assertEqual([{'CUSTOM_X'}], seen)
        self.assertIs(cache, self.client._provider_tree)
        self.assertEqual([], list(self.client._provider_tree.roots))
        self.assertEqual({}, dict(self.client.provider_locks._locks))

    def test_cache_clear_logged_unless_a_session_rebuild(self):
        # Kills ReplaceUnaryOperator_Delete_Not 13.
        self.client.clear_provider_cache(init=True)
        self.assertNotIn('Clearing', self.logger.output)
        self.client.clear_provider_cache()
        self.assertIn("Clearing the report client's provider cache.",
                      self.logger.output)

    def test_session_rebuild_in_a_flush_clears_every_tree(self):
        with self.client.provider_lock('b', 'provider tree flush'):
            self.client.clear_provider_cache(init=True)
            self.assertEqual([], list(self.client._provider_tree.roots))

    def _moved_while_waiting(self, old_root, new_root):
        """The locks a thread holds for a provider moved while it waited.

        The holder of the provider's tree moves it to ``new_root``.
        """
        tree = self.client._provider_tree
        tree.new_root('node-' + old_root, old_root)
        tree.new_child('child', old_root, uuid=old_root + '-child')

        def move():
            # As the cache rebuilt from placement after a reshape.
            tree.remove(old_root)
            tree.new_root('node-' + new_root, new_root)
            tree.new_child('child', new_root, uuid=old_root + '-child')

        go, holder, errors = self._holding(old_root, move)
        found = []

        def lock_child():
            with self.client.provider_lock(old_root + '-child', 'update'):
                found.append(self.client.provider_locks.held()[:])

        waiter = threading.Thread(target=lock_child)
        waiter.start()
        self.addCleanup(waiter.join, 10)
        tree_lock = self.client.provider_locks._lock(old_root)
        wait_until(lambda: len(tree_lock._queue) == 1)
        go.set()
        holder.join(5)
        waiter.join(5)

        self.assertEqual([], errors)
        return found

    def test_provider_moved_while_waiting_locks_its_new_tree(self):
        # Kills ReplaceComparisonOperator_Eq_LtE 2 and Eq_GtE 2 (the old
        # tree's lock kept when the new root sorts before or after it).
        self.assertEqual([['0']], self._moved_while_waiting('m', '0'))
        self.assertEqual([['z']], self._moved_while_waiting('n', 'z'))

    def test_wrappers_keep_nova_s_signature(self):
        # Kills RemoveDecorator 6 and 8: inspect, and so the feature
        # detection of another plugin, sees Nova's method through them.
        def stock(self, context, node, startup=False):
            """Nova's."""

        wrappers = serialized_client.SerializedReportClientMixin.\
            method_wrappers
        for symbol, wrapper in wrappers.items():
            self.assertEqual(inspect.signature(stock),
                             inspect.signature(wrapper(stock)), symbol)

    def test_subtree_snapshot_holds_the_tree(self):
        # Kills AddNot 39 (Nova's subtree method left unwrapped).
        if not serialized_client._HAS_SUBTREE_METHOD:
            self.skipTest('this Nova has no subtree snapshot method')
        held = []
        self.useFixture(fixtures.MockPatchObject(
            report.SchedulerReportClient,
            'get_provider_subtree_and_ensure_root',
            side_effect=lambda context, rp_uuid: held.append(
                self.client.provider_locks.held()[:])))

        self.client.get_provider_subtree_and_ensure_root('ctxt', 'a')

        self.assertEqual([['a']], held)

    def test_provider_ensured_under_its_tree_lock(self):
        # Kills ReplaceOrWithAnd 7 (the new child's lock, not its tree's).
        held = []
        self.useFixture(fixtures.MockPatchObject(
            report.SchedulerReportClient, '_ensure_resource_provider',
            side_effect=lambda context, uuid, **kwargs: held.append(
                self.client.provider_locks.held()[:])))

        self.client._ensure_resource_provider('ctxt', 'a')
        self.client._ensure_resource_provider(
            'ctxt', 'a1', name='child-of-a', parent_provider_uuid='a')

        self.assertEqual([['a'], ['a']], held)

    def test_lock_of_a_child_is_its_roots(self):
        # Kills NumberReplacer 15 (the last provider of the tree for its
        # root).
        self.client._provider_tree.new_child('child-of-a', 'a', uuid='a1')
        for child in ('a1', 'child-of-a'):
            with self.client.provider_lock(child, 'traits update'):
                self.assertEqual(['a'], self.client.provider_locks.held())

    def _flush(self, write):
        """A flush of the cached trees whose writes ``write()`` makes."""
        new_tree = provider_tree.ProviderTree()
        new_tree.new_root('node-a', 'a')
        new_tree.new_root('node-b', 'b')
        self.useFixture(fixtures.MockPatchObject(
            report.SchedulerReportClient, 'update_from_provider_tree',
            side_effect=lambda context, tree: write()))
        self.client.update_from_provider_tree('ctxt', new_tree)

    def test_failed_write_leaves_its_tree_to_be_rebuilt(self):
        # Kills RemoveDecorator 12 (_writing no context manager).
        self.useFixture(fixtures.MockPatchObject(
            report.SchedulerReportClient, 'set_traits_for_provider',
            side_effect=ValueError('injected')))

        self.assertRaises(ValueError, self._flush, functools.partial(
            self.client.set_traits_for_provider, 'ctxt', 'b', []))

        self.assertTrue(self.client._provider_tree.exists('a'))
        self.assertFalse(self.client._provider_tree.exists('b'))
        self.assertIn('Flushing provider trees b to placement failed '
                      '(injected); they are rebuilt from placement on the '
                      'next update.', self.logger.output)

    def test_failure_nova_invalidates_is_left_to_nova(self):
        # Kills ExceptionReplacer 7 (Nova's invalidation logged as ours).
        def write():
            raise nova_exception.ResourceProviderSyncFailed()

        self.assertRaises(nova_exception.ResourceProviderSyncFailed,
                          self._flush, write)

        self.assertTrue(self.client._provider_tree.exists('b'))
        self.assertNotIn('Flushing provider trees', self.logger.output)

    def _status_update(self, calls):
        def stock(virtapi, context, rp_uuid, enabled):
            # NOTE: as Nova's, through a report client method that takes
            # the tree lock.
            with self.client.provider_lock(rp_uuid, 'traits update'):
                calls.append(self.client.provider_locks.holder(rp_uuid))

        virtapi = mock.Mock(reportclient=self.client)
        return lambda: serialized_client.serialize_status_update(stock)(
            virtapi, 'ctxt', 'a', False)

    def _placement_holds(self, rp_uuid, *reads):
        """Placement's answers to the reads of a provider's tree, in turn.

        Nothing is ever created: creating returns what placement would.
        """
        provider = {'uuid': rp_uuid, 'name': 'node-' + rp_uuid,
                    'generation': 3, 'parent_provider_uuid': None,
                    'root_provider_uuid': rp_uuid}
        answers = [[provider] if held else [] for held in reads]
        self.client.get_providers_in_tree = mock.Mock(
            side_effect=lambda context, uuid: answers.pop(0))
        self.client._create_resource_provider = mock.Mock(
            return_value=dict(provider, generation=0))
        self.client._refresh_associations = mock.Mock()

    def _status_update_of(self, rp_uuid):
        """A status update; returns what Nova's found in the cache."""
        found = []

        def stock(virtapi, context, rp_uuid, enabled):
            found.append((self.client._provider_tree.exists(rp_uuid),
                          self.client.provider_locks.held()[:]))

        serialized_client.serialize_status_update(stock)(
            mock.Mock(reportclient=self.client), 'ctxt', rp_uuid, False)
        return found

    def test_status_update_loads_the_tree_placement_returned(self):
        # The provider is deleted just after the status update read it.
        self._placement_holds('c', True, False)

        found = self._status_update_of('c')

        self.client._create_resource_provider.assert_not_called()
        self.client.get_providers_in_tree.assert_called_once_with('ctxt', 'c')
        self.client._refresh_associations.assert_called_once_with(
            'ctxt', 'c', force=True)
        self.assertEqual(3, self.client._provider_tree.data('c').generation)
        self.assertTrue(found[0][0])

    def test_status_update_of_a_provider_placement_lacks(self):
        self._placement_holds('c', False)

        found = self._status_update_of('c')

        self.client._create_resource_provider.assert_not_called()
        self.assertEqual([False], [exists for exists, _ in found])

    def test_tree_that_fails_to_load_leaves_the_cache(self):
        self._placement_holds('c', True)
        self.client._refresh_associations.side_effect = ValueError('gone')

        self.assertRaises(ValueError, self._status_update_of, 'c')

        self.assertFalse(self.client._provider_tree.exists('c'))

    def test_failed_read_of_the_tree_fails_as_nova_reading_traits(self):
        # Nova logs a failed read of the traits at WARNING, anything else
        # it does not expect with a traceback.
        self._placement_holds('c')
        for failure in (
                nova_exception.ResourceProviderRetrievalFailed(uuid='c'),
                nova_exception.ResourceProviderAggregateRetrievalFailed(
                    uuid='c')):
            self.client.get_providers_in_tree.side_effect = failure

            error = self.assertRaises(
                nova_exception.ResourceProviderTraitRetrievalFailed,
                self._status_update_of, 'c')

            self.assertIs(failure, error.__cause__)
            self.assertFalse(self.client._provider_tree.exists('c'))

    def _conflicting_status_update(self, conflicts):
        """A status update whose first ``conflicts`` attempts conflict.

        :returns: (what it returned, how many attempts it made).
        """
        attempts = []

        def stock(virtapi, context, rp_uuid, enabled):
            attempts.append(rp_uuid)
            if len(attempts) <= conflicts:
                raise nova_exception.ResourceProviderUpdateConflict(
                    uuid=rp_uuid, generation=1, error='conflict')
            return 'updated'

        result = serialized_client.serialize_status_update(stock)(
            mock.Mock(reportclient=self.client), 'ctxt', 'a', False)
        return result, len(attempts)

    def test_status_update_conflict_is_retried(self):
        # Kills ExceptionReplacer 4 and the mutants of the attempt number
        # in the log.
        self.assertEqual(('updated', 2), self._conflicting_status_update(1))
        self.assertIn('Generation conflict updating the compute status trait '
                      'of provider a; retrying with fresh traits (attempt 2 '
                      'of 4).', self.logger.output)

    def test_status_update_gives_up_after_its_attempts(self):
        # Kills the mutants of ``attempt == STATUS_ATTEMPTS``.
        attempts = serialized_client.STATUS_ATTEMPTS
        self.assertEqual(('updated', attempts),
                         self._conflicting_status_update(attempts - 1))
        self.assertRaises(nova_exception.ResourceProviderUpdateConflict,
                          self._conflicting_status_update, attempts)
        for attempt in range(2, attempts + 1):
            self.assertIn('(attempt %d of %d)' % (attempt, attempts),
                          self.logger.output)

    def test_status_update_gives_up_after_timeout(self):
        self.flags(provider_lock_timeout=0.3)
        go, holder, _ = self._holding('a', lambda: None)
        invalidation = threading.Thread(
            target=self.client.invalidate_resource_provider, args=('a',))
        invalidation.start()
        self.addCleanup(invalidation.join, 10)
        tree_lock = self.client.provider_locks._lock('a')
        wait_until(lambda: len(tree_lock._queue) == 1)
        calls = []

        started = time.monotonic()
        self._status_update(calls)()
        waited = time.monotonic() - started

        self.assertGreaterEqual(waited, 0.3)
        self.assertLess(waited, 5)
        self.assertEqual(['provider tree flush'], calls)
        self.assertGreaterEqual(logged_wait(self.logger.output), 0.3)
        self.assertIn('s for its provider tree, held by provider tree '
                      'flush, and goes ahead without the lock ([pcpu_ext] '
                      'provider_lock_timeout). Should that operation undo '
                      'the change, the next periodic resource update '
                      're-syncs the trait from the service record.',
                      self.logger.output)
        self.assertTrue(invalidation.is_alive(),
                        'the other waiter gave up too')
        go.set()
        holder.join(5)
        invalidation.join(5)
        self.assertFalse(self.client._provider_tree.exists('a'))

    def test_status_update_timeout_zero_waits(self):
        self.flags(provider_lock_timeout=0)
        go, holder, _ = self._holding('a', lambda: None)
        threading.Timer(0.5, go.set).start()
        calls = []
        self._status_update(calls)()
        self.assertEqual(['compute status update'], calls)
        self.assertNotIn('without the lock', self.logger.output)

    def _status_change(self, nodes):
        """A status change over ``nodes``, as the compute manager makes it.

        :returns: (the change, the status updates made with the lock).
        """
        calls = []
        manager = mock.Mock(reportclient=self.client)
        manager.virtapi.update_compute_provider_status = functools.partial(
            serialized_client.serialize_status_update(
                lambda virtapi, context, rp_uuid, enabled: calls.append(
                    (rp_uuid, self.client.provider_locks.held()[:]))),
            mock.Mock(reportclient=self.client))

        def change(self, context, enabled):
            for rp_uuid in nodes:
                self.virtapi.update_compute_provider_status(
                    context, rp_uuid, enabled)

        return (lambda: serialized_client.bound_status_change(change)(
            manager, 'ctxt', False)), calls

    def test_status_change_waits_once_for_all_its_nodes(self):
        # NOTE: a timeout per node would wait 2.0 s for a and b; the bound
        # leaves 0.8 s for a loaded machine.
        self.flags(provider_lock_timeout=1.0)
        self.client._provider_tree.new_root('node-c', 'c')
        self._holding('a', lambda: None)
        self._holding('b', lambda: None)
        change, calls = self._status_change(['a', 'b', 'c'])

        started = time.monotonic()
        change()
        waited = time.monotonic() - started

        self.assertGreaterEqual(waited, 1.0)
        self.assertLess(waited, 1.8)
        self.assertEqual([('a', []), ('b', []), ('c', ['c'])], calls)
        log = self.logger.output
        self.assertEqual(1, log.count('goes ahead without the lock'))
        self.assertGreaterEqual(logged_wait(log), 1.0)
        self.assertIn('The same compute status change updated the trait of '
                      '1 more provider(s) at once without the lock, their '
                      'trees still held: b (held by provider tree flush).',
                      log)

    def test_each_status_change_has_its_deadline(self):
        self.flags(provider_lock_timeout=0.3)
        go, _, _ = self._holding('a', lambda: None)
        change, calls = self._status_change(['a'])
        change()
        threading.Timer(0.2, go.set).start()
        change()
        self.assertEqual([('a', []), ('a', ['a'])], calls)


class StatusChangeTest(base.TestCase):

    def test_wait_logged_from_the_start_of_the_change(self):
        # Kills ReplaceBinaryOperator_Sub_Mod 5 (equal to the difference
        # only while the wait is shorter than the clock's reading).
        clock = self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.serialized_client.time')).mock
        clock.monotonic.side_effect = [10.0, 25.0]
        change = serialized_client._StatusChange()

        change.went_ahead('a', 'provider tree flush')

        self.assertIn('Compute status update of provider a waited 15.0s',
                      self.logger.output)


class WholeCacheTest(SerializedClientTest):
    """As above, where the resource tracker snapshots the whole cache.

    As Nova 2024.1 to 2026.1 do.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.serialized_client.snapshots_whole_cache',
            return_value=True))

    def test_lock_of_an_uncached_tree_comes_with_the_cache(self):
        with self.client.provider_lock('c', 'status'):
            self.assertEqual([serialized_client.WHOLE_CACHE, 'c'],
                             self.client.provider_locks.held())
        with self.client.provider_lock('a', 'status'):
            self.assertEqual(['a'], self.client.provider_locks.held())

    def test_tree_gone_while_waiting_comes_with_the_cache(self):
        """The holder's tree leaves the cache before the holder lets go.

        As a reset (SIGHUP) does, or a failed flush Nova invalidates.
        """
        self._placement_holds('a', True)
        go, holder, errors = self._holding(
            'a', lambda: self.client._clear_provider_cache_for_tree('a'))
        found = []
        status = threading.Thread(
            target=lambda: found.extend(self._status_update_of('a')))
        status.start()
        self.addCleanup(status.join, 10)
        tree_lock = self.client.provider_locks._lock('a')
        wait_until(lambda: len(tree_lock._queue) == 1)

        go.set()
        holder.join(5)
        status.join(5)

        self.assertEqual([], errors)
        self.assertEqual(
            [(True, [serialized_client.WHOLE_CACHE, 'a'])], found)

    def test_update_holds_the_cache_then_every_cached_tree(self):
        held = []
        update = serialized_client.serialize_update(
            lambda rt, context, node, startup: held.append(
                (self.client.provider_locks.held()[:],
                 self.client.provider_locks.holder('c'))))
        update(mock.Mock(reportclient=self.client), 'ctxt',
               mock.Mock(uuid='c', hypervisor_hostname='node-c'), False)
        self.assertEqual([([serialized_client.WHOLE_CACHE, 'a', 'b', 'c'],
                           'resource tracker update of node-c')], held)

    def test_status_update_never_loads_a_tree_past_the_deadline(self):
        self.flags(provider_lock_timeout=0.3)
        holding, release = threading.Event(), threading.Event()

        def update():
            with self.client.provider_locks.hold(
                    [serialized_client.WHOLE_CACHE],
                    'resource tracker update of node-a'):
                holding.set()
                release.wait(10)

        thread = threading.Thread(target=update)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(release.set)
        self.assertTrue(holding.wait(10))
        self.client.get_providers_in_tree = mock.Mock()
        change, calls = self._status_change(['c'])

        change()

        self.assertEqual([], calls)
        self.client.get_providers_in_tree.assert_not_called()
        self.assertFalse(self.client._provider_tree.exists('c'))
        self.assertIn('Compute status change left the trait of 1 '
                      'provider(s) to the next periodic resource update, '
                      'which syncs it from the service record: c (held by '
                      'resource tracker update of node-a).',
                      self.logger.output)
        self.assertNotIn('goes ahead', self.logger.output)


class SnapshotModeTest(base.TestCase):
    """The snapshot mode is read from what the resource tracker calls.

    Not from whether the report client has the subtree method: a build
    may have it and still snapshot the whole cache.
    """

    RT_MODULE = 'nova.compute.resource_tracker'

    def setUp(self):
        super().setUp()
        # NOTE: read once per process; each test reads its own.
        serialized_client.snapshots_whole_cache.cache_clear()
        self.addCleanup(serialized_client.snapshots_whole_cache.cache_clear)
        self.useFixture(fixtures.MockPatchObject(
            report.SchedulerReportClient,
            'get_provider_subtree_and_ensure_root', create=True))

    def update_calls(self, *methods):
        """``_update_to_placement`` calls these report client methods."""
        body = ''.join('        self.reportclient.%s(context, node.uuid)\n'
                       % method for method in methods)
        source = ('class ResourceTracker(object):\n'
                  '    def _update_to_placement(self, context, node, '
                  'startup):\n%s        pass\n' % body)
        stock = compat.source_tree

        def source_tree(module_name):
            if module_name == self.RT_MODULE:
                return ast.parse(source)
            return stock(module_name)

        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.compat.source_tree', side_effect=source_tree))

    def test_whole_cache_though_the_client_has_the_subtree_method(self):
        self.update_calls('get_provider_tree_and_ensure_root')
        compute.activate_plugins()
        self.assertTrue(serialized_client.snapshots_whole_cache())

    def test_subtree(self):
        self.update_calls('get_provider_subtree_and_ensure_root')
        compute.activate_plugins()
        self.assertFalse(serialized_client.snapshots_whole_cache())

    def test_both_calls_hold_the_whole_cache(self):
        self.update_calls('get_provider_subtree_and_ensure_root',
                          'get_provider_tree_and_ensure_root')
        compute.activate_plugins()
        self.assertTrue(serialized_client.snapshots_whole_cache())

    def test_neither_call_stops_the_service(self):
        self.update_calls('get_provider_tree')
        error = self.assertRaises(exception.IncompatibleNova,
                                  compute.activate_plugins)
        self.assertIn(
            'nova.compute.resource_tracker:ResourceTracker.'
            '_update_to_placement calls neither '
            'get_provider_tree_and_ensure_root nor '
            'get_provider_subtree_and_ensure_root', str(error))
        self.assertFalse(activation.is_active('compute'))

    def test_without_nova_source_the_whole_cache(self):
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.compat.source_tree', return_value=None))
        compute.activate_plugins()
        self.assertTrue(serialized_client.snapshots_whole_cache())
        self.assertIn('holds the whole provider cache in every resource '
                      'tracker update', self.logger.output)

    def test_installed_nova(self):
        from nova import version
        compute.activate_plugins()
        major = int(version.version_string().split('.')[0])
        self.assertEqual(major < 34, serialized_client.snapshots_whole_cache())


class OsloFairLockTest(base.TestCase):
    """Why the tree locks are not oslo.concurrency's fair locks.

    From oslo.concurrency 7.6 (Nova 2026.2's) making the first one imports
    eventlet, in whichever thread makes it, and eventlet imported outside
    the main thread leaves that thread impossible to join. In native
    threading mode Nova 2026.x does not import eventlet, so the first tree
    lock, taken in a worker thread, would hang that thread's shutdown. If
    this test fails, the reason is gone.
    """

    def test_first_fair_lock_in_a_thread_never_ends(self):
        from nova import version
        from oslo_concurrency import lockutils
        if int(version.version_string().split('.')[0]) < 33:
            self.skipTest('Nova before 2026.1 always imports eventlet')
        if hasattr(lockutils, 'eventlet'):
            self.skipTest('this oslo.concurrency (before 7.6, as in Nova '
                          '2026.1) imports eventlet on import')
        if sys.version_info >= (3, 13):
            self.skipTest('the thread ends on Python 3.13')
        script = (
            'import threading\n'
            'from oslo_concurrency import lockutils\n'
            'thread = threading.Thread(target=lockutils.internal_fair_lock,'
            ' args=("tree",), daemon=True)\n'
            'thread.start()\n'
            'thread.join(5)\n'
            'print(thread.is_alive())\n')
        result = subprocess.run(
            [sys.executable, '-W', 'ignore', '-c', script],
            capture_output=True, text=True, timeout=60, check=True)
        self.assertEqual('True', result.stdout.strip())
