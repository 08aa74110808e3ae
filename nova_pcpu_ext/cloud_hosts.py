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

"""The cloud's hosts as placement shows them, and their classes.

* A compute host's or node's resource providers, found by name.
* Providers read in parallel, one deleted meanwhile told apart.
* Legacy hosts (no ``PCPU`` inventory) and hosts reporting ``PCPU``,
  which the modes of the ``isolate_vcpu_fallback`` request filter treat
  apart, and the hyperthreaded ones; the providers without a trait.
"""

import concurrent.futures
import dataclasses

import os_resource_classes as orc
import os_traits

from nova_pcpu_ext import clients
from nova_pcpu_ext import exception

HYPERTHREADING = os_traits.HW_CPU_HYPERTHREADING


def providers(placement, compute, host=None, provider=None):
    """The resource providers of a compute host or node, one, or all.

    :param host: a compute host as the Compute API names services, or a
        compute node; the Compute API is asked only when no provider has
        this name.
    :raises NotFound: if nothing has this name or UUID.
    """
    if provider:
        found = placement.providers(uuid=provider)
        what = '--provider %s: no resource provider has this UUID.' % provider
    elif host:
        found = placement.providers(name=host) or [
            rp for node in sorted(hosts_matching(compute.node_hosts(), host))
            for rp in placement.providers(name=node)]
        what = '--host %s: no compute host or compute node has this name.' % (
            host)
    else:
        return placement.providers()
    if not found:
        raise exception.NotFound(what)
    return found


def quiet(what, done, total):
    """A ``progress`` that reports nothing."""


def read_all(read, items, progress=quiet, what=''):
    """``[read(item) for item in items]``, :data:`~clients.READERS` at a time.

    ``progress(what, done, total)`` after each. The first failure is
    raised once the reads before it are done; reads not started by then
    never start.
    """
    pool = concurrent.futures.ThreadPoolExecutor(clients.READERS)
    try:
        futures = [pool.submit(read, item) for item in items]
        results = []
        for future in futures:
            results.append(future.result())
            progress(what, len(results), len(futures))
        return results
    finally:
        pool.shutdown(cancel_futures=True)


def hosts_matching(hosts, host):
    """The compute nodes of ``host``, a service host or a node name."""
    return {node for node, service_host in hosts.items()
            if host in (node, service_host)}


def unless_gone(read, *args, **kwargs):
    """``read(*args, **kwargs)``, or None if a provider was deleted."""
    try:
        return read(*args, **kwargs)
    except exception.ProviderGone:
        return None


def knows_trait(placement, trait):
    """Whether placement knows ``trait``: it refuses to filter by others."""
    known, = placement.get('/traits?name=in:%s' % trait, 'traits')
    return bool(known)


@dataclasses.dataclass
class ComputeNodes:
    """The cloud's compute node providers, by how they report their CPUs.

    A compute node provider is the root of a tree with ``VCPU`` or
    ``PCPU`` inventory. Each list is in placement's order.
    """

    #: Those whose tree reports ``VCPU`` but no ``PCPU``: configured with
    #: ``vcpu_pin_set``, or with no dedicated CPUs. Nova's VCPU fallback
    #: query exists for them.
    legacy: list
    #: Those whose tree reports ``PCPU``.
    new_style: list
    #: UUIDs of the providers with the ``HW_CPU_HYPERTHREADING`` trait.
    hyperthreaded: frozenset


def compute_nodes(placement, progress=quiet):
    """The :class:`ComputeNodes` of the cloud.

    The provider list, every provider's inventories (each tree's, as
    ``PCPU`` may be reported below the root) and the hyperthreaded
    providers: what the inventory audit and the isolate scan read too. A
    provider deleted meanwhile is in neither list.
    """
    every = placement.providers()
    held = read_all(lambda provider: inventories_unless_gone(
        placement, provider), every, progress, 'reading inventories')
    classes = {}  # {root UUID: resource classes of its tree}
    for provider, inventories in zip(every, held):
        classes.setdefault(root(provider), set()).update(inventories or ())
    legacy, new_style = [], []
    for provider, inventories in zip(every, held):
        if root(provider) != provider['uuid'] or inventories is None:
            continue  # nested (a tree is judged by its root), or deleted
        if orc.PCPU in classes[provider['uuid']]:
            new_style.append(provider)
        elif orc.VCPU in classes[provider['uuid']]:
            legacy.append(provider)
    return ComputeNodes(legacy, new_style, frozenset(
        provider['uuid'] for provider in
        placement.providers(required=HYPERTHREADING)))


def root(provider):
    return provider.get('root_provider_uuid', provider['uuid'])


def inventories_unless_gone(placement, provider):
    """``{resource class: inventory}`` of a provider, or None if deleted."""
    read = unless_gone(placement.inventories, provider['uuid'])
    return None if read is None else read[1]


def lacking_trait(placement, targets, trait):
    """The providers of ``targets`` without ``trait``.

    Two requests whatever the number of providers: whether placement
    knows the trait (it refuses to filter by one it does not know), then
    the providers with it.
    """
    if not targets:
        return []
    having = {provider['uuid'] for provider in
              placement.providers(required=trait)
              } if knows_trait(placement, trait) else set()
    return [provider for provider in targets
            if provider['uuid'] not in having]
