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

"""The benchmark's ratios and their bootstrap intervals."""

import random

import testtools

from nova_pcpu_ext.tests.perf import stats


class PercentileTest(testtools.TestCase):

    def test_nearest_rank(self):
        values = list(range(1, 101))
        random.Random(3).shuffle(values)
        self.assertEqual(100, stats.p99(values))
        self.assertEqual(96, stats.p95(values))
        self.assertEqual(7, stats.percentile([7], 0.99))


class RatioIntervalTest(testtools.TestCase):

    def test_a_constant_factor_has_no_spread(self):
        stock = [10.0, 12.0, 11.0, 30.0, 9.0]
        self.assertEqual([2.0, 2.0], stats.ratio_interval(
            stock, [2 * v for v in stock], stats.median))

    def test_pairs_stay_together(self):
        # Each pair moves together: resampled by pair, the ratio of the
        # medians is always 1; drawn apart, it would spread widely.
        stock = [1.0, 5.0, 25.0, 125.0]
        self.assertEqual([1.0, 1.0],
                         stats.ratio_interval(stock, stock, stats.median))

    def test_unpaired_samples_spread(self):
        rng = random.Random(5)
        stock = [rng.gauss(100, 10) for _ in range(50)]
        extension = [rng.gauss(100, 10) for _ in range(60)]
        low, high = stats.ratio_interval(stock, extension, stats.median)
        self.assertLess(low, 1.0)
        self.assertGreater(high, 1.0)
        self.assertLess(high - low, 0.2)

    def test_noise_narrows_with_samples(self):
        rng = random.Random(7)

        def width(n):
            stock = [rng.gauss(100, 10) for _ in range(n)]
            extension = [rng.gauss(100, 10) for _ in range(n)]
            low, high = stats.ratio_interval(stock, extension, stats.median)
            return high - low

        self.assertLess(width(400), width(10))


class CompareTest(testtools.TestCase):

    def test_figure(self):
        figure = stats.compare(
            {'stock': [0.1, 0.2, 0.3], 'extension': [0.05, 0.1, 0.15],
             'global_lock': [0.2, 0.4, 0.6]}, stats.median, 1000)
        self.assertEqual(200.0, figure['stock'])
        self.assertEqual(100.0, figure['extension'])
        self.assertEqual(400.0, figure['global_lock'])
        self.assertEqual(0.5, figure['ratio'])
        self.assertEqual([0.5, 0.5], figure['ratio_ci'])
        self.assertEqual(3, figure['samples'])

    def test_no_ratio_to_zero(self):
        figure = stats.single({'stock': 0, 'extension': 0})
        self.assertNotIn('ratio', figure)
        self.assertEqual(0.5, stats.single(
            {'stock': 2, 'extension': 1})['ratio'])
