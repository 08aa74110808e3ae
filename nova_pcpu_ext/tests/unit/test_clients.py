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

import re
import threading
from unittest import mock
import urllib.parse

import ddt
import fixtures
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
import requests
from requests_mock.contrib import fixture as rm_fixture

from nova_pcpu_ext import clients
from nova_pcpu_ext import exception
from nova_pcpu_ext.tests.unit import base

ENDPOINT = 'http://api.example'
#: Where Nova's links point behind a proxy terminating TLS, without
#: [api] compute_link_prefix: the API's own address, unreachable here.
NOVA_S_OWN = 'http://nova-api.internal:8774'


def adapter(service_type):
    """An adapter for a service at ENDPOINT, without authentication."""
    return ks_adapter.Adapter(ks_session.Session(), service_type=service_type,
                              endpoint_override=ENDPOINT)


@ddt.ddt
class ServiceErrorTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.requests = self.useFixture(rm_fixture.Fixture())
        self.placement = clients.Placement(adapter('placement'))

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
         'give the CA bundle in [placement] cafile'),
        ({'exc': requests.exceptions.ConnectionError}, 'cannot connect'),
    )
    def test_one_line_naming_the_request(self, response, problem):
        self.requests.get(ENDPOINT + '/resource_providers', **response)
        error = self.assertRaises(exception.ServiceError,
                                  self.placement.providers)
        self.assertEqual(
            'placement: GET %s/resource_providers: %s. %s' % (
                ENDPOINT, problem, clients.Placement.hint), str(error))

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
        placement = clients.Placement(ks_adapter.Adapter(
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

    def test_query_values_are_encoded(self):
        self.requests.get(ENDPOINT + '/resource_providers', json={
            'resource_providers': []})
        self.placement.providers(name='node 1&x', required='!HW_CPU_X')
        self.assertEqual('/resource_providers?name=node+1%26x&'
                         'required=!HW_CPU_X',
                         self.requests.last_request.path_url)

    def test_candidate(self):
        self.requests.get(ENDPOINT + '/allocation_candidates', json={
            'allocation_requests': [{'allocations': {
                'rp-1': {'resources': {'MEMORY_MB': 512, 'PCPU': 2}}}}],
            'provider_summaries': {'rp-1': {'root_provider_uuid': 'rp-1'}}})
        self.requests.get(ENDPOINT + '/resource_providers/rp-1',
                          json={'uuid': 'rp-1', 'name': 'node1'})
        self.assertEqual('node1', self.placement.candidate(
            [{'PCPU': 2, 'MEMORY_MB': 512}], ('!HW_CPU_X', '!DISABLED')))
        self.assertEqual('/allocation_candidates?limit=1&resources=MEMORY_MB:'
                         '512,PCPU:2&root_required=!HW_CPU_X,!DISABLED',
                         self.requests.request_history[0].path_url)
        self.assertEqual('placement 1.36', self.requests.request_history[
            0].headers['OpenStack-API-Version'])

    def test_a_candidate_among_a_cell_s_nodes(self):
        """As Nova's scheduler: the first of the server's cell's."""
        self.requests.get(ENDPOINT + '/allocation_candidates', json={
            'allocation_requests': [{'allocations': {
                rp: {'resources': {'PCPU': 2}}}} for rp in ('rp-1', 'rp-2')],
            'provider_summaries': {rp: {'root_provider_uuid': rp}
                                   for rp in ('rp-1', 'rp-2')}})
        self.requests.get(ENDPOINT + '/resource_providers/rp-2',
                          json={'uuid': 'rp-2', 'name': 'node2'})
        self.placement.candidate_limit = 7
        for among, name in (({'rp-2'}, 'node2'), ({'rp-3'}, None)):
            self.assertEqual(name, self.placement.candidate(
                [{'PCPU': 2}], ('!HW_CPU_X',), among))
        self.assertEqual(['/allocation_candidates?limit=7&resources=PCPU:2'
                          '&root_required=!HW_CPU_X',
                          '/resource_providers/rp-2'],
                         [r.path_url for r in self.requests.request_history])

    def test_each_candidate_query_once(self):
        self.requests.get(ENDPOINT + '/allocation_candidates', json={
            'allocation_requests': [], 'provider_summaries': {}})
        for _ in range(2):
            for groups in ([{'PCPU': 2}], [{'PCPU': 4}]):
                self.assertIsNone(self.placement.candidate(groups, ('!X',)))
        self.assertEqual(2, self.requests.call_count)

    def test_candidate_of_nested_and_sharing_providers(self):
        """The compute node is named, not a child or a sharing provider."""
        self.requests.get(ENDPOINT + '/allocation_candidates', json={
            'allocation_requests': [{'allocations': {
                'gpu': {'resources': {'VGPU': 1}},
                'nfs': {'resources': {'DISK_GB': 10}},
                'nic': {'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 10}},
                'node': {'resources': {'PCPU': 1}}}}],
            'provider_summaries': {
                'gpu': {'root_provider_uuid': 'node'},
                'nfs': {'root_provider_uuid': 'nfs'},
                'nic': {'root_provider_uuid': 'node'},
                'node': {'root_provider_uuid': 'node'}}})
        self.requests.get(ENDPOINT + '/resource_providers/node',
                          json={'uuid': 'node', 'name': 'node1'})

        self.assertEqual('node1', self.placement.candidate(
            [{'PCPU': 1, 'DISK_GB': 10}, {'VGPU': 1},
             {'NET_BW_EGR_KILOBIT_PER_SEC': 10}], ('!HW_CPU_X',)))
        self.assertEqual(
            '/allocation_candidates?group_policy=none&limit=1&'
            'resources=DISK_GB:10,PCPU:1&resources1=VGPU:1&'
            'resources2=NET_BW_EGR_KILOBIT_PER_SEC:10&'
            'root_required=!HW_CPU_X',
            self.requests.request_history[0].path_url)

    def test_no_candidate(self):
        self.requests.get(ENDPOINT + '/allocation_candidates', json={
            'allocation_requests': [], 'provider_summaries': {}})
        self.assertIsNone(self.placement.candidate([{'PCPU': 2}], ()))

    def not_found(self, method, url, detail):
        """Placement's own 404, as it answers for a missing provider."""
        self.requests.register_uri(
            method, ENDPOINT + url, status_code=404, reason='Not Found',
            json={'errors': [{'status': 404, 'title': 'Not Found',
                              'detail': 'The resource could not be found.'
                                        '\n\n %s  ' % detail,
                              'code': 'placement.undefined_code'}]})

    def test_a_deleted_provider_is_gone(self):
        rp = '2b0c2e1c-5a55-4f3d-8d47-3a3b1e5a9c11'
        self.not_found('GET', '/resource_providers/%s/inventories' % rp,
                       'No resource provider with uuid %s found : No '
                       'resource provider with uuid %s found' % (rp, rp))
        self.not_found('GET', '/resource_providers/%s/allocations' % rp,
                       "Resource provider '%s' not found: No resource "
                       "provider with uuid %s found" % (rp, rp))
        self.not_found('PUT', '/resource_providers/%s/inventories' % rp,
                       'No resource provider with uuid %s found' % rp)
        for read_only in (False, True):
            placement = clients.Placement(adapter('placement'), read_only)
            for call, args in ((placement.inventories, ()),
                               (placement.allocations, ()),
                               (placement.replace_inventories, (1, {}))):
                error = self.assertRaises(exception.ProviderGone, call, rp,
                                          *args)
                self.assertEqual(rp, error.uuid)
                self.assertEqual('placement: resource provider %s was '
                                 'deleted during the run.' % rp, str(error))

    def test_a_not_found_naming_no_provider_is_an_error(self):
        """A wrong endpoint path must not make every provider gone."""
        self.not_found('GET', '/resource_providers/rp/inventories',
                       'The resource could not be found.')
        error = self.assertRaises(exception.ServiceError,
                                  self.placement.inventories, 'rp')
        self.assertIn('/resource_providers/rp/inventories: 404 Not Found',
                      str(error))

    def test_read_only_each_answer_asked_once_each_reader_its_copy(self):
        self.requests.get(
            ENDPOINT + '/resource_providers/rp/inventories',
            json={'resource_provider_generation': 3, 'inventories': {
                'VCPU': {'total': 8, 'allocation_ratio': 16.0}}})
        placement = clients.Placement(adapter('placement'), read_only=True)

        _generation, first = placement.inventories('rp')
        first['VCPU']['allocation_ratio'] = 0.0

        self.assertEqual(
            (3, {'VCPU': {'total': 8, 'allocation_ratio': 16.0}}),
            tuple(placement.inventories('rp')))
        self.assertEqual(1, self.requests.call_count)

    def test_generation_conflict_is_reported_to_retry(self):
        self.requests.put(
            ENDPOINT + '/resource_providers/rp/inventories', status_code=409,
            json={'errors': [{'code': 'placement.concurrent_update'}]})
        self.assertFalse(self.placement.replace_inventories('rp', 1, {}))
        self.assertEqual('placement 1.26', self.requests.last_request.headers[
            'OpenStack-API-Version'])


class ComputeTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.requests = self.useFixture(rm_fixture.Fixture())
        self.compute = clients.Compute(adapter('compute'))
        self.newest('2.96')  # Nova 2024.1's

    def newest(self, version):
        """The Compute API's newest microversion is ``version``."""
        self.requests.get(ENDPOINT + '/', json={'version': {
            'id': 'v2.1', 'version': version, 'min_version': '2.1'}})

    def server(self, uuid, node):
        return {'id': uuid, 'OS-EXT-SRV-ATTR:hypervisor_hostname': node,
                'flavor': {'extra_specs': {}}}

    def two_pages(self, url, first, second):
        """Servers ``a`` and ``b``, then ``c``, of these nodes at ``url``."""
        self.requests.get(url, json={
            'servers': [self.server('a', first), self.server('b', second)],
            'servers_links': [{'rel': 'next', 'href': url + '&marker=b'}]})
        self.requests.get(url + '&marker=b', json={
            'servers': [self.server('c', first)]})

    def serve(self, servers, max_limit=1000):
        """Answer as Nova does for ``servers`` (UUIDs) sorted by UUID.

        A listing honours ``limit`` up to ``max_limit``, and ``marker``
        (400 if the marker is none of them); a full page links the next at
        :data:`NOVA_S_OWN`. One server is asked about by UUID.
        """
        servers = sorted(servers)

        def listing(request, context):
            query = urllib.parse.parse_qs(request.query)
            self.assertEqual((['uuid'], ['asc']),
                             (query['sort_key'], query['sort_dir']))
            start = 0
            if 'marker' in query:
                if query['marker'][0] not in servers:
                    context.status_code = 400
                    return {'badRequest': {'message': 'marker not found'}}
                start = servers.index(query['marker'][0]) + 1
            limit = min(int(query['limit'][0]), max_limit)
            page = servers[start:start + limit]
            query['marker'] = [page[-1]] if page else []
            links = ([{'rel': 'next', 'href': '%s%s?%s' % (
                NOVA_S_OWN, request.path, urllib.parse.urlencode(
                    query, doseq=True))}]
                if len(page) == limit else [])
            return {'servers': [self.server(uuid, 'compute1')
                                for uuid in page], 'servers_links': links}

        def one(request, context):
            uuid = request.path.rsplit('/', 1)[1]
            if uuid in servers:
                return {'server': self.server(uuid, 'compute1')}
            context.status_code = 404
            return {'itemNotFound': {'code': 404}}

        self.requests.get(re.compile(re.escape(
            ENDPOINT + '/servers/detail?')), json=listing)
        self.requests.get(re.compile(re.escape(ENDPOINT + '/servers/') +
                                     '[0-9a-z]+$'), json=one)

    def pages(self):
        return [urllib.parse.parse_qs(r.query)
                for r in self.requests.request_history
                if r.path.endswith('/servers/detail')]

    def test_every_server_wanted_from_one_listing(self):
        self.serve(['a', 'b', 'c'])
        listed = []

        servers = self.compute.servers({'a', 'c', 'gone'}, listed.append)

        self.assertEqual(['a', 'c'], sorted(servers))
        self.assertEqual([3], listed)
        # The version document, then one page.
        self.assertEqual(2, self.requests.call_count)

    @mock.patch.object(clients, 'PAGE', 4)
    def test_ranges_read_every_server_once(self):
        servers = ['%02d' % n for n in range(30)]
        self.serve(servers)
        # Each third server is wanted: 10 of them, 3 ranges of 4 a page.
        wanted = set(servers[::3])
        listed = []

        found = self.compute.servers(wanted, listed.append)

        self.assertEqual(wanted, set(found))
        self.assertEqual(len(servers), max(listed))
        pages = self.pages()
        # Split at the 4th and 7th server wanted, in pages of PAGE // 3;
        # each range reads at most one page past its end.
        markers = [page.get('marker', [None])[0] for page in pages]
        self.assertEqual(1, markers.count(None))
        self.assertIn('09', markers)
        self.assertIn('18', markers)
        self.assertEqual({'1'}, {page['limit'][0] for page in pages})
        self.assertLessEqual(len(pages), len(servers) + 3)

    @mock.patch.object(clients, 'PAGE', 4)
    def test_a_range_that_fails_fails_the_listing(self):
        servers = ['%02d' % n for n in range(30)]
        self.serve(servers)
        self.requests.get(ENDPOINT + '/servers/detail?all_tenants=1&limit=1&'
                          'sort_key=uuid&sort_dir=asc&marker=09',
                          status_code=500)

        error = self.assertRaises(exception.ServiceError,
                                  self.compute.servers, set(servers[::3]))

        self.assertIn('marker=09: 500', str(error))

    @mock.patch.object(clients, 'PAGE', 4)
    @mock.patch.object(clients, 'RANGES', 2)
    def test_a_marker_that_is_no_server_is_not_used(self):
        servers = ['%02d' % n for n in range(10)]
        self.serve(servers)
        # The middle one of the wanted is a migration's consumer.
        wanted = set(servers[:4]) | {'04x'} | set(servers[5:9])

        found = self.compute.servers(wanted, lambda listed: None)

        self.assertEqual(wanted - {'04x'}, set(found))
        markers = {page['marker'][0] for page in self.pages()
                   if 'marker' in page}
        self.assertNotIn('04x', markers)
        self.assertIn('05', markers)

    def test_pages_past_max_limit_at_our_own_url(self):
        """Nova's [api] max_limit caps each page below the limit asked.

        Each next page is asked at the client's endpoint, with the last
        server as marker, never at the host Nova's link names.
        """
        servers = ['%02d' % n for n in range(5)]
        self.serve(servers, max_limit=2)

        found = self.compute.servers(set(servers))

        self.assertEqual(set(servers), set(found))
        self.assertEqual([None, '01', '03'],
                         [page.get('marker', [None])[0]
                          for page in self.pages()])
        self.assertEqual({ENDPOINT}, {
            '%s://%s' % (r.scheme, r.netloc)
            for r in self.requests.request_history})

    def test_no_next_link_is_the_last_page(self):
        url = ENDPOINT + '/servers/detail?all_tenants=1&host=host1'
        self.requests.get(url, json={'servers': [
            self.server('a', 'compute1'), self.server('b', 'compute1')]})

        self.assertEqual(['a', 'b'], [s['id'] for s in
                                      self.compute.servers_on_node(
                                          'compute1', 'host1')])
        self.assertEqual(1, len(self.pages()))

    def test_node_hosts_page_by_page(self):
        """Hypervisors are paged by their UUID, ``id`` from 2.53."""
        first, second = ('%d1b0a2c4-3e5f-4a6b-8c7d-9e0f1a2b3c4d' % n
                         for n in (1, 2))
        url = ENDPOINT + '/os-hypervisors/detail'
        self.requests.get(url, json={
            'hypervisors': [{'id': first, 'hypervisor_hostname': 'node1',
                             'service': {'host': 'host1'}}],
            'hypervisors_links': [{'rel': 'next', 'href': (
                NOVA_S_OWN + '/v2.1/os-hypervisors/detail?marker=' +
                first)}]})
        self.requests.get(url + '?marker=' + first, json={
            'hypervisors': [{'id': second, 'hypervisor_hostname': 'node2',
                             'service': {'host': 'host2'}}]})

        self.assertEqual({'node1': 'host1', 'node2': 'host2'},
                         self.compute.node_hosts())
        self.assertEqual(['/os-hypervisors/detail?marker=' + first],
                         [r.path_url for r in
                          self.requests.request_history[1:]])

    def test_servers_listed_with_their_image_properties_where_offered(self):
        url = ENDPOINT + '/servers/detail?all_tenants=1&host=host1'
        for newest, used in (('2.97', '2.84'), ('2.98', '2.98'),
                             ('2.104', '2.98')):
            self.compute = clients.Compute(adapter('compute'))
            self.newest(newest)
            self.requests.get(url, json={'servers': []})
            self.requests.get(ENDPOINT + '/servers/s', json={'server': {
                'id': 's'}})
            for _ in range(2):
                self.compute.servers_on_node('compute1', 'host1')
                self.assertEqual('compute ' + used,
                                 self.requests.last_request.headers[
                                     'OpenStack-API-Version'])
            # Alone, as Nova shows servers of a cell that is down.
            self.compute.server('s')
            self.assertEqual('compute 2.84', self.requests.last_request
                             .headers['OpenStack-API-Version'])
        # The version document is read once per client.
        self.assertEqual(['/', '/servers/detail', '/servers/detail',
                          '/servers/s'],
                         [r.path for r in self.requests.request_history[-4:]])

    def test_servers_of_one_node_page_by_page(self):
        self.two_pages(ENDPOINT + '/servers/detail?all_tenants=1&host=host1',
                       'compute1', 'compute1b')

        servers = self.compute.servers_on_node('compute1', 'host1')

        # Another node of the same host is left out.
        self.assertEqual(['a', 'c'], [s['id'] for s in servers])
        self.assertEqual('compute 2.84', self.requests.last_request.headers[
            'OpenStack-API-Version'])

    def test_node_hosts(self):
        self.requests.get(ENDPOINT + '/os-hypervisors/detail', json={
            'hypervisors': [{'hypervisor_hostname': 'node1.example',
                             'service': {'host': 'node1'}}]})
        self.assertEqual({'node1.example': 'node1'},
                         self.compute.node_hosts())

    def test_hidden_extra_specs_are_an_error(self):
        self.requests.get(
            ENDPOINT + '/servers/detail?all_tenants=1&host=host1',
            json={'servers': [{'id': 'a', 'flavor': {}}]})
        error = self.assertRaises(exception.ServiceError,
                                  self.compute.servers_on_node, 'compute1',
                                  'host1')
        self.assertIn('os_compute_api:servers:show:flavor-extra-specs',
                      str(error))

    def test_image_asked_once(self):
        image = {'id': 'i', 'updated': '2026-01-01T00:00:00Z',
                 'metadata': {'hw_cpu_thread_policy': 'isolate'}}
        self.requests.get(ENDPOINT + '/images/i', json={'image': image})
        self.requests.get(ENDPOINT + '/images/gone', status_code=404,
                          json={'itemNotFound': {'code': 404}})

        for _ in range(2):
            self.assertEqual(image, self.compute.image('i'))
            self.assertIsNone(self.compute.image('gone'))
        self.assertEqual(2, self.requests.call_count)
        self.assertEqual('compute 2.35', self.requests.last_request.headers[
            'OpenStack-API-Version'])

    def test_images_are_asked_at_the_same_time(self):
        """A reader never waits for another image's answer.

        Image ``a`` is answered only once ``b`` has been asked for (the
        requests themselves are mocked: requests-mock answers one at a
        time).
        """
        a_asked, b_asked = threading.Event(), threading.Event()
        a_waited = []

        def ask(image_id):
            if image_id == 'a':
                a_asked.set()
                a_waited.append(b_asked.wait(5))
            else:
                b_asked.set()
            return {'id': image_id}

        self.useFixture(fixtures.MockPatchObject(self.compute, '_image',
                                                 side_effect=ask))
        reader_a = threading.Thread(target=self.compute.image, args=('a',))
        reader_a.start()
        self.addCleanup(reader_a.join)
        self.assertTrue(a_asked.wait(5))

        self.assertEqual({'id': 'b'}, self.compute.image('b'))
        reader_a.join(10)
        self.assertEqual([True], a_waited)
        self.assertEqual({'id': 'a'}, self.compute.image('a'))

    def test_readers_of_one_image_share_one_request(self):
        asked, answer = threading.Event(), threading.Event()

        def ask(image_id):
            asked.set()
            answer.wait(5)
            return {'id': image_id}

        fetch = self.useFixture(fixtures.MockPatchObject(
            self.compute, '_image', side_effect=ask)).mock
        images = []
        readers = [threading.Thread(
            target=lambda: images.append(self.compute.image('i')))
            for _ in range(3)]
        readers[0].start()
        self.assertTrue(asked.wait(5))
        for reader in readers[1:]:
            reader.start()
        answer.set()
        for reader in readers:
            reader.join(10)

        self.assertEqual([{'id': 'i'}] * 3, images)
        fetch.assert_called_once_with('i')

    def test_a_failed_image_read_fails_its_readers(self):
        self.requests.get(ENDPOINT + '/images/i', status_code=500)
        for _ in range(2):
            self.assertRaises(exception.ServiceError, self.compute.image, 'i')

    def test_other_not_found_is_an_error(self):
        # What placement answers when reached instead of Nova.
        self.requests.get(ENDPOINT + '/images/i', status_code=404,
                          json={'errors': [{'status': 404}]})
        self.requests.get(ENDPOINT + '/servers/s', status_code=404,
                          json={'errors': [{'status': 404}]})
        for call in (self.compute.image, self.compute.server):
            error = self.assertRaises(exception.ServiceError, call, 'i'
                                      if call == self.compute.image else 's')
            self.assertIn('unexpected answer (404 without itemNotFound): '
                          'is this the compute API?', str(error))

    def test_server_or_none(self):
        self.requests.get(ENDPOINT + '/servers/s', json={'server': {
            'id': 's'}})
        self.requests.get(ENDPOINT + '/servers/gone', status_code=404,
                          json={'itemNotFound': {'code': 404}})
        self.assertEqual({'id': 's'}, self.compute.server('s'))
        self.assertIsNone(self.compute.server('gone'))

    def test_servers_of_a_down_cell_are_no_error(self):
        self.requests.get(
            ENDPOINT + '/servers/detail?all_tenants=1&host=host1',
            json={'servers': [{'id': 'a', 'status': 'UNKNOWN'}]})
        self.assertEqual([], self.compute.servers_on_node('compute1',
                                                          'host1'))

    def test_refused_action(self):
        self.requests.post(ENDPOINT + '/servers/s/action', status_code=409,
                           json={'conflictingRequest': {
                               'message': 'Cannot live-migrate while it is '
                                          'in task_state migrating.'}})
        error = self.assertRaises(exception.ActionRefused,
                                  self.compute.action, 's',
                                  {'os-migrateLive': {}})
        self.assertEqual('os-migrateLive refused: Cannot live-migrate while '
                         'it is in task_state migrating', str(error))

    def test_action_error_of_the_newest_action(self):
        self.requests.get(ENDPOINT + '/servers/s/os-instance-actions', json={
            'instanceActions': [
                {'action': 'live-migration', 'request_id': 'req-new'},
                {'action': 'live-migration', 'request_id': 'req-old'}]})
        self.requests.get(
            ENDPOINT + '/servers/s/os-instance-actions/req-new', json={
                'instanceAction': {'events': [
                    {'event': 'conductor_live_migrate_instance',
                     'result': 'Success'},
                    {'event': 'compute_pre_live_migration',
                     'result': 'Error', 'details': 'No space left'}]}})

        self.assertEqual('compute_pre_live_migration: No space left',
                         self.compute.action_error('s', 'live-migration'))
        self.assertIsNone(self.compute.action_error('s', 'migrate'))
