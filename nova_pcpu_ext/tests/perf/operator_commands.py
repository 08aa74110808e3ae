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

"""What the operator commands cost on a large cloud.

    python -m nova_pcpu_ext.tests.perf.operator_commands [--providers N]
                                                         [--servers N]

Seeds placement (gunicorn, sqlite) with ``--providers`` compute-node
providers, every one hyperthreaded with ``PCPU`` and ``VCPU`` inventory and
one ``VCPU`` consumer (so each costs ``upgrade check`` a server listing),
and boots ``--servers`` isolate servers on ``VCPU`` of hyperthreaded hosts
with stock Nova (its late check stripped). Then times, as processes,
``nova-pcpu-ext-status upgrade check``, ``nova-pcpu-ext-manage placement
audit`` and ``heal isolate --dry-run``, and prints the wall times and the
Compute API requests of each.
"""

from nova_pcpu_ext.tests.functional import operator_commands  # isort:skip

import argparse
import json
import sys
import time
import unittest
import uuid

from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE

#: Isolate servers per host: each takes a whole core of the seven a
#: fakelibvirt host can have.
PER_HOST = 6


class OperatorCommandsCost(operator_commands.OperatorCommandTestBase):

    extension = False
    providers = 1000
    servers = 100
    results = None

    def seed_providers(self):
        placement = operator_commands.Placement(self.placement_server)
        for n in range(self.providers):
            rp_uuid = placement.provider('seeded%04d' % n, {
                'VCPU': {'total': 32, 'allocation_ratio': 4.0},
                'PCPU': {'total': 16},
                'MEMORY_MB': {'total': 262144},
                'DISK_GB': {'total': 1000}},
                traits=['HW_CPU_HYPERTHREADING'])
            placement.call('PUT', '/allocations/%s' % uuid.uuid4(), {
                'allocations': {rp_uuid: {'resources': {'VCPU': 1}}},
                'project_id': str(uuid.uuid4()),
                'user_id': str(uuid.uuid4())})

    def boot_isolate_servers(self):
        hosts = -(-self.servers // PER_HOST)
        flavor = self._create_flavor(vcpu=1, extra_spec=ISOLATE)
        for n in range(hosts):
            self.start_host('compute%03d' % n, dict(HYPERTHREADED,
                                                    cpu_cores=7),
                            dedicated='0-11', shared='12-13')
            for _ in range(min(PER_HOST, self.servers - n * PER_HOST)):
                self._create_server(flavor_id=flavor, host='compute%03d' % n,
                                    networks='none', api=self.admin_api)

    def timed(self, name, command, *args):
        """``command(*args)``; its wall time and requests in the results."""
        self.compute_api.requests.clear()
        start = time.monotonic()
        result = command(*args)
        self.results[name + ' s'] = round(time.monotonic() - start, 1)
        self.results[name + ' Compute API requests'] = len(
            self.compute_api.requests)
        return result

    def test_cost(self):
        self.admin_api.microversion = '2.74'
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.seed_providers()
        self.boot_isolate_servers()
        self.results.update({
            'providers': self.providers + -(-self.servers // PER_HOST),
            'isolate servers': self.servers})
        check = self.timed('upgrade check', self.status, 'upgrade', 'check',
                           '--json')
        self.timed('placement audit', self.manage, 'placement', 'audit')
        plan = self.timed('heal isolate --dry-run', self.manage, 'heal',
                          'isolate', '--dry-run', '--format', 'json')
        found = json.loads(check.stdout)['checks'][3]['details']
        self.assertIn('%d servers that forbid hyperthreads' % self.servers,
                      found)
        self.assertEqual(self.servers, len(json.loads(plan.stdout)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--providers', type=int, default=1000)
    parser.add_argument('--servers', type=int, default=100)
    args = parser.parse_args()
    OperatorCommandsCost.providers = args.providers
    OperatorCommandsCost.servers = args.servers
    OperatorCommandsCost.results = results = {}
    outcome = unittest.TestResult()
    OperatorCommandsCost('test_cost').run(outcome)
    for _test, trace in outcome.errors + outcome.failures:
        print(trace, file=sys.stderr)
    for name, value in results.items():
        print('%-46s %s' % (name, value))
    return 0 if outcome.wasSuccessful() else 1


if __name__ == '__main__':
    sys.exit(main())
