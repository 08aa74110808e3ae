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

"""Nova without its late check for bug 1889633, to show the bug itself.

Since Victoria, ``nova.virt.hardware._pack_instance_onto_cores`` refuses an
``isolate`` instance on a hyperthreaded host configured with
``cpu_dedicated_set``, which hides the scheduling bug as a late NUMA
rejection. Clouds that ran Nova before that check, or stripped it, have
such instances on ``VCPU``; tests that need them rebuild that function
without the check. If the check cannot be found, this fails rather than
silently testing nothing.

``python -m nova_pcpu_ext.tests.late_check SCRIPT [ARGS...]`` runs a Nova
console script (``nova-scheduler``, by path) that way.
"""

import ast
import importlib
import inspect
import sys
import textwrap


def stripped_pack_instance_onto_cores():
    """Nova's ``_pack_instance_onto_cores`` without the bug's check."""
    from nova.virt import hardware

    function = hardware._pack_instance_onto_cores
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    checks = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.If) and
        'pcpuset' in ast.unparse(node.test) and
        '1889633' in ''.join(ast.unparse(stmt) for stmt in node.body)]
    if len(checks) != 1:
        raise AssertionError(
            'Nova changed: the bug 1889633 check in '
            'nova.virt.hardware._pack_instance_onto_cores was not found')
    checks[0].test = ast.Constant(False)
    namespace = {}
    exec(compile(ast.fix_missing_locations(tree), hardware.__file__,
                 'exec'), hardware.__dict__, namespace)
    return namespace[function.__name__]


def strip():
    """Strip the check in this process, for good."""
    from nova.virt import hardware

    hardware._pack_instance_onto_cores = stripped_pack_instance_onto_cores()


def main():
    from nova_pcpu_ext.tests.cloud import fake_compute

    script = sys.argv[1]
    entry_point = fake_compute.console_script(script)
    # The script's module first: it applies Nova's concurrency set-up
    # before anything else is imported.
    importlib.import_module(entry_point.module)
    strip()
    sys.argv = sys.argv[1:]
    sys.exit(entry_point.load()())


if __name__ == '__main__':
    main()
