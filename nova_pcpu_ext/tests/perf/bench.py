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

    python -m nova_pcpu_ext.tests.perf.bench [--quick] [--db sqlite|mariadb]
                                             [--output-dir DIR]

Prints a table (each ratio with its 95 % interval and sample count),
writes ``results.json`` and ``latency.png`` to the output directory and
ends with ``results: <path to the JSON file>``.
"""

import argparse
import contextlib
import datetime
import json
import logging
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from nova_pcpu_ext.tests.cloud import backing
from nova_pcpu_ext.tests.cloud import processes
from nova_pcpu_ext.tests.perf import base
from nova_pcpu_ext.tests.perf import provider_updates
from nova_pcpu_ext.tests.perf import scheduling
from nova_pcpu_ext.tests.perf import stats
from nova_pcpu_ext.tests.perf import stuck_update
from nova_pcpu_ext.tests import placement_server

FULL = {'hosts': (100, 1000, 5000), 'nodes': (1, 100, 1000)}
QUICK = {'hosts': (100,), 'nodes': (1, 100)}


def _iterations(hosts, quick):
    """Paired samples per request mix: fewer where one call takes seconds."""
    if quick:
        return 10
    return max(8, min(40, 30000 // hosts))


def _progress(message, started):
    print('%6.0fs %s' % (time.monotonic() - started, message),
          file=sys.stderr, flush=True)


@contextlib.contextmanager
def _database_server(kind):
    """MariaDB as a private process for ``mariadb``; nothing for sqlite."""
    if kind == 'sqlite':
        yield None
        return
    if not shutil.which('mariadbd'):
        sys.exit('--db mariadb needs the MariaDB server: run '
                 '"tools/install-cloud-packages.sh mariadb-server" as root')
    work_dir = tempfile.mkdtemp(prefix='bench-mariadb-')
    procs = processes.Processes(work_dir)
    try:
        # The cloud's: a private data directory, port and pid file.
        server = backing.MariaDB(procs, work_dir, placement_server.free_port())
        server.start()
        yield server
    finally:
        procs.stop('mariadb')
        shutil.rmtree(work_dir, ignore_errors=True)


def _memory(trees):
    """Resident memory of a compute with ``trees`` trees, per variant."""
    runs = {variant: subprocess.Popen(
        [sys.executable, '-m', 'nova_pcpu_ext.tests.perf.memory', variant,
         str(trees)], stdout=subprocess.PIPE, text=True)
        for variant in ('stock', 'extension')}
    results = {}
    for variant, run in runs.items():
        output, _ = run.communicate()
        if run.returncode:
            return None
        results[variant] = json.loads(output.splitlines()[-1])
    return {
        'rss_mib': stats.single({
            variant: r['rss_kib'] / 1024 for variant, r in results.items()}),
        'rss_growth_mib': stats.single({
            variant: (r['rss_kib'] - r['rss_kib_before']) / 1024
            for variant, r in results.items()}),
        'failed_updates': stats.single({
            variant: r['failed'] for variant, r in results.items()}),
        'locks_left': {'extension': results['extension']['locks_left']},
    }


def _scenarios(raw):
    """JSON-ready results, in a stable order."""
    order = list(scheduling.MIXES) + ['provider_updates', 'stuck_update',
                                      'memory']
    return [{'scenario': scenario, 'n': n, 'max_placement_results': limit,
             'figures': figures}
            for (scenario, n, limit), figures in sorted(
                raw.items(), key=lambda item: (
                    order.index(item[0][0]), item[0][1], item[0][2] or 0))]


def _table(scenarios):
    row = '%-16s %5s %6s %-23s %9s %9s %6s %-13s %5s %9s'
    lines = [row % ('scenario', 'n', 'limit', 'figure', 'stock',
                    'extension', 'ratio', '95% interval', 'samp.',
                    'glob.lock')]
    for entry in scenarios:
        for key, figure in entry['figures'].items():
            interval = figure.get('ratio_ci')
            lines.append(row % (
                entry['scenario'], entry['n'],
                entry['max_placement_results'] or '-', key,
                _fmt(figure.get('stock')), _fmt(figure.get('extension')),
                _fmt(figure.get('ratio')),
                '%.3f-%.3f' % tuple(interval) if interval else '-',
                figure.get('samples', '-'),
                _fmt(figure.get('global_lock'))))
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
        points = sorted(
            (e['n'], e['figures']['latency_median_ms']) for e in scenarios
            if e['scenario'] == mix and
            e['max_placement_results'] == scheduling.NOVA_RESULTS_LIMIT)
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
                        help='100 hosts; computes of 1 and 100 nodes; '
                        'fewer samples')
    parser.add_argument('--db', choices=('sqlite', 'mariadb'),
                        default='sqlite',
                        help="placement's database: a fresh sqlite file per "
                        'run (default), or MariaDB started for the benchmark '
                        '(placement then runs 2 workers)')
    parser.add_argument('--output-dir', default='bench-results')
    parser.add_argument('--hosts', type=int, nargs='*',
                        help='compute node counts for scheduling, instead '
                        'of the defaults')
    parser.add_argument('--nodes', type=int, nargs='*',
                        help='nodes per compute for provider updates, '
                        'instead of the defaults')
    parser.add_argument('--iterations', type=int,
                        help='paired samples per request mix and behind '
                        'the stuck update')
    parser.add_argument('--calls', type=int,
                        help='disable/enable calls per variant and compute '
                        'size')
    parser.add_argument('--stuck-nodes', type=int, default=100,
                        help='nodes of the compute whose resource update is '
                        'held while it is disabled and its cache cleared '
                        '(default: 100; 0 leaves it out)')
    parser.add_argument('--memory-trees', type=int,
                        help='provider trees for the memory figure (default: '
                        'the largest compute; 0 leaves it out)')
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    for key in ('hosts', 'nodes'):
        if getattr(args, key) is not None:
            sizes[key] = getattr(args, key)
    trees = args.memory_trees
    if trees is None:
        trees = max(sizes['nodes'], default=0)
    # Nova's services log plenty; the table is the output.
    logging.disable(logging.WARNING)

    raw, ok, started = {}, True, time.monotonic()
    with _database_server(args.db) as database_server:
        for hosts in sizes['hosts']:
            _progress('scheduling, %d hosts' % hosts, started)
            ok &= base.run(
                scheduling.SchedulingBench, hosts=hosts,
                iterations=args.iterations or _iterations(hosts, args.quick),
                database_server=database_server, results=raw)
        for nodes in sizes['nodes']:
            _progress('provider updates, %d nodes per compute' % nodes,
                      started)
            ok &= base.run(
                provider_updates.ProviderUpdatesBench, nodes=nodes,
                calls=args.calls, database_server=database_server,
                results=raw)
        if args.stuck_nodes:
            _progress('behind a stuck update, %d nodes' % args.stuck_nodes,
                      started)
            ok &= base.run(
                stuck_update.StuckUpdateBench, nodes=args.stuck_nodes,
                samples=args.iterations or stuck_update.SAMPLES,
                database_server=database_server, results=raw)
    if trees:
        _progress('memory, %d trees' % trees, started)
        memory = _memory(trees)
        ok &= memory is not None
        if memory:
            raw[('memory', trees, None)] = memory

    scenarios = _scenarios(raw)
    os.makedirs(args.output_dir, exist_ok=True)
    output = {
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(),
        'machine': {'python': platform.python_version(),
                    'cpus': os.cpu_count(), 'platform': platform.platform()},
        'quick': args.quick,
        'db': args.db,
        'peak_rss_mib': resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss / 1024,
        'scenarios': scenarios,
    }
    path = os.path.abspath(os.path.join(args.output_dir, 'results.json'))
    with open(path, 'w') as f:
        json.dump(output, f, indent=2)
    _progress('done', started)
    print(_table(scenarios))
    plot = _plot(scenarios, os.path.join(args.output_dir, 'latency.png'))
    if plot:
        print('plot: %s' % os.path.abspath(plot))
    print('results: %s' % path)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
