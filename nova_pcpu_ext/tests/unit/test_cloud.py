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

"""The loopback cloud's verdicts and log scanning, on recorded input; its
drill client against a local HTTP server."""

import configparser
import http.server
from importlib import metadata
import itertools
import json
import os
import socket
import struct
import textwrap
import threading
import time
import types
import unittest.mock

import fixtures
from keystoneauth1 import exceptions as ks_exceptions
import testtools

from nova_pcpu_ext.tests.cloud import deploy
from nova_pcpu_ext.tests.cloud import drills
from nova_pcpu_ext.tests.cloud import journey
from nova_pcpu_ext.tests.cloud import logs
from nova_pcpu_ext.tests.cloud import processes
from nova_pcpu_ext.tests.cloud import releases
from nova_pcpu_ext.tests.cloud import tempest_run

CLOUD_CONSTRAINTS = os.path.join(os.path.dirname(__file__), os.pardir,
                                 os.pardir, os.pardir, 'constraints',
                                 'cloud.txt')
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

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            tempest_run, 'upstream_tests',
            return_value=[r'^tempest\.api\.compute\.test_versions\.']))

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

    def test_a_listed_regex_that_matches_nothing_fails_the_run(self):
        unmatched = r'^tempest\.api\.compute\.test_gone\.'
        tempest_run.upstream_tests.return_value.append(unmatched)
        self.assertEqual(['ext: %s in upstream-tests.txt matches no test' %
                          unmatched],
                         tempest_run.verdict(results(), libvirt=True))

    def test_without_stock_only_ext_is_judged(self):
        ext_only = {'ext': results(stock_bug='passed')['ext']}
        self.assertEqual([], tempest_run.verdict(ext_only, libvirt=True,
                                                 with_stock=False))
        self.assertEqual(['ext: %s skipped' % PLAIN_TEST], tempest_run.verdict(
            {'ext': results(ext_plain='skipped')['ext']}, libvirt=True,
            with_stock=False))

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

    def test_traceback_of_another_level_belongs_to_its_record(self):
        # oslo.log prefixes a logged traceback with ERROR, whatever the
        # record's level: an allowlist entry sees the record whole, and a
        # warning with a traceback is still an error.
        self.write('ext-compute-libvirt.log', '''
            2026-01-01 00:00:01.000 7 CRITICAL nova [-] Unhandled error: Runt\
imeError: Cannot schedule new tasks after being shutdown
            2026-01-01 00:00:01.000 7 ERROR nova Traceback (most recent call
            2026-01-01 00:00:01.000 7 ERROR nova   File "host.py", line 532,\
 in _event_emit_delayed
            2026-01-01 00:00:01.000 7 ERROR nova RuntimeError: Cannot schedule
            2026-01-01 00:00:02.000 7 WARNING nova.compute [-] Odd: x
            2026-01-01 00:00:02.000 7 ERROR nova.compute Traceback (most r
            2026-01-01 00:00:02.000 7 ERROR nova.compute ValueError: x
            ''')
        unexpected, allowed = logs.unexpected_errors(self.dir, events=[(
            'stop of compute-libvirt', 'ext', self.START, None)])
        self.assertEqual(
            [('ext-compute-libvirt.log',
              '2026-01-01 00:00:02.000 7 WARNING nova.compute [-] Odd: x')],
            unexpected)
        self.assertEqual(1, sum(
            count for pattern, count in allowed.items()
            if 'Cannot schedule new tasks' in pattern))

    def test_a_remote_traceback_belongs_to_its_record(self):
        # A RemoteError's traceback: one line holding the list of lines.
        lines = textwrap.dedent('''
            2026-01-01 00:00:01.000 7 ERROR nova.servicegroup [-] Unexpec\
ted: RemoteError: Remote error: DBConnectionError
            2026-01-01 00:00:01.000 7 ERROR nova.servicegroup ['Traceback \
(most recent call last):\\n', '  File "a.py"\\n']
            2026-01-01 00:00:01.000 7 ERROR nova.servicegroup Traceback (m
            ''').lstrip().splitlines(True)
        self.assertEqual([3], [len(r.splitlines())
                               for r in logs.records(lines)])

    def test_records_of_one_millisecond_stay_apart(self):
        # Placement logs each request once; two answered in the same
        # millisecond by one process are two records, while a traceback
        # naming an instance belongs to its record.
        lines = textwrap.dedent('''
            2026-01-01 00:00:01.000 7 INFO placement.requestlog [req-a req-\
b u p - - default default] 127.0.0.1 "GET /allocation_candidates?x"
            2026-01-01 00:00:01.000 7 INFO placement.requestlog [req-c req-\
d u p - - default default] 127.0.0.1 "PUT /allocations/y"
            2026-01-01 00:00:02.000 7 ERROR nova.compute [-] [instance: y] x
            2026-01-01 00:00:02.000 7 ERROR nova.compute [instance: y] Trace
            2026-01-01 00:00:02.000 7 ERROR nova.compute [instance: y] Value
            ''').lstrip().splitlines(True)
        records = list(logs.records(lines))
        self.assertEqual([1, 1, 3],
                         [len(r.splitlines()) for r in records])

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

    def test_ext_processes_that_ran_stock_are_judged_as_stock(self):
        # The journey's ext deployment runs stock Nova before it is
        # switched on: stock's entries excuse those processes only.
        self.write('ext-placement.log', ''.join(
            '2026-01-01 00:00:01.000 %d ERROR placement.fault_wrap [-] '
            'Placement API unexpected error: Another thread concurrently '
            'updated the resource provider\n' % pid for pid in (7, 8)))
        unexpected, _ = logs.unexpected_errors(self.dir, stock_pids={7})
        self.assertEqual([('ext-placement.log', '2026-01-01 00:00:01.000 8 '
                           'ERROR placement.fault_wrap [-] Placement API '
                           'unexpected error: Another thread concurrently '
                           'updated the resource provider')], unexpected)

    #: Placement's record of the provider race, at second %02d.
    PLACEMENT_RACE = (
        '2026-01-01 00:00:%02d.000 9 ERROR placement.fault_wrap [-] '
        'Placement API unexpected error: Another thread concurrently '
        'updated the resource provider\n')

    def test_ext_placement_is_judged_as_stock_while_stock_computes_ran(self):
        line = self.PLACEMENT_RACE
        self.write('ext-placement.log', line % 1 + line % 5)
        start = time.mktime((2026, 1, 1, 0, 0, 0, 0, 0, -1))
        unexpected, _ = logs.unexpected_errors(
            self.dir, stock_windows=[(start, start + 2)])
        self.assertEqual([('ext-placement.log', (line % 5).strip())],
                         unexpected)

    # Records the allowlist excuses only during a drill or a stop.
    RABBIT_TIMEOUT = ('2026-01-01 00:%s 7 ERROR nova.compute.manager [-] '
                      'Error updating resources for node ht: oslo_messaging'
                      '.exceptions.MessagingTimeout: x\n')
    UPTIME_KILLED = ('2026-01-01 00:00:05.000 7 ERROR nova.compute.manager '
                     '[-] Error updating resources for node ht: Process'
                     'ExecutionError: Unexpected error while running '
                     'command.\nCommand: env LANG=C uptime\nExit code: -15\n')
    START = time.mktime((2026, 1, 1, 0, 0, 0, 0, 0, -1))

    def test_a_drill_record_is_excused_only_within_the_drill(self):
        # Before the drill, and longer after it than rpc_response_timeout
        # with room (within: 90), it is an error.
        self.write('ext-compute-ht.log', ''.join(
            self.RABBIT_TIMEOUT % t for t in ('00:01.000', '00:40.000',
                                              '03:00.000')))
        drill = ('drill rabbitmq restart', '*', self.START + 10,
                 self.START + 30)
        unexpected, allowed = logs.unexpected_errors(self.dir,
                                                     events=[drill])
        self.assertEqual(['00:00:01.000', '00:03:00.000'],
                         [line[11:23] for _, line in unexpected])
        self.assertEqual([1], list(allowed.values()))

    def test_a_stop_record_is_excused_in_its_own_stop_only(self):
        self.write('ext-compute-ht.log', self.UPTIME_KILLED)
        for stop in (('stop of compute-noht', 'ext'),
                     ('stop of compute-ht', 'stock'),
                     ('drill bad config', '*')):
            unexpected, _ = logs.unexpected_errors(
                self.dir, events=[stop + (self.START, None)])
            self.assertEqual(1, len(unexpected), stop)
        unexpected, _ = logs.unexpected_errors(self.dir, events=[(
            'stop of compute-ht', 'ext', self.START, self.START + 6)])
        self.assertEqual([], unexpected)

    def test_work_during_a_graceful_shutdown_in_its_stop_only(self):
        self.write('ext-compute-ht.log', (
            '2026-01-01 00:00:05.000 7 ERROR oslo_messaging.rpc.server [-] '
            'Exception during message handling: RuntimeError: Cannot create '
            'the long_task thread pool executor because shutdown has been '
            'started.\n'
            '2026-01-01 00:00:05.100 7 ERROR oslo_service.periodic_task [-] '
            'Error during ComputeManager.update_available_resource: Runtime'
            'Error: Cannot create the update_resources thread pool executor '
            'because shutdown has been started.\n'))
        for stop, unexpected_records in (
                (('stop of compute-ht', 'ext', self.START, None), 0),
                (('stop of compute-noht', 'ext', self.START, None), 2)):
            unexpected, _ = logs.unexpected_errors(self.dir, events=[stop])
            self.assertEqual(unexpected_records, len(unexpected), stop)

    def test_an_inventory_409_of_a_fake_compute_after_its_start_only(self):
        record = (
            '2026-01-01 00:%s 7 ERROR nova.scheduler.client.report [None '
            'req-a - - - - - -] [req-b] Failed to update inventory to [{}] '
            'for resource provider with UUID p.  Got 409: {"errors": [{'
            '"status": 409, "code": "placement.concurrent_update"}]}\n')
        self.write('ext-compute-noht.log', ''.join(
            record % t for t in ('00:40.000', '03:00.000')))
        self.write('ext-compute-libvirt.log', record % '03:00.000')
        start = ('stop of compute-noht', 'ext', self.START, self.START + 10)
        unexpected, _ = logs.unexpected_errors(self.dir, events=[start])
        self.assertEqual([('ext-compute-noht.log', (record % '03:00.000'
                                                    ).strip())], unexpected)

    # A status update past provider_lock_timeout, and the race it can meet.
    LOCK_TIMEOUT = (
        '2026-01-01 00:00:10.000 7 WARNING nova_pcpu_ext.serialized_client '
        '[req-a u p - - default default] Compute status update of provider '
        'p waited 10.0s for its provider tree, held by resource tracker '
        'update of ht, and goes ahead without the lock ([pcpu_ext] '
        'provider_lock_timeout).\n')
    TRAITS_500 = (
        '2026-01-01 00:%s 7 ERROR nova.scheduler.client.report [req-a u p - '
        '- default default] [req-b] Failed to update traits to [COMPUTE_'
        'STATUS_DISABLED] for resource provider with UUID p.  Got 500: '
        '{"errors": [{"detail": "Another thread concurrently updated the '
        'resource provider data. Please retry your update  "}]}\n')

    def test_a_traits_500_on_ext_only_after_its_own_lock_timeout(self):
        # Before the warning, more than a minute after it, or in another
        # compute's log, the 500 is an error: the tree lock prevents it.
        self.write('ext-compute-ht.log', self.TRAITS_500 % '00:05.000' +
                   self.LOCK_TIMEOUT + self.TRAITS_500 % '00:11.000' +
                   self.TRAITS_500 % '01:11.000')
        self.write('ext-compute-noht.log', self.TRAITS_500 % '00:11.000')
        self.write('ext-placement.log', self.PLACEMENT_RACE % 11)
        events = logs.lock_timeouts(self.dir)
        self.assertEqual([('lock timeout of compute-ht', 'ext',
                           self.START + 10, self.START + 10)], events)
        unexpected, allowed = logs.unexpected_errors(self.dir, events=events)
        self.assertEqual([('ext-compute-ht.log', '00:00:05.000'),
                          ('ext-compute-ht.log', '00:01:11.000'),
                          ('ext-compute-noht.log', '00:00:11.000')],
                         [(name, line[11:23]) for name, line in unexpected])
        self.assertEqual(2, sum(allowed.values()))

    def test_a_restart_record_is_excused_whatever_code_ran(self):
        # Nova's conductor times out on a scheduler that stopped: the same
        # on stock or ext, and judged by the scheduler's stop alone.
        self.write('ext-nova-superconductor.log', (
            '2026-01-01 00:00:%s 7 ERROR nova.conductor.manager [-] Failed '
            'to schedule instances: oslo_messaging.exceptions.Messaging'
            'Timeout: x\n') % '50.000')
        stop = ('stop of nova-scheduler', 'ext', self.START, self.START + 5)
        for stock_pids in ((), (7,)):
            unexpected, _ = logs.unexpected_errors(
                self.dir, stock_pids=stock_pids, events=[stop])
            self.assertEqual([], unexpected)
        unexpected, _ = logs.unexpected_errors(self.dir)
        self.assertEqual(1, len(unexpected))

    def test_a_status_call_timeout_in_its_host_compute_stop_only(self):
        # nova-api waits rpc_response_timeout for a compute that stopped
        # with the call in flight; for another host, or long after the
        # compute is back, the compute failed to answer.
        self.write('ext-nova-api.out', (
            '2026-01-01 00:01:00.000 7 ERROR nova.compute.api [req-a u p - '
            '- default default] An error occurred while updating the '
            'COMPUTE_STATUS_DISABLED trait on compute node resource '
            'providers managed by host legacy-ht. The trait will be '
            'synchronized automatically by the compute service when the '
            'update_available_resource periodic task runs.: oslo_messaging.'
            'exceptions.MessagingTimeout: Timed out waiting for a reply\n'))
        for stop, unexpected_records in (
                (('stop of compute-legacy-ht', 'ext', self.START,
                  self.START + 10), 0),
                (('stop of compute-ht', 'ext', self.START, None), 1),
                (('stop of compute-legacy-ht', 'stock', self.START, None), 1),
                (('stop of compute-legacy-ht', 'ext', self.START - 200,
                  self.START - 100), 1)):
            unexpected, _ = logs.unexpected_errors(self.dir, events=[stop])
            self.assertEqual(unexpected_records, len(unexpected), stop)

    def test_no_valid_host_is_excused_in_its_own_tempest_run_only(self):
        # The journey on ext runs beside tempest on stock and allows none.
        for name in ('stock-nova-superconductor.log',
                     'ext-nova-superconductor.log'):
            self.write(name, (
                '2026-01-01 00:00:20.000 7 ERROR nova.conductor.manager [-] '
                'Failed to schedule instances: nova.exception_Remote.NoValid'
                'Host_Remote: No valid host was found.\n'))
        unexpected, _ = logs.unexpected_errors(self.dir, events=[(
            'tempest', 'stock', self.START + 10, self.START + 30)])
        self.assertEqual(['ext-nova-superconductor.log'],
                         [name for name, _ in unexpected])

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
            'stock': {'lost updates': 3,
                      'changes undone in placement later': 2},
            'ext': {'lost updates': 0,
                    'changes undone in placement later': 0},
        }})}
        self.assertEqual([], drills.failures(results))
        self.assertEqual([3, 0], [results['rows'][0][k]
                                  for k in ('stock', 'ext')])

    def test_the_short_form_runs_on_the_extension_without_bad_config(self):
        short, full = ([name for name, _ in drills.drills(mode)]
                       for mode in ('short', 'full'))
        self.assertEqual([n for n in full if n != 'bad config'], short)
        self.assertIn('bad config', full)
        results = {'rows': drills.rows({'compute kill': {
            'ext': {'computes alive': True}}})}
        self.assertEqual('not run', results['rows'][0]['stock'])

    def test_a_freeze_that_missed_is_tried_again(self):
        caught, waited = ('periodic update caught reading placement',
                          'status update waited for the tree lock')
        missed = {caught: True, waited: False}
        freeze = self.useFixture(fixtures.MockPatchObject(
            drills, 'freeze_once')).mock
        ext, stock = (types.SimpleNamespace(
            deployment=types.SimpleNamespace(extension=extension))
            for extension in (True, False))
        freeze.side_effect = [dict(missed), dict(missed, **{waited: True})]
        figures = drills.conductor_freeze(ext)
        self.assertEqual((2, True),
                         (figures['freezes tried'], figures[waited]))
        # A status update that never waits: every try misses, and the last
        # is judged.
        freeze.side_effect = [dict(missed) for _ in range(3)]
        figures = drills.conductor_freeze(ext)
        self.assertEqual((3, False),
                         (figures['freezes tried'], figures[waited]))
        # Stock has no lock to wait for.
        freeze.side_effect = [dict(missed)]
        self.assertEqual(1, drills.conductor_freeze(stock)['freezes tried'])

    def test_the_storm_judges_counts_not_the_calls_time(self):
        # A change the race undid fails; a disagreement as long as a slow
        # API call is reported only.
        results = {'rows': drills.rows({'status storm': {'ext': {
            'lost updates': 0, 'changes undone in placement later': 1,
            'longest disagreement less the slowest call (s)': 9.0}}})}
        self.assertEqual(['drill status storm: changes undone in placement '
                          'later is 1 on ext, needs 0'],
                         drills.failures(results))

    def test_a_boot_refused_with_room_left_fails(self):
        results = {'rows': drills.rows({'boot storm': {'ext': {
            'servers with No valid host': 9,
            'of them with room left for their kind': 1}}})}
        self.assertIn('drill boot storm: of them with room left for their '
                      'kind is 1 on ext, needs 0', drills.failures(results))

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
        self.assertIn('drill status storm: changes undone in placement '
                      'later is None on ext, needs measured',
                      drills.failures(results))

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

    def test_a_cell_down_must_be_told_and_the_verdict_come_back(self):
        check = {(c.drill, c.figure): c for c in drills.CHECKS}[
            ('cell database down',
             'upgrade check exit code: before, cell2 down, back')]
        self.assertTrue(check.test('1, 3, 1'))
        self.assertTrue(check.test('0, 3, 0'))
        self.assertFalse(check.test('1, 1, 1'))  # the cell down not told
        self.assertFalse(check.test('0, 3, 1'))  # not as before once back

    def test_a_query_count_other_than_one_is_not_met(self):
        check = {(c.drill, c.figure): c for c in drills.CHECKS}[
            ('boot storm', 'placement queries per isolate request')]
        self.assertTrue(check.test('1 (x10)'))
        self.assertFalse(check.test('1 (x9), 2 (x1)'))
        self.assertFalse(check.test(''))


class DrillFiguresTest(testtools.TestCase):
    """What drills read from the cloud, from stand-ins."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def target(self, extension=True, services=()):
        deployment = types.SimpleNamespace(
            extension=extension, dir=self.dir,
            computes=[c for c in deploy.COMPUTES if c.fake])
        replies = iter(services)
        return types.SimpleNamespace(
            deployment=deployment, providers={'ht': 'rp-ht', 'noht': 'rp-2'},
            services=lambda: next(replies),
            log=lambda name: os.path.join(self.dir, name + '.log'))

    def test_report_times_per_host(self):
        old, new = '2026-01-01T00:00:00.000000', '2026-01-01T00:00:09.000000'
        since = drills._epoch(old) + 0.5
        target = self.target(services=itertools.chain(
            [{'ht': {'updated_at': old}, 'noht': {'updated_at': old}}],
            itertools.repeat(
                {'ht': {'updated_at': new}, 'noht': {'updated_at': old}})))
        times = drills.report_times(target, since, timeout=0.9)
        self.assertEqual(['ht', 'noht'], sorted(times))
        self.assertGreater(times['ht'], 0)
        self.assertIsNone(times['noht'])

    def test_provider_lock_timeout_as_the_compute_runs_with(self):
        path = deploy.conf_path_of(self.dir, 'ht')
        deploy.write_conf(path, {'pcpu_ext': {'report_client': 'serialized'}})
        self.assertEqual(10.0, drills.provider_lock_timeout(
            self.target(), 'ht'))
        deploy.write_conf(path, {'pcpu_ext': {'provider_lock_timeout': '4'}})
        self.assertEqual(4.0, drills.provider_lock_timeout(
            self.target(), 'ht'))
        self.assertIsNone(drills.provider_lock_timeout(
            self.target(extension=False), 'ht'))

    def test_waits_for_the_compute_reading_its_allocations(self):
        path = os.path.join(self.dir, 'placement.log')
        with open(path, 'w') as f:
            f.write('"GET /resource_providers/rp-ht/allocations" before\n')

        def log(uuid):
            with open(path, 'a') as f:
                f.write('"GET /resource_providers/%s/allocations"\n' % uuid)

        threading.Timer(0.1, log, ('rp-2',)).start()
        self.assertFalse(drills.wait_for_allocations_read(
            self.target(), 'ht', timeout=0.3))
        threading.Timer(0.1, log, ('rp-ht',)).start()
        self.assertTrue(drills.wait_for_allocations_read(
            self.target(), 'ht', timeout=5))

    def test_provider_state_leaves_out_real_libvirt_memory_size(self):
        memory = {'total': 8410, 'max_unit': 8410, 'reserved': 512}
        target = types.SimpleNamespace(
            providers={'libvirt': 'rp-1', 'ht': 'rp-2'},
            placement=lambda path: {'inventories': {
                'MEMORY_MB': dict(memory), 'VCPU': {'total': 1}}},
            traits=lambda host: {'COMPUTE_NODE'})
        state = drills.Target.provider_state(target)
        self.assertEqual(({'MEMORY_MB': {'reserved': 512},
                           'VCPU': {'total': 1}}, {'COMPUTE_NODE'}),
                         state['libvirt'])
        self.assertEqual(memory, state['ht'][0]['MEMORY_MB'])

    def test_lock_timeout_missed_fails_the_run(self):
        figure = ('disable in placement by provider_lock_timeout + %d s' %
                  drills.LOCK_TIMEOUT_MARGIN)
        results = {'rows': drills.rows({'conductor freeze': {
            'stock': {figure: None},
            'ext': {figure: False,
                    'status update waited for the tree lock': True,
                    'traits follow service status after thaw (s)': 0.4,
                    'computes alive': True}}})}
        self.assertEqual(['drill conductor freeze: %s is False on ext, '
                          'needs True' % figure], drills.failures(results))


class JourneyVerdictTest(testtools.TestCase):

    def test_met_unmet_and_missing_figures(self):
        results = {'rows': journey.rows({
            'repair': {'victims healed': 1, 'heal exit code': 1,
                       'heal rows': {'a': 'healed'}},
            'rollback': {'error': 'TimeoutError: x'}})}
        rows = {(r['step'], r['figure']): r for r in results['rows']}
        self.assertTrue(rows['repair', 'victims healed']['ok'])
        self.assertIs(False, rows['repair', 'heal exit code']['ok'])
        # Details stay in the JSON only.
        self.assertNotIn(('repair', 'heal rows'), rows)
        failures = journey.failures(results)
        self.assertIn('journey repair: heal exit code is 1, needs 0',
                      failures)
        self.assertIn('journey rollback: error is TimeoutError: x, needs '
                      'no error', failures)
        # A figure that was never measured is not met.
        self.assertIn('journey repair: second heal exit code, legacy rows, '
                      'other rows is None, needs 0, 2, 0', failures)

    def test_boots_are_judged_by_their_outcome(self):
        # A scheduler refusing boots, or errors beyond one boot per
        # restart, fail the step; the restarts' own are excused.
        for step in ('rolling enable', 'rollback'):
            rows = {r['figure']: r['ok'] for r in journey.rows({step: {
                'servers with No valid host': 1,
                'servers in ERROR per restart': 1.5}}) if r['step'] == step}
            self.assertIs(False, rows['servers with No valid host'])
            self.assertIs(False, rows['servers in ERROR per restart'])
        rows = {r['figure']: r['ok'] for r in journey.rows({'rollback': {
            'servers with No valid host': 0,
            'servers in ERROR per restart': 0.2}})
            if r['step'] == 'rollback'}
        self.assertTrue(rows['servers with No valid host'])
        self.assertTrue(rows['servers in ERROR per restart'])

    def test_lists_are_judged_and_shown_by_length(self):
        rows = journey.rows({'rollback': {
            'workload servers changed': ['a: ACTIVE -> ERROR']}})
        (row,) = [r for r in rows if r['step'] == 'rollback' and
                  r['figure'] == 'workload servers changed']
        self.assertEqual((1, False), (row['value'], row['ok']))

    def test_each_upgrade_is_judged(self):
        # Nova's own check must pass after each upgrade, the extension's
        # warn of the legacy servers only, and some boots must meet
        # computes of both releases.
        for series in journey.UPGRADES:
            step = 'upgrade to ' + series
            rows = {r['figure']: r['ok'] for r in journey.rows({step: {
                'nova-status upgrade check exit code before, after': '0, 2',
                'nova-status checks not passed after': [
                    'Service User Token Configuration'],
                'extension upgrade check exit code before, after': '1, 1',
                'servers booted while computes were of two releases': 0}})
                if r['step'] == step}
            self.assertEqual({
                'nova-status upgrade check exit code before, after': False,
                'nova-status checks not passed after': False,
                'extension upgrade check exit code before, after': True,
                'servers booted while computes were of two releases': False,
            }, {figure: rows[figure] for figure in (
                'nova-status upgrade check exit code before, after',
                'nova-status checks not passed after',
                'extension upgrade check exit code before, after',
                'servers booted while computes were of two releases')})
        # grenade's resources are verified after the last upgrade only.
        self.assertIn('journey upgrade to %s: grenade resources verified is '
                      'None, needs True' % journey.UPGRADES[-1],
                      journey.failures({'rows': journey.rows({})}))

    def test_nova_status_table(self):
        table = textwrap.dedent('''
            +-----------------------------------------------+
            | Upgrade Check Results                         |
            +-----------------------------------------------+
            | Check: Cells v2                               |
            | Result: Success                               |
            | Details: None                                 |
            +-----------------------------------------------+
            | Check: Service User Token Configuration       |
            | Result: Failure                               |
            | Details:                                      |
            |   Service user token configuration is needed. |
            +-----------------------------------------------+
            | Check: hw_machine_type unset                  |
            | Result: Warning                               |
            | Details: None                                 |
            +-----------------------------------------------+
            ''')
        self.assertEqual(['Service User Token Configuration',
                          'hw_machine_type unset'],
                         journey.nova_not_passed(table))


class ReleasesTest(testtools.TestCase):

    def test_services_run_in_their_release_default_mode(self):
        # Before 2026.2 eventlet, whatever the cloud asks for a compute.
        old = releases.Release('2025.1', '/venvs/2025.1')
        self.assertFalse(old.native_threads)
        self.assertTrue(releases.CURRENT.native_threads)
        self.assertEqual('/venvs/2025.1/bin/python', old.python)


class LoadPauseTest(testtools.TestCase):

    def test_pause_waits_for_what_is_in_flight_only(self):
        # Each thread takes its turn again as soon as it ends one: nothing
        # starts while the pause lasts, and the load goes on after it.
        class Busy(journey.Load):
            turns_taken = []

            def _boot(self):
                self.turns_taken.append('boot')
                time.sleep(0.05)

            def _status_change(self):
                self.turns_taken.append('status')
                time.sleep(0.05)

        load = Busy(None, {'shared': 'f'}, [], []).start()
        self.addCleanup(load.stop)
        time.sleep(0.2)
        start = time.monotonic()
        with load.paused():
            entered = time.monotonic() - start
            taken = len(load.turns_taken)
            time.sleep(0.3)
            self.assertEqual(taken, len(load.turns_taken))
        self.assertLess(entered, 5)
        time.sleep(0.2)
        self.assertGreater(len(load.turns_taken), taken)


class JourneyRatiosTest(testtools.TestCase):

    def journey(self, now):
        journey_ = journey.Journey.__new__(journey.Journey)
        journey_.past_ratios = {
            'ht': {'VCPU': 16.0, 'MEMORY_MB': 1.5, 'DISK_GB': 1.0},
            'noht': {'VCPU': 0.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0}}
        journey_.ratios = lambda: now
        return journey_

    def test_only_the_zero_ratio_may_change(self):
        repaired = self.journey({
            'ht': {'VCPU': 16.0, 'MEMORY_MB': 1.5, 'DISK_GB': 1.0},
            'noht': {'VCPU': 4.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0}})
        cut = self.journey({
            'ht': {'VCPU': 4.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0},
            'noht': {'VCPU': 0.0, 'MEMORY_MB': 1.0, 'DISK_GB': 1.0}})

        self.assertEqual([], repaired.ratios_changed())
        self.assertEqual(['ht MEMORY_MB 1.5 -> 1.0', 'ht VCPU 16.0 -> 4.0',
                          'noht VCPU 4.0 -> 0.0'], cut.ratios_changed())


class ComputeConfTest(testtools.TestCase):

    def test_only_a_2026_1_compute_sleeps_less_on_its_stop(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        deploy.write_conf(path, {'DEFAULT': {'host': 'ht'}})
        for series, expected in (('2025.1', None), ('2026.1', '10'),
                                 ('2026.2', None)):
            deploy.set_shutdown_sleep(path, series)
            parser = configparser.ConfigParser()
            parser.read(path)
            self.assertEqual(expected, parser.defaults().get(
                'manager_shutdown_timeout'), series)
            self.assertEqual('ht', parser.defaults()['host'])


class ComputeRestartTest(testtools.TestCase):

    def test_every_compute_restarts_updating_at_once_each_interval(self):
        deployment = deploy.NovaDeployment.__new__(deploy.NovaDeployment)
        deployment.name = 'ext'
        deployment.dir = self.useFixture(fixtures.TempDir()).path
        deployment.computes = list(deploy.COMPUTES)
        deployment.procs = unittest.mock.Mock()
        deployment.start_compute = unittest.mock.Mock()
        for compute in deploy.COMPUTES:
            deploy.write_conf(deploy.conf_path_of(deployment.dir,
                                                  compute.host),
                              {'DEFAULT': {'update_resources_interval': '10'}})

        deployment.restart_computes(1)

        deployment.procs.stop.assert_called_once_with(
            'ext-compute-ht', 'ext-compute-noht', 'ext-compute-legacy-ht',
            'ext-compute-libvirt', 'ext-compute-cell2-ht', timeout=10)
        self.assertEqual(list(deploy.COMPUTES), [
            call.args[0] for call in deployment.start_compute.call_args_list])
        for compute in deploy.COMPUTES:
            parser = configparser.ConfigParser()
            parser.read(deploy.conf_path_of(deployment.dir, compute.host))
            self.assertEqual('1', parser.defaults()[
                'update_resources_interval'])
            self.assertEqual('0', parser.defaults()['periodic_fuzzy_delay'])


class CellLayoutTest(testtools.TestCase):
    """The cells as devstack's superconductor layout has them."""

    def deployment(self):
        deployment = deploy.NovaDeployment.__new__(deploy.NovaDeployment)
        deployment.name = 'ext'
        deployment.dir = self.useFixture(fixtures.TempDir()).path
        deployment.rabbit = types.SimpleNamespace(
            transport_url=lambda vhost: 'rabbit://r/' + vhost)
        deployment.shared = types.SimpleNamespace(
            keystone_url='http://k/v3')
        deployment.procs = types.SimpleNamespace(
            log_path=lambda name: name + '.log')
        deployment.born_before_2023_1 = ()
        return deployment

    def test_a_compute_talks_to_its_cell_alone(self):
        deployment = self.deployment()
        for compute in deploy.COMPUTES:
            deployment.write_compute_conf(compute)
            parser = configparser.ConfigParser(interpolation=None)
            parser.read(deploy.conf_path_of(deployment.dir, compute.host))
            self.assertEqual('rabbit://r/ext-' + compute.cell,
                             parser['DEFAULT']['transport_url'])
            self.assertEqual('True', parser['workarounds'][
                'disable_group_policy_check_upcall'])
            self.assertFalse(parser.has_section('database'))
        self.assertEqual(['cell1', 'cell2'], sorted(
            {c.cell for c in deploy.COMPUTES}))

    def test_a_conductor_per_cell_and_a_superconductor(self):
        self.assertEqual(
            ['nova-api', 'nova-superconductor', 'nova-scheduler',
             'nova-conductor-cell1', 'nova-conductor-cell2'],
            deploy.NovaDeployment.controllers())
        deployment = self.deployment()
        self.assertEqual(('ext', 'ext-cell2'),
                         (deployment.vhost(), deployment.vhost('cell2')))


class JourneyChecksTest(testtools.TestCase):

    def test_both_upgrade_checks_run_on_the_deployment(self):
        journey_ = journey.Journey.__new__(journey.Journey)
        journey_.deployment = unittest.mock.Mock()
        journey_.deployment.command.return_value = (1, (
            '| Check: Cells v2 |\n| Result: Success |\n'
            '| Check: Placement API |\n| Result: Warning |\n'))
        journey_.deployment.upgrade_check.return_value = (0, {'checks': [
            {'check': 'Ratios', 'result': 0, 'details': None}]})

        self.assertEqual((1, ['Placement API'], 0, []),
                         journey_.both_checks())
        journey_.deployment.command.assert_called_once_with(
            'nova-status', 'upgrade', 'check')


class JourneyBatchesTest(testtools.TestCase):

    def rolled(self, on):
        journey_ = journey.Journey.__new__(journey.Journey)
        journey_.deployment = unittest.mock.Mock()
        journey_.stock_windows = [[0, None]]
        journey_.services = lambda: dict.fromkeys(
            ['scheduler', 'ht', 'noht', 'legacy-ht', 'libvirt'])
        journey_.ratio = lambda host: journey.VCPU_RATIO
        order = []
        journey_.restart_together = lambda on, batch: order.append(
            list(batch)) or dict.fromkeys(batch, 1.0)
        back_in, _ = journey_.roll(on)
        self.assertEqual(5, len(back_in))
        return order

    def test_scheduler_first_on_and_last_off_computes_in_two_batches(self):
        self.assertEqual([['scheduler'], ['ht', 'noht'],
                          ['legacy-ht', 'libvirt']], self.rolled(on=True))
        self.assertEqual([['ht', 'noht'], ['legacy-ht', 'libvirt'],
                          ['scheduler']], self.rolled(on=False))


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
        cmdline, deadline = '', time.monotonic() + 5
        while not cmdline and time.monotonic() < deadline:
            # Empty while the new process is still in its exec.
            with open('/proc/%d/cmdline' % second) as f:
                cmdline = f.read()
        self.assertEqual('sleep\x0060\x00', cmdline)

    def test_each_stop_lasts_until_the_process_starts_again(self):
        procs = processes.Processes(self.useFixture(fixtures.TempDir()).path)
        self.addCleanup(procs.stop, 'sleeper')
        procs.start('sleeper', ['sleep', '60'])
        procs.stop('sleeper')
        procs.start_again('sleeper')
        procs.stop('sleeper', 'not-started')
        [(name, stopped, started), last] = procs.stops
        self.assertEqual('sleeper', name)
        self.assertLessEqual(stopped, started)
        self.assertEqual(['sleeper', None], [last[0], last[2]])


class FakeCloud(http.server.BaseHTTPRequestHandler):
    """keystone and nova-api, just enough for a drill's Target.

    The first request of each line in ``server.reset`` (method and path)
    gets its connection reset instead of an answer, as a request racing
    gunicorn's close of an idle keep-alive connection does.
    """

    protocol_version = 'HTTP/1.1'

    def answer(self):
        self.rfile.read(int(self.headers.get('Content-Length') or 0))
        line = '%s %s' % (self.command, self.path)
        self.server.seen.append(line)
        if line in self.server.reset:
            self.server.reset.remove(line)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack('ii', 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        url = 'http://127.0.0.1:%d' % self.server.server_address[1]
        token = {'methods': ['password'],
                 'expires_at': '2099-01-01T00:00:00.000000Z',
                 'user': {'id': 'u', 'name': 'admin',
                          'domain': {'id': 'default', 'name': 'Default'}},
                 'project': {'id': 'p', 'name': 'admin',
                             'domain': {'id': 'default', 'name': 'Default'}},
                 'catalog': [{'type': 'compute', 'id': 'c', 'endpoints': [
                     {'interface': 'public', 'region_id': 'stock',
                      'region': 'stock', 'url': url + '/v2.1', 'id': 'e'}]}]}
        body = {
            '/v3': {'version': {'id': 'v3.14', 'status': 'stable', 'links': [
                {'rel': 'self', 'href': url + '/v3/'}]}},
            '/v3/auth/tokens': {'token': token},
            '/v2.1/os-hypervisors/detail': {'hypervisors': [
                {'id': 'rp-ht', 'service': {'host': 'ht'}}]},
            '/v2.1/os-services?binary=nova-compute': {'services': [
                {'id': 7, 'host': 'ht'}]},
            '/v2.1/servers': {'server': {'id': 'server-1'}},
        }.get(self.path, {})
        data = json.dumps(body).encode()
        self.send_response(201 if self.command == 'POST' else 200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.send_header('X-Subject-Token', 'token')
        self.send_header('X-OpenStack-Request-Id', 'req-1')
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = answer

    def log_message(self, *args):
        pass


class DrillClientTest(testtools.TestCase):
    """The drills' client, built as for the cloud, meets a reset."""

    def target(self, reset):
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), FakeCloud)
        server.seen, server.reset = [], set(reset)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        shared = deploy.SharedServices(None, None, None, {
            'keystone': server.server_address[1], 'glance': 0, 'network': 0})
        target = drills.Target(
            types.SimpleNamespace(procs=None, shared=shared, image_id='i'),
            types.SimpleNamespace(name='stock'))
        return target, server.seen

    def test_reset_idempotent_call_is_sent_again_and_counted(self):
        target, seen = self.target(reset=['PUT /v2.1/os-services/7'])
        target.set_disabled('ht', True)
        self.assertEqual(2, seen.count('PUT /v2.1/os-services/7'))
        self.assertEqual(['PUT /v2.1/os-services/7'], target.conn.retried)

    def test_reset_server_create_is_not_sent_again(self):
        pin = 'openstacksdk==%s' % metadata.version('openstacksdk')
        with open(CLOUD_CONSTRAINTS) as constraints:
            if pin not in constraints.read().split():
                self.skipTest('older clients send it again themselves; the '
                              'loopback cloud runs constraints/cloud.txt')
        target, seen = self.target(reset=['POST /v2.1/servers'])
        self.assertRaises(ks_exceptions.ConnectFailure,
                          drills.boot, target, 'flavor-1')
        self.assertEqual(1, seen.count('POST /v2.1/servers'))
        self.assertEqual([], target.conn.retried)
