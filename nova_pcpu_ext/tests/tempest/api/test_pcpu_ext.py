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

"""nova-pcpu-ext against a deployed cloud.

Tests with the attribute ``stock-fails`` check what the extension changes:
they fail on stock Nova configured the same way. The hosts a test needs
are found through the API: hypervisors (os-hypervisors, whose id is the
resource provider's UUID) and their providers' traits and inventories.

A test class that changes anything beyond the servers and flavors it
creates and deletes says what in ``changes``; it runs only with ``[pcpu_ext]
destructive_tests = True``.
"""

import collections
import threading
import time
from xml.etree import ElementTree

from tempest.api.compute import base
from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import decorators

CONF = config.CONF

ISOLATE = {'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}
DEDICATED = {'hw:cpu_policy': 'dedicated'}
HYPERTHREADING = 'HW_CPU_HYPERTHREADING'
DISABLED = 'COMPUTE_STATUS_DISABLED'

#: A compute node: its service host, provider and what placement shows.
Host = collections.namedtuple('Host', 'name rp_uuid traits inventories')

#: Why a class that changes more than its own servers skips by default.
DESTRUCTIVE_SKIP = ('[pcpu_ext] destructive_tests is False and this test %s; '
                    'set it to True to run it, on a cloud nobody else uses')


class _PcpuExtTest(base.BaseV2ComputeAdminTest):
    # Hypervisor ids are resource provider UUIDs; "host" on server create.
    min_microversion = '2.74'
    placement_min_microversion = '1.6'
    #: What the class changes beyond the servers and flavors it creates
    #: and deletes (None: nothing); it then runs with destructive_tests
    #: only.
    changes = None

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.nova_pcpu_ext:
            raise cls.skipException('nova-pcpu-ext is not enabled')
        if cls.changes and not CONF.pcpu_ext.destructive_tests:
            raise cls.skipException(DESTRUCTIVE_SKIP % cls.changes)

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.providers_client = cls.os_admin.resource_providers_client
        cls.placement_client = cls.os_admin.placement_client
        cls.services_client = cls.os_admin.services_client
        cls.hypervisors_client = cls.os_admin.hypervisor_client

    def hosts(self):
        hosts = []
        for hypervisor in self.hypervisors_client.list_hypervisors(
                detail=True)['hypervisors']:
            rp_uuid = hypervisor['id']
            hosts.append(Host(
                hypervisor['service']['host'], rp_uuid,
                set(self.providers_client.list_resource_provider_traits(
                    rp_uuid)['traits']),
                self.providers_client.list_resource_provider_inventories(
                    rp_uuid)['inventories']))
        return hosts

    def find_host(self, pcpu, hyperthreads):
        for host in self.hosts():
            if (('PCPU' in host.inventories) == pcpu and
                    (HYPERTHREADING in host.traits) == hyperthreads):
                return host
        raise self.skipException('no host with PCPU=%s and hyperthreads=%s'
                                 % (pcpu, hyperthreads))

    def pinned_flavor(self, extra_specs):
        flavor = self.create_flavor(ram=128, vcpus=1, disk=1)
        self.admin_flavors_client.set_flavor_extra_spec(flavor['id'],
                                                        **extra_specs)
        return flavor

    def create_server_on(self, host, flavor, wait_until=None):
        """A server that asks for ``host`` (an admin-only request)."""
        client = self.admin_servers_client
        server = client.create_server(
            name=data_utils.rand_name(self.__class__.__name__),
            imageRef=CONF.compute.image_ref, flavorRef=flavor['id'],
            networks='none', host=host)['server']
        self.addCleanup(waiters.wait_for_server_termination, client,
                        server['id'])
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        client.delete_server, server['id'])
        if wait_until:
            waiters.wait_for_server_status(client, server['id'], wait_until)
        return server

    def allocation(self, server_id):
        """The server's resources, summed over its providers."""
        resources = collections.Counter()
        for alloc in self.placement_client.list_allocations(server_id)[
                'allocations'].values():
            resources.update(alloc['resources'])
        return dict(resources)

    def wait_for_build(self, server_id):
        """The server once it left BUILD (ACTIVE or ERROR)."""
        deadline = time.monotonic() + CONF.compute.build_timeout
        while time.monotonic() < deadline:
            server = self.admin_servers_client.show_server(server_id)[
                'server']
            if server['status'] != 'BUILD':
                return server
            time.sleep(CONF.compute.build_interval)
        self.fail('server %s still building' % server_id)


class IsolateFallbackTest(_PcpuExtTest):

    @decorators.attr(type='stock-fails')
    @decorators.idempotent_id('2b9c4e71-8d3f-4a60-b5e2-7c1f9d8a3e56')
    def test_isolate_server_refused_on_legacy_hyperthreaded_host(self):
        """Nova bug 1889633: the VCPU fallback ignores the thread policy.

        Stock Nova places an isolate server on a legacy (VCPU) host with
        hyperthreads through the fallback query; the extension's default
        ``drop`` mode makes no fallback query for it.
        """
        host = self.find_host(pcpu=False, hyperthreads=True)
        flavor = self.pinned_flavor(ISOLATE)

        server = self.create_server_on(host.name, flavor)
        server = self.wait_for_build(server['id'])

        self.assertEqual('ERROR', server['status'],
                         'placed on %s' % server.get(
                             'OS-EXT-SRV-ATTR:host'))
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual({}, self.allocation(server['id']))

    @decorators.idempotent_id('c4a9e2b7-5f61-4d0e-8c3a-9b7e1f2d6a35')
    def test_isolate_server_gets_pcpu_of_host_without_hyperthreads(self):
        self.find_host(pcpu=True, hyperthreads=False)
        flavor = self.pinned_flavor(ISOLATE)

        server = self.create_test_server(flavor=flavor['id'],
                                         wait_until='ACTIVE')

        server = self.admin_servers_client.show_server(server['id'])[
            'server']
        host = [h for h in self.hosts()
                if h.name == server['OS-EXT-SRV-ATTR:host']][0]
        self.assertNotIn(HYPERTHREADING, host.traits)
        resources = self.allocation(server['id'])
        self.assertEqual(1, resources.get('PCPU'))
        self.assertNotIn('VCPU', resources)

    @decorators.idempotent_id('0e6b3f52-9a8d-4c17-b2e4-5d1a7c9f3e86')
    def test_pinned_server_without_thread_policy_boots(self):
        flavor = self.pinned_flavor(DEDICATED)
        server = self.create_test_server(flavor=flavor['id'],
                                         wait_until='ACTIVE')
        self.assertNotEqual({}, self.allocation(server['id']))


def cpuset(text):
    """Host CPUs of a libvirt or Nova CPU set such as ``1,4-5``."""
    cpus = set()
    for part in text.split(','):
        first, _, last = part.strip().partition('-')
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


class LibvirtPinningTest(_PcpuExtTest):
    """Whitebox: what the guest's domain on the hypervisor says."""

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.pcpu_ext.libvirt_host:
            raise cls.skipException('[pcpu_ext] libvirt_host is not set')

    def domain_pinning(self, instance_name):
        """{vCPU: host CPUs} of the guest, from its libvirt XML."""
        import libvirt

        conn = libvirt.openReadOnly(CONF.pcpu_ext.libvirt_uri)
        try:
            xml = conn.lookupByName(instance_name).XMLDesc()
        finally:
            conn.close()
        return {int(pin.get('vcpu')): pin.get('cpuset') for pin in
                ElementTree.fromstring(xml).iter('vcpupin')}

    @decorators.attr(type='libvirt')
    @decorators.idempotent_id('6d0e8b3a-4f27-4c91-a5d8-1e7b9c2f4a60')
    def test_dedicated_guest_pinned_to_dedicated_cpus(self):
        flavor = self.pinned_flavor(DEDICATED)

        server = self.create_server_on(CONF.pcpu_ext.libvirt_host, flavor,
                                       wait_until='ACTIVE')

        server = self.admin_servers_client.show_server(server['id'])[
            'server']
        pinning = self.domain_pinning(server['OS-EXT-SRV-ATTR:instance_name'])
        self.assertEqual([0], list(pinning))
        host_cpus = cpuset(pinning[0])
        self.assertEqual(1, len(host_cpus), pinning)
        self.assertLessEqual(
            host_cpus, cpuset(CONF.pcpu_ext.libvirt_cpu_dedicated_set))
        self.assertEqual(1, self.allocation(server['id']).get('PCPU'))


class AllocationRatiosTest(_PcpuExtTest):

    @decorators.attr(type='stock-fails')
    @decorators.idempotent_id('5a2d8c14-7e39-4f6b-a0c5-3e9b1d7f2c48')
    def test_inventory_ratios(self):
        """Nova bug 1789654: a 0.0 ratio must never reach placement.

        Every host reports the configured ratios (``[pcpu_ext]
        cpu_allocation_ratio`` and friends), including one deployed with
        ``initial_cpu_allocation_ratio = 0.0``, where stock Nova puts 0.0
        in placement.
        """
        expected = {'VCPU': CONF.pcpu_ext.cpu_allocation_ratio,
                    'MEMORY_MB': CONF.pcpu_ext.ram_allocation_ratio,
                    'DISK_GB': CONF.pcpu_ext.disk_allocation_ratio,
                    'PCPU': 1.0}
        hosts = self.hosts()
        self.assertNotEqual([], hosts)
        for host in hosts:
            for rc, inventory in host.inventories.items():
                if rc in expected:
                    self.assertEqual(expected[rc],
                                     inventory['allocation_ratio'],
                                     '%s of %s' % (rc, host.name))


class _StatusTest(_PcpuExtTest):
    changes = ('disables and enables a compute service, to which no server '
               'can be scheduled meanwhile')

    def traits(self, rp_uuid):
        return set(self.providers_client.list_resource_provider_traits(
            rp_uuid)['traits'])

    def set_status(self, service_id, enabled):
        self.services_client.update_service(
            service_id, status='enabled' if enabled else 'disabled')

    def compute_service(self, host):
        return self.services_client.list_services(
            binary='nova-compute', host=host.name)['services'][0]


class ComputeStatusTraitTest(_StatusTest):

    @decorators.idempotent_id('e8b4c6a1-2d7f-4935-8e0b-6c3f9a1d5b72')
    def test_disable_and_enable_compute_service(self):
        host = self.hosts()[0]
        service = self.compute_service(host)
        self.set_status(service['id'], False)
        self.addCleanup(self.set_status, service['id'], True)
        self.assertIn(DISABLED, self.traits(host.rp_uuid))

        self.set_status(service['id'], True)
        self.assertNotIn(DISABLED, self.traits(host.rp_uuid))


@decorators.serial
class ComputeStatusStormTest(_StatusTest):
    """Alone: while it runs, every compute is disabled half of the time."""
    changes = ('disables and enables every compute service for '
               'status_storm_seconds, during which boots can fail with '
               'No valid host')

    @decorators.attr(type='slow')
    @decorators.idempotent_id('9f3a6d28-1c4e-4b7a-8e95-d2b6f0a7c314')
    def test_status_survives_periodic_updates(self):
        """No disable or enable is lost to a concurrent provider update.

        Each compute's periodic update rewrites its provider's traits from
        a snapshot of the provider cache; on stock Nova a status change
        landing between snapshot and flush is overwritten until the next
        periodic. One thread per compute disables and enables it as fast
        as the API answers, and reads placement after each change. How
        often stock Nova loses one depends on how long its periodic update
        takes: rarely on a small, idle cloud.
        """
        services = [(host, self.compute_service(host))
                    for host in self.hosts()]
        for _, service in services:
            self.addCleanup(self.set_status, service['id'], True)
        deadline = time.monotonic() + CONF.pcpu_ext.status_storm_seconds
        changes, lost = collections.Counter(), collections.Counter()
        errors = []

        def storm(host, service):
            enabled = True
            try:
                while time.monotonic() < deadline:
                    enabled = not enabled
                    self.set_status(service['id'], enabled)
                    changes[host.name] += 1
                    if (DISABLED in self.traits(host.rp_uuid)) == enabled:
                        lost[host.name] += 1
            except Exception as error:
                errors.append(error)

        threads = [threading.Thread(target=storm, args=args)
                   for args in services]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], errors)
        self.assertEqual({}, dict(lost),
                         'status changes overwritten, per host, of %s' %
                         dict(changes))
