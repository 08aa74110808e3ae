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

import argparse

import ddt

from nova_pcpu_ext import audit
from nova_pcpu_ext.cmd import manage
from nova_pcpu_ext import exception
from nova_pcpu_ext import heal
from nova_pcpu_ext.tests.unit import base


@ddt.ddt
class RatioOptionTest(base.TestCase):

    def test_valid(self):
        self.assertEqual(('MEMORY_MB', 1.5),
                         manage._ratio_override('MEMORY_MB=1.5'))

    @ddt.data('PCPU=2.0', 'VCPU', 'VCPU=0', 'VCPU=-1', 'VCPU=nan',
              'VCPU=many')
    def test_invalid(self, text):
        self.assertRaises(argparse.ArgumentTypeError,
                          manage._ratio_override, text)


class FakePlacement(object):

    def __init__(self, after):
        self.after = after

    def consumer_resources(self, uuid):
        return self.after[uuid]


class FakeCompute(object):
    """Moves servers to ``destinations``; refuses the ones not listed."""

    def __init__(self, destinations):
        self.destinations = destinations
        self.moved = []

    def action(self, uuid, body):
        if uuid not in self.destinations:
            raise exception.ActionRefused('os-migrateLive refused: no')
        self.moved.append(uuid)

    def server(self, uuid):
        return {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
                'OS-EXT-SRV-ATTR:host': self.destinations.get(uuid, 'ht')}

    def action_error(self, uuid, action):
        return None


class HealerTest(base.TestCase):

    def moves(self, *uuids):
        found = [audit.IsolateServer(
            {'id': uuid, 'OS-EXT-SRV-ATTR:host': 'ht'}, {}, 'flavor', 1,
            legacy=False) for uuid in uuids]
        return heal.plan(found, destinations=['no-ht'])

    def run_moves(self, moves, destinations, after, **kwargs):
        compute = FakeCompute(destinations)
        heal.Healer(FakePlacement(after), compute, **kwargs).run(moves)
        return compute, [(m.server, m.to_host, m.result) for m in moves]

    def test_healed_and_still_on_vcpu(self):
        _compute, results = self.run_moves(
            self.moves('a', 'b'), {'a': 'no-ht', 'b': 'no-ht'},
            {'a': {'PCPU': 1}, 'b': {'VCPU': 1}}, continue_on_error=True)
        self.assertEqual([
            ('a', 'no-ht', 'healed'),
            ('b', 'no-ht', 'failed: moved, but still consumes VCPU')],
            results)

    def test_first_failure_stops_the_rest(self):
        compute, results = self.run_moves(
            self.moves('refused', 'next'), {'next': 'no-ht'},
            {'next': {'PCPU': 1}})
        self.assertEqual([
            ('refused', 'ht', 'failed, not moved: os-migrateLive refused: '
                              'no'),
            ('next', '', 'not started: an earlier move failed '
                         '(--continue-on-error goes on)')], results)
        self.assertEqual([], compute.moved)

    def test_continue_on_error(self):
        compute, results = self.run_moves(
            self.moves('refused', 'next'), {'next': 'no-ht'},
            {'next': {'PCPU': 1}}, continue_on_error=True)
        self.assertEqual('healed', results[1][2])
        self.assertEqual(['next'], compute.moved)

    def test_no_destination_is_not_tried(self):
        found = self.moves('a')[0]
        moves = heal.plan([audit.IsolateServer(
            {'id': 'a', 'OS-EXT-SRV-ATTR:host': 'ht'}, {}, 'flavor', 1,
            legacy=True)], destinations=[])
        compute, _results = self.run_moves(moves, {'a': 'no-ht'}, {})
        self.assertEqual([], compute.moved)
        self.assertEqual('planned', found.result)
        self.assertTrue(moves[0].result.startswith('no eligible destination'))
