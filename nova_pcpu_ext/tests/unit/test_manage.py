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
import io
import json
import threading
import time
from unittest import mock

import ddt
import fixtures

from nova_pcpu_ext.cmd import common
from nova_pcpu_ext.cmd import manage
from nova_pcpu_ext import exception
from nova_pcpu_ext import heal
from nova_pcpu_ext import isolate_scan
from nova_pcpu_ext import nova_db
from nova_pcpu_ext import server_fields
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


class ProgressTest(base.TestCase):

    def test_quiet_for_5_seconds_then_once_per_5_seconds(self):
        stderr = self.useFixture(fixtures.MonkeyPatch('sys.stderr',
                                                      io.StringIO())).new_value
        with mock.patch('time.monotonic', return_value=100.0) as now:
            progress = common.Progress('prog')
            for seconds, done in ((4.9, 1), (5.0, 2), (9.9, 3), (10.0, 4),
                                  (15.5, 5)):
                now.return_value = 100.0 + seconds
                progress('reading', done, None if done == 5 else 9)

        self.assertEqual('prog: reading: 2 of 9\nprog: reading: 4 of 9\n'
                         'prog: reading: 5\n', stderr.getvalue())


class RunTest(base.TestCase):

    def test_ctrl_c_is_one_line_and_130(self):
        stderr = self.useFixture(fixtures.MonkeyPatch('sys.stderr',
                                                      io.StringIO())).new_value

        def interrupted():
            raise KeyboardInterrupt()

        self.assertEqual(130, common.run('prog', interrupted))
        self.assertEqual('prog: interrupted\n', stderr.getvalue())


class FakePlacement(object):
    """Where each server's resources are; ``ht`` is hyperthreaded."""

    def __init__(self, compute):
        self.compute = compute

    def consumer_allocations(self, uuid):
        server = self.compute.servers[uuid]
        return {server['OS-EXT-SRV-ATTR:host']: {'PCPU': 1}}

    def traits(self, rp_uuid):
        return ['HW_CPU_HYPERTHREADING'] if rp_uuid == 'ht' else []


class FakeCompute(object):
    """Servers on host ``ht`` that move to ``no-ht`` as Nova moves them.

    ``behaviour`` per server: ``refuse`` the move, ``stay`` busy, have
    Nova ``auto-confirm`` a cold move first, ``explode``.
    """

    def __init__(self, statuses, behaviour=None):
        self.servers = {uuid: {
            'id': uuid, 'status': status, 'OS-EXT-STS:task_state': None,
            'OS-EXT-SRV-ATTR:host': 'ht', 'flavor': {'extra_specs': {}}}
            for uuid, status in statuses.items()}
        self.behaviour = behaviour or {}
        self.actions = []

    def action(self, uuid, body):
        action = next(iter(body))
        server, behaviour = self.servers[uuid], self.behaviour.get(uuid)
        self.actions.append((uuid, action))
        if action == 'confirmResize' and behaviour == 'auto-confirm':
            server['status'] = server.pop('was')  # just before this call
        if behaviour == 'refuse' or (action == 'confirmResize' and
                                     server['status'] != 'VERIFY_RESIZE'):
            raise exception.ActionRefused('%s refused: no' % action)
        if behaviour == 'explode':
            raise RuntimeError('boom')
        if behaviour == 'stay':
            server['OS-EXT-STS:task_state'] = 'migrating'
        elif action == 'migrate':
            server.update({'OS-EXT-SRV-ATTR:host': 'no-ht',
                           'status': 'VERIFY_RESIZE', 'was': server['status']})
        elif action == 'confirmResize':
            server['status'] = server.pop('was')
        else:
            server['OS-EXT-SRV-ATTR:host'] = 'no-ht'

    def server(self, uuid):
        return dict(self.servers[uuid])

    def action_error(self, uuid, action):
        return None


class CtrlCCompute(FakeCompute):
    """Ctrl-C once server ``slow`` is moving, while ``first`` is read.

    KeyboardInterrupt comes out of the first move's future, which the main
    thread waits for: where Ctrl-C interrupts it. No signal: one sent just
    before the main thread blocks would be heard only when it wakes.
    """

    def __init__(self):
        super().__init__({'first': 'ACTIVE', 'slow': 'ACTIVE'},
                         {'slow': 'stay'})
        self.moving = threading.Event()

    def action(self, uuid, body):
        super().action(uuid, body)
        self.moving.set()

    def server(self, uuid):
        if uuid == 'first' and self.moving.wait(60):
            raise KeyboardInterrupt()
        return super().server(uuid)


def planned_moves(compute, cold=False):
    """A planned :class:`heal.Move` of each server of ``compute``."""
    moves = []
    for uuid, server in compute.servers.items():
        found = isolate_scan.IsolateServer(
            dict(server), {'uuid': 'ht', 'name': 'ht'}, 'flavor',
            {'ht': {'VCPU': 1}}, legacy=False, dedicated=True)
        moves.append(heal.Move(
            uuid, 'ht', server['status'], 'VCPU:1', found=found,
            how=heal.how_to_move(server['status'], cold),
            result='planned', room='no-ht'))
    return moves


class HealerTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.heal.POLL_INTERVAL', 0.01))

    def moves(self, compute, cold=False):
        return planned_moves(compute, cold)

    def run_moves(self, compute, cold=False, **kwargs):
        moves = self.moves(compute, cold)
        heal.Healer(FakePlacement(compute), compute, **kwargs).run(moves)
        return [(m.server, m.to_host, m.result) for m in moves]

    def test_each_state_moves_as_nova_allows_and_stays(self):
        compute = FakeCompute({'active': 'ACTIVE', 'paused': 'PAUSED',
                               'shutoff': 'SHUTOFF'})
        self.assertEqual([('active', 'no-ht', 'healed'),
                          ('paused', 'no-ht', 'healed'),
                          ('shutoff', 'no-ht', 'healed')],
                         self.run_moves(compute))
        self.assertEqual([('active', 'os-migrateLive'),
                          ('paused', 'os-migrateLive'),
                          ('shutoff', 'migrate'),
                          ('shutoff', 'confirmResize')], compute.actions)
        self.assertEqual(['ACTIVE', 'PAUSED', 'SHUTOFF'],
                         [s['status'] for s in compute.servers.values()])

    def test_cold(self):
        compute = FakeCompute({'active': 'ACTIVE'})
        self.assertEqual([('active', 'no-ht', 'healed')],
                         self.run_moves(compute, cold=True))
        self.assertEqual(['migrate', 'confirmResize'],
                         [action for _uuid, action in compute.actions])

    def test_a_resize_nova_confirmed_first(self):
        compute = FakeCompute({'a': 'SHUTOFF'}, {'a': 'auto-confirm'})
        self.assertEqual([('a', 'no-ht', 'healed')], self.run_moves(compute))

    def test_first_failure_stops_the_rest(self):
        compute = FakeCompute({'refused': 'ACTIVE', 'next': 'ACTIVE'},
                              {'refused': 'refuse'})
        self.assertEqual([
            ('refused', 'ht', 'failed, not moved: os-migrateLive refused: '
                              'no'),
            ('next', '', 'not started: an earlier move failed '
                         '(--continue-on-error goes on)')],
            self.run_moves(compute))

    def test_continue_on_error(self):
        compute = FakeCompute({'refused': 'ACTIVE', 'next': 'ACTIVE'},
                              {'refused': 'refuse'})
        results = self.run_moves(compute, continue_on_error=True)
        self.assertEqual(('next', 'no-ht', 'healed'), results[1])

    def test_an_unexpected_error_is_a_row(self):
        compute = FakeCompute({'a': 'ACTIVE', 'b': 'ACTIVE'},
                              {'a': 'explode'})
        self.assertEqual(
            [('a', '', 'failed: unexpected error: RuntimeError: boom'),
             ('b', '', 'not started: an earlier move failed '
                       '(--continue-on-error goes on)')],
            self.run_moves(compute))

    def test_a_move_still_running_does_not_stop_the_run(self):
        compute = FakeCompute({'slow': 'ACTIVE', 'next': 'ACTIVE'},
                              {'slow': 'stay'})
        self.assertEqual(
            [('slow', 'ht', 'running: still ACTIVE (migrating) after 0 s; '
                            'check it with openstack server show'),
             ('next', 'no-ht', 'healed')],
            self.run_moves(compute, timeout=0))

    def test_ctrl_c_waits_for_no_move_and_starts_none(self):
        # Polls and a timeout longer than the run may take.
        self.useFixture(fixtures.MockPatch('nova_pcpu_ext.heal.POLL_INTERVAL',
                                           60))
        compute = CtrlCCompute()
        moves = self.moves(compute)
        healer = heal.Healer(FakePlacement(compute), compute, timeout=60,
                             max_parallel=2)

        started = time.monotonic()
        healer.run(moves)

        self.assertLess(time.monotonic() - started, 30)
        self.assertTrue(healer.interrupted)
        self.assertEqual(
            [('first', '', 'not started: the run was interrupted'),
             ('slow', 'ht', 'interrupted while running: ACTIVE (migrating) '
                            'when last seen; check it with openstack server '
                            'show')],
            [(m.server, m.to_host, m.result) for m in moves])
        self.assertEqual([('slow', 'os-migrateLive')], compute.actions)

    def test_changed_since_the_run_started(self):
        compute = FakeCompute({'moved': 'ACTIVE', 'stopped': 'ACTIVE',
                               'resized': 'ACTIVE', 'locked': 'ACTIVE'})
        moves = self.moves(compute)
        compute.servers['moved']['OS-EXT-SRV-ATTR:host'] = 'other'
        compute.servers['stopped']['status'] = 'SHUTOFF'
        compute.servers['resized']['flavor'] = {'extra_specs': {'x': 'y'}}
        compute.servers['locked']['locked'] = True

        heal.Healer(FakePlacement(compute), compute).run(moves)

        self.assertEqual([
            'skipped: moved to other since the run started',
            'skipped: now SHUTOFF, was ACTIVE when the run started',
            'skipped: resized since the run started',
            'skipped: locked'], [m.result for m in moves])
        self.assertEqual([], compute.actions)


class PlanTest(base.TestCase):

    def scan(self, *legacy):
        """A scan of servers ``0``, ``1``... each legacy or not."""
        return isolate_scan.IsolateScan([isolate_scan.IsolateServer(
            {'id': str(number), 'status': 'ACTIVE',
             'OS-EXT-SRV-ATTR:host': 'ht%d' % number},
            {'uuid': 'ht%d' % number}, 'flavor',
            {'ht%d' % number: {'VCPU': 1}}, legacy=is_legacy,
            dedicated=True) for number, is_legacy in enumerate(legacy)], {})

    def plan(self, scan, **kwargs):
        placement = FakePlacement(None)
        placement.candidate = lambda groups, root_required, among: 'no-ht'
        return [(m.server, m.result, m.wanted)
                for m in heal.plan(scan, placement, **kwargs)]

    def test_legacy_isolation_is_left_alone(self):
        self.assertEqual(
            [('1', 'planned', True), ('0', heal.LEGACY, False)],
            self.plan(self.scan(True, False)))

    def test_legacy_isolation_included_comes_last(self):
        self.assertEqual(
            [('1', 'planned', True), ('0', 'planned', True)],
            self.plan(self.scan(True, False), include_legacy=True))

    def test_unsure_comes_before_legacy(self):
        scan = self.scan(True)
        scan.found[0].unsure = 'image changed'
        self.assertEqual([('0', 'skipped: unsure: image changed', True)],
                         self.plan(scan))

    def test_nested_groups_without_room(self):
        scan = self.scan(False)
        scan.found[0].allocations['gpu'] = {'VGPU': 1}
        scan.found[0].nested = frozenset(['gpu'])
        placement = FakePlacement(None)
        placement.candidate = lambda groups, root_required, among: None

        move, = heal.plan(scan, placement)

        self.assertEqual('no eligible destination: no enabled host without '
                         'hyperthreads has room for PCPU:1; VGPU:1 of a '
                         'nested provider', move.result)

    def test_a_destination_in_the_server_s_cell(self):
        """Nova moves a server within its cell: room elsewhere is none."""
        scan = self.scan(False, False)
        for found, cell in zip(scan.found, ('cell1', 'cell2')):
            found.server[server_fields.CELL] = cell
        scan.cell_nodes = {'cell1': {'node1'}, 'cell2': {'node2'}}
        placement = FakePlacement(None)
        placement.providers = lambda: [{'name': 'node1', 'uuid': 'rp-1'},
                                       {'name': 'node2', 'uuid': 'rp-2'}]
        placement.candidate = lambda groups, root_required, among: (
            'node1' if 'rp-1' in among else None)

        moves = heal.plan(scan, placement)

        self.assertEqual(
            [('0', 'cell1', 'planned', 'node1'),
             ('1', 'cell2', 'no eligible destination: no enabled host '
              'without hyperthreads in its cell has room for PCPU:1', None)],
            [(m.server, m.cell, m.result, m.room) for m in moves])

    def test_a_row_per_cell_not_read(self):
        scan = self.scan()
        scan.unseen = {'ht%d' % number: ['s%d' % number]
                       for number in range(7)}
        scan.unseen['other'] = ['t', 'u']
        scan.unseen_cells = dict.fromkeys(scan.unseen, 'cell2')
        scan.unseen_cells['other'] = None
        scan.cells = [nova_db.CellRead('cell2', False, 1.0, 'refused', 9, 99)]

        rows = heal.plan(scan, FakePlacement(None))

        self.assertEqual(
            [('', None, 'other', 'not judged: 2 servers on 1 hosts: the '
              'Compute API cannot show them: is a cell down?'),
             ('', 'cell2', 'ht0, ht1, ht2, ht3, ht4 and 2 more',
              'not judged: 7 servers on 7 hosts: the database of cell '
              'cell2 could not be read: refused; the cell maps 9 compute '
              'hosts and 99 servers')],
            [(m.server, m.cell, m.from_host, m.result) for m in rows])


@ddt.ddt
class HealCodeTest(base.TestCase):
    """Only 1 says: run again, as nova-manage's heal_allocations."""

    ROWS = {
        'healed': heal.Move('a', 'ht', 'ACTIVE', '', result='healed',
                            healed=True),
        'legacy': heal.Move('b', 'ht', 'ACTIVE', '', result=heal.LEGACY,
                            wanted=False),
        'left': heal.Move('c', 'ht', 'ACTIVE', '',
                          result=heal.LEFT % 1),
        'dry run': heal.Move('d', 'ht', 'ACTIVE', '',
                             result='dry run: would migrate (room on x)'),
        'locked': heal.Move('e', 'ht', 'ACTIVE', '',
                            result='skipped: locked'),
        'failed': heal.Move('f', 'ht', 'ACTIVE', '', result='failed: no'),
        'cell': heal.Move('', 'ht', 'UNKNOWN', '', not_judged=True,
                          result='not judged: ...'),
    }

    @ddt.data(((), 0), (('healed', 'legacy'), 0), (('healed', 'left'), 1),
              (('dry run',), 1), (('left', 'locked'), 3),
              (('locked',), 3), (('failed', 'cell'), 3),
              (('left', 'cell'), 4), (('cell',), 4))
    @ddt.unpack
    def test_exit_code(self, rows, code):
        self.assertEqual(code, manage.heal_code(
            [self.ROWS[row] for row in rows]))


@ddt.ddt
class MaxCountTest(base.TestCase):
    """``heal isolate --max-count N``: at most N moves, the rest left."""

    LEFT = 'not attempted: --max-count 2 reached; left for the next run'

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.heal.POLL_INTERVAL', 0.01))
        self.stderr = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value

    @staticmethod
    def parse(*argv):
        parser = argparse.ArgumentParser(prog='manage')
        manage._add_commands(parser.add_subparsers())
        return parser.parse_args(['heal', 'isolate', '--format', 'json',
                                  *argv])

    def heal(self, compute, *argv):
        """Exit code and rows of ``heal isolate`` over ``compute``."""
        for target, value in (
                ('nova_pcpu_ext.clients.connect',
                 (FakePlacement(compute), compute)),
                ('nova_pcpu_ext.cmd.common.nova_database', None),
                ('nova_pcpu_ext.isolate_scan.isolate_servers', None),
                ('nova_pcpu_ext.heal.plan', planned_moves(compute))):
            self.useFixture(fixtures.MockPatch(target, return_value=value))
        stdout = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        args = self.parse(*argv)
        code = args.function(args)
        return code, [(row['server'], row['to_host'], row['result'])
                      for row in json.loads(stdout.getvalue())]

    def test_moves_the_first_n_and_leaves_the_rest(self):
        compute = FakeCompute({'a': 'ACTIVE', 'b': 'SHUTOFF', 'c': 'ACTIVE'})

        code, rows = self.heal(compute, '--max-count', '2')

        self.assertEqual(1, code)
        self.assertEqual([('a', 'no-ht', 'healed'), ('b', 'no-ht', 'healed'),
                          ('c', '', self.LEFT)], rows)
        self.assertEqual(['a', 'b'], sorted({uuid for uuid, _action
                                             in compute.actions}))
        self.assertEqual('ht', compute.servers['c']['OS-EXT-SRV-ATTR:host'])

    def test_a_count_above_the_plan_moves_everything(self):
        compute = FakeCompute({'a': 'ACTIVE', 'b': 'ACTIVE'})

        code, rows = self.heal(compute, '--max-count', '5')

        self.assertEqual(0, code)
        self.assertEqual(['healed', 'healed'], [r[2] for r in rows])

    def test_dry_run_shows_what_this_run_would_leave(self):
        compute = FakeCompute({'a': 'ACTIVE', 'b': 'ACTIVE', 'c': 'ACTIVE'})

        code, rows = self.heal(compute, '--max-count', '2', '--dry-run')

        self.assertEqual(1, code)
        self.assertEqual(
            ['dry run: would live-migrate (room on no-ht)'] * 2 + [self.LEFT],
            [r[2] for r in rows])
        self.assertEqual([], compute.actions)

    def test_rows_not_planned_do_not_count(self):
        moves = [heal.Move('locked', 'ht', 'ACTIVE', '',
                           result='skipped: locked'),
                 heal.Move('legacy', 'ht', 'ACTIVE', '', result=heal.LEGACY,
                           wanted=False)]
        moves += planned_moves(FakeCompute({'a': 'ACTIVE', 'b': 'ACTIVE',
                                            'c': 'ACTIVE'}))

        heal.limit(moves, 2)

        self.assertEqual(['skipped: locked', heal.LEGACY, 'planned',
                          'planned', self.LEFT], [m.result for m in moves])

    def test_without_a_count_every_move_stays_planned(self):
        moves = planned_moves(FakeCompute({'a': 'ACTIVE', 'b': 'ACTIVE'}))
        self.assertIsNone(self.parse().max_count)
        self.assertEqual(['planned', 'planned'],
                         [m.result for m in heal.limit(moves, None)])

    @ddt.data('0', '-1', 'two', '1.5', '')
    def test_not_a_positive_whole_number(self, text):
        self.assertRaises(SystemExit, self.parse, '--max-count', text)
        self.assertIn("argument --max-count: %r: give a whole number of 1 "
                      "or more" % text, self.stderr.getvalue())


class HelpTest(base.TestCase):

    def test_include_legacy_says_what_it_moves(self):
        parser = argparse.ArgumentParser(prog='manage')
        manage._add_commands(parser.add_subparsers())
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))

        self.assertRaises(SystemExit, parser.parse_args,
                          ['heal', 'isolate', '--help'])

        text = ' '.join(out.getDetails()['stdout'].as_text().split())
        self.assertIn('--include-legacy Also move isolate servers of '
                      'hyperthreaded hosts without PCPU inventory '
                      '(vcpu_pin_set)', text)

    def test_heal_names_the_bug(self):
        parser = argparse.ArgumentParser(prog='manage')
        manage._add_commands(parser.add_subparsers())
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))

        self.assertRaises(SystemExit, parser.parse_args, ['--help'])

        text = ' '.join(out.getDetails()['stdout'].as_text().split())
        self.assertIn('heal Move servers that Nova bug 1889633 put on '
                      'hyperthreaded hosts.', text)


@ddt.ddt
class MovableTest(base.TestCase):

    @ddt.unpack
    @ddt.data(('ACTIVE', False, heal.LIVE), ('ACTIVE', True, heal.COLD),
              ('PAUSED', True, heal.LIVE), ('SHUTOFF', False, heal.COLD),
              ('SUSPENDED', False, None), ('SHELVED_OFFLOADED', False, None),
              ('RESCUE', False, None), ('ERROR', False, None))
    def test_how_to_move(self, status, cold, how):
        self.assertEqual(how, heal.how_to_move(status, cold))

    @ddt.unpack
    @ddt.data(({'status': 'ACTIVE'}, None),
              ({'status': 'ACTIVE', 'locked': True}, 'locked'),
              ({'status': 'ACTIVE', 'OS-EXT-STS:task_state': 'migrating'},
               'task migrating in progress'),
              ({'status': 'ERROR'}, 'ERROR servers cannot be migrated'))
    def test_why_not_movable(self, server, why_not):
        self.assertEqual(why_not, heal.why_not_movable(server))
