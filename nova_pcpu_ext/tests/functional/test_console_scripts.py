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

"""The installed console scripts and entry points, run as operators do."""

import fcntl
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time

import fixtures
import testscenarios
import testtools

BIN = sysconfig.get_path('scripts')
#: Nova's warning for modules imported before eventlet's monkey patching.
IMPORT_ORDER_WARNING = 'imported prior to eventlet monkey patching'
BAD_REQUEST_FILTER = ('[pcpu_ext] request_filters: unknown plugin isolate; '
                      'installed in nova_pcpu_ext.request_filters: '
                      'isolate_vcpu_fallback')


class SchedulerProcessesLock(fixtures.Fixture):
    """One test at a time runs or looks for scheduler processes.

    Held by the tests that run schedulers as processes, and by those that
    judge the schedulers running on this host: test workers share it.
    """

    def _setUp(self):
        lock = open(os.path.join(tempfile.gettempdir(),
                                 'nova-pcpu-ext-tests-schedulers.lock'), 'w')
        self.addCleanup(lock.close)  # which unlocks it
        fcntl.flock(lock, fcntl.LOCK_EX)


class _ScriptTestBase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.log_file = os.path.join(self.dir, 'service.log')
        self.scheduler_lock = None

    def _command(self, name, nova_conf, eventlet, environ=None):
        if 'scheduler' in name and not self.scheduler_lock:
            self.scheduler_lock = self.useFixture(SchedulerProcessesLock())
        path = os.path.join(self.dir, 'nova.conf')
        with open(path, 'w') as conf:
            conf.write(nova_conf)
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING=(
            '0' if eventlet else '1'), **(environ or {}))
        return [os.path.join(BIN, name), '--config-file', path], env

    def run_script(self, name, *args, nova_conf='', eventlet=False,
                   environ=None):
        command, env = self._command(name, nova_conf, eventlet, environ)
        return subprocess.run(
            command + list(args), capture_output=True, text=True,
            timeout=120, env=env, stdin=subprocess.DEVNULL)

    def start_service(self, name, nova_conf, eventlet):
        """Start a service that waits for a conductor; killed at cleanup."""
        command, env = self._command(name, nova_conf, eventlet)
        process = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(process.wait, 30)
        self.addCleanup(process.kill)
        return process

    def read_log(self, until, seconds=60):
        """The service's log file, once it holds ``until`` (or in time)."""
        deadline = time.monotonic() + seconds
        text = ''
        while time.monotonic() < deadline:
            if os.path.exists(self.log_file):
                with open(self.log_file) as log:
                    text = log.read()
                if until in text:
                    break
            time.sleep(0.2)
        return text

    def assertStopsWith(self, result, message):
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertEqual('nova-pcpu-ext: ' + message,
                         result.stderr.strip().splitlines()[-1])
        self.assertNotIn('Traceback', result.stderr)


class ConsoleScriptTest(_ScriptTestBase):

    def test_compute_rejects_non_finite_ratio(self):
        result = self.run_script('nova-pcpu-ext-compute', nova_conf=(
            '[DEFAULT]\ncpu_allocation_ratio = nan\n'))
        self.assertStopsWith(
            result, '[DEFAULT] cpu_allocation_ratio = nan is not a finite '
            'number: set a positive ratio such as 1.5, or leave it unset '
            'for the default.')

    def test_compute_rejects_unknown_plugin(self):
        result = self.run_script('nova-pcpu-ext-compute', nova_conf=(
            '[pcpu_ext]\nresource_tracker_mixins = ratios\n'))
        self.assertStopsWith(
            result, '[pcpu_ext] resource_tracker_mixins: unknown plugin '
            'ratios; installed in nova_pcpu_ext.resource_tracker: '
            'allocation_ratios, pcpu_trait')

    def test_scheduler_rejects_unknown_plugin(self):
        result = self.run_script('nova-pcpu-ext-scheduler', nova_conf=(
            '[pcpu_ext]\nrequest_filters = isolate\n'))
        self.assertStopsWith(result, BAD_REQUEST_FILTER)

    def test_invalid_choice_is_reported_by_oslo_config(self):
        result = self.run_script('nova-pcpu-ext-scheduler', nova_conf=(
            '[pcpu_ext]\nisolate_fallback_mode = keep\n'))
        self.assertEqual(1, result.returncode, result.stderr)
        message = result.stderr.strip().splitlines()[-1]
        self.assertEqual(
            "nova-pcpu-ext: [pcpu_ext] isolate_fallback_mode = keep is "
            "invalid: Valid values are [drop, legacy_only], but found "
            "'keep'", message)

    def test_value_out_of_range_is_named(self):
        result = self.run_script('nova-pcpu-ext-compute', nova_conf=(
            '[pcpu_ext]\nprovider_lock_warn_seconds = -2\n'))
        self.assertStopsWith(
            result, '[pcpu_ext] provider_lock_warn_seconds = -2 is invalid: '
                    'Should be greater than or equal to 0')

    def test_no_module_imported_before_monkey_patching(self):
        config = ('[pcpu_ext]\nrequest_filters = isolate\n'
                  'resource_tracker_mixins = ratios\n')
        for name in ('nova-pcpu-ext-compute', 'nova-pcpu-ext-scheduler'):
            result = self.run_script(name, nova_conf=config, eventlet=True)
            self.assertEqual(1, result.returncode, result.stderr)
            self.assertNotIn(IMPORT_ORDER_WARNING, result.stderr)

        # Nova does check the import order in this mode: a module imported
        # too early is reported.
        command, env = self._command('nova-pcpu-ext-compute', config, True)
        control = subprocess.run(
            [sys.executable, '-c', 'import oslo_context.context; '
             'import nova.cmd.compute'], capture_output=True, text=True,
            timeout=120, env=env, stdin=subprocess.DEVNULL)
        self.assertIn(IMPORT_ORDER_WARNING, control.stderr)

    def test_config_generator_prints_the_group(self):
        result = subprocess.run(
            [sys.executable, '-m', 'oslo_config.generator',
             '--namespace', 'nova_pcpu_ext'],
            capture_output=True, text=True, timeout=60, check=True)
        self.assertIn('[pcpu_ext]', result.stdout)
        self.assertIn('#isolate_fallback_mode = drop', result.stdout)

    def test_commands_print_the_installed_version(self):
        # NOTE: asked of a process outside the source tree, whose metadata
        # (an egg-info a build leaves) this process may find first.
        expected = 'nova-pcpu-ext %s\n' % subprocess.run(
            [sys.executable, '-c', 'from importlib import metadata; '
             'print(metadata.version("nova-pcpu-ext"))'], cwd=self.dir,
            capture_output=True, text=True, timeout=60,
            check=True).stdout.strip()
        for name in ('nova-pcpu-ext-status', 'nova-pcpu-ext-manage'):
            result = self.run_script(name, '--version')
            self.assertEqual((0, expected, ''), (
                result.returncode, result.stdout, result.stderr))


class ServiceStartTest(testscenarios.WithScenarios, _ScriptTestBase):
    """Each service as a process, in Nova's eventlet and threading modes."""

    scenarios = [('eventlet', {'eventlet': True}),
                 ('threading', {'eventlet': False})]

    def test_activation_lines_in_the_log_file(self):
        process = self.start_service('nova-pcpu-ext-compute', nova_conf=(
            '[DEFAULT]\nlog_file = %s\ntransport_url = fake:/\n'
            'compute_driver = fake.FakeDriver\n' % self.log_file),
            eventlet=self.eventlet)
        # The last activation line, with the installed version.
        log = self.read_log(': active in nova-compute')

        self.assertEqual(1, len(re.findall(
            r'INFO nova_pcpu_ext.activation \[-\] nova-pcpu-ext \S+: active '
            r'in nova-compute\n', log)), log)
        for line in ('[pcpu_ext] resource_tracker_mixins: loaded '
                     'allocation_ratios',
                     '[pcpu_ext] report_client: loaded serialized',
                     'nova-pcpu-ext: nova.compute.resource_tracker.'
                     'ResourceTracker replaced',
                     'nova-pcpu-ext: nova.scheduler.client.report.'
                     'SchedulerReportClient replaced'):
            self.assertEqual(1, log.count(line), log)
        self.assertIsNone(process.poll(), 'the service stopped')

    def test_ratio_warnings_in_the_log_file(self):
        self.start_service('nova-pcpu-ext-compute', nova_conf=(
            '[DEFAULT]\nlog_file = %s\ntransport_url = fake:/\n'
            'compute_driver = fake.FakeDriver\n'
            'cpu_allocation_ratio = 0.0\n' % self.log_file),
            eventlet=self.eventlet)
        log = self.read_log('SchedulerReportClient replaced')

        self.assertEqual(1, log.count(
            'WARNING nova_pcpu_ext.allocation_ratios [-] '
            "[DEFAULT] cpu_allocation_ratio = 0.0 means unset: the next "
            "ratio of Nova's precedence applies, down to the default."), log)

    def _home_with_config_dirs(self, option, *programs):
        """A home whose ``~/.nova/<program>.conf.d`` set ``option``.

        To ``from_<program>``, so that the value tells which was read.
        """
        home = tempfile.mkdtemp(dir=self.dir)
        for program in programs:
            conf_d = os.path.join(home, '.nova', program + '.conf.d')
            os.makedirs(conf_d)
            with open(os.path.join(conf_d, 'pcpu-ext.conf'), 'w') as conf:
                conf.write('[pcpu_ext]\n%s = from_%s\n' % (
                    option, program.replace('-', '_')))
        return home

    def test_reads_the_config_directories_of_nova(self):
        """oslo.config's default directories for nova-compute, not ours.

        Searched in ``~/.nova/`` first; named after the program.
        """
        for service, option, namespace, installed in (
                ('compute', 'resource_tracker_mixins',
                 'nova_pcpu_ext.resource_tracker',
                 'allocation_ratios, pcpu_trait'),
                ('scheduler', 'request_filters',
                 'nova_pcpu_ext.request_filters', 'isolate_vcpu_fallback')):
            home = self._home_with_config_dirs(
                option, 'nova-' + service, 'nova-pcpu-ext-' + service)
            result = self.run_script(
                'nova-pcpu-ext-' + service, eventlet=self.eventlet,
                environ={'HOME': home})
            self.assertStopsWith(
                result, '[pcpu_ext] %s: unknown plugin from_nova_%s; '
                'installed in %s: %s' % (option, service, namespace,
                                         installed))

    def _assert_error_once_in_log(self, result):
        self.assertStopsWith(result, BAD_REQUEST_FILTER)
        self.assertEqual(1, result.stderr.count(BAD_REQUEST_FILTER))
        with open(self.log_file) as log:
            log = log.read()
        self.assertEqual(1, log.count(BAD_REQUEST_FILTER), log)
        self.assertIn('ERROR nova_pcpu_ext.activation', log)
        self.assertNotIn('Traceback', log)

    def test_bad_plugin_error_in_the_log_file_once(self):
        result = self.run_script('nova-pcpu-ext-scheduler', nova_conf=(
            '[DEFAULT]\nlog_file = %s\n[pcpu_ext]\n'
            'request_filters = isolate\n' % self.log_file),
            eventlet=self.eventlet)
        self._assert_error_once_in_log(result)

    def test_bad_plugin_from_available_filters(self):
        """Stock nova-scheduler activating through its nova.conf entry."""
        # The scheduler reads the cell mappings before its filters.
        api_db = ('[api_database]\nconnection = sqlite:///%s\n' %
                  os.path.join(self.dir, 'api.sqlite'))
        result = self.run_script('nova-manage', 'api_db', 'sync',
                                 nova_conf=api_db)
        self.assertEqual(0, result.returncode, result.stderr)
        result = self.run_script('nova-scheduler', nova_conf=api_db + (
            '[DEFAULT]\nlog_file = %s\ntransport_url = fake:/\n'
            '[filter_scheduler]\n'
            'available_filters = nova.scheduler.filters.all_filters\n'
            'available_filters = nova_pcpu_ext.scheduler.activate\n'
            '[pcpu_ext]\nrequest_filters = isolate\n' % self.log_file),
            eventlet=self.eventlet)
        self._assert_error_once_in_log(result)
