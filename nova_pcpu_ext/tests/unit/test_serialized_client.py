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

import threading

from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests.unit import base


class ProviderLocksTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.locks = serialized_client.ProviderLocks()

    def test_reentrant(self):
        with self.locks.hold(['a'], 'outer'):
            with self.locks.hold(['a', 'b'], 'inner'):
                self.assertEqual('outer', self.locks._lock('a').operation)
                self.assertEqual('inner', self.locks._lock('b').operation)
            self.assertEqual('outer', self.locks._lock('a').operation)
        self.assertIsNone(self.locks._lock('a').operation)

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

    def test_independent_trees_do_not_wait(self):
        self._holder('a', 'periodic')
        acquired = []

        def hold_b():
            with self.locks.hold(['b'], 'status'):
                acquired.append('b')

        thread = threading.Thread(target=hold_b)
        thread.start()
        thread.join(5)
        self.assertEqual(['b'], acquired)

    def test_long_wait_is_logged_with_the_holder(self):
        self.flags(provider_lock_warn_seconds=0.0)
        release = self._holder('a', 'resource tracker update of node1')
        threading.Timer(0.2, release.set).start()

        with self.locks.hold(['a'], 'compute status update'):
            pass

        self.assertIn('compute status update waited', self.logger.output)
        self.assertIn('for provider tree a, held by resource tracker '
                      'update of node1', self.logger.output)

    def test_short_wait_is_not_logged(self):
        release = self._holder('a', 'periodic')
        threading.Timer(0.1, release.set).start()
        with self.locks.hold(['a'], 'status'):
            pass
        self.assertNotIn('waited', self.logger.output)
