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

"""The loopback cloud's verdicts and log scanning, on recorded input."""

import os
import textwrap

import fixtures
import testtools

from nova_pcpu_ext.tests.cloud import drills
from nova_pcpu_ext.tests.cloud import logs
from nova_pcpu_ext.tests.cloud import processes
from nova_pcpu_ext.tests.cloud import tempest_run

BUG_TEST = 'nova_pcpu_ext.tests.tempest.api.test_pcpu_ext.T.test_bug'
PLAIN_TEST = 'nova_pcpu_ext.tests.tempest.api.test_pcpu_ext.T.test_plain'
LIBVIRT_TEST = 'nova_pcpu_ext.tests.tempest.api.test_pcpu_ext.T.test_virt'
UPSTREAM_TEST = 'tempest.api.compute.test_versions.T.test_list'

BUG = ['id-1', 'stock-fails']
PLAIN = ['id-2']
LIBVIRT = ['id-3', 'libvirt']


def results(stock_bug='failed', ext_plain='passed', ext_virt='passed',
            upstream='passed'):
    return {
        'stock': {BUG_TEST: (stock_bug, BUG), PLAIN_TEST: ('failed', PLAIN),
                  LIBVIRT_TEST: ('passed', LIBVIRT),
                  UPSTREAM_TEST: ('passed', [])},
        'ext': {BUG_TEST: ('passed', BUG), PLAIN_TEST: (ext_plain, PLAIN),
                LIBVIRT_TEST: (ext_virt, LIBVIRT),
                UPSTREAM_TEST: (upstream, [])},
    }


class VerdictTest(testtools.TestCase):

    def test_expected_results_pass(self):
        # A plain project test may fail on stock: only bug tests must.
        self.assertEqual([], tempest_run.verdict(results(), libvirt=True))

    def test_bug_test_passing_on_stock_fails_the_run(self):
        self.assertEqual(
            ['stock: %s should fail and is passed' % BUG_TEST],
            tempest_run.verdict(results(stock_bug='passed'), libvirt=True))

    def test_project_test_skipped_on_ext_fails_the_run(self):
        self.assertEqual(['ext: %s skipped' % PLAIN_TEST],
                         tempest_run.verdict(results(ext_plain='skipped'),
                                             libvirt=True))

    def test_libvirt_test_may_skip_only_without_libvirt(self):
        skipped = results(ext_virt='skipped')
        self.assertEqual([], tempest_run.verdict(skipped, libvirt=False))
        self.assertEqual(['ext: %s skipped' % LIBVIRT_TEST],
                         tempest_run.verdict(skipped, libvirt=True))

    def test_class_skipped_as_a_whole_only_without_libvirt(self):
        skipped = results()
        class_id = 'setUpClass (%s)' % LIBVIRT_TEST.rpartition('.')[0]
        del skipped['ext'][LIBVIRT_TEST]
        skipped['ext'][class_id] = ('skipped', [])
        self.assertEqual([], tempest_run.verdict(skipped, libvirt=False))
        self.assertEqual(['ext: %s skipped' % class_id],
                         tempest_run.verdict(skipped, libvirt=True))

    def test_upstream_failure_fails_the_run(self):
        self.assertEqual(['ext: upstream %s failed' % UPSTREAM_TEST],
                         tempest_run.verdict(results(upstream='failed'),
                                             libvirt=True))

    def test_missing_results_fail_the_run(self):
        self.assertEqual(['stock: no tempest results',
                          'ext: no tempest results',
                          'ext: no project test ran'],
                         tempest_run.verdict({}, libvirt=True))


class LogScanTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        with open(os.path.join(self.dir, name), 'w') as f:
            f.write(textwrap.dedent(text).lstrip())

    def test_oslo_traceback_is_one_record(self):
        self.write('ext-compute-ht.log', '''
            2026-01-01 00:00:00.000 7 INFO nova.compute [-] fine
            2026-01-01 00:00:01.000 7 ERROR nova.compute [-] Boom: x
            2026-01-01 00:00:01.000 7 ERROR nova.compute Traceback (most r
            2026-01-01 00:00:01.000 7 ERROR nova.compute   File "a.py"
            2026-01-01 00:00:01.000 7 ERROR nova.compute ValueError: x
            2026-01-01 00:00:02.000 7 WARNING nova.compute [-] set ERROR
            ''')
        unexpected, allowed = logs.unexpected_errors(self.dir)
        self.assertEqual(
            [('ext-compute-ht.log',
              '2026-01-01 00:00:01.000 7 ERROR nova.compute [-] Boom: x')],
            unexpected)

    def test_bare_traceback_is_an_error(self):
        self.write('ext-nova-api.out', '''
            starting
            Traceback (most recent call last):
              File "a.py", line 1
            ValueError: x
            next line
            ''')
        unexpected, _ = logs.unexpected_errors(self.dir)
        self.assertEqual([('ext-nova-api.out',
                           'Traceback (most recent call last):')],
                         unexpected)

    def test_stock_allowlist_entries_do_not_excuse_ext(self):
        line = ('2026-01-01 00:00:01.000 7 ERROR placement.fault_wrap [-] '
                'Placement API unexpected error: Another thread concurrently '
                'updated the resource provider\n')
        self.write('stock-placement.log', line)
        self.write('ext-placement.log', line)
        unexpected, allowed = logs.unexpected_errors(self.dir)
        self.assertEqual(['ext-placement.log'], [n for n, _ in unexpected])
        self.assertEqual([1], list(allowed.values()))

    def test_every_allowlist_entry_has_a_reason(self):
        for entry in logs.load_allowlist():
            self.assertTrue(entry['reason'].strip(), entry)

    def test_activation_lines(self):
        self.write('ext-compute-ht.log',
                   '2026-01-01 00:00:00.000 7 INFO nova_pcpu_ext.activation '
                   '[-] nova-pcpu-ext: nova.compute.X replaced\n')
        self.write('ext-compute-noht.log', 'nothing\n')
        self.assertEqual(['ext-compute-noht.log', 'ext-nova-scheduler.log'],
                         logs.missing_activation(
                             self.dir, ['ext-compute-ht.log',
                                        'ext-compute-noht.log',
                                        'ext-nova-scheduler.log']))


class DrillVerdictTest(testtools.TestCase):

    def test_disagreement_windows(self):
        samples = [(0.0, False, False), (1.0, True, False),
                   (1.5, True, False), (2.5, True, True),
                   (3.0, False, True), (3.2, False, False)]
        self.assertEqual([1.5, 0.2], [round(w, 1) for w in
                                      drills.disagreements(samples)])

    def test_disagreement_never_resolved_is_infinite(self):
        self.assertEqual([float('inf')], drills.disagreements(
            [(0.0, False, False), (1.0, True, False)]))

    def test_allocation_matching_the_flavor(self):
        memory_disk = {'MEMORY_MB': drills.RAM, 'DISK_GB': drills.DISK}
        self.assertTrue(drills.matches_flavor(
            'isolate', 'ACTIVE', dict(memory_disk, PCPU=1)))
        self.assertTrue(drills.matches_flavor(
            'dedicated', 'ACTIVE', dict(memory_disk, VCPU=1)))
        self.assertFalse(drills.matches_flavor(
            'shared', 'ACTIVE', dict(memory_disk, PCPU=1)))
        self.assertFalse(drills.matches_flavor(
            'shared', 'ACTIVE', dict(memory_disk, VCPU=2)))
        self.assertTrue(drills.matches_flavor('shared', 'ERROR', {}))
        self.assertFalse(drills.matches_flavor(
            'shared', 'ERROR', dict(memory_disk, VCPU=1)))

    def test_only_the_extension_figure_is_judged(self):
        results = {'rows': drills.rows({'status storm': {
            'stock': {'lost updates': 3, 'longest disagreement (s)': 9.0},
            'ext': {'lost updates': 0, 'longest disagreement (s)': 0.4},
        }})}
        self.assertEqual([], drills.failures(results))
        self.assertEqual([3, 0], [results['rows'][0][k]
                                  for k in ('stock', 'ext')])

    def test_unmet_missing_and_failed_drills_fail_the_run(self):
        results = {'rows': drills.rows({
            'status storm': {'ext': {'lost updates': 1}},
            'boot storm': {'ext': {'error': 'HttpException: 500'}},
        })}
        self.assertEqual([
            'drill status storm: lost updates is 1 on ext, needs 0',
            'drill boot storm: error is HttpException: 500 on ext, needs no '
            'error',
            'drill boot storm: allocations not matching the flavor is None '
            'on ext, needs measured',
        ], drills.failures(results)[:3])
        self.assertIn('drill status storm: longest disagreement (s) is '
                      'None on ext, needs measured', drills.failures(results))

    def test_one_line_naming_option_and_value(self):
        prefix = '2026-12-01 09:27:21.786 17 ERROR nova_pcpu_ext [-] '
        line = prefix + '[DEFAULT] cpu_allocation_ratio = -1 is invalid\n'
        self.assertTrue(drills.names(line, 'cpu_allocation_ratio', '-1'))
        # Not the date, not a longer number, not a second line.
        self.assertFalse(drills.names(
            prefix + '[DEFAULT] cpu_allocation_ratio is invalid\n',
            'cpu_allocation_ratio', '-1'))
        self.assertFalse(drills.names(line, 'cpu_allocation_ratio', '-1.5'))
        self.assertFalse(drills.names(line + prefix + 'Traceback\n',
                                      'cpu_allocation_ratio', '-1'))

    def test_a_query_count_other_than_one_is_not_met(self):
        check = {(c.drill, c.figure): c for c in drills.CHECKS}[
            ('boot storm', 'placement queries per isolate request')]
        self.assertTrue(check.test('1 (x10)'))
        self.assertFalse(check.test('1 (x9), 2 (x1)'))
        self.assertFalse(check.test(''))


class ProcessesTest(testtools.TestCase):

    def test_killed_process_starts_again_as_before(self):
        procs = processes.Processes(self.useFixture(fixtures.TempDir()).path)
        self.addCleanup(procs.stop, 'sleeper')
        first = procs.start('sleeper', ['sleep', '60']).pid
        procs.kill('sleeper')
        self.assertEqual({}, procs.running())
        second = procs.start_again('sleeper').pid
        self.assertNotEqual(first, second)
        self.assertEqual({'sleeper': second}, procs.running())
        with open('/proc/%d/cmdline' % second) as f:
            self.assertEqual('sleep\x0060\x00', f.read())
