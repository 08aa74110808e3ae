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

"""The grenade plugin's scripts against scratch grenade and devstack files.

grenade itself is not available here: see :mod:`nova_pcpu_ext.tests.grenade`.
The resource phases against a cloud run in the loopback cloud.
"""

import sysconfig
import textwrap

from nova_pcpu_ext.tests import devstack
from nova_pcpu_ext.tests.functional import test_devstack_plugin
from nova_pcpu_ext.tests import grenade

# nova.conf as the base side's devstack plugin left it.
BASE_NOVA_CONF = textwrap.dedent('''
    [DEFAULT]
    debug = True

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_pcpu_ext.scheduler.activate

    [pcpu_ext]
    isolate_fallback_mode = drop
''')


class GrenadePluginTest(test_devstack_plugin.ScratchFilesTestCase):

    def setUp(self):
        super().setUp()
        self.nova_conf = self.write('nova.conf', BASE_NOVA_CONF)
        self.cpu_conf = self.write('nova-cpu.conf', BASE_NOVA_CONF)

    def test_upgrade_installs_target_and_restarts_services(self):
        calls = grenade.run_upgrade_script(
            'upgrade.sh', self.tmp, NOVA_CONF=self.nova_conf,
            NOVA_CPU_CONF=self.cpu_conf,
            NOVA_PCPU_EXT_ISOLATE_FALLBACK_MODE='legacy_only')

        bin_dir = sysconfig.get_path('scripts')
        self.assertEqual(
            [['setup_develop', devstack.TOP],
             ['stop_process', 'n-sch'],
             ['run_process', 'n-sch', '%s/nova-scheduler --config-file %s'
              % (bin_dir, self.nova_conf)],
             ['stop_process', 'n-cpu'],
             ['run_process', 'n-cpu', '%s/nova-pcpu-ext-compute '
              '--config-file %s' % (bin_dir, self.cpu_conf), 'libvirt'],
             ['ensure_services_started', 'n-sch', 'n-cpu']],
            calls)
        for conf in (self.nova_conf, self.cpu_conf):
            self.assertIn('isolate_fallback_mode = legacy_only',
                          self.read(conf))
        # The base side's entry is kept, not added twice.
        self.assertEqual(1, self.read(self.nova_conf).count(
            'nova_pcpu_ext.scheduler.activate'))

    def test_shutdown_stops_compute(self):
        self.assertEqual(
            [['stop_process', 'n-cpu'],
             ['ensure_services_stopped', 'nova-pcpu-ext-compute']],
            grenade.run_upgrade_script('shutdown.sh', self.tmp))

    def test_settings_register_project_and_enable_plugin(self):
        url = 'https://git.example.org/nova-pcpu-ext'
        calls = grenade.load_settings(self.tmp, url, 'master',
                                      BASE_DEVSTACK_BRANCH='stable/2025.1')
        self.assertEqual(
            [['register_project_for_upgrade', 'nova-pcpu-ext'],
             ['devstack_localrc', 'base', 'enable_plugin', 'nova-pcpu-ext',
              url, 'stable/2025.1'],
             ['devstack_localrc', 'target', 'enable_plugin', 'nova-pcpu-ext',
              url, 'master']],
            calls)

        calls = grenade.load_settings(self.tmp, url, 'master',
                                      BASE_DEVSTACK_BRANCH='stable/2025.1',
                                      NOVA_PCPU_EXT_GRENADE_BASE_REF='1.0.0')
        self.assertEqual(['devstack_localrc', 'base', 'enable_plugin',
                          'nova-pcpu-ext', url, '1.0.0'], calls[1])

    def test_resources_create_needs_an_image(self):
        error = self.assertRaises(grenade.ScriptFailed,
                                  grenade.run_resources, 'create', self.tmp,
                                  {})
        self.assertIn(
            '\nSet NOVA_PCPU_EXT_GRENADE_IMAGE to an image name or ID\n',
            str(error))

    def test_resources_phase_without_resources(self):
        # grenade calls every project's early_create.
        self.assertEqual(
            'nova-pcpu-ext: nothing to do in resource phase early_create\n',
            grenade.run_resources('early_create', self.tmp, {}))
