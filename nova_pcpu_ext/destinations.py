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

"""The destinations ``heal isolate`` asks placement for.

A server found by the isolate scan is moved to a host without
hyperthreads or, in ``legacy_only`` mode, to a legacy host: the
placement queries that find one, as the scheduler makes them.
"""

import os_resource_classes as orc
import os_traits

from nova_pcpu_ext import clients
from nova_pcpu_ext import cloud_hosts
from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext import server_fields

#: Traits of the compute node of every eligible destination: no
#: hyperthreads, not disabled.
DESTINATION_TRAITS = ('!' + cloud_hosts.HYPERTHREADING,
                      '!' + os_traits.COMPUTE_STATUS_DISABLED)
#: Those of the ``legacy_only`` fallback query's: a legacy host.
LEGACY_DESTINATION_TRAITS = ('!' + pcpu_trait.TRAIT,
                             '!' + os_traits.COMPUTE_STATUS_DISABLED)


def destination_requests(found, mode='drop'):
    """``[(request groups, root traits)]`` of a move of ``found``.

    One item per placement query, as the scheduler in ``mode`` (see
    ``[pcpu_ext] isolate_fallback_mode``) makes them. The groups are
    rebuilt from what it holds now, as Nova's granular request groups
    were met: the unnumbered group first, with what it holds of its
    compute node and of sharing providers, then one group per nested
    provider. A ``dedicated`` server asks for its CPUs as PCPU of a host
    without hyperthreads and, in ``legacy_only`` mode, through the
    fallback query, as VCPU of a legacy host, with hyperthreads too for
    the ``isolate`` thread policy, which Nova pins on one thread per core
    there.
    """
    unnumbered = clients.summed({
        rp: resources for rp, resources in found.allocations.items()
        if rp not in found.nested})
    nested = [found.allocations[rp] for rp in sorted(found.nested)]
    if not found.dedicated:
        return [([unnumbered] + nested, DESTINATION_TRAITS)]
    cpus = unnumbered.pop(orc.VCPU, 0) + unnumbered.pop(orc.PCPU, 0)
    pcpus = [dict(unnumbered, **{orc.PCPU: cpus})] + nested
    requests = [(pcpus, DESTINATION_TRAITS)]
    if mode == 'legacy_only':
        fallback = [dict(unnumbered, **{orc.VCPU: cpus})] + nested
        requests.append((fallback, LEGACY_DESTINATION_TRAITS + (
            () if found.isolate else ('!' + cloud_hosts.HYPERTHREADING,))))
    return requests


def cells_nodes(placement, scan):
    """``{cell: UUIDs of its compute nodes}`` of the cells the scan read.

    Empty where the servers were read from the Compute API, which does
    not show their cells.
    """
    if not scan.cell_nodes:
        return {}
    uuids = {provider['name']: provider['uuid']
             for provider in placement.providers()}
    return {cell: frozenset(uuids[node] for node in nodes if node in uuids)
            for cell, nodes in scan.cell_nodes.items()}


def in_cell(cells, found):
    """The ``among`` of :func:`destination` for ``found``, or None."""
    return cells.get(found.server.get(server_fields.CELL))


def destination(placement, found, mode='drop', among=None):
    """A compute node with room for ``found`` now, or None.

    The name of its resource provider: an enabled host without
    hyperthreads, or, in ``legacy_only`` mode, a legacy host.

    :param among: UUIDs of the compute nodes of the server's cell, where
        known: Nova moves a server within its cell only.
    """
    for groups, root_required in destination_requests(found, mode):
        name = placement.candidate(groups, root_required, among)
        if name is not None:
            return name
    return None
