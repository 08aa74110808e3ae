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

"""Differential scheduling in CI: a few fixed seeds, stock Nova against
the extension in each mode (see ``doc/source/contributor/differential.rst``).

Longer runs: ``tox -e explore -- --seeds N``. Each seed here takes three
fresh in-process clouds; the seeds are fixed so that CI's time is known.
Runs where ``NOVA_PCPU_EXT_DIFFERENTIAL`` is set (the ``py313`` and
``functional`` environments), to keep CI within its budget.
"""

from nova_pcpu_ext.tests.differential import runner  # isort:skip

import io
import os
import signal
import types

import fixtures
from nova.scheduler import host_manager
import testscenarios
import testtools

from nova_pcpu_ext.tests.differential import explore
from nova_pcpu_ext.tests.differential import generator
from nova_pcpu_ext.tests.differential import oracle

#: The seeds CI runs: two hosts and four steps each, a legacy and a
#: hyperthreaded new-style host, moves; isolate from the image and from a
#: dedicated flavor with the image's thread policy (31), require and
#: dedicated forbidding hyperthreads, pinned requests of legacy_only with
#: the trait known (18); legacy hosts only, and the trait deleted between
#: pinned requests (144).
CI_SEEDS = (18, 31, 144)


def _skip_unless_enabled():
    if not os.environ.get('NOVA_PCPU_EXT_DIFFERENTIAL'):
        raise testtools.TestCase.skipException(
            'NOVA_PCPU_EXT_DIFFERENTIAL is not set')


class DifferentialSeedTest(testscenarios.WithScenarios, testtools.TestCase):
    """Each CI seed: no failure of the oracle, no harness error."""

    scenarios = [('seed_%d' % seed, {'seed': seed}) for seed in CI_SEEDS]

    def test_seed(self):
        _skip_unless_enabled()
        scenario, runs, verdict, problems = explore.run_seed(
            self.seed, ('stock', 'drop', 'legacy_only'))
        report = oracle.describe_runs(scenario, runs)
        for finding in verdict.failures:
            report += finding.lines()
        report += ['harness error in %s:\n%s' % item
                   for item in problems.items()]
        report.append('replay: ' + explore.REPLAY % self.seed)
        self.assertEqual(([], {}), (verdict.failures, problems),
                         '\n'.join(report))
        # Every step ran in every variant, and was compared while in step.
        for mode in oracle.MODES:
            self.assertEqual(len(scenario.steps),
                             verdict.compared[mode] +
                             verdict.not_compared[mode])


class SeedBugTest(testtools.TestCase):
    """The oracle's seed-bug rule fails stock Nova without its late check.

    One new-style hyperthreaded host and an isolate boot: stock Nova
    without the check places it on VCPU (bug 1889633), with the check and
    in both modes it is refused, and the query counts differ as the pages
    say (drop: one query instead of two).
    """

    def test_isolate_on_new_style_hyperthreaded_host(self):
        _skip_unless_enabled()
        scenario = generator.Scenario(
            seed=-1,
            hosts=(generator.Host('host0', 'new', True, True, 'empty',
                                  False),),
            steps=(generator.Step('boot', generator.Request(
                'isolate', 1, 'flavor')),))
        runs = {variant: runner.run(scenario, variant)[0]
                for variant in runner.VARIANTS}

        verdict = oracle.judge(scenario, runs)

        self.assertEqual(1, verdict.bug_shown, runs)
        self.assertEqual({'VCPU': 1}, runs['stock-stripped'][0]['cpu'])
        self.assertEqual([], verdict.findings)
        self.assertEqual(
            {'stock': ('refused', 2), 'stock-stripped': ('placed', 2),
             'drop': ('refused', 1), 'legacy_only': ('refused', 2)},
            {variant: (outcomes[0]['outcome'], len(outcomes[0]['queries']))
             for variant, outcomes in runs.items()})


class HostsInNameOrderTest(testtools.TestCase):
    """The harness gives Nova's weighers the hosts in the order of names.

    Equal weights keep that order, so two runs from the same state pick
    the same host whatever the other candidates and string hashing.
    """

    def test_states_sorted_by_host_and_node(self):
        names = [('host3', 'host3'), ('host1', 'b'), ('host1', 'a')]
        states = [types.SimpleNamespace(host=host, nodename=node)
                  for host, node in names]
        self.useFixture(fixtures.MockPatch(
            'nova.scheduler.host_manager.HostManager._get_host_states',
            return_value=iter(states)))
        self.useFixture(runner.HostsInNameOrder())

        ordered = host_manager.HostManager._get_host_states(None, {}, {})

        self.assertEqual(sorted(names), [(state.host, state.nodename)
                                         for state in ordered])


class ReplayTest(testtools.TestCase):
    """A finding's replay command gives the seed as it ran."""

    def test_the_command_names_what_differs_from_the_default(self):
        self.assertEqual('tox -e explore -- --seed 9', explore.replay(9))
        self.assertEqual(
            'tox -e explore -- --seed 9 --variants stock,drop --actions '
            'boot,migrate',
            explore.replay(9, ('stock', 'drop'), ('boot', 'migrate')))

    def test_every_run_hashes_strings_with_the_same_seed(self):
        execve = self.useFixture(fixtures.MockPatch('os.execve')).mock
        for hash_seed, runs_again in (('1', True), (None, True),
                                      (explore.HASH_SEED, False)):
            execve.reset_mock()
            self.useFixture(fixtures.EnvironmentVariable('PYTHONHASHSEED',
                                                         hash_seed))
            explore.with_hash_seed(['--seed', '9'])
            self.assertEqual(runs_again, execve.called, hash_seed)
        execve.reset_mock()
        self.useFixture(fixtures.EnvironmentVariable('PYTHONHASHSEED', '1'))
        explore.with_hash_seed(['--seed', '9'])
        argv, env = execve.call_args.args[1:]
        self.assertEqual(['-m', 'nova_pcpu_ext.tests.differential.explore',
                          '--seed', '9'], argv[1:])
        self.assertEqual(explore.HASH_SEED, env['PYTHONHASHSEED'])


class StoppedRunTest(testtools.TestCase):
    """A long run stopped with SIGTERM reports the seeds it finished."""

    def test_sigterm_between_seeds(self):
        self.addCleanup(signal.signal, signal.SIGTERM,
                        signal.getsignal(signal.SIGTERM))
        ran = []

        def run_one(seed):
            if seed == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            ran.append(seed)

        out = io.StringIO()
        self.assertTrue(explore.run_until_stopped(range(5), run_one, out))
        self.assertEqual([0, 1], ran)
        self.assertEqual('stopped during seed 2\n', out.getvalue())
        self.assertEqual(['sequences: 0 (steps run, every variant: 0)'],
                         explore.Totals().report(12.0)[:1])
