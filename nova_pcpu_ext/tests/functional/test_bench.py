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

"""The benchmark runs end to end on a tiny cloud (no timing is asserted).

And its count of lost updates sees what placement shows.
"""

from nova_pcpu_ext.tests.perf import base  # isort:skip

import json
import os
import subprocess
import sys

import fixtures
import testtools

from nova_pcpu_ext.tests.perf import provider_updates
from nova_pcpu_ext.tests.perf import scheduling


class BenchSmokeTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # A minute of the benchmark: once per CI run (tox -e py313).
        if os.environ.get('NOVA_PCPU_EXT_BENCH_SMOKE') != '1':
            self.skipTest('NOVA_PCPU_EXT_BENCH_SMOKE=1 runs it')

    def test_bench_writes_results(self):
        output_dir = self.useFixture(fixtures.TempDir()).path
        result = subprocess.run(
            [sys.executable, '-m', 'nova_pcpu_ext.tests.perf.bench',
             '--hosts', '10', '--nodes', '1', '--iterations', '3',
             '--calls', '4', '--memory-trees', '10', '--stuck-nodes', '2',
             '--output-dir', output_dir],
            capture_output=True, text=True, timeout=600,
            env=dict(os.environ, OS_TEST_TIMEOUT='0'),
            stdin=subprocess.DEVNULL)

        self.assertEqual(0, result.returncode, result.stderr[-3000:])
        path = os.path.join(output_dir, 'results.json')
        self.assertEqual('results: %s' % path,
                         result.stdout.strip().splitlines()[-1])
        with open(path) as f:
            scenarios = {
                (s['scenario'], s['n'], s['max_placement_results']):
                s['figures'] for s in json.load(f)['scenarios']}
        self.assertEqual({('isolate', 10, 1000), ('pinned', 10, 1000),
                          ('unpinned', 10, 1000),
                          ('provider_updates', 1, None),
                          ('stuck_update', 2, None), ('memory', 10, None)},
                         set(scenarios))
        isolate = scenarios[('isolate', 10, 1000)]
        self.assertEqual({'stock': 2, 'extension': 1, 'ratio': 0.5},
                         isolate['placement_queries'])
        latency = scenarios[('pinned', 10, 1000)]['latency_median_ms']
        self.assertEqual(3, latency['samples'])
        low, high = latency['ratio_ci']
        self.assertTrue(low <= latency['ratio'] <= high, latency)
        updates = scenarios[('provider_updates', 1, None)]
        self.assertEqual(0, updates['lost_updates']['extension'])
        self.assertEqual(4, updates['status_call_p99_ms']['samples'])
        self.assertGreater(updates['goodput_per_s']['extension'], 0)
        stuck = scenarios[('stuck_update', 2, None)]
        self.assertEqual(3, stuck['status_change_median_ms']['samples'])
        self.assertEqual(3, stuck['cache_clear_median_ms']['samples'])
        self.assertEqual(0, stuck['failed_updates']['extension'])
        memory = scenarios[('memory', 10, None)]
        self.assertEqual({'stock': 0, 'extension': 0},
                         memory['failed_updates'])
        self.assertEqual({'extension': 0}, memory['locks_left'])


class LostUpdatesTest(base.BenchCase):
    """Writes undone in placement behind the compute's back are lost."""

    def test_lost_updates_are_read_from_placement(self):
        placement = scheduling.Placement(self.placement_server.endpoint)
        compute = provider_updates.Compute('stock', self.cell_context(), 2)
        for node in compute.nodes:
            compute.update_node(node)
        compute.set_status(True)
        self.assertEqual(0, compute.lost(placement))

        # A stale flush removes the disabled trait of one node...
        path = '/resource_providers/%s/traits' % compute.nodes[0].uuid
        traits = placement.call('GET', path)
        placement.call('PUT', path, json={
            'resource_provider_generation':
                traits['resource_provider_generation'],
            'traits': sorted(set(traits['traits']) -
                             {provider_updates.DISABLED})})
        self.assertEqual(1, compute.lost(placement))

        # ... and writes back an older inventory of the other.
        path = '/resource_providers/%s/inventories/VCPU' % (
            compute.nodes[1].uuid)
        inventory = placement.call('GET', path)
        placement.call('PUT', path, json=dict(
            inventory, reserved=1 - inventory['reserved']))
        self.assertEqual(2, compute.lost(placement))
