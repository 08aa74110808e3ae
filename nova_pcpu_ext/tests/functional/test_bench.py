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

"""The benchmark runs end to end on a tiny cloud (no timing is asserted)."""

import json
import os
import subprocess
import sys

import fixtures
import testtools


class BenchSmokeTest(testtools.TestCase):

    def test_bench_writes_results(self):
        output_dir = self.useFixture(fixtures.TempDir()).path
        result = subprocess.run(
            [sys.executable, '-m', 'nova_pcpu_ext.tests.perf.bench',
             '--hosts', '10', '--providers', '1', '--iterations', '3',
             '--output-dir', output_dir],
            capture_output=True, text=True, timeout=600,
            env=dict(os.environ, OS_TEST_TIMEOUT='0'),
            stdin=subprocess.DEVNULL)

        self.assertEqual(0, result.returncode, result.stderr[-3000:])
        path = os.path.join(output_dir, 'results.json')
        self.assertEqual('results: %s' % path,
                         result.stdout.strip().splitlines()[-1])
        with open(path) as f:
            scenarios = {(s['scenario'], s['n']): s['figures']
                         for s in json.load(f)['scenarios']}
        self.assertEqual({('isolate', 10), ('pinned', 10), ('unpinned', 10),
                          ('provider_updates', 1)}, set(scenarios))
        isolate = scenarios[('isolate', 10)]
        self.assertEqual({'stock': 2, 'extension': 1, 'ratio': 0.5},
                         isolate['placement_queries'])
        self.assertEqual(0, scenarios[('provider_updates', 1)][
            'conflicts']['extension'])
