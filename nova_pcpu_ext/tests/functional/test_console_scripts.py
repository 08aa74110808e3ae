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

import os
import subprocess
import sys
import sysconfig

import fixtures
import testtools

BIN = sysconfig.get_path('scripts')


class ConsoleScriptTest(testtools.TestCase):

    def run_script(self, name, *args, nova_conf=''):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as conf:
            conf.write(nova_conf)
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        return subprocess.run(
            [os.path.join(BIN, name), '--config-file', path] + list(args),
            capture_output=True, text=True, timeout=120, env=env,
            stdin=subprocess.DEVNULL)

    def assertStopsWith(self, result, message):
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertEqual('nova-pcpu-ext: ' + message,
                         result.stderr.strip().splitlines()[-1])
        self.assertNotIn('Traceback', result.stderr)

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
            'allocation_ratios')

    def test_scheduler_rejects_unknown_plugin(self):
        result = self.run_script('nova-pcpu-ext-scheduler', nova_conf=(
            '[pcpu_ext]\nrequest_filters = isolate\n'))
        self.assertStopsWith(
            result, '[pcpu_ext] request_filters: unknown plugin isolate; '
            'installed in nova_pcpu_ext.request_filters: '
            'isolate_vcpu_fallback')

    def test_invalid_choice_is_reported_by_oslo_config(self):
        result = self.run_script('nova-pcpu-ext-scheduler', nova_conf=(
            '[pcpu_ext]\nisolate_fallback_mode = keep\n'))
        self.assertEqual(1, result.returncode, result.stderr)
        message = result.stderr.strip().splitlines()[-1]
        self.assertTrue(message.startswith(
            'nova-pcpu-ext: [pcpu_ext] isolate_fallback_mode: '), message)
        self.assertIn("Valid values are [drop, forbid_trait], but found "
                      "'keep'", message)

    def test_config_generator_prints_the_group(self):
        result = subprocess.run(
            [sys.executable, '-m', 'oslo_config.generator',
             '--namespace', 'nova_pcpu_ext'],
            capture_output=True, text=True, timeout=60, check=True)
        self.assertIn('[pcpu_ext]', result.stdout)
        self.assertIn('#isolate_fallback_mode = drop', result.stdout)
