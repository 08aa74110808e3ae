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

"""Benchmarks: stock Nova and Nova with nova-pcpu-ext, side by side.

    python -m nova_pcpu_ext.tests.perf.bench [--quick] [--db-url URL]
                                             [--output-dir DIR]

Prints a table, writes ``results.json`` and ``latency.png`` to the output
directory and ends with ``results: <path to the JSON file>``.
"""

import argparse
import datetime
import json
import logging
import os
import platform
import resource
import sys
import unittest

from nova_pcpu_ext.tests.perf import provider_updates
from nova_pcpu_ext.tests.perf import scheduling

FULL = {'hosts': (100, 1000, 5000), 'providers': (1, 100, 1000)}
QUICK = {'hosts': (100,), 'providers': (1, 100)}


def _iterations(hosts):
    """Fewer samples where one call takes seconds."""
    return max(3, min(20, 2000 // hosts))


def _run(case):
    result = unittest.TestResult()
    case.run(result)
    for _test, trace in result.errors + result.failures:
        print(trace, file=sys.stderr)
    return result.wasSuccessful()


def _ratio(stock, extension):
    return extension / stock if stock else None


def _scenarios(raw):
    """JSON-ready results with the stock/extension ratio of each figure."""
    scenarios = []
    for (scenario, n), variants in sorted(raw.items()):
        figures = {}
        for key in variants['stock']:
            stock, extension = variants['stock'][key], \
                variants['extension'].get(key)
            figures[key] = {'stock': stock, 'extension': extension,
                            'ratio': _ratio(stock, extension)}
            if 'global_lock' in variants:
                figures[key]['global_lock'] = variants['global_lock'].get(key)
        for key in ('lock_wait_p50_ms', 'lock_wait_p99_ms'):
            if key in variants.get('extension', {}):
                figures[key] = {
                    'extension': variants['extension'][key],
                    'global_lock': variants['global_lock'].get(key)}
        scenarios.append({'scenario': scenario, 'n': n, 'figures': figures})
    return scenarios


def _table(scenarios):
    row = '%-17s %6s %-22s %10s %10s %7s %12s'
    lines = [row % ('scenario', 'n', 'figure', 'stock', 'extension',
                    'ratio', 'global lock')]
    for entry in scenarios:
        for key, figure in entry['figures'].items():
            lines.append(row % (
                entry['scenario'], entry['n'], key,
                _fmt(figure.get('stock')), _fmt(figure.get('extension')),
                _fmt(figure.get('ratio')), _fmt(figure.get('global_lock'))))
    return '\n'.join(lines)


def _fmt(value):
    return '-' if value is None else '%.3g' % value


def _plot(scenarios, path):
    try:
        import matplotlib
        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError:
        return None
    figure, axis = pyplot.subplots(figsize=(7, 4.5))
    for mix in scheduling.MIXES:
        points = sorted((e['n'], e['figures']['latency_median_ms'])
                        for e in scenarios if e['scenario'] == mix)
        if not points:
            continue
        hosts = [n for n, _ in points]
        for variant, style in (('stock', '--'), ('extension', '-')):
            axis.plot(hosts, [f[variant] for _, f in points], style,
                      marker='o', label='%s, %s' % (mix, variant))
    axis.set_xscale('log')
    axis.set_xlabel('compute nodes')
    axis.set_ylabel('select_destinations median latency (ms)')
    axis.legend(fontsize='small')
    axis.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true',
                        help='100 compute nodes; 1 and 100 providers')
    parser.add_argument('--db-url', help='placement database URL '
                        '(default: a fresh sqlite file)')
    parser.add_argument('--output-dir', default='bench-results')
    parser.add_argument('--hosts', type=int, nargs='*',
                        help='compute node counts, instead of the defaults')
    parser.add_argument('--providers', type=int, nargs='*',
                        help='provider counts, instead of the defaults')
    parser.add_argument('--iterations', type=int,
                        help='samples per request mix and variant '
                        '(default: 20, fewer for large clouds)')
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    for key in ('hosts', 'providers'):
        if getattr(args, key) is not None:
            sizes[key] = getattr(args, key)
    # Nova's services log plenty; the table is the output.
    logging.disable(logging.WARNING)

    raw, ok = {}, True
    for hosts in sizes['hosts']:
        ok &= _run(type('SchedulingBench', (scheduling.SchedulingBench,), {
            'hosts': hosts,
            'iterations': args.iterations or _iterations(hosts),
            'db_url': args.db_url, 'results': raw})('test_scheduling'))
    for providers in sizes['providers']:
        ok &= _run(type(
            'ProviderUpdatesBench', (provider_updates.ProviderUpdatesBench,),
            {'providers': providers, 'db_url': args.db_url,
             'results': raw})('test_provider_updates'))

    scenarios = _scenarios(raw)
    os.makedirs(args.output_dir, exist_ok=True)
    output = {
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(),
        'machine': {'python': platform.python_version(),
                    'cpus': os.cpu_count(), 'platform': platform.platform()},
        'quick': args.quick,
        'peak_rss_mib': resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss / 1024,
        'scenarios': scenarios,
    }
    path = os.path.abspath(os.path.join(args.output_dir, 'results.json'))
    with open(path, 'w') as f:
        json.dump(output, f, indent=2)
    print(_table(scenarios))
    plot = _plot(scenarios, os.path.join(args.output_dir, 'latency.png'))
    if plot:
        print('plot: %s' % os.path.abspath(plot))
    print('results: %s' % path)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
