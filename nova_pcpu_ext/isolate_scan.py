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

"""The isolate scan: servers that forbid hyperthreads on such hosts.

Isolate servers (bug 1889633): servers that must not share a core with
another thread but consume ``VCPU`` on a hyperthreaded host, told apart
from those Nova isolated the legacy way on ``vcpu_pin_set`` hosts, and
the allocations placement holds for them, read for that.
"""

import dataclasses

import os_resource_classes as orc
import os_traits

from nova_pcpu_ext import clients
from nova_pcpu_ext import cloud_hosts
from nova_pcpu_ext import exception
from nova_pcpu_ext import server_fields

#: The trait of a provider sharing its resources with the compute nodes of
#: its aggregates.
SHARING = os_traits.MISC_SHARES_VIA_AGGREGATE


@dataclasses.dataclass
class IsolateServer:
    """A server whose request forbids hyperthreads, on a hyperthreaded host.

    Or an ``isolate`` server on a legacy host without hyperthreads, where
    :func:`isolate_servers` is asked to scan those too.
    """

    server: dict
    #: The hyperthreaded provider (or legacy host) it holds resources of.
    provider: dict
    #: Why its request forbids hyperthreads, such as ``flavor
    #: hw:cpu_thread_policy=isolate``; '' when only unsure.
    reason: str
    #: ``{provider UUID: {resource class: amount}}`` it holds.
    allocations: dict
    #: Isolated as Nova means it: its thread policy is ``isolate`` and its
    #: host reports no PCPU, so it pins from ``vcpu_pin_set`` and Nova
    #: pinned one thread per core and reserved the siblings.
    legacy: bool
    #: Its CPU policy is ``dedicated``: Nova asks for its CPUs as PCPU.
    dedicated: bool
    #: Why ``reason`` may not be what Nova scheduled it with, or ''.
    unsure: str = ''
    #: The providers of its compute node's tree, other than the node, it
    #: holds resources of: VGPU, PCI devices, port bandwidth.
    nested: frozenset = frozenset()
    #: Its provider has the ``HW_CPU_HYPERTHREADING`` trait; else it is a
    #: legacy host without hyperthreads (see ``legacy_hosts`` of
    #: :func:`isolate_servers`).
    hyperthreaded: bool = True
    #: Isolated the legacy way on a host since converted to
    #: ``cpu_dedicated_set``: Nova's reshape turned its VCPU into PCPU.
    reshaped: bool = False
    #: Its thread policy is ``isolate``, not only a forbidden trait.
    isolate: bool = False

    @property
    def host(self):
        return self.server.get('OS-EXT-SRV-ATTR:host')

    @property
    def held(self):
        """``{resource class: amount}`` it holds, on every provider."""
        return clients.summed(self.allocations)


@dataclasses.dataclass
class Elsewhere:
    """A server holding resources of a scanned host it does not run on.

    Left there by a move: a migration or resize in progress holds the
    destination until it ends, an evacuation the source until that compute
    starts again, when Nova removes it. Judged where it runs, never here.
    """

    server: dict
    #: The scanned provider it holds resources of.
    provider: dict

    @property
    def runs_on(self):
        """The compute node it runs on, or None."""
        return self.server[server_fields.NODE]

    @property
    def why(self):
        task = self.server.get('OS-EXT-STS:task_state')
        if task:
            return 'a move in progress (task %s)' % task
        return ('left by a move; an evacuation\'s stays until the compute of '
                '%s starts again' % self.provider['name'])


@dataclasses.dataclass
class IsolateScan:
    """What :func:`isolate_servers` found on the hyperthreaded hosts.

    And on the legacy hosts without hyperthreads it was asked to scan.
    """

    found: list
    #: ``{compute node: [consumer UUID]}``: servers that could not be read,
    #: such as those of a cell that is down.
    unseen: dict
    #: Names of the legacy hosts without hyperthreads scanned too.
    without_ht: frozenset = frozenset()
    #: :class:`Elsewhere` of servers that forbid hyperthreads.
    elsewhere: list = dataclasses.field(default_factory=list)
    #: Providers deleted while they were scanned.
    gone: list = dataclasses.field(default_factory=list)
    #: :class:`~nova_pcpu_ext.nova_db.CellRead` of each cell, when servers
    #: are read from Nova's databases.
    cells: list = dataclasses.field(default_factory=list)
    #: ``{compute node of unseen: its cell}``, None where unknown (the
    #: Compute API does not say).
    unseen_cells: dict = dataclasses.field(default_factory=dict)
    #: ``{cell: names of its compute nodes}`` of the cells that answered,
    #: when servers are read from Nova's databases.
    cell_nodes: dict = dataclasses.field(default_factory=dict)

    def unseen_by_cell(self, hosts=None):
        """``[(cell or None, {host: consumers})]`` of :attr:`unseen`.

        Sorted by cell, the unknown one first; of ``hosts`` alone if
        given.
        """
        by_cell = {}
        for host, consumers in self.unseen.items():
            if hosts is None or host in hosts:
                by_cell.setdefault(self.unseen_cells.get(host), {})[
                    host] = consumers
        return sorted(by_cell.items(), key=lambda item: item[0] or '')


def _policy(specs, properties, name):
    """A CPU policy as Nova reads it: the flavor's, else the image's."""
    return specs.get('hw:' + name, properties.get('hw_' + name))


def _image_properties(server, compute):
    """``(image properties of the server's request, image asked or None)``.

    Those Nova stored when the server was created, where the Compute API
    shows them (microversion 2.98); before, the image's current ones, and
    the image to tell whether they changed since. A server booted from a
    volume has no image to ask; a deleted image tells nothing.
    """
    image = server.get('image')
    if not image:
        return {}, None
    if 'properties' in image:
        return image['properties'], None
    image = compute.image(image['id'])
    return (image['metadata'], image) if image else ({}, None)


def isolate_reason(server, compute):
    """``(why the server's request forbids hyperthreads, why unsure)``.

    An explicit forbidden trait counts as the isolate thread policy does;
    the flavor's thread policy wins over the image's, as in Nova. Where
    the Compute API shows only the image's current properties, they
    decide, and the image changed after the server was created, the
    answer is unsure.
    """
    specs = server['flavor']['extra_specs']
    if specs.get('trait:%s' % cloud_hosts.HYPERTHREADING) == 'forbidden':
        return 'flavor trait:%s=forbidden' % cloud_hosts.HYPERTHREADING, ''
    if 'hw:cpu_thread_policy' in specs:
        return ('flavor hw:cpu_thread_policy=isolate'
                if specs['hw:cpu_thread_policy'] == 'isolate' else ''), ''
    properties, image = _image_properties(server, compute)
    reason = ('image hw_cpu_thread_policy=isolate' if
              properties.get('hw_cpu_thread_policy') == 'isolate' else '')
    pinned = (_policy(specs, properties, 'cpu_policy') or
              properties.get('hw_cpu_thread_policy'))
    # NOTE: both are ISO 8601 UTC timestamps of the Compute API.
    if image and pinned and (image.get('updated') or '') > server['created']:
        return reason, 'image %s changed after the server was created' % (
            image['id'])
    return reason, ''


def isolate_servers(placement, compute, host=None, progress=cloud_hosts.quiet,
                    legacy_hosts=(), database=None):
    """An :class:`IsolateScan` of the hyperthreaded hosts.

    With ``database``, the servers that may forbid hyperthreads are read
    from Nova's databases first, and placement is asked what each holds;
    the hosts of a cell whose database does not answer are read as
    without ``database``, their servers then not judged. Without it, the
    consumers of every hyperthreaded provider are read from placement,
    then found in one listing of the cloud's servers (of the host's, with
    ``host``), a consumer the listing missed asked about alone.

    :param host: only this compute host (as the Compute API names
        services) or compute node.
    :param legacy_hosts: legacy compute node providers (see
        :func:`~nova_pcpu_ext.cloud_hosts.compute_nodes`) to scan too: on
        those without hyperthreads, only servers with the ``isolate``
        thread policy are kept.
    :param database: a :class:`~nova_pcpu_ext.nova_db.NovaDatabase`.
    :raises NotFound: if no compute host or node has that name.
    """
    hyperthreaded = placement.providers(required=cloud_hosts.HYPERTHREADING)
    with_ht = {provider['uuid'] for provider in hyperthreaded}
    targets = hyperthreaded + [provider for provider in legacy_hosts
                               if provider['uuid'] not in with_ht]
    if host:
        hosts = _node_hosts(compute)
        nodes = cloud_hosts.hosts_matching(hosts, host) | {host}
        targets = [p for p in targets if p['name'] in nodes]
        if not targets:
            # Unknown, or no HT there.
            cloud_hosts.providers(placement, compute, host)
    candidates = database.candidates() if database else None
    if candidates is None:
        held = {}
        consumers = _consumers(placement, targets, progress)
    else:
        held, consumers = _held_by_candidates(placement, targets,
                                              candidates, progress)
        if database.down_cells:
            _add_unanswered(placement, database, targets, consumers,
                            progress)
    # ``[(provider, its consumers)]`` of the providers with consumers.
    used = [item for item in zip(targets, consumers) if item[1]]
    wanted = {consumer for _provider, on_provider in used
              for consumer in on_provider}
    if not wanted:
        listed = {}
    elif candidates is not None:
        listed = dict(candidates)
        others = wanted - set(candidates)
        if others:
            listed.update(database.servers(others, lambda count: progress(
                'reading servers', count, None)))
            listed.update((consumer, None) for consumer in others - set(
                listed))
    elif host:
        # A provider is named after its compute node; for a node the
        # Compute API does not list, the name is the best guess of its
        # host.
        listed = {server['id']: server for provider, _consumers in used
                  for server in compute.servers_on_node(
                      provider['name'], hosts.get(provider['name'],
                                                  provider['name']))}
    else:
        listed = compute.servers(wanted, lambda count: progress(
            'listing servers', count, None))
    missing = sorted(wanted - set(listed))
    listed.update(zip(missing, cloud_hosts.read_all(
        compute.server, missing, progress, 'asking for servers not listed')))
    scans = cloud_hosts.read_all(
        lambda item: cloud_hosts.unless_gone(
            _scan_provider, placement, compute, listed, *item,
            hyperthreaded=item[0]['uuid'] in with_ht, held=held),
        used, progress, 'reading the allocations of servers found')
    scanned = [(provider, scan) for (provider, _consumers), scan
               in zip(used, scans) if scan is not None]
    return IsolateScan(
        [found for _provider, (on_host, _, _) in scanned
         for found in on_host],
        {provider['name']: unseen for provider, (_, unseen, _) in scanned
         if unseen},
        frozenset(provider['name'] for provider in targets
                  if provider['uuid'] not in with_ht),
        [moved for _provider, (_, _, elsewhere) in scanned
         for moved in elsewhere],
        [provider for provider, read in zip(targets, consumers)
         if read is None] + [provider for (provider, _consumers), scan
                             in zip(used, scans) if scan is None],
        database.cell_reads() if database else [],
        {provider['name']: _cell_of(listed, unseen) for provider, (
            _, unseen, _) in scanned if unseen},
        dict(database.cell_nodes) if database else {})


def _consumers(placement, targets, progress):
    """Per target, the consumers of its resources, or None if deleted."""
    return cloud_hosts.read_all(
        lambda provider: cloud_hosts.unless_gone(
            placement.allocations, provider['uuid']), targets, progress,
        'reading allocations')


def _add_unanswered(placement, database, targets, consumers, progress):
    """Add the consumers of the targets no cell that answered holds.

    The hosts of the cells whose database did not answer (and providers
    of no compute node any cell knows): their servers are then found in
    no cell that answered, and are told apart as not judged.
    """
    answered = set().union(*database.cell_nodes.values())
    unread = [index for index, provider in enumerate(targets)
              if provider['name'] not in answered]
    read = _consumers(placement, [targets[index] for index in unread],
                      progress)
    for index, on_provider in zip(unread, read):
        consumers[index] = None if on_provider is None else sorted(
            set(consumers[index] or ()) | set(on_provider))


def _held_by_candidates(placement, targets, candidates, progress):
    """``(held, consumers)`` of the targets, read where candidates are.

    ``held``: ``{UUID: allocations}`` of the candidates (servers that may
    forbid hyperthreads) holding resources of a target; ``consumers``: per
    target, those candidates, or None if it was deleted meanwhile.
    Placement is asked what each target holds where a candidate runs or
    one of its moves began or ends, one read a host. A candidate is asked
    about alone where it may hold resources of other providers than its
    hosts (a nested tree, a sharing provider), which judging it needs.
    """
    hosts = _hosts_of(candidates, targets)
    on_hosts = cloud_hosts.read_all(lambda provider: cloud_hosts.unless_gone(
        placement.allocations, provider['uuid']), hosts, progress,
        'reading allocations of hosts')
    held = {}
    for provider, allocations in zip(hosts, on_hosts):
        for consumer, resources in (allocations or {}).items():
            if consumer in candidates:
                held.setdefault(consumer, {})[provider['uuid']] = resources
    beyond = _beyond_a_node(placement) if held else set()
    alone = [consumer for consumer, allocations in held.items()
             if set(allocations) & beyond]
    held.update(zip(alone, cloud_hosts.read_all(
        placement.consumer_allocations, alone, progress,
        'reading allocations of servers')))
    holders = {}
    for consumer in candidates:
        for rp_uuid in held.get(consumer, ()):
            holders.setdefault(rp_uuid, []).append(consumer)
    gone = {provider['uuid'] for provider, allocations
            in zip(hosts, on_hosts) if allocations is None}
    return held, [None if provider['uuid'] in gone else
                  holders.get(provider['uuid'], []) for provider in targets]


def _hosts_of(candidates, targets):
    """The targets where candidates run or their moves began or end."""
    nodes = set()
    for server in candidates.values():
        nodes.add(server.get(server_fields.NODE))
        nodes.update(server.get(server_fields.MOVE_NODES, ()))
    return [provider for provider in targets if provider['name'] in nodes]


def _beyond_a_node(placement):
    """UUIDs of the nodes whose servers may hold other providers' resources.

    Every root provider when one shares its resources, else those with
    providers below them.
    """
    every = placement.providers()
    if placement.providers(required=SHARING):
        return {cloud_hosts.root(provider) for provider in every}
    return {cloud_hosts.root(provider) for provider in every
            if cloud_hosts.root(provider) != provider['uuid']}


def _cell_of(listed, unseen):
    """The cell of the servers not judged on a host, or None if unknown."""
    cells = {(listed[consumer] or {}).get(server_fields.CELL)
             for consumer in unseen}
    return cells.pop() if len(cells) == 1 else None


def _node_hosts(compute):
    """``{compute node: its host}``, or {} while a cell is down."""
    try:
        return compute.node_hosts()
    except exception.ServiceError:
        # NOTE: Nova lists compute nodes cell by cell and fails as a whole
        # when one cell is down. The listing only saves look-ups: without
        # it, each provider's name stands for its host and each server the
        # host's listing misses is asked about alone.
        return {}


def _scan_provider(placement, compute, listed, provider, consumers,
                   hyperthreaded=True, held=None):
    """``([IsolateServer], [unseen consumer], [Elsewhere])`` of a provider.

    :param listed: ``{UUID: server or None}`` of every consumer.
    :param held: ``{UUID: allocations}`` of consumers already read.
    :param hyperthreaded: else a legacy host without hyperthreads, where
        only the ``isolate`` thread policy matters: a forbidden trait is
        met there, as Nova's fallback query carries it.
    :raises ProviderGone: if the provider was deleted meanwhile.
    """
    found, unseen, elsewhere = [], [], []
    for consumer in consumers:
        server = listed[consumer]
        if server is None:
            continue  # a migration's allocation, or one left behind
        if server['status'] == 'UNKNOWN':
            unseen.append(consumer)  # its cell is down
            continue
        reason, unsure = isolate_reason(server, compute)
        if not (reason or unsure) or not (hyperthreaded or _cpu_policy(
                server, compute, 'cpu_thread_policy') == 'isolate'):
            continue
        # NOTE: a provider is named after its compute node; a server
        # shown without its node (a policy hiding it) is judged here.
        if server.get(server_fields.NODE,
                      provider['name']) != provider['name']:
            elsewhere.append(Elsewhere(server, provider))
        else:
            found.append((server, reason, unsure))
    if not found:
        return [], unseen, elsewhere
    _generation, inventories = placement.inventories(provider['uuid'])
    tree = None  # read once, for the first server holding other providers
    isolate_servers = []
    for server, reason, unsure in found:
        allocations = (held or {}).get(server['id']) or \
            placement.consumer_allocations(server['id'])
        if tree is None and set(allocations) - {provider['uuid']}:
            tree = {rp['uuid'] for rp in
                    placement.providers(in_tree=provider['uuid'])}
        allocations = _of_this_node(allocations, provider, tree or set())
        isolate = _cpu_policy(server, compute,
                              'cpu_thread_policy') == 'isolate'
        # Pinned the legacy way: the host reports no PCPU, or Nova's
        # reshape moved the server's VCPU to PCPU when the host was
        # converted (the PCPU query of an isolate server forbids
        # hyperthreads, so nothing else holds PCPU of such a host).
        reshaped = isolate and orc.PCPU in allocations[provider['uuid']]
        isolate_servers.append(IsolateServer(
            server, provider, reason, allocations,
            legacy=isolate and (orc.PCPU not in inventories or reshaped),
            dedicated=_cpu_policy(server, compute,
                                  'cpu_policy') == 'dedicated',
            unsure=unsure, nested=frozenset(
                (set(allocations) - {provider['uuid']}) & (tree or set())),
            hyperthreaded=hyperthreaded, reshaped=reshaped,
            isolate=isolate))
    return isolate_servers, unseen, elsewhere


def _of_this_node(allocations, provider, tree):
    """The allocations of a server running on ``provider``'s node.

    Without those of another compute node (with CPUs) and its tree: an
    evacuated server holds its source's until that compute starts again.
    Sharing providers' stay.
    """
    other_nodes = {rp for rp, resources in allocations.items()
                   if rp != provider['uuid'] and rp not in tree and
                   set(resources) & set(clients.NODE_CLASSES)}
    return {rp: resources for rp, resources in allocations.items()
            if rp not in other_nodes}


def _cpu_policy(server, compute, name):
    """The server's ``cpu_policy`` or ``cpu_thread_policy``, as Nova's."""
    properties, _image = _image_properties(server, compute)
    return _policy(server['flavor']['extra_specs'], properties, name)
