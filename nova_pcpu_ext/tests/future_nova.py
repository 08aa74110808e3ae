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

"""The Nova scheduler once ``vcpu_pin_set`` support is gone.

``SchedulerManager.select_destinations`` carries a TODO to remove the VCPU
fallback placement query with ``vcpu_pin_set``. This makes that Nova from
the installed one: the source of ``nova.scheduler.manager`` without the
``if`` that makes the fallback query, and nothing else changed.
"""

import ast
import importlib.util
import inspect
import os
import sys

import fixtures

MANAGER = 'nova.scheduler.manager'


class _DropFallbackQuery(ast.NodeTransformer):

    def visit_If(self, node):
        reads_flag = any(isinstance(child, ast.Attribute) and
                         child.attr == 'cpu_pinning_requested'
                         for child in ast.walk(node.test))
        return None if reads_flag else self.generic_visit(node)


def without_fallback_query(tree):
    """The ``ast`` of ``nova.scheduler.manager`` without the fallback query.

    :raises AssertionError: if the installed Nova has no such query, rather
        than silently simulating nothing.
    """
    future = ast.fix_missing_locations(_DropFallbackQuery().visit(tree))
    if 'cpu_pinning_requested' in ast.unparse(future):
        raise AssertionError('Nova changed: the VCPU fallback query of %s '
                             'was not found' % MANAGER)
    return future


class SchedulerWithoutFallbackQuery(fixtures.Fixture):
    """Run ``nova.scheduler.manager`` without its fallback query.

    The changed source is written to a file and imported as the module, so
    Nova's services run it and ``inspect`` reads it, as they would the
    module of a future Nova.
    """

    def _setUp(self):
        stock = importlib.import_module(MANAGER)
        tree = without_fallback_query(ast.parse(inspect.getsource(stock)))
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'manager.py')
        with open(path, 'w') as source:
            source.write(ast.unparse(tree))
        spec = importlib.util.spec_from_file_location(MANAGER, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[MANAGER] = module
        self.addCleanup(sys.modules.__setitem__, MANAGER, stock)
        self.useFixture(fixtures.MonkeyPatch(MANAGER, module))
        spec.loader.exec_module(module)
