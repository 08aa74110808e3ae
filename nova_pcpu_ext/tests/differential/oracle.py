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

"""The oracle: each variant's outcomes judged against stock Nova's.

Every rule quotes the plugin page it comes from (:data:`RULES`). A
finding is either a *difference* that a rule allows (counted, by rule) or
a *failure*: the extension did what no page allows.

Two kinds of rules:

* rules on a run's own outcomes, checked at every step (where the run's
  state has diverged from stock's too);
* differential rules, checked only while the run is *in step* with stock:
  every earlier step had the same outcome on the same host. Hosts are
  started in the same order with the same names and node UUIDs, Nova's
  weighers are deterministic (``host_subset_size`` 1, no shuffle) and
  the runner hands them the hosts in name order, so from the same state,
  with the same candidates, both pick the same host: a different host
  needs a rule that takes stock's host (or adds one) away. After the
  first step that differs, the states differ and later steps are
  counted as not compared.
"""

import collections
import dataclasses

from nova_pcpu_ext.tests.differential import generator

ISOLATE_PAGE = 'admin/isolate-vcpu-fallback'
CHANGES_PAGE = 'admin/behaviour-changes'

#: rule -> (page, what the page says). Allowed differences and failures.
RULES = {
    'seed-bug': (
        ISOLATE_PAGE, 'What it fixes: an isolate instance never consumes '
        'VCPU of a hyperthreaded host configured with cpu_dedicated_set; '
        'the functional tests strip the late check and the filter alone '
        'keeps it off.'),
    'drop-isolate-off-legacy': (
        CHANGES_PAGE, 'drop: an isolate server no longer lands on, or '
        'moves to, any legacy host, with or without hyperthreads.'),
    'drop-isolate-no-fallback-to-new-style': (
        CHANGES_PAGE, 'drop: no isolate server is placed on a new-style '
        'host through the VCPU fallback query.'),
    'legacy-only-no-fallback-to-new-style': (
        CHANGES_PAGE, 'legacy_only: no pinned server is placed on a '
        'new-style host through the VCPU fallback query.'),
    'legacy-only-past-the-cut': (
        ISOLATE_PAGE, 'Why a trait: placement filters on the trait before '
        'max_placement_results cuts the fallback answer, so legacy_only '
        'places on a legacy host with room where stock finds no valid '
        'host.'),
    'kept': (
        CHANGES_PAGE, 'Every mode leaves unpinned requests alone, drop '
        'leaves pinned requests without the isolate policy alone, and '
        'legacy_only keeps every placement stock Nova makes correctly.'),
    'never-where-stock-refuses': (
        ISOLATE_PAGE, 'The filter only removes candidates (drop) or '
        'forbids a trait in the fallback query (legacy_only): no request '
        'lands where stock Nova refuses it.'),
    'same-host': (
        ISOLATE_PAGE, 'No mode touches the rest of the request: from the '
        'same state the same candidates give the same host and the same '
        'resources, unless a rule above takes stock\'s host away.'),
    'queries': (
        CHANGES_PAGE, 'drop: one placement query per isolate request '
        'instead of two; otherwise as many allocation candidate queries '
        'as stock Nova (legacy_only: two per pinned request).'),
}

MODES = ('drop', 'legacy_only')


@dataclasses.dataclass
class Finding:
    seed: int
    step: int
    variant: str
    rule: str
    allowed: bool
    stock: dict
    own: dict

    def lines(self):
        page, text = RULES[self.rule]
        return ['seed %d step %d %s: %s %s (%s: %s)' % (
            self.seed, self.step, self.variant,
            'difference allowed by' if self.allowed else 'FAILURE of',
            self.rule, page, text),
            '  stock: %s' % _short(self.stock),
            '  %s: %s' % (self.variant, _short(self.own))]


def _short(outcome):
    if outcome is None:
        return '-'
    return ', '.join('%s=%s' % item for item in sorted(outcome.items()))


def requests_of(scenario, outcomes):
    """The request each step schedules, as this run's servers stand.

    A move schedules the server's current request: its boot's, or its
    last resize's that this run placed.
    """
    current = {}
    for index, (step, outcome) in enumerate(zip(scenario.steps, outcomes)):
        if step.action == 'boot':
            current[index] = step.request
            yield step.request
        elif step.action == 'resize':
            yield step.request
            if outcome.get('outcome') == 'placed':
                current[step.server] = step.request
        else:
            yield current.get(step.server)


def _placed(outcome):
    return outcome.get('outcome') == 'placed'


def _fallback_on_new_style(request, outcome):
    """A pinned request on a new-style host without PCPU: the fallback's."""
    return (_placed(outcome) and request is not None and request.pinned and
            outcome['style'] == 'new' and not outcome['cpu'].get('PCPU'))


def seed_bug_can_show(scenario):
    """Whether any run of ``scenario`` could break the seed-bug rule.

    It takes an isolate request and a hyperthreaded new-style host.
    """
    return (any(step.request is not None and step.request.isolate
                for step in scenario.steps) and
            any(host.style == 'new' and host.hyperthreads
                for host in scenario.hosts))


def own_rules(variant, request, outcome):
    """Rules on one run's own outcome: the names of those it breaks."""
    if not _placed(outcome) or request is None:
        return []
    broken = []
    if (request.isolate and outcome['style'] == 'new' and
            outcome['hyperthreads'] and outcome['cpu'].get('VCPU')):
        broken.append('seed-bug')
    rule = _never_placed_so(variant, request, outcome)
    if rule:
        broken.append(rule)
    return broken


def _never_placed_so(mode, request, outcome):
    """The rule by which ``mode`` never places as ``outcome``, if any.

    Broken where the mode's own outcome is so; where stock's is, the rule
    takes stock's host away from the mode.
    """
    if mode == 'drop' and request.isolate and outcome['style'] == 'legacy':
        return 'drop-isolate-off-legacy'
    if (mode == 'drop' and request.isolate and
            _fallback_on_new_style(request, outcome)):
        return 'drop-isolate-no-fallback-to-new-style'
    if (mode == 'legacy_only' and
            _fallback_on_new_style(request, outcome)):
        return 'legacy-only-no-fallback-to-new-style'
    return None


def _past_the_cut(mode, step, request, own):
    return (mode == 'legacy_only' and step.limit is not None and
            request.pinned and own['style'] == 'legacy')


def differential_rule(mode, step, request, stock, own):
    """(rule, allowed) for a step where the outcomes differ, else None."""
    if request is None:
        return ('kept', False)
    if _placed(stock) and not _placed(own):
        rule = _never_placed_so(mode, request, stock)
        return (rule, True) if rule else ('kept', False)
    if _placed(own) and not _placed(stock):
        if _past_the_cut(mode, step, request, own):
            return ('legacy-only-past-the-cut', True)
        return ('never-where-stock-refuses', False)
    if not _placed(own):
        # Refused against an error, or two errors: told apart by message.
        same = stock.get('outcome') == own.get('outcome')
        return None if same else ('kept', False)
    if (stock['host'], stock['cpu']) == (own['host'], own['cpu']):
        return None
    rule = _never_placed_so(mode, request, stock)
    if rule:
        return (rule, True)
    if _past_the_cut(mode, step, request, own):
        return ('legacy-only-past-the-cut', True)
    return ('same-host', False)


def expected_queries(mode, request, stock_queries):
    if mode == 'drop' and request is not None and request.isolate:
        return stock_queries // 2
    return stock_queries


def _in_step(stock, own):
    keys = ('outcome', 'host', 'cpu')
    return all(stock.get(key) == own.get(key) for key in keys)


@dataclasses.dataclass
class Verdict:
    """What the oracle found in one scenario."""
    findings: list = dataclasses.field(default_factory=list)
    compared: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    not_compared: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    #: Steps where stock without the late check shows bug 1889633.
    bug_shown: int = 0

    @property
    def failures(self):
        return [f for f in self.findings if not f.allowed]

    @property
    def differences(self):
        return [f for f in self.findings if f.allowed]


def judge(scenario, runs):
    """Judge ``runs`` (variant -> outcomes, one per step) of a scenario."""
    verdict = Verdict()
    stock = runs['stock']
    for variant, outcomes in runs.items():
        requests = list(requests_of(scenario, outcomes))
        for index, (request, own) in enumerate(zip(requests, outcomes)):
            for rule in own_rules(variant, request, own):
                if variant == 'stock-stripped':
                    verdict.bug_shown += rule == 'seed-bug'
                    continue
                verdict.findings.append(Finding(
                    scenario.seed, index, variant, rule, False,
                    stock[index] if index < len(stock) else None, own))
        if variant in MODES:
            _compare(scenario, variant, stock, outcomes, verdict)
    return verdict


def _compare(scenario, mode, stock, outcomes, verdict):
    requests = list(requests_of(scenario, stock))
    for index, (step, request) in enumerate(zip(scenario.steps, requests)):
        if index >= min(len(stock), len(outcomes)):
            break
        own, theirs = outcomes[index], stock[index]
        verdict.compared[mode] += 1
        if step.action in generator.OPERATOR_ACTIONS:
            # Schedules nothing; its answer differs where the extension's
            # computes carry the trait (placement refuses the deletion).
            continue
        if own['queries'] != expected_queries(mode, request,
                                              theirs['queries']):
            verdict.findings.append(Finding(
                scenario.seed, index, mode, 'queries', False, theirs, own))
        if _in_step(theirs, own):
            continue
        found = differential_rule(mode, step, request, theirs, own)
        if found:
            rule, allowed = found
            verdict.findings.append(Finding(
                scenario.seed, index, mode, rule, allowed, theirs, own))
        verdict.not_compared[mode] += len(scenario.steps) - index - 1
        break


def describe_runs(scenario, runs):
    """Each step with every variant's outcome, for a failure report."""
    lines = generator.describe(scenario)
    for index in range(len(scenario.steps)):
        for variant, outcomes in runs.items():
            if index < len(outcomes):
                lines.append('  step %d %s: %s' % (
                    index, variant, _short(outcomes[index])))
    return lines
