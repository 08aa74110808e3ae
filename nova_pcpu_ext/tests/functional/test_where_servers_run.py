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

"""The operator commands judge a server where it runs, by what it holds.

Stock Nova without its late check leaves the bug's victims; then a move
or a host's conversion changes where they run or what they hold.
"""

from nova_pcpu_ext.tests.functional import base  # noqa: F401  isort:skip

import json
import threading

import fixtures
from nova.tests.functional import integrated_helpers

from nova_pcpu_ext import heal
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests.functional.base import NO_HYPERTHREADS
from nova_pcpu_ext.tests.functional import operator_commands
from nova_pcpu_ext.tests.functional.test_status import check
from nova_pcpu_ext.tests.functional.test_status import CHECKS

ON_HT = CHECKS[3]


class _WhereServersRunBase(operator_commands.OperatorCommandTestBase,
                           integrated_helpers.InstanceHelperMixin):

    extension = False

    def heal_dry_run(self, extra_conf=''):
        result = self.manage('heal', 'isolate', '--dry-run', '--format',
                             'json', extra_conf=extra_conf)
        self.assertTrue(result.stdout, result.stderr)
        return result.returncode, [(m['server'], m['from_host'], m['result'])
                                   for m in json.loads(result.stdout)]

    def check_and_dry_run(self):
        """``upgrade check`` and ``heal isolate --dry-run``.

        Alike whether the servers are read through the Compute API or
        from Nova's databases, where placement is asked what the hosts of
        those that may forbid hyperthreads hold, and the hosts of their
        moves.
        """
        through_api = check(self.status), self.heal_dry_run()
        databases = self.nova_databases()
        self.assertEqual(through_api, (
            check(self.status, extra_conf=databases),
            self.heal_dry_run(databases)))
        return through_api

    def held(self, server):
        """``{provider UUID: {resource class: amount}}`` of a server."""
        allocations = self.placement.get(
            '/allocations/%s' % server['id']).body['allocations']
        return {rp: allocation['resources']
                for rp, allocation in allocations.items()}


class EvacuatedServerTest(_WhereServersRunBase):
    """A victim evacuated from a dead hyperthreaded host.

    Its allocation on the source stays until that compute starts again,
    as Nova intends.
    """

    def setUp(self):
        super().setUp()
        self.ht_rp = self.start_hyperthreaded_host('compute1')
        self.server = self.boot(ISOLATE)
        # The CPU sets are process-wide flags: the same as compute1's.
        self.no_ht_rp = self.start_host(
            'compute2', dict(NO_HYPERTHREADS, cpu_cores=8), dedicated='0-3',
            shared='4-7')
        self.computes['compute1'].stop()
        # 2.14: forced down by host and binary; evacuated without
        # onSharedStorage, ACTIVE again.
        self.admin_api.microversion = '2.14'
        self.admin_api.force_down_service('compute1', 'nova-compute', True)
        self._evacuate_server(self.server, expected_host='compute2',
                              expected_state='ACTIVE')

    def test_judged_where_it_runs_never_moved_again(self):
        held = self.held(self.server)

        (code, checks), dry_run = self.check_and_dry_run()

        self.assertEqual({'VCPU': 1}, {
            rc: amount for rc, amount in held[self.ht_rp].items()
            if 'CPU' in rc})
        self.assertEqual(1, held[self.no_ht_rp]['PCPU'])
        self.assertEqual(0, code, checks)
        self.assertEqual((0, (
            '1 servers that forbid hyperthreads hold resources of a scanned '
            'host they do not run on, judged where they run: %s runs on '
            'compute2, holds resources of compute1: left by a move; an '
            'evacuation\'s stays until the compute of compute1 starts '
            'again.' % self.server['id'])), checks[ON_HT])
        self.assertEqual((0, [(
            self.server['id'], 'compute2',
            'skipped: runs on compute2, not on compute1, whose resources it '
            'holds: left by a move; an evacuation\'s stays until the compute '
            'of compute1 starts again')]), dry_run)


class MigratingServerTest(_WhereServersRunBase):
    """A victim stock Nova migrates to another hyperthreaded host.

    Until the move ends, the server runs on its source while its own
    allocation is the destination's (the source's is the migration's).
    """

    # The move runs behind the API's 202, as in a deployment.
    CAST_AS_CALL = False

    def test_judged_where_it_runs_during_the_move(self):
        self.start_hyperthreaded_host('compute1')
        server = self.boot(ISOLATE)
        self.start_hyperthreaded_host('compute2')
        reached, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def migrate_disk_and_power_off(driver, *args, **kwargs):
            reached.set()
            release.wait(base.TIMEOUT)
            return '{}'  # as Nova's functional tests: no disks to copy

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'migrate_disk_and_power_off', migrate_disk_and_power_off))
        self.admin_api.post_server_action(server['id'], {'migrate': None})
        self.assertTrue(reached.wait(base.TIMEOUT))

        (code, checks), dry_run = self.check_and_dry_run()
        release.set()
        self._wait_for_state_change(server, 'VERIFY_RESIZE')

        self.assertEqual(0, code, checks)
        self.assertEqual((0, (
            '1 servers that forbid hyperthreads hold resources of a scanned '
            'host they do not run on, judged where they run: %s runs on '
            'compute1, holds resources of compute2: a move in progress '
            '(task resize_migrating).' % server['id'])), checks[ON_HT])
        self.assertEqual((0, [(
            server['id'], 'compute1',
            'skipped: runs on compute1, not on compute2, whose resources it '
            'holds: a move in progress (task resize_migrating)')]), dry_run)


class ReshapedLegacyIsolationTest(_WhereServersRunBase):
    """A legacy host with hyperthreads converted to cpu_dedicated_set.

    Nova's reshape moves its isolate server's VCPU to PCPU: isolated the
    legacy way, one thread per core with the siblings reserved, not the
    bug's.
    """

    def test_a_reshaped_server_is_not_a_victim(self):
        rp_uuid = self.start_host('compute1', dict(HYPERTHREADED,
                                                   cpu_cores=4),
                                  vcpu_pin_set='0-7')
        server = self.boot(ISOLATE)
        self.assertEqual(1, self.held(server)[rp_uuid]['VCPU'])
        self.flags(cpu_dedicated_set='0-7', group='compute')
        self.flags(vcpu_pin_set=None)
        self.restart_compute_service('compute1')

        (code, checks), dry_run = self.check_and_dry_run()

        self.assertEqual(1, self.held(server)[rp_uuid]['PCPU'])
        self.assertNotIn('VCPU', self.held(server)[rp_uuid])
        self.assertEqual((0, None), checks[ON_HT])
        self.assertEqual(1, code, checks)
        self.assertIn(
            'hyperthreaded hosts configured with vcpu_pin_set (no PCPU '
            'inventory), or pinned there before the host was converted to '
            'cpu_dedicated_set (1, holding PCPU since)', checks[CHECKS[4]][1])
        self.assertEqual(
            (0, [(server['id'], 'compute1', heal.RESHAPED)]), dry_run)
