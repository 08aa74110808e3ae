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

"""Placement and Compute API clients of the operator commands.

Every failure becomes one :class:`~nova_pcpu_ext.exception.ServiceError`
line naming the service, the request and what to check. Requests are
retried on connection failures and on 502, 503 and 504 answers, a bounded
number of times (see :data:`RETRIES`).
"""

import concurrent.futures
import json
import os
import threading
import urllib.parse

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
import openstack.config
import openstack.exceptions
from oslo_config import cfg

from nova_pcpu_ext import exception

#: 1.22 filters by forbidden traits; 1.26 accepts reserved == total, which
#: Nova writes for disabled resources, when an inventory is written back.
PLACEMENT_VERSION = '1.26'
#: Allocation candidates as Nova's scheduler asks for them: 1.29 offers
#: nested providers, 1.35 has root_required; Nova asks at 1.36.
CANDIDATES_VERSION = '1.36'
#: Resource classes of the compute node itself, never of a nested or
#: sharing provider: the node of a candidate is the root of their provider.
NODE_CLASSES = ('PCPU', 'VCPU')
#: 2.47 embeds the flavor in a server, 2.84 names the error of an instance
#: action's event; Nova 2024.1 serves up to 2.96.
COMPUTE_VERSION = '2.84'
#: Servers show the image properties Nova stored when they were created
#: (``image.properties``), where the Compute API offers it (Nova 2025.1).
IMAGE_PROPERTIES_VERSION = '2.98'
#: Servers per page of a listing: Nova's default [api] max_limit.
PAGE = 1000
#: Ranges of the cloud's server listing read at the same time, one more
#: per :data:`PAGE` servers wanted: each is served by another API worker.
RANGES = 4
#: The last Compute API microversion with the image proxy.
IMAGE_PROXY_VERSION = '2.35'
#: Seconds per request unless [placement] timeout says.
DEFAULT_TIMEOUT = 30.0
#: Retries of a request that could not connect, timed out, or was answered
#: 502, 503 or 504, after 0.5, 1 and 2 s: 3.5 s of waiting at most, plus
#: the time of each attempt. [placement] connect_retries and
#: status_code_retries in nova.conf take precedence.
RETRIES = 3
RETRIABLE_STATUS_CODES = (502, 503, 504)
#: Requests at a time of the commands' readers, and the connections kept
#: open for them (requests keeps 10 by default, and drops the rest).
READERS = 16
#: No retry: what the request changes might be done twice.
NO_RETRY = {'connect_retries': 0, 'status_code_retries': 0}

CLI_OPTS = [
    cfg.StrOpt('os-compute-endpoint-override', metavar='URL',
               help='URL of the Compute API instead of the service '
                    'catalog\'s, given before the command.'),
    cfg.StrOpt('os-cloud', metavar='NAME', default=os.environ.get('OS_CLOUD'),
               help='Use the Compute API as this cloud of clouds.yaml '
                    '(envvars: the OS_* variables), so that Nova records '
                    'who moved what; default: $OS_CLOUD, else the '
                    '[placement] credentials. Given before the command.'),
]


def connect(conf, read_only=False):
    """The placement and Compute API clients, from ``[placement]``.

    Both use the credentials, session and interface of nova.conf's
    ``[placement]``, as Nova's own commands do; the Compute API those of
    the operator's cloud in clouds.yaml where ``--os-cloud`` names one.

    :param read_only: for a command that writes nothing: placement's
        answers are read once and kept.
    """
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, 'placement')
        session = ks_loading.load_session_from_conf_options(
            conf, 'placement', auth=auth)
        placement = ks_loading.load_adapter_from_conf_options(
            conf, 'placement', session=session, auth=auth)
    except (ks_exc.ClientException, OSError, TypeError) as error:
        # TypeError: keystoneauth's word for a bad [placement]
        # valid_interfaces; OSError: an unreadable certificate file.
        raise exception.InvalidConfig('[placement]: %s' % error)
    if auth is None:
        raise exception.InvalidConfig(
            'no credentials: set auth_type and its options in [placement] '
            'of nova.conf')
    _authenticated(session, '[placement]')
    if conf.os_cloud:
        compute = _operator_compute(conf)
    else:
        compute = ks_adapter.Adapter(
            session, auth=auth, service_type='compute',
            region_name=placement.region_name, interface=placement.interface,
            endpoint_override=conf.os_compute_endpoint_override)
    for adapter in (placement, compute):
        if adapter.connect_retries is None:
            adapter.connect_retries = RETRIES
        if adapter.status_code_retries is None:
            adapter.status_code_retries = RETRIES
        adapter.retriable_status_codes = list(RETRIABLE_STATUS_CODES)
    client = Placement(placement, read_only)
    client.candidate_limit = conf.scheduler.max_placement_results
    return client, Compute(compute)


def _operator_compute(conf):
    """The Compute API as the operator's cloud of clouds.yaml."""
    try:
        cloud = openstack.config.get_cloud_region(cloud=conf.os_cloud)
        session = cloud.get_session()
    except (openstack.exceptions.SDKException,
            ks_exc.ClientException) as error:
        raise exception.InvalidConfig('--os-cloud %s: %s' % (
            conf.os_cloud, error))
    _authenticated(session, 'cloud %s of clouds.yaml' % conf.os_cloud)
    return ks_adapter.Adapter(
        session, service_type='compute',
        region_name=cloud.get_region_name('compute'),
        interface=cloud.get_interface('compute'),
        endpoint_override=(conf.os_compute_endpoint_override or
                           cloud.get_endpoint('compute')))


def _authenticated(session, credentials):
    """Makes ``session`` ready for the readers and takes its token."""
    if session.timeout is None:
        session.timeout = DEFAULT_TIMEOUT
    for http_adapter in session.session.adapters.values():
        # Rebuilt with room for every reader; TLS settings stay.
        http_adapter.init_poolmanager(READERS, READERS)
    try:
        # Once, up front: a failure here is the identity service's.
        session.get_token()
    except ks_exc.ClientException as error:
        raise exception.ServiceError(
            'identity: cannot authenticate: %s. Check the credentials in '
            '%s and the identity service they name.' % (
                reason(error), credentials))


class Service(object):
    """A keystoneauth adapter whose failures become one-line errors."""

    #: The service's name in messages.
    name = ''
    #: What the operator checks when the service fails.
    hint = ''
    #: Where the operator gives the endpoint.
    endpoint_option = ''

    def __init__(self, adapter, microversion):
        self.adapter = adapter
        self.microversion = microversion
        self._endpoint = None

    def connect(self):
        """Find the service's URL in the catalog, once."""
        if self._endpoint is None:
            try:
                endpoint = self.adapter.get_endpoint()
            except ks_exc.ClientException as error:
                raise exception.ServiceError(
                    '%s: cannot find the endpoint: %s. Check the service '
                    'catalog, or give the endpoint.' % (
                        self.name, reason(error)))
            if not endpoint:
                raise exception.ServiceError(
                    '%s: no endpoint: give one (%s).' % (
                        self.name, self.endpoint_option))
            self._endpoint = endpoint.rstrip('/')

    def request(self, method, url, expected=(200,), **kwargs):
        """Send a request; return the response if its status is expected.

        :raises ServiceError: for connection failures, timeouts and other
            statuses, naming the service, the request and what to check.
        """
        self.connect()
        kwargs.setdefault('microversion', self.microversion)
        try:
            response = self.adapter.request(url, method, raise_exc=False,
                                            **kwargs)
        except ks_exc.ClientException as error:
            raise self._error(method, url, reason(error))
        except OSError as error:
            # requests' own error for an unreadable CA bundle or client
            # certificate, which keystoneauth passes on as it is.
            raise self._error(method, url, 'TLS files: %s' % error)
        if response.status_code not in expected:
            raise self._error(method, url, _http_problem(response))
        return response

    def get(self, url, *keys, **kwargs):
        """The values under ``keys`` of the JSON answer, in order."""
        return self._values(self.request('GET', url, **kwargs), *keys)

    def _values(self, response, *keys):
        try:
            body = response.json()
            return [body[key] for key in keys]
        except (ValueError, KeyError, TypeError):
            raise self._error(
                response.request.method, response.request.url,
                'unexpected answer (%d without %s): is this the %s API?' % (
                    response.status_code, ', '.join(keys), self.name))

    def _error(self, method, url, problem):
        if '://' not in url:
            url = (self._endpoint or '') + url
        return exception.ServiceError('%s: %s %s: %s. %s' % (
            self.name, method, url, problem, self.hint))


def reason(error):
    """A short reason for a keystoneauth error; never a secret."""
    if isinstance(error, ks_exc.ConnectTimeout):
        # keystoneauth raises this for read timeouts too.
        return 'timed out'
    if isinstance(error, ks_exc.SSLError):
        return ('TLS verification failed; give the CA bundle in [placement] '
                'cafile')
    if isinstance(error, ks_exc.ConnectFailure):
        return 'cannot connect'
    if isinstance(error, ks_exc.HttpError):
        return _http_problem(error.response) if error.response is not None \
            else '%s %s' % (error.http_status, error.message)
    return str(error).splitlines()[0]


def _http_problem(response):
    if response.status_code == 401:
        return '401 Unauthorized: the credentials were rejected'
    if response.status_code == 403:
        return '403 Forbidden: the user needs the admin role'
    explanation = _explanation(response)
    return '%d %s%s' % (response.status_code, response.reason,
                        ': ' + explanation if explanation else '')


def summed(allocations):
    """``{resource class: amount}`` of ``{provider: {rc: amount}}``."""
    resources = {}
    for allocation in allocations.values():
        for rc, amount in allocation.items():
            resources[rc] = resources.get(rc, 0) + amount
    return resources


def _resources(resources):
    """``RC:N,...`` of ``{resource class: amount}``, as placement reads it."""
    return ','.join('%s:%d' % item for item in sorted(resources.items()))


def _with_query(url, query):
    if not query:
        return url
    return url + '?' + urllib.parse.urlencode(sorted(query.items()),
                                              safe='!,:')


def _with_marker(url, marker):
    """``url`` asking for the items after ``marker``, its query kept."""
    path, _sep, query = url.partition('?')
    params = [(name, value) for name, value
              in urllib.parse.parse_qsl(query, keep_blank_values=True)
              if name != 'marker']
    return '%s?%s' % (path, urllib.parse.urlencode(
        params + [('marker', marker)], safe='!,:'))


def _numbers(version):
    """``(2, 98)`` of a microversion such as ``'2.98'``."""
    return tuple(map(int, version.split('.')))


def _explanation(response):
    """The message of a Compute API or placement error answer, or ''."""
    try:
        fault, = response.json().values()
        message = (fault[0]['detail'] if isinstance(fault, list)
                   else fault['message'])
    except (ValueError, AttributeError, KeyError, IndexError, TypeError):
        return ''
    return ' '.join(str(message).split()).rstrip('.')


class Placement(Service):

    name = 'placement'
    hint = ('Check that placement is up and that [placement] in nova.conf '
            'points at it with admin credentials.')
    endpoint_option = '[placement] endpoint_override'

    #: Candidates asked for where a destination must be in a cell: Nova's
    #: default ``[scheduler] max_placement_results``.
    candidate_limit = 1000

    def __init__(self, adapter, read_only=False):
        super().__init__(adapter, PLACEMENT_VERSION)
        self._answers = {} if read_only else None
        #: ``{query: [compute node UUID]}``: each destination query once a
        #: run.
        self._candidates = {}
        #: ``{compute node UUID: name}`` of the destinations found.
        self._names = {}

    def get(self, url, *keys, **kwargs):
        if self._answers is None:
            return super().get(url, *keys, **kwargs)
        asked = (url, keys, kwargs.get('microversion'))
        if asked not in self._answers:
            # As JSON, each caller's copy of an answer is parsed from:
            # faster than a deep copy of 10,000 providers.
            self._answers[asked] = json.dumps(super().get(url, *keys,
                                                          **kwargs))
        return json.loads(self._answers[asked])

    def providers(self, **query):
        """Resource providers, filtered by ``query``.

        ``query`` holds ``GET /resource_providers``' parameters, such as
        ``required`` or ``resources``.
        """
        providers, = self.get(_with_query('/resource_providers', query),
                              'resource_providers')
        return providers

    def traits(self, uuid):
        traits, = self.get('/resource_providers/%s/traits' % uuid, 'traits')
        return traits

    def request(self, method, url, expected=(200,), provider=None,
                **kwargs):
        """:meth:`Service.request`, about one ``provider`` if given.

        :param provider: the UUID of the resource provider the request is
            about.
        :raises ProviderGone: when placement answers that ``provider`` does
            not exist (deleted since it was listed).
        """
        if provider is None:
            return super().request(method, url, expected, **kwargs)
        response = super().request(method, url, tuple(expected) + (404,),
                                   **kwargs)
        if response.status_code != 404:
            return response
        # NOTE: placement's 404 for a missing provider names it; a 404 that
        # does not (a wrong endpoint path) must not skip every provider.
        if provider in _explanation(response):
            raise exception.ProviderGone(provider)
        raise self._error(method, url, _http_problem(response))

    def inventories(self, uuid):
        """``(provider generation, {resource class: inventory})``.

        :raises ProviderGone: if the provider was deleted.
        """
        return self.get('/resource_providers/%s/inventories' % uuid,
                        'resource_provider_generation', 'inventories',
                        provider=uuid)

    def replace_inventories(self, uuid, generation, inventories):
        """Write a provider's whole inventory in one atomic request.

        :returns: False if another writer changed the provider since
            ``generation`` was read; nothing is written then.
        :raises ProviderGone: if the provider was deleted.
        """
        url = '/resource_providers/%s/inventories' % uuid
        response = self.request(
            'PUT', url, expected=(200, 409), provider=uuid,
            json={'resource_provider_generation': generation,
                  'inventories': inventories})
        if response.status_code == 200:
            return True
        errors, = self._values(response, 'errors')
        error = errors[0] if errors else {}
        if error.get('code') != 'placement.concurrent_update':
            detail = ' '.join(str(error.get('detail')).split())
            raise self._error('PUT', url, '409 %s' % detail.rstrip('.'))
        return False

    def allocations(self, uuid):
        """``{consumer uuid: {resource class: amount}}`` of a provider.

        :raises ProviderGone: if the provider was deleted.
        """
        allocations, = self.get(
            '/resource_providers/%s/allocations' % uuid, 'allocations',
            provider=uuid)
        return {consumer: allocation['resources'] for consumer, allocation
                in allocations.items()}

    def consumer_allocations(self, consumer):
        """``{provider uuid: {resource class: amount}}`` of a consumer."""
        allocations, = self.get('/allocations/%s' % consumer, 'allocations')
        return {rp_uuid: allocation['resources'] for rp_uuid, allocation
                in allocations.items()}

    def candidate(self, groups, root_required, among=None):
        """The name of the compute node of a candidate for ``groups``, or None.

        :param groups: ``[{resource class: amount}]``: the unnumbered
            group, then groups each to be had from one provider, as
            Nova's granular request groups are.
        :param root_required: traits of the root provider of the
            candidate's tree, ``!`` before each forbidden one.
        :param among: UUIDs of the compute nodes it must be one of (a
            server's cell's), or None for any: then placement is asked
            for :attr:`candidate_limit` candidates, as Nova's scheduler
            asks for ``[scheduler] max_placement_results`` and keeps those
            of the server's cell.
        """
        query = {'resources': _resources(groups[0]),
                 'root_required': ','.join(root_required),
                 'limit': 1 if among is None else self.candidate_limit}
        for number, resources in enumerate(groups[1:], 1):
            query['resources%d' % number] = _resources(resources)
        if len(groups) > 2:
            # NOTE: placement needs a policy for several numbered groups;
            # Nova's default too.
            query['group_policy'] = 'none'
        url = _with_query('/allocation_candidates', query)
        if url not in self._candidates:
            self._candidates[url] = self._candidate_nodes(url)
        node = next((root for root in self._candidates[url]
                     if among is None or root in among), None)
        if node is None:
            return None
        if node not in self._names:
            self._names[node], = self.get('/resource_providers/%s' % node,
                                          'name')
        return self._names[node]

    def _candidate_nodes(self, url):
        """The UUIDs of the compute nodes of the candidates, in order."""
        candidates, summaries = self.get(
            url, 'allocation_requests', 'provider_summaries',
            microversion=CANDIDATES_VERSION)
        nodes = []
        for candidate in candidates:
            # NOTE: a candidate also holds providers nested under the node
            # (VGPU, PCI devices, port bandwidth) and sharing ones (shared
            # storage), in no particular order.
            allocations = candidate['allocations']
            provider = next((rp for rp, allocation in allocations.items()
                             if set(allocation['resources']) &
                             set(NODE_CLASSES)), next(iter(allocations)))
            nodes.append(summaries[provider]['root_provider_uuid'])
        return nodes


class Compute(Service):

    name = 'compute'
    hint = ('Check that the Compute API is up and reachable with admin '
            'credentials (--os-compute-endpoint-override without a service '
            'catalog).')
    endpoint_option = '--os-compute-endpoint-override'

    def __init__(self, adapter):
        super().__init__(adapter, COMPUTE_VERSION)
        #: ``{image ID: Future of the image}``: each asked once.
        self._images = {}
        self._server_version = None
        # Readers share the image cache and the servers found; never held
        # during a request, so that readers do not wait for each other.
        self._lock = threading.Lock()
        # Every reader needs the version: held while it is asked.
        self._version_lock = threading.Lock()

    def server_version(self):
        """The microversion servers are listed at, asked once.

        :data:`IMAGE_PROPERTIES_VERSION` where the Compute API offers it,
        :data:`COMPUTE_VERSION` before.
        """
        with self._version_lock:
            if self._server_version is None:
                version, = self.get('/', 'version')
                try:
                    newest = _numbers(version['version'])
                except (TypeError, KeyError, AttributeError, ValueError):
                    newest = ()  # no microversions: 2.84 fails clearly
                self._server_version = (
                    IMAGE_PROPERTIES_VERSION
                    if newest >= _numbers(IMAGE_PROPERTIES_VERSION)
                    else COMPUTE_VERSION)
        return self._server_version

    def _pages(self, url, key, **kwargs):
        """The items of a paginated listing, page by page.

        Nova links a next page to a full one: ``limit`` items, or its
        ``[api] max_limit`` where that is less, so a page shorter than the
        limit asked may have a next one. That page is asked at ``url`` with
        the last item's ID as ``marker``, never at Nova's link: without
        ``[api] compute_link_prefix`` the link names the host Nova was
        reached at, which behind a proxy terminating TLS is not the
        client's.
        """
        while True:
            response = self.request('GET', url, **kwargs)
            page, = self._values(response, key)
            yield page
            links = response.json().get(key + '_links') or []
            if not page or not any(link.get('rel') == 'next'
                                   for link in links):
                return
            url = _with_marker(url, page[-1]['id'])

    def node_hosts(self):
        """``{compute node name: its service's host}``, in one listing.

        At :data:`COMPUTE_VERSION` (2.53 or later) a hypervisor's ``id`` is
        its UUID, which Nova takes as the ``marker`` of the next page.
        """
        return {hypervisor['hypervisor_hostname']:
                hypervisor['service']['host'] for page in
                self._pages('/os-hypervisors/detail', 'hypervisors')
                for hypervisor in page}

    def _listed_servers(self, url):
        """Every server of a listing, flavors embedded, page by page."""
        for page in self._pages(url, 'servers',
                                microversion=self.server_version()):
            for server in page:
                # A server of a cell that is down is listed with its UUID
                # and status UNKNOWN only.
                if server.get('status') != 'UNKNOWN':
                    self._check_extra_specs(server, url)
            yield page

    def servers(self, wanted, progress=lambda listed: None):
        """``{UUID: server}`` of the servers in ``wanted``, flavors embedded.

        From one listing of the whole cloud sorted by UUID, :data:`PAGE`
        servers a request, split at servers of ``wanted`` into up to
        :data:`RANGES` ranges read at the same time; ``progress(servers
        listed)`` after each page.
        """
        bounds = [None] + self._markers(wanted) + [None]
        # NOTE: a range's last page runs past its end; smaller pages keep
        # the servers Nova renders for nothing as few as with one range.
        limit = PAGE // (len(bounds) - 1)
        found, listed = {}, 0
        failed = threading.Event()  # the other ranges stop at their next page

        def read_range(first, last):
            """The servers after ``first`` up to ``last``, both UUIDs."""
            nonlocal listed
            url = ('/servers/detail?all_tenants=1&limit=%d&sort_key=uuid&'
                   'sort_dir=asc' % limit)
            if first:
                url += '&marker=' + first
            try:
                for page in self._listed_servers(url):
                    if failed.is_set():
                        return
                    in_range = [server for server in page
                                if last is None or server['id'] <= last]
                    with self._lock:
                        found.update((server['id'], server)
                                     for server in in_range
                                     if server['id'] in wanted)
                        listed += len(in_range)
                        progress(listed)
                    if last is not None and page and page[-1]['id'] >= last:
                        return  # the next range starts after ``last``
            except BaseException:
                failed.set()
                raise

        with concurrent.futures.ThreadPoolExecutor(len(bounds) - 1) as pool:
            for future in [pool.submit(read_range, *pair)
                           for pair in zip(bounds, bounds[1:])]:
                future.result()
        return found

    def _markers(self, wanted):
        """UUIDs of listed servers of ``wanted`` that split it evenly.

        Nova answers 400 for a marker that is no server it can list (a
        migration's consumer, a server of a cell that is down): each is
        asked about first, and the next one in order stands in.
        """
        ordered = sorted(wanted)
        ranges = min(RANGES, len(ordered) // PAGE + 1)
        markers = []
        for split in range(1, ranges):
            for uuid in ordered[len(ordered) * split // ranges:]:
                if markers and uuid <= markers[-1]:
                    continue
                server = self.server(uuid)
                if server and server.get('status') != 'UNKNOWN':
                    markers.append(uuid)
                    break
        return markers

    def servers_on_node(self, node, host):
        """Every server of a compute node, flavors embedded.

        Listed by ``host``, which Nova's database matches exactly (``node``
        would be a pattern), then kept by node.
        """
        url = '/servers/detail?all_tenants=1&host=%s' % urllib.parse.quote(
            host)
        return [server for page in self._listed_servers(url)
                for server in page if server.get(
                    'OS-EXT-SRV-ATTR:hypervisor_hostname') == node]

    def server(self, uuid):
        """A server, or None if there is none with this UUID.

        At :data:`COMPUTE_VERSION`: Nova's answer for a server of a cell
        that is down fails its own response schema from 2.98.
        """
        response = self.request('GET', '/servers/%s' % uuid,
                                expected=(200, 404))
        if response.status_code == 404:
            # Only Nova's own "not found" says that there is no server.
            self._values(response, 'itemNotFound')
            return None
        server, = self._values(response, 'server')
        return server

    def _check_extra_specs(self, server, url):
        if not isinstance(server.get('flavor', {}).get('extra_specs'), dict):
            raise self._error('GET', url, (
                'no flavor extra specs in the answer; the policy '
                'os_compute_api:servers:show:flavor-extra-specs must allow '
                'this user'))

    def image(self, image_id):
        """An image with its ``metadata``, or None if gone; asked once.

        Its first reader asks for it; the others wait for that answer, and
        for no other image's.
        """
        with self._lock:
            answer = self._images.get(image_id)
            asking = answer is None
            if asking:
                answer = self._images[image_id] = concurrent.futures.Future()
        if asking:
            try:
                answer.set_result(self._image(image_id))
            except BaseException as error:
                answer.set_exception(error)
        return answer.result()

    def _image(self, image_id):
        response = self.request('GET', '/images/%s' % image_id,
                                expected=(200, 404),
                                microversion=IMAGE_PROXY_VERSION)
        if response.status_code == 404:
            # Only Nova's own "not found" says that the image is gone.
            self._values(response, 'itemNotFound')
            return None
        image, = self._values(response, 'image')
        image.setdefault('metadata', {})
        return image

    def action(self, uuid, body):
        """Start a server action, such as ``{'migrate': None}``.

        Never retried: the action could start twice.

        :raises ActionRefused: when Nova answers 400 or 409.
        """
        response = self.request('POST', '/servers/%s/action' % uuid,
                                expected=(202, 204, 400, 409), json=body,
                                **NO_RETRY)
        if response.status_code >= 400:
            raise exception.ActionRefused('%s refused: %s' % (
                next(iter(body)), _explanation(response) or
                response.reason))

    def action_error(self, uuid, action):
        """What failed in the server's newest ``action``, if anything.

        :param action: an instance action's name, like ``live-migration``.
        """
        actions, = self.get('/servers/%s/os-instance-actions' % uuid,
                            'instanceActions')
        # Newest first.
        request_id = next((found['request_id'] for found in actions
                           if found['action'] == action), None)
        if request_id is None:
            return None
        found, = self.get('/servers/%s/os-instance-actions/%s' % (
            uuid, request_id), 'instanceAction')
        for event in found.get('events') or ():
            if event.get('result') == 'Error':
                return '%s: %s' % (event['event'], event.get('details') or
                                   'failed')
        return None
