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
beside Nova with the request filter in each ``[pcpu_ext]
isolate_fallback_mode``, interleaved on the same data.

Placement is a real server on loopback seeded with N compute node
providers, new-style hosts (``PCPU`` and ``VCPU``, with the trait the
``pcpu_trait`` mixin reports) and legacy ones (``VCPU`` only), each with and
without hyperthreads; Nova's cell database holds the matching ComputeNode
records (NUMA topology included), so the real host manager, filters (with
NUMATopologyFilter and its late NUMA check) and weighers run. With more
hosts than Nova's default ``[scheduler] max_placement_results``, each mix
runs capped and uncapped. In the cloud with the most legacy hosts,
``isolate`` runs again once the new-style hosts without hyperthreads are
full, and once every host without hyperthreads is.
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
from nova_pcpu_ext import pcpu_trait
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

#: The variants, stock first: stock Nova, then Nova with the request
#: filter in each ``[pcpu_ext] isolate_fallback_mode``.
VARIANTS = ('stock', 'drop', 'legacy_only')
MODES = VARIANTS[1:]

#: Legacy hosts' share of the cloud, per cent, by default.
LEGACY_SHARES = (0, 10, 50)

#: New-style hosts without hyperthreads among the new-style hosts (20 of
#: 60 in the original mix); the others have hyperthreads.
NEW_NO_HT_SHARE = 1 / 3

#: What is full in the fill states, cumulative: (state, kinds filled).
FILL_STATES = (('new_no_ht', ('new_no_ht',)),
               ('no_ht', ('new_no_ht', 'legacy_no_ht')))

NEW_STYLE = ('new_ht', 'new_no_ht')
HYPERTHREADED = ('new_ht', 'legacy_ht')


def host_kinds(hosts, legacy_pct):
    """The kind of each host, in order.

    Legacy hosts half with hyperthreads, half without; new-style ones a
    third without, the rest with.
    """
    legacy = round(hosts * legacy_pct / 100)
    legacy_ht = (legacy + 1) // 2
    new_no_ht = round((hosts - legacy) * NEW_NO_HT_SHARE)
    counts = (('new_ht', hosts - legacy - new_no_ht),
              ('new_no_ht', new_no_ht), ('legacy_ht', legacy_ht),
              ('legacy_no_ht', legacy - legacy_ht))
    return [kind for kind, count in counts for _ in range(count)]


def requirement_applies(hosts, legacy_pct):
    """Whether ``drop``'s isolate latency requirement is derived here.

    ``drop`` sends only the new-style hosts without hyperthreads through
    the filters, stock every host; Nova's cost per host dominates from
    1,000 hosts up. The 0.3x bound leaves room for the fixed cost only
    where those hosts are at most a fifth of the cloud.
    """
    kinds = host_kinds(hosts, legacy_pct)
    return hosts >= 1000 and kinds.count('new_no_ht') <= 0.2 * hosts


def _numa_topology(kind, full=False):
    cpus = set(range(CPUS))
    threads = 2 if kind in HYPERTHREADED else 1
    siblings = [set(range(i, i + threads)) for i in range(0, CPUS, threads)]
    if kind in NEW_STYLE:
        pcpuset, cpuset = set(range(CPUS // 2)), set(range(CPUS // 2, CPUS))
    else:
        cpuset = pcpuset = cpus
    return objects.NUMATopology(cells=[objects.NUMACell(
        id=0, cpuset=cpuset, pcpuset=pcpuset, memory=MEMORY_MB,
        cpu_usage=0, memory_usage=0,
        pinned_cpus=set(pcpuset) if full else set(),
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
    if kind in NEW_STYLE:
        inventory['PCPU'] = {'total': CPUS // 2, 'allocation_ratio': 1.0}
        inventory['VCPU'] = {'total': CPUS // 2, 'allocation_ratio': 4.0}
    else:
        inventory['VCPU'] = {'total': CPUS, 'allocation_ratio': 1.0}
    return inventory


def _dedicated(kind):
    """The CPU inventory a host's pinned instances take, all of it."""
    if kind in NEW_STYLE:
        return {'PCPU': CPUS // 2}
    return {'VCPU': CPUS}


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
        traits = ['COMPUTE_NODE', 'OWNER_NOVA']
        if kind in HYPERTHREADED:
            traits.append('HW_CPU_HYPERTHREADING')
        if kind in NEW_STYLE:
            # What the pcpu_trait mixin reports on hosts with PCPU.
            traits.append(pcpu_trait.TRAIT)
        self.call('PUT', '/resource_providers/%s/traits' % rp_uuid,
                  json={'resource_provider_generation':
                        rp['resource_provider_generation'], 'traits': traits})

    def create_trait(self, name):
        self.call('PUT', '/traits/%s' % name)

    def allocate(self, consumer, rp_uuid, resources):
        self.call('PUT', '/allocations/%s' % consumer, json={
            'allocations': {rp_uuid: {'resources': resources}},
            'project_id': 'bench', 'user_id': 'bench',
            'consumer_generation': None, 'consumer_type': 'INSTANCE'})

    def delete_allocations(self, consumer):
        response = self.session.delete(
            self.endpoint + '/allocations/%s' % consumer)
        if response.status_code != 404:  # 404: nothing was claimed
            response.raise_for_status()


class Spies(fixtures.Fixture):
    """Counts placement queries, candidates and hosts filtered per call.

    And the candidates of the VCPU fallback query (a request's second)
    whose host reports ``PCPU``: new-style hosts. From placement 1.27 the
    provider summaries carry every resource class of each provider.
    """

    def _setUp(self):
        self.reset()
        candidates = report.SchedulerReportClient.get_allocation_candidates
        filtered = host_manager.HostManager.get_filtered_hosts

        def get_allocation_candidates(client, context, resources):
            result = candidates(client, context, resources)
            self.queries += 1
            requests, summaries = result[0] or [], result[1] or {}
            self.candidates += len(requests)
            if self.queries > 1:
                self.fallback_new_style += sum(
                    1 for request in requests
                    if any('PCPU' in summaries[rp]['resources']
                           for rp in request['allocations']))
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
        self.fallback_new_style = 0


class SchedulingBench(base.BenchCase):
    """One benchmark run: a cloud of ``hosts`` compute nodes.

    ``legacy_pct`` per cent of them legacy; with ``fill``, ``isolate``
    runs again in each of :data:`FILL_STATES`.
    """

    hosts = 100
    legacy_pct = 50
    fill = False
    iterations = 20

    def setUp(self):
        super().setUp()
        self.flags(group='filter_scheduler', enabled_filters=[
            'ComputeFilter', 'ImagePropertiesFilter', 'NUMATopologyFilter'],
            host_subset_size=1)
        # No compute sends heartbeats here: without this, ComputeFilter
        # finds every service down a minute after seeding and every
        # request ends in NoValidHost.
        self.flags(service_down_time=7 * 24 * 3600)
        self.placement = Placement(self.placement_server.endpoint)
        self.ctxt = nova_context.get_admin_context()
        self.addCleanup(activation.deactivate)
        self.kinds = host_kinds(self.hosts, self.legacy_pct)
        self.uuids = [str(uuid.uuid4()) for _ in self.kinds]
        self.full = set()

    def seed(self):
        self.placement.create_trait(pcpu_trait.TRAIT)
        cell = self.cell_mappings['cell1']
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            for i, (kind, rp_uuid) in enumerate(zip(self.kinds, self.uuids)):
                host = 'host-%05d' % i
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

    def fill_hosts(self, kinds):
        """Every host of these kinds full of pinned instances.

        Its dedicated CPUs allocated in placement and pinned in its NUMA
        topology, as a compute reports them. Already full ones are left.
        """
        cell = self.cell_mappings['cell1']
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            for kind, rp_uuid in zip(self.kinds, self.uuids):
                if kind not in kinds or rp_uuid in self.full:
                    continue
                self.placement.allocate(str(uuid.uuid4()), rp_uuid,
                                        _dedicated(kind))
                node = objects.ComputeNode.get_by_uuid(cctxt, rp_uuid)
                node.numa_topology = _numa_topology(kind, full=True)._to_json()
                node.save()
                self.full.add(rp_uuid)

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
        """One request and what it took.

        (latency, queries, candidates, hosts filtered, new-style fallback
        candidates, refused, peak traced memory)
        """
        spec, instance_uuid = self.request_spec(extra_specs)
        spies.reset()
        refused = False
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
            refused = True
        elapsed = time.perf_counter() - started
        peak = None
        if traced:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        self.placement.delete_allocations(instance_uuid)
        return (elapsed, spies.queries, spies.candidates,
                spies.hosts_filtered, spies.fallback_new_style, refused, peak)

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
        runs = [(None, mix) for mix in MIXES]
        if self.fill:
            runs += [(state, 'isolate') for state, _ in FILL_STATES]
        for state, mix in runs:
            if state is not None:
                self.fill_hosts(dict(FILL_STATES)[state])
            for limit in limits(self.hosts):
                self.flags(max_placement_results=limit, group='scheduler')
                figures = self.compare(scheduler_manager, spies, MIXES[mix])
                self.results[(mix, self.hosts, limit, self.legacy_pct,
                              state)] = figures
                if state is None:
                    # Every host has room: a refusal is a broken setup.
                    self.assertEqual(0, figures['no_valid_host']['stock'],
                                     (mix, limit))

    def compare(self, scheduler_manager, spies, extra_specs):
        """Figures of one request mix, every variant interleaved."""
        samples = {variant: [] for variant in VARIANTS}
        # Warm up every path (DB caches, HTTP connections).
        for variant in VARIANTS:
            self._toggle(variant)
            self.select(scheduler_manager, spies, extra_specs)
        for i in range(self.iterations):
            # Alternate the order: each variant's mean position is the same.
            for variant in VARIANTS[::1 if i % 2 else -1]:
                self._toggle(variant)
                samples[variant].append(self.select(
                    scheduler_manager, spies, extra_specs))
        # Memory apart: tracing slows the calls it measures.
        peaks = {}
        for variant in VARIANTS:
            self._toggle(variant)
            peaks[variant] = self.select(
                scheduler_manager, spies, extra_specs, traced=True)[6] / 1024
        return _figures(samples, peaks)

    def _toggle(self, variant):
        activation.deactivate()
        if variant != 'stock':
            self.flags(isolate_fallback_mode=variant, group='pcpu_ext')
            scheduler.activate_plugins()


def limits(hosts):
    """``[scheduler] max_placement_results`` values to run with.

    Nova's default; where there are more hosts than that, also none
    binding (the host count).
    """
    return (NOVA_RESULTS_LIMIT,) + (
        (hosts,) if hosts > NOVA_RESULTS_LIMIT else ())


def _per_mode(values, figure_of):
    """One figure of every variant from stock-and-extension figures.

    ``figure_of({'stock': ..., 'extension': ...})`` is a figure of the
    stats helpers; the result holds each variant's value, ``ratio`` and
    ``ratio_ci`` by mode (where there are), and ``samples``.
    """
    figure = {'stock': None}
    for mode in MODES:
        pair = figure_of({'stock': values['stock'],
                          'extension': values[mode]})
        figure['stock'] = pair['stock']
        figure[mode] = pair['extension']
        for key in ('ratio', 'ratio_ci'):
            if key in pair:
                figure.setdefault(key, {})[mode] = pair[key]
        if 'samples' in pair:
            figure['samples'] = pair['samples']
    return figure


def _figures(samples, peaks):
    latency = {variant: [sample[0] for sample in values]
               for variant, values in samples.items()}

    def averaged(index):
        return _per_mode({
            variant: stats.mean([sample[index] for sample in values])
            for variant, values in samples.items()}, stats.single)

    refused = {variant: [sample[5] for sample in values]
               for variant, values in samples.items()}
    return {
        'latency_median_ms': _per_mode(
            latency, lambda pair: stats.compare(pair, stats.median, 1000)),
        'latency_p95_ms': _per_mode(
            latency, lambda pair: stats.compare(pair, stats.p95, 1000)),
        'placement_queries': averaged(1),
        'allocation_candidates': averaged(2),
        'hosts_filtered': averaged(3),
        'fallback_new_style_candidates': averaged(4),
        'peak_traced_kib': _per_mode(peaks, stats.single),
        # NoValidHost, out of the samples; and the mode's own: in a round
        # (one request of each variant, same cloud) where stock placed.
        'no_valid_host': {variant: sum(values)
                          for variant, values in refused.items()},
        'refused_where_stock_placed': {
            mode: sum(1 for own, stock in zip(refused[mode],
                                              refused['stock'])
                      if own and not stock)
            for mode in MODES},
    }
