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

"""The embedded demo: each plugin's effect, stock Nova vs the extension.

Every scenario runs twice on a fresh in-process Nova (API, conductor,
scheduler, compute over fakelibvirt) and real placement: once as stock
Nova, once with nova-pcpu-ext activated. Run with ``tox -e demo``.
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

import logging
import sys
import time
import unittest

from nova import context as nova_context
from nova import objects

ROWS = []


class _Scenario(base.ExtensionTestBase):
    """A scenario records one table row instead of asserting."""

    variant = None
    strip_mitigation = False
    #: ``[pcpu_ext] isolate_fallback_mode``, None for the default.
    mode = None

    def setUp(self):
        super().setUp()
        if self.strip_mitigation:
            self.useFixture(base.StripIsolateMitigation())
        if self.mode:
            self.flags(isolate_fallback_mode=self.mode, group='pcpu_ext')

    def record(self, **result):
        ROWS.append((self.title, self.variant, result))

    def settle(self, extra_spec):
        """Boot a server and wait for ACTIVE or ERROR."""
        flavor_id = self._create_flavor(vcpu=1, extra_spec=extra_spec)
        server = self.api.post_server(
            {'server': self._build_server(flavor_id=flavor_id)})
        for _ in range(100):
            server = self.api.get_server(server['id'])
            if server['status'] in ('ACTIVE', 'ERROR'):
                return server
            time.sleep(0.1)
        return server

    def start(self):
        return self.start_host('compute1', base.HYPERTHREADED,
                               dedicated='0-1', shared='2-3')

    def restart(self):
        self.computes['compute1'] = self.restart_compute_service('compute1')

    def record_ratios(self, rp_uuid):
        """Record the VCPU ratio of placement and of the ComputeNode."""
        inventory = self._get_provider_inventory(rp_uuid)
        node = objects.ComputeNode.get_by_nodename(
            nova_context.get_admin_context(), 'compute1')
        self.record(placement_vcpu_ratio=inventory['VCPU'][
            'allocation_ratio'], compute_node_ratio=node.cpu_allocation_ratio)

    def record_boot(self, rp_uuid, extra_spec):
        """Record where a server with the extra spec lands, and on what."""
        server = self.settle(extra_spec)
        usages = self.usages(rp_uuid)
        self.record(
            outcome=server['status'],
            consumed=', '.join('%s=%s' % (rc, usages[rc]) for rc in
                               ('PCPU', 'VCPU') if rc in usages) or '-',
            placement_queries=len(self.placement_queries))


class IsolateOnHyperthreadedHost(_Scenario):
    title = 'isolate flavor, only host hyperthreaded (bug 1889633)'

    def test(self):
        self.record_boot(self.start(), base.ISOLATE)


class IsolateOnLegacyHost(_Scenario):
    title = 'isolate flavor, only host legacy (vcpu_pin_set), hyperthreaded'

    def test(self):
        rp_uuid = self.start_host('compute1', base.HYPERTHREADED,
                                  vcpu_pin_set='0-3')
        self.record_boot(rp_uuid, base.ISOLATE)


class UnsetRatio(_Scenario):
    title = 'cpu_allocation_ratio 2.0, then unset (bug 1789654)'

    def test(self):
        self.flags(cpu_allocation_ratio=2.0)
        rp_uuid = self.start()
        self.flags(cpu_allocation_ratio=None)
        self.restart()
        self.record_ratios(rp_uuid)


class OldDefaultRatio(_Scenario):
    title = 'node born under the defaults before 2023.1 (VCPU 16.0)'

    def test(self):
        # Nova's initial_cpu_allocation_ratio was 16.0 then; the nodes keep
        # it with the options unset after an upgrade.
        self.flags(initial_cpu_allocation_ratio=16.0)
        rp_uuid = self.start()
        self.flags(initial_cpu_allocation_ratio=None)
        self.restart()
        self.record_ratios(rp_uuid)


class PlacementSetRatio(_Scenario):
    title = 'VCPU ratio 8.0 set through the placement API'

    def test(self):
        rp_uuid = self.start()
        url = '/resource_providers/%s/inventories' % rp_uuid
        inventories = self.placement.get(url).body
        inventories['inventories']['VCPU']['allocation_ratio'] = 8.0
        self.placement.put(url, inventories, version='1.26')
        self.restart()
        self.record_ratios(rp_uuid)


class InitialZeroRatio(_Scenario):
    title = 'initial_cpu_allocation_ratio = 0.0 on a new node'

    def test(self):
        self.flags(initial_cpu_allocation_ratio=0.0)
        rp_uuid = self.start()
        self.record_ratios(rp_uuid)


class DisableDuringUpdate(_Scenario):
    title = 'host disabled during a periodic update (cache race)'

    def test(self):
        rp_uuid = self.start()
        self.race_disable_with_flush()
        after_race = self.disabled_trait(rp_uuid)
        # Nova re-syncs the trait from the service record on the next
        # periodic update ([DEFAULT] update_resources_interval).
        self.periodic()
        self.record(disabled_trait_in_placement=after_race,
                    after_next_periodic=self.disabled_trait(rp_uuid))

    def disabled_trait(self, rp_uuid):
        present = 'COMPUTE_STATUS_DISABLED' in self.traits(rp_uuid)
        return 'set' if present else 'MISSING'


STOCK = ('stock Nova', False, False, None)
EXTENSION = ('nova-pcpu-ext', True, False, None)

#: (scenario, [(variant label, extension on, strip Nova's late check,
#: isolate_fallback_mode)])
SCENARIOS = [
    (IsolateOnHyperthreadedHost, [
        ('stock, late check stripped', False, True, None),
        STOCK,
        ('nova-pcpu-ext drop, late check stripped', True, True, 'drop'),
        ('nova-pcpu-ext legacy_only, late check stripped', True, True,
         'legacy_only'),
    ]),
    (IsolateOnLegacyHost, [
        STOCK,
        ('nova-pcpu-ext drop', True, False, 'drop'),
        ('nova-pcpu-ext legacy_only', True, False, 'legacy_only'),
    ]),
    (UnsetRatio, [STOCK, EXTENSION]),
    (OldDefaultRatio, [STOCK, EXTENSION]),
    (PlacementSetRatio, [STOCK, EXTENSION]),
    (InitialZeroRatio, [STOCK, EXTENSION]),
    (DisableDuringUpdate, [STOCK, EXTENSION]),
]


def _run(scenario, variant, extension, strip, mode):
    case = type(scenario.__name__, (scenario,), {
        'variant': variant, 'extension': extension,
        'strip_mitigation': strip, 'mode': mode})('test')
    result = unittest.TestResult()
    case.run(result)
    for _test, trace in result.errors + result.failures:
        print(trace, file=sys.stderr)
    return result.wasSuccessful()


def _table(rows):
    header = ('scenario', 'nova', 'result')
    lines = [(title, variant, ', '.join(
        '%s: %s' % (key.replace('_', ' '), value)
        for key, value in result.items())) for title, variant, result in rows]
    widths = [max(len(row[i]) for row in [header] + lines)
              for i in range(3)]
    rule = '-+-'.join('-' * w for w in widths)
    out = [rule, ' | '.join(
        h.ljust(w) for h, w in zip(header, widths)).rstrip(), rule]
    previous = None
    for row in lines:
        if previous is not None and row[0] != previous:
            out.append(rule)
        cells = ('' if row[0] == previous else row[0],) + row[1:]
        out.append(' | '.join(
            c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        previous = row[0]
    out.append(rule)
    return '\n'.join(out)


NOTES = """\
Reading it:
* isolate, hyperthreaded host reporting PCPU: stock Nova rejects it only
  late, in its NUMA fitting, after two placement queries; without that
  check the instance lands on VCPU (the bug). With nova-pcpu-ext placement
  never offers the host, in either mode: drop makes one query,
  legacy_only two whose fallback forbids hosts that report PCPU.
* isolate, legacy host: stock Nova isolates the instance there (one thread
  per core, siblings reserved), and so does legacy_only; drop refuses
  every legacy host for isolate instances (the default's behaviour
  change).
* ratios: both keep what placement holds (an unset 2.0, an old 16.0, an
  8.0 set through placement), as Nova's precedence says, but stock Nova's
  ComputeNode can disagree with placement and it puts 0.0 there; nova-pcpu-ext
  never writes 0.0 and the ComputeNode reports what placement holds.
* cache race: stock Nova loses the disabled trait until its next periodic
  update re-syncs it (ComputeFilter refuses the disabled host meanwhile);
  nova-pcpu-ext keeps it."""


def main():
    # Nova's services log plenty while they stop; the table is the output.
    logging.disable(logging.WARNING)
    ok = all([_run(scenario, *variant)
              for scenario, variants in SCENARIOS for variant in variants])
    print(_table(ROWS))
    print(NOTES)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
