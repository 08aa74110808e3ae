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

"""The loopback cloud's verdict and log scanning, on recorded input."""

import os
import textwrap

import fixtures
import testtools

from nova_pcpu_ext.tests.cloud import logs
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
