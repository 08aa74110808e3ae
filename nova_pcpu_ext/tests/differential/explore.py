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

"""``tox -e explore``: generated scenarios, stock Nova against the extension.

``--seeds N`` runs seeds 0 to N-1 (``--first`` moves the start),
``--seed N`` one seed with every step's outcomes. Prints how many
sequences and steps ran, the differences found by rule, and each failure
with its seed, step, both outcomes and the command that replays it.

``--states N`` runs N generated clouds of servers in every state
(:mod:`.states`, from ``--first``) and judges the operator tools on each,
``--states-seed N`` one of them; a failure prints the cloud, the property
broken with both outcomes, and the command that replays it.

Exits 1 on a failure or a harness error, or when stopped (Ctrl-C,
SIGTERM), after the report of the seeds it ran.

Every run hashes strings with the same seed (:data:`HASH_SEED`): where
``max_placement_results`` cuts placement's answer, which candidates are
kept follows the order of sets of strings, so a seed run in another
process could place elsewhere and a finding not replay.
"""

from nova_pcpu_ext.tests.differential import runner  # isort:skip

import argparse
import collections
import logging
import os
import signal
import sys
import time

from nova_pcpu_ext.tests.differential import generator
from nova_pcpu_ext.tests.differential import oracle
from nova_pcpu_ext.tests.differential import states

REPLAY = 'tox -e explore -- --seed %d'
REPLAY_STATES = 'tox -e explore -- --states-seed %d'
#: PYTHONHASHSEED of every run.
HASH_SEED = '0'


def replay(seed, variants=runner.VARIANTS, actions=generator.EVERY_ACTION):
    """The command that replays ``seed`` as it ran."""
    command = REPLAY % seed
    if tuple(variants) != runner.VARIANTS:
        command += ' --variants ' + ','.join(variants)
    if tuple(actions) != generator.EVERY_ACTION:
        command += ' --actions ' + ','.join(actions)
    return command


def run_seed(seed, variants=runner.VARIANTS, actions=generator.EVERY_ACTION):
    """(scenario, runs, verdict, problems) of one seed.

    ``stock-stripped`` runs only where the seed bug can show: elsewhere
    it would only repeat stock's run.
    """
    scenario = generator.generate(seed, actions)
    if not oracle.seed_bug_can_show(scenario):
        variants = [v for v in variants if v != 'stock-stripped']
    runs, problems = {}, {}
    for variant in variants:
        runs[variant], problem = runner.run(scenario, variant)
        if problem:
            problems[variant] = problem
    return scenario, runs, oracle.judge(scenario, runs), problems


class Totals(object):
    """What a run of many seeds found."""

    def __init__(self):
        self.sequences = self.steps = self.bug_shown = self.stripped = 0
        self.compared = collections.Counter()
        self.not_compared = collections.Counter()
        self.differences = collections.Counter()
        self.failures = []
        self.problems = []

    def add(self, scenario, runs, verdict, problems):
        self.sequences += 1
        self.steps += sum(len(outcomes) for outcomes in runs.values())
        self.bug_shown += verdict.bug_shown
        self.stripped += 'stock-stripped' in runs
        self.compared.update(verdict.compared)
        self.not_compared.update(verdict.not_compared)
        self.differences.update((f.variant, f.rule)
                                for f in verdict.differences)
        self.failures.extend(verdict.failures)
        self.problems.extend((scenario.seed, variant, problem)
                             for variant, problem in problems.items())

    def report(self, elapsed):
        lines = [
            'sequences: %d (steps run, every variant: %d)%s' % (
                self.sequences, self.steps,
                _each(elapsed, self.sequences, 'sequence')),
            'steps compared with stock while in step: %s' % _counts(
                self.compared),
            'steps not compared (after the first difference): %s' % _counts(
                self.not_compared),
            'isolate servers on VCPU of a hyperthreaded new-style host, '
            'stock Nova without its late check: %d (in the %d sequences '
            'where it can show)' % (self.bug_shown, self.stripped),
            'differences by rule: %s' % (_counts(self.differences) or
                                         'none'),
            'failures: %d%s' % (len(self.failures), (' (%s)' % _counts(
                collections.Counter((f.variant, f.rule)
                                    for f in self.failures))
                if self.failures else '')),
            'harness errors: %d%s' % (len(self.problems), ''.join(
                ' seed %d %s;' % (seed, variant)
                for seed, variant, _ in self.problems)),
        ]
        return lines


def _each(elapsed, count, what):
    """``, 40.0 s per cloud``, or nothing before the first one."""
    return ', %.1f s per %s' % (elapsed / count, what) if count else ''


def _counts(counter):
    def name(key):
        return ':'.join(key) if isinstance(key, tuple) else key
    return ', '.join('%s: %d' % (name(key), count)
                     for key, count in sorted(counter.items()))


def report_seed(scenario, runs, verdict, problems, verbose, out,
                command=None):
    """Print what ``verdict`` found; ``command`` replays the seed."""
    command = command or replay(scenario.seed)
    if verbose:
        print('\n'.join(oracle.describe_runs(scenario, runs)), file=out)
        for finding in verdict.differences:
            print('\n'.join(finding.lines()), file=out)
    for finding in verdict.failures:
        print('\n'.join(finding.lines()), file=out)
        print('  replay: ' + command, file=out)
    for variant, problem in problems.items():
        print('seed %d %s: harness error (replay: %s)\n%s' % (
            scenario.seed, variant, command, problem), file=out)


def run_until_stopped(seeds, run_one, out):
    """``run_one(seed)`` for each seed; whether it was stopped.

    A long run stopped (Ctrl-C, SIGTERM) still reports the seeds it ran.
    """
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        for seed in seeds:
            run_one(seed)
    except KeyboardInterrupt:
        print('stopped during seed %d' % seed, file=out)
        return True
    return False


def exit_stopped():
    # NOTE: the services of the seed stopped still run their threads,
    # which would keep the process from exiting.
    os._exit(1)


def explore_states(seeds, out):
    """Judge the operator tools on the clouds of ``seeds``; failures."""
    started = time.monotonic()
    ran = []
    failed = errors = 0

    def run_one(seed):
        nonlocal failed, errors
        scenario = states.generate(seed)
        broken, problems = runner.run_states(scenario)
        failed += bool(broken)
        errors += bool(problems)
        for kind, traces in (('FAILURE', broken),
                             ('harness error', problems)):
            for trace in traces:
                print('\n'.join(states.describe(scenario)), file=out)
                print('%s (replay: %s)\n%s' % (
                    kind, REPLAY_STATES % seed, trace), file=out)
        ran.append(seed)
        print('states seed %d: %d states, %s, %.0f s elapsed' % (
            seed, len(scenario.states), 'failed' if broken or problems
            else 'passed', time.monotonic() - started), file=out, flush=True)

    stopped = run_until_stopped(seeds, run_one, out)
    print('clouds of states: %d%s\nfailures: %d\nharness errors: %d' % (
        len(ran), _each(time.monotonic() - started, len(ran), 'cloud'),
        failed, errors), file=out, flush=True)
    if stopped:
        exit_stopped()
    return failed + errors


def main(argv=None, out=sys.stdout):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('--seeds', type=int, help='how many seeds to run')
    which.add_argument('--seed', type=int, help='one seed, step by step')
    which.add_argument('--states', type=int,
                       help='how many clouds of states to run')
    which.add_argument('--states-seed', type=int,
                       help='one cloud of states')
    parser.add_argument('--first', type=int, default=0,
                        help='the first seed of --seeds or --states '
                             '(default 0)')
    parser.add_argument('--variants', default=','.join(runner.VARIANTS),
                        help='comma-separated, stock first')
    parser.add_argument('--actions', default=','.join(generator.EVERY_ACTION),
                        help='the steps besides boots')
    args = parser.parse_args(argv)
    # NOTE: Nova's thread pools log their shutdown after a run's log
    # capture has ended, between the lines of this report.
    logging.getLogger('nova.thread_pool_factory').setLevel(logging.WARNING)
    if args.states is not None or args.states_seed is not None:
        seeds = ([args.states_seed] if args.states_seed is not None
                 else range(args.first, args.first + args.states))
        return 1 if explore_states(seeds, out) else 0
    variants = tuple(args.variants.split(','))
    actions = tuple(args.actions.split(','))
    seeds = ([args.seed] if args.seed is not None
             else range(args.first, args.first + args.seeds))
    totals = Totals()
    started = time.monotonic()

    def run_one(seed):
        found = run_seed(seed, variants, actions)
        totals.add(*found)
        report_seed(*found, verbose=args.seed is not None, out=out,
                    command=replay(seed, variants, actions))
        print('seed %d: %d failures, %d differences, %.0f s elapsed' % (
            seed, len(found[2].failures), len(found[2].differences),
            time.monotonic() - started), file=out, flush=True)

    stopped = run_until_stopped(seeds, run_one, out)
    print('\n'.join(totals.report(time.monotonic() - started)), file=out,
          flush=True)
    if stopped:
        exit_stopped()
    return 1 if totals.failures or totals.problems else 0


def with_hash_seed(argv):
    """Run again under :data:`HASH_SEED` unless this process is."""
    if os.environ.get('PYTHONHASHSEED') != HASH_SEED:
        os.execve(sys.executable, [sys.executable, '-m', __spec__.name] +
                  argv, dict(os.environ, PYTHONHASHSEED=HASH_SEED))


if __name__ == '__main__':
    with_hash_seed(sys.argv[1:])
    sys.exit(main())
