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
        # A minute of the benchmark: once per periodic run (tox -e
        # periodic-py313).
        if os.environ.get('NOVA_PCPU_EXT_BENCH_SMOKE') != '1':
            self.skipTest('NOVA_PCPU_EXT_BENCH_SMOKE=1 runs it')

    def test_bench_writes_results(self):
        output_dir = self.useFixture(fixtures.TempDir()).path
        # One cloud, half legacy: every host kind, and the fill states.
        result = subprocess.run(
            [sys.executable, '-m', 'nova_pcpu_ext.tests.perf.bench',
             '--hosts', '10', '--legacy', '50', '--nodes', '1',
             '--iterations', '3', '--calls', '4', '--memory-trees', '10',
             '--stuck-nodes', '2', '--output-dir', output_dir],
            capture_output=True, text=True, timeout=600,
            env=dict(os.environ, OS_TEST_TIMEOUT='0'),
            stdin=subprocess.DEVNULL)

        self.assertEqual(0, result.returncode, result.stderr[-3000:])
        path = os.path.join(output_dir, 'results.json')
        self.assertEqual('results: %s' % path,
                         result.stdout.strip().splitlines()[-1])
        with open(path) as f:
            output = json.load(f)
        scenarios = {
            (s['scenario'], s['n'], s['max_placement_results'],
             s.get('legacy_pct'), s.get('full')): s['figures']
            for s in output['scenarios']}
        self.assertEqual({('isolate', 10, 1000, 50, None),
                          ('pinned', 10, 1000, 50, None),
                          ('unpinned', 10, 1000, 50, None),
                          ('isolate', 10, 1000, 50, 'new_no_ht'),
                          ('isolate', 10, 1000, 50, 'no_ht'),
                          ('provider_updates', 1, None, None, None),
                          ('stuck_update', 2, None, None, None),
                          ('memory', 10, None, None, None)},
                         set(scenarios))
        self.assertScheduling(scenarios)
        # At 10 hosts the requirement is not derived: informational.
        [requirement] = output['requirements']
        self.assertEqual((10, 50, False, None),
                         (requirement['n'], requirement['legacy_pct'],
                          requirement['applies'], requirement['met']))

        updates = scenarios[('provider_updates', 1, None, None, None)]
        self.assertEqual(0, updates['lost_updates']['extension'])
        self.assertEqual(4, updates['status_call_p99_ms']['samples'])
        self.assertGreater(updates['goodput_per_s']['extension'], 0)
        stuck = scenarios[('stuck_update', 2, None, None, None)]
        self.assertEqual(3, stuck['status_change_median_ms']['samples'])
        self.assertEqual(3, stuck['cache_clear_median_ms']['samples'])
        self.assertEqual(0, stuck['failed_updates']['extension'])
        memory = scenarios[('memory', 10, None, None, None)]
        self.assertEqual({'stock': 0, 'extension': 0},
                         memory['failed_updates'])
        self.assertEqual({'extension': 0}, memory['locks_left'])

    def assertScheduling(self, scenarios):
        """What 3 requests of each variant show on 10 hosts, half legacy.

        3 new-style hosts with hyperthreads, 2 without; 3 legacy with, 2
        without.
        """
        modes = set(scheduling.MODES)
        for key, figures in scenarios.items():
            if key[3] is None:
                continue
            for name, figure in figures.items():
                expected = (modes if name == 'refused_where_stock_placed'
                            else modes | {'stock'})
                self.assertTrue(expected <= set(figure), (key, name))
            # legacy_only's fallback yields legacy hosts only.
            self.assertEqual(
                0, figures['fallback_new_style_candidates']['legacy_only'],
                key)

        isolate = scenarios[('isolate', 10, 1000, 50, None)]
        queries = isolate['placement_queries']
        self.assertEqual((2, 1, 2), tuple(
            queries[variant] for variant in scheduling.VARIANTS))
        # Stock's fallback yields every host, the new-style ones too;
        # legacy_only's the 5 legacy hosts.
        self.assertEqual({'stock': 5, 'drop': 0, 'legacy_only': 0},
                         self.values(
                             isolate['fallback_new_style_candidates']))
        self.assertEqual({'stock': 10, 'drop': 2, 'legacy_only': 7},
                         self.values(isolate['hosts_filtered']))
        pinned = scenarios[('pinned', 10, 1000, 50, None)]
        self.assertEqual(5, pinned['fallback_new_style_candidates']['stock'])
        self.assertEqual({'stock': 2, 'drop': 2, 'legacy_only': 2},
                         self.values(pinned['placement_queries']))
        for mix in scheduling.MIXES:
            figures = scenarios[(mix, 10, 1000, 50, None)]
            self.assertEqual({'stock': 0, 'drop': 0, 'legacy_only': 0},
                             figures['no_valid_host'])
        latency = pinned['latency_median_ms']
        self.assertEqual(3, latency['samples'])
        for mode in scheduling.MODES:
            low, high = latency['ratio_ci'][mode]
            self.assertTrue(low <= latency['ratio'][mode] <= high, latency)

        # New-style hosts without hyperthreads full: drop refuses what
        # stock places on legacy hosts. Then the legacy ones without
        # hyperthreads too: legacy_only places on legacy hosts with
        # hyperthreads as stock does.
        for state, refused in (('new_no_ht', {'drop': 3, 'legacy_only': 0}),
                               ('no_ht', {'drop': 3, 'legacy_only': 0})):
            figures = scenarios[('isolate', 10, 1000, 50, state)]
            self.assertEqual(0, figures['no_valid_host']['stock'], state)
            self.assertEqual(refused, figures['refused_where_stock_placed'],
                             state)
            self.assertEqual(0, figures['allocation_candidates']['drop'],
                             state)

    @staticmethod
    def values(figure):
        return {variant: figure[variant] for variant in scheduling.VARIANTS}


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
