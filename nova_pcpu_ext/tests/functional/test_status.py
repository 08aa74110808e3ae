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

"""``nova-pcpu-ext-status`` run as operators do, against real services.

Placement is a gunicorn server on loopback; for the allocation check the
Compute API of the in-process Nova services is served over HTTP too. The
command runs as a separate process in every test.
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

import http.server
import json
import os
import re
import socket
import socketserver
import subprocess
import sysconfig
import threading
import uuid
from wsgiref import simple_server

import ddt
import fixtures
from nova.api import wsgi as nova_wsgi
import nova.conf
from nova.tests.functional.api import client as api_client
import requests
import testtools

from nova_pcpu_ext.tests.functional.base import DEDICATED
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests import placement_server
from nova_pcpu_ext.tests.placement_server import TOKEN

STATUS = os.path.join(sysconfig.get_path('scripts'), 'nova-pcpu-ext-status')
ACTIVATED = ('[filter_scheduler]\navailable_filters = '
             'nova_pcpu_ext.scheduler.activate\n')


class Status(object):
    """Runs nova-pcpu-ext-status with a nova.conf of its own."""

    def __init__(self, test, endpoint):
        self.test = test
        self.endpoint = endpoint

    def __call__(self, *args, nova_conf=None, env=None):
        if nova_conf is None:
            nova_conf = ACTIVATED + (
                '[placement]\nauth_type = admin_token\ntoken = %s\n'
                'endpoint = %s\n' % (TOKEN, self.endpoint))
        path = os.path.join(
            self.test.useFixture(fixtures.TempDir()).path, 'nova.conf')
        with open(path, 'w') as conf:
            conf.write(nova_conf)
        result = subprocess.run(
            [STATUS, '--config-file', path] + list(args),
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL)
        self.test.assertNotIn('Traceback', result.stderr)
        return result


class Placement(object):
    """Direct calls to placement, to seed and inspect it."""

    def __init__(self, server):
        self.server = server

    def call(self, method, url, body=None):
        response = self.server.request(method, url, body, version='1.26')
        response.raise_for_status()
        return response.json() if response.content else None

    def provider(self, name, inventories, traits=()):
        rp_uuid = str(uuid.uuid4())
        self.call('POST', '/resource_providers',
                  {'name': name, 'uuid': rp_uuid})
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
    """Forwards to placement; ``on_put`` may act before a PUT is forwarded.

    ``on_put(path)`` returns None to forward the request, or a status code
    to answer with instead.
    """

    def __init__(self, endpoint, on_put):
        super().__init__()
        self.upstream = endpoint
        self.on_put = on_put
        self.statuses = []

    def _setUp(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def forward(self):
                body = self.rfile.read(
                    int(self.headers.get('Content-Length') or 0))
                status = (proxy.on_put(self.path) if self.command == 'PUT'
                          else None)
                if status is None:
                    response = requests.request(
                        self.command, proxy.upstream + self.path, data=body,
                        headers=dict(self.headers), timeout=30)
                    status, content = response.status_code, response.content
                else:
                    content = b'{}'
                proxy.statuses.append((self.command, self.path, status))
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_PUT = forward

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.endpoint = 'http://127.0.0.1:%d' % server.server_port


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


class ComputeApiOverHttp(fixtures.Fixture):
    """The in-process Compute API, served on loopback.

    Nova's OSAPIFixture stubs keystonemiddleware; this plays its part for
    callers over HTTP: the admin token becomes the admin identity headers
    the stubbed context middleware reads, any other token gets a 401.
    """

    def _setUp(self):
        app = nova_wsgi.Loader().load_app('osapi_compute')

        def authenticate(environ, start_response):
            if environ.get('HTTP_X_AUTH_TOKEN') != TOKEN:
                start_response('401 Unauthorized', [])
                return [b'']
            environ.update(HTTP_X_AUTH_USER='admin', HTTP_X_USER_ID='admin',
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


class PlacementAuditTest(testtools.TestCase):
    """Inventories, credentials and faults, against placement alone."""

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(placement_server.PlacementServer())
        self.placement = Placement(self.server)
        self.status = Status(self, self.server.endpoint)

    def seed_damage(self):
        """Zero ratios (bug 1789654) on one provider, PCPU 2.0 on another."""
        zero = self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 0.0},
            'MEMORY_MB': {'total': 4096, 'reserved': 512,
                          'allocation_ratio': 0.0},
            'DISK_GB': {'total': 100, 'allocation_ratio': 1.0},
        }, traits=['CUSTOM_KEEP_ME'])
        pcpu = self.placement.provider('compute2', {
            'PCPU': {'total': 4, 'allocation_ratio': 2.0}})
        return zero, pcpu

    def audit(self, *args, **kwargs):
        """Exit code and sorted findings, as tuples, of a JSON audit."""
        result = self.status('audit', '--format', 'json', *args, **kwargs)
        return result.returncode, sorted(
            (f['provider_name'], f['severity'], f['problem'], f['action'],
             f['fixed']) for f in json.loads(result.stdout))

    def assertOneLineError(self, result, *fragments):
        self.assertEqual(2, result.returncode, result.stderr)
        self.assertEqual('', result.stdout)
        message, = result.stderr.strip().splitlines()
        self.assertTrue(message.startswith('nova-pcpu-ext-status: '),
                        message)
        for fragment in fragments:
            self.assertIn(fragment, message)

    def test_clean_placement_passes(self):
        self.placement.provider('compute1', {
            'VCPU': {'total': 8, 'allocation_ratio': 16.0},
            'PCPU': {'total': 4}})

        audit = self.status('audit')
        check = self.status('upgrade', 'check', '--json')

        self.assertEqual((0, 'No findings.\n'),
                         (audit.returncode, audit.stdout))
        self.assertEqual(0, check.returncode, check.stdout)
        self.assertEqual([0, 0, 0], [c['result'] for c in
                                     json.loads(check.stdout)['checks']])

    def test_damage_is_found_fixed_and_gone(self):
        zero, pcpu = self.seed_damage()
        nova_conf = ACTIVATED + (
            '[DEFAULT]\ncpu_allocation_ratio = 16.0\n[placement]\n'
            'auth_type = admin_token\ntoken = %s\nendpoint = %s\n' % (
                TOKEN, self.server.endpoint))
        before = self.placement.inventories(zero)

        found = self.audit(nova_conf=nova_conf)
        fixed = self.audit('--fix', '--ratio', 'MEMORY_MB=1.5',
                           nova_conf=nova_conf)
        again = self.audit(nova_conf=nova_conf)

        self.assertEqual((2, [
            ('compute1', 'failure', 'MEMORY_MB allocation_ratio 0.0 is not '
             'a positive number', '--fix sets allocation_ratio to 1.0',
             False),
            ('compute1', 'failure', 'VCPU allocation_ratio 0.0 is not a '
             'positive number', '--fix sets allocation_ratio to 16.0',
             False),
            ('compute2', 'warning', 'PCPU allocation_ratio 2.0 is not 1.0',
             '--fix sets allocation_ratio to 1.0', False)]), found)
        self.assertEqual((0, [
            ('compute1', 'failure', 'MEMORY_MB allocation_ratio 0.0 is not '
             'a positive number', 'set allocation_ratio to 1.5', True),
            ('compute1', 'failure', 'VCPU allocation_ratio 0.0 is not a '
             'positive number', 'set allocation_ratio to 16.0', True),
            ('compute2', 'warning', 'PCPU allocation_ratio 2.0 is not 1.0',
             'set allocation_ratio to 1.0', True)]), fixed)
        self.assertEqual((0, []), again)
        self.assertEqual({'VCPU': 16.0, 'MEMORY_MB': 1.5, 'DISK_GB': 1.0},
                         self.placement.ratios(zero))
        self.assertEqual({'PCPU': 1.0}, self.placement.ratios(pcpu))
        # Nothing but the ratios changed: one write, traits and the rest of
        # the inventory kept.
        after = self.placement.inventories(zero)
        self.assertEqual(before['resource_provider_generation'] + 1,
                         after['resource_provider_generation'])
        for inventory in before['inventories'].values():
            del inventory['allocation_ratio']
        for inventory in after['inventories'].values():
            del inventory['allocation_ratio']
        self.assertEqual(before['inventories'], after['inventories'])
        self.assertEqual(['CUSTOM_KEEP_ME'], self.placement.traits(zero))

    def test_upgrade_check_reports_damage(self):
        zero, _pcpu = self.seed_damage()

        table = self.status('upgrade', 'check')
        result = self.status('upgrade', 'check', '--json')

        self.assertEqual(2, table.returncode)
        self.assertIn('Result: Failure', table.stdout)
        self.assertEqual(2, result.returncode)
        checks = json.loads(result.stdout)['checks']
        self.assertEqual(
            [('Configuration', 0),
             ('Placement allocation ratios', 2),
             ('Placement allocations of dedicated CPUs', 0)],
            [(c['check'], c['result']) for c in checks])
        self.assertEqual(
            'Bad allocation ratios: 3 found, the worst on compute1 (%s): '
            'MEMORY_MB allocation_ratio 0.0 is not a positive number. Run '
            'nova-pcpu-ext-status audit for the list and audit --fix to '
            'repair them.' % zero, checks[1]['details'])

    def test_warnings_only_exit_1(self):
        self.placement.provider('compute2', {
            'PCPU': {'total': 4, 'allocation_ratio': 2.0}})

        self.assertEqual(1, self.status('audit').returncode)
        self.assertEqual(1, self.status('upgrade', 'check').returncode)

    def test_dry_run_changes_nothing(self):
        zero, _pcpu = self.seed_damage()
        before = self.placement.inventories(zero)

        code, findings = self.audit('--fix', '--dry-run')

        self.assertEqual(2, code)
        self.assertEqual(3, len(findings))
        self.assertFalse(any(f[-1] for f in findings))
        self.assertEqual(before, self.placement.inventories(zero))

    def test_conflict_during_fix_is_retried(self):
        """Another writer changes the inventory between read and write."""
        zero, _pcpu = self.seed_damage()
        path = '/resource_providers/%s/inventories' % zero

        concurrent_writes = []

        def write_concurrently_first(put_path):
            if put_path == path and not concurrent_writes:
                current = self.placement.inventories(zero)
                current['inventories']['VCPU']['total'] = 16
                concurrent_writes.append(
                    self.placement.call('PUT', path, current))

        proxy = self.useFixture(FaultyProxy(self.server.endpoint,
                                            write_concurrently_first))
        status = Status(self, proxy.endpoint)
        result = status('audit', '--fix')

        self.assertEqual(0, result.returncode, result.stdout)
        puts = [s for s in proxy.statuses if s[:2] == ('PUT', path)]
        self.assertEqual([409, 200], [s[2] for s in puts])
        inventories = self.placement.inventories(zero)['inventories']
        self.assertEqual(16, inventories['VCPU']['total'])
        self.assertEqual(4.0, inventories['VCPU']['allocation_ratio'])

    def test_server_error_during_fix_writes_nothing(self):
        zero, _pcpu = self.seed_damage()
        before = self.placement.inventories(zero)
        proxy = self.useFixture(FaultyProxy(self.server.endpoint,
                                            lambda path: 503))

        result = Status(self, proxy.endpoint)('audit', '--fix')

        self.assertOneLineError(
            result, 'placement: PUT %s/resource_providers/' % proxy.endpoint,
            '503 Service Unavailable', 'Check that placement is up')
        self.assertEqual(before, self.placement.inventories(zero))

    def test_stopped_placement(self):
        self.server.stop()

        audit = self.status('audit')
        check = self.status('upgrade', 'check', '--json')

        self.assertOneLineError(
            audit, 'placement: GET %s/resource_providers: cannot connect.' %
            self.server.endpoint)
        self.assertEqual(2, check.returncode)
        checks = json.loads(check.stdout)['checks']
        self.assertEqual([0, 2, 2], [c['result'] for c in checks])
        self.assertIn('cannot connect', checks[1]['details'])

    def test_timeout(self):
        # Accepts connections but never answers.
        silent = socket.socket()
        self.addCleanup(silent.close)
        silent.bind(('127.0.0.1', 0))
        silent.listen()
        endpoint = 'http://127.0.0.1:%d' % silent.getsockname()[1]

        result = self.status('audit', nova_conf=(
            '[placement]\nauth_type = admin_token\ntoken = %s\n'
            'endpoint = %s\ntimeout = 1\n' % (TOKEN, endpoint)))

        self.assertOneLineError(result, 'timed out')

    def test_non_admin_is_told_so(self):
        result = self.status('audit', nova_conf=(
            '[placement]\nauth_type = admin_token\ntoken = demo\n'
            'endpoint = %s\n' % self.server.endpoint))

        self.assertOneLineError(
            result, '403 Forbidden: the user needs the admin role')

    def test_command_line_and_environment_credentials(self):
        self.seed_damage()
        options = ['--os-auth-type', 'admin_token', '--os-token', TOKEN,
                   '--os-endpoint', self.server.endpoint]
        environment = {'OS_AUTH_TYPE': 'admin_token', 'OS_TOKEN': TOKEN,
                       'OS_ENDPOINT': self.server.endpoint}

        by_options = self.status('audit', *options, nova_conf='')
        by_environment = self.status('audit', nova_conf='',
                                     env=environment)

        self.assertEqual(2, by_options.returncode, by_options.stderr)
        self.assertEqual(by_options.stdout, by_environment.stdout)
        self.assertEqual(2, by_environment.returncode)

    def test_no_credentials(self):
        self.assertOneLineError(self.status('audit', nova_conf=''),
                                'no credentials: set auth_type')

    def test_unknown_auth_type(self):
        result = self.status('audit', nova_conf='',
                             env={'OS_AUTH_TYPE': 'pasword'})

        self.assertOneLineError(
            result, 'nova-pcpu-ext-status: The plugin pasword could not be '
            'found')

    def test_password_is_never_printed(self):
        closed = placement_server._free_port()
        result = self.status(
            'audit', '--os-auth-type', 'password', '--os-auth-url',
            'http://127.0.0.1:%d/v3' % closed, '--os-username', 'nova',
            '--os-password', 'not-to-be-seen', '--os-project-name',
            'service', '--os-user-domain-id', 'default',
            '--os-project-domain-id', 'default', nova_conf='')

        self.assertOneLineError(
            result, 'identity: cannot authenticate: cannot connect. Check ')
        self.assertNotIn('not-to-be-seen', result.stdout + result.stderr)

    def test_bad_ratio_option_is_a_usage_error(self):
        result = self.status('audit', '--fix', '--ratio', 'PCPU=2.0')

        self.assertEqual(2, result.returncode)
        self.assertIn("'PCPU=2.0': expected RESOURCE_CLASS=RATIO with one "
                      "of VCPU, MEMORY_MB, DISK_GB", result.stderr)

    def test_session_options_need_command_line_credentials(self):
        # With nova.conf's credentials, [placement] sets the timeout.
        result = self.status('audit', '--timeout', '5')

        self.assertEqual(2, result.returncode)
        self.assertIn('unrecognized arguments: --timeout 5', result.stderr)

    def test_compute_api_must_be_reachable_when_needed(self):
        """A token endpoint serves placement for both services: refused."""
        rp_uuid = self.placement.provider(
            'compute1', {'PCPU': {'total': 2}, 'VCPU': {'total': 2}},
            traits=['HW_CPU_HYPERTHREADING'])
        self.placement.call('PUT', '/allocations/%s' % uuid.uuid4(), {
            'allocations': {rp_uuid: {'resources': {'VCPU': 1}}},
            'project_id': str(uuid.uuid4()), 'user_id': str(uuid.uuid4())})

        result = self.status('audit')

        self.assertOneLineError(
            result, 'compute: GET %s/servers/' % self.server.endpoint,
            'unexpected answer (404 without itemNotFound): is this the '
            'compute API?')


@ddt.ddt
class ConfigurationCheckTest(testtools.TestCase):
    """The configuration check needs nova.conf and nothing else."""

    def check(self, nova_conf):
        status = Status(self, 'http://127.0.0.1:%d' %
                        placement_server._free_port())
        result = status('upgrade', 'check', '--json', nova_conf=nova_conf)
        configuration = json.loads(result.stdout)['checks'][0]
        self.assertEqual('Configuration', configuration['check'])
        return configuration['result'], configuration['details']

    def test_valid(self):
        self.assertEqual((0, None), self.check(ACTIVATED))

    @ddt.unpack
    @ddt.data(
        ('', 1, 'available_filters lacks nova_pcpu_ext.scheduler.activate'),
        (ACTIVATED + '[pcpu_ext]\nrequest_filters = isolate\n', 2,
         '[pcpu_ext] request_filters: unknown plugin isolate'),
        (ACTIVATED + '[DEFAULT]\nram_allocation_ratio = -1.0\n', 2,
         '[DEFAULT] ram_allocation_ratio is invalid: Should be greater than '
         'or equal to 0. Set a positive ratio'),
        (ACTIVATED + '[DEFAULT]\ninitial_cpu_allocation_ratio = inf\n', 2,
         'initial_cpu_allocation_ratio = inf is not a finite number'),
    )
    def test_problem(self, nova_conf, expected_code, expected_details):
        code, details = self.check(nova_conf)
        self.assertEqual(expected_code, code)
        self.assertIn(expected_details, details)


class _AllocationAuditBase(base.ExtensionTestBase):
    """Nova's services on placement over HTTP, the Compute API too."""

    def setUp(self):
        placement = PlacementOverHttp()
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.functional.fixtures.PlacementFixture',
            lambda: placement))
        super().setUp()
        self.compute_api = self.useFixture(ComputeApiOverHttp())
        self.status = Status(self, placement.server.endpoint)
        self.useFixture(base.StripIsolateMitigation())

    def start_hyperthreaded_host(self):
        # Two dedicated cores: an isolate server takes a whole one.
        return self.start_host(
            'compute1', dict(HYPERTHREADED, cpu_cores=4), dedicated='0-3',
            shared='4-7')


class StockNovaAllocationAuditTest(_AllocationAuditBase):
    """Servers left on VCPU by bug 1889633 are found through both APIs."""

    # Stock Nova without its late check does the damage to be found.
    extension = False

    def test_isolate_server_on_vcpu_is_reported(self):
        rp_uuid = self.start_hyperthreaded_host()
        isolate = self.boot(ISOLATE)
        dedicated = self.boot(DEDICATED)
        shared = self.boot({})
        allocations = self.placement.get(
            '/resource_providers/%s/allocations' % rp_uuid).body
        self.assertEqual(
            {isolate['id']: {'VCPU': 1}, dedicated['id']: {'PCPU': 1},
             shared['id']: {'VCPU': 1}},
            {consumer: {rc: amount for rc, amount in
                        allocation['resources'].items() if 'CPU' in rc}
             for consumer, allocation in
             allocations['allocations'].items()})

        result = self.status('audit', '--format', 'json',
                             '--os-compute-endpoint-override',
                             self.compute_api.endpoint)
        table = self.status('audit', '--os-compute-endpoint-override',
                            self.compute_api.endpoint)

        self.assertEqual(2, result.returncode, result.stderr)
        finding, = json.loads(result.stdout)
        self.assertEqual(
            {'check': 'allocation', 'severity': 'failure',
             'provider_name': 'compute1', 'provider_uuid': rp_uuid,
             'consumer': isolate['id'], 'fixed': False},
            {key: value for key, value in finding.items()
             if key not in ('problem', 'action')})
        self.assertEqual(
            'server on host compute1, flavor %s (hw:cpu_policy=dedicated, '
            'hw:cpu_thread_policy=isolate), consumes VCPU:1 on a '
            'hyperthreaded host with PCPU (bug 1889633)' %
            self.api.get_flavor(isolate['flavor']['id'])['name'],
            finding['problem'])
        self.assertTrue(finding['action'].endswith(
            'openstack server migrate --live-migration %s' % isolate['id']))
        self.assertEqual(2, table.returncode)
        self.assertIn(isolate['id'], table.stdout)

    def test_upgrade_check_reports_it_and_compute_api_errors(self):
        self.start_hyperthreaded_host()
        self.boot(ISOLATE)

        found = self.status('upgrade', 'check', '--json',
                            '--os-compute-endpoint-override',
                            self.compute_api.endpoint)
        stopped = 'http://127.0.0.1:%d/v2.1' % placement_server._free_port()
        unreachable = self.status('audit', '--os-compute-endpoint-override',
                                  stopped)

        self.assertEqual(2, found.returncode)
        checks = json.loads(found.stdout)['checks']
        self.assertEqual(2, checks[2]['result'])
        self.assertIn('consumes VCPU:1', checks[2]['details'])
        self.assertEqual(2, unreachable.returncode)
        self.assertRegex(
            unreachable.stderr.strip().splitlines()[-1],
            r'^nova-pcpu-ext-status: compute: GET %s/servers/[0-9a-f-]{36}: '
            r'cannot connect\. Check that the Compute API is up' %
            re.escape(stopped))


class ExtensionAllocationAuditTest(_AllocationAuditBase):
    """With the extension on, the same servers leave nothing to report."""

    def test_no_damage_to_report(self):
        self.start_hyperthreaded_host()
        self.boot(ISOLATE, expected_state='ERROR')
        self.boot(DEDICATED)
        self.boot({})

        result = self.status('audit', '--os-compute-endpoint-override',
                             self.compute_api.endpoint)

        self.assertEqual((0, 'No findings.\n'),
                         (result.returncode, result.stdout))
