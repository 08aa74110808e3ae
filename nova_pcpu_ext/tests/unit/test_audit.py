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

import argparse
import copy
import math

import ddt
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
import requests
from requests_mock.contrib import fixture as rm_fixture

from nova_pcpu_ext import audit
from nova_pcpu_ext import exception
from nova_pcpu_ext import status
from nova_pcpu_ext.tests.unit import base

ENDPOINT = 'http://api.example'


def adapter(service_type):
    """An adapter for a service at ENDPOINT, without authentication."""
    return ks_adapter.Adapter(ks_session.Session(), service_type=service_type,
                              endpoint_override=ENDPOINT)


class FakePlacement(object):
    """Placement's state for one provider; conflicts on the first writes."""

    def __init__(self, inventories, conflicts=0):
        self.generation = 1
        self.stored = inventories
        self.conflicts = conflicts
        self.writes = []

    def providers(self, required_trait=None):
        return [{'uuid': 'rp-uuid', 'name': 'compute1'}]

    def inventories(self, uuid):
        return self.generation, copy.deepcopy(self.stored)

    def replace_inventories(self, uuid, generation, inventories):
        self.writes.append(inventories)
        if self.conflicts:
            # Another writer got there first and repaired VCPU.
            self.conflicts -= 1
            self.generation += 1
            self.stored['VCPU']['allocation_ratio'] = 8.0
            return False
        self.generation, self.stored = generation + 1, inventories
        return True


@ddt.ddt
class BadRatioTest(base.TestCase):

    @ddt.unpack
    @ddt.data(
        ('VCPU', 0.0, audit.FAILURE),
        ('MEMORY_MB', -1.0, audit.FAILURE),
        ('DISK_GB', math.nan, audit.FAILURE),
        ('VCPU', math.inf, audit.FAILURE),
        ('PCPU', 2.0, audit.WARNING),
        ('PCPU', 0.0, audit.WARNING),
    )
    def test_bad(self, rc, ratio, severity):
        self.assertEqual([(rc, ratio, severity)], list(audit._bad_ratios(
            {rc: {'total': 4, 'allocation_ratio': ratio}})))

    @ddt.data(('VCPU', 16.0), ('MEMORY_MB', 0.5), ('PCPU', 1.0),
              ('CUSTOM_FPGA', 0.0))
    @ddt.unpack
    def test_good(self, rc, ratio):
        self.assertEqual([], list(audit._bad_ratios(
            {rc: {'total': 4, 'allocation_ratio': ratio}})))


class FixRatiosTest(base.TestCase):

    def test_rule_of_this_config(self):
        self.flags(group=None, cpu_allocation_ratio=0.0,
                   initial_cpu_allocation_ratio=8.0, ram_allocation_ratio=1.5)
        self.assertEqual({'VCPU': 8.0, 'MEMORY_MB': 1.5, 'DISK_GB': 1.0,
                          'PCPU': 1.0}, audit.fix_ratios(self.conf.conf))

    def test_overrides_win(self):
        self.flags(group=None, cpu_allocation_ratio=16.0)
        self.assertEqual(2.0, audit.fix_ratios(
            self.conf.conf, {'VCPU': 2.0})['VCPU'])

    def test_invalid_config_is_an_error(self):
        self.flags(group=None, disk_allocation_ratio=math.inf)
        self.assertRaises(exception.InvalidConfig, audit.fix_ratios,
                          self.conf.conf)


class AuditInventoriesTest(base.TestCase):

    RATIOS = {'VCPU': 4.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0, 'PCPU': 1.0}

    def inventories(self):
        return {'VCPU': {'total': 8, 'reserved': 1, 'allocation_ratio': 0.0},
                'PCPU': {'total': 4, 'allocation_ratio': 2.0},
                'DISK_GB': {'total': 100, 'allocation_ratio': 1.0}}

    def test_report_only_writes_nothing(self):
        placement = FakePlacement(self.inventories())
        findings = audit.audit_inventories(placement, self.RATIOS)
        self.assertEqual([('PCPU', False), ('VCPU', False)],
                         [(f.problem.split()[0], f.fixed) for f in findings])
        self.assertEqual([], placement.writes)

    def test_fix_writes_the_whole_inventory_once(self):
        placement = FakePlacement(self.inventories())
        findings = audit.audit_inventories(placement, self.RATIOS, fix=True)
        self.assertEqual([True, True], [f.fixed for f in findings])
        expected = self.inventories()
        expected['VCPU']['allocation_ratio'] = 4.0
        expected['PCPU']['allocation_ratio'] = 1.0
        self.assertEqual([expected], placement.writes)

    def test_conflicts_are_retried_with_a_new_decision(self):
        placement = FakePlacement(self.inventories(), conflicts=2)
        findings = audit.audit_inventories(placement, self.RATIOS, fix=True)
        self.assertEqual(3, len(placement.writes))
        # The other writer's VCPU ratio is kept; only PCPU was still bad.
        self.assertEqual(8.0, placement.stored['VCPU']['allocation_ratio'])
        self.assertEqual(1.0, placement.stored['PCPU']['allocation_ratio'])
        self.assertEqual(['PCPU allocation_ratio 2.0 is not 1.0'],
                         [f.problem for f in findings])

    def test_endless_conflicts_stop_with_nothing_written(self):
        placement = FakePlacement(self.inventories(), conflicts=99)
        error = self.assertRaises(
            exception.ServiceError, audit.audit_inventories, placement,
            self.RATIOS, fix=True)
        self.assertIn('compute1 (rp-uuid) changed during each of 5 attempts',
                      str(error))
        self.assertEqual(2.0, placement.stored['PCPU']['allocation_ratio'])

    def test_error_after_fixes_says_how_many(self):
        placement = FakePlacement(self.inventories())
        placement.providers = lambda required_trait=None: [
            {'uuid': 'rp-uuid', 'name': 'compute1'},
            {'uuid': 'other', 'name': 'compute2'}]
        inventories = placement.inventories

        def fail_for_other(uuid):
            if uuid == 'other':
                raise exception.ServiceError('placement: GET ...: 503.')
            return inventories(uuid)

        placement.inventories = fail_for_other
        error = self.assertRaises(
            exception.ServiceError, audit.audit_inventories, placement,
            self.RATIOS, fix=True)
        self.assertEqual('placement: GET ...: 503. 2 allocation ratios were '
                         'fixed before; run the audit again for the rest.',
                         str(error))


class FakeCompute(object):

    def __init__(self, servers):
        self.servers = servers

    def server(self, uuid):
        return self.servers.get(uuid)


class AuditAllocationsTest(base.TestCase):

    def placement(self, inventories, allocations):
        placement = FakePlacement(inventories)
        placement.allocations = lambda uuid: allocations
        return placement

    def server(self, uuid, **extra_specs):
        return {'id': uuid, 'OS-EXT-SRV-ATTR:host': 'compute1',
                'flavor': {'original_name': 'pinned',
                           'extra_specs': extra_specs}}

    def test_only_dedicated_servers_on_vcpu(self):
        placement = self.placement({'PCPU': {}, 'VCPU': {}}, {
            'pinned-on-vcpu': {'VCPU': 2, 'MEMORY_MB': 512},
            'pinned-on-pcpu': {'PCPU': 2},
            'shared': {'VCPU': 1},
            'migration': {'VCPU': 1},
        })
        compute = FakeCompute({
            'pinned-on-vcpu': self.server('pinned-on-vcpu',
                                          **{'hw:cpu_policy': 'dedicated'}),
            'pinned-on-pcpu': self.server('pinned-on-pcpu',
                                          **{'hw:cpu_policy': 'dedicated'}),
            'shared': self.server('shared', **{'hw:cpu_policy': 'shared'}),
        })
        findings = audit.audit_allocations(placement, compute)
        self.assertEqual(['pinned-on-vcpu'], [f.consumer for f in findings])
        self.assertIn('consumes VCPU:2', findings[0].problem)

    def test_providers_without_pcpu_are_skipped(self):
        placement = self.placement({'VCPU': {}}, {'pinned': {'VCPU': 2}})
        compute = FakeCompute({'pinned': self.server(
            'pinned', **{'hw:cpu_policy': 'dedicated'})})
        self.assertEqual([], audit.audit_allocations(placement, compute))


@ddt.ddt
class ServiceErrorTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.requests = self.useFixture(rm_fixture.Fixture())
        self.placement = audit.Placement(adapter('placement'))

    @ddt.unpack
    @ddt.data(
        ({'status_code': 401}, '401 Unauthorized: the credentials were '
                               'rejected'),
        ({'status_code': 403}, '403 Forbidden: the user needs the admin '
                               'role'),
        ({'status_code': 503, 'reason': 'Service Unavailable'},
         '503 Service Unavailable'),
        ({'exc': requests.exceptions.ReadTimeout}, 'timed out'),
        ({'exc': requests.exceptions.SSLError}, 'TLS verification failed; '
         'give the CA bundle ([placement] cafile or --os-cacert)'),
        ({'exc': requests.exceptions.ConnectionError}, 'cannot connect'),
    )
    def test_one_line_naming_the_request(self, response, problem):
        self.requests.get(ENDPOINT + '/resource_providers', **response)
        error = self.assertRaises(exception.ServiceError,
                                  self.placement.providers)
        self.assertEqual(
            'placement: GET %s/resource_providers: %s. %s' % (
                ENDPOINT, problem, audit.Placement.hint), str(error))

    def test_conflict_other_than_generation_is_an_error(self):
        self.requests.put(
            ENDPOINT + '/resource_providers/rp/inventories', status_code=409,
            json={'errors': [{'code': 'placement.inventory.inuse',
                              'detail': 'Inventory for VCPU\n\n in use.'}]})
        error = self.assertRaises(
            exception.ServiceError, self.placement.replace_inventories,
            'rp', 1, {})
        self.assertIn(': 409 Inventory for VCPU in use. Check', str(error))

    @ddt.data({'text': '<html>proxy error</html>'}, {'json': {'x': 1}})
    def test_unexpected_answer(self, body):
        self.requests.get(ENDPOINT + '/resource_providers', **body)
        error = self.assertRaises(exception.ServiceError,
                                  self.placement.providers)
        self.assertIn('GET %s/resource_providers: unexpected answer (200 '
                      'without resource_providers): is this the placement '
                      'API?' % ENDPOINT, str(error))

    def test_no_endpoint(self):
        placement = audit.Placement(ks_adapter.Adapter(
            ks_session.Session(), service_type='placement'))
        error = self.assertRaises(exception.ServiceError,
                                  placement.providers)
        self.assertIn('placement: cannot find the endpoint: ',
                      str(error))

    def test_unreadable_ca_bundle(self):
        self.requests.get(ENDPOINT + '/resource_providers',
                          exc=OSError('Could not find a suitable TLS CA '
                                      'certificate bundle'))
        error = self.assertRaises(exception.ServiceError,
                                  self.placement.providers)
        self.assertIn(': TLS files: Could not find a suitable TLS CA',
                      str(error))

    def test_generation_conflict_is_reported_to_retry(self):
        self.requests.put(
            ENDPOINT + '/resource_providers/rp/inventories', status_code=409,
            json={'errors': [{'code': 'placement.concurrent_update'}]})
        self.assertFalse(self.placement.replace_inventories('rp', 1, {}))
        self.assertEqual('placement 1.26', self.requests.last_request.headers[
            'OpenStack-API-Version'])


class ComputeServerTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.requests = self.useFixture(rm_fixture.Fixture())
        self.compute = audit.Compute(adapter('compute'))

    def test_nova_not_found_is_no_server(self):
        self.requests.get(ENDPOINT + '/servers/c', status_code=404,
                          json={'itemNotFound': {'code': 404}})
        self.assertIsNone(self.compute.server('c'))

    def test_other_not_found_is_an_error(self):
        # What placement answers when reached instead of Nova.
        self.requests.get(ENDPOINT + '/servers/c', status_code=404,
                          json={'errors': [{'status': 404}]})
        error = self.assertRaises(exception.ServiceError,
                                  self.compute.server, 'c')
        self.assertIn('unexpected answer (404 without itemNotFound): is '
                      'this the compute API?', str(error))

    def test_hidden_extra_specs_are_an_error(self):
        self.requests.get(ENDPOINT + '/servers/c', json={'server': {
            'id': 'c', 'flavor': {'original_name': 'pinned'}}})
        error = self.assertRaises(exception.ServiceError,
                                  self.compute.server, 'c')
        self.assertIn('os_compute_api:servers:show:flavor-extra-specs',
                      str(error))
        self.assertEqual('compute 2.47', self.requests.last_request.headers[
            'OpenStack-API-Version'])


@ddt.ddt
class RatioOptionTest(base.TestCase):

    def test_valid(self):
        self.assertEqual(('MEMORY_MB', 1.5),
                         status._ratio_override('MEMORY_MB=1.5'))

    @ddt.data('PCPU=2.0', 'VCPU', 'VCPU=0', 'VCPU=-1', 'VCPU=nan',
              'VCPU=many')
    def test_invalid(self, text):
        self.assertRaises(argparse.ArgumentTypeError,
                          status._ratio_override, text)
