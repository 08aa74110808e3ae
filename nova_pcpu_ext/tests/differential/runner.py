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

"""Runs a generated scenario on real Nova services and real placement.

Each variant is a fresh in-process Nova (API, conductor, scheduler, one
compute per host on the libvirt driver over fakelibvirt) on placement's
own application, as in the functional tests (:mod:`..functional.base`):

* ``stock``: stock Nova, its late check for bug 1889633 in place;
* ``stock-stripped``: stock Nova without that check, to show the bug;
* ``drop``, ``legacy_only``: the extension in that ``[pcpu_ext]
  isolate_fallback_mode``, without the late check, so that nothing but
  the extension keeps isolate servers off hyperthreaded new-style hosts.

Every compute of the process shares one ``nova.conf``; :class:`PerHostCpus`
makes each one read its own CPU sets.
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

import json
import sys
import time
import unittest
import urllib.parse
import uuid

import fixtures
from nova.compute import manager as compute_manager
from nova.compute import resource_tracker
from nova.scheduler import host_manager
from nova import service as nova_service
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client
from nova.virt.libvirt import driver as libvirt_driver

from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext.tests.differential import generator
from nova_pcpu_ext.tests.functional import test_server_states

VARIANTS = ('stock', 'stock-stripped', 'drop', 'legacy_only')
#: Seconds a server may take to settle after a request.
SETTLE = 30
#: The modules of Nova that read the CPU sets from ``nova.conf``.
CPU_SET_READERS = ('nova.virt.hardware', 'nova.virt.libvirt.driver')


class _Group(object):
    """A group of options with a host's own CPU sets."""

    def __init__(self, group, cpus):
        self._group = group
        self._cpus = cpus

    def __getattr__(self, name):
        if name == 'cpu_dedicated_set':
            return self._cpus['dedicated']
        if name == 'cpu_shared_set':
            return self._cpus['shared']
        return getattr(self._group, name)


class _HostConf(object):
    """``nova.conf`` as the compute whose code is running reads it."""

    def __init__(self, conf, fixture):
        self._conf = conf
        self._fixture = fixture

    def __getattr__(self, name):
        cpus = self._fixture.hosts.get(self._fixture.current_host())
        if cpus is not None and name == 'vcpu_pin_set':
            return cpus['vcpu_pin_set']
        if cpus is not None and name == 'compute':
            return _Group(self._conf.compute, cpus)
        return getattr(self._conf, name)


class PerHostCpus(fixtures.Fixture):
    """Each compute reads its own CPU sets, at start and in every update.

    Nova reads ``vcpu_pin_set`` and ``[compute] cpu_dedicated_set`` /
    ``cpu_shared_set`` from the process-wide ``CONF`` in
    ``nova.virt.hardware`` and the libvirt driver. Here those modules get
    a ``CONF`` that answers with the CPU sets of the compute whose code is
    on the calling thread's stack (its manager, resource tracker, driver
    or virt API; the innermost one wins), and with ``nova.conf`` elsewhere.
    """

    def _setUp(self):
        #: hostname -> {'vcpu_pin_set', 'dedicated', 'shared'}
        self.hosts = {}
        #: id(driver) -> hostname, for driver code called on its own
        self.drivers = {}
        for module in CPU_SET_READERS:
            conf = sys.modules[module].CONF
            self.useFixture(fixtures.MonkeyPatch(
                module + '.CONF', _HostConf(conf, self)))

    def _host_of(self, obj):
        if isinstance(obj, (compute_manager.ComputeManager,
                            resource_tracker.ResourceTracker,
                            nova_service.Service)):
            return getattr(obj, 'host', None)
        if isinstance(obj, compute_manager.ComputeVirtAPI):
            return obj._compute.host
        if isinstance(obj, libvirt_driver.LibvirtDriver):
            return self.drivers.get(id(obj))
        return None

    def current_host(self):
        frame = sys._getframe(2)
        while frame is not None:
            host = self._host_of(frame.f_locals.get('self'))
            if host in self.hosts:
                return host
            frame = frame.f_back
        return None


class HostsInNameOrder(fixtures.Fixture):
    """The scheduler weighs the candidates' hosts in the order of names.

    Nova hands its weighers the host states in the order of a set
    (``HostManager._get_host_states``), and the sort by weight keeps that
    order among equal weights. That order follows string hashing, which
    changes per process, and the set's other members, which differ where
    a mode narrows or drops the fallback query: two runs could pick
    different hosts of equal weight from the same state (seeds 408 and
    437). In name order, both pick the first of the best.
    """

    def _setUp(self):
        in_set_order = host_manager.HostManager._get_host_states

        def in_name_order(manager, *args, **kwargs):
            states = in_set_order(manager, *args, **kwargs)
            return iter(sorted(states, key=lambda state: (
                state.host, state.nodename)))

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.host_manager.HostManager._get_host_states',
            in_name_order))


class ScenarioCase(base.ExtensionTestBase):
    """One variant of one scenario; :attr:`outcomes` gets one per step."""

    ADDITIONAL_FILTERS = ['NUMATopologyFilter']
    scenario = None
    variant = 'stock'
    outcomes = None

    def setUp(self):
        self.extension = self.variant in ('drop', 'legacy_only')
        super().setUp()
        if self.extension:
            self.flags(isolate_fallback_mode=self.variant, group='pcpu_ext')
        if self.variant != 'stock':
            self.useFixture(base.StripIsolateMitigation())
        self.cpus = self.useFixture(PerHostCpus())
        self.useFixture(HostsInNameOrder())
        # NOTE: fakelibvirt has no disks to move; Nova's own NUMA resize
        # tests stub this the same way.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'migrate_disk_and_power_off', return_value='{}'))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3',
            self._live_migrate_domain))
        self.admin_api.microversion = '2.74'
        self.api.microversion = '2.74'
        self.flavors = {}
        self.servers = {}

    # -- the cloud ---------------------------------------------------------

    def build_cloud(self):
        for host in self.scenario.hosts:
            self.start_cloud_host(host)
        zone = [host.name for host in self.scenario.hosts if host.zone]
        if zone:
            aggregate = self.admin_api.post_aggregate({'aggregate': {
                'name': 'zone', 'availability_zone': generator.ZONE}})
            for name in zone:
                self.admin_api.add_host_to_aggregate(aggregate['id'], name)
        for host in self.scenario.hosts:
            if host.fill != 'empty':
                self.fill(host)
        self.check_periodic_keeps_cpu_sets()
        for host in self.scenario.hosts:
            if not host.enabled:
                self.disable_service(host.name)

    def start_cloud_host(self, host):
        cpus = generator.CPU_SETS[host.style]
        self.cpus.hosts[host.name] = cpus
        self.start_compute(host.name, host_info=fakelibvirt.HostInfo(
            **generator.TOPOLOGIES[host.hyperthreads]))
        self.cpus.drivers[id(self.computes[host.name].driver)] = host.name

    def fill(self, host):
        """A pinned server on the host, as each variant places it."""
        vcpus = generator.FILL_VCPUS[(host.style, host.fill)]
        flavor = self.flavor(vcpus, {'hw:cpu_policy': 'dedicated'})
        server = self.admin_api.post_server({'server': self._build_server(
            flavor_id=flavor, host=host.name, networks='none')})
        server = self.settle(server)
        self.assertEqual('ACTIVE', server['status'],
                         'filling %s: %s' % (host.name, server.get('fault')))

    def check_periodic_keeps_cpu_sets(self):
        """Each host's inventory after a periodic update is its own."""
        for host in self.scenario.hosts:
            self.periodic(host.name)
            rp_uuid = self.compute_rp_uuids[host.name]
            inventory = self._get_provider_inventory(rp_uuid)
            self.assertEqual(host.style == 'new', 'PCPU' in inventory,
                             '%s: %s' % (host.name, inventory))
            if self.extension:
                self.assertEqual(host.style == 'new',
                                 pcpu_trait.TRAIT in self.traits(rp_uuid))

    # -- helpers -----------------------------------------------------------

    def flavor(self, vcpus, extra_specs):
        key = (vcpus, tuple(sorted(extra_specs.items())))
        if key not in self.flavors:
            self.flavors[key] = self._create_flavor(
                memory_mb=512, vcpu=vcpus, disk=1, ephemeral=0,
                extra_spec=extra_specs)
        return self.flavors[key]

    def image(self, properties):
        if not properties:
            return None
        image = {'id': str(uuid.uuid4()), 'name': 'differential',
                 'status': 'active', 'container_format': 'raw',
                 'disk_format': 'raw', 'size': 1024, 'min_ram': 0,
                 'min_disk': 0, 'visibility': 'public',
                 'properties': dict(properties)}
        return self.glance.create(None, image)['id']

    def settle(self, server, statuses=('ACTIVE', 'ERROR')):
        deadline = time.monotonic() + SETTLE
        while True:
            server = self.api.get_server(server['id'])
            if (server['status'] in statuses and
                    server.get('OS-EXT-STS:task_state') is None):
                return server
            self.assertLess(time.monotonic(), deadline, server['status'])
            time.sleep(0.05)

    def last_migration(self, server_id):
        migrations = [m for m in self.admin_api.get_migrations()
                      if m['instance_uuid'] == server_id]
        return max(migrations, key=lambda m: m['id']) if migrations else None

    def settle_move(self, server, before):
        """Wait for the move's migration to end; its final status."""
        deadline = time.monotonic() + SETTLE
        while True:
            migration = self.last_migration(server['id'])
            if migration and migration['id'] != before:
                if migration['status'] == 'finished':
                    self.settle(server, ('VERIFY_RESIZE',))
                    self.admin_api.post_server_action(
                        server['id'], {'confirmResize': None})
                if migration['status'] in ('finished', 'completed', 'done',
                                           'error', 'failed'):
                    self.settle(server, ('ACTIVE', 'ERROR', 'SHUTOFF'))
                    return migration['status']
            self.assertLess(time.monotonic(), deadline, migration)
            time.sleep(0.05)

    def _live_migrate_domain(self, domain, destination, params, flags):
        """fakelibvirt's live migration: the domain moves to the host."""
        dest = urllib.parse.urlparse(destination).hostname
        self.computes[dest].driver._host.get_connection().createXML(
            params['destination_xml'], 'flags')
        domain.complete_job()
        # NOTE: and leaves the source, as Nova's VIR_MIGRATE_UNDEFINE_SOURCE
        # makes libvirt do; fakelibvirt keeps it, and a later evacuation
        # back to that host would find it there (InstanceExists). No
        # lifecycle event: the source compute must not see it stop.
        connection = domain._connection
        connection._vms.pop(domain.name(), None)
        for key, running in list(connection._running_vms.items()):
            if running is domain:
                del connection._running_vms[key]

    # -- steps -------------------------------------------------------------

    def run_steps(self):
        for index, step in enumerate(self.scenario.steps):
            self.flags(max_placement_results=step.limit or 1000,
                       group='scheduler')
            before = len(self.placement_queries)
            trait_known = self.placement.get(
                '/traits/' + pcpu_trait.TRAIT, version='1.6').status == 204
            outcome = getattr(self, 'step_' + step.action)(index, step)
            outcome.update(queries=self.placement_queries[before:],
                           answers=self.placement_answers[before:],
                           trait_known=trait_known)
            self.outcomes.append(outcome)

    def step_boot(self, index, step):
        request = step.request
        body = self._build_server(
            flavor_id=self.flavor(request.vcpus, request.extra_specs()),
            image_uuid=self.image(request.image_properties()),
            networks='none', az=generator.ZONE if request.zone else None)
        try:
            server = self.api.post_server({'server': body})
        except client.OpenStackApiException as error:
            return {'outcome': 'error', 'message': _message(error)}
        server = self.settle(server)
        if server['status'] != 'ACTIVE':
            message = server.get('fault', {}).get('message', '')
            return {'outcome': 'refused' if _refused(message)
                    else 'error', 'message': message}
        self.servers[index] = server['id']
        return self.where(server['id'], 'placed')

    def _subject(self, step):
        server_id = self.servers.get(step.server)
        if server_id is None:
            return None
        server = self.admin_api.get_server(server_id)
        return server if server['status'] == 'ACTIVE' else None

    def _move(self, step, api, body, prepare=None):
        server = self._subject(step)
        if server is None:
            return {'outcome': 'absent'}
        source = server['OS-EXT-SRV-ATTR:host']
        if prepare:
            prepare(source)
        migration = self.last_migration(server['id'])
        try:
            api.post_server_action(server['id'], body)
        except client.OpenStackApiException as error:
            message = _message(error)
            return dict(self.where(server['id'], 'refused'
                                   if _refused(message) else 'error'),
                        message=message)
        status = self.settle_move(server, migration and migration['id'])
        host = self.admin_api.get_server(
            server['id'])['OS-EXT-SRV-ATTR:host']
        outcome = 'placed' if host != source else (
            'refused' if status in ('error', 'failed') else 'error')
        return dict(self.where(server['id'], outcome), message=status)

    def step_resize(self, index, step):
        request = step.request
        flavor = self.flavor(request.vcpus, request.extra_specs())
        return self._move(step, self.api,
                          {'resize': {'flavorRef': flavor}})

    def step_migrate(self, index, step):
        return self._move(step, self.admin_api, {'migrate': None})

    def step_live_migrate(self, index, step):
        return self._move(step, self.admin_api, {'os-migrateLive': {
            'host': None, 'block_migration': 'auto'}})

    def step_evacuate(self, index, step):
        def host_down(source):
            self.computes[source].stop()
            service = self.admin_api.get_services(
                binary='nova-compute', host=source)[0]
            self.admin_api.put_service(service['id'], {'forced_down': True})
        return self._move(step, self.admin_api, {'evacuate': {}},
                          prepare=host_down)

    def step_delete_trait(self, index, step):
        response = self.placement.delete('/traits/' + pcpu_trait.TRAIT,
                                         version='1.6')
        return {'outcome': {204: 'deleted', 404: 'unknown',
                            409: 'in use'}.get(response.status, 'error'),
                'message': '%d %s' % (response.status, response.body)}

    def where(self, server_id, outcome):
        """The outcome and the server's host, its kind and CPU usage."""
        server = self.admin_api.get_server(server_id)
        name = server['OS-EXT-SRV-ATTR:host']
        host = {h.name: h for h in self.scenario.hosts}[name]
        allocation = self._get_allocations_by_server_uuid(server_id).get(
            self.compute_rp_uuids[name], {}).get('resources', {})
        return {'outcome': outcome, 'host': name, 'style': host.style,
                'hyperthreads': host.hyperthreads,
                'cpu': {rc: allocation[rc] for rc in ('VCPU', 'PCPU')
                        if allocation.get(rc)}}

    def test_scenario(self):
        self.build_cloud()
        self.run_steps()


def _message(error):
    """The API's own message of an error answer."""
    try:
        body = json.loads(error.response.content)
        return '%d %s' % (error.response.status_code,
                          list(body.values())[0]['message'])
    except (AttributeError, ValueError, TypeError, KeyError, IndexError):
        return str(error)[:300]


def _refused(message):
    """Whether a failed request's message says NoValidHost.

    A move the scheduler refuses answers 400, or 500 naming the exception
    where the conductor's call raises it through the API.
    """
    return 'No valid host' in message or 'NoValidHost' in message


def _run_case(case):
    """The test's failures and errors, as tracebacks."""
    result = unittest.TestResult()
    case.run(result)
    # NOTE: the traceback only; the captured logs come before it.
    return ([trace[trace.rfind('Traceback'):]
             for _test, trace in result.failures],
            [trace[trace.rfind('Traceback'):]
             for _test, trace in result.errors])


def run(scenario, variant):
    """Outcomes of each step of ``scenario`` in ``variant``.

    :returns: (outcomes, problem): problem is None, or the traceback of a
        harness error (the run stopped there).
    """
    outcomes = []
    case_class = type('ScenarioCase', (ScenarioCase,), {
        'scenario': scenario, 'variant': variant, 'outcomes': outcomes})
    failures, errors = _run_case(case_class('test_scenario'))
    problems = errors + failures
    return outcomes, (problems[0] if problems else None)


def run_states(scenario):
    """The operator tools judged on a cloud of ``scenario``'s states.

    :returns: (failures, errors): tracebacks of the properties broken
        (see ``ServerStatesTest.judge``) and of harness errors.
    """
    case_class = type('StatesCase', (test_server_states.ServerStatesTest,),
                      {'test_states': lambda case: case.judge(scenario)})
    return _run_case(case_class('test_states'))
