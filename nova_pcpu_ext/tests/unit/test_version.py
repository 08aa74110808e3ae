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

"""The version an operator reads: ``--version`` and the activation line."""

from importlib import metadata
import io

import fixtures
from oslo_config import cfg
from oslo_upgradecheck import upgradecheck

from nova_pcpu_ext import activation
from nova_pcpu_ext.cmd import common
from nova_pcpu_ext.cmd import manage
from nova_pcpu_ext.cmd import status
from nova_pcpu_ext import compute
from nova_pcpu_ext import scheduler
from nova_pcpu_ext.tests.unit import base


class VersionTest(base.TestCase):

    def test_installed_distribution_version(self):
        self.assertEqual(metadata.version('nova-pcpu-ext'),
                         activation.version())
        self.assertEqual('nova-pcpu-ext ' + metadata.version('nova-pcpu-ext'),
                         common.version())

    def test_not_installed(self):
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.activation.metadata.version',
            side_effect=metadata.PackageNotFoundError('nova-pcpu-ext')))
        self.assertEqual('nova-pcpu-ext unknown', common.version())


class _ReleaseTestCase(base.TestCase):
    """As if nova-pcpu-ext 1.0.0 were installed."""

    def setUp(self):
        super().setUp()
        self.version = self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.activation.metadata.version',
            return_value='1.0.0')).mock


class VersionOptionTest(_ReleaseTestCase):
    """``--version`` of both commands: ``nova-pcpu-ext 1.0.0``, exit 0."""

    def setUp(self):
        super().setUp()
        self.stdout = self.useFixture(fixtures.MockPatch(
            'sys.stdout', new_callable=io.StringIO)).mock
        self.stderr = self.useFixture(fixtures.MockPatch(
            'sys.stderr', new_callable=io.StringIO)).mock
        # The commands register their options on Nova's CONF: a
        # configuration of the test's own instead.
        self.conf = cfg.ConfigOpts()
        for module in (manage, status):
            self.useFixture(fixtures.MockPatchObject(module, 'CONF',
                                                     self.conf))
        self.useFixture(fixtures.MockPatchObject(upgradecheck, 'CONF'))

    def run_main(self, main, *args):
        self.useFixture(fixtures.MockPatch(
            'sys.argv', [main.__module__] + list(args)))
        error = self.assertRaises(SystemExit, main)
        return error.code

    def test_status(self):
        self.assertEqual(0, self.run_main(status.main, '--version'))
        self.assertEqual('nova-pcpu-ext 1.0.0\n', self.stdout.getvalue())
        self.assertEqual('', self.stderr.getvalue())
        self.version.assert_called_with('nova-pcpu-ext')

    def test_manage(self):
        self.assertEqual(0, self.run_main(manage.main, '--version'))
        self.assertEqual('nova-pcpu-ext 1.0.0\n', self.stdout.getvalue())
        self.assertEqual('', self.stderr.getvalue())

    def test_with_other_options(self):
        self.assertEqual(0, self.run_main(
            status.main, '--config-file', '/nonexistent.conf', '--version'))
        self.assertEqual('nova-pcpu-ext 1.0.0\n', self.stdout.getvalue())

    def test_listed_by_help(self):
        for main in (status.main, manage.main):
            self.conf = cfg.ConfigOpts()
            for module in (manage, status):
                self.useFixture(fixtures.MockPatchObject(module, 'CONF',
                                                         self.conf))
            self.assertEqual(0, self.run_main(main, '--help'))
            self.assertIn('--version', self.stdout.getvalue())

    def test_parse_args_without_version_parses(self):
        conf = cfg.ConfigOpts()
        conf.register_cli_opt(cfg.StrOpt('name'))
        common.parse_args(conf, 'prog', ['--name', 'x'])
        self.assertEqual('x', conf.name)
        self.assertEqual('', self.stdout.getvalue())


class ActivationLineTest(_ReleaseTestCase):
    """The service log names the version once its activation has run."""

    def test_scheduler(self):
        scheduler.activate_plugins()
        scheduler.activate_plugins()
        self.assertEqual(1, self.logger.output.count(
            'nova-pcpu-ext 1.0.0: active in nova-scheduler\n'),
            self.logger.output)

    def test_scheduler_filters_entry(self):
        scheduler.activate()
        self.assertIn('nova-pcpu-ext 1.0.0: active in nova-scheduler',
                      self.logger.output)

    def test_compute(self):
        compute.activate_plugins()
        compute.activate_plugins()
        self.assertEqual(1, self.logger.output.count(
            'nova-pcpu-ext 1.0.0: active in nova-compute\n'),
            self.logger.output)
        # After the lines operators already look for.
        self.assertLess(
            self.logger.output.index('ResourceTracker replaced'),
            self.logger.output.index('nova-pcpu-ext 1.0.0: active'))

    def test_not_logged_when_activation_fails(self):
        self.flags(request_filters=['isolate'])
        self.assertRaises(SystemExit, scheduler.activate)
        self.assertNotIn('active in', self.logger.output)
