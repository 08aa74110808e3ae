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

"""Clouds of servers in every state, from a seed, for the operator tools.

Pure data, no Nova, as :mod:`.generator`: which of the states an isolate
victim of bug 1889633 can be in the cloud holds, the hyperthreaded host
each one is booted on, and which inventories of those hosts carry a bad
allocation ratio (bug 1789654). ``test_server_states`` builds the cloud
on real Nova and judges the commands on it.
"""

import dataclasses
import random

#: States of servers booted on a host of :data:`HOSTS`, in the order
#: they are built; the last four move, to compute5 or where there is room.
IN_PLACE = ('ACTIVE', 'SHUTOFF', 'PAUSED', 'SUSPENDED', 'RESCUED',
            'ERROR with a host', 'SHELVED', 'SHELVED_OFFLOADED',
            'SOFT_DELETED', 'flavor deleted', 'image deleted',
            'VERIFY_RESIZE', 'resize in flight', 'cold migration in flight',
            'live migration in flight')
MOVES = IN_PLACE[-4:]
WITHOUT_A_HOST = ('ERROR without a host', 'BUILD before a host')
#: Every state; an evacuated server runs on a host of its own first.
STATES = IN_PLACE + ('evacuated',) + WITHOUT_A_HOST + (
    'consumer without a server',)
#: The hyperthreaded hosts the servers are booted on.
HOSTS = ('compute1', 'compute2', 'compute3')
#: Bad ratios a provider's inventory may carry: ``placement audit`` fixes
#: them, and ``upgrade check`` fails (0.0) or warns (PCPU) on them.
BAD_RATIOS = (('VCPU', 0.0), ('MEMORY_MB', 0.0), ('DISK_GB', 0.0),
              ('PCPU', 2.0))
#: The share of the states a generated cloud holds, and of its hosts
#: with a bad ratio.
STATE_SHARE = 0.4
DAMAGE_SHARE = 0.4


@dataclasses.dataclass(frozen=True)
class StatesScenario:
    seed: int
    #: ``(state, host)`` of each state the cloud holds; the host is None
    #: where the state decides it.
    placement: tuple
    #: ``(host, resource class, ratio)`` of each damaged inventory.
    damage: tuple = ()

    @property
    def states(self):
        return tuple(state for state, _host in self.placement)

    def host_of(self, state):
        return dict(self.placement)[state]


def _spread(states):
    """Each state of ``IN_PLACE`` on a host in turn, five at most on each."""
    hosts = [HOSTS[index % len(HOSTS)] for index in range(len(states))]
    return tuple((state, hosts[index] if state in IN_PLACE else None)
                 for index, state in enumerate(states))


#: Every state, spread over the hosts, no bad ratio.
EVERY_STATE = StatesScenario(seed=-1, placement=_spread(STATES))


def generate(seed):
    """The cloud of ``seed``: some states, on shuffled hosts, some damage."""
    rng = random.Random('states %d' % seed)
    states = ([state for state in STATES if rng.random() < STATE_SHARE] or
              [rng.choice(STATES)])
    placement = _spread(states)
    hosts = [host for _state, host in placement if host]
    rng.shuffle(hosts)
    placement = tuple((state, hosts.pop() if host else None)
                      for state, host in placement)
    damage = tuple((host,) + rng.choice(BAD_RATIOS) for host in HOSTS
                   if rng.random() < DAMAGE_SHARE)
    return StatesScenario(seed=seed, placement=placement, damage=damage)


def describe(scenario):
    """Lines a person reads to understand a cloud of states."""
    lines = ['states seed %d' % scenario.seed]
    for state, host in scenario.placement:
        lines.append('  %s%s' % (state, ' on %s' % host if host else ''))
    for host, resource_class, ratio in scenario.damage:
        lines.append('  %s: %s allocation_ratio %s' % (
            host, resource_class, ratio))
    return lines
