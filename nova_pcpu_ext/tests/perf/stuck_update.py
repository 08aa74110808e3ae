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

"""Operations behind a stuck resource update, on a compute of N nodes.

The compute of :mod:`~nova_pcpu_ext.tests.perf.provider_updates` (stock
Nova's report client, or the ``serialized`` wrapper), every node's tree
cached. The resource update of its first node is held in the virt
driver's ``update_provider_tree``, inside the snapshot-to-flush, as an
update waiting for nova-conductor is; it is let go once the operation
measured has returned, past ``[pcpu_ext] provider_lock_timeout``
(:data:`LOCK_TIMEOUT` here). Meanwhile, in turn:

* **status change**: the operator's disable (or enable) call as the API
  makes it: the service record saved, then
  ``ComputeManager._update_compute_provider_status`` over every node;
* **cache clear**: ``clear_provider_cache()``, what nova-compute's SIGHUP
  (``ComputeManager.reset``) and a new placement session call.

The variants alternate, one sample each per round. Between rounds the
cache is filled again from placement.
"""

import nova.tests.functional  # noqa: F401  isort:skip

import threading
import time

from nova_pcpu_ext.tests.perf import base
from nova_pcpu_ext.tests.perf import provider_updates
from nova_pcpu_ext.tests.perf import stats

VARIANTS = ('stock', 'extension')
#: ``[pcpu_ext] provider_lock_timeout`` for the extension, seconds.
LOCK_TIMEOUT = 1.0
#: Seconds any wait of the benchmark may take before it counts as stuck.
TIMEOUT = 120
#: Rounds, each one sample of every figure per variant.
SAMPLES = 6


class StuckDriver(provider_updates.FlippingDriver):
    """Holds the update of one node, once armed, until released."""

    def __init__(self):
        super().__init__()
        self.stuck_node = None
        self.reached = threading.Event()
        self.release = threading.Event()

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        if nodename == self.stuck_node:
            self.stuck_node = None
            self.reached.set()
            self.release.wait(TIMEOUT)
        super().update_provider_tree(provider_tree, nodename, allocations)


def behind_stuck_update(compute, operation):
    """Seconds ``operation()`` takes while node 0's update is held."""
    driver = compute.driver
    driver.reached.clear()
    driver.release.clear()
    driver.stuck_node = compute.nodes[0].hypervisor_hostname
    update = threading.Thread(target=compute.update_node,
                              args=(compute.nodes[0],))
    update.start()
    try:
        if not driver.reached.wait(TIMEOUT):
            raise RuntimeError('the resource update was not held')
        started = time.perf_counter()
        operation()
        return time.perf_counter() - started
    finally:
        driver.release.set()
        update.join(TIMEOUT)


def fill_cache(compute):
    """Every node's tree in the cache again, read from placement."""
    for node in compute.nodes:
        compute.client.get_provider_tree_and_ensure_root(
            compute.ctxt, node.uuid)


def run(ctxt, nodes, samples):
    """Figures for a compute of ``nodes`` nodes, ``samples`` rounds."""
    computes = {variant: provider_updates.Compute(
        variant, ctxt, nodes, driver=StuckDriver()) for variant in VARIANTS}
    for compute in computes.values():
        for node in compute.nodes:
            compute.update_node(node)
        compute.reset()
    status = {variant: [] for variant in VARIANTS}
    clear = {variant: [] for variant in VARIANTS}
    for round_no in range(samples):
        order = VARIANTS if round_no % 2 else VARIANTS[::-1]
        for variant in order:
            compute = computes[variant]
            disabled = not compute.service.disabled
            status[variant].append(behind_stuck_update(
                compute, lambda: compute.set_status(disabled)))
            clear[variant].append(behind_stuck_update(
                compute, compute.client.clear_provider_cache))
            fill_cache(compute)
    return {
        'status_change_median_ms': stats.compare(status, stats.median, 1000),
        'status_change_max_ms': stats.compare(status, max, 1000),
        'cache_clear_median_ms': stats.compare(clear, stats.median, 1000),
        'cache_clear_max_ms': stats.compare(clear, max, 1000),
        'failed_updates': dict(stats.single({
            variant: sum(computes[variant].failures.values())
            for variant in VARIANTS}), kinds={
                variant: dict(computes[variant].failures)
                for variant in VARIANTS}),
    }


class StuckUpdateBench(base.BenchCase):
    """One benchmark run for a compute of ``nodes`` nodes."""

    nodes = 100
    samples = SAMPLES

    def test_stuck_update(self):
        self.flags(provider_lock_timeout=LOCK_TIMEOUT, group='pcpu_ext')
        self.results[('stuck_update', self.nodes, None)] = run(
            self.cell_context(), self.nodes, self.samples)
