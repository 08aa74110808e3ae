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

"""A real placement server on loopback, as an operator runs it.

``placement-manage db sync`` on a sqlite file (once per process, then
copied for each server) or a given database URL, then gunicorn serving
``placement.wsgi.api:application`` with ``[api] auth_strategy =
noauth2``; with noauth2 the token must be ``admin``.
"""

import atexit
import functools
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

import fixtures
from keystoneauth1 import loading as ks_loading
import requests

TOKEN = 'admin'
#: The temporary directory of the process: tests get temporary directories
#: of their own, removed after each.
_PROCESS_TEMP = tempfile.gettempdir()


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _wsgi_application():
    """gunicorn's name for placement's WSGI application.

    Newer placement releases have ``placement.wsgi.api``; older ones
    build the application with ``placement.wsgi.init_application()``.
    """
    try:
        importlib.util.find_spec('placement.wsgi.api')
        return 'placement.wsgi.api:application'
    except ImportError:
        return 'placement.wsgi:init_application()'


@functools.cache
def _gunicorn_options():
    """Options of the installed gunicorn that every server needs.

    ``--no-control-socket`` where gunicorn has a control socket: each
    server would otherwise claim the same socket in the home directory.
    Releases without one do not know the option and exit on it, so it is
    given only where ``gunicorn --help`` lists it.
    """
    usage = subprocess.run(
        [sys.executable, '-m', 'gunicorn', '--help'], check=True,
        capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout
    return [option for option in ('--no-control-socket',)
            if option in usage.split()]


def _configure(directory, db_url):
    policy = os.path.join(directory, 'policy.yaml')
    with open(policy, 'w') as rules:
        # NOTE: noauth2's token has the admin role only; a compute's
        # reshape (VCPU to PCPU) needs the service role a deployment's
        # nova user has.
        rules.write('"placement:reshaper:reshape": "role:admin"\n')
    with open(os.path.join(directory, 'placement.conf'), 'w') as conf:
        conf.write('[api]\nauth_strategy = noauth2\n'
                   '[placement_database]\nconnection = %s\n'
                   '[oslo_policy]\npolicy_file = %s\n' % (db_url, policy))


def _db_sync(directory):
    subprocess.run(
        [os.path.join(sysconfig.get_path('scripts'), 'placement-manage'),
         '--config-dir', directory, 'db', 'sync'], check=True,
        env=dict(os.environ, OS_PLACEMENT_CONFIG_DIR=directory),
        capture_output=True)


@functools.cache
def _synced_sqlite():
    """A sqlite database placement-manage has synced, once per process.

    The sync takes over a second; each server on sqlite starts from a copy.
    """
    directory = tempfile.mkdtemp(prefix='placement-', dir=_PROCESS_TEMP)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    path = os.path.join(directory, 'placement.sqlite')
    _configure(directory, 'sqlite:///' + path)
    _db_sync(directory)
    return path


class PlacementServer(fixtures.Fixture):
    """Starts placement on 127.0.0.1; ``endpoint`` is its URL."""

    def __init__(self, db_url=None, workers=None):
        super().__init__()
        self.db_url = db_url
        # sqlite takes one writer at a time: more workers only add
        # "database is locked" errors.
        self.workers = workers or (2 if db_url else 1)

    def _setUp(self):
        self.dir = self.useFixture(fixtures.TempDir()).path
        if self.db_url:
            _configure(self.dir, self.db_url)
            _db_sync(self.dir)
        else:
            path = os.path.join(self.dir, 'placement.sqlite')
            shutil.copyfile(_synced_sqlite(), path)
            _configure(self.dir, 'sqlite:///' + path)
        env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=self.dir)
        port = free_port()
        self.endpoint = 'http://127.0.0.1:%d' % port
        self.log = open(os.path.join(self.dir, 'gunicorn.log'), 'w')
        self.addCleanup(self.log.close)
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'gunicorn', *_gunicorn_options(),
             '--bind', '127.0.0.1:%d' % port, '--workers',
             str(self.workers), '--log-level', 'warning',
             _wsgi_application()],
            env=env, stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        self.addCleanup(self.stop)
        self._wait_until_serving()

    def _wait_until_serving(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.flush()
                with open(self.log.name) as log:
                    raise RuntimeError('placement exited: %s' %
                                       log.read()[-2000:])
            try:
                requests.get(self.endpoint, timeout=5)
                return
            except requests.RequestException:
                time.sleep(0.2)
        raise RuntimeError('placement did not start in %ss' % timeout)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def request(self, method, path, body=None, version=None):
        """One request as placement's admin; the ``requests`` response."""
        headers = {'x-auth-token': TOKEN}
        if version:
            headers['openstack-api-version'] = 'placement %s' % version
        return requests.request(method, self.endpoint + path, json=body,
                                headers=headers, timeout=30)

    def configure_nova(self, conf):
        """Point Nova's report client here (``[placement]`` options)."""
        conf.set_override('auth_type', 'admin_token', group='placement')
        conf.register_opts(
            ks_loading.get_auth_plugin_conf_options('admin_token'),
            group='placement')
        conf.set_override('token', TOKEN, group='placement')
        conf.set_override('endpoint', self.endpoint, group='placement')
