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

"""The configuration the deployers' recipes write, read as they read it.

Every option a recipe sets must exist in Nova's or the package's
oslo.config namespaces and take the value given, and every
``available_filters`` a recipe writes must keep Nova's own filters: the
deployers replace a multi-valued option whole.
"""

import configparser
import os
import shutil
import subprocess

import fixtures
from oslo_config import cfg
from stevedore import named
import testtools
import yaml

DEPLOY = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'deploy')
NAMESPACES = ('nova.conf', 'nova_pcpu_ext')
ALL_FILTERS = 'nova.scheduler.filters.all_filters'
ACTIVATE = 'nova_pcpu_ext.scheduler.activate'


def recipe(*path):
    return os.path.join(DEPLOY, *path)


def load_yaml(*path):
    with open(recipe(*path)) as snippet:
        return yaml.safe_load(snippet)


def known_options():
    """``{(group, option): opt}`` of Nova's and the package's namespaces."""
    manager = named.NamedExtensionManager(
        'oslo.config.opts', NAMESPACES, invoke_on_load=True)
    assert sorted(manager.names()) == sorted(NAMESPACES), manager.names()
    options = {}
    for extension in manager:
        for group, opts in extension.obj:
            group = getattr(group, 'name', group) or 'DEFAULT'
            options.update(((group, opt.name), opt) for opt in opts)
    return options


class _OptionsTestBase(testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.options = known_options()

    def assertValidOptions(self, sections):
        """``{section: {option: [value, ...]}}`` as Nova would load it."""
        for section, values_of in sections.items():
            for name, values in values_of.items():
                opt = self.options.get((section, name))
                self.assertIsNotNone(opt, '[%s] %s is no option of %s' % (
                    section, name, ' or '.join(NAMESPACES)))
                if not opt.multi:
                    self.assertEqual(1, len(values), '[%s] %s is set %d '
                                     'times' % (section, name, len(values)))
                for value in values:
                    opt.type(value)  # a ValueError names what is wrong

    def assertKeepsNovaFilters(self, sections):
        self.assertEqual(
            [ALL_FILTERS, ACTIVATE],
            sections['filter_scheduler']['available_filters'])


def config_template_values(value):
    """Lines of one option as openstack-ansible's config_template writes."""
    if isinstance(value, dict) and not any(value.values()):
        return list(value)  # the set syntax: one line per entry
    if isinstance(value, list):
        return [','.join(map(str, value))]
    return [str(value)]


def helm_values(value):
    """Lines of one option as helm-toolkit's to_oslo_conf writes."""
    if isinstance(value, dict):
        if value['type'] == 'multistring':
            return [str(v) for v in value['values']]
        return [','.join(map(str, value['values']))]  # csv
    return [str(value)]


class DeployerOptionsTest(_OptionsTestBase):

    def test_kolla_service_files(self):
        for service in ('nova-compute', 'nova-scheduler'):
            sections = {}
            cfg.ConfigParser(
                recipe('kolla', 'config', 'nova', service + '.conf'),
                sections).parse()
            self.assertIn('pcpu_ext', sections)
            self.assertValidOptions(sections)

    def test_openstack_ansible_user_variables(self):
        variables = load_yaml('openstack-ansible',
                              'user_variables_nova_pcpu_ext.yml')
        sections = {
            section: {name: config_template_values(value)
                      for name, value in options.items()}
            for section, options in
            variables['nova_nova_conf_overrides'].items()}

        self.assertValidOptions(sections)
        self.assertKeepsNovaFilters(sections)
        self.assertEqual(
            {'Service': {'ExecStart': '{{ nova_bin }}/nova-pcpu-ext-compute'}},
            variables['nova_compute_init_overrides'])
        self.assertEqual(1, len(variables['nova_user_pip_packages']))

    def test_openstack_helm_values(self):
        values = load_yaml('openstack-helm', 'values-nova-pcpu-ext.yaml')
        sections = {
            section: {name: helm_values(value)
                      for name, value in options.items()}
            for section, options in values['conf']['nova'].items()}

        self.assertValidOptions(sections)
        self.assertKeepsNovaFilters(sections)
        # Both services run the image with the package.
        tags = values['images']['tags']
        self.assertEqual(tags['nova_compute'], tags['nova_scheduler'])


# The units the distributions ship, as far as a drop-in depends on them.
UNITS = {
    'ubuntu': ('nova-compute.service', 'simple',
               '/etc/init.d/nova-compute systemd-start'),
    'rdo': ('openstack-nova-compute.service', 'notify',
            '/usr/bin/nova-compute'),
}
COMMAND = '/usr/local/bin/nova-pcpu-ext-compute'


def drop_in(distribution):
    unit = UNITS[distribution][0]
    return recipe('systemd', distribution, unit + '.d', 'nova-pcpu-ext.conf')


class SystemdDropInTest(testtools.TestCase):

    def test_exec_start_replaced(self):
        """The unit's command reset, then the extension's command."""
        for distribution in UNITS:
            # NOTE: systemd repeats keys, which configparser folds into
            # the last one: it checks the syntax, the lines the order.
            parser = configparser.ConfigParser(strict=False,
                                               interpolation=None)
            parser.optionxform = str
            with open(drop_in(distribution)) as unit:
                parser.read_file(unit)
            self.assertEqual(['Service'], parser.sections())
            with open(drop_in(distribution)) as unit:
                exec_starts = [line.strip().partition('=')[2]
                               for line in unit
                               if line.startswith('ExecStart')]
            self.assertEqual('', exec_starts[0], distribution)
            self.assertEqual(2, len(exec_starts), distribution)
            self.assertEqual(COMMAND, exec_starts[1].split()[0])

    def test_systemd_analyze_verify(self):
        """Each drop-in over a stand-in for the distribution's unit."""
        if not shutil.which('systemd-analyze'):
            self.skipTest('systemd-analyze is not installed')
        for distribution, (unit, service_type, command) in UNITS.items():
            root = self.useFixture(fixtures.TempDir()).path
            units = os.path.join(root, 'etc', 'systemd', 'system')
            os.makedirs(os.path.join(units, unit + '.d'))
            with open(os.path.join(units, unit), 'w') as stand_in:
                stand_in.write('[Unit]\nDefaultDependencies=no\n'
                               '[Service]\nType=%s\nExecStart=%s\n' % (
                                   service_type, command))
            shutil.copy(drop_in(distribution), os.path.join(units,
                                                            unit + '.d'))
            for program in (command.split()[0], COMMAND):
                executable(os.path.join(root, program.lstrip('/')))

            result = subprocess.run(
                ['systemd-analyze', 'verify', '--root', root, unit],
                capture_output=True, text=True, timeout=60)
            self.assertEqual(0, result.returncode, result.stderr)
            self.assertEqual('', result.stderr)


def executable(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as program:
        program.write('#!/bin/sh\n')
    os.chmod(path, 0o755)
