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

"""The tempest plugin's class skips, from a tempest configuration that
holds tempest's options and the plugin's, with their defaults."""

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
from tempest import config
import testtools

from nova_pcpu_ext.tests.tempest.api import test_pcpu_ext
from nova_pcpu_ext.tests.tempest import plugin

#: The classes that change the cloud beyond their own servers and flavors.
DESTRUCTIVE = {'ComputeStatusTraitTest', 'ComputeStatusStormTest'}


class TempestConf:
    """A configuration as ``tempest.config.CONF`` shows it.

    Each group is an attribute, ``-`` in its name read as ``_``.
    """

    def __init__(self, conf):
        self._conf = conf

    def __getattr__(self, name):
        try:
            return self._conf[name]
        except cfg.NoSuchOptError:
            return self._conf[name.replace('_', '-')]


def test_classes():
    return {name: cls for name, cls in vars(test_pcpu_ext).items()
            if isinstance(cls, type) and
            issubclass(cls, test_pcpu_ext._PcpuExtTest) and
            not name.startswith('_')}


class TestDestructiveTests(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # A configuration of its own: tempest's global one is never read.
        self.conf = cfg.ConfigOpts()
        # What tempest's register_opts() does: its own options, then each
        # plugin's.
        for group, opts in config._opts:
            config.register_opt_group(self.conf, group, opts)
        plugin.NovaPcpuExtTempestPlugin().register_opts(self.conf)
        self.conf([], default_config_files=[])
        # Overrides end with the test (the option groups are shared).
        self.flags = self.useFixture(config_fixture.Config(self.conf)).config
        self.useFixture(fixtures.MockPatchObject(
            config.CONF, '_config', TempestConf(self.conf)))
        # Every other precondition of the classes met.
        self.flags(group='service_available', nova_pcpu_ext=True)
        self.flags(group='compute', max_microversion='latest')
        self.flags(group='placement', max_microversion='latest')
        self.flags(group='pcpu_ext', libvirt_host='compute-1')

    def skip_reason(self, cls):
        """The reason ``cls`` skips for, or None."""
        try:
            cls.skip_checks()
        except cls.skipException as skip:
            return str(skip)
        return None

    def test_classes_are_the_expected_ones(self):
        # A new class joins DESTRUCTIVE or is checked as safe below.
        self.assertLessEqual(DESTRUCTIVE, set(test_classes()))
        self.assertGreater(len(test_classes()), len(DESTRUCTIVE))

    def test_off_by_default(self):
        self.assertFalse(self.conf.pcpu_ext.destructive_tests)

    def test_destructive_classes_skip_by_default(self):
        for name, cls in test_classes().items():
            reason = self.skip_reason(cls)
            if name in DESTRUCTIVE:
                self.assertIsNotNone(reason, name)
                self.assertIn('[pcpu_ext] destructive_tests is False',
                              reason)
                self.assertIn(cls.changes, reason)
            else:
                self.assertIsNone(reason, name)

    def test_all_run_when_enabled(self):
        self.flags(group='pcpu_ext', destructive_tests=True)
        for name, cls in test_classes().items():
            self.assertIsNone(self.skip_reason(cls), name)

    def test_nothing_runs_without_the_extension(self):
        self.flags(group='service_available', nova_pcpu_ext=False)
        self.flags(group='pcpu_ext', destructive_tests=True)
        for name, cls in test_classes().items():
            self.assertEqual('nova-pcpu-ext is not enabled',
                             self.skip_reason(cls), name)
