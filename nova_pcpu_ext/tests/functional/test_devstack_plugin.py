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

"""The devstack plugin's phases against scratch devstack configuration.

devstack itself is not available here: see :mod:`nova_pcpu_ext.tests.devstack`.
"""

import os
import subprocess
import sys
import sysconfig
import textwrap

import fixtures
import testtools

from nova_pcpu_ext.tests import devstack

# A typical devstack nova.conf: Nova's default available_filters.
NOVA_CONF = textwrap.dedent('''
    [DEFAULT]
    debug = True
    compute_driver = libvirt.LibvirtDriver

    [filter_scheduler]
    enabled_filters = ComputeFilter,ImagePropertiesFilter,NUMATopologyFilter

    [workarounds]
    disable_fallback_pcpu_query = False
''')

# Loads a nova.conf as the service does and calls what it activates.
CHECK = textwrap.dedent('''
    import sys
    from nova import config
    from nova.scheduler import filters
    from nova.scheduler import utils
    from nova.compute import resource_tracker
    from nova_pcpu_ext import activation, compute
    import nova.conf
    CONF = nova.conf.CONF
    config.parse_args(['nova', '--config-file', sys.argv[1]], init_rpc=False)
    classes = filters.HostFilterHandler().get_matching_classes(
        CONF.filter_scheduler.available_filters)
    compute.activate_plugins()
    print(len(classes) > 10,
          activation.is_patched(utils, 'resources_from_request_spec'),
          activation.is_patched(resource_tracker, 'ResourceTracker'),
          CONF.pcpu_ext.isolate_fallback_mode)
''')


class ScratchFilesTestCase(testtools.TestCase):
    """Files of a scratch directory, written and read."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def read(self, path):
        with open(path) as f:
            return f.read()


class DevstackPluginTest(ScratchFilesTestCase):

    def setUp(self):
        super().setUp()
        self.nova_conf = self.write('nova.conf', NOVA_CONF)
        self.cpu_conf = self.write('nova-cpu.conf', NOVA_CONF)
        self.tempest_conf = self.write('tempest.conf', '[DEFAULT]\n')

    def phase(self, *args, **settings):
        """The calls the phase made of devstack's process functions."""
        return devstack.run_plugin(
            args, self.tmp, NOVA_CONF=self.nova_conf,
            NOVA_CPU_CONF=self.cpu_conf, TEMPEST_CONFIG=self.tempest_conf,
            **settings)

    def check(self, conf):
        return subprocess.run(
            [sys.executable, '-c', CHECK, conf], check=True, text=True,
            capture_output=True, env=dict(
                os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        ).stdout.split()

    def available_filters(self):
        return [line.split('=', 1)[1].strip()
                for line in self.read(self.nova_conf).splitlines()
                if line.startswith('available_filters')]

    def test_install(self):
        self.assertEqual([['setup_develop', '%s/nova-pcpu-ext' % self.tmp]],
                         self.phase('stack', 'install'))

    def test_post_config_activates_the_scheduler(self):
        self.phase('stack', 'post-config',
                   NOVA_PCPU_EXT_ISOLATE_FALLBACK_MODE='legacy_only')
        self.phase('stack', 'post-config',
                   NOVA_PCPU_EXT_ISOLATE_FALLBACK_MODE='legacy_only')

        self.assertEqual(['nova.scheduler.filters.all_filters',
                          'nova_pcpu_ext.scheduler.activate'],
                         self.available_filters())
        self.assertEqual(['True', 'True', 'True', 'legacy_only'],
                         self.check(self.nova_conf))

    def test_post_config_keeps_existing_filters(self):
        self.write('nova.conf', NOVA_CONF.replace(
            '[filter_scheduler]\n', '[filter_scheduler]\n'
            'available_filters = nova.scheduler.filters.all_filters\n'
            'available_filters = custom.filters.all\n'))
        self.phase('stack', 'post-config')
        self.assertEqual(['nova.scheduler.filters.all_filters',
                          'custom.filters.all',
                          'nova_pcpu_ext.scheduler.activate'],
                         self.available_filters())

    def test_extra_runs_compute_as_nova_pcpu_ext_compute(self):
        self.phase('stack', 'post-config')
        calls = self.phase('stack', 'extra')

        self.assertEqual(
            [['stop_process', 'n-cpu'],
             ['run_process', 'n-cpu', '%s/nova-pcpu-ext-compute '
              '--config-file %s' % (sysconfig.get_path('scripts'),
                                    self.cpu_conf), 'libvirt']],
            calls)
        self.assertTrue(os.access(os.path.join(
            sysconfig.get_path('scripts'), 'nova-pcpu-ext-compute'),
            os.X_OK))
        # The compute's own file: compute plugins on, the scheduler's not.
        self.assertEqual(['True', 'False', 'True', 'drop'],
                         self.check(self.cpu_conf))

    def test_test_config(self):
        self.phase('stack', 'test-config',
                   NOVA_PCPU_EXT_TEMPEST_STATUS_STORM_SECONDS='20',
                   NOVA_PCPU_EXT_TEMPEST_DESTRUCTIVE='True')
        tempest_conf = self.read(self.tempest_conf)
        self.assertIn('[service_available]\nnova_pcpu_ext = True',
                      tempest_conf)
        self.assertIn('status_storm_seconds = 20', tempest_conf)
        self.assertIn('destructive_tests = True', tempest_conf)

    def test_destructive_tests_off_by_default(self):
        self.phase('stack', 'test-config')
        self.assertIn('destructive_tests = False',
                      self.read(self.tempest_conf))

    def test_clean_undoes_post_config(self):
        self.phase('stack', 'post-config')
        calls = self.phase('clean')

        self.assertEqual(['nova.scheduler.filters.all_filters'],
                         self.available_filters())
        self.assertNotIn('request_filters', self.read(self.nova_conf))
        self.assertIn(['pip_uninstall', 'nova-pcpu-ext'], calls)
