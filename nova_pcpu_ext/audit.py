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
  another thread but consume ``VCPU`` on a hyperthreaded host, told apart
  from those Nova isolated the legacy way on ``vcpu_pin_set`` hosts.
* Legacy hosts (no ``PCPU`` inventory) and hosts reporting ``PCPU``,
  which the modes of the ``isolate_vcpu_fallback`` request filter treat
  apart.
"""

import concurrent.futures
import dataclasses

import os_resource_classes as orc
import os_traits

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import clients
from nova_pcpu_ext import exception
from nova_pcpu_ext import pcpu_trait

FAILURE = 'failure'
WARNING = 'warning'
#: The severity of what a check skipped: nothing to do, nothing wrong.
NOTE = 'note'
#: The check of a provider deleted while it was read, skipped.
GONE = 'gone'

#: Attempts to write one provider's inventory against concurrent writers.
WRITE_ATTEMPTS = 5

#: Resource classes whose ratio the ``allocation_ratios`` rule decides.
RULED = tuple(rc for rc, _stem, _default in allocation_ratios.RATIOS)
STEMS = {rc: stem for rc, stem, _default in allocation_ratios.RATIOS}

HYPERTHREADING = os_traits.HW_CPU_HYPERTHREADING
#: A server's compute node, as the Compute API shows it.
NODE = 'OS-EXT-SRV-ATTR:hypervisor_hostname'
#: The compute nodes of a server's moves that did not end, which may hold
#: its resources; Nova's databases show them, no Compute API view does.
MOVE_NODES = 'move_nodes'
#: The trait of a provider sharing its resources with the compute nodes of
#: its aggregates.
SHARING = os_traits.MISC_SHARES_VIA_AGGREGATE


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
            rp for node in sorted(_hosts_matching(compute.node_hosts(), host))
            for rp in placement.providers(name=node)]
        what = '--host %s: no compute host or compute node has this name.' % (
            host)
    else:
        return placement.providers()
    if not found:
        raise exception.NotFound(what)
    return found


def _quiet(what, done, total):
    """A ``progress`` that reports nothing."""


def read_all(read, items, progress=_quiet, what=''):
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


def audit_inventories(placement, ratios, fix=False, targets=None,
                      progress=_quiet):
    """Findings for providers' allocation ratios, repaired if ``fix``.

    Every inventory is read in parallel; those to repair are written one
    provider at a time. A provider deleted meanwhile is a :func:`gone`
    note, and the others are audited and repaired.

    :param ratios: ``{resource class: ratio}`` to write, see
        :func:`fix_ratios`.
    :param targets: the providers to audit, all by default.
    """
    if targets is None:
        targets = placement.providers()
    found = read_all(
        lambda provider: _audit_provider(placement, provider, ratios, False),
        targets, progress, 'reading inventories')
    findings = []
    for provider, on_provider in zip(targets, found):
        to_fix = fix and any(f.check != GONE for f in on_provider)
        try:
            findings += (_audit_provider(placement, provider, ratios, True)
                         if to_fix else on_provider)
        except exception.ServiceError as error:
            fixed = sum(finding.fixed for finding in findings)
            if not fixed:
                raise
            raise exception.ServiceError(
                '%s %d allocation ratios were fixed before; run the audit '
                'again for the rest.' % (error, fixed))
    return findings


def gone(provider):
    """The :data:`NOTE` of a provider deleted while it was read, skipped."""
    return Finding(GONE, NOTE, provider['name'], provider['uuid'],
                   'deleted during the run', 'none: skipped')


def _audit_provider(placement, provider, ratios, fix):
    """A provider's ratio findings, or its :func:`gone` note."""
    try:
        return _audit_ratios(placement, provider, ratios, fix)
    except exception.ProviderGone:
        return [gone(provider)]


def _audit_ratios(placement, provider, ratios, fix):
    found = {}  # {resource class: (ratio, severity)} as first seen bad
    for _attempt in range(WRITE_ATTEMPTS):
        generation, inventories = placement.inventories(provider['uuid'])
        bad = {rc: (ratio, severity)
               for rc, ratio, severity in _bad_ratios(inventories)}
        for rc, seen in bad.items():
            found.setdefault(rc, seen)
        now = {rc: _ratio(inventories, rc) for rc in found}
        if fix and bad:
            for rc in bad:
                inventories[rc]['allocation_ratio'] = now[rc] = ratios[rc]
            # Re-read and re-decide after a conflict: the other writer may
            # have changed the inventory, even fixed it.
            if not placement.replace_inventories(
                    provider['uuid'], generation, inventories):
                continue
            bad = {}
        # What was bad and is no longer was fixed: by this write, by an
        # earlier one whose answer was lost and which was retried, or by
        # nova-compute meanwhile.
        return [_ratio_finding(provider, rc, found[rc], ratios,
                               fixed=rc not in bad, now=now[rc])
                for rc in sorted(found)]
    raise exception.ServiceError(
        'placement: resource provider %s (%s) changed during each of %d '
        'attempts to fix its allocation ratios; nothing was written to it. '
        'Run the audit again when it is quieter.' % (
            provider['name'], provider['uuid'], WRITE_ATTEMPTS))


def _ratio(inventories, rc):
    return inventories.get(rc, {}).get('allocation_ratio')


def _ratio_finding(provider, rc, bad_ratio, ratios, fixed, now):
    ratio, severity = bad_ratio
    if severity == FAILURE:
        problem = '%s allocation_ratio %s is not a positive number' % (
            rc, ratio)
    else:
        problem = '%s allocation_ratio %s is not 1.0' % (rc, ratio)
    if not fixed:
        action = '--fix sets allocation_ratio to %s' % ratios[rc]
    elif now == ratios[rc]:
        action = 'set allocation_ratio to %s' % ratios[rc]
    else:
        action = 'fixed by nova-compute: allocation_ratio is %s' % now
    return Finding('inventory', severity, provider['name'],
                   provider['uuid'], problem, action, fixed=fixed)


def ratio_changes(placement, conf, progress=_quiet):
    """Findings for usable ratios the ``allocation_ratios`` rule changes.

    What a compute with this nova.conf would write, provider by provider:
    the rule applies to compute node providers, the roots of their trees
    with the ``COMPUTE_NODE`` trait Nova reports on them, and changes a
    usable ratio only where ``[DEFAULT] *_allocation_ratio`` is set to
    another value (as Nova does). Unusable ratios are
    :func:`audit_inventories`' findings; a provider deleted meanwhile is
    a :func:`gone` note.
    """
    allocation_ratios.validate_ratio_options(conf)
    # NOTE: sharing providers and other services' roots (Neutron, Cyborg,
    # operators' own) carry no COMPUTE_NODE: no compute writes their
    # ratios.
    nodes = [provider for provider in
             placement.providers(required=os_traits.COMPUTE_NODE)
             if _root(provider) == provider['uuid']]
    held_inventories = read_all(
        lambda provider: _inventories_unless_gone(placement, provider),
        nodes, progress, 'reading inventories')
    findings = []
    for provider, inventories in zip(nodes, held_inventories):
        if inventories is None:
            findings.append(gone(provider))
            continue
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
                    '[DEFAULT] %s_allocation_ratio = %s overrides the ratio '
                    'placement holds, as in Nova; unset it on that compute '
                    'to keep %s' % (STEMS[rc], wanted[rc], held[rc])))
    return findings


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
        return self.server[NODE]

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
    #: ``{cell: why}`` of the cells whose database did not answer, when
    #: servers are read from Nova's databases.
    down_cells: dict = dataclasses.field(default_factory=dict)


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
    if specs.get('trait:%s' % HYPERTHREADING) == 'forbidden':
        return 'flavor trait:%s=forbidden' % HYPERTHREADING, ''
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


def _hosts_matching(hosts, host):
    """The compute nodes of ``host``, a service host or a node name."""
    return {node for node, service_host in hosts.items()
            if host in (node, service_host)}


def isolate_servers(placement, compute, host=None, progress=_quiet,
                    legacy_hosts=(), database=None):
    """An :class:`IsolateScan` of the hyperthreaded hosts.

    With ``database``, the servers that may forbid hyperthreads are read
    from Nova's databases first, and placement is asked what each holds;
    while a cell's database does not answer, as without ``database``, the
    consumers of every hyperthreaded provider are read from placement,
    then found in Nova's databases, or in one listing of the cloud's
    servers (of the host's, with ``host``), a consumer the listing missed
    asked about alone.

    :param host: only this compute host (as the Compute API names
        services) or compute node.
    :param legacy_hosts: legacy compute node providers (see
        :func:`compute_nodes`) to scan too: on those without hyperthreads,
        only servers with the ``isolate`` thread policy are kept.
    :param database: a :class:`~nova_pcpu_ext.nova_db.NovaDatabase`.
    :raises NotFound: if no compute host or node has that name.
    """
    hyperthreaded = placement.providers(required=HYPERTHREADING)
    with_ht = {provider['uuid'] for provider in hyperthreaded}
    targets = hyperthreaded + [provider for provider in legacy_hosts
                               if provider['uuid'] not in with_ht]
    if host:
        hosts = _node_hosts(compute)
        nodes = _hosts_matching(hosts, host) | {host}
        targets = [p for p in targets if p['name'] in nodes]
        if not targets:
            providers(placement, compute, host)  # unknown, or no HT there
    candidates = database.candidates() if database else None
    if candidates is None:
        held = {}
        consumers = read_all(lambda provider: _unless_gone(
            placement.allocations, provider['uuid']), targets, progress,
            'reading allocations')
    else:
        held, consumers = _held_by_candidates(placement, targets,
                                              candidates, progress)
    # ``[(provider, its consumers)]`` of the providers with consumers.
    used = [item for item in zip(targets, consumers) if item[1]]
    wanted = {consumer for _provider, on_provider in used
              for consumer in on_provider}
    if not wanted:
        listed = {}
    elif candidates is not None:
        listed = candidates
    elif database:
        listed = database.servers(wanted, lambda count: progress(
            'reading servers', count, None))
        listed.update((consumer, None) for consumer in wanted - set(listed))
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
    listed.update(zip(missing, read_all(compute.server, missing, progress,
                                        'asking for servers not listed')))
    scans = read_all(
        lambda item: _unless_gone(
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
        dict(database.down_cells) if database else {})


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
    by_name = {provider['name']: provider for provider in targets}
    hosts = list({by_name[node]['uuid']: by_name[node] for server in
                  candidates.values() for node in
                  {server.get(NODE)} | set(server.get(MOVE_NODES, ()))
                  if node in by_name}.values())
    on_hosts = read_all(lambda provider: _unless_gone(
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
    held.update(zip(alone, read_all(
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


def _beyond_a_node(placement):
    """UUIDs of the nodes whose servers may hold other providers' resources.

    Every root provider when one shares its resources, else those with
    providers below them.
    """
    every = placement.providers()
    if placement.providers(required=SHARING):
        return {_root(provider) for provider in every}
    return {_root(provider) for provider in every
            if _root(provider) != provider['uuid']}


def _unless_gone(read, *args, **kwargs):
    """``read(*args, **kwargs)``, or None if a provider was deleted."""
    try:
        return read(*args, **kwargs)
    except exception.ProviderGone:
        return None


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
        if server.get(NODE, provider['name']) != provider['name']:
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


#: Traits of the compute node of every eligible destination: no
#: hyperthreads, not disabled.
DESTINATION_TRAITS = ('!' + HYPERTHREADING,
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
            () if found.isolate else ('!' + HYPERTHREADING,))))
    return requests


def knows_trait(placement, trait):
    """Whether placement knows ``trait``: it refuses to filter by others."""
    known, = placement.get('/traits?name=in:%s' % trait, 'traits')
    return bool(known)


def destination(placement, found, mode='drop'):
    """A compute node with room for ``found`` now, or None.

    The name of its resource provider: an enabled host without
    hyperthreads, or, in ``legacy_only`` mode, a legacy host.
    """
    for groups, root_required in destination_requests(found, mode):
        name = placement.candidate(groups, root_required)
        if name is not None:
            return name
    return None


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


def compute_nodes(placement, progress=_quiet):
    """The :class:`ComputeNodes` of the cloud.

    The provider list, every provider's inventories (each tree's, as
    ``PCPU`` may be reported below the root) and the hyperthreaded
    providers: what the inventory audit and the isolate scan read too. A
    provider deleted meanwhile is in neither list.
    """
    every = placement.providers()
    held = read_all(lambda provider: _inventories_unless_gone(
        placement, provider), every, progress, 'reading inventories')
    classes = {}  # {root UUID: resource classes of its tree}
    for provider, inventories in zip(every, held):
        classes.setdefault(_root(provider), set()).update(inventories or ())
    legacy, new_style = [], []
    for provider, inventories in zip(every, held):
        if _root(provider) != provider['uuid'] or inventories is None:
            continue  # nested (a tree is judged by its root), or deleted
        if orc.PCPU in classes[provider['uuid']]:
            new_style.append(provider)
        elif orc.VCPU in classes[provider['uuid']]:
            legacy.append(provider)
    return ComputeNodes(legacy, new_style, frozenset(
        provider['uuid'] for provider in
        placement.providers(required=HYPERTHREADING)))


def _root(provider):
    return provider.get('root_provider_uuid', provider['uuid'])


def _inventories_unless_gone(placement, provider):
    """``{resource class: inventory}`` of a provider, or None if deleted."""
    read = _unless_gone(placement.inventories, provider['uuid'])
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
