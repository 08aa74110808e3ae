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

"""Operator commands run as operators do, against real services.

Placement is a gunicorn server on loopback; the Compute API of Nova's
in-process services is served over HTTP too. Every command runs in a
process of its own: a child forked by the test process's command server
(``nova_pcpu_ext.tests.command_server``), which imported the commands'
modules once; or the console script itself, where a test says
``real_process=True`` (one test of each command) or gives an environment
the server's imports would have read otherwise.
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

import http.server
import json
import os
import socketserver
import sqlite3
import sysconfig
import threading
import uuid
from wsgiref import simple_server

import fixtures
from nova.api import wsgi as nova_wsgi
import nova.conf
from nova import context as nova_context
from nova.db.api import api as api_db_api
from nova.db.main import api as main_db_api
from nova.tests.functional.api import client as api_client
import requests

from nova_pcpu_ext.tests import command_server
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests import placement_server
from nova_pcpu_ext.tests.placement_server import TOKEN

ACTIVATED = ('[filter_scheduler]\navailable_filters = '
             'nova_pcpu_ext.scheduler.activate\n')


class Command(object):
    """Runs an operator command with a nova.conf of its own."""

    def __init__(self, test, name, endpoint, compute_endpoint=None):
        self.test = test
        self.script = os.path.join(sysconfig.get_path('scripts'), name)
        self.endpoint = endpoint
        self.compute_endpoint = compute_endpoint

    def argv(self, *args, nova_conf=None, extra_conf=''):
        """The command line, with a nova.conf written for it."""
        if nova_conf is None:
            nova_conf = ACTIVATED + (
                '[placement]\nauth_type = admin_token\ntoken = %s\n'
                'endpoint = %s\n' % (TOKEN, self.endpoint)) + extra_conf
        path = os.path.join(
            self.test.useFixture(fixtures.TempDir()).path, 'nova.conf')
        with open(path, 'w') as conf:
            conf.write(nova_conf)
        options = ['--config-file', path]
        if self.compute_endpoint:
            options += ['--os-compute-endpoint-override',
                        self.compute_endpoint]
        return [self.script] + options + list(args)

    def __call__(self, *args, nova_conf=None, env=None, extra_conf='',
                 real_process=False):
        """The command's result, as ``subprocess.run`` returns it.

        Through the command server, or with ``real_process`` as the
        console script's own process.
        """
        # One HOME for every command of the test process, isolated as
        # each test's is: the command server's imports read it.
        result = command_server.run(
            self.argv(*args, nova_conf=nova_conf, extra_conf=extra_conf),
            env=dict(os.environ, HOME=command_server.home(), **(env or {})),
            timeout=300, real_process=real_process)
        self.test.assertNotIn('Traceback', result.stderr)
        return result

    def json(self, *args, **kwargs):
        """Exit code and the JSON printed."""
        result = self(*args, '--format', 'json', **kwargs)
        self.test.assertTrue(result.stdout, result.stderr)
        return result.returncode, json.loads(result.stdout)


def assert_one_line_error(test, result, prog, *fragments, code=2):
    test.assertEqual(code, result.returncode, result.stderr)
    test.assertEqual('', result.stdout)
    message, = result.stderr.strip().splitlines()
    test.assertTrue(message.startswith(prog + ': '), message)
    for fragment in fragments:
        test.assertIn(fragment, message)


class Placement(object):
    """Direct calls to placement, to seed and inspect it."""

    def __init__(self, server):
        self.server = server

    def call(self, method, url, body=None):
        response = self.server.request(method, url, body, version='1.26')
        response.raise_for_status()
        return response.json() if response.content else None

    def provider(self, name, inventories, traits=(), parent=None):
        """A new provider; a child of ``parent`` as Neutron makes them."""
        rp_uuid = str(uuid.uuid4())
        self.call('POST', '/resource_providers',
                  {'name': name, 'uuid': rp_uuid,
                   'parent_provider_uuid': parent})
        for rc in inventories:
            if rc.startswith('CUSTOM_'):
                self.call('PUT', '/resource_classes/%s' % rc)
        self.call('PUT', '/resource_providers/%s/inventories' % rp_uuid,
                  {'resource_provider_generation': 0,
                   'inventories': inventories})
        for trait in traits:
            if trait.startswith('CUSTOM_'):
                self.call('PUT', '/traits/%s' % trait)
        if traits:
            self.call('PUT', '/resource_providers/%s/traits' % rp_uuid,
                      {'resource_provider_generation': 1,
                       'traits': list(traits)})
        return rp_uuid

    def join_aggregate(self, rp_uuid, aggregate):
        url = '/resource_providers/%s/aggregates' % rp_uuid
        current = self.call('GET', url)
        self.call('PUT', url, {
            'aggregates': current['aggregates'] + [aggregate],
            'resource_provider_generation': current[
                'resource_provider_generation']})

    def inventories(self, rp_uuid):
        return self.call(
            'GET', '/resource_providers/%s/inventories' % rp_uuid)

    def ratios(self, rp_uuid):
        return {rc: inventory['allocation_ratio'] for rc, inventory in
                self.inventories(rp_uuid)['inventories'].items()}

    def traits(self, rp_uuid):
        return self.call(
            'GET', '/resource_providers/%s/traits' % rp_uuid)['traits']


class FaultyProxy(fixtures.Fixture):
    """Forwards to placement unless ``respond`` answers instead.

    ``respond(method, path)`` returns None to forward the request, a status
    code or ``(status, JSON body)`` to answer with, or :data:`DROP` to
    close the connection unanswered.
    """

    DROP = 'drop'

    def __init__(self, endpoint, respond):
        super().__init__()
        self.upstream = endpoint
        self.respond = respond
        #: ``(method, path, status or answer)`` of each request, in order.
        self.statuses = []
        self.lock = threading.Lock()

    def _setUp(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def forward(self):
                body = self.rfile.read(
                    int(self.headers.get('Content-Length') or 0))
                answer = proxy.respond(self.command, self.path)
                with proxy.lock:
                    index = len(proxy.statuses)
                    proxy.statuses.append((self.command, self.path, answer))
                if answer == proxy.DROP:
                    self.close_connection = True
                    return
                if answer is None:
                    response = requests.request(
                        self.command, proxy.upstream + self.path, data=body,
                        headers=dict(self.headers), timeout=30)
                    status, content = response.status_code, response.content
                    proxy.statuses[index] = (self.command, self.path,
                                             status)
                elif isinstance(answer, tuple):
                    status, content = answer[0], json.dumps(
                        answer[1]).encode()
                else:
                    status, content = answer, b'{}'
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_PUT = do_POST = do_DELETE = forward

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.endpoint = 'http://127.0.0.1:%d' % server.server_port


def drop_first(count):
    """A ``respond`` of :class:`FaultyProxy` dropping ``count`` requests.

    Its ``dropped`` attribute lists their paths.
    """
    def respond(method, path):
        if len(respond.dropped) < count:
            respond.dropped.append(path)
            return FaultyProxy.DROP
    respond.dropped = []
    return respond


class PlacementOverHttp(fixtures.Fixture):
    """Stands in for Nova's PlacementFixture with a placement server.

    Nova's services reach it through their own ``[placement]``
    configuration over HTTP; ``api`` serves the test helpers as Nova's
    fixture does.
    """

    def _setUp(self):
        self.server = self.useFixture(placement_server.PlacementServer())
        self.server.configure_nova(nova.conf.CONF)
        self.api = self

    def _call(self, method, url, body=None, version=None):
        return api_client.APIResponse(
            self.server.request(method, url, body, version))

    def get(self, url, version=None, **_kwargs):
        return self._call('GET', url, version=version)

    def put(self, url, body, version=None, **_kwargs):
        return self._call('PUT', url, body, version=version)

    def post(self, url, body, version=None, **_kwargs):
        return self._call('POST', url, body, version=version)

    def delete(self, url, version=None, **_kwargs):
        return self._call('DELETE', url, version=version)


class PlacementBehindProxy(PlacementOverHttp):
    """Nova's services reach placement through a :class:`FaultyProxy`.

    ``fault`` is the proxy's ``respond``, None to forward everything; the
    test helpers (``api``) reach placement directly. ``timeout`` is
    Nova's ``[placement] timeout``, read when its clients are created.
    """

    def __init__(self, timeout=None):
        super().__init__()
        self.timeout = timeout

    def _setUp(self):
        super()._setUp()
        self.fault = None
        self.proxy = self.useFixture(FaultyProxy(
            self.server.endpoint,
            lambda method, path: self.fault and self.fault(method, path)))
        nova.conf.CONF.set_override('endpoint', self.proxy.endpoint,
                                    group='placement')
        nova.conf.CONF.set_override('timeout', self.timeout,
                                    group='placement')


class ComputeApiOverHttp(fixtures.Fixture):
    """The in-process Compute API, served on loopback.

    Nova's OSAPIFixture stubs keystonemiddleware; this plays its part for
    callers over HTTP: the admin token, or :data:`OPERATOR_TOKEN`, becomes
    the identity headers of an admin (``admin`` or ``operator``) the
    stubbed context middleware reads, any other token gets a 401.
    """

    OPERATOR_TOKEN = 'operator-token'

    def _setUp(self):
        # An admin by role, as Nova's policy judges it, not by the user
        # name ``admin`` as Nova's stub of the context middleware does.
        def context_of(env, **kwargs):
            roles = env['HTTP_X_ROLES'].split(',')
            return nova_context.RequestContext(
                env['HTTP_X_AUTH_USER'], env['HTTP_X_AUTH_PROJECT_ID'],
                is_admin='admin' in roles, roles=roles, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.api.auth.NovaKeystoneContext._create_context', context_of))
        app = nova_wsgi.Loader().load_app('osapi_compute')
        #: The path and query of every request, in order.
        self.requests = []

        def authenticate(environ, start_response):
            self.requests.append(environ['PATH_INFO'] + (
                '?' + environ['QUERY_STRING'] if environ.get('QUERY_STRING')
                else ''))
            user = {TOKEN: 'admin', self.OPERATOR_TOKEN: 'operator'}.get(
                environ.get('HTTP_X_AUTH_TOKEN'))
            if user is None:
                start_response('401 Unauthorized', [])
                return [b'']
            environ.update(HTTP_X_AUTH_USER=user, HTTP_X_USER_ID=user,
                           HTTP_X_AUTH_PROJECT_ID='admin',
                           HTTP_X_ROLES='admin,member,reader')
            return app(environ, start_response)

        class Quiet(simple_server.WSGIRequestHandler):
            def log_message(self, *args):
                pass

        class Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
            daemon_threads = True

        server = simple_server.make_server(
            '127.0.0.1', 0, authenticate, server_class=Server,
            handler_class=Quiet)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.endpoint = 'http://127.0.0.1:%d/v2.1' % server.server_port


class OperatorCommandTestBase(base.ExtensionTestBase):
    """Nova's services on placement over HTTP, the Compute API too."""

    def setUp(self):
        placement = PlacementOverHttp()
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.functional.fixtures.PlacementFixture',
            lambda: placement))
        super().setUp()
        self.compute_api = compute_api = self.useFixture(
            ComputeApiOverHttp())
        self.placement_server = placement.server
        self.status = Command(self, 'nova-pcpu-ext-status',
                              placement.server.endpoint, compute_api.endpoint)
        self.manage = Command(self, 'nova-pcpu-ext-manage',
                              placement.server.endpoint, compute_api.endpoint)
        self.useFixture(base.StripIsolateMitigation())

    def enable_extension(self):
        """Restart the scheduler with the extension, as an operator would."""
        self.extension = True
        self.scheduler.stop()
        self.scheduler = self._setup_scheduler_service()

    def start_hyperthreaded_host(self, hostname='compute1'):
        # Two dedicated cores: an isolate server takes a whole one.
        return self.start_host(
            hostname, dict(HYPERTHREADED, cpu_cores=4), dedicated='0-3',
            shared='4-7')

    def nova_databases(self, down=()):
        """nova.conf lines naming a copy of Nova's databases, taken now.

        Nova's test databases belong to this process (in memory under
        eventlet); a command reads a copy made with SQLite's backup, its
        cell mappings pointed at the cells' copies. A cell of ``down``
        points at a database that cannot be opened.
        """
        directory = self.useFixture(fixtures.TempDir()).path
        connections = {}
        for name, cell in self.cell_mappings.items():
            path = os.path.join(directory, name + '.db')
            with nova_context.target_cell(nova_context.get_admin_context(),
                                          cell) as cell_context:
                _copy_sqlite(main_db_api.get_engine(context=cell_context),
                             path)
            if name in down:
                path = os.path.join(directory, 'missing', name + '.db')
            connections[cell.uuid] = 'sqlite:///' + path
        api = os.path.join(directory, 'api.db')
        _copy_sqlite(api_db_api.get_engine(), api)
        copy = sqlite3.connect(api)
        with copy:  # one transaction
            copy.executemany(
                'UPDATE cell_mappings SET database_connection = ? '
                'WHERE uuid = ?', [(connection, cell_uuid) for cell_uuid,
                                   connection in connections.items()])
        copy.close()
        return '[api_database]\nconnection = sqlite:///%s\n' % api


def _copy_sqlite(engine, path):
    source = engine.raw_connection()
    try:
        # SQLAlchemy 2 names the DB-API connection driver_connection.
        sqlite_connection = getattr(source, 'driver_connection',
                                    None) or source.connection
        target = sqlite3.connect(path)
        sqlite_connection.backup(target)
        target.close()
    finally:
        source.close()
