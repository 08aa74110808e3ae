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

"""The tempest plugin, as a tempest workspace sees it."""

import os
import subprocess
import sysconfig

import fixtures
import testtools

BIN = sysconfig.get_path('scripts')
TESTS = 'nova_pcpu_ext.tests.tempest.api.test_pcpu_ext.'


class TempestPluginTest(testtools.TestCase):

    def run_command(self, *args, cwd=None, check=True):
        env = dict(os.environ, PATH=BIN + os.pathsep + os.environ['PATH'])
        return subprocess.run(args, capture_output=True, text=True,
                              timeout=300, cwd=cwd, env=env, check=check,
                              stdin=subprocess.DEVNULL).stdout

    def test_listed_by_tempest(self):
        self.assertIn('nova_pcpu_ext.tests.tempest.plugin:'
                      'NovaPcpuExtTempestPlugin',
                      self.run_command('tempest', 'list-plugins'))

    def test_discovered_and_skipped_from_a_workspace(self):
        scratch = self.useFixture(fixtures.TempDir()).path
        workspace = os.path.join(scratch, 'cloud')
        # Register the workspace in a scratch list, not the user's.
        self.run_command('tempest', 'init', '--workspace-path',
                         os.path.join(scratch, 'workspace.yaml'), workspace)

        listed = self.run_command('stestr', 'list', 'nova_pcpu_ext',
                                  cwd=workspace).split()

        self.assertEqual(7, len(listed), listed)
        self.assertIn(
            TESTS + 'AllocationRatiosTest.test_inventory_ratios'
            '[id-5a2d8c14-7e39-4f6b-a0c5-3e9b1d7f2c48,stock-fails]', listed)
        for test in listed:
            self.assertIn('[id-', test)
        # Not enabled in the default tempest.conf: every class skips
        # from configuration alone, without reaching a cloud (stestr exits
        # 1 when nothing passed, so its summary is what counts).
        summary = self.run_command('stestr', 'run', 'nova_pcpu_ext',
                                   cwd=workspace, check=False)
        self.assertIn(' - Passed: 0\n - Skipped: 5\n', summary)
        self.assertIn(' - Failed: 0\n', summary)
