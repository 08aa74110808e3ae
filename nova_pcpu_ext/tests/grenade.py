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

"""Run the grenade plugin's scripts (``devstack/upgrade``) without grenade.

``GRENADE_DIR`` holds a ``grenaderc`` and a ``functions`` giving what the
scripts use of grenade and devstack: the shims of :mod:`devstack` (process
and package functions recorded, one call per line), grenade's
``resource_save``/``resource_get`` backed by an ini file as grenade's are,
and grenade's service checks, recorded. The devstack trees the scripts
source are empty files: devstack variables come from the caller, and
``openrc`` exports the OS_* variables of the cloud given.
"""

import os
import shlex
import subprocess
import sys
import sysconfig

from nova_pcpu_ext.tests import devstack

UPGRADE_DIR = os.path.join(devstack.TOP, 'devstack', 'upgrade')

FUNCTIONS = devstack.SHIMS + '''
iniget() { ini get "$@"; }
die() { shift; echo "$*" >&2; exit 1; }
resource_save() { iniset "$GRENADE_DB" "$@"; }
resource_get() { iniget "$GRENADE_DB" "$@"; }
ensure_services_started() { record ensure_services_started "$@"; }
ensure_services_stopped() { record ensure_services_stopped "$@"; }
register_project_for_upgrade() { record register_project_for_upgrade "$@"; }
devstack_localrc() { record devstack_localrc "$@"; }
declare -A GITREPO GITBRANCH
'''

DEVSTACK_FILES = ('stackrc', 'lib/tls', 'lib/apache', 'lib/nova')


class ScriptFailed(Exception):
    """A script exited non-zero; the message holds its output."""


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


def _run(argv, work_dir, os_env=None, **settings):
    """Run ``argv`` in a scratch grenade and devstack under ``work_dir``.

    Returns the script's output and the recorded calls.
    """
    grenade_dir = os.path.join(work_dir, 'grenade')
    devstack_dir = os.path.join(work_dir, 'devstack')
    calls = os.path.join(work_dir, 'grenade-calls')
    _write(os.path.join(grenade_dir, 'grenaderc'),
           'BASE_DEVSTACK_DIR=%s\nTARGET_DEVSTACK_DIR=%s\nGRENADE_DB=%s\n' % (
               shlex.quote(devstack_dir), shlex.quote(devstack_dir),
               shlex.quote(os.path.join(work_dir, 'grenade_db.ini'))))
    _write(os.path.join(grenade_dir, 'functions'), FUNCTIONS)
    for name in DEVSTACK_FILES:
        _write(os.path.join(devstack_dir, name), '')
    _write(os.path.join(devstack_dir, 'openrc'), ''.join(
        'export %s=%s\n' % (k, shlex.quote(v))
        for k, v in sorted((os_env or {}).items())))
    open(calls, 'w').close()
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env.update(
        GRENADE_DIR=grenade_dir, TOP_DIR=devstack_dir, PYTHON=sys.executable,
        PYTHONPATH=devstack.TOP, CALLS=calls, DEST=work_dir,
        NOVA_BIN_DIR=sysconfig.get_path('scripts'), LIBVIRT_GROUP='libvirt',
        PATH=os.pathsep.join([sysconfig.get_path('scripts'), env['PATH']]))
    env.update(settings)
    result = subprocess.run(argv, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if result.returncode:
        raise ScriptFailed('%s exited %d:\n%s' % (
            ' '.join(argv), result.returncode, result.stdout))
    with open(calls) as f:
        return result.stdout, [shlex.split(line) for line in f
                               if line.strip()]


def run_upgrade_script(name, work_dir, **settings):
    """Run ``upgrade.sh`` or ``shutdown.sh`` as grenade does.

    ``settings`` are devstack variables (``NOVA_CONF``, ``NOVA_CPU_CONF``,
    ``NOVA_PCPU_EXT_*``...). Returns the recorded calls, each a list of
    arguments.
    """
    return _run([os.path.join(UPGRADE_DIR, name)], work_dir, **settings)[1]


def load_settings(work_dir, repo, branch, **settings):
    """Source ``settings`` as grenade does; returns the recorded calls.

    The plugin is enabled as ``enable_grenade_plugin nova-pcpu-ext REPO
    BRANCH`` would.
    """
    return _run(['bash', '-ec', 'source "$GRENADE_DIR/functions"; '
                 'GITREPO[nova-pcpu-ext]=$2; GITBRANCH[nova-pcpu-ext]=$3; '
                 'source "$1"', 'settings',
                 os.path.join(UPGRADE_DIR, 'settings'), repo, branch],
                work_dir, **settings)[1]


def run_resources(phase, work_dir, os_env, **settings):
    """Run ``resources.sh PHASE`` against the cloud of ``os_env``.

    ``os_env`` holds the cloud's OS_* variables; ``settings`` are the
    script's (``NOVA_PCPU_EXT_GRENADE_*``). The ``openstack`` client is
    this Python environment's. Returns the script's output; raises
    :class:`ScriptFailed` with it when the phase fails.
    """
    return _run([os.path.join(UPGRADE_DIR, 'resources.sh'), phase],
                work_dir, os_env, **settings)[0]
