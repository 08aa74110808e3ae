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

"""nova-pcpu-ext against a deployed cloud."""

from tempest.api.compute import base
from tempest.common import waiters
from tempest import config
from tempest.lib import decorators

CONF = config.CONF

ISOLATE = {'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}
DEDICATED = {'hw:cpu_policy': 'dedicated'}


class _PcpuExtTest(base.BaseV2ComputeAdminTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.nova_pcpu_ext:
            raise cls.skipException('nova-pcpu-ext is not enabled')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.providers_client = cls.os_admin.resource_providers_client
        cls.placement_client = cls.os_admin.placement_client
        cls.services_client = cls.os_admin.services_client

    def pinned_flavor(self, extra_specs):
        flavor = self.create_flavor(ram=128, vcpus=1, disk=1)
        self.admin_flavors_client.set_flavor_extra_spec(flavor['id'],
                                                        **extra_specs)
        return flavor

    def allocations(self, server_id):
        return self.placement_client.list_allocations(server_id)[
            'allocations']

    def compute_providers(self):
        hosts = {svc['host'] for svc in self.services_client.list_services(
            binary='nova-compute')['services']}
        return [rp for rp in
                self.providers_client.list_resource_providers()[
                    'resource_providers'] if rp['name'] in hosts]


class IsolateFallbackTest(_PcpuExtTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.pcpu_ext.new_style_cpu_config:
            raise cls.skipException('hosts do not report PCPU')

    @decorators.idempotent_id('7d1f0c8e-3b5a-4b8e-9a51-2f3c6d9e1a04')
    def test_isolate_server_gets_no_valid_host(self):
        if not CONF.pcpu_ext.all_hosts_hyperthreaded:
            raise self.skipException('a host without hyperthreads exists')
        flavor = self.pinned_flavor(ISOLATE)

        server = self.create_test_server(flavor=flavor['id'],
                                         wait_until=None)
        waiters.wait_for_server_status(self.servers_client, server['id'],
                                       'ERROR')

        server = self.admin_servers_client.show_server(server['id'])[
            'server']
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual({}, self.allocations(server['id']))

    @decorators.idempotent_id('c4a9e2b7-5f61-4d0e-8c3a-9b7e1f2d6a35')
    def test_isolate_server_lands_without_hyperthreads(self):
        if not CONF.pcpu_ext.host_without_hyperthreads:
            raise self.skipException('no host without hyperthreads')
        flavor = self.pinned_flavor(ISOLATE)

        server = self.create_test_server(flavor=flavor['id'],
                                         wait_until='ACTIVE')

        resources = [alloc['resources'] for alloc in
                     self.allocations(server['id']).values()]
        self.assertIn(1, [r.get('PCPU') for r in resources])
        self.assertNotIn('VCPU', [rc for r in resources for rc in r])

    @decorators.idempotent_id('0e6b3f52-9a8d-4c17-b2e4-5d1a7c9f3e86')
    def test_pinned_server_without_thread_policy_boots(self):
        flavor = self.pinned_flavor(DEDICATED)
        server = self.create_test_server(flavor=flavor['id'],
                                         wait_until='ACTIVE')
        self.assertNotEqual({}, self.allocations(server['id']))


class AllocationRatiosTest(_PcpuExtTest):

    @decorators.idempotent_id('5a2d8c14-7e39-4f6b-a0c5-3e9b1d7f2c48')
    def test_inventory_ratios(self):
        expected = {'VCPU': CONF.pcpu_ext.cpu_allocation_ratio,
                    'MEMORY_MB': CONF.pcpu_ext.ram_allocation_ratio,
                    'DISK_GB': CONF.pcpu_ext.disk_allocation_ratio,
                    'PCPU': 1.0}
        providers = self.compute_providers()
        self.assertNotEqual([], providers)
        for rp in providers:
            inventories = self.providers_client.\
                list_resource_provider_inventories(rp['uuid'])['inventories']
            for rc, inventory in inventories.items():
                if rc in expected:
                    self.assertEqual(expected[rc],
                                     inventory['allocation_ratio'],
                                     '%s of %s' % (rc, rp['name']))


class ComputeStatusTraitTest(_PcpuExtTest):
    placement_min_microversion = '1.6'

    def traits(self, rp_uuid):
        return self.providers_client.list_resource_provider_traits(
            rp_uuid)['traits']

    @decorators.attr(type='slow')
    @decorators.idempotent_id('e8b4c6a1-2d7f-4935-8e0b-6c3f9a1d5b72')
    def test_disable_and_enable_compute_service(self):
        rp = self.compute_providers()[0]
        self.services_client.disable_service(host=rp['name'],
                                             binary='nova-compute')
        self.addCleanup(self.services_client.enable_service,
                        host=rp['name'], binary='nova-compute')
        self.assertIn('COMPUTE_STATUS_DISABLED', self.traits(rp['uuid']))

        self.services_client.enable_service(host=rp['name'],
                                            binary='nova-compute')
        self.assertNotIn('COMPUTE_STATUS_DISABLED', self.traits(rp['uuid']))
