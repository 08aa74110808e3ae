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

Prints a table (each ratio with its 95 % interval and sample count) and
the scheduling requirement, writes ``results.json`` and ``latency.png`` to
the output directory and ends with ``results: <path to the JSON file>``.
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


#: Where ``drop``'s isolate latency is required at or below this ratio
#: of stock's (see :func:`scheduling.requirement_applies`).
DROP_ISOLATE_MAX_RATIO = 0.3


def _scenarios(raw):
    """JSON-ready results, in a stable order.

    Scheduling keys add the legacy share and the fill state to
    ``(scenario, n, limit)``.
    """
    order = list(scheduling.MIXES) + ['provider_updates', 'stuck_update',
                                      'memory']
    states = [None] + [state for state, _ in scheduling.FILL_STATES]
    entries = []
    for key, figures in sorted(raw.items(), key=lambda item: (
            order.index(item[0][0]), item[0][1], item[0][2] or 0,
            item[0][3:4] or (0,), states.index((item[0][4:] or (None,))[0]))):
        entry = {'scenario': key[0], 'n': key[1],
                 'max_placement_results': key[2]}
        if len(key) > 3:
            entry['legacy_pct'], entry['full'] = key[3:]
        entry['figures'] = figures
        entries.append(entry)
    return entries


def _table(scenarios):
    lines = _scheduling_table(
        [e for e in scenarios if 'legacy_pct' in e])
    others = [e for e in scenarios if 'legacy_pct' not in e]
    if not others:
        return '\n'.join(lines)
    row = '%-16s %5s %6s %-23s %9s %9s %6s %-13s %5s %9s'
    lines += ['', row % ('scenario', 'n', 'limit', 'figure', 'stock',
                         'extension', 'ratio', '95% interval', 'samp.',
                         'glob.lock')]
    for entry in others:
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


def _scheduling_table(entries):
    """Stock beside each mode; ratios to stock with their intervals."""
    if not entries:
        return []
    row = ('%-8s %5s %5s %4s %-9s %-29s ' + '%9s ' * len(scheduling.VARIANTS)
           + '%-15s ' * len(scheduling.MODES) + '%5s')
    lines = [row % (('scenario', 'n', 'limit', 'leg%', 'full', 'figure') +
                    scheduling.VARIANTS +
                    tuple('%s/stock' % mode for mode in scheduling.MODES) +
                    ('samp.',))]
    for entry in entries:
        for key, figure in entry['figures'].items():
            ratios = []
            for mode in scheduling.MODES:
                ratio = figure.get('ratio', {}).get(mode)
                interval = figure.get('ratio_ci', {}).get(mode)
                ratios.append(_fmt(ratio) + (
                    ' %.2f-%.2f' % tuple(interval) if interval else ''))
            lines.append(row % ((
                entry['scenario'], entry['n'],
                entry['max_placement_results'] or '-', entry['legacy_pct'],
                entry['full'] or '-', key) + tuple(
                    _fmt(figure.get(variant))
                    for variant in scheduling.VARIANTS) + tuple(ratios) +
                (figure.get('samples', '-'),)))
    return lines


def _requirements(scenarios):
    """``drop``'s isolate latency against stock's, and ``legacy_only``'s.

    The requirement only where it is derived; ``legacy_only``'s figure is
    informational.
    """
    results = []
    for entry in scenarios:
        if (entry['scenario'] != 'isolate' or 'legacy_pct' not in entry or
                entry['full'] or entry['max_placement_results'] !=
                scheduling.NOVA_RESULTS_LIMIT):
            continue
        latency = entry['figures']['latency_median_ms']
        ratio = latency.get('ratio', {})
        interval = latency.get('ratio_ci', {})
        applies = scheduling.requirement_applies(entry['n'],
                                                 entry['legacy_pct'])
        results.append({
            'requirement': 'drop isolate latency median <= %sx stock' % (
                DROP_ISOLATE_MAX_RATIO),
            'n': entry['n'], 'legacy_pct': entry['legacy_pct'],
            'applies': applies,
            'ratio': ratio.get('drop'), 'ratio_ci': interval.get('drop'),
            'met': (ratio.get('drop') is not None and
                    ratio['drop'] <= DROP_ISOLATE_MAX_RATIO)
            if applies else None,
            'legacy_only_ratio': ratio.get('legacy_only'),
            'legacy_only_ratio_ci': interval.get('legacy_only')})
    return results


def _requirement_lines(requirements):
    lines = []
    for r in requirements:
        verdict = ('met' if r['met'] else 'NOT met') if r['applies'] else (
            'informational, not derived for this cloud')
        lines.append(
            '%s, %d hosts, %d%% legacy: %s (drop %s%s; legacy_only %s%s, '
            'informational)' % (
                r['requirement'], r['n'], r['legacy_pct'], verdict,
                _fmt(r['ratio']),
                ' %.2f-%.2f' % tuple(r['ratio_ci']) if r['ratio_ci'] else '',
                _fmt(r['legacy_only_ratio']),
                ' %.2f-%.2f' % tuple(r['legacy_only_ratio_ci'])
                if r['legacy_only_ratio_ci'] else ''))
    return lines


def _fmt(value):
    return '-' if value is None else '%.3g' % value


def _plot(scenarios, path):
    try:
        import matplotlib
        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError:
        return None
    entries = [e for e in scenarios if 'legacy_pct' in e and
               not e['full'] and e['max_placement_results'] ==
               scheduling.NOVA_RESULTS_LIMIT]
    if not entries:
        return None
    figure, axes = pyplot.subplots(1, len(scheduling.MIXES), sharey=True,
                                   figsize=(12, 4.5))
    for axis, mix in zip(axes, scheduling.MIXES):
        for n in sorted({e['n'] for e in entries}):
            points = sorted(
                (e['legacy_pct'], e['figures']['latency_median_ms'])
                for e in entries if e['scenario'] == mix and e['n'] == n)
            for variant in scheduling.VARIANTS:
                axis.plot([pct for pct, _ in points],
                          [f[variant] for _, f in points],
                          '--' if variant == 'stock' else '-', marker='o',
                          label='%s, %d hosts' % (variant, n))
        axis.set_title(mix)
        axis.set_xlabel('legacy hosts (%)')
        axis.grid(True, alpha=0.3)
    axes[0].set_ylabel('select_destinations median latency (ms)')
    axes[0].legend(fontsize='small')
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
    parser.add_argument('--legacy', type=int, nargs='+',
                        default=list(scheduling.LEGACY_SHARES),
                        metavar='PERCENT',
                        help='legacy hosts in the scheduling clouds, per '
                        'cent of the hosts, one cloud each (default: '
                        '%(default)s); isolate runs again with hosts full '
                        'in the cloud with the most')
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
            for legacy_pct in args.legacy:
                _progress('scheduling, %d hosts, %d%% legacy'
                          % (hosts, legacy_pct), started)
                ok &= base.run(
                    scheduling.SchedulingBench, hosts=hosts,
                    legacy_pct=legacy_pct,
                    fill=legacy_pct == max(args.legacy) and legacy_pct > 0,
                    iterations=(args.iterations or
                                _iterations(hosts, args.quick)),
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
        'requirements': _requirements(scenarios),
    }
    path = os.path.abspath(os.path.join(args.output_dir, 'results.json'))
    with open(path, 'w') as f:
        json.dump(output, f, indent=2)
    _progress('done', started)
    print(_table(scenarios))
    for line in _requirement_lines(output['requirements']):
        print(line)
    plot = _plot(scenarios, os.path.join(args.output_dir, 'latency.png'))
    if plot:
        print('plot: %s' % os.path.abspath(plot))
    print('results: %s' % path)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
