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

    #: What the operator checks when the service fails.
    hint = ''

    def __init__(self, adapter, microversion):
        self.adapter = adapter
        self.microversion = microversion

    def request(self, method, url, expected=(200,), **kwargs):
        """Send a request; return the response if its status is expected.

        :raises ServiceError: for connection failures, timeouts and other
            statuses, naming the service, the request and what to check.
        """
        try:
            response = self.adapter.request(
                url, method, microversion=self.microversion,
                raise_exc=False, **kwargs)
        except ks_exc.ConnectTimeout:
            # keystoneauth raises this for read timeouts too.
            raise self._error(method, url, 'timed out')
        except ks_exc.SSLError:
            raise self._error(method, url, 'TLS verification failed; give '
                              'the CA bundle ([placement] cafile or '
                              '--os-cacert)')
        except ks_exc.ConnectFailure:
            raise self._error(method, url, 'cannot connect')
        except ks_exc.ClientException as error:
            # Authentication and catalog problems; never carry secrets.
            raise self._error(method, url, str(error).splitlines()[0])
        if response.status_code in expected:
            return response
        raise self._error(method, url, _http_problem(response))

    def _error(self, method, url, problem):
        try:
            url = self.adapter.get_endpoint().rstrip('/') + url
        except ks_exc.ClientException:
            pass  # no endpoint known: the path alone still says what failed
        return exception.ServiceError('%s: %s %s: %s. %s' % (
            self.adapter.service_type, method, url, problem, self.hint))


def _http_problem(response):
    if response.status_code == 401:
        return '401 Unauthorized: the credentials were rejected'
    if response.status_code == 403:
        return '403 Forbidden: the user needs the admin role'
    return '%d %s' % (response.status_code, response.reason)


class Placement(Service):

    hint = ('Check that placement is up and that [placement] in nova.conf '
            '(or the --os-* options) point at it with admin credentials.')

    def __init__(self, adapter):
        super().__init__(adapter, PLACEMENT_VERSION)

    def providers(self, required_trait=None):
        url = '/resource_providers'
        if required_trait:
            url += '?required=%s' % required_trait
        return self.request('GET', url).json()['resource_providers']

    def inventories(self, uuid):
        """``(provider generation, {resource class: inventory})``."""
        body = self.request(
            'GET', '/resource_providers/%s/inventories' % uuid).json()
        return body['resource_provider_generation'], body['inventories']

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
        errors = response.json().get('errors') or [{}]
        if errors[0].get('code') != 'placement.concurrent_update':
            raise self._error('PUT', url, '409 %s' % errors[0].get('title'))
        return False

    def allocations(self, uuid):
        """``{consumer uuid: {resource class: amount}}`` of a provider."""
        body = self.request(
            'GET', '/resource_providers/%s/allocations' % uuid).json()
        return {consumer: allocation['resources'] for consumer, allocation
                in body['allocations'].items()}


class Compute(Service):

    hint = ('Check that the Compute API is up and reachable with admin '
            'credentials (--os-compute-endpoint-override for noauth).')

    def __init__(self, adapter):
        super().__init__(adapter, COMPUTE_VERSION)

    def server(self, uuid):
        """The server, or None if the consumer is not one (a migration)."""
        response = self.request('GET', '/servers/%s' % uuid,
                                expected=(200, 404))
        return response.json()['server'] if response.ok else None


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
