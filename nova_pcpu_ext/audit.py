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

"""Find, and where safe repair, what the seed bugs left in placement.

* Inventories (bug 1789654): ``VCPU``, ``MEMORY_MB`` or ``DISK_GB`` with an
  allocation ratio that is not a positive finite number, ``PCPU`` with a
  ratio other than 1.0. Repaired by rewriting the provider's inventory with
  its generation, so a concurrent writer's change is never overwritten.
* Allocations (bug 1889633): servers whose flavor asks for dedicated CPUs
  but which consume ``VCPU`` on a hyperthreaded provider that has ``PCPU``.
  Only reported: moving them is a migration the operator schedules.
"""

import dataclasses

from keystoneauth1 import exceptions as ks_exc
import os_resource_classes as orc
import os_traits

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import exception

FAILURE = 'failure'
WARNING = 'warning'

#: 1.18 filters providers by trait; 1.26 accepts reserved == total, which
#: Nova writes for disabled resources, when an inventory is written back.
PLACEMENT_VERSION = '1.26'
#: The first Compute API microversion embedding the flavor in a server.
COMPUTE_VERSION = '2.47'
#: Attempts to write one provider's inventory against concurrent writers.
WRITE_ATTEMPTS = 5

#: Resource classes whose ratio the ``allocation_ratios`` rule decides.
RULED = tuple(rc for rc, _stem, _default in allocation_ratios.RATIOS)


@dataclasses.dataclass
class Finding:
    check: str
    severity: str
    provider_name: str
    provider_uuid: str
    problem: str
    action: str
    consumer: str = ''
    fixed: bool = False


class Service(object):
    """A keystoneauth adapter whose failures become one-line errors."""

    #: The service's name in messages.
    name = ''
    #: What the operator checks when the service fails.
    hint = ''

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
                    '%s: no endpoint: give one (--os-%s-endpoint-override).'
                    % (self.name, self.name))
            self._endpoint = endpoint.rstrip('/')

    def request(self, method, url, expected=(200,), **kwargs):
        """Send a request; return the response if its status is expected.

        :raises ServiceError: for connection failures, timeouts and other
            statuses, naming the service, the request and what to check.
        """
        self.connect()
        try:
            response = self.adapter.request(
                url, method, microversion=self.microversion,
                raise_exc=False, **kwargs)
        except ks_exc.ClientException as error:
            raise self._error(method, url, reason(error))
        except OSError as error:
            # requests' own error for an unreadable CA bundle or client
            # certificate, which keystoneauth passes on as it is.
            raise self._error(method, url, 'TLS files: %s' % error)
        if response.status_code not in expected:
            raise self._error(method, url, _http_problem(response))
        return response

    def get(self, url, *keys):
        """The values under ``keys`` of the JSON answer, in order."""
        return self._values(self.request('GET', url), *keys)

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
        return ('TLS verification failed; give the CA bundle ([placement] '
                'cafile or --os-cacert)')
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
    return '%d %s' % (response.status_code, response.reason)


class Placement(Service):

    name = 'placement'
    hint = ('Check that placement is up and that [placement] in nova.conf '
            '(or the --os-* options) point at it with admin credentials.')

    def __init__(self, adapter):
        super().__init__(adapter, PLACEMENT_VERSION)

    def providers(self, required_trait=None):
        url = '/resource_providers'
        if required_trait:
            url += '?required=%s' % required_trait
        providers, = self.get(url, 'resource_providers')
        return providers

    def inventories(self, uuid):
        """``(provider generation, {resource class: inventory})``."""
        return self.get('/resource_providers/%s/inventories' % uuid,
                        'resource_provider_generation', 'inventories')

    def replace_inventories(self, uuid, generation, inventories):
        """Write a provider's whole inventory in one atomic request.

        :returns: False if another writer changed the provider since
            ``generation`` was read; nothing is written then.
        """
        url = '/resource_providers/%s/inventories' % uuid
        response = self.request(
            'PUT', url, expected=(200, 409),
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
        """``{consumer uuid: {resource class: amount}}`` of a provider."""
        allocations, = self.get(
            '/resource_providers/%s/allocations' % uuid, 'allocations')
        return {consumer: allocation['resources'] for consumer, allocation
                in allocations.items()}


class Compute(Service):

    name = 'compute'
    hint = ('Check that the Compute API is up and reachable with admin '
            'credentials (--os-compute-endpoint-override without a service '
            'catalog).')

    def __init__(self, adapter):
        super().__init__(adapter, COMPUTE_VERSION)

    def server(self, uuid):
        """The server, or None if the consumer is not one (a migration)."""
        url = '/servers/%s' % uuid
        response = self.request('GET', url, expected=(200, 404))
        if response.status_code == 404:
            # Only Nova's own "not found" says that this is no server: a
            # token endpoint without a compute override reaches placement.
            self._values(response, 'itemNotFound')
            return None
        server, = self._values(response, 'server')
        if not isinstance(server.get('flavor', {}).get('extra_specs'), dict):
            raise self._error('GET', url, (
                'no flavor extra specs in the answer; the policy '
                'os_compute_api:servers:show:flavor-extra-specs must allow '
                'this user'))
        return server


def fix_ratios(conf, overrides=None):
    """``{resource class: ratio}`` a fix writes.

    The ``allocation_ratios`` rule on this nova.conf, with explicit
    ``overrides``; ``PCPU`` is always 1.0.
    """
    allocation_ratios.validate_ratio_options(conf)
    ratios = allocation_ratios.configured_ratios(conf)
    ratios.update(overrides or {})
    ratios[orc.PCPU] = 1.0
    return ratios


def _bad_ratios(inventories):
    """``(resource class, ratio, severity)`` of each ratio to repair."""
    for rc, inventory in sorted(inventories.items()):
        ratio = inventory.get('allocation_ratio', 1.0)
        if rc in RULED and not allocation_ratios.is_usable(ratio):
            yield rc, ratio, FAILURE
        elif rc == orc.PCPU and ratio != 1.0:
            yield rc, ratio, WARNING


def audit_inventories(placement, ratios, fix=False):
    """Findings for every provider's allocation ratios, repaired if ``fix``.

    :param ratios: ``{resource class: ratio}`` to write, see
        :func:`fix_ratios`.
    """
    findings = []
    for provider in placement.providers():
        try:
            findings += _audit_provider(placement, provider, ratios, fix)
        except exception.ServiceError as error:
            fixed = sum(finding.fixed for finding in findings)
            if not fixed:
                raise
            raise exception.ServiceError(
                '%s %d allocation ratios were fixed before; run the audit '
                'again for the rest.' % (error, fixed))
    return findings


def _audit_provider(placement, provider, ratios, fix):
    for _attempt in range(WRITE_ATTEMPTS):
        generation, inventories = placement.inventories(provider['uuid'])
        bad = list(_bad_ratios(inventories))
        if not (fix and bad):
            return [_ratio_finding(provider, bad_ratio, ratios, False)
                    for bad_ratio in bad]
        for rc, _ratio, _severity in bad:
            inventories[rc]['allocation_ratio'] = ratios[rc]
        # Re-read and re-decide after a conflict: the other writer may
        # have changed the inventory, even fixed it.
        if placement.replace_inventories(
                provider['uuid'], generation, inventories):
            return [_ratio_finding(provider, bad_ratio, ratios, True)
                    for bad_ratio in bad]
    raise exception.ServiceError(
        'placement: resource provider %s (%s) changed during each of %d '
        'attempts to fix its allocation ratios; nothing was written to it. '
        'Run the audit again when it is quieter.' % (
            provider['name'], provider['uuid'], WRITE_ATTEMPTS))


def _ratio_finding(provider, bad_ratio, ratios, fixed):
    rc, ratio, severity = bad_ratio
    if severity == FAILURE:
        problem = '%s allocation_ratio %s is not a positive number' % (
            rc, ratio)
    else:
        problem = '%s allocation_ratio %s is not 1.0' % (rc, ratio)
    action = '%s allocation_ratio to %s' % (
        'set' if fixed else '--fix sets', ratios[rc])
    return Finding('inventory', severity, provider['name'],
                   provider['uuid'], problem, action, fixed=fixed)


def audit_allocations(placement, compute):
    """Findings for dedicated-CPU servers consuming VCPU on an HT host."""
    findings = []
    for provider in placement.providers(os_traits.HW_CPU_HYPERTHREADING):
        _generation, inventories = placement.inventories(provider['uuid'])
        if orc.PCPU not in inventories:
            continue
        allocations = placement.allocations(provider['uuid'])
        for consumer, resources in sorted(allocations.items()):
            if resources.get(orc.VCPU):
                server = compute.server(consumer)
                if server and _dedicated(server):
                    findings.append(_allocation_finding(
                        provider, server, resources[orc.VCPU]))
    return findings


def _dedicated(server):
    return server['flavor']['extra_specs'].get('hw:cpu_policy') == \
        'dedicated'


def _allocation_finding(provider, server, vcpus):
    flavor = server['flavor']
    specs = ', '.join('%s=%s' % spec for spec in sorted(
        flavor['extra_specs'].items()) if spec[0].startswith('hw:cpu_'))
    problem = ('server on host %s, flavor %s (%s), consumes VCPU:%d on a '
               'hyperthreaded host with PCPU (bug 1889633)' % (
                   server.get('OS-EXT-SRV-ATTR:host'),
                   flavor['original_name'], specs, vcpus))
    action = ('not fixed automatically; with isolate_vcpu_fallback active '
              'on every scheduler run: openstack server migrate '
              '--live-migration %s' % server['id'])
    return Finding('allocation', FAILURE, provider['name'], provider['uuid'],
                   problem, action, consumer=server['id'])
