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

"""Provider updates as one nova-compute makes them.

A compute owns 1, 100 or 1,000 nodes (an ironic compute owns many). Three
variants of it take turns, round by round: Nova's report client (stock),
the ``serialized`` wrapper, and the wrapper with one lock for all trees
(global lock). Each runs what nova-compute runs, through Nova's own code:

* the periodic resource update: every node in turn, each under the
  compute's fair resource semaphore, through
  ``ResourceTracker._update_to_placement``; the driver's inventory changes
  at every report (``reserved`` flips, as a node going in and out of
  maintenance), so every update writes;
* instance claims under the same semaphore, each followed by its node's
  placement update;
* the operator's disable/enable calls, made as the API makes them: the
  service record saved, then the compute's ``set_host_enabled`` path
  (``ComputeManager._update_compute_provider_status`` over every node).
  The RPC hop itself is left out: it costs the same for every variant.

Time is compressed: the periodic runs back to back and the calls follow
each other within 0.05 to 0.2 s. A round ends when the calls are made; the
periodic and the claims stop after their current update and placement is
read. An update is lost when its node's last successful write is not what
placement shows.
"""

import nova.tests.functional  # noqa: F401  isort:skip

import collections
import itertools
import random
import threading
import time
import types
import uuid

from nova.compute import manager
from nova.compute import resource_tracker
from nova import objects
from nova.scheduler.client import report
from oslo_concurrency import lockutils

from nova_pcpu_ext import activation
from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests.perf import base
from nova_pcpu_ext.tests.perf import scheduling
from nova_pcpu_ext.tests.perf import stats

VARIANTS = ('stock', 'extension', 'global_lock')
#: Seconds between two instance claims.
CLAIM_INTERVAL = 0.2
#: Seconds between two status calls: (shortest, longest).
HOLD = (0.05, 0.2)
DISABLED = 'COMPUTE_STATUS_DISABLED'

SerializedClient = activation.compose(
    report.SchedulerReportClient,
    [serialized_client.SerializedReportClientMixin])


class GlobalLocks(serialized_client.ProviderLocks):
    """Every tree behind one lock: the simple alternative."""

    def _hold_one(self, root_uuid, operation, deadline):
        return super()._hold_one('all', operation, deadline)


def status_calls(nodes):
    """Calls per variant: many where a call is quick, for the p99."""
    return max(4, min(200, 2000 // nodes))


class FlippingDriver(object):
    """The virt driver's part: a node whose reserved flips per report."""

    def __init__(self):
        self.reported = {}

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        reserved = 1 - self.reported.get(nodename, 1)
        provider_tree.update_inventory(nodename, {'VCPU': {
            'total': 64, 'reserved': reserved, 'min_unit': 1,
            'max_unit': 64, 'step_size': 1, 'allocation_ratio': 4.0}})
        self.reported[nodename] = reserved

    def capabilities_as_traits(self):
        return {}


class Compute(object):
    """One nova-compute: its nodes, report client and code paths."""

    def __init__(self, variant, ctxt, nodes, driver=None):
        self.ctxt = ctxt
        self.host = 'compute-%s' % variant
        client = (report.SchedulerReportClient() if variant == 'stock'
                  else SerializedClient())
        if variant == 'global_lock':
            client.provider_locks = GlobalLocks()
        self.client = client
        self.driver = driver or FlippingDriver()
        self.rt = resource_tracker.ResourceTracker(
            self.host, self.driver, client)
        self.nodes = [objects.ComputeNode(
            uuid=str(uuid.uuid4()),
            hypervisor_hostname='%s-node-%04d' % (self.host, i))
            for i in range(nodes)]
        self.rt.compute_nodes = {n.hypervisor_hostname: n for n in self.nodes}
        self.service = objects.Service(ctxt, host=self.host,
                                       binary='nova-compute', topic='compute')
        self.service.create()
        self.semaphore = lockutils.internal_fair_lock(
            'compute_resources-%s' % variant)
        self._update = resource_tracker.ResourceTracker._update_to_placement
        status = manager.ComputeVirtAPI.update_compute_provider_status
        self._status_change = (
            manager.ComputeManager._update_compute_provider_status)
        if variant != 'stock':
            self._update = serialized_client.serialize_update(self._update)
            status = serialized_client.serialize_status_update(status)
            self._status_change = serialized_client.bound_status_change(
                self._status_change)
        self.compute_manager = types.SimpleNamespace(
            host=self.host, rt=self.rt, reportclient=client,
            virtapi=self._virtapi(client, status))
        self.periodic_order = itertools.cycle(self.nodes)
        # node UUID: what placement must show; absent after a failure
        self.expected_reserved = {}
        self.status_written = set()
        self.reset()

    def _virtapi(self, client, status):
        compute = self

        class VirtAPI(manager.ComputeVirtAPI):
            def update_compute_provider_status(self, context, rp_uuid,
                                               enabled):
                compute.status_written.discard(rp_uuid)
                try:
                    status(self, context, rp_uuid, enabled)
                except Exception as error:
                    compute.failures['status ' + type(error).__name__] += 1
                    raise
                compute.status_written.add(rp_uuid)
                compute.writes += 1

        return VirtAPI(types.SimpleNamespace(reportclient=client))

    def reset(self):
        self.writes = 0
        self.failures = collections.Counter()
        self.call_seconds = []

    def update_node(self, node):
        """One node's placement update, under the resource semaphore."""
        with self.semaphore.write_lock():
            try:
                self._update(self.rt, self.ctxt, node, False)
            except Exception as error:
                # The periodic logs it and goes on to the next node.
                self.failures['update ' + type(error).__name__] += 1
                self.expected_reserved.pop(node.uuid, None)
                return
            self.writes += 1
            self.expected_reserved[node.uuid] = self.driver.reported[
                node.hypervisor_hostname]

    def set_status(self, disabled):
        """An operator's disable/enable call, until the compute answers."""
        started = time.perf_counter()
        self.service.disabled = disabled
        self.service.save()
        self._status_change(self.compute_manager, self.ctxt, not disabled)
        self.call_seconds.append(time.perf_counter() - started)

    def lost(self, placement):
        """Writes placement no longer shows, now that nothing writes."""
        disabled = {rp['uuid'] for rp in placement.call(
            'GET', '/resource_providers?required=%s' % DISABLED)[
                'resource_providers']}
        lost = 0
        for node in self.nodes:
            if (node.uuid in self.status_written and
                    (node.uuid in disabled) != self.service.disabled):
                lost += 1
            if node.uuid in self.expected_reserved:
                inventory = placement.call(
                    'GET', '/resource_providers/%s/inventories/VCPU' %
                    node.uuid)
                if inventory['reserved'] != self.expected_reserved[node.uuid]:
                    lost += 1
        return lost


def run_round(compute, calls, seed):
    """Writers of one compute until ``calls`` status calls are made.

    :returns: seconds taken
    """
    stop = threading.Event()
    rng = random.Random(seed)
    claims_rng = random.Random(seed)

    def periodic():
        while not stop.is_set():
            compute.update_node(next(compute.periodic_order))

    def claims():
        while not stop.wait(CLAIM_INTERVAL):
            compute.update_node(claims_rng.choice(compute.nodes))

    threads = [threading.Thread(target=periodic),
               threading.Thread(target=claims)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for _ in range(calls):
        stop.wait(rng.uniform(*HOLD))
        compute.set_status(not compute.service.disabled)
    stop.set()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def run(ctxt, placement, nodes, calls):
    """Figures for computes of ``nodes`` nodes, ``calls`` status calls."""
    computes = {variant: Compute(variant, ctxt, nodes)
                for variant in VARIANTS}
    for compute in computes.values():
        for node in compute.nodes:
            compute.update_node(node)
        compute.reset()
    rounds = max(2, min(20, calls // 2))
    goodput = {variant: [] for variant in VARIANTS}
    lost = dict.fromkeys(VARIANTS, 0)
    for round_no in range(rounds):
        order = VARIANTS if round_no % 2 else VARIANTS[::-1]
        for variant in order:
            compute = computes[variant]
            writes = compute.writes
            seconds = run_round(compute, calls // rounds, seed=round_no)
            round_lost = compute.lost(placement)
            lost[variant] += round_lost
            goodput[variant].append(
                (compute.writes - writes - round_lost) / seconds)
    calls_ms = {variant: computes[variant].call_seconds
                for variant in VARIANTS}
    return {
        'goodput_per_s': stats.compare(goodput, stats.mean),
        'lost_updates': stats.single(lost),
        'failed_updates': dict(stats.single({
            variant: sum(computes[variant].failures.values())
            for variant in VARIANTS}), kinds={
                variant: dict(computes[variant].failures)
                for variant in VARIANTS}),
        'status_call_median_ms': stats.compare(calls_ms, stats.median, 1000),
        'status_call_p99_ms': stats.compare(calls_ms, stats.p99, 1000),
    }


class ProviderUpdatesBench(base.BenchCase):
    """One benchmark run for computes of ``nodes`` nodes."""

    nodes = 1
    calls = None

    def test_provider_updates(self):
        placement = scheduling.Placement(self.placement_server.endpoint)
        self.results[('provider_updates', self.nodes, None)] = run(
            self.cell_context(), placement,
            self.nodes, self.calls or status_calls(self.nodes))
