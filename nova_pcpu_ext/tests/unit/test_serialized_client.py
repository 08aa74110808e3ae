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

import gc
import subprocess
import sys
import threading
import time
from unittest import mock
import weakref

from nova.scheduler.client import report

from nova_pcpu_ext import activation
from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests.unit import base


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
        waiter = self._waiter('a', 'compute status update', [])

        deadline = time.monotonic() + 5
        while ('still waiting' not in self.logger.output and
               time.monotonic() < deadline):
            time.sleep(0.05)
        self.assertTrue(waiter.is_alive(), 'the waiter did not wait')
        self.assertIn('compute status update has waited', self.logger.output)
        self.assertIn('for provider tree a, held by resource tracker update '
                      'of node1; still waiting.', self.logger.output)
        release.set()
        waiter.join(5)
        self.assertIn('compute status update got provider tree a after',
                      self.logger.output)

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

    def test_out_of_order_call_waits_until_nothing_is_held(self):
        calls = []

        def clear():
            with self.locks.hold(['a'], 'clear'):
                calls.append(list(self.locks.held()))

        with self.locks.hold(['b'], 'flush'):
            self.locks.call_in_order('b', lambda: calls.append('b now'))
            self.locks.call_in_order('a', clear)
            self.assertEqual(['b now'], calls)
        self.assertEqual(['b now', ['a']], calls)

    def test_call_runs_now_when_nothing_is_held(self):
        calls = []
        self.locks.call_in_order('a', lambda: calls.append('a'))
        self.assertEqual(['a'], calls)

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
        self.assertEqual(0, len(tree_lock._queue))
        self.assertEqual([], self.locks.held())
        release.set()
        acquired = []
        self._waiter('a', 'next', acquired).join(5)
        self.assertEqual(['next'], acquired)

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

    def test_session_rebuild_waits_for_the_holder(self):
        cache = self.client._provider_tree
        seen = []

        def write_then_read():
            self.client._provider_tree.update_traits('a', ['CUSTOM_X'])
            seen.append(self.client._provider_tree.data('a').traits)

        go, holder, errors = self._holding('a', write_then_read)
        rebuild = threading.Thread(target=self.client._create_client)
        rebuild.start()
        self.addCleanup(rebuild.join, 10)
        tree_lock = self.client.provider_locks._lock('a')
        wait_until(lambda: len(tree_lock._queue) == 1)
        go.set()
        holder.join(5)
        rebuild.join(5)

        self.assertEqual([], errors)
        self.assertEqual([{'CUSTOM_X'}], seen)
        self.assertIs(cache, self.client._provider_tree)
        self.assertEqual([], list(self.client._provider_tree.roots))

    def test_session_rebuild_in_a_flush_keeps_the_order(self):
        with self.client.provider_lock('b', 'provider tree flush'):
            self.client.clear_provider_cache(init=True)
            self.assertFalse(self.client._provider_tree.exists('b'))
            self.assertTrue(self.client._provider_tree.exists('a'))
        self.assertFalse(self.client._provider_tree.exists('a'))

    def _status_update(self, calls):
        def stock(virtapi, context, rp_uuid, enabled):
            # NOTE: as Nova's, through a report client method that takes
            # the tree lock.
            with self.client.provider_lock(rp_uuid, 'traits update'):
                calls.append(self.client.provider_locks.holder(rp_uuid))

        virtapi = mock.Mock(reportclient=self.client)
        return lambda: serialized_client.serialize_status_update(stock)(
            virtapi, 'ctxt', 'a', False)

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
        self.assertIn('Compute status update of provider a waited 0.3s for '
                      'its provider tree, held by provider tree flush, and '
                      'goes ahead without the lock ([pcpu_ext] '
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


class OsloFairLockTest(base.TestCase):
    """Why the tree locks are not oslo.concurrency's fair locks.

    Making one imports eventlet, and eventlet (0.41, as Nova 2026.2 pins it)
    imported outside the main thread leaves that thread impossible to join.
    In native threading mode Nova 2026.x does not import eventlet, so the
    first tree lock, taken in a worker thread, would hang that thread's
    shutdown. If this test fails, the reason is gone.
    """

    def test_first_fair_lock_in_a_thread_never_ends(self):
        from nova import version
        if int(version.version_string().split('.')[0]) < 33:
            self.skipTest('Nova before 2026.1 always imports eventlet')
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
