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

import ast
import collections
import os
import re
import types

import fixtures
import nova
from nova.compute import provider_tree
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils
from oslo_config import cfg

from nova_pcpu_ext import activation
from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import compat
from nova_pcpu_ext import compute
from nova_pcpu_ext import exception
from nova_pcpu_ext import isolate_filter
from nova_pcpu_ext import plugins
from nova_pcpu_ext import scheduler
from nova_pcpu_ext import serialized_client
from nova_pcpu_ext.tests import future_nova
from nova_pcpu_ext.tests.unit import base

objects.register_all()

#: Where the tests put a fake Nova function for compat.require to find.
FAKE = __name__ + ':nova_function'


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
        # As Nova's callers pass enable_pinning_translate: by keyword, so
        # what follows it comes by keyword too.
        utils.resources_from_request_spec('ctxt', 'spec', 'hm',
                                          enable_pinning_translate=False,
                                          new_arg='keyword')
        utils.resources_from_request_spec('ctxt', 'spec', 'hm', True,
                                          new_arg='after positional')
        self.assertEqual([(False, 'keyword'), (True, 'after positional')],
                         calls)

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
        node = objects.ComputeNode(hypervisor_hostname='node1')
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
        view = plugins.DriverView(
            ChangedDriver(), lambda update, tree, nodename: update())
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

    def test_each_tested_major_and_no_other(self):
        version = self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.compat._nova_version')).mock
        for major in range(27, 37):
            version.return_value = '%d.1.0' % major
            compat.warn_if_untested()

        self.assertEqual(
            ['27.1.0', '28.1.0', '35.1.0', '36.1.0'],
            re.findall(r'runs on Nova (\S+), which it was not tested',
                       self.logger.output))

    def test_a_nova_that_cannot_say_its_version(self):
        self.useFixture(fixtures.MockPatch(
            'nova.version.version_string', side_effect=RuntimeError))

        compat.warn_if_untested()

        self.assertIn('runs on Nova unknown, which it was not tested',
                      self.logger.output)

    def test_a_module_nova_no_longer_has(self):
        error = self.assertRaises(exception.IncompatibleNova, compat.require,
                                  'nova.scheduler.no_such_module:function')
        self.assertIn('nova.scheduler.no_such_module:function is missing',
                      str(error))


class ParameterKindTest(base.TestCase):
    """compat.require compares how parameters are passed, not only names."""

    def require(self, function, params):
        self.useFixture(fixtures.MonkeyPatch(FAKE.replace(':', '.'),
                                             function))
        return compat.require(FAKE, params)

    def assertStops(self, function, params, message):
        error = self.assertRaises(exception.IncompatibleNova, self.require,
                                  function, params)
        self.assertIn('%s %s.' % (FAKE, message), str(error))
        self.assertNotIn('\n', str(error))

    def test_positional_parameter_made_keyword_only_stops(self):
        def set_inventory_for_provider(self, context, *, rp_uuid, inv_data):
            pass
        self.assertStops(set_inventory_for_provider,
                         ('self', 'context', 'rp_uuid'),
                         'takes (self, context, *, rp_uuid, inv_data), '
                         'expected (self, context, rp_uuid, ...)')

    def test_keyword_parameter_may_be_keyword_only(self):
        params = ('self', 'context', 'uuid', '*', 'name',
                  'parent_provider_uuid')

        def positional(self, context, uuid, name=None,
                       parent_provider_uuid=None, new=None):
            pass

        def keyword_only(self, context, uuid, *, new=None,
                         parent_provider_uuid=None, name=None):
            pass

        def one_of_each(self, context, uuid, name=None, *,
                        parent_provider_uuid=None):
            pass

        for function in (positional, keyword_only, one_of_each):
            self.assertIs(function, self.require(function, params))

    def test_parameter_inserted_before_keyword_one_stops(self):
        def function(ctxt, spec_obj, host_manager, new,
                     enable_pinning_translate=True):
            pass
        self.assertStops(
            function, ('ctxt', 'spec_obj', 'host_manager', '*',
                       'enable_pinning_translate'),
            'takes (ctxt, spec_obj, host_manager, new, '
            'enable_pinning_translate), expected (ctxt, spec_obj, '
            'host_manager, ...) by position, then enable_pinning_translate '
            'by keyword')

    def test_keyword_parameters_swapped_stop(self):
        # A caller passing them by position would fill the wrong one.
        def function(self, name=None, uuid=None):
            pass
        self.assertStops(function, ('self', '*', 'uuid', 'name'),
                         'takes (self, name, uuid), expected (self, ...) by '
                         'position, then uuid, name by keyword')

    def test_keyword_parameter_made_positional_only_stops(self):
        def function(self, init=False, /):
            pass
        self.assertStops(function, ('self', '*', 'init'),
                         'takes (self, init, /), expected (self, ...) by '
                         'position, then init by keyword')

    def test_keyword_parameter_removed_stops(self):
        def function(self, **kwargs):
            pass
        self.assertStops(function, ('self', '*', 'init'),
                         'takes (self, **kwargs), expected (self, ...) by '
                         'position, then init by keyword')

    def test_catch_all_in_place_of_parameter_stops(self):
        def function(self, *args, **kwargs):
            pass
        self.assertStops(function, ('self', 'context'),
                         'takes (self, *args, **kwargs), expected (self, '
                         'context, ...)')

    def test_names_only_as_before(self):
        def function(self, context, rp_uuid, inv_data, new=None):
            pass
        self.assertIs(function, self.require(
            function, ['self', 'context', 'rp_uuid']))
        self.assertStops(function, ('self', 'ctxt'),
                         'takes (self, context, rp_uuid, inv_data, new), '
                         'expected (self, ctxt, ...)')

        def renamed(self, ctxt, rp_uuid):
            pass
        self.assertStops(renamed, ('self', 'context'),
                         'takes (self, ctxt, rp_uuid), expected (self, '
                         'context, ...)')

    def test_positional_only_parameters_described(self):
        def function(self, context, rp_uuid, inv_data, /, new=None, *,
                     force=False):
            pass
        self.assertStops(function, ('self', 'ctxt'),
                         'takes (self, context, rp_uuid, inv_data, /, new, '
                         '*, force), expected (self, ctxt, ...)')


class KeywordOnlyNovaTest(base.TestCase):
    """A parameter made keyword-only: it works, or one line at startup."""

    def test_scheduler_wrapper_passes_keyword_as_nova_does(self):
        calls = []

        def resources_from_request_spec(ctxt, spec_obj, host_manager, *,
                                        enable_pinning_translate=True):
            calls.append(enable_pinning_translate)
            return types.SimpleNamespace(cpu_pinning_requested=False)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.utils.resources_from_request_spec',
            resources_from_request_spec))
        scheduler.activate_plugins()
        scheduler_utils.resources_from_request_spec(
            'ctxt', 'spec', 'hm', enable_pinning_translate=False)
        scheduler_utils.resources_from_request_spec('ctxt', 'spec', 'hm')
        self.assertEqual([False, True], calls)

    def test_report_client_wrappers_pass_keywords_as_nova_does(self):
        calls = []

        class ChangedClient(object):
            _provider_tree = None

            def _ensure_resource_provider(self, context, uuid, *, name=None,
                                          parent_provider_uuid=None):
                calls.append((name, parent_provider_uuid))

            def clear_provider_cache(self, *, init=False):
                calls.append(init)

        client = activation.compose(
            ChangedClient, [serialized_client.SerializedReportClientMixin])()
        client.clear_provider_cache(init=True)
        client._provider_tree = provider_tree.ProviderTree()
        # As Nova's get_provider_tree_and_ensure_root calls it.
        client._ensure_resource_provider('ctxt', 'uuid1', name='node1',
                                         parent_provider_uuid=None)
        self.assertEqual([True, ('node1', None)], calls)

    def test_compute_stops_at_startup_with_one_line(self):
        def set_inventory_for_provider(self, context, *, rp_uuid, inv_data):
            pass

        self.useFixture(fixtures.MockPatchObject(
            report.SchedulerReportClient, 'set_inventory_for_provider',
            new=set_inventory_for_provider))
        error = self.assertRaises(SystemExit, activation.exit_on_error,
                                  compute.activate_plugins)
        self.assertIn('SchedulerReportClient.set_inventory_for_provider '
                      'takes (self, context, *, rp_uuid, inv_data), '
                      'expected (self, context, rp_uuid, ...).', error.code)
        self.assertNotIn('\n', error.code)
        self.assertFalse(activation.is_active('compute'))


def _declared():
    """``(symbol, params)`` of every Nova callable the plugins check."""
    declared = list(scheduler.NOVA_SYMBOLS) + list(compute.NOVA_SYMBOLS)
    for plugin in (isolate_filter.IsolateVcpuFallbackFilter,
                   allocation_ratios.AllocationRatiosMixin,
                   serialized_client.SerializedReportClientMixin):
        declared += plugin.nova_symbols
    return [(symbol, tuple(params)) for symbol, params in declared if params]


def _callee(symbol):
    """The name Nova's code calls a symbol by."""
    path = symbol.partition(':')[2].split('.')
    return path[-2] if path[-1] == '__init__' else path[-1]


def _nova_keywords(callees):
    """``{callee: {keyword: 'file:line'}}`` of calls in Nova's own code."""
    root = os.path.dirname(nova.__file__)
    found = collections.defaultdict(dict)
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [name for name in subdirectories
                             if name != 'tests']
        for path in (os.path.join(directory, name) for name in files
                     if name.endswith('.py')):
            with open(path) as module:
                source = module.read()
            if not any(callee + '(' in source for callee in callees):
                continue
            for call in ast.walk(ast.parse(source)):
                if not isinstance(call, ast.Call):
                    continue
                callee = getattr(call.func, 'attr',
                                 getattr(call.func, 'id', None))
                for keyword in call.keywords if callee in callees else ():
                    found[callee].setdefault(keyword.arg, '%s:%d' % (
                        os.path.relpath(path, root), call.lineno))
    return found


class NovaCallersTest(base.TestCase):
    """The installed Nova's callers against what the plugins declare."""

    def test_what_nova_passes_by_keyword_is_passed_by_keyword(self):
        declared = _declared()
        keywords = _nova_keywords({_callee(symbol)
                                   for symbol, _params in declared})
        self.assertIn('enable_pinning_translate',
                      keywords['resources_from_request_spec'])
        wrong = []
        for symbol, params in declared:
            positional = params[:params.index('*')] if '*' in params else (
                params)
            wrong += ['%s %s (nova/%s)' % (
                symbol, name, keywords[_callee(symbol)][name])
                for name in positional if name in keywords[_callee(symbol)]]
        self.assertEqual([], wrong, 'Nova passes these by keyword: list '
                         "them after '*' and pass them on by keyword")


def _select_destinations(tree):
    manager_class = next(node for node in tree.body if isinstance(
        node, ast.ClassDef) and node.name == 'SchedulerManager')
    return next(node for node in manager_class.body if isinstance(
        node, ast.FunctionDef) and node.name == 'select_destinations')


class FallbackQueryTest(base.TestCase):
    """How select_destinations makes the fallback query, from its source.

    Each test changes the source of the installed Nova's
    ``nova.scheduler.manager`` as a future Nova could.
    """

    def setUp(self):
        super().setUp()
        self.tree = compat.source_tree(scheduler.MANAGER)

    def assertStops(self, tree, message):
        error = self.assertRaises(exception.IncompatibleNova,
                                  scheduler.makes_fallback_query, tree)
        self.assertIn('%s %s' % (scheduler.SELECT_DESTINATIONS, message),
                      str(error))

    def test_installed_nova_makes_it_through_the_module(self):
        self.assertTrue(scheduler.makes_fallback_query(self.tree))

    def test_without_fallback_query(self):
        self.assertFalse(scheduler.makes_fallback_query(
            future_nova.without_fallback_query(self.tree)))

    def test_module_imported_under_another_name(self):
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and any(
                    alias.name == 'utils' for alias in node.names):
                node.names = [ast.alias('utils', 'scheduler_utils')]
            elif isinstance(node, ast.Name) and node.id == 'utils':
                node.id = 'scheduler_utils'
        self.assertTrue(scheduler.makes_fallback_query(self.tree))

    def test_function_imported_from_the_module_stops(self):
        for node in ast.walk(_select_destinations(self.tree)):
            if isinstance(node, ast.Call) and getattr(
                    node.func, 'attr', None) == 'resources_from_request_spec':
                node.func = ast.Name('resources_from_request_spec',
                                     ast.Load(), lineno=node.lineno)
        error = self.assertRaises(exception.IncompatibleNova,
                                  scheduler.makes_fallback_query, self.tree)
        self.assertRegex(str(error), (
            r'select_destinations calls nova\.scheduler\.utils\.'
            r'resources_from_request_spec as resources_from_request_spec '
            r'\(line \d+\), not through its module\.'))

    def test_fallback_query_elsewhere_stops(self):
        tree = future_nova.without_fallback_query(self.tree)
        tree.body.append(ast.parse(
            'def fallback(resources):\n'
            '    return resources.cpu_pinning_requested\n').body[0])
        self.assertStops(tree, 'no longer reads cpu_pinning_requested, '
                         'disable_fallback_pcpu_query.')

    def test_workaround_no_longer_read_stops(self):
        function = _select_destinations(self.tree)
        for node in ast.walk(function):
            for name, value in ast.iter_fields(node):
                if (isinstance(value, ast.Attribute) and
                        value.attr == 'disable_fallback_pcpu_query'):
                    setattr(node, name, ast.Constant(False))
        self.assertStops(self.tree,
                         'no longer reads disable_fallback_pcpu_query.')

    def test_no_call_left_stops(self):
        _select_destinations(self.tree).body = ast.parse(
            'if resources.cpu_pinning_requested:\n    pass\n').body
        self.assertStops(self.tree, 'no longer calls nova.scheduler.utils.'
                         'resources_from_request_spec.')

    def test_source_not_installed_checks_the_rest(self):
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.compat.inspect.getsource', side_effect=OSError))
        scheduler.activate_plugins()
        self.assertTrue(activation.is_patched(
            scheduler_utils, 'resources_from_request_spec'))
        self.assertIn('The source of nova.scheduler.manager is not '
                      'installed', self.logger.output)


class ModuleReferencesTest(base.TestCase):
    """The names by which a module's imports reach nova.scheduler.utils."""

    def references(self, source):
        return compat._references(ast.parse(source), 'nova.scheduler.utils')

    def test_each_form_of_import(self):
        self.assertEqual(
            {'utils', 'scheduler_utils', 'nova.scheduler.utils', 'su'},
            self.references('from nova.scheduler import utils\n'
                            'from nova.scheduler import utils as '
                            'scheduler_utils\n'
                            'import nova.scheduler.utils\n'
                            'import nova.scheduler.utils as su\n'))

    def test_other_modules_are_not_it(self):
        # Names sorting before and after the module's at each level.
        self.assertEqual(set(), self.references(
            'from nova.scheduler import client, weights\n'
            'from nova import utils\n'
            'from nova.scheduler.client import utils\n'
            'import nova.scheduler\n'
            'import nova.scheduler.weights\n'))


class RequireAnyCallTest(base.TestCase):
    """Which of several calls a Nova method makes, from its source."""

    SYMBOL = ('nova.compute.resource_tracker:ResourceTracker.'
              '_update_to_placement')
    SNAPSHOTS = ('get_provider_tree_and_ensure_root',
                 'get_provider_subtree_and_ensure_root')

    def setUp(self):
        super().setUp()
        self.tree = compat.source_tree('nova.compute.resource_tracker')

    def test_installed_nova_calls_one_of_them(self):
        from nova import version
        found = compat.require_any_call(self.SYMBOL, self.tree,
                                        self.SNAPSHOTS)
        major = int(version.version_string().split('.')[0])
        self.assertEqual([self.SNAPSHOTS[major >= 34]], found)

    def test_calls_in_the_order_asked(self):
        tree = ast.parse('class A(object):\n'
                         '    def m(self):\n'
                         '        b()\n'
                         '        self.client.a(b)\n')
        self.assertEqual(['a', 'b'],
                         compat.require_any_call('x:A.m', tree, ('a', 'b')))
        self.assertEqual(['b'],
                         compat.require_any_call('x:A.m', tree, ('c', 'b')))

    def test_a_name_read_but_not_called_does_not_count(self):
        tree = ast.parse('class A(object):\n'
                         '    def m(self):\n'
                         '        return self.client.a\n')
        error = self.assertRaises(exception.IncompatibleNova,
                                  compat.require_any_call, 'x:A.m', tree,
                                  ('a', 'b'))
        self.assertIn('x:A.m calls neither a nor b.', str(error))

    def test_method_not_defined_stops(self):
        tree = ast.parse('class A(object):\n    pass\n')
        error = self.assertRaises(exception.IncompatibleNova,
                                  compat.require_any_call, 'x:A.m', tree,
                                  ('a',))
        self.assertIn('x:A.m is not defined in the source of its module',
                      str(error))


class StandAsideTest(base.TestCase):
    """A Nova without the fallback query: one warning, Nova untouched."""

    def setUp(self):
        super().setUp()
        future = future_nova.without_fallback_query(
            compat.source_tree(scheduler.MANAGER))
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.compat.source_tree', return_value=future))

    def test_activation_stands_aside(self):
        stock = scheduler_utils.resources_from_request_spec

        scheduler.activate()
        scheduler.activate()

        self.assertIs(stock, scheduler_utils.resources_from_request_spec)
        self.assertEqual(1, self.logger.output.count(
            'nova-scheduler makes no VCPU fallback placement query (nothing '
            'in nova.scheduler.manager reads cpu_pinning_requested): the '
            'request filters isolate_vcpu_fallback have nothing to fix and '
            'stand aside. Remove them from [pcpu_ext] request_filters.'))

    def test_what_went_with_the_query_is_not_required(self):
        # NOTE: the query's flag, parameter and workaround option would go
        # with it.
        def resources_from_request_spec(ctxt, spec_obj, host_manager):
            pass

        def __init__(self):
            self._rg_by_id = {}

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.utils.resources_from_request_spec',
            resources_from_request_spec))
        self.useFixture(fixtures.MockPatchObject(
            scheduler_utils.ResourceRequest, '__init__', new=__init__))
        self.assertEqual([], scheduler.check_plugins())
        self.assertIn('stand aside', self.logger.output)
