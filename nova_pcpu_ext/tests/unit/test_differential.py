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

"""The differential harness's generator and oracle, without Nova.

Each rule of the oracle is shown to fire on the outcome it forbids, so
that a green differential run means the rule was checked.
"""

import dataclasses

import testtools

from nova_pcpu_ext.tests.differential import generator
from nova_pcpu_ext.tests.differential import oracle
from nova_pcpu_ext.tests.differential import states

ISOLATE = generator.Request('isolate', 1, 'flavor')
DEDICATED = generator.Request('dedicated', 1, 'image')
UNPINNED = generator.Request('unpinned', 1, 'flavor')
HOSTS = (generator.Host('host0', 'new', True, True, 'empty', False),
         generator.Host('host1', 'legacy', True, True, 'empty', False))


#: A pinned request's queries: PCPU, then the VCPU fallback.
PCPU_QUERY = 'resources=PCPU:1&required=!COMPUTE_STATUS_DISABLED'
FALLBACK = 'resources=VCPU:1&required=!COMPUTE_STATUS_DISABLED'
PINNED = [PCPU_QUERY, FALLBACK]
#: drop's for an isolate request.
DROPPED = [PCPU_QUERY]
#: legacy_only's where placement knows its trait.
FORBIDDING = [PCPU_QUERY, FALLBACK + '&root_required=' + oracle.FORBIDDEN]


def placed(host, style, hyperthreads, cpu, queries=PINNED):
    return {'outcome': 'placed', 'host': host, 'style': style,
            'hyperthreads': hyperthreads, 'cpu': cpu, 'queries': queries}


def refused(queries=PINNED, answers=(0, 0)):
    return {'outcome': 'refused', 'queries': queries,
            'answers': list(answers)}


ON_LEGACY = placed('host1', 'legacy', True, {'VCPU': 1})
ON_NEW_HT_VCPU = placed('host0', 'new', True, {'VCPU': 1})
ON_NEW_PCPU = placed('host0', 'new', False, {'PCPU': 1})


def scenario(*steps):
    return generator.Scenario(seed=7, hosts=HOSTS, steps=steps)


def boot(request, limit=None):
    return generator.Step('boot', request, limit=limit)


class GeneratorTest(testtools.TestCase):

    def test_a_seed_gives_the_same_scenario(self):
        self.assertEqual(generator.generate(5), generator.generate(5))
        self.assertNotEqual(generator.generate(5), generator.generate(6))

    def test_moves_refer_to_earlier_boots(self):
        for seed in range(200):
            steps = generator.generate(seed).steps
            self.assertEqual('boot', steps[0].action)
            for step in steps:
                if step.server is not None:
                    self.assertEqual('boot', steps[step.server].action)

    def test_dimensions_are_covered(self):
        scenarios = [generator.generate(seed) for seed in range(200)]
        hosts = {(h.kind, h.enabled, h.fill, h.zone)
                 for s in scenarios for h in s.hosts}
        requests = {(step.request.kind, step.request.source,
                     step.request.trait, step.request.zone)
                    for s in scenarios for step in s.steps if step.request}
        self.assertEqual({'legacy-ht', 'legacy-noht', 'new-ht', 'new-noht'},
                         {h[0] for h in hosts})
        self.assertEqual(set(generator.KINDS), {r[0] for r in requests})
        self.assertEqual({'flavor', 'image', 'both'},
                         {r[1] for r in requests})
        self.assertEqual({None, 'required', 'forbidden'},
                         {r[2] for r in requests})
        self.assertEqual(set(generator.EVERY_ACTION), {
            step.action for s in scenarios for step in s.steps})

    def test_an_operator_action_changes_no_other_step(self):
        without = generator.ACTIONS
        with_one = [seed for seed in range(200) if len(generator.generate(
            seed).steps) > len(generator.generate(seed, without).steps)]
        self.assertTrue(30 < len(with_one) < 70, len(with_one))
        for seed in with_one:
            steps = list(generator.generate(seed).steps)
            at, = [i for i, step in enumerate(steps)
                   if step.action in generator.OPERATOR_ACTIONS]
            self.assertLess(0, at)
            del steps[at]
            unshifted = [step if step.server is None or step.server < at
                         else dataclasses.replace(
                             step, server=step.server - 1)
                         for step in steps]
            self.assertEqual(generator.generate(seed, without).steps,
                             tuple(unshifted))

    def test_only_flavor_pinned_servers_are_resized_to_flavors(self):
        for seed in range(200):
            steps = generator.generate(seed).steps
            for step in steps:
                if step.action == 'resize':
                    self.assertEqual('flavor', step.request.source)
                    self.assertEqual('flavor',
                                     steps[step.server].request.source)

    def test_every_five_seeds_boot_what_the_rules_are_about(self):
        for first in (0, 5, 100):
            requests = [(step.request, step.limit) for step in (
                generator.generate(seed).steps[0]
                for seed in range(first, first + 5))]
            self.assertEqual({'image', 'both', 'flavor'},
                             {request.source for request, _ in requests})
            self.assertEqual({'isolate', 'dedicated', 'require', 'prefer'},
                             {request.kind for request, _ in requests})
            self.assertIn(('forbidden', None), {
                (request.trait, limit) for request, limit in requests})
            self.assertIn(generator.FOCUS_LIMIT,
                          {limit for _, limit in requests})

    def test_a_thread_policy_from_the_image_on_a_pinned_flavor(self):
        request = generator.Request('isolate', 1, 'both')
        self.assertEqual({'hw:cpu_policy': 'dedicated'},
                         request.extra_specs())
        self.assertEqual({'hw_cpu_thread_policy': 'isolate'},
                         request.image_properties())

    def test_image_requests_carry_no_pinning_extra_specs(self):
        request = generator.Request('isolate', 1, 'image')
        self.assertEqual({}, request.extra_specs())
        self.assertEqual({'hw_cpu_policy': 'dedicated',
                          'hw_cpu_thread_policy': 'isolate'},
                         request.image_properties())


class StatesGeneratorTest(testtools.TestCase):

    def test_a_seed_gives_the_same_cloud(self):
        self.assertEqual(states.generate(3), states.generate(3))

    def test_every_state_and_bad_ratio_is_generated(self):
        clouds = [states.generate(seed) for seed in range(50)]
        self.assertEqual(set(states.STATES), {
            state for cloud in clouds for state in cloud.states})
        self.assertEqual(set(states.BAD_RATIOS), {
            damage[1:] for cloud in clouds for damage in cloud.damage})
        self.assertEqual(states.STATES, states.EVERY_STATE.states)

    def test_servers_where_they_fit(self):
        # Five at most a host: an isolate server takes one of its six
        # dedicated cores, and the moves need room.
        for cloud in [states.generate(seed) for seed in range(200)] + [
                states.EVERY_STATE]:
            hosts = [cloud.host_of(state) for state in cloud.states]
            self.assertEqual(
                [state in states.IN_PLACE for state in cloud.states],
                [host is not None for host in hosts])
            for host in states.HOSTS:
                self.assertLessEqual(hosts.count(host), 5, cloud)


class OracleTest(testtools.TestCase):

    def rules(self, steps, stock, own, variant='drop'):
        verdict = oracle.judge(scenario(*steps), {'stock': stock,
                                                  variant: own})
        return [(f.rule, f.allowed) for f in verdict.findings]

    def test_same_outcomes_find_nothing(self):
        self.assertEqual([], self.rules([boot(DEDICATED)], [ON_LEGACY],
                                        [ON_LEGACY]))

    def test_seed_bug_fails_a_mode_and_is_counted_for_stripped_stock(self):
        self.assertIn(('seed-bug', False), self.rules(
            [boot(ISOLATE)], [refused()], [ON_NEW_HT_VCPU],
            'legacy_only'))
        verdict = oracle.judge(scenario(boot(ISOLATE)), {
            'stock': [refused()], 'stock-stripped': [ON_NEW_HT_VCPU]})
        self.assertEqual((1, []), (verdict.bug_shown, verdict.findings))

    def test_seed_bug_shows_only_with_isolate_and_a_new_style_ht_host(self):
        self.assertTrue(oracle.seed_bug_can_show(scenario(
            boot(UNPINNED), generator.Step('resize', ISOLATE, server=0))))
        self.assertFalse(oracle.seed_bug_can_show(scenario(
            boot(DEDICATED), generator.Step('migrate', None, server=0))))
        no_new_ht = (HOSTS[1], dataclasses.replace(HOSTS[0],
                                                   hyperthreads=False))
        self.assertFalse(oracle.seed_bug_can_show(generator.Scenario(
            seed=7, hosts=no_new_ht, steps=(boot(ISOLATE),))))

    def test_drop_refusing_isolate_stock_placed_on_legacy_is_allowed(self):
        self.assertEqual([('drop-isolate-off-legacy', True)], self.rules(
            [boot(ISOLATE)], [ON_LEGACY], [refused(DROPPED)]))

    def test_drop_placing_isolate_on_legacy_fails(self):
        self.assertIn(('drop-isolate-off-legacy', False), self.rules(
            [boot(ISOLATE)], [ON_LEGACY], [dict(ON_LEGACY, queries=DROPPED)]))

    def test_drop_never_uses_the_fallback_for_isolate_on_new_style(self):
        # Seed 580: stock moved an isolate server onto VCPU of a
        # new-style host without hyperthreads, the fallback's answer.
        on_new_vcpu = placed('host0', 'new', False, {'VCPU': 1})
        self.assertEqual(
            [('drop-isolate-no-fallback-to-new-style', True)],
            self.rules([boot(ISOLATE)], [on_new_vcpu], [refused(DROPPED)]))
        self.assertIn(('drop-isolate-no-fallback-to-new-style', False),
                      self.rules([boot(ISOLATE)], [on_new_vcpu],
                                 [dict(on_new_vcpu, queries=DROPPED)]))

    def test_refusing_what_stock_places_fails_without_a_rule(self):
        self.assertEqual([('kept', False)], self.rules(
            [boot(DEDICATED)], [ON_LEGACY], [refused()]))
        self.assertEqual([('kept', False)], self.rules(
            [boot(DEDICATED)], [ON_LEGACY], [refused()], 'legacy_only'))

    def test_legacy_only_never_uses_the_fallback_on_new_style(self):
        on_new_vcpu = placed('host0', 'new', False, {'VCPU': 1})
        self.assertEqual(
            [('legacy-only-no-fallback-to-new-style', True)],
            self.rules([boot(DEDICATED)], [on_new_vcpu], [refused()],
                       'legacy_only'))
        self.assertIn(('legacy-only-no-fallback-to-new-style', False),
                      self.rules([boot(DEDICATED)], [on_new_vcpu],
                                 [on_new_vcpu], 'legacy_only'))

    def test_placing_where_stock_refuses(self):
        self.assertEqual([('never-where-stock-refuses', False)], self.rules(
            [boot(DEDICATED)], [refused()], [ON_LEGACY], 'legacy_only'))
        self.assertEqual([('legacy-only-past-the-cut', True)], self.rules(
            [boot(DEDICATED, limit=1)], [refused(answers=(0, 1))],
            [ON_LEGACY], 'legacy_only'))
        # Stock's answers were not cut: the legacy host was not there.
        self.assertEqual([('never-where-stock-refuses', False)], self.rules(
            [boot(DEDICATED, limit=1)], [refused(answers=(0, 0))],
            [ON_LEGACY], 'legacy_only'))

    def test_another_host_needs_a_rule(self):
        self.assertEqual([('same-host', False)], self.rules(
            [boot(DEDICATED)], [ON_LEGACY], [ON_NEW_PCPU], 'legacy_only'))
        self.assertEqual([('drop-isolate-off-legacy', True)], self.rules(
            [boot(ISOLATE)], [ON_LEGACY],
            [dict(ON_NEW_PCPU, queries=DROPPED)]))

    def test_query_counts(self):
        self.assertEqual([('queries', False)], self.rules(
            [boot(ISOLATE)], [refused()], [refused()]))
        self.assertEqual([('queries', False), ('queries-as-stock', False)],
                         self.rules([boot(DEDICATED)], [ON_LEGACY],
                                    [dict(ON_LEGACY, queries=DROPPED)]))
        # A move that schedules twice: as many times as stock.
        steps = [boot(DEDICATED), generator.Step('live_migrate', server=0)]
        self.assertEqual([('queries', False)], self.rules(
            steps, [ON_LEGACY, ON_NEW_PCPU],
            [ON_LEGACY, dict(ON_NEW_PCPU, queries=PINNED * 2)]))

    def test_a_mixed_request_has_no_fallback_query(self):
        mixed = generator.Request('mixed', 2, 'flavor')
        both = 'resources=PCPU:1,VCPU:1&required=!COMPUTE_STATUS_DISABLED'
        for variant in oracle.MODES:
            self.assertEqual([], self.rules(
                [boot(mixed)], [refused([both])], [refused([both])],
                variant))
            self.assertIn(('queries', False), self.rules(
                [boot(mixed)], [refused([both])],
                [refused([both, FALLBACK])], variant))

    def test_queries_are_judged_after_a_difference(self):
        steps = [boot(ISOLATE), boot(DEDICATED)]
        self.assertEqual([('drop-isolate-off-legacy', True),
                          ('queries', False), ('queries-as-stock', False)],
                         sorted(self.rules(
                             steps, [ON_LEGACY, ON_LEGACY],
                             [refused(DROPPED),
                              dict(ON_LEGACY, queries=DROPPED)])))

    def test_the_queries_are_stock_s_for_the_same_request(self):
        changed = [PCPU_QUERY + '&required=!HW_CPU_HYPERTHREADING',
                   FALLBACK]
        self.assertEqual([('queries-as-stock', False)], self.rules(
            [boot(DEDICATED)], [ON_LEGACY], [dict(ON_LEGACY,
                                                  queries=changed)]))
        # The aggregate of a zone is another one in each run.
        zoned = [q + '&member_of=in:%s' for q in PINNED]
        self.assertEqual([], self.rules(
            [boot(DEDICATED)],
            [dict(ON_LEGACY, queries=[q % '0e3c1f6a-6a4b-4b8e-9d77-'
                                      '2d1f0c9b1a10' for q in zoned])],
            [dict(ON_LEGACY, queries=[q % '7d2f0a5e-1c3b-4f6e-8a9d-'
                                      '5b4c3e2f1a00' for q in zoned])]))
        # But for legacy_only's forbidden trait.
        self.assertEqual([], self.rules(
            [boot(DEDICATED)], [ON_LEGACY],
            [dict(ON_LEGACY, queries=FORBIDDING, trait_known=True)],
            'legacy_only'))

    def test_legacy_only_forbids_its_trait_where_placement_knows_it(self):
        rule = [('legacy-only-forbids-the-trait', False)]
        for request in (DEDICATED, ISOLATE):
            for queries, known, broken in (
                    (FORBIDDING, True, []), (PINNED, False, []),
                    (PINNED, True, rule), (FORBIDDING, False, rule),
                    (FORBIDDING[::-1], True, rule + [('queries', False)])):
                own = dict(ON_LEGACY, queries=queries, trait_known=known)
                found = [f for f in self.rules(
                    [boot(request)], [ON_LEGACY], [own], 'legacy_only')
                    if f != ('queries-as-stock', False)]
                self.assertEqual(sorted(broken), sorted(found),
                                 (request, queries, known))

    def test_a_refusal_excuses_stock_s_host_an_error_does_not(self):
        error = {'outcome': 'error', 'message': '500 Unexpected API Error',
                 'queries': DROPPED}
        self.assertEqual([('kept', False)], self.rules(
            [boot(ISOLATE)], [ON_LEGACY], [error]))

    def test_two_errors_are_one_only_when_the_same(self):
        def error(message):
            return {'outcome': 'error', 'queries': PINNED,
                    'message': message}
        run_own = ('Build of instance %s aborted' % uuid for uuid in (
            '0e3c1f6a-6a4b-4b8e-9d77-2d1f0c9b1a10',
            '7d2f0a5e-1c3b-4f6e-8a9d-5b4c3e2f1a00'))
        self.assertEqual([], self.rules(
            [boot(DEDICATED)], [error(next(run_own))],
            [error(next(run_own))]))
        self.assertEqual([('kept', False)], self.rules(
            [boot(DEDICATED)], [error('500 one')], [error('500 other')]))

    def test_steps_after_a_difference_are_not_compared(self):
        steps = [boot(ISOLATE), boot(UNPINNED)]
        verdict = oracle.judge(scenario(*steps), {
            'stock': [ON_LEGACY, dict(ON_LEGACY, queries=[FALLBACK])],
            'drop': [refused(DROPPED), dict(ON_NEW_PCPU, queries=[FALLBACK])]})
        self.assertEqual((1, 1), (verdict.compared['drop'],
                                  verdict.not_compared['drop']))
        self.assertEqual([('drop-isolate-off-legacy', True)],
                         [(f.rule, f.allowed) for f in verdict.findings])

    def test_moves_judge_the_servers_current_request(self):
        steps = [boot(UNPINNED),
                 generator.Step('resize', ISOLATE, server=0),
                 generator.Step('migrate', server=0)]
        outcomes = [ON_LEGACY, ON_NEW_PCPU, ON_LEGACY]
        self.assertEqual([UNPINNED, ISOLATE, ISOLATE],
                         list(oracle.requests_of(scenario(*steps),
                                                 outcomes)))
        self.assertIn(('drop-isolate-off-legacy', False), self.rules(
            steps, outcomes, outcomes))

    def test_an_operator_action_is_not_judged_and_keeps_in_step(self):
        steps = [boot(UNPINNED), generator.Step('delete_trait'),
                 boot(ISOLATE)]
        verdict = oracle.judge(scenario(*steps), {
            'stock': [dict(ON_LEGACY, queries=[FALLBACK]),
                      {'outcome': 'unknown', 'queries': []}, ON_LEGACY],
            'drop': [dict(ON_LEGACY, queries=[FALLBACK]),
                     {'outcome': 'in use', 'queries': []},
                     dict(ON_LEGACY, queries=DROPPED)]})
        self.assertEqual((3, 0), (verdict.compared['drop'],
                                  verdict.not_compared['drop']))
        self.assertEqual([('drop-isolate-off-legacy', False)],
                         [(f.rule, f.allowed) for f in verdict.findings])
