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

"""Provider update cost: one compute owning 1, 100 or 1,000 provider trees
(as ironic does), updated the way the resource tracker does while a
status writer toggles traits, with Nova's report client, the serialized
wrapper, and the wrapper with a single global lock, interleaved.
"""

import nova.tests.functional  # noqa: F401  isort:skip

import contextlib
import statistics
import threading
import time
import uuid

from nova import context as nova_context
from nova import exception
from nova.scheduler.client import report

from nova_pcpu_ext import activation
from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests.perf import base

UPDATES_PER_ROUND = 50
WORKERS = 4
#: Seconds between two status changes (operators, not a busy loop).
STATUS_INTERVAL = 0.05


class TimedLocks(serialized_client.ProviderLocks):
    """Records how long each acquisition waited."""

    def __init__(self):
        super().__init__()
        self.waits = []

    @contextlib.contextmanager
    def _hold_one(self, root_uuid, operation):
        started = time.perf_counter()
        with super()._hold_one(root_uuid, operation):
            self.waits.append(time.perf_counter() - started)
            yield


class GlobalLocks(TimedLocks):
    """Every tree behind one lock: the simple alternative."""

    def _hold_one(self, root_uuid, operation):
        return super()._hold_one('all', operation)


SerializedClient = activation.compose(
    report.SchedulerReportClient,
    [serialized_client.SerializedReportClientMixin])


class _Variant(object):

    def __init__(self, name, client, locks=None):
        self.name = name
        self.client = client
        if locks is not None:
            client.provider_locks = locks
        self.locks = locks
        self.updates = 0
        self.conflicts = 0
        self.seconds = 0.0

    def tree_lock(self, rp_uuid, operation):
        if self.locks is None:
            return contextlib.nullcontext()
        return self.client.provider_lock(rp_uuid, operation)


def _update(variant, ctxt, rp_uuid, reserved):
    """What ResourceTracker._update_to_placement does for one node."""
    # Nova 2024.1 snapshots the whole cache, later Nova the node's subtree.
    snapshot = getattr(variant.client, 'get_provider_subtree_and_ensure_root',
                       variant.client.get_provider_tree_and_ensure_root)
    with variant.tree_lock(rp_uuid, 'update'):
        tree = snapshot(ctxt, rp_uuid, name=rp_uuid)
        inventory = {'VCPU': {'total': 64, 'reserved': reserved,
                              'min_unit': 1, 'max_unit': 64, 'step_size': 1,
                              'allocation_ratio': 4.0}}
        tree.update_inventory(rp_uuid, inventory)
        variant.client.update_from_provider_tree(ctxt, tree)


def _toggle_status(variant, ctxt, rp_uuid, disabled):
    """What ComputeVirtAPI.update_compute_provider_status does."""
    with variant.tree_lock(rp_uuid, 'status'):
        traits = variant.client.get_provider_traits(ctxt, rp_uuid)
        wanted = set(traits.traits)
        if disabled:
            wanted.add('COMPUTE_STATUS_DISABLED')
        else:
            wanted.discard('COMPUTE_STATUS_DISABLED')
        variant.client.set_traits_for_provider(
            ctxt, rp_uuid, wanted, generation=traits.generation)


def _round(variant, ctxt, providers, round_no):
    """One round of updates by the workers, a status writer alongside.

    UPDATES_PER_ROUND updates are spread over the providers; the round
    ends when the workers are done.
    """
    per_worker = [providers[i::WORKERS] for i in range(WORKERS)
                  if providers[i::WORKERS]]
    stop = threading.Event()
    counts = [0] * len(per_worker)

    def work(index, mine):
        n = 0
        while n < UPDATES_PER_ROUND // len(per_worker):
            try:
                _update(variant, ctxt, mine[n % len(mine)], (round_no + n) % 2)
                counts[index] += 1
            except exception.ResourceProviderUpdateConflict:
                variant.conflicts += 1
            n += 1

    def status():
        n = 0
        while not stop.is_set():
            try:
                _toggle_status(variant, ctxt, providers[n % len(providers)],
                               n % 2 == 0)
            except (exception.ResourceProviderUpdateConflict,
                    exception.ResourceProviderUpdateFailed, ValueError):
                # Lost races of the unserialized client, or a cache
                # cleared under it: a failed status update.
                variant.conflicts += 1
            n += 1
            stop.wait(STATUS_INTERVAL)

    status_thread = threading.Thread(target=status)
    workers = [threading.Thread(target=work, args=(i, mine))
               for i, mine in enumerate(per_worker)]
    started = time.perf_counter()
    status_thread.start()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    variant.seconds += time.perf_counter() - started
    stop.set()
    status_thread.join()
    variant.updates += sum(counts)


def run(providers, rounds):
    """Results for one compute owning ``providers`` trees."""
    ctxt = nova_context.get_admin_context()
    variants = [
        _Variant('stock', report.SchedulerReportClient()),
        _Variant('extension', SerializedClient(), TimedLocks()),
        _Variant('global_lock', SerializedClient(), GlobalLocks()),
    ]
    trees = {v.name: [str(uuid.uuid4()) for _ in range(providers)]
             for v in variants}
    for variant in variants:
        for rp_uuid in trees[variant.name]:
            _update(variant, ctxt, rp_uuid, 0)
        variant.updates = variant.conflicts = 0
        variant.seconds = 0.0
        if variant.locks is not None:
            variant.locks.waits = []
    for round_no in range(rounds):
        order = variants if round_no % 2 else variants[::-1]
        for variant in order:
            _round(variant, ctxt, trees[variant.name], round_no)
    return {variant.name: _summarize(variant) for variant in variants}


def _summarize(variant):
    result = {'updates_per_s': variant.updates / variant.seconds,
              'conflicts': variant.conflicts}
    if variant.locks is not None and variant.locks.waits:
        waits = sorted(variant.locks.waits)
        result['lock_wait_p50_ms'] = statistics.median(waits) * 1000
        result['lock_wait_p99_ms'] = waits[
            min(len(waits) - 1, int(len(waits) * 0.99))] * 1000
    return result


class ProviderUpdatesBench(base.BenchCase):
    """One benchmark run for ``providers`` trees."""

    providers = 1
    rounds = 4

    def test_provider_updates(self):
        self.results[('provider_updates', self.providers)] = run(
            self.providers, self.rounds)
