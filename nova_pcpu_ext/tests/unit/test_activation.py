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

import sys
import types

import fixtures
from nova.compute import manager
from nova.compute import resource_tracker
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils

from nova_pcpu_ext import activation
from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import compute
from nova_pcpu_ext import exception
from nova_pcpu_ext import scheduler
from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests.unit import base


class SchedulerActivationTest(base.TestCase):

    def test_filters_entry_returns_no_host_filters(self):
        self.assertEqual([], scheduler.activate())
        self.assertTrue(activation.is_patched(
            scheduler_utils, 'resources_from_request_spec'))

    def test_filters_entry_stops_with_one_line(self):
        self.flags(request_filters=['isolate'])
        error = self.assertRaises(SystemExit, scheduler.activate)
        self.assertEqual(
            'nova-pcpu-ext: [pcpu_ext] request_filters: unknown plugin '
            'isolate; installed in nova_pcpu_ext.request_filters: '
            'isolate_vcpu_fallback', error.code)
        self.assertEqual(1, self.logger.output.count(
            'unknown plugin isolate'))

    def test_idempotent_and_reversible(self):
        stock = scheduler_utils.resources_from_request_spec

        scheduler.activate_plugins()
        patched = scheduler_utils.resources_from_request_spec
        scheduler.activate_plugins()

        self.assertIsNot(stock, patched)
        self.assertIs(patched, scheduler_utils.resources_from_request_spec)
        self.assertIs(stock, patched.__wrapped__)
        activation.deactivate()
        self.assertIs(stock, scheduler_utils.resources_from_request_spec)

    def test_no_request_filters_changes_nothing(self):
        self.flags(request_filters=[])
        stock = scheduler_utils.resources_from_request_spec
        scheduler.activate_plugins()
        self.assertIs(stock, scheduler_utils.resources_from_request_spec)

    def test_missing_nova_symbol(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.utils.resources_from_request_spec',
            fixtures.MonkeyPatch.delete))
        error = self.assertRaises(exception.IncompatibleNova,
                                  scheduler.activate_plugins)
        self.assertIn('nova-pcpu-ext cannot hook Nova ', str(error))
        self.assertIn('nova.scheduler.utils:resources_from_request_spec is '
                      'missing', str(error))
        self.assertIn('Supported: Nova 29 (2024.1) to 34 (2026.2)',
                      str(error))

    def test_changed_signature(self):
        def resources_from_request_spec(ctxt, spec_obj, host_manager):
            pass
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.utils.resources_from_request_spec',
            resources_from_request_spec))
        error = self.assertRaises(exception.IncompatibleNova,
                                  scheduler.activate_plugins)
        self.assertIn('takes (ctxt, spec_obj, host_manager), expected '
                      '(ctxt, spec_obj, host_manager, ...) by position, '
                      'then enable_pinning_translate by keyword', str(error))
        self.assertFalse(activation.is_patched(
            scheduler_utils, 'resources_from_request_spec'))


class ComputeActivationTest(base.TestCase):

    def test_idempotent_and_reversible(self):
        stock_rt = resource_tracker.ResourceTracker
        stock_client = report.SchedulerReportClient
        stock_status = manager.ComputeVirtAPI.update_compute_provider_status

        compute.activate_plugins()
        composed = resource_tracker.ResourceTracker
        status = manager.ComputeVirtAPI.update_compute_provider_status
        compute.activate_plugins()

        self.assertIs(composed, resource_tracker.ResourceTracker)
        self.assertIs(allocation_ratios.AllocationRatiosMixin,
                      composed.__mro__[1])
        self.assertTrue(issubclass(composed, stock_rt))
        self.assertEqual(
            serialized_client.SerializedReportClientMixin,
            report.SchedulerReportClient.__mro__[1])
        self.assertIs(stock_status, status.__wrapped__)
        self.assertIs(status,
                      manager.ComputeVirtAPI.update_compute_provider_status)

        activation.deactivate()
        self.assertIs(stock_rt, resource_tracker.ResourceTracker)
        self.assertIs(stock_client, report.SchedulerReportClient)
        self.assertIs(stock_status,
                      manager.ComputeVirtAPI.update_compute_provider_status)

    def test_report_client_off_wraps_nothing(self):
        self.flags(report_client='')
        stock_status = manager.ComputeVirtAPI.update_compute_provider_status
        compute.activate_plugins()
        self.assertIs(stock_status,
                      manager.ComputeVirtAPI.update_compute_provider_status)

    def test_method_missing_leaves_nova_untouched(self):
        stock = resource_tracker.ResourceTracker
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.resource_tracker.ResourceTracker.'
            '_update_to_placement', fixtures.MonkeyPatch.delete))
        error = self.assertRaises(exception.IncompatibleNova,
                                  compute.activate_plugins)
        self.assertIn('ResourceTracker._update_to_placement is missing',
                      str(error))
        self.assertIs(stock, resource_tracker.ResourceTracker)

    def test_unknown_plugin(self):
        self.flags(resource_tracker_mixins=['allocation_ratio'])
        error = self.assertRaises(exception.PluginNotFound,
                                  compute.activate_plugins)
        self.assertIn('installed in nova_pcpu_ext.resource_tracker: '
                      'allocation_ratios', str(error))


class RunNovaServiceTest(base.TestCase):
    """The console scripts activate right after Nova parses nova.conf."""

    def _nova_cmd(self, calls):
        config = types.SimpleNamespace(
            CONF=self.conf.conf,
            parse_args=lambda argv: calls.append('parse_args'))

        def main():
            config.parse_args(['nova-compute'])
            calls.append('main')

        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.activation.logging.setup',
            side_effect=lambda conf, product: calls.append(
                'logging setup of %s' % product)))
        return types.SimpleNamespace(__name__='nova.cmd.compute',
                                     config=config, main=main)

    def test_activates_after_parse_and_logging_before_service(self):
        calls = []
        activation.run_nova_service(self._nova_cmd(calls),
                                    lambda: calls.append('activate'))
        self.assertEqual(['parse_args', 'logging setup of nova', 'activate',
                          'main'], calls)

    def test_parses_under_nova_program_name(self):
        self.useFixture(fixtures.MonkeyPatch(
            'sys.argv', ['/venv/bin/nova-pcpu-ext-compute', '--debug']))
        nova_cmd = self._nova_cmd([])
        parsing, running = [], []
        nova_cmd.config.parse_args = lambda argv: parsing.append(
            list(sys.argv))

        def main():
            nova_cmd.config.parse_args(sys.argv)
            running.append(list(sys.argv))

        nova_cmd.main = main
        activation.run_nova_service(nova_cmd, lambda: None)

        self.assertEqual([['/venv/bin/nova-compute', '--debug']], parsing)
        # The rest of the service runs as the script it is.
        self.assertEqual([['/venv/bin/nova-pcpu-ext-compute', '--debug']],
                         running)
        self.assertEqual(['/venv/bin/nova-pcpu-ext-compute', '--debug'],
                         sys.argv)

    def test_activation_error_exits_with_message(self):
        def activate():
            raise exception.InvalidConfig('[DEFAULT] x = nan is bad')

        error = self.assertRaises(SystemExit, activation.run_nova_service,
                                  self._nova_cmd([]), activate)
        self.assertEqual('nova-pcpu-ext: [DEFAULT] x = nan is bad',
                         error.code)
        self.assertEqual(1, self.logger.output.count(
            '[DEFAULT] x = nan is bad'))


class MutantsTest(base.TestCase):
    """Behaviour only mutation testing showed untested."""

    def test_active_logged_once_per_service(self):
        # Kills AddNot 0 (logging from the second activation on).
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.activation.version', return_value='1.0.0'))
        for service in ('scheduler', 'scheduler', 'compute'):
            activation.mark_active(service)

        self.assertEqual(
            ['nova-pcpu-ext 1.0.0: active in nova-scheduler',
             'nova-pcpu-ext 1.0.0: active in nova-compute'],
            self.logger.output.splitlines())

    def test_version_of_a_source_tree_is_unknown(self):
        # Kills ExceptionReplacer 0 (a traceback where nothing says the
        # version).
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.activation.metadata.version',
            side_effect=activation.metadata.PackageNotFoundError(
                activation.DISTRIBUTION)))

        self.assertEqual('unknown', activation.version())
