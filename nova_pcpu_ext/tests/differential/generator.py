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

"""A cloud and a sequence of steps from an integer seed.

Pure data, no Nova: the same seed gives the same cloud and steps on every
machine, so a seed is enough to replay a finding. Hosts are small (four
CPUs) so that a few servers fill them; see :data:`TOPOLOGIES`.
"""

import dataclasses
import random

#: fakelibvirt topologies: one NUMA node, four CPUs.
TOPOLOGIES = {
    True: dict(cpu_nodes=1, cpu_sockets=1, cpu_cores=2, cpu_threads=2),
    False: dict(cpu_nodes=1, cpu_sockets=1, cpu_cores=4, cpu_threads=1),
}
#: CPU configuration of each style, on those four CPUs.
CPU_SETS = {
    'legacy': dict(vcpu_pin_set='0-3', dedicated=None, shared=None),
    'new': dict(vcpu_pin_set=None, dedicated='0-1', shared='2-3'),
}
#: vCPUs of the pinned server that makes a host partly used or full.
FILL_VCPUS = {
    ('legacy', 'partly'): 1, ('legacy', 'full'): 4,
    ('new', 'partly'): 1, ('new', 'full'): 2,
}
#: The availability zone of the generated aggregate.
ZONE = 'az1'

#: Those of ``hw:cpu_policy=dedicated``; mixed pins some CPUs.
DEDICATED_KINDS = ('dedicated', 'isolate', 'require', 'prefer')
PINNED_KINDS = DEDICATED_KINDS + ('mixed',)
KINDS = ('unpinned',) + PINNED_KINDS
#: The thread policy of each pinned kind that has one.
THREAD_POLICY = {'isolate': 'isolate', 'require': 'require',
                 'prefer': 'prefer'}
ACTIONS = ('boot', 'resize', 'migrate', 'live_migrate', 'evacuate')
#: What an operator does between requests, scheduling nothing: delete the
#: trait of :mod:`nova_pcpu_ext.pcpu_trait` (placement refuses while a
#: provider carries it), as a clean-up of unused custom traits would.
OPERATOR_ACTIONS = ('delete_trait',)
EVERY_ACTION = ACTIONS + OPERATOR_ACTIONS
#: The share of scenarios with an operator action.
OPERATOR_SHARE = 0.25


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    style: str          # 'legacy' (vcpu_pin_set) or 'new' (cpu_*_set)
    hyperthreads: bool
    enabled: bool
    fill: str           # 'empty', 'partly' or 'full'
    zone: bool          # in the aggregate of availability zone ZONE

    @property
    def kind(self):
        return '%s-%s' % (self.style, 'ht' if self.hyperthreads else 'noht')


@dataclasses.dataclass(frozen=True)
class Request:
    kind: str           # one of KINDS
    vcpus: int
    #: 'flavor' (extra specs), 'image' (properties), or 'both': the
    #: flavor's pinning policy and the image's thread policy.
    source: str
    trait: str = None   # None, 'required' or 'forbidden' HW_CPU_HYPERTHREADING
    zone: bool = False  # asks for availability zone ZONE

    @property
    def pinned(self):
        return self.kind in PINNED_KINDS

    @property
    def isolate(self):
        return self.kind == 'isolate'

    def extra_specs(self):
        """The flavor's extra specs."""
        specs = {}
        if self.kind == 'mixed':
            specs.update({'hw:cpu_policy': 'mixed',
                          'hw:cpu_dedicated_mask': '^0'})
        elif self.pinned and self.source != 'image':
            specs['hw:cpu_policy'] = 'dedicated'
            if self.kind in THREAD_POLICY and self.source == 'flavor':
                specs['hw:cpu_thread_policy'] = THREAD_POLICY[self.kind]
        if self.trait:
            specs['trait:HW_CPU_HYPERTHREADING'] = self.trait
        return specs

    def image_properties(self):
        """The image's properties (none for a flavor-only request)."""
        if self.source == 'flavor':
            return {}
        props = {}
        if self.source == 'image':
            props['hw_cpu_policy'] = 'dedicated'
        if self.kind in THREAD_POLICY:
            props['hw_cpu_thread_policy'] = THREAD_POLICY[self.kind]
        return props


@dataclasses.dataclass(frozen=True)
class Step:
    action: str         # one of ACTIONS or OPERATOR_ACTIONS
    request: Request = None   # boot and resize
    server: int = None  # moves: the index of the boot step's server
    #: ``[scheduler] max_placement_results`` for this step; None: Nova's.
    limit: int = None


@dataclasses.dataclass(frozen=True)
class Scenario:
    seed: int
    hosts: tuple
    steps: tuple


def _host(rng, index):
    style = rng.choice(('legacy', 'new'))
    return Host(name='host%d' % index, style=style,
                hyperthreads=rng.random() < 0.5,
                enabled=rng.random() < 0.85,
                fill=rng.choice(('empty', 'empty', 'partly', 'full')),
                zone=rng.random() < 0.3)


def _request(rng, zone_exists, image_allowed=True):
    kind = rng.choice(KINDS)
    vcpus = 2 if kind == 'mixed' else rng.choice((1, 1, 2))
    # Mixed needs the flavor's dedicated mask; unpinned has no property.
    image = (image_allowed and kind not in ('mixed', 'unpinned') and
             rng.random() < 0.3)
    trait = None
    # Nova's API takes the trait for a thread policy, which it refuses
    # together with another one or without a pinning policy.
    if kind in ('dedicated', 'mixed') and rng.random() < 0.4:
        trait = rng.choice(('required', 'forbidden'))
    return Request(kind=kind, vcpus=vcpus,
                   source='image' if image else 'flavor', trait=trait,
                   zone=zone_exists and rng.random() < 0.3)


#: The first boot of each seed, in turn (seed mod 5): what the oracle's
#: rules are about is in every run of five seeds.
FOCUS = (
    Request('isolate', 1, 'image'),
    Request('isolate', 1, 'both'),
    Request('dedicated', 1, 'flavor', trait='forbidden'),
    Request('require', 1, 'flavor'),
    # A small max_placement_results, on a pinned request.
    Request('prefer', 1, 'flavor'),
)
#: max_placement_results of the last focus' boot.
FOCUS_LIMIT = 1


def generate(seed, actions=EVERY_ACTION):
    """The scenario of ``seed``, using only ``actions`` besides boots.

    Its first boot is the request of :data:`FOCUS` for the seed.
    """
    scheduling = tuple(action for action in actions if action in ACTIONS)
    rng = random.Random(seed)
    hosts = tuple(_host(rng, i) for i in range(rng.randint(2, 4)))
    zone_exists = any(host.zone for host in hosts)
    steps = []
    boots, flavor_boots = [], []
    for _ in range(rng.randint(4, 7)):
        action = rng.choice(scheduling) if boots else 'boot'
        limit = rng.choice((1, 2)) if rng.random() < 0.25 else None
        if action == 'boot':
            request, limit = (_focus(seed, limit) if not boots else
                              (_request(rng, zone_exists), limit))
            boots.append(len(steps))
            if request.source == 'flavor':
                flavor_boots.append(len(steps))
            steps.append(Step('boot', request, limit=limit))
        elif action == 'resize' and flavor_boots:
            # NOTE: a resize changes the flavor only: the server keeps
            # its image's properties, so only servers whose pinning came
            # from their flavor are resized, to another flavor.
            steps.append(Step('resize', _request(rng, zone_exists, False),
                              server=rng.choice(flavor_boots), limit=limit))
        elif action == 'resize':
            steps.append(Step('migrate', server=rng.choice(boots),
                              limit=limit))
        else:
            steps.append(Step(action, server=rng.choice(boots), limit=limit))
    _add_operator_action(seed, steps, tuple(
        action for action in actions if action in OPERATOR_ACTIONS))
    return Scenario(seed=seed, hosts=hosts, steps=tuple(steps))


def _focus(seed, limit):
    """The request of ``seed``'s first boot, and its limit."""
    request = FOCUS[seed % len(FOCUS)]
    return request, FOCUS_LIMIT if request is FOCUS[-1] else limit


def _add_operator_action(seed, steps, actions):
    """One operator action after the first boot, in some scenarios.

    Drawn from a generator of its own, so that the cloud and the requests
    of a seed are the same with or without it. Moves name their server
    by its boot step's index, which the insertion shifts.
    """
    rng = random.Random('operator %d' % seed)
    if not actions or rng.random() >= OPERATOR_SHARE:
        return
    at = rng.randint(1, len(steps))
    action = rng.choice(actions)
    for index, step in enumerate(steps):
        if step.server is not None and step.server >= at:
            steps[index] = dataclasses.replace(step, server=step.server + 1)
    steps.insert(at, Step(action))


def describe(scenario):
    """Lines a person reads to understand a scenario."""
    lines = ['seed %d' % scenario.seed]
    for host in scenario.hosts:
        lines.append('  %s: %s, %s, %s%s' % (
            host.name, host.kind, host.fill,
            'enabled' if host.enabled else 'disabled',
            ', in %s' % ZONE if host.zone else ''))
    for index, step in enumerate(scenario.steps):
        lines.append('  step %d: %s' % (index, describe_step(step)))
    return lines


def describe_step(step):
    parts = [step.action]
    if step.server is not None:
        parts.append('server of step %d' % step.server)
    if step.request:
        request = step.request
        parts.append('%s x%d from %s' % (request.kind, request.vcpus,
                                         request.source))
        if request.trait:
            parts.append('HW_CPU_HYPERTHREADING %s' % request.trait)
        if request.zone:
            parts.append('in %s' % ZONE)
    if step.limit:
        parts.append('max_placement_results=%d' % step.limit)
    return ', '.join(parts)
