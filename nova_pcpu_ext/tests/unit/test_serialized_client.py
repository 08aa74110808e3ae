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
import weakref

from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests.unit import base


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

        thread = threading.Thread(target=hold)
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
