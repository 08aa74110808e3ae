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

"""tools/seed_test_times.py, run as tox runs it, in a directory of its own."""

import os
import subprocess
import sys

import fixtures
from stestr.repository import file as file_repository
import testtools

import nova_pcpu_ext

TOOLS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(nova_pcpu_ext.__file__))), 'tools')
SCRIPT = os.path.join(TOOLS, 'seed_test_times.py')
TESTS = ('pkg.test_a.ATest.test_long', 'pkg.test_b.BTest.test_short')


class SeedTestTimesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.times = os.path.join(self.dir, 'times.txt')
        with open(self.times, 'w') as times:
            times.write('%s 120.500\n\n%s 0.250\n' % TESTS)

    def seed(self, times=None):
        subprocess.run([sys.executable, SCRIPT] + ([times] if times else []),
                       cwd=self.dir, check=True, capture_output=True)
        return file_repository.RepositoryFactory().open(self.dir)

    def test_a_new_repository_gets_the_times(self):
        repository = self.seed(self.times)

        known = repository.get_test_times(TESTS + ('pkg.test_c',))
        self.assertEqual({'pkg.test_c'}, known['unknown'])
        self.assertEqual([120.5, 0.25], [
            round(known['known'][test_id], 3) for test_id in TESTS])

    def test_an_existing_repository_keeps_its_own(self):
        file_repository.RepositoryFactory().initialise(self.dir)

        repository = self.seed(self.times)

        self.assertEqual(set(TESTS), repository.get_test_times(
            TESTS)['unknown'])

    def test_the_file_of_the_repository_names_tests_with_times(self):
        repository = self.seed()

        with open(os.path.join(TOOLS, 'test-times.txt')) as times:
            test_ids = [line.split()[0] for line in times if line.strip()]
        self.assertIn('nova_pcpu_ext.tests.functional.test_manage.'
                      'HealIsolateTest.test_cold_migration', test_ids)
        self.assertEqual(set(), repository.get_test_times(test_ids)[
            'unknown'])
