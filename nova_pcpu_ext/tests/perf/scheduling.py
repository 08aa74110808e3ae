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

"""Scheduling cost: ``SchedulerManager.select_destinations``, stock Nova
and Nova with the request filter, interleaved on the same data.

Placement is a real server on loopback seeded with N compute node
providers; Nova's cell database holds the matching ComputeNode records
(NUMA topology included), so the real host manager, filters (with
NUMATopologyFilter) and weighers run. With more hosts than Nova's default
``[scheduler] max_placement_results``, each mix runs capped and uncapped.
"""

import nova.tests.functional  # noqa: F401  isort:skip

import time
import tracemalloc
import uuid

import fixtures
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import host_manager
from nova.scheduler import manager
from nova.virt import hardware
import oslo_messaging as messaging
import requests

from nova_pcpu_ext import activation
from nova_pcpu_ext import scheduler
from nova_pcpu_ext.tests.perf import base
from nova_pcpu_ext.tests.perf import stats
from nova_pcpu_ext.tests import placement_server

#: Request mixes: flavor extra specs.
MIXES = {
    'isolate': {'hw:cpu_policy': 'dedicated',
                'hw:cpu_thread_policy': 'isolate'},
    'pinned': {'hw:cpu_policy': 'dedicated'},
    'unpinned': {},
}

#: Nova's default ``[scheduler] max_placement_results``.
NOVA_RESULTS_LIMIT = 1000

CPUS = 16
MEMORY_MB = 65536
DISK_GB = 1000

#: Host kinds, in the proportions of the mix: (name, share).
HOST_KINDS = (('new_ht', 0.4), ('new_no_ht', 0.2), ('legacy', 0.4))


def _host_kind(index, total):
    position = index / total
    bound = 0.0
    for kind, share in HOST_KINDS:
        bound += share
        if position < bound:
            return kind
    return HOST_KINDS[-1][0]


def _numa_topology(kind):
    cpus = set(range(CPUS))
    threads = 1 if kind == 'new_no_ht' else 2
    siblings = [set(range(i, i + threads)) for i in range(0, CPUS, threads)]
    if kind == 'legacy':
        cpuset = pcpuset = cpus
    else:
        pcpuset, cpuset = set(range(CPUS // 2)), set(range(CPUS // 2, CPUS))
    return objects.NUMATopology(cells=[objects.NUMACell(
        id=0, cpuset=cpuset, pcpuset=pcpuset, memory=MEMORY_MB,
        cpu_usage=0, memory_usage=0, pinned_cpus=set(),
        siblings=siblings, socket=0,
        mempages=[objects.NUMAPagesTopology(
            size_kb=4, total=MEMORY_MB * 256, used=0, reserved=0)],
        network_metadata=objects.NetworkMetadata(
            physnets=set(), tunneled=False))])


def _inventory(kind):
    inventory = {
        'MEMORY_MB': {'total': MEMORY_MB, 'allocation_ratio': 1.0},
        'DISK_GB': {'total': DISK_GB, 'allocation_ratio': 1.0},
    }
    if kind == 'legacy':
        inventory['VCPU'] = {'total': CPUS, 'allocation_ratio': 1.0}
    else:
        inventory['PCPU'] = {'total': CPUS // 2, 'allocation_ratio': 1.0}
        inventory['VCPU'] = {'total': CPUS // 2, 'allocation_ratio': 4.0}
    return inventory


class Placement(object):
    """Just enough of the placement API to seed and clean up."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.session = requests.Session()
        self.session.headers.update({
            'x-auth-token': placement_server.TOKEN,
            'openstack-api-version': 'placement 1.39'})

    def call(self, method, path, **kwargs):
        response = self.session.request(method, self.endpoint + path,
                                        **kwargs)
        response.raise_for_status()
        return response.json() if response.content else None

    def create_compute(self, rp_uuid, name, kind):
        rp = self.call('POST', '/resource_providers',
                       json={'uuid': rp_uuid, 'name': name})
        rp = self.call('PUT', '/resource_providers/%s/inventories' % rp_uuid,
                       json={'resource_provider_generation': rp['generation'],
                             'inventories': _inventory(kind)})
        traits = ['COMPUTE_NODE', 'OWNER_NOVA'] + (
            [] if kind == 'new_no_ht' else ['HW_CPU_HYPERTHREADING'])
        self.call('PUT', '/resource_providers/%s/traits' % rp_uuid,
                  json={'resource_provider_generation':
                        rp['resource_provider_generation'], 'traits': traits})

    def delete_allocations(self, consumer):
        response = self.session.delete(
            self.endpoint + '/allocations/%s' % consumer)
        if response.status_code != 404:  # 404: nothing was claimed
            response.raise_for_status()


class Spies(fixtures.Fixture):
    """Counts placement queries, candidates and hosts filtered per call."""

    def _setUp(self):
        self.reset()
        candidates = report.SchedulerReportClient.get_allocation_candidates
        filtered = host_manager.HostManager.get_filtered_hosts

        def get_allocation_candidates(client, context, resources):
            result = candidates(client, context, resources)
            self.queries += 1
            self.candidates += len(result[0]) if result[0] else 0
            return result

        def get_filtered_hosts(manager, hosts, spec_obj, index=0):
            hosts = list(hosts)
            self.hosts_filtered += len(hosts)
            return filtered(manager, hosts, spec_obj, index)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.'
            'get_allocation_candidates', get_allocation_candidates))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.host_manager.HostManager.get_filtered_hosts',
            get_filtered_hosts))

    def reset(self):
        self.queries = self.candidates = self.hosts_filtered = 0


class SchedulingBench(base.BenchCase):
    """One benchmark run for ``hosts`` compute nodes."""

    hosts = 100
    iterations = 20

    def setUp(self):
        super().setUp()
        self.flags(group='filter_scheduler', enabled_filters=[
            'ComputeFilter', 'ImagePropertiesFilter', 'NUMATopologyFilter'],
            host_subset_size=1)
        self.placement = Placement(self.placement_server.endpoint)
        self.ctxt = nova_context.get_admin_context()
        self.addCleanup(activation.deactivate)

    def seed(self):
        cell = self.cell_mappings['cell1']
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            for i in range(self.hosts):
                kind = _host_kind(i, self.hosts)
                host = 'host-%05d' % i
                rp_uuid = str(uuid.uuid4())
                self.placement.create_compute(rp_uuid, host, kind)
                service = objects.Service(cctxt, host=host,
                                          binary='nova-compute',
                                          topic='compute')
                service.create()
                objects.HostMapping(self.ctxt, host=host,
                                    cell_mapping=cell).create()
                objects.ComputeNode(
                    cctxt, uuid=rp_uuid, host=host, hypervisor_hostname=host,
                    service_id=service.id, vcpus=CPUS, memory_mb=MEMORY_MB,
                    local_gb=DISK_GB, vcpus_used=0, memory_mb_used=0,
                    local_gb_used=0, free_ram_mb=MEMORY_MB,
                    free_disk_gb=DISK_GB, current_workload=0, running_vms=0,
                    disk_available_least=DISK_GB, hypervisor_type='QEMU',
                    hypervisor_version=9000000, cpu_info='{}',
                    numa_topology=_numa_topology(kind)._to_json(),
                    cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0,
                    disk_allocation_ratio=1.0, stats={},
                    supported_hv_specs=[]).create()

    def request_spec(self, extra_specs):
        flavor = objects.Flavor(
            id=1, flavorid='bench', name='bench', vcpus=2, memory_mb=2048,
            root_gb=10, ephemeral_gb=0, swap=0, extra_specs=extra_specs,
            disabled=False, is_public=True, rxtx_factor=1.0, vcpu_weight=0,
            description=None)
        image = objects.ImageMeta(properties=objects.ImageMetaProps())
        instance_uuid = str(uuid.uuid4())
        spec = objects.RequestSpec.from_components(
            self.ctxt, instance_uuid, image, flavor,
            hardware.numa_get_constraints(flavor, image), None, {}, None,
            None, project_id='bench', user_id='bench')
        spec.is_bfv = False
        return spec, instance_uuid

    def select(self, scheduler_manager, spies, extra_specs, traced=False):
        spec, instance_uuid = self.request_spec(extra_specs)
        spies.reset()
        if traced:
            tracemalloc.start()
        started = time.perf_counter()
        try:
            scheduler_manager.select_destinations(
                self.ctxt, spec_obj=spec, instance_uuids=[instance_uuid],
                return_objects=True)
        except messaging.ExpectedException as error:
            # NoValidHost is an outcome, too.
            if not isinstance(error.exc_info[1], exception.NoValidHost):
                raise
        elapsed = time.perf_counter() - started
        peak = None
        if traced:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        self.placement.delete_allocations(instance_uuid)
        return elapsed, spies.queries, spies.candidates, \
            spies.hosts_filtered, peak

    def test_scheduling(self):
        self.seed()
        spies = self.useFixture(Spies())
        scheduler_manager = manager.SchedulerManager()
        # As if every compute had sent its instance list (what
        # track_instance_changes does in a running cloud): no per-host
        # instance query on each request.
        for i in range(self.hosts):
            scheduler_manager.host_manager._instance_info['host-%05d' % i] = {
                'instances': {}, 'updated': True}
        for limit in limits(self.hosts):
            self.flags(max_placement_results=limit, group='scheduler')
            for mix, extra_specs in MIXES.items():
                self.results[(mix, self.hosts, limit)] = self.compare(
                    scheduler_manager, spies, extra_specs)

    def compare(self, scheduler_manager, spies, extra_specs):
        """Figures of one request mix, stock and extension interleaved."""
        variants = ('stock', 'extension')
        samples = {variant: [] for variant in variants}
        # Warm up both paths (DB caches, HTTP connections).
        for variant in variants:
            self._toggle(variant)
            self.select(scheduler_manager, spies, extra_specs)
        for i in range(self.iterations):
            # Alternate which variant goes first.
            for variant in variants[::1 if i % 2 else -1]:
                self._toggle(variant)
                samples[variant].append(self.select(
                    scheduler_manager, spies, extra_specs))
        # Memory apart: tracing slows the calls it measures.
        peaks = {}
        for variant in variants:
            self._toggle(variant)
            peaks[variant] = self.select(
                scheduler_manager, spies, extra_specs, traced=True)[4] / 1024
        return _figures(samples, peaks)

    def _toggle(self, variant):
        activation.deactivate()
        if variant == 'extension':
            scheduler.activate_plugins()


def limits(hosts):
    """``[scheduler] max_placement_results`` values to run with.

    Nova's default; where there are more hosts than that, also none
    binding (the host count).
    """
    return (NOVA_RESULTS_LIMIT,) + (
        (hosts,) if hosts > NOVA_RESULTS_LIMIT else ())


def _figures(samples, peaks):
    latency = {variant: [sample[0] for sample in values]
               for variant, values in samples.items()}

    def averaged(index):
        return stats.single({
            variant: stats.mean([sample[index] for sample in values])
            for variant, values in samples.items()})

    return {
        'latency_median_ms': stats.compare(latency, stats.median, 1000),
        'latency_p95_ms': stats.compare(latency, stats.p95, 1000),
        'placement_queries': averaged(1),
        'allocation_candidates': averaged(2),
        'hosts_filtered': averaged(3),
        'peak_traced_kib': stats.single(peaks),
    }
