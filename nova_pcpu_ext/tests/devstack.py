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

"""Run a phase of ``devstack/plugin.sh`` without devstack.

devstack's ini functions are replaced by :mod:`devstack_ini`; its process
and package functions only record what they were asked, one call per line
(arguments shell-quoted), so the caller can run it.
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

SHIMS = textwrap.dedent('''
    ini() { "$PYTHON" -m nova_pcpu_ext.tests.devstack_ini "$@"; }
    iniset() { ini set "$@"; }
    iniadd() { ini add "$@"; }
    iniget_multiline() { ini get "$@"; }
    iniset_multiline() { ini set_multi "$@"; }
    inidelete() { ini delete "$@"; }
    define_plugin() { :; }
    enable_service() { :; }
    is_service_enabled() { return 0; }
    echo_summary() { echo "$@"; }
    record() { printf '%q ' "$@" >> "$CALLS"; echo >> "$CALLS"; }
    setup_develop() { record setup_develop "$@"; }
    pip_uninstall() { record pip_uninstall "$@"; }
    stop_process() { record stop_process "$@"; }
    run_process() { record run_process "$@"; }
''')


def run_plugin(args, work_dir, **settings):
    """Source the plugin's settings and run ``plugin.sh ARGS``.

    ``settings`` are devstack variables (``NOVA_CONF``, ``TEMPEST_CONFIG``,
    ``NOVA_PCPU_EXT_*``...). Returns the recorded calls, each a list of
    arguments.
    """
    # One directory per run: runs may overlap.
    scratch = tempfile.mkdtemp(prefix='devstack-', dir=work_dir)
    shims = os.path.join(scratch, 'shims.sh')
    calls = os.path.join(scratch, 'calls')
    with open(shims, 'w') as f:
        f.write(SHIMS)
    open(calls, 'w').close()
    env = dict(os.environ, PYTHON=sys.executable, CALLS=calls,
               DEST=work_dir, NOVA_BIN_DIR=sysconfig.get_path('scripts'),
               LIBVIRT_GROUP='libvirt', PYTHONPATH=TOP)
    env.update(settings)
    subprocess.run(
        ['bash', '-euc', 'source "$1"; source devstack/settings; '
         'shift; source devstack/plugin.sh "$@"', 'phase', shims] + list(args),
        cwd=TOP, env=env, check=True, capture_output=True, text=True)
    with open(calls) as f:
        recorded = [shlex.split(line) for line in f if line.strip()]
    shutil.rmtree(scratch)
    return recorded
