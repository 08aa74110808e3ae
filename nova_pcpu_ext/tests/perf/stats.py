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

"""Figures of a benchmark: stock beside the extension, with intervals.

A ratio is extension / stock of one statistic (median, p99, mean). Its
95 % interval comes from a bootstrap: the samples are drawn again with
replacement many times, by pair when the samples are paired (taken
alternately, sample i of one variant beside sample i of the other), and
the interval spans the middle 95 % of the ratios so obtained.
"""

import random
import statistics

RESAMPLES = 2000


def median(values):
    return statistics.median(values)


def mean(values):
    return statistics.fmean(values)


def p99(values):
    return percentile(values, 0.99)


def p95(values):
    return percentile(values, 0.95)


def percentile(values, fraction):
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def ratio_interval(stock, extension, statistic, resamples=RESAMPLES,
                   seed=1):
    """95 % bootstrap interval of statistic(extension) / statistic(stock)."""
    rng = random.Random(seed)
    paired = len(stock) == len(extension)
    ratios = []
    for _ in range(resamples):
        if paired:
            picks = [rng.randrange(len(stock)) for _ in stock]
            stock_sample = [stock[i] for i in picks]
            extension_sample = [extension[i] for i in picks]
        else:
            stock_sample = rng.choices(stock, k=len(stock))
            extension_sample = rng.choices(extension, k=len(extension))
        base = statistic(stock_sample)
        if base:
            ratios.append(statistic(extension_sample) / base)
    if not ratios:
        return None
    return [percentile(ratios, 0.025), percentile(ratios, 0.975)]


def compare(samples, statistic, scale=1.0):
    """A figure from ``{variant: [sample, ...]}``; stock is the base.

    Values are ``statistic(samples) * scale``; the ratio and its interval
    compare the extension with stock.
    """
    figure = {variant: statistic(values) * scale
              for variant, values in samples.items() if values}
    stock, extension = samples['stock'], samples['extension']
    figure['samples'] = min(len(stock), len(extension))
    base = figure.get('stock')
    if base and 'extension' in figure:
        figure['ratio'] = figure['extension'] / base
        figure['ratio_ci'] = ratio_interval(stock, extension, statistic)
    return figure


def single(values):
    """A figure of one value per variant, without an interval."""
    figure = dict(values)
    if figure.get('stock'):
        figure['ratio'] = figure['extension'] / figure['stock']
    return figure
