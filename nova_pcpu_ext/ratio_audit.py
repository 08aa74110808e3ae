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

"""The allocation ratio audit: find, and where safe repair, bad ratios.

* Inventories (bug 1789654): ``VCPU``, ``MEMORY_MB`` or ``DISK_GB`` with an
  allocation ratio that is not a positive finite number, ``PCPU`` with a
  ratio other than 1.0. Repaired by rewriting the provider's inventory with
  its generation, so a concurrent writer's change is never overwritten.
* Ratios the ``allocation_ratios`` rule will change once it is enabled.
"""

import dataclasses

import os_resource_classes as orc
import os_traits

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import cloud_hosts
from nova_pcpu_ext import exception

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
                      progress=cloud_hosts.quiet):
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
    found = cloud_hosts.read_all(
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


def ratio_changes(placement, conf, progress=cloud_hosts.quiet):
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
             if cloud_hosts.root(provider) == provider['uuid']]
    held_inventories = cloud_hosts.read_all(
        lambda provider: cloud_hosts.inventories_unless_gone(
            placement, provider),
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
