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

"""The Nova releases a deployment runs: one virtualenv each.

As a kolla image rebuild or an OpenStack-Ansible venv does, each release
gets an environment of its own, with Nova and placement of that series
(from the project's constraints file of the series) and the extension
installed into it. The cloud's own environment is the newest release.
"""

import collections
import functools
import os
import subprocess
import sys

from nova_pcpu_ext.tests.cloud import processes

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
#: The constraints file of each series a deployment can run.
CONSTRAINTS = {'2025.1': 'nova-2025.1.txt', '2026.1': 'nova-2026.1.txt'}
#: The series of the cloud's own environment (constraints/cloud.txt).
NEWEST = '2026.2'
#: The first series whose services run in native threads by default; its
#: services, and those of later series, run as the cloud chooses (see
#: deploy.COMPUTES), those of earlier series in eventlet mode, their
#: default.
NATIVE_THREADS_SINCE = '2026.2'
#: What a release's services need: Nova, placement, the WSGI server and the
#: database driver, libvirt's binding, and what fakelibvirt's fixtures
#: import (Nova ships them in its package).
PACKAGES = ('nova', 'openstack-placement', 'gunicorn', 'PyMySQL', 'pyroute2',
            'libvirt-python', 'wsgi-intercept', 'fixtures', 'testtools',
            'oslotest')


class Release(collections.namedtuple('Release', 'series prefix')):
    """A series and the environment its services run from."""

    @property
    def bin(self):
        return os.path.join(self.prefix, 'bin')

    @property
    def python(self):
        return os.path.join(self.bin, 'python')

    @property
    def native_threads(self):
        return self.series >= NATIVE_THREADS_SINCE

    @property
    def etc(self):
        return os.path.join(self.prefix, 'etc')

    @functools.cached_property
    def versions(self):
        """{'nova': version, 'placement': version} installed here."""
        out = subprocess.run(
            [self.python, '-c', 'from importlib import metadata as m; '
             'print(m.version("nova"), m.version("openstack-placement"))'],
            capture_output=True, text=True, check=True).stdout.split()
        return {'nova': out[0], 'placement': out[1]}


CURRENT = Release(NEWEST, sys.prefix)


def build(series, work_dir):
    """A new virtualenv of ``series`` with the extension installed."""
    if series == NEWEST:
        return CURRENT
    prefix = os.path.join(work_dir, 'venvs', series)
    uv = [sys.executable, '-m', 'uv']
    for argv in (uv + ['venv', '--quiet', '--python', sys.executable,
                       prefix],
                 uv + ['pip', 'install', '--quiet', '--python',
                       os.path.join(prefix, 'bin', 'python'), '-c',
                       os.path.join(TOP, 'constraints', CONSTRAINTS[series])]
                 + list(PACKAGES) + [TOP]):
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode:
            raise processes.StartError('%s: %s' % (
                ' '.join(argv[:4]), result.stderr[-3000:]))
    return Release(series, prefix)
