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
* Ratios the ``allocation_ratios`` rule will change once it is enabled.
* Isolate servers (bug 1889633): servers that must not share a core with
  another thread but consume ``VCPU`` on a hyperthreaded host.
"""

import concurrent.futures
import dataclasses

import os_resource_classes as orc
import os_traits

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import exception

FAILURE = 'failure'
WARNING = 'warning'

#: Attempts to write one provider's inventory against concurrent writers.
WRITE_ATTEMPTS = 5
#: Hosts whose servers are looked up at a time.
READERS = 8

#: Resource classes whose ratio the ``allocation_ratios`` rule decides.
RULED = tuple(rc for rc, _stem, _default in allocation_ratios.RATIOS)
STEMS = {rc: stem for rc, stem, _default in allocation_ratios.RATIOS}

HYPERTHREADING = os_traits.HW_CPU_HYPERTHREADING


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


def providers(placement, host=None, provider=None):
    """The resource providers of a compute node, one provider, or all."""
    if provider:
        return placement.providers(uuid=provider)
    if host:
        return placement.providers(name=host)
    return placement.providers()


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


def audit_inventories(placement, ratios, fix=False, targets=None):
    """Findings for providers' allocation ratios, repaired if ``fix``.

    :param ratios: ``{resource class: ratio}`` to write, see
        :func:`fix_ratios`.
    :param targets: the providers to audit, all by default.
    """
    if targets is None:
        targets = placement.providers()
    findings = []
    for provider in targets:
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


def ratio_changes(placement, conf):
    """Findings for usable ratios the ``allocation_ratios`` rule changes.

    What the rule would write for this nova.conf, provider by provider;
    unusable ratios are :func:`audit_inventories`' findings.
    """
    allocation_ratios.validate_ratio_options(conf)
    findings = []
    for provider in placement.providers():
        _generation, inventories = placement.inventories(provider['uuid'])
        held = {rc: inventory.get('allocation_ratio', 1.0)
                for rc, inventory in inventories.items()}
        wanted = allocation_ratios.configured_ratios(conf, held)
        for rc in RULED:
            if (rc in held and allocation_ratios.is_usable(held[rc]) and
                    held[rc] != wanted[rc]):
                findings.append(Finding(
                    'ratio', WARNING, provider['name'], provider['uuid'],
                    '%s allocation_ratio %s becomes %s' % (
                        rc, held[rc], wanted[rc]),
                    'to keep %s, set [DEFAULT] %s_allocation_ratio = %s on '
                    'its compute' % (held[rc], STEMS[rc], held[rc])))
    return findings


@dataclasses.dataclass
class IsolateServer:
    """A server that must not share cores, consuming VCPU on an HT host."""

    server: dict
    provider: dict
    #: Why it must not share cores, such as ``flavor
    #: hw:cpu_thread_policy=isolate``.
    reason: str
    vcpus: int
    #: The host has no PCPU inventory: it pins from ``vcpu_pin_set``.
    legacy: bool

    @property
    def host(self):
        return self.server.get('OS-EXT-SRV-ATTR:host')


def isolate_reason(server, compute):
    """Why a server must not share a core, or None.

    The flavor's thread policy wins over the image's, as in Nova; an
    explicit forbidden trait counts too. A server booted from a volume has
    no image to ask; a deleted image tells nothing.
    """
    specs = server['flavor']['extra_specs']
    if 'hw:cpu_thread_policy' in specs:
        if specs['hw:cpu_thread_policy'] == 'isolate':
            return 'flavor hw:cpu_thread_policy=isolate'
    elif server.get('image'):
        properties = compute.image_properties(server['image']['id'])
        if (properties or {}).get('hw_cpu_thread_policy') == 'isolate':
            return 'image hw_cpu_thread_policy=isolate'
    if specs.get('trait:%s' % HYPERTHREADING) == 'forbidden':
        return 'flavor trait:%s=forbidden' % HYPERTHREADING
    return None


def isolate_servers(placement, compute, host=None):
    """Every :class:`IsolateServer`, one server listing per host.

    Only hyperthreaded hosts with servers consuming VCPU are asked about
    their servers, :data:`READERS` hosts at a time, after one listing of
    the compute nodes' hosts.
    """
    providers = [provider for provider in
                 placement.providers(required=HYPERTHREADING)
                 if not host or provider['name'] == host]
    if not providers:
        return []
    hosts = compute.node_hosts()
    with concurrent.futures.ThreadPoolExecutor(READERS) as pool:
        found = pool.map(
            lambda provider: _isolate_servers_on(placement, compute, hosts,
                                                 provider), providers)
        return [server for on_host in found for server in on_host]


def _isolate_servers_on(placement, compute, hosts, provider):
    vcpus = {consumer: resources[orc.VCPU] for consumer, resources in
             placement.allocations(provider['uuid']).items()
             if resources.get(orc.VCPU)}
    if not vcpus:
        return []
    found = []
    # A provider is named after its compute node; for a node the Compute
    # API does not list, the name is the best guess of its host.
    node = provider['name']
    for server in compute.servers_on_node(node, hosts.get(node, node)):
        reason = server['id'] in vcpus and isolate_reason(server, compute)
        if reason:
            found.append((server, reason))
    if not found:
        return []
    _generation, inventories = placement.inventories(provider['uuid'])
    return [IsolateServer(server, provider, reason, vcpus[server['id']],
                          legacy=orc.PCPU not in inventories)
            for server, reason in found]


def isolate_destinations(placement):
    """Providers with a free PCPU and without hyperthreads."""
    return placement.providers(required='!' + HYPERTHREADING,
                               resources='%s:1' % orc.PCPU)
