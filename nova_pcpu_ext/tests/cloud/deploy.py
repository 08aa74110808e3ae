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

"""The OpenStack services of the loopback cloud, configured as devstack
would: keystone and glance shared, and per deployment (stock, ext) its own
region, placement, Nova databases, RabbitMQ virtual host and services.

The extension's part of nova.conf and tempest.conf is written by
``devstack/plugin.sh`` itself (:mod:`nova_pcpu_ext.tests.devstack`).
"""

import collections
import configparser
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time

import openstack
from urllib3.util import retry

from nova_pcpu_ext.tests.cloud import fake_compute
from nova_pcpu_ext.tests.cloud import processes
from nova_pcpu_ext.tests.cloud import releases
from nova_pcpu_ext.tests import devstack

BIN = sysconfig.get_path('scripts')
ETC = os.path.join(sys.prefix, 'etc')
ADMIN_PASSWORD = 'cloud-admin'
SERVICE_PASSWORD = 'cloud-service'
SHARED_REGION = 'RegionOne'
IMAGE_NAME = 'zeros'
#: Seconds between the resource updates of every compute: ten through the
#: journey and tempest (Nova's default is a minute; ten keep the waits for
#: an update short), one in the drills, where status changes race the
#: updates. Eight computes updating every second keep about 1.3 of two
#: cores busy, which the journey's restarts would wait for.
UPDATE_INTERVAL = 10
DRILL_UPDATE_INTERVAL = 1
#: [placement] connect_retries of every Nova service.
PLACEMENT_CONNECT_RETRIES = 3

#: The cells of each deployment, laid out as devstack's default
#: (superconductor) lays them out: each with its own database, RabbitMQ
#: virtual host and conductor; the API, scheduler and superconductor on
#: the top level's. cell2's database is on a server of its own, which the
#: cell database drill stops.
CELLS = ('cell1', 'cell2')
#: The MariaDB server of cell2's databases (cell1's are on the shared one).
CELL2_SERVER = 'mariadb-cell2'

#: A compute host of each deployment. ``fake`` is (cores, threads) of a
#: fakelibvirt host; None is the real-libvirt host.
Compute = collections.namedtuple(
    'Compute', 'host fake eventlet options cell', defaults=('cell1',))

COMPUTES = (
    Compute('ht', (2, 2), False, {
        'compute': {'cpu_dedicated_set': '0-1', 'cpu_shared_set': '2-3'}}),
    # Deployed with a zero initial ratio and no explicit ratio, the case
    # of Nova bug 1789654.
    Compute('noht', (6, 1), False, {
        'compute': {'cpu_dedicated_set': '0-3', 'cpu_shared_set': '4-5'},
        'DEFAULT': {'initial_cpu_allocation_ratio': '0.0'}}),
    Compute('legacy-ht', (2, 2), True, {
        'DEFAULT': {'vcpu_pin_set': '0-3'}}),
    Compute('libvirt', None, False, {
        'compute': {'cpu_dedicated_set': '1', 'cpu_shared_set': '0'},
        'libvirt': {'virt_type': 'qemu', 'cpu_mode': 'none'}}),
    Compute('cell2-ht', (2, 2), False, {
        'compute': {'cpu_dedicated_set': '0-1', 'cpu_shared_set': '2-3'}},
        'cell2'),
)


#: The initial ratios Nova's defaults were before 2023.1: a compute born
#: with them holds them in placement after its options are unset.
INITIAL_RATIOS_BEFORE_2023_1 = {'initial_cpu_allocation_ratio': '16.0',
                                'initial_ram_allocation_ratio': '1.5'}

#: [DEFAULT] manager_shutdown_timeout of a compute on Nova 2026.1, which
#: sleeps that long on SIGTERM whatever it runs (160 s by default, past the
#: 30 s a stop gives it before SIGKILL). Later series wait for the tasks in
#: progress only, up to Nova's default.
SHUTDOWN_SLEEP_2026_1 = '10'

#: The extension's compute that runs as kolla's image runs it (deploy/kolla):
#: nova-pcpu-ext-compute's console script copied as ``nova-compute``.
KOLLA_SWAPPED = 'libvirt'


def write_conf(path, sections):
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    for section, options in sections.items():
        parser[section] = {k: str(v) for k, v in options.items()}
    with open(path, 'w') as f:
        parser.write(f)


def run(argv, **kwargs):
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if result.returncode:
        raise processes.StartError('%s failed:\n%s%s' % (
            shlex.join(argv), result.stdout[-3000:], result.stderr[-3000:]))
    return result.stdout


#: An access log line: status, microseconds, request line.
ACCESS_LOG_FORMAT = '%(s)s %(D)s %(r)s'


def gunicorn(port, app, workers=1, access_log=None, python=sys.executable):
    # NOTE: no keep-alive. gunicorn closes an idle keep-alive connection
    # after two seconds, and a client reusing it at that moment meets a
    # connection reset: Nova retries the request but logs an ERROR (glance)
    # that would fail the run for no defect.
    argv = [python, '-m', 'gunicorn', '--no-control-socket',
            '--bind', '127.0.0.1:%d' % port, '--workers', str(workers),
            '--threads', '4', '--timeout', '120', '--keep-alive', '0',
            '--log-level', 'warning']
    if access_log:
        argv += ['--access-logfile', access_log, '--access-logformat',
                 ACCESS_LOG_FORMAT]
    return argv + [app]


def authtoken(keystone_url, username):
    return {'auth_type': 'password', 'auth_url': keystone_url,
            'www_authenticate_uri': keystone_url,
            'username': username, 'password': SERVICE_PASSWORD,
            'project_name': 'service', 'user_domain_name': 'Default',
            'project_domain_name': 'Default'}


class ResetRetry(retry.Retry):
    """Sends an idempotent request again when its connection is reset.

    The services run without keep-alive (see :func:`gunicorn`), but one
    that stops or restarts may still reset a request before any answer.
    urllib3 counts that as a read error and, as set here, sends the
    request again only for methods whose repetition changes nothing
    (never ``POST``); a refused connection and any HTTP
    answer are left to the caller. Each retry is recorded in ``retried``,
    shared by the copies urllib3 makes of this object.
    """

    def __init__(self, retried=None, **kwargs):
        super().__init__(**kwargs)
        self.retried = [] if retried is None else retried

    def new(self, **kwargs):
        kwargs.setdefault('retried', self.retried)
        return super().new(**kwargs)

    def increment(self, method=None, url=None, *args, **kwargs):
        again = super().increment(method, url, *args, **kwargs)
        self.retried.append('%s %s' % (method, url))
        return again


def retry_resets(conn, attempts=3):
    """Retry ``conn``'s idempotent requests on a reset; their record."""
    policy = ResetRetry(total=None, connect=0, read=attempts, redirect=0,
                        status=0, other=0,
                        respect_retry_after_header=False)
    for adapter in conn.session.session.adapters.values():
        adapter.max_retries = policy
    return policy.retried


class SharedServices:
    """keystone, glance and the network stand-in, for both deployments."""

    def __init__(self, procs, work_dir, db, ports):
        self.procs = procs
        self.dir = work_dir
        self.db = db
        self.ports = ports
        self.keystone_url = 'http://127.0.0.1:%d/v3' % ports['keystone']
        self.glance_url = 'http://127.0.0.1:%d' % ports['glance']
        self.network_url = 'http://127.0.0.1:%d' % ports['network']

    def start_keystone(self):
        conf_dir = os.path.join(self.dir, 'keystone')
        os.makedirs(conf_dir, exist_ok=True)
        write_conf(os.path.join(conf_dir, 'keystone.conf'), {
            'DEFAULT': {'log_file': self.procs.log_path('keystone')},
            'database': {'connection': self.db.database('keystone')},
            'token': {'provider': 'fernet'},
            # bcrypt's lowest cost: a run checks over 400 passwords, each
            # 235 ms of CPU at keystone's default cost (12), 1 ms at 4.
            'identity': {'password_hash_rounds': 4},
            'fernet_tokens': {'key_repository':
                              os.path.join(conf_dir, 'fernet-keys')},
            'credential': {'key_repository':
                           os.path.join(conf_dir, 'credential-keys')},
        })
        manage = [os.path.join(BIN, 'keystone-manage'), '--config-dir',
                  conf_dir]
        owner = ['--keystone-user', 'root', '--keystone-group', 'root']
        run(manage + ['db_sync'])
        run(manage + ['fernet_setup'] + owner)
        run(manage + ['credential_setup'] + owner)
        run(manage + ['bootstrap', '--bootstrap-password', ADMIN_PASSWORD,
                      '--bootstrap-admin-url', self.keystone_url,
                      '--bootstrap-internal-url', self.keystone_url,
                      '--bootstrap-public-url', self.keystone_url,
                      '--bootstrap-region-id', SHARED_REGION])
        self.run_keystone()

    def run_keystone(self):
        """Start keystone, set up by :meth:`start_keystone`."""
        env = dict(os.environ,
                   OS_KEYSTONE_CONFIG_DIR=os.path.join(self.dir, 'keystone'),
                   CLOUD_WSGI_APP='keystone.wsgi.api:application')
        self.procs.start('keystone', gunicorn(
            self.ports['keystone'], 'nova_pcpu_ext.tests.cloud.wsgi'), env=env)
        self.procs.wait_for_http('keystone', self.keystone_url)

    def admin(self, region=SHARED_REGION):
        """An admin's connection; ``.retried``: requests sent again."""
        conn = openstack.connect(
            auth_url=self.keystone_url, username='admin',
            password=ADMIN_PASSWORD, project_name='admin',
            user_domain_name='Default', project_domain_name='Default',
            region_name=region, identity_api_version='3')
        conn.retried = retry_resets(conn)
        return conn

    def register(self, regions, placement_urls, compute_urls):
        """Service users, services and endpoints of every region."""
        conn = self.admin()
        identity = conn.identity
        project = identity.create_project(name='service',
                                          domain_id='default')
        admin_role = identity.find_role('admin')
        for name in ('nova', 'placement', 'glance', 'neutron'):
            user = identity.create_user(name=name, password=SERVICE_PASSWORD,
                                        domain_id='default')
            identity.assign_project_role_to_user(project, user, admin_role)
        shared = regions + [SHARED_REGION]
        urls = {'image': dict.fromkeys(shared, self.glance_url),
                'network': dict.fromkeys(shared, self.network_url),
                'placement': placement_urls, 'compute': compute_urls,
                # bootstrap registered it in the shared region only.
                'identity': dict.fromkeys(regions, self.keystone_url)}
        names = {'image': 'glance', 'network': 'neutron',
                 'placement': 'placement', 'compute': 'nova'}
        for region in regions:
            identity.create_region(id=region)
        for kind, by_region in urls.items():
            service = (identity.find_service('keystone') if kind == 'identity'
                       else identity.create_service(name=names[kind],
                                                    type=kind))
            for region, url in by_region.items():
                for interface in ('public', 'internal'):
                    identity.create_endpoint(
                        service_id=service.id, interface=interface, url=url,
                        region_id=region)

    def start_glance(self):
        conf_dir = os.path.join(self.dir, 'glance')
        stores = {name: os.path.join(conf_dir, name)
                  for name in ('images', 'staging', 'tasks')}
        for path in stores.values():
            os.makedirs(path, exist_ok=True)
        shutil.copy(os.path.join(ETC, 'glance', 'glance-api-paste.ini'),
                    conf_dir)
        write_conf(os.path.join(conf_dir, 'glance-api.conf'), {
            'DEFAULT': {'enabled_backends': 'fs:file',
                        'log_file': self.procs.log_path('glance')},
            'glance_store': {'default_backend': 'fs'},
            'fs': {'filesystem_store_datadir': stores['images']},
            'os_glance_staging_store': {
                'filesystem_store_datadir': stores['staging']},
            'os_glance_tasks_store': {
                'filesystem_store_datadir': stores['tasks']},
            'database': {'connection': self.db.database('glance')},
            'keystone_authtoken': authtoken(self.keystone_url, 'glance'),
            'paste_deploy': {'flavor': 'keystone'},
            'oslo_concurrency': {'lock_path': conf_dir},
        })
        run([os.path.join(BIN, 'glance-manage'), '--config-dir', conf_dir,
             'db_sync'])
        env = dict(os.environ, OS_GLANCE_CONFIG_DIR=conf_dir,
                   CLOUD_WSGI_APP='glance.wsgi.api:application')
        self.procs.start('glance', gunicorn(
            self.ports['glance'], 'nova_pcpu_ext.tests.cloud.wsgi'), env=env)
        self.procs.wait_for_http('glance', self.glance_url)

    def start_network_standin(self):
        self.procs.start('network-standin', [
            sys.executable, '-m', 'nova_pcpu_ext.tests.cloud.network_standin',
            str(self.ports['network'])])
        self.procs.wait_for_http('network-standin', self.network_url)

    def upload_image(self):
        """A 1 MiB raw image of zeros; its id.

        The firmware finds nothing to boot and idles, which is all a
        pinned guest needs to do here.
        """
        image = self.admin().image.create_image(
            name=IMAGE_NAME, data=b'\0' * (1 << 20), disk_format='raw',
            container_format='bare', visibility='public',
            allow_duplicates=True)
        return image.id


class NovaDeployment:
    """placement and Nova of one deployment, in region ``name``."""

    def __init__(self, name, extension, shared, rabbit, ports, libvirt,
                 cell_servers):
        self.name = name
        self.extension = extension
        self.shared = shared
        self.procs, self.db = shared.procs, shared.db
        #: {cell: the MariaDB server of its database}
        self.cell_servers = cell_servers
        self.dir = os.path.join(shared.dir, name)
        self.rabbit = rabbit
        self.ports = ports
        self.placement_url = 'http://127.0.0.1:%d' % ports['placement']
        self.compute_url = 'http://127.0.0.1:%d/v2.1' % ports['nova-api']
        self.nova_conf = os.path.join(self.dir, 'nova.conf')
        self.computes = [c for c in COMPUTES if c.fake or libvirt]
        #: The release each part runs from: 'placement', 'controllers' and
        #: each compute's host.
        self.releases = collections.defaultdict(lambda: releases.CURRENT)
        #: Computes born under the defaults before 2023.1.
        self.born_before_2023_1 = ()

    def service(self, name):
        return '%s-%s' % (self.name, name)

    def run_on(self, release, parts=None):
        """Start ``parts`` (all by default) from ``release`` from now on."""
        for part in parts or ['placement', 'controllers'] + [
                c.host for c in self.computes]:
            self.releases[part] = release

    def start_placement(self, workers=2, access_log=None):
        """Sync placement's database with its release's tool and start it.

        The first time with a new configuration and an empty database.
        """
        conf_dir = os.path.join(self.dir, 'placement')
        if not os.path.exists(conf_dir):
            os.makedirs(conf_dir)
            write_conf(os.path.join(conf_dir, 'placement.conf'), {
                'DEFAULT': {'log_file': self.procs.log_path(
                    self.service('placement'))},
                'placement_database': {'connection': self.db.database(
                    '%s_placement' % self.name)},
                'api': {'auth_strategy': 'keystone'},
                'keystone_authtoken': authtoken(self.shared.keystone_url,
                                                'placement'),
            })
        release = self.releases['placement']
        run([os.path.join(release.bin, 'placement-manage'), '--config-dir',
             conf_dir, 'db', 'sync'])
        env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=conf_dir,
                   CLOUD_WSGI_APP='placement.wsgi.api:application')
        self.procs.start(self.service('placement'), gunicorn(
            self.ports['placement'], 'nova_pcpu_ext.tests.cloud.wsgi',
            workers=workers, access_log=access_log, python=release.python),
            env=env)
        self.procs.wait_for_http(self.service('placement'),
                                 self.placement_url)

    def vhost(self, cell=None):
        """The RabbitMQ virtual host of ``cell``, or of the top level."""
        return self.name if cell is None else '%s-%s' % (self.name, cell)

    def cell_of(self, host):
        return next(c.cell for c in self.computes if c.host == host)

    def cell_conf(self, cell):
        """The nova.conf of ``cell``'s conductor."""
        return os.path.join(self.dir, 'nova-%s.conf' % cell)

    def base_conf(self, cell=None):
        """What every service of ``cell`` (or of the top level) has."""
        keystone = self.shared.keystone_url
        client = dict(authtoken(keystone, 'nova'), region_name=self.name)
        client.pop('www_authenticate_uri')
        # A pooled connection placement's server has just closed as idle
        # fails with a connection reset: retry it, as production should.
        placement = dict(client,
                         connect_retries=str(PLACEMENT_CONNECT_RETRIES))
        return {
            'DEFAULT': {
                'transport_url': self.rabbit.transport_url(self.vhost(cell)),
                'state_path': self.dir,
                'instance_name_template': '%s-%%08x' % self.name,
                'debug': 'False',
            },
            'api': {'auth_strategy': 'keystone'},
            'keystone_authtoken': authtoken(keystone, 'nova'),
            'placement': placement,
            # As devstack sets it; nova-status fails without it.
            'service_user': dict(client, send_service_user_token='True'),
            'glance': {'region_name': self.name},
            'neutron': dict(client, auth_url=keystone),
            'oslo_concurrency': {'lock_path': os.path.join(self.dir, 'lock')},
            'oslo_messaging_notifications': {'driver': 'noop'},
        }

    def configure(self):
        """nova.conf of the top level and of each cell; the cells mapped.

        As devstack writes them: the top level's database is cell0, a
        cell's conductor has no API database.
        """
        os.makedirs(self.dir, exist_ok=True)
        databases = {kind: self.db.database('%s_nova_%s' % (self.name, kind))
                     for kind in ('api', 'cell0')}
        for cell in (None,) + CELLS:
            self.rabbit.add_vhost(self.vhost(cell))
        for cell in CELLS:
            databases[cell] = self.cell_servers[cell].database(
                '%s_nova_%s' % (self.name, cell))
            conf = self.base_conf(cell)
            conf['database'] = {'connection': databases[cell]}
            write_conf(self.cell_conf(cell), conf)
        conf = self.base_conf()
        conf['database'] = {'connection': databases['cell0']}
        conf['api_database'] = {'connection': databases['api']}
        conf['scheduler'] = {'discover_hosts_in_cells_interval': '2'}
        conf['filter_scheduler'] = {'enabled_filters': ','.join((
            'ComputeFilter', 'ComputeCapabilitiesFilter',
            'ImagePropertiesFilter', 'NUMATopologyFilter')),
            # The computes cannot reach the scheduler's virtual host.
            'track_instance_changes': 'False'}
        write_conf(self.nova_conf, conf)
        if self.extension:
            devstack.run_plugin(['stack', 'post-config'], self.dir,
                                NOVA_CONF=self.nova_conf)
        self.manage('api_db', 'sync')
        self.manage('cell_v2', 'map_cell0', '--database_connection',
                    databases['cell0'])
        for cell in CELLS:
            self.manage('cell_v2', 'create_cell', '--name', cell,
                        '--database_connection', databases[cell],
                        '--transport-url',
                        self.rabbit.transport_url(self.vhost(cell)))
        self.sync_cell_databases()

    def sync_cell_databases(self):
        """cell0's database and each cell's, as devstack syncs them."""
        self.manage('db', 'sync')
        for cell in CELLS:
            self.manage('db', 'sync', '--local_cell',
                        conf=self.cell_conf(cell))

    def manage(self, *args, conf=None):
        """nova-manage of the controllers' release on nova.conf."""
        return run([os.path.join(self.releases['controllers'].bin,
                                 'nova-manage'),
                    '--config-file', conf or self.nova_conf] + list(args))

    def command(self, *argv):
        """(exit code, stdout) of an operator command on nova.conf."""
        result = subprocess.run(
            [os.path.join(self.releases['controllers'].bin, argv[0]),
             '--config-file', self.nova_conf] + list(argv[1:]),
            capture_output=True, text=True, env=self.env('controllers'),
            timeout=900)
        return result.returncode, result.stdout

    def upgrade_check(self):
        """(exit code, the JSON) of ``nova-pcpu-ext-status upgrade check``."""
        code, out = self.command('nova-pcpu-ext-status', 'upgrade', 'check',
                                 '--json')
        return code, json.loads(out)

    def heal_isolate(self, *options):
        """(exit code, rows) of ``nova-pcpu-ext-manage heal isolate``."""
        code, out = self.command('nova-pcpu-ext-manage', 'heal', 'isolate',
                                 '--format', 'json', *options)
        return code, json.loads(out)

    def env(self, part, eventlet=False):
        """The environment of a service of ``part``.

        Eventlet mode where asked, or where its release has no native
        threads.
        """
        eventlet = eventlet or not self.releases[part].native_threads
        return dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING=(
            '0' if eventlet else '1'))

    def start_api(self, workers=1, access_log=None):
        # nova-api reads api-paste.ini and nova.conf from there; the
        # paste file comes with each release. In native threads on every
        # release: gunicorn's threads run before eventlet could patch them.
        shutil.copy(os.path.join(self.releases['controllers'].etc, 'nova',
                                 'api-paste.ini'), self.dir)
        api_env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='1',
                       OS_NOVA_CONFIG_DIR=self.dir,
                       CLOUD_WSGI_APP='nova.wsgi.osapi_compute:application')
        self.procs.start(self.service('nova-api'), gunicorn(
            self.ports['nova-api'], 'nova_pcpu_ext.tests.cloud.wsgi',
            workers=workers, access_log=access_log,
            python=self.releases['controllers'].python), env=api_env)

    @staticmethod
    def controllers():
        """The services of the Nova controllers."""
        return ['nova-api', 'nova-superconductor', 'nova-scheduler'] + [
            'nova-conductor-' + cell for cell in CELLS]

    def start_services(self):
        self.start_api()
        # The conductors in native threading, the scheduler in eventlet
        # mode.
        services = [('nova-superconductor', 'nova-conductor', self.nova_conf,
                     False),
                    ('nova-scheduler', 'nova-scheduler', self.nova_conf,
                     True)] + [
            ('nova-conductor-' + cell, 'nova-conductor',
             self.cell_conf(cell), False) for cell in CELLS]
        for service, binary, conf, eventlet in services:
            name = self.service(service)
            self.procs.start(name, [
                os.path.join(self.releases['controllers'].bin, binary),
                '--config-file', conf,
                '--log-file', self.procs.log_path(name)],
                env=self.env('controllers', eventlet))
        self.procs.wait_for_http(self.service('nova-api'), self.compute_url)

    def compute_command(self, compute, conf_path):
        """The command devstack's run_process would be given for n-cpu."""
        bin_dir = self.releases[compute.host].bin
        if not self.extension:
            return [os.path.join(bin_dir, 'nova-compute'), '--config-file',
                    conf_path]
        calls = devstack.run_plugin(['stack', 'extra'], self.dir,
                                    NOVA_CPU_CONF=conf_path,
                                    NOVA_BIN_DIR=bin_dir)
        (call,) = [c for c in calls if c[:2] == ['run_process', 'n-cpu']]
        # run_process n-cpu "COMMAND" GROUP
        command = shlex.split(call[2])
        if compute.host == KOLLA_SWAPPED:
            command[0] = self.swapped_nova_compute(command[0])
        return command

    def swapped_nova_compute(self, script):
        """``script`` copied as ``nova-compute``, as kolla's image swap does.

        Into a directory of its own: the environment's ``nova-compute`` is
        the stock deployment's.
        """
        path = os.path.join(self.dir, 'swapped-bin', 'nova-compute')
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy(script, path)
        return path

    def process_name(self, service):
        """The name the kernel has for ``service``'s process (its comm)."""
        pid = self.procs.pid(self.service(service))
        return next((p.name for p in processes.process_table()
                     if p.pid == pid), None)

    def start_computes(self):
        for compute in self.computes:
            self.write_compute_conf(compute)
            self.start_compute(compute)

    def write_compute_conf(self, compute):
        conf = self.base_conf(compute.cell)
        # As devstack's superconductor layout: a compute reaches neither
        # the API database nor the scheduler.
        conf['workarounds'] = {'disable_group_policy_check_upcall': 'True'}
        conf['filter_scheduler'] = {'track_instance_changes': 'False'}
        conf['DEFAULT'].update(
            host=compute.host,
            log_file=self.procs.log_path(self.service('compute-' +
                                                      compute.host)),
            state_path=os.path.join(self.dir, compute.host),
            instances_path=os.path.join(self.dir, compute.host, 'instances'),
            compute_driver='libvirt.LibvirtDriver',
            update_resources_interval=str(UPDATE_INTERVAL))
        conf_path = conf_path_of(self.dir, compute.host)
        for section, options in compute.options.items():
            conf.setdefault(section, {}).update(options)
        if compute.host in self.born_before_2023_1:
            conf['DEFAULT'].update(INITIAL_RATIOS_BEFORE_2023_1)
        os.makedirs(conf['DEFAULT']['instances_path'], exist_ok=True)
        write_conf(conf_path, conf)

    def start_compute(self, compute, strip_late_check=False):
        """Start a compute; a fake one can run without Nova's late check."""
        conf_path = conf_path_of(self.dir, compute.host)
        release = self.releases[compute.host]
        # privsep's helper of the compute's own release.
        set_option(conf_path, 'nova_sys_admin', 'helper_command',
                   '%s --config-file %s' % (
                       os.path.join(release.bin, 'privsep-helper'),
                       conf_path))
        set_shutdown_sleep(conf_path, release.series)
        command = self.compute_command(compute, conf_path)
        env, cwd = self.env(compute.host, compute.eventlet), None
        if compute.fake:
            # From the release's directory: ``python -m`` puts the working
            # directory first on the path, and the cloud's is a checkout.
            cwd = release.prefix
            command = [release.python, '-m',
                       'nova_pcpu_ext.tests.cloud.fake_compute',
                       str(compute.fake[0]), str(compute.fake[1])] + command
            if strip_late_check:
                env[fake_compute.STRIP_LATE_CHECK] = '1'
        self.procs.start(self.service('compute-' + compute.host), command,
                         env=env, cwd=cwd)

    def switch_extension(self, on):
        """Write the devstack plugin's settings, or remove them.

        Every service reads them when it starts next; ``start_compute``
        runs the plugin's compute step when on.
        """
        self.extension = on
        if on:
            devstack.run_plugin(['stack', 'post-config'], self.dir,
                                NOVA_CONF=self.nova_conf)
            return
        for compute in self.computes:
            # The package stays installed: the recorded uninstall is not
            # run.
            devstack.run_plugin(
                ['clean'], self.dir, NOVA_CONF=self.nova_conf,
                NOVA_CPU_CONF=conf_path_of(self.dir, compute.host))

    def restart_computes(self, update_interval):
        """Stop every compute, set its update interval, start it again.

        Its periodic tasks start at once: Nova delays a service's first
        ones by up to periodic_fuzzy_delay (60 s by default), and a
        compute that had not updated yet 50 s after this restart failed
        the placement restart drill.

        A compute still stopping after 10 seconds is killed: Nova 34's
        libvirt compute in native threading never ends its graceful
        shutdown within 30.
        """
        self.procs.stop(*[self.service('compute-' + compute.host)
                          for compute in self.computes], timeout=10)
        for compute in self.computes:
            conf_path = conf_path_of(self.dir, compute.host)
            set_option(conf_path, 'DEFAULT', 'update_resources_interval',
                       str(update_interval))
            set_option(conf_path, 'DEFAULT', 'periodic_fuzzy_delay', '0')
            self.start_compute(compute)

    def wait_for_computes(self, timeout=180):
        """Until every compute has a hypervisor with a resource provider."""
        conn = self.shared.admin(self.name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for compute in self.computes:
                self.procs.check_alive(self.service('compute-' +
                                                    compute.host))
            hosts = {h.service_details['host'] for h in
                     conn.compute.hypervisors(details=True)}
            providers = {rp.name for rp in
                         conn.placement.resource_providers()}
            if hosts >= {c.host for c in self.computes} and len(
                    providers) >= len(self.computes):
                return
            time.sleep(2)
        raise processes.StartError('%s: computes not all up after %ds' % (
            self.name, timeout))

    def create_flavors(self):
        conn = self.shared.admin(self.name)
        return [conn.compute.create_flavor(
            name=name, ram=ram, vcpus=1, disk=1).id
            for name, ram in (('tiny', 128), ('tiny-alt', 192))]


def conf_path_of(deployment_dir, host):
    return os.path.join(deployment_dir, 'nova-cpu-%s.conf' % host)


def set_shutdown_sleep(path, series):
    """A compute's manager_shutdown_timeout for ``series``."""
    if series == '2026.1':
        set_option(path, 'DEFAULT', 'manager_shutdown_timeout',
                   SHUTDOWN_SLEEP_2026_1)
    else:
        unset_options(path, 'DEFAULT', ['manager_shutdown_timeout'])


def set_option(path, section, name, value):
    """Set an option of a configuration file."""
    with _editing(path) as parser:
        if (section != parser.default_section and
                not parser.has_section(section)):
            parser.add_section(section)
        parser.set(section, name, value)


def unset_options(path, section, names):
    """Remove options from a configuration file, as an operator would."""
    with _editing(path) as parser:
        for name in names:
            parser.remove_option(section, name)


@contextlib.contextmanager
def _editing(path):
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(path)
    yield parser
    with open(path, 'w') as f:
        parser.write(f)
