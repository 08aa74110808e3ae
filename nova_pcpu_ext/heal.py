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

"""Move isolate servers off ``VCPU`` of hyperthreaded hosts (bug 1889633).

Each server found by :func:`nova_pcpu_ext.audit.isolate_servers` is moved
through the Compute API, live by default, so the scheduler places it again.
With the ``isolate_vcpu_fallback`` request filter active, only hosts with
``PCPU`` and without hyperthreads are candidates. Placement then tells
whether it worked: the server holds ``PCPU`` and no ``VCPU``. A server that
cannot move stays where it was, running; nothing is deleted.
"""

import concurrent.futures
import dataclasses
import itertools
import threading
import time

import os_resource_classes as orc

from nova_pcpu_ext import exception

LIVE_MIGRATE = {'os-migrateLive': {'host': None, 'block_migration': 'auto'}}
COLD_MIGRATE = {'migrate': None}
CONFIRM_RESIZE = {'confirmResize': None}
#: The instance actions Nova records for them.
ACTION_NAMES = {'os-migrateLive': 'live-migration', 'migrate': 'migrate'}
#: Seconds a move may take before it is reported as unfinished.
MOVE_TIMEOUT = 900
POLL_INTERVAL = 2
CPU_CLASSES = (orc.PCPU, orc.VCPU)


@dataclasses.dataclass
class Move:
    server: str
    from_host: str
    before: str
    to_host: str = ''
    after: str = ''
    result: str = ''
    healed: bool = False


def _cpus(resources):
    return ', '.join('%s:%d' % (rc, resources[rc]) for rc in CPU_CLASSES
                     if resources.get(rc))


def plan(isolate_servers, destinations):
    """One :class:`Move` per server, its result what would be done."""
    moves = []
    for found in isolate_servers:
        move = Move(found.server['id'], found.host,
                    _cpus({orc.VCPU: found.vcpus}))
        move.result = ('no eligible destination: no host without '
                       'hyperthreads has a free PCPU' if not destinations
                       else 'planned')
        moves.append(move)
    return moves


class Healer(object):
    """Runs the planned moves, ``max_parallel`` at a time."""

    def __init__(self, placement, compute, cold=False, max_parallel=1,
                 continue_on_error=False, progress=None):
        self.placement = placement
        self.compute = compute
        self.cold = cold
        self.max_parallel = max_parallel
        self.continue_on_error = continue_on_error
        self.progress = progress or (lambda message: None)
        self._failed = threading.Event()
        self._finished = itertools.count(1)

    def run(self, moves):
        planned = [move for move in moves if move.result == 'planned']
        with concurrent.futures.ThreadPoolExecutor(
                self.max_parallel) as executor:
            list(executor.map(lambda m: self._run_one(m, len(planned)),
                              planned))
        return moves

    def _run_one(self, move, total):
        if self._failed.is_set() and not self.continue_on_error:
            move.result = ('not started: an earlier move failed '
                           '(--continue-on-error goes on)')
            return
        self.progress('%s: %s from %s' % (
            move.server, 'migrating' if self.cold else 'live-migrating',
            move.from_host))
        try:
            self._move(move)
        except exception.ServiceError as error:
            move.result = 'failed: %s' % error
        if not move.healed:
            self._failed.set()
        self.progress('[%d/%d] %s: %s' % (
            next(self._finished), total, move.server, move.result))

    def _move(self, move):
        action = COLD_MIGRATE if self.cold else LIVE_MIGRATE
        try:
            self.compute.action(move.server, action)
        except exception.ActionRefused as error:
            move.to_host, move.after = move.from_host, move.before
            move.result = 'failed, not moved: %s' % error
            return
        server = self._wait(move.server)
        if self.cold and server['status'] == 'VERIFY_RESIZE':
            self.compute.action(move.server, CONFIRM_RESIZE)
            # Confirming sets no task state: the status tells.
            server = self._wait(move.server, ('VERIFY_RESIZE',))
        move.to_host = server.get('OS-EXT-SRV-ATTR:host')
        resources = self.placement.consumer_resources(move.server)
        move.after = _cpus(resources)
        if move.to_host == move.from_host or server['status'] != 'ACTIVE':
            error = self.compute.action_error(
                move.server, ACTION_NAMES[next(iter(action))])
            move.result = 'failed, left %s on %s: %s' % (
                server['status'], move.to_host,
                error or 'the server did not move')
        elif resources.get(orc.VCPU) or not resources.get(orc.PCPU):
            move.result = 'failed: moved, but still consumes VCPU'
        else:
            move.result = 'healed'
            move.healed = True

    def _wait(self, uuid, passing=()):
        """The server once no task runs on it and it left ``passing``."""
        deadline = time.monotonic() + MOVE_TIMEOUT
        while True:
            server = self.compute.server(uuid)
            if (server.get('OS-EXT-STS:task_state') is None and
                    server['status'] not in passing):
                return server
            if time.monotonic() > deadline:
                raise exception.ServiceError(
                    'compute: server %s is still %s (%s) after %d s: check '
                    'it with openstack server show' % (
                        uuid, server['status'],
                        server['OS-EXT-STS:task_state'], MOVE_TIMEOUT))
            time.sleep(POLL_INTERVAL)
