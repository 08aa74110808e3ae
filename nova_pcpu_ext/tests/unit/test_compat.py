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

"""Feature detection against fakes of a changed Nova."""

import types

import fixtures
from nova.compute import provider_tree
from oslo_config import cfg

from nova_pcpu_ext import activation
from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import compat
from nova_pcpu_ext import compute
from nova_pcpu_ext import exception
from nova_pcpu_ext import scheduler
from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests.unit import base


class AppendedParameterTest(base.TestCase):
    """A parameter Nova appends and passes reaches Nova unchanged."""

    def test_resources_from_request_spec(self):
        calls = []

        def resources_from_request_spec(ctxt, spec_obj, host_manager,
                                        enable_pinning_translate=True,
                                        new_arg=None):
            calls.append((enable_pinning_translate, new_arg))
            return types.SimpleNamespace(cpu_pinning_requested=False)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.utils.resources_from_request_spec',
            resources_from_request_spec))
        scheduler.activate_plugins()
        from nova.scheduler import utils
        utils.resources_from_request_spec('ctxt', 'spec', 'hm',
                                          enable_pinning_translate=False,
                                          new_arg='keyword')
        utils.resources_from_request_spec('ctxt', 'spec', 'hm', True,
                                          'positional')
        self.assertEqual([(False, 'keyword'), (True, 'positional')], calls)

    def test_resource_tracker_mixin(self):
        calls = []

        class ChangedTracker(object):
            def __init__(self, host, driver, reportclient=None,
                         new_arg=None):
                self.driver = driver
                calls.append(('__init__', new_arg))

            def _copy_resources(self, compute_node, resources, initial=False,
                                new_arg=None):
                calls.append(('_copy_resources', new_arg))

            def _update_to_placement(self, context, compute_node, startup,
                                     new_arg=None):
                calls.append(('_update_to_placement', new_arg))

        tracker = activation.compose(
            ChangedTracker, [allocation_ratios.AllocationRatiosMixin])(
            'host', 'driver', new_arg=1)
        node = types.SimpleNamespace(hypervisor_hostname='node1')
        tracker._copy_resources(node, {'hypervisor_hostname': 'node1'},
                                False, 2)
        tracker._update_to_placement('ctxt', node, False, new_arg=3)

        self.assertEqual([('__init__', 1), ('_copy_resources', 2),
                          ('_update_to_placement', 3)], calls)
        self.assertEqual(4.0, node.cpu_allocation_ratio)

    def test_driver_view(self):
        calls = []

        class ChangedDriver(object):
            def update_provider_tree(self, tree, nodename, allocations=None,
                                     new_arg=None):
                calls.append((allocations, new_arg))

        tree = provider_tree.ProviderTree()
        tree.new_root('node1', 'uuid1')
        view = allocation_ratios._RatioEnforcingDriver(
            ChangedDriver(), lambda *args: None)
        view.update_provider_tree(tree, 'node1', None, 'positional')
        view.update_provider_tree(tree, 'node1', new_arg='keyword')
        self.assertEqual([(None, 'positional'), (None, 'keyword')], calls)

    def test_report_client_mixin(self):
        calls = {}

        def record(name):
            def method(self, *args, **kwargs):
                calls[name] = kwargs.get('new_arg')
            return method

        overrides = ['update_from_provider_tree',
                     'get_provider_tree_and_ensure_root',
                     'get_provider_subtree_and_ensure_root',
                     '_ensure_resource_provider',
                     '_clear_provider_cache_for_tree',
                     'invalidate_resource_provider',
                     'delete_resource_provider',
                     'set_inventory_for_provider',
                     'set_traits_for_provider',
                     'set_aggregates_for_provider',
                     'clear_provider_cache']
        changed = type('ChangedClient', (object,), {
            name: record(name) for name in overrides})
        client = activation.compose(
            changed, [serialized_client.SerializedReportClientMixin])()
        client._provider_tree = provider_tree.ProviderTree()
        node = types.SimpleNamespace(uuid='uuid1')

        for name in overrides:
            if name == 'update_from_provider_tree':
                args = ('ctxt', provider_tree.ProviderTree())
            elif name == 'delete_resource_provider':
                args = ('ctxt', node)
            elif name == 'clear_provider_cache':
                # The constructor's call, the one Nova's method makes.
                client._provider_tree = None
                args = (True,)
            elif name in ('_clear_provider_cache_for_tree',
                          'invalidate_resource_provider'):
                args = ('uuid1',)
            else:
                args = ('ctxt', 'uuid1')
            getattr(client, name)(*args, new_arg=name)

        self.assertEqual({name: name for name in overrides}, calls)

    def test_method_wrappers(self):
        calls = []

        def update(self, context, compute_node, startup, new_arg=None):
            calls.append(new_arg)

        def status(self, context, rp_uuid, enabled, new_arg=None):
            calls.append(new_arg)

        client = types.SimpleNamespace(
            _provider_tree=provider_tree.ProviderTree(),
            provider_locks=serialized_client.ProviderLocks())
        client._provider_tree.new_root('node1', 'uuid1')
        client.root_of = lambda uuid: uuid
        client.provider_lock = lambda uuid, operation, timeout=None: (
            client.provider_locks.hold([uuid], operation, timeout))
        owner = types.SimpleNamespace(reportclient=client)
        node = types.SimpleNamespace(uuid='uuid1',
                                     hypervisor_hostname='node1')

        serialized_client.serialize_update(update)(
            owner, 'ctxt', node, False, new_arg='update')
        serialized_client.serialize_status_update(status)(
            owner, 'ctxt', 'uuid1', True, 'status')
        self.assertEqual(['update', 'status'], calls)


class ChangedNovaTest(base.TestCase):
    """What signatures do not show is checked too."""

    def test_resource_request_without_cpu_pinning_requested(self):
        def __init__(self):
            self._rg_by_id = {}

        from nova.scheduler import utils
        self.useFixture(fixtures.MockPatchObject(
            utils.ResourceRequest, '__init__', new=__init__))
        error = self.assertRaises(exception.IncompatibleNova,
                                  scheduler.activate_plugins)
        self.assertIn('nova.scheduler.utils:ResourceRequest.__init__ no '
                      'longer uses self.cpu_pinning_requested', str(error))

    def test_missing_workaround_option(self):
        error = self.assertRaises(
            exception.IncompatibleNova, compat.require_option,
            cfg.ConfigOpts(), 'workarounds', 'disable_fallback_pcpu_query')
        self.assertIn('[workarounds] disable_fallback_pcpu_query is not a '
                      'Nova option', str(error))

    def test_workaround_option_present(self):
        compat.require_option(scheduler.CONF, 'workarounds',
                              'disable_fallback_pcpu_query')

    def _activate_on(self, version):
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.compat._nova_version', return_value=version))
        scheduler.activate_plugins()
        compute.activate_plugins()

    def test_newer_nova_warns_once_per_service(self):
        self._activate_on('35.0.0')
        self.assertEqual(2, self.logger.output.count(
            'nova-pcpu-ext runs on Nova 35.0.0, which it was not tested '
            'with: tested with Nova 29 (2024.1) to 34 (2026.2).'))

    def test_tested_nova_does_not_warn(self):
        self._activate_on('34.1.0')
        self.assertNotIn('not tested with', self.logger.output)
