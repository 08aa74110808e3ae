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

Three kinds of rules:

* rules on a run's own outcomes and placement queries, checked at every
  step (where the run's state has diverged from stock's too);
* the queries of a request against stock's for the same request, at
  every step where both runs scheduled the same request;
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
import re
import urllib.parse

from nova_pcpu_ext import pcpu_trait
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
    'queries-as-stock': (
        ISOLATE_PAGE, 'No mode touches the rest of the request: its '
        'placement queries are stock Nova\'s for the same request, but '
        'for the fallback query drop does not make and the trait '
        'legacy_only forbids in it.'),
    'legacy-only-forbids-the-trait': (
        ISOLATE_PAGE, 'legacy_only: the fallback query of every pinned '
        'request (isolate or not) forbids on the host the '
        'CUSTOM_PCPU_EXT_REPORTS_PCPU trait; where placement does not '
        'know the trait, the fallback query is stock Nova\'s.'),
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


# -- placement's queries ----------------------------------------------------

#: The forbidden trait of legacy_only's fallback query.
FORBIDDEN = '!' + pcpu_trait.TRAIT
_UUID = re.compile(
    r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')


def _asks_pcpu(query):
    return any('PCPU:' in value for key, value in
               urllib.parse.parse_qsl(query) if key.startswith('resources'))


def _forbids_the_trait(query):
    return any(FORBIDDEN in value.split(',') for key, value in
               urllib.parse.parse_qsl(query) if key == 'root_required')


def _without_the_trait(query):
    """The query's parameters, sorted, less legacy_only's trait.

    And without the UUIDs of aggregates, which each run creates anew.
    """
    params = []
    for key, value in urllib.parse.parse_qsl(query):
        if key == 'root_required':
            value = ','.join(t for t in value.split(',') if t != FORBIDDEN)
        elif key.startswith('member_of'):
            value = _UUID.sub('AGGREGATE', value)
        if value:
            params.append((key, value))
    return sorted(params)


def per_call(variant, request):
    """Placement queries of one scheduling of ``request`` in ``variant``.

    The first query, then the VCPU fallback query, which Nova makes for
    ``hw:cpu_policy=dedicated`` alone (not for mixed) and drop does not
    make for isolate.
    """
    if (request.kind not in generator.DEDICATED_KINDS or
            (variant == 'drop' and request.isolate)):
        return 1
    return 2


def query_rules(variant, request, outcome):
    """Rules on one run's own queries: the names of those it breaks.

    Each scheduling (a move may schedule more than once) makes
    :func:`per_call` queries, the first asking PCPU where the request is
    pinned, the fallback not; legacy_only's fallback forbids the trait
    where placement knows it, and no other query names it.
    """
    if request is None or variant not in MODES:
        return []
    queries = outcome.get('queries', [])
    calls = per_call(variant, request)
    shape = [request.pinned, False][:calls]
    broken = []
    if [_asks_pcpu(q) for q in queries] != shape * (len(queries) // calls):
        broken.append('queries')
    if variant == 'legacy_only':
        forbids = [_forbids_the_trait(q) for q in queries]
        expected = [False, bool(outcome.get('trait_known'))][:calls]
        if (forbids != expected * (len(queries) // calls) or any(
                pcpu_trait.TRAIT in q for q, f in zip(queries, forbids)
                if not f)):
            broken.append('legacy-only-forbids-the-trait')
    return broken


def stock_query_rules(variant, request, stock_request, stock, own):
    """Rules on a mode's queries against stock's for the same request.

    Judged where both scheduled it: its first scheduling asks what
    stock's did, but for what the mode changes.
    """
    if (variant not in MODES or request is None or
            request != stock_request or not own.get('queries') or
            not stock.get('queries')):
        return []
    theirs = stock['queries'][:per_call('stock', request)]
    if variant == 'drop' and request.isolate:
        theirs = theirs[:1]
    mine = own['queries'][:per_call(variant, request)]
    if [_without_the_trait(q) for q in mine] == [
            _without_the_trait(q) for q in theirs]:
        return []
    return ['queries-as-stock']


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


def _past_the_cut(mode, step, request, stock, own):
    """A legacy host legacy_only found where stock's answer was cut."""
    return (mode == 'legacy_only' and step.limit is not None and
            request.pinned and own['style'] == 'legacy' and
            step.limit in stock.get('answers', ()))


def differential_rule(mode, step, request, stock, own):
    """(rule, allowed) for a step where the outcomes differ, else None."""
    if request is None:
        return ('kept', False)
    if _placed(stock) and not _placed(own):
        # A rule takes stock's host away by a refusal, never an error.
        rule = _never_placed_so(mode, request, stock)
        refused = own.get('outcome') == 'refused'
        return (rule, True) if rule and refused else ('kept', False)
    if _placed(own) and not _placed(stock):
        if _past_the_cut(mode, step, request, stock, own):
            return ('legacy-only-past-the-cut', True)
        return ('never-where-stock-refuses', False)
    if not _placed(own):
        return None if _in_step(stock, own) else ('kept', False)
    if (stock['host'], stock['cpu']) == (own['host'], own['cpu']):
        return None
    rule = _never_placed_so(mode, request, stock)
    if rule:
        return (rule, True)
    if _past_the_cut(mode, step, request, stock, own):
        return ('legacy-only-past-the-cut', True)
    return ('same-host', False)


#: What differs between runs in an error's message: UUIDs and request IDs.
_RUN_OWN = re.compile(r'req-[0-9a-f-]+|' + _UUID.pattern)


def _in_step(stock, own):
    """The same outcome on the same host; two errors the same error."""
    keys = ('outcome', 'host', 'cpu')
    if any(stock.get(key) != own.get(key) for key in keys):
        return False
    return own.get('outcome') != 'error' or _RUN_OWN.sub(
        '', stock.get('message', '')) == _RUN_OWN.sub(
            '', own.get('message', ''))


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

    def add(self, finding):
        """Add ``finding`` unless the step broke that rule already."""
        if not any((f.step, f.variant, f.rule) == (
                finding.step, finding.variant, finding.rule)
                for f in self.findings):
            self.findings.append(finding)

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
    stock_requests = list(requests_of(scenario, stock))
    for variant, outcomes in runs.items():
        requests = list(requests_of(scenario, outcomes))
        for index, (request, own) in enumerate(zip(requests, outcomes)):
            theirs = stock[index] if index < len(stock) else None
            broken = own_rules(variant, request, own) + query_rules(
                variant, request, own)
            if theirs is not None:
                broken += stock_query_rules(variant, request,
                                            stock_requests[index], theirs,
                                            own)
            for rule in broken:
                if variant == 'stock-stripped':
                    verdict.bug_shown += rule == 'seed-bug'
                    continue
                verdict.add(Finding(scenario.seed, index, variant, rule,
                                    False, theirs, own))
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
        # As many schedulings as stock's, each of the mode's own queries.
        calls = ((per_call('stock', request), per_call(mode, request))
                 if request else (1, 1))
        if len(own['queries']) * calls[0] != len(
                theirs['queries']) * calls[1]:
            verdict.add(Finding(scenario.seed, index, mode, 'queries',
                                False, theirs, own))
        if _in_step(theirs, own):
            continue
        found = differential_rule(mode, step, request, theirs, own)
        if found:
            rule, allowed = found
            verdict.add(Finding(scenario.seed, index, mode, rule, allowed,
                                theirs, own))
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
