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

from unittest import mock

from nova.compute import provider_tree

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import exception
from nova_pcpu_ext import isolate_filter
from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext import plugins
from nova_pcpu_ext.tests.unit import base


class LoadTest(base.TestCase):

    def test_shipped_plugins_load_by_default(self):
        filters = plugins.load_request_filters()
        self.assertEqual([isolate_filter.IsolateVcpuFallbackFilter],
                         [type(f) for f in filters])
        self.assertEqual([allocation_ratios.AllocationRatiosMixin,
                          pcpu_trait.PcpuTraitMixin],
                         plugins.load_resource_tracker_mixins())

    def test_empty_list_loads_nothing(self):
        self.flags(request_filters=[], resource_tracker_mixins=[],
                   report_client='')
        self.assertEqual([], plugins.load_request_filters())
        self.assertEqual([], plugins.load_resource_tracker_mixins())
        self.assertEqual([], plugins.load_report_client_mixins())

    def test_unknown_name_names_option_and_installed_plugins(self):
        self.flags(request_filters=['isolate_vcpu_fallback', 'typo'])
        error = self.assertRaises(exception.PluginNotFound,
                                  plugins.load_request_filters)
        self.assertEqual(
            '[pcpu_ext] request_filters: unknown plugin typo; installed in '
            'nova_pcpu_ext.request_filters: isolate_vcpu_fallback',
            str(error))

    def test_unknown_report_client(self):
        self.flags(report_client='nope')
        error = self.assertRaises(exception.PluginNotFound,
                                  plugins.load_report_client_mixins)
        self.assertIn('[pcpu_ext] report_client: unknown plugin nope',
                      str(error))

    def test_broken_plugin(self):
        self.useFixture(base.EntryPoints(plugins.REQUEST_FILTERS, {
            'broken': 'nova_pcpu_ext.no_such_module:Filter'}))
        self.flags(request_filters=['broken'])
        error = self.assertRaises(exception.PluginLoadFailed,
                                  plugins.load_request_filters)
        self.assertIn('[pcpu_ext] request_filters: plugin broken '
                      '(nova_pcpu_ext.no_such_module:Filter) cannot be '
                      'loaded: No module named', str(error))

    def test_plugin_of_the_wrong_kind(self):
        self.useFixture(base.EntryPoints(plugins.REQUEST_FILTERS, {
            'wrong': 'nova_pcpu_ext.plugins:ResourceTrackerMixin'}))
        self.flags(request_filters=['wrong'])
        error = self.assertRaises(exception.PluginLoadFailed,
                                  plugins.load_request_filters)
        self.assertIn('is not a nova_pcpu_ext.plugins.RequestFilter '
                      'subclass', str(error))

    def test_order_is_kept(self):
        self.useFixture(base.EntryPoints(plugins.RESOURCE_TRACKER, {
            'a': 'nova_pcpu_ext.tests.unit.test_plugins:MixinA',
            'b': 'nova_pcpu_ext.tests.unit.test_plugins:MixinB'}))
        self.flags(resource_tracker_mixins=['b', 'a'])
        self.assertEqual([MixinB, MixinA],
                         plugins.load_resource_tracker_mixins())

    def test_validate_config_runs_at_load(self):
        self.useFixture(base.EntryPoints(plugins.RESOURCE_TRACKER, {
            'strict': 'nova_pcpu_ext.tests.unit.test_plugins:StrictMixin'}))
        self.flags(resource_tracker_mixins=['strict'])
        self.assertRaises(exception.InvalidConfig,
                          plugins.load_resource_tracker_mixins)


class MixinA(plugins.ResourceTrackerMixin):
    pass


class MixinB(plugins.ResourceTrackerMixin):
    pass


class StrictMixin(plugins.ResourceTrackerMixin):

    @classmethod
    def validate_config(cls, conf):
        raise exception.InvalidConfig('no')


class DriverViewTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = provider_tree.ProviderTree()
        self.tree.new_root('node1', 'uuid1')
        self.driver = mock.Mock(spec=['update_provider_tree', 'capabilities'])
        self.edits = []

        def edit(update, tree, nodename):
            self.edits.append(('before', tree, nodename))
            update()
            self.edits.append(('after', tree, nodename))

        self.view = plugins.DriverView(self.driver, edit)

    def test_forwards_exactly_what_it_was_given(self):
        self.view.update_provider_tree(self.tree, 'node1')
        self.driver.update_provider_tree.assert_called_once_with(
            self.tree, 'node1')

        self.view.update_provider_tree(self.tree, 'node1', allocations={})
        self.driver.update_provider_tree.assert_called_with(
            self.tree, 'node1', allocations={})
        self.assertEqual([('before', self.tree, 'node1'),
                          ('after', self.tree, 'node1')] * 2, self.edits)

    def test_everything_else_is_the_driver(self):
        self.assertIs(self.driver.capabilities, self.view.capabilities)
