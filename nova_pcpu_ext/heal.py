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

"""Move servers that forbid hyperthreads off hyperthreaded hosts.

Each server found by :func:`nova_pcpu_ext.isolate_scan.isolate_servers` is
moved through the Compute API, so the scheduler places it again: live if it is
ACTIVE or PAUSED, cold (and confirmed) if it is SHUTOFF or ``--cold`` says
so. With the ``isolate_vcpu_fallback`` request filter active, only hosts
without hyperthreads are candidates. Placement then tells whether it
worked: the server holds resources of no hyperthreaded provider. A server
that cannot move stays where it was, in the state it was; nothing is
deleted.

Servers Nova isolated the legacy way (``isolate`` on a ``vcpu_pin_set``
host, which pins one thread per core and reserves its siblings) are not
the bug's and stay unless the operator includes them.
"""

import concurrent.futures
import dataclasses
import itertools
import threading
import time

import os_resource_classes as orc

from nova_pcpu_ext import clients
from nova_pcpu_ext import cloud_hosts
from nova_pcpu_ext import destinations
from nova_pcpu_ext import exception
from nova_pcpu_ext import isolate_scan
from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext import server_fields

LIVE = 'live-migrate'
COLD = 'migrate'
#: The server action of each move, and the instance action Nova records.
ACTIONS = {
    LIVE: ({'os-migrateLive': {'host': None, 'block_migration': 'auto'}},
           'live-migration'),
    COLD: ({'migrate': None}, 'migrate'),
}
CONFIRM_RESIZE = {'confirmResize': None}
#: Seconds a move may take before it is reported as still running.
DEFAULT_TIMEOUT = 900
#: Moves at a time, at most: each polls the Compute API.
MAX_PARALLEL = 10
POLL_INTERVAL = 2
CPU_CLASSES = (orc.PCPU, orc.VCPU)
#: The result of legacy isolation left alone.
LEGACY = ('skipped: isolated as Nova means it on a vcpu_pin_set host (one '
          'thread per core, siblings reserved); --include-legacy moves it')
#: The same on a host converted to cpu_dedicated_set since.
RESHAPED = ('skipped: isolated as Nova means it while its host had no PCPU '
            '(one thread per core, siblings reserved), its VCPU made PCPU '
            'when the host was converted; --include-legacy moves it')
#: The result of a planned move past ``--max-count``.
LEFT = 'not attempted: --max-count %d reached; left for the next run'
#: Hosts named in a row of servers not judged, at most.
SHOWN = 5


@dataclasses.dataclass
class Move:
    """A row of the table; fields without ``repr`` stay out of it."""

    server: str
    from_host: str
    #: The server's status when the run started; a move ends in it again.
    status: str
    before: str
    to_host: str = ''
    after: str = ''
    result: str = ''
    healed: bool = False
    #: Its cell, where Nova's databases were read.
    cell: str = None
    found: isolate_scan.IsolateServer = dataclasses.field(default=None,
                                                          repr=False)
    how: str = dataclasses.field(default='', repr=False)
    #: A host with room for it when planned; the scheduler chooses.
    room: str = dataclasses.field(default=None, repr=False)
    #: Whether the run is to heal it: not so for legacy isolation left
    #: alone, which is no item left.
    wanted: bool = dataclasses.field(default=True, repr=False)
    #: A row of the servers of a cell or of hosts that could not be read.
    not_judged: bool = dataclasses.field(default=False, repr=False)

    @property
    def failed(self):
        return self.result.startswith('failed')

    @property
    def for_next_run(self):
        """Left by ``--max-count`` or a dry run, for a run without them."""
        return self.result.startswith(('not attempted: --max-count',
                                       'dry run:'))


def _cpus(resources):
    return ', '.join('%s:%d' % (rc, resources[rc]) for rc in CPU_CLASSES
                     if resources.get(rc))


def _groups(groups):
    """The request groups of a move, as a row says them."""
    unnumbered, *nested = [', '.join('%s:%d' % item for item in sorted(
        resources.items())) for resources in groups]
    return unnumbered + ''.join('; %s of a nested provider' % group
                                for group in nested)


def how_to_move(status, cold=False):
    """LIVE or COLD for a server of this status, or None.

    Nova live-migrates ACTIVE and PAUSED servers and cold-migrates ACTIVE
    and SHUTOFF ones.
    """
    if status == 'SHUTOFF' or (status == 'ACTIVE' and cold):
        return COLD
    if status in ('ACTIVE', 'PAUSED'):
        return LIVE
    return None


def why_not_movable(server):
    """Why the Compute API would refuse to move this server now, or None."""
    if server.get('locked'):
        return 'locked'
    if server.get('OS-EXT-STS:task_state'):
        return 'task %s in progress' % server['OS-EXT-STS:task_state']
    if how_to_move(server['status']) is None:
        return '%s servers cannot be migrated' % server['status']
    return None


def plan(scan, placement, cold=False, mode='drop', include_legacy=False):
    """One :class:`Move` per server, its result what would be done.

    The bug's servers come first, then those isolated the legacy way,
    which are moved only if ``include_legacy``.

    :param scan: an :class:`~nova_pcpu_ext.isolate_scan.IsolateScan`.
    :param mode: the request filter's mode, ``[pcpu_ext]
        isolate_fallback_mode``: in ``legacy_only`` mode legacy hosts are
        destinations too.
    """
    if mode == 'legacy_only' and not cloud_hosts.knows_trait(
            placement, pcpu_trait.TRAIT):
        # No compute reports it yet, and placement refuses a query that
        # forbids a trait it does not know.
        mode = 'drop'
    cells = destinations.cells_nodes(placement, scan)
    moves = []
    for found in sorted(scan.found, key=lambda found: found.legacy):
        if found.legacy and not (found.unsure or include_legacy):
            moves.append(Move(found.server['id'], found.host,
                              found.server['status'], _cpus(found.held),
                              found=found, wanted=False, cell=_cell(found),
                              result=RESHAPED if found.reshaped else LEGACY))
        else:
            moves.append(_plan_one(found, placement, cold, mode,
                                   destinations.in_cell(cells, found)))
    moves += _not_judged(scan)
    moves += [Move(moved.server['id'], moved.server.get(
        'OS-EXT-SRV-ATTR:host'), moved.server['status'], '', wanted=False,
        cell=moved.server.get(server_fields.CELL), result='skipped: runs on '
        '%s, not on %s, whose resources it holds: %s' % (
            moved.runs_on, moved.provider['name'], moved.why))
        for moved in scan.elsewhere]
    return moves


def limit(moves, max_count):
    """Leave the planned moves after the first ``max_count`` for a later run.

    As ``nova-manage placement heal_allocations --max-count``, a run then
    moves at most ``max_count`` servers, taken in the plan's order; the
    others keep a row that says so and are no less items left, so the exit
    code says to run again. ``None`` leaves every move planned.
    """
    if max_count is None:
        return moves
    planned = [move for move in moves if move.result == 'planned']
    for move in planned[max_count:]:
        move.result = LEFT % max_count
    return moves


def _cell(found):
    return found.server.get(server_fields.CELL)


def _not_judged(scan):
    """A row for each cell whose servers could not be read, on its hosts.

    One for the servers the Compute API could not show, if any.
    """
    reads = {read.name: read for read in scan.cells}
    rows = []
    for cell, on_hosts in scan.unseen_by_cell():
        servers = sum(map(len, on_hosts.values()))
        if cell is None:
            why = 'the Compute API cannot show them: is a cell down?'
        else:
            why = 'the database of cell %s could not be read: %s' % (
                cell, '; '.join(filter(None, (reads[cell].reason,
                                              reads[cell].maps))))
        hosts = sorted(on_hosts)
        rows.append(Move(
            '', ', '.join(hosts[:SHOWN]) + (
                ' and %d more' % (len(hosts) - SHOWN)
                if len(hosts) > SHOWN else ''), 'UNKNOWN', '', cell=cell,
            not_judged=True, result='not judged: %d servers on %d hosts: '
            '%s' % (servers, len(hosts), why)))
    return rows


def _plan_one(found, placement, cold, mode, among=None):
    server = found.server
    move = Move(server['id'], found.host, server['status'],
                _cpus(found.held), found=found, cell=_cell(found),
                how=how_to_move(server['status'], cold))
    why_not = why_not_movable(server)
    if not (found.unsure or why_not):
        move.room = destinations.destination(placement, found, mode, among)
    if found.unsure:
        move.result = 'skipped: unsure: %s' % found.unsure
    elif why_not:
        move.result = 'skipped: %s' % why_not
    elif not move.room:
        move.result = ('no eligible destination: no enabled host without '
                       'hyperthreads%s has room for %s' % (
                           '' if among is None else ' in its cell',
                           _groups(destinations.destination_requests(
                               found)[0][0])))
    else:
        move.result = 'planned'
    return move


class Healer(object):
    """Runs the planned moves, ``max_parallel`` at a time.

    Ctrl-C ends the run with every row told: no move starts any more, and
    the moves running are no longer waited for (Nova goes on with them).
    """

    NOT_STARTED = 'not started: the run was interrupted'

    def __init__(self, placement, compute, timeout=DEFAULT_TIMEOUT,
                 max_parallel=1, continue_on_error=False, progress=None):
        self.placement = placement
        self.compute = compute
        self.timeout = timeout
        self.max_parallel = max_parallel
        self.continue_on_error = continue_on_error
        self.progress = progress or (lambda message: None)
        self._failed = threading.Event()
        # Only the main thread hears Ctrl-C: it sets this for the workers.
        self._stop = threading.Event()
        # Ctrl-C while the executor starts a worker leaves that worker out
        # of those it waits for: no move begins before all are started.
        self._workers_started = threading.Event()
        self._finished = itertools.count(1)

    @property
    def interrupted(self):
        """Whether Ctrl-C ended the run."""
        return self._stop.is_set()

    def run(self, moves):
        planned = [move for move in moves if move.result == 'planned']
        with concurrent.futures.ThreadPoolExecutor(
                self.max_parallel) as executor:
            try:
                results = executor.map(
                    lambda m: self._run_one(m, len(planned)), planned)
                self._workers_started.set()
                list(results)
            except KeyboardInterrupt:
                # Before leaving the with, which waits for the workers:
                # they start no move and stop polling.
                self._stop.set()
                self._workers_started.set()
                self.progress('interrupted: no further move starts, the '
                              'moves running are no longer waited for')
        for move in planned:
            if move.result == 'planned':
                # Never begun: cancelled, or its worker finds the stop.
                move.result = self.NOT_STARTED
        return moves

    def _run_one(self, move, total):
        self._workers_started.wait()
        if self._stop.is_set():
            move.result = self.NOT_STARTED
            return
        if self._failed.is_set() and not self.continue_on_error:
            move.result = ('not started: an earlier move failed '
                           '(--continue-on-error goes on)')
            return
        try:
            self._move(move)
        except exception.PcpuExtError as error:
            move.result = 'failed: %s' % error
        except Exception as error:
            # NOTE: every row is printed whatever happens: the moves done
            # or still running must not go unreported.
            move.result = 'failed: unexpected error: %s: %s' % (
                type(error).__name__, error)
        if move.failed:
            self._failed.set()
        self.progress('[%d/%d] %s: %s' % (
            next(self._finished), total, move.server, move.result))

    def _move(self, move):
        why_not = self._still_needed(move)
        if why_not:
            move.result = 'skipped: %s' % why_not
            return
        if self._stop.is_set():
            move.result = self.NOT_STARTED
            return
        self.progress('%s: %s %s from %s' % (
            move.server, 'live-migrating' if move.how == LIVE else
            'migrating', move.status, move.from_host))
        action, action_name = ACTIONS[move.how]
        try:
            self.compute.action(move.server, action)
        except exception.ActionRefused as error:
            move.to_host, move.after = move.from_host, move.before
            move.result = 'failed, not moved: %s' % error
            return
        server = self._wait(move)
        if server and server['status'] == 'VERIFY_RESIZE':
            server = self._confirm(move)
        if server:
            self._judge(move, server, action_name)

    def _still_needed(self, move):
        """Why a planned move is no longer wanted, read right before it."""
        planned = move.found.server
        server = self.compute.server(move.server)
        if server is None:
            return 'deleted since the run started'
        if server.get('OS-EXT-SRV-ATTR:host') != move.from_host:
            return 'moved to %s since the run started' % server.get(
                'OS-EXT-SRV-ATTR:host')
        if server['status'] != move.status:
            return 'now %s, was %s when the run started' % (
                server['status'], move.status)
        if server.get('flavor') != planned.get('flavor'):
            return 'resized since the run started'
        why_not = why_not_movable(server)
        if why_not:
            return why_not
        if move.found.provider['uuid'] not in \
                self.placement.consumer_allocations(move.server):
            return 'no longer holds resources of %s' % (
                move.found.provider['name'])
        return None

    def _wait(self, move, passing=()):
        """The server once no task runs on it and it left ``passing``.

        None if it is gone, or still busy after the timeout: the move's
        result says so.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            server = self.compute.server(move.server)
            if server is None:
                move.result = 'failed: the server was deleted during the move'
                return None
            if (server.get('OS-EXT-STS:task_state') is None and
                    server['status'] not in passing):
                return server
            if time.monotonic() > deadline:
                return self._left_running(move, server, (
                    'running: still %s (%s) after %d s' % (
                        server['status'], server['OS-EXT-STS:task_state'],
                        self.timeout)))
            # Not time.sleep: Ctrl-C must not wait for the timeout.
            if self._stop.wait(POLL_INTERVAL):
                return self._left_running(move, server, (
                    'interrupted while running: %s (%s) when last seen' % (
                        server['status'], server['OS-EXT-STS:task_state'])))

    @staticmethod
    def _left_running(move, server, state):
        """None: the move is no longer waited for; its row says why."""
        move.to_host = server.get('OS-EXT-SRV-ATTR:host')
        move.result = state + '; check it with openstack server show'
        return None

    def _confirm(self, move):
        """Confirm a cold move; one Nova confirmed already counts too."""
        try:
            self.compute.action(move.server, CONFIRM_RESIZE)
        except exception.ActionRefused as error:
            server = self.compute.server(move.server)
            if server and server['status'] != 'VERIFY_RESIZE':
                # [DEFAULT] resize_confirm_window confirmed it first.
                return self._wait(move)
            move.result = 'failed, moved but not confirmed: %s' % error
            return None
        # Confirming sets no task state: the status tells.
        return self._wait(move, ('VERIFY_RESIZE',))

    def _judge(self, move, server, action_name):
        """Healed: moved, back in its state, isolated where it is.

        On no hyperthreaded host, or, for the ``isolate`` thread policy,
        on a legacy one (the ``legacy_only`` mode's fallback), where Nova
        pins one thread per core.
        """
        move.to_host = server.get('OS-EXT-SRV-ATTR:host')
        allocations = self.placement.consumer_allocations(move.server)
        move.after = _cpus(clients.summed(allocations))
        if move.to_host == move.from_host or server['status'] != move.status:
            error = self.compute.action_error(move.server, action_name)
            move.result = 'failed, left %s on %s: %s' % (
                server['status'], move.to_host, error or (
                    'the server did not move' if move.to_host ==
                    move.from_host else 'it was %s before' % move.status))
        elif not all(self._isolated_on(move.found, rp_uuid)
                     for rp_uuid in allocations):
            move.result = 'failed: moved, but to a hyperthreaded host'
        else:
            move.result = 'healed'
            move.healed = True

    def _isolated_on(self, found, rp_uuid):
        """Whether a provider it holds resources of keeps it isolated."""
        if cloud_hosts.HYPERTHREADING not in self.placement.traits(rp_uuid):
            return True
        _generation, inventories = self.placement.inventories(rp_uuid)
        return found.isolate and orc.PCPU not in inventories
