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

"""What the operator commands cost on a large cloud, old code beside new.

In the cloud tox environment (``tox -e cloud --notest``), as root, with
MariaDB installed (``tools/install-cloud-packages.sh``)::

    .tox/cloud/bin/python -m nova_pcpu_ext.tests.perf.operator_commands \\
        [--hosts 1000] [--servers 5000] [--cells 1] [--down CELL] \\
        [--old REF] [--workers 4]

Starts MariaDB, keystone, glance, the network stand-in, placement and
nova-api (gunicorn, ``--workers`` each), as the loopback cloud does, and
seeds straight into their databases ``--hosts`` hyperthreaded compute
hosts (service, compute node, host mapping, resource provider with
``PCPU`` and ``VCPU``) and ``--servers`` servers spread over them
(instance with its flavor, the image properties Nova stores, info cache,
instance mapping, request spec, allocation). One server in ten forbids
hyperthreads and consumes ``VCPU`` (bug 1889633); one allocation in a
hundred belongs to no server, as a migration's does. With ``--cells N``
the hosts are split into N cells (cell1 to cellN, each a database of its
own on the same MariaDB), in blocks of neighbours, each server in its
host's cell.

Beside the bulk, :data:`CASE_SERVERS` servers of each correctness case
(``--hosts`` 2 at least), every one on a hyperthreaded host:

* booted from volume (no image), forbidding hyperthreads only through
  the volume's image properties, which Nova keeps in the instance's system
  metadata (``image_hw_cpu_thread_policy=isolate``), consuming ``VCPU``;
* isolate, whose flavor was deleted after boot;
* isolate, whose flavor's extra specs were removed after boot, and shared,
  whose flavor was made isolate after boot: the flavor embedded in the
  instance keeps what the server was booted with;
* isolate, evacuated: running on another host than the one whose provider
  holds its allocation (an evacuation ``done``, its source compute not
  started again);
* isolate, migrating: holding its destination's resources while it still
  runs on its source (a cold migration ``migrating``, task
  ``resize_migrating``).

Then runs ``upgrade check``, ``placement audit`` and ``heal isolate
--dry-run`` as processes, this checkout's code and, with ``--old``, the
package at that git ref, on a nova.conf with the Nova databases
(``[api_database]`` and ``[database] connection``), which code that reads
servers through the Compute API ignores. With ``--down CELL``, this
checkout's code runs each command once more with that cell's database
refusing connections (``[pcpu_ext] cell_database_connections`` names a
closed port for it), as a cell down for maintenance. Prints per command
the wall time, the CPU time it and each service used, the SQL statements
MariaDB was sent meanwhile (by the services and the command), and, from the
services' access logs, the requests per endpoint with their p50 and p95
latency. The work directory keeps the seeded cloud: ``--reuse WORK_DIR``
runs the commands on it again, without seeding it again (38 minutes at
10,000 hosts).

The findings of old and new must be the same but for what only code
reading Nova's databases can see. The Compute API shows a server's
embedded flavor and the node it runs on, so both find the isolate servers
whose flavor was deleted or made shared, neither the one made isolate,
and both judge an evacuated or migrating server where it runs. It shows
no image properties of a server booted from volume: reading the databases
finds those too, in the isolate check of ``upgrade check`` (its count of
servers) and as rows of ``heal isolate``, unless the old code reads
Nova's databases too (it has ``nova_pcpu_ext/nova_db.py``). Anything
else that differs fails the run.
"""

import argparse
import collections
import concurrent.futures
import configparser
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid

import pymysql
import requests

from nova_pcpu_ext.tests.cloud import backing
from nova_pcpu_ext.tests.cloud import deploy
from nova_pcpu_ext.tests.cloud import processes
from nova_pcpu_ext.tests.perf import stats
from nova_pcpu_ext.tests import placement_server

NAME = 'scale'
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
ISOLATE = {'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}
#: One server in ISOLATE_EVERY forbids hyperthreads; one allocation in
#: MIGRATION_EVERY is a migration's.
ISOLATE_EVERY = 10
MIGRATION_EVERY = 100
#: Consumers per POST /allocations while seeding.
BATCH = 200
#: Servers of each correctness case.
CASE_SERVERS = 3
#: In the work directory, what ``--reuse`` needs of a seeded cloud.
SEEDED = 'seeded.json'
FROM_VOLUME = 'isolate by volume image, booted from volume'
FLAVOR_DELETED = 'isolate, flavor deleted after boot'
MADE_SHARED = 'isolate, flavor made shared after boot'
MADE_ISOLATE = 'shared, flavor made isolate after boot'
EVACUATED = 'isolate, evacuated'
MIGRATING = 'isolate, migrating'
#: The extra specs of each case's flavor when its servers were booted.
CASES = {FROM_VOLUME: {}, FLAVOR_DELETED: ISOLATE, MADE_SHARED: ISOLATE,
         MADE_ISOLATE: {}, EVACUATED: ISOLATE, MIGRATING: ISOLATE}
#: ``{case: (migration type, status, task state)}`` of the moves in progress
#: from a server's node to the next.
MOVES = {EVACUATED: ('evacuation', 'done', None),
         MIGRATING: ('migration', 'migrating', 'resize_migrating')}
#: The volume's image metadata a server booted from volume was created
#: with: no image ID.
VOLUME_IMAGE = {'properties': {'hw_cpu_thread_policy': 'isolate',
                               'hw_cpu_policy': 'dedicated'}}
SERVER = {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 10}
#: What a server booted from volume holds: its disk is the volume's.
VOLUME_SERVER = {'VCPU': 2, 'MEMORY_MB': 2048}
ISOLATE_CHECK = 'Servers that forbid hyperthreads on hyperthreaded hosts'
#: The commands that judge servers: only the new code sees those booted
#: from volume.
JUDGE_SERVERS = ('upgrade check', 'heal isolate --dry-run')
COMMANDS = (
    ('upgrade check', 'status', ['upgrade', 'check', '--json']),
    ('placement audit', 'manage', ['placement', 'audit', '--format',
                                   'json']),
    ('heal isolate --dry-run', 'manage', ['heal', 'isolate', '--dry-run',
                                          '--format', 'json']),
)


class NoMessaging:
    """nova.conf needs a transport URL; nothing here sends a message."""

    def transport_url(self, vhost):
        return 'rabbit://guest:guest@127.0.0.1:1/%s' % vhost

    def add_vhost(self, name):
        pass


class SeededCloud:
    """placement and nova-api on MariaDB, seeded with a large cloud."""

    def __init__(self, work_dir, workers, ports=None):
        self.dir = work_dir
        self.workers = workers
        self.procs = processes.Processes(work_dir)
        names = ['mariadb', 'keystone', 'glance', 'network', 'placement',
                 'nova-api']
        # A seeded cloud's own: keystone's catalog and nova.conf name them.
        self.ports = ports or {name: placement_server.free_port()
                               for name in names}
        self.access_logs = {
            service: os.path.join(self.procs.log_dir, service + '.access')
            for service in ('placement', 'nova-api')}

    def start(self, seeded=False):
        """Deploy the services, or start those of a ``seeded`` cloud.

        A seeded cloud's commands need no glance and no network: the
        servers are in Nova's database and no command asks about images
        or ports.
        """
        db = backing.MariaDB(self.procs, self.dir, self.ports['mariadb'])
        db.start()
        self.statements = StatementCounter(db.port)
        self.shared = deploy.SharedServices(self.procs, self.dir, db,
                                            self.ports)
        self.nova = deploy.NovaDeployment(
            NAME, False, self.shared, NoMessaging(),
            {'placement': self.ports['placement'],
             'nova-api': self.ports['nova-api']}, libvirt=False)
        if seeded:
            self.shared.run_keystone()
        else:
            self._deploy()
        self.nova.start_placement(self.workers,
                                  self.access_logs['placement'])
        self.nova.start_api(self.workers, self.access_logs['nova-api'])
        self.procs.wait_for_http(self.nova.service('nova-api'),
                                 self.nova.compute_url)
        self.token = self.shared.admin().auth_token

    def _deploy(self):
        self.shared.start_keystone()
        self.shared.register([NAME], {NAME: self.nova.placement_url},
                             {NAME: self.nova.compute_url})
        self.shared.start_glance()
        self.shared.start_network_standin()
        self.image_id = self.shared.upload_image()
        self.nova.configure()

    def stop(self):
        self.procs.stop(*self.procs.running())

    def placement(self, method, url, body=None):
        response = requests.request(
            method, self.nova.placement_url + url, json=body, timeout=60,
            headers={'X-Auth-Token': self.token,
                     'OpenStack-API-Version': 'placement 1.28'})
        if response.status_code >= 400:
            raise RuntimeError('%s %s: %s' % (method, url, response.text))
        return response

    def add_cells(self, cells):
        """Cells cell2 to cell``cells``, each synced as cell1 is."""
        for number in range(2, cells + 1):
            name = 'cell%d' % number
            url = self.nova.db.database('%s_nova_%s' % (NAME, name))
            self.nova.manage('cell_v2', 'create_cell', '--name', name,
                             '--database_connection', url,
                             # Nova refuses a cell of another's transport.
                             '--transport-url', '%s_%s' % (
                                 self.nova.transport_url, name))
            nova_conf = configparser.ConfigParser(interpolation=None)
            nova_conf.read(self.nova.nova_conf)
            nova_conf['database']['connection'] = url
            path = os.path.join(self.dir, '%s.conf' % name)
            with open(path, 'w') as out:
                nova_conf.write(out)
            deploy.run([os.path.join(
                self.nova.releases['controllers'].bin, 'nova-manage'),
                '--config-file', path, 'db', 'sync', '--local_cell'])

    def seed(self, hosts, servers, cells=1):
        """Seed the cloud; ``{what: how many}``."""
        self.add_cells(cells)
        nodes = ['compute%05d' % n for n in range(hosts)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            providers = dict(zip(nodes, pool.map(self._provider, nodes)))
        seeder = NovaSeeder(self.nova.nova_conf, self.image_id)
        seeder.add_hosts(providers)
        consumers = seeder.add_servers(nodes, servers)
        case_consumers, cases = seeder.add_cases(nodes)
        #: Servers only code reading Nova's databases can see.
        self.from_volume = frozenset(cases[FROM_VOLUME])
        migrations = [(str(uuid.uuid4()), {'VCPU': 1}, node) for node in
                      nodes[::max(1, hosts * MIGRATION_EVERY // servers)]]
        allocations = consumers + case_consumers + migrations
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(
                lambda start: self._allocate(
                    allocations[start:start + BATCH], providers),
                range(0, len(allocations), BATCH)))
        return dict({'hosts': hosts, 'servers': servers, 'cells': cells,
                     'isolate servers on VCPU': -(-servers // ISOLATE_EVERY),
                     'consumers that are no server': len(migrations)},
                    **{case: len(found) for case, found in cases.items()})

    def _provider(self, node):
        rp_uuid = str(uuid.uuid4())
        self.placement('POST', '/resource_providers',
                       {'name': node, 'uuid': rp_uuid})
        self.placement('PUT', '/resource_providers/%s/inventories' % rp_uuid,
                       {'resource_provider_generation': 0, 'inventories': {
                           'VCPU': {'total': 64, 'allocation_ratio': 4.0},
                           'PCPU': {'total': 32},
                           'MEMORY_MB': {'total': 524288},
                           'DISK_GB': {'total': 2000}}})
        self.placement('PUT', '/resource_providers/%s/traits' % rp_uuid,
                       {'resource_provider_generation': 1,
                        'traits': ['HW_CPU_HYPERTHREADING']})
        return rp_uuid

    def _allocate(self, allocations, providers):
        project, user = str(uuid.uuid4()), str(uuid.uuid4())
        body = {consumer: {'allocations': {providers[node]: {
            'resources': resources}}, 'project_id': project,
            'user_id': user, 'consumer_generation': None}
            for consumer, resources, node in allocations}
        for _retry in range(4):
            try:
                return self.placement('POST', '/allocations', body)
            except RuntimeError as error:
                # Batches in parallel write the same providers: placement
                # asks to retry when another changed one meanwhile.
                if 'placement.concurrent_update' not in str(error):
                    raise
        return self.placement('POST', '/allocations', body)

    def commands_conf(self, down=None):
        """The commands' nova.conf: placement's, and Nova's databases.

        With the database of the cell ``down`` refusing connections.
        """
        nova_conf = configparser.ConfigParser(interpolation=None)
        nova_conf.read(self.nova.nova_conf)
        path = os.path.join(self.dir, 'commands%s.conf' % (
            '-%s-down' % down if down else ''))
        deploy.write_conf(path, {
            # The connections alone: configparser's sections hold
            # DEFAULT's options too.
            'api_database': {
                'connection': nova_conf['api_database']['connection']},
            'database': {'connection': nova_conf['database']['connection']},
            'filter_scheduler': {
                'available_filters': 'nova_pcpu_ext.scheduler.activate'},
            'placement': {
                'auth_type': 'password',
                'auth_url': self.shared.keystone_url,
                'username': 'admin', 'password': deploy.ADMIN_PASSWORD,
                'project_name': 'admin', 'user_domain_name': 'Default',
                'project_domain_name': 'Default', 'region_name': NAME},
            'pcpu_ext': {'cell_database_connections': (
                '%s=mysql+pymysql://nobody:none@127.0.0.1:1/none' % down)}
            if down else {}})
        return path

    def cpu_seconds(self):
        """``{service: CPU seconds used so far}``, its workers included."""
        groups = {pid: name for name, pid in self.procs.running().items()}
        used = collections.Counter()
        for process in processes.process_table():
            if process.pgid in groups:
                used[groups[process.pgid]] += process.cpu
        return used

    def run(self, code_dir, command, args, conf):
        """Wall time, exit code, stdout, requests, CPU, SQL of one command.

        CPU: ``{service or 'command': seconds}`` used while it ran. SQL: the
        statements MariaDB was sent meanwhile, by the services and the
        command.
        """
        offsets = {service: os.path.getsize(path)
                   for service, path in self.access_logs.items()}
        cpu_before = self.cpu_seconds()
        statements = self.statements.sent()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        argv = [sys.executable, '-c',
                'import sys; from nova_pcpu_ext.cmd.%s import main; '
                'sys.exit(main())' % command, '--config-file', conf] + args
        start = time.monotonic()
        # Not from the checkout: ``-c`` imports from the working directory.
        result = subprocess.run(
            argv, capture_output=True, text=True, cwd=self.dir,
            env=dict(os.environ, PYTHONPATH=code_dir))
        wall = time.monotonic() - start
        cpu = self.cpu_seconds() - cpu_before
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu['command'] = (after.ru_utime + after.ru_stime -
                          children.ru_utime - children.ru_stime)
        # 3 and 4: servers skipped or not judged, as the pages say.
        if result.returncode not in (0, 1, 2, 3, 4) or not result.stdout:
            raise RuntimeError('%s failed: %s' % (args, result.stderr))
        time.sleep(1)  # gunicorn logs a request after answering it
        return wall, result, {
            service: access_records(path, offsets[service])
            for service, path in self.access_logs.items()}, cpu, \
            self.statements.since(statements)


class StatementCounter:
    """MariaDB's count of the statements its clients sent (``Questions``).

    Read on one connection kept open: a new one would send statements of
    its own.
    """

    def __init__(self, port):
        self.connection = pymysql.connect(
            host='127.0.0.1', port=port, user=backing.DB_USER,
            password=backing.DB_PASSWORD, autocommit=True)
        # A reading counts itself.
        first = self.sent()
        self.own = self.sent() - first

    def sent(self):
        with self.connection.cursor() as cursor:
            cursor.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
            return int(cursor.fetchone()[1])

    def since(self, before):
        """Statements sent since reading ``before``, the readings' not."""
        return self.sent() - before - self.own


class NovaSeeder:
    """Nova's database rows of hosts and servers, through Nova's objects."""

    def __init__(self, nova_conf, image_id):
        # Imported here: the harness parses nova.conf for Nova's objects.
        from nova import config
        from nova import context
        from nova.network import model as network_model
        from nova import objects
        from nova import utils
        objects.register_all()
        # Notifications of new services go nowhere: [oslo_messaging_
        # notifications] driver is noop in the deployment's nova.conf.
        config.parse_args(['seed', '--config-file', nova_conf])
        self.objects = objects
        self.context = context
        self.network_model = network_model
        self.utils = utils
        self.admin = context.get_admin_context()
        self.cells = sorted((cell for cell in objects.CellMappingList.get_all(
            self.admin) if not cell.is_cell0()), key=lambda cell: cell.name)
        self.image_id = image_id
        self.nodes = {}
        #: ``{node: its cell}``: neighbours share one, so that a move is
        #: within a cell.
        self.cell_of = {}

    def add_hosts(self, providers):
        for number, node in enumerate(providers):
            self.cell_of[node] = self.cells[
                number * len(self.cells) // len(providers)]
        for node, rp_uuid in providers.items():
            self._add_host(node, rp_uuid)

    def _add_host(self, node, rp_uuid):
        objects = self.objects
        cell = self.cell_of[node]
        with self.context.target_cell(self.admin, cell) as cctxt:
            service = objects.Service(cctxt, host=node, binary='nova-compute',
                                      topic='compute', report_count=0)
            service.create()
            compute_node = objects.ComputeNode(
                cctxt, uuid=rp_uuid, host=node, hypervisor_hostname=node,
                service_id=service.id, vcpus=64, memory_mb=524288,
                local_gb=2000, vcpus_used=0, memory_mb_used=0,
                local_gb_used=0, hypervisor_type='QEMU',
                hypervisor_version=8002000, cpu_info='{}',
                supported_hv_specs=[], cpu_allocation_ratio=4.0,
                ram_allocation_ratio=1.0, disk_allocation_ratio=1.0)
            compute_node.create()
            self.nodes[node] = compute_node.id
        objects.HostMapping(self.admin, host=node,
                            cell_mapping=cell).create()

    def _flavor(self, name, extra_specs):
        flavor = self.objects.Flavor(
            self.admin, name=name, flavorid=name, vcpus=2, memory_mb=2048,
            root_gb=10, ephemeral_gb=0, swap=0, extra_specs=extra_specs)
        flavor.create()
        return flavor

    def _image(self):
        return {'id': self.image_id, 'properties': {
            'hw_machine_type': 'q35', 'hw_disk_bus': 'virtio'}}

    def add_servers(self, nodes, count):
        """``[(server, resources it holds, node)]`` of new servers."""
        flavors = [self._flavor('isolate', ISOLATE), self._flavor('shared',
                                                                  {})]
        servers = [(str(uuid.uuid4()), nodes[n % len(nodes)],
                    flavors[0] if n % ISOLATE_EVERY == 0 else flavors[1],
                    self._image()) for n in range(count)]
        self._create(servers)
        return [(server, SERVER, node) for server, node, _f, _i in servers]

    def _create(self, servers):
        """Create ``[(server, node, flavor, image)]``."""
        # The first alone: it creates the default security group of the
        # admin context's project, None. Created in parallel, the group
        # would be there twice (a unique key lets NULLs repeat), which Nova
        # then fails to read.
        self._server(*servers[0])
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda server: self._server(*server),
                          servers[1:]))

    def add_cases(self, nodes):
        """The servers of each correctness case.

        ``([(server, resources it holds, node)], {case: [server]})``: of a
        server moving from a node to the next, an evacuated one runs on the
        next and holds the source's resources, a migrating one runs on the
        source and holds the next's.
        """
        flavors = {case: self._flavor('case%d' % n, specs) for n, (
            case, specs) in enumerate(CASES.items())}
        cases = collections.defaultdict(list)
        created, consumers, moves = [], [], []
        for case, flavor in flavors.items():
            volume = case == FROM_VOLUME
            for n in range(CASE_SERVERS):
                server = str(uuid.uuid4())
                source, dest = nodes[n % len(nodes)], nodes[(n + 1) % len(
                    nodes)]
                runs_on, held = {EVACUATED: (dest, source),
                                 MIGRATING: (source, dest)}.get(
                                     case, (source, source))
                created.append((server, runs_on, flavor,
                                VOLUME_IMAGE if volume else self._image(),
                                MOVES.get(case, (None, None, None))[2]))
                consumers.append((server, VOLUME_SERVER if volume
                                  else SERVER, held))
                cases[case].append(server)
                if case in MOVES:
                    moves.append((server, flavor, source, dest) +
                                 MOVES[case][:2])
        self._create(created)
        self._change_after_boot(flavors)
        for move in moves:
            self._move(*move)
        return consumers, dict(cases)

    @staticmethod
    def _change_after_boot(flavors):
        """Change the flavors of the cases; instances keep theirs."""
        flavors[FLAVOR_DELETED].destroy()
        flavors[MADE_SHARED].extra_specs = {}
        flavors[MADE_SHARED].save()
        flavors[MADE_ISOLATE].extra_specs = dict(ISOLATE)
        flavors[MADE_ISOLATE].save()

    def _move(self, server, flavor, source, node, kind, status):
        """The record of a move of ``server`` to ``node``."""
        with self.context.target_cell(self.admin,
                                      self.cell_of[source]) as cctxt:
            self.objects.Migration(
                cctxt, instance_uuid=server, migration_type=kind,
                status=status, source_compute=source, source_node=source,
                dest_compute=node, dest_node=node,
                dest_compute_id=self.nodes[node],
                old_instance_type_id=flavor.id,
                new_instance_type_id=flavor.id,
                project_id='project-%s' % node,
                user_id='user-%s' % node).create()

    def _server(self, server, node, flavor, image, task_state=None):
        objects = self.objects
        project, user = 'project-%s' % node, 'user-%s' % node
        # Booted from volume: no image, the volume's image metadata in
        # its place.
        image_ref = image.get('id', '')
        cell = self.cell_of[node]
        with self.context.target_cell(self.admin, cell) as cctxt:
            objects.Instance(
                cctxt, uuid=server, project_id=project, user_id=user,
                host=node, node=node, compute_id=self.nodes[node],
                vm_state='active', task_state=task_state, power_state=1,
                image_ref=image_ref,
                flavor=flavor, old_flavor=None, new_flavor=None,
                instance_type_id=flavor.id, vcpus=flavor.vcpus,
                memory_mb=flavor.memory_mb, root_gb=flavor.root_gb,
                ephemeral_gb=0, display_name='seeded',
                system_metadata=self.utils.get_system_metadata_from_image(
                    image, flavor),
                info_cache=objects.InstanceInfoCache(
                    network_info=self.network_model.NetworkInfo())).create()
            if not image_ref:
                objects.BlockDeviceMapping(
                    cctxt, instance_uuid=server, source_type='volume',
                    destination_type='volume', volume_id=str(uuid.uuid4()),
                    boot_index=0, device_name='/dev/vda',
                    delete_on_termination=False).create()
        objects.InstanceMapping(
            self.admin, instance_uuid=server, cell_mapping=cell,
            project_id=project, user_id=user,
            queued_for_delete=False).create()
        objects.RequestSpec.from_components(
            self.admin, server, objects.ImageMeta.from_dict(image), flavor,
            None, None, {}, None, None, project_id=project,
            user_id=user).create()


def access_records(path, offset):
    """``[(endpoint, status, seconds)]`` of the access log after ``offset``.

    An endpoint is the method and path, UUIDs replaced, and the query's
    parameter names.
    """
    records = []
    with open(path) as log:
        log.seek(offset)
        for line in log:
            status, micros, method, url, _version = line.split()
            path_, _sep, query = url.partition('?')
            names = sorted({pair.split('=')[0] for pair in query.split('&')
                            if pair})
            records.append(('%s %s%s' % (
                method, re.sub('[0-9a-f-]{36}', '{id}', path_),
                '?' + '&'.join(names) if names else ''), int(status),
                int(micros) / 1e6))
    return records


def old_code(ref, work_dir):
    """The package at git ``ref``, unpacked; its directory."""
    target = tempfile.mkdtemp(prefix='old-', dir=work_dir)
    archive = subprocess.run(['git', '-C', REPO, 'archive', ref,
                              'nova_pcpu_ext'], check=True,
                             capture_output=True).stdout
    subprocess.run(['tar', '-x', '-C', target], input=archive, check=True)
    found = subprocess.run(
        [sys.executable, '-c', 'import nova_pcpu_ext; '
         'print(nova_pcpu_ext.__file__)'], capture_output=True, text=True,
        cwd=work_dir, env=dict(os.environ, PYTHONPATH=target),
        check=True).stdout
    if not found.startswith(target):
        sys.exit('the old code is not what Python imports: %s' % found)
    return target


def keep_output(work_dir, name, design, result):
    """Write a command's output to the work directory, to read it later."""
    path = os.path.join(work_dir, '%s-%s.out' % (
        re.sub(r'\W+', '-', name).strip('-'), design))
    with open(path, 'w') as out:
        out.write(result.stdout + result.stderr)


def findings(name, result, hidden=frozenset()):
    """What a command found, comparable between old and new code.

    Less what it found of ``hidden``, servers the other code cannot see:
    their number in the count of the isolate check (whose list of servers
    shows only some), their rows, and with the rows those it has none of.
    Without the status of a row of a server with a task in progress: read
    from Nova's databases, it is its ``vm_state``'s (see
    :data:`nova_pcpu_ext.nova_db.STATUS`), the Compute API's names the task
    (:func:`_comparable`).
    """
    output = json.loads(result.stdout)
    # NOTE: not the exit codes, which differ by release where the same is
    # found (heal isolate's 3 for servers skipped was 1 before 2.0.0).
    if name == 'upgrade check':
        return [_check(check, len(hidden)) for check in output['checks']]
    return sorted(
        json.dumps(_comparable(row), sort_keys=True)
        for row in output if row.get('server') not in hidden), sorted(
            hidden - {row.get('server') for row in output})


def _comparable(row):
    """A row of ``heal isolate`` without what only newer code shows.

    Its cell, and that a destination was sought in it (since 2.0.0).
    """
    row = {key: value for key, value in row.items() if key != 'cell'}
    row['result'] = row['result'].replace(' in its cell', '')
    if '(task ' in row['result']:
        row['status'] = None
    return row


def _check(check, hidden):
    """``(check, result)``; the isolate check's count of servers too.

    Less ``hidden``: the count of the servers the other code cannot see.
    """
    if check['check'] != ISOLATE_CHECK:
        return check['check'], check['result']
    count = re.match(r'(\d+) servers', check['details'] or '')
    return check['check'], check['result'], (
        int(count.group(1)) - hidden if count else None)


def report(design, name, wall, requests_by_service, cpu, statements):
    print('%s, %s: %.1f s' % (name, design, wall))
    print('  CPU s   %s' % ', '.join(
        '%s %.1f' % item for item in sorted(cpu.items()) if item[1] >= 0.1))
    print('  SQL     %d statements' % statements)
    for service, records in requests_by_service.items():
        by_endpoint = collections.defaultdict(list)
        for endpoint, status, seconds in records:
            if status >= 500:
                sys.exit('%s, %s: %s answered %d to %s: see the logs' % (
                    name, design, service, status, endpoint))
            by_endpoint[endpoint].append(seconds)
        for endpoint, times in sorted(by_endpoint.items()):
            print('  %-9s %6d  p50 %6.1f ms  p95 %6.1f ms  %s' % (
                service, len(times), stats.median(times) * 1000,
                stats.p95(times) * 1000, endpoint))
    return {'wall s': round(wall, 1), 'requests': {
        service: len(records) for service, records in
        requests_by_service.items()}, 'CPU s': {
            service: round(seconds, 1) for service, seconds in cpu.items()},
        'SQL statements': statements}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--servers', type=int, default=5000)
    parser.add_argument('--cells', type=int, default=1,
                        help='cells the hosts are split into')
    parser.add_argument('--down', metavar='CELL',
                        help='also run this checkout\'s code with the '
                             'database of this cell refusing connections')
    parser.add_argument('--workers', type=int, default=4,
                        help='gunicorn workers of placement and nova-api')
    parser.add_argument('--old', metavar='REF',
                        help='also run the package at this git ref')
    parser.add_argument('--work-dir')
    parser.add_argument('--reuse', metavar='WORK_DIR',
                        help='the seeded cloud of an earlier run, not seeded '
                             'again (--hosts and --servers are its)')
    args = parser.parse_args()
    if args.hosts < 2:
        parser.error('--hosts: 2 at least, for an evacuated server')
    if not 1 <= args.cells <= args.hosts // 2:
        parser.error('--cells: 1 to half the hosts')
    work_dir = args.reuse or args.work_dir or tempfile.mkdtemp(
        prefix='operator-cost-')
    seeded_path = os.path.join(work_dir, SEEDED)
    seeded = None
    if args.reuse:
        if not os.path.exists(seeded_path):
            parser.error('--reuse: %s holds no seeded cloud' % work_dir)
        with open(seeded_path) as f:
            seeded = json.load(f)
    designs = {'new': REPO}
    old_reads_databases = False
    if args.old:
        designs['old'] = old_code(args.old, work_dir)
        old_reads_databases = os.path.exists(os.path.join(
            designs['old'], 'nova_pcpu_ext', 'nova_db.py'))
    cloud = SeededCloud(work_dir, args.workers,
                        seeded and seeded['ports'])
    results = {}
    try:
        cloud.start(seeded=bool(seeded))
        if seeded:
            results['cloud'] = seeded['cloud']
            cloud.from_volume = frozenset(seeded['from_volume'])
        else:
            start = time.monotonic()
            results['cloud'] = cloud.seed(args.hosts, args.servers,
                                          args.cells)
            results['cloud']['seeded in s'] = round(time.monotonic() - start)
            with open(seeded_path, 'w') as out:
                json.dump({'ports': cloud.ports, 'cloud': results['cloud'],
                           'from_volume': sorted(cloud.from_volume)}, out)
        print(json.dumps(results['cloud']))
        conf = cloud.commands_conf()
        for name, command, command_args in COMMANDS:
            found = {}
            for design, code_dir in designs.items():
                wall, result, requests_by_service, cpu, sql = cloud.run(
                    code_dir, command, command_args, conf)
                keep_output(work_dir, name, design, result)
                found[design] = findings(
                    name, result, cloud.from_volume if design == 'new' and
                    name in JUDGE_SERVERS and not old_reads_databases
                    else frozenset())
                results['%s, %s' % (name, design)] = report(
                    design, name, wall, requests_by_service, cpu, sql)
            if len(set(map(str, found.values()))) > 1:
                sys.exit('%s: the old and new code found different things '
                         '(those only the new can see left out): %s; their '
                         'output is in %s' % (name, found, work_dir))
            if args.down:
                design = 'new, %s down' % args.down
                wall, result, requests_by_service, cpu, sql = cloud.run(
                    REPO, command, command_args,
                    cloud.commands_conf(args.down))
                keep_output(work_dir, name, design, result)
                results['%s, %s' % (name, design)] = report(
                    design, name, wall, requests_by_service, cpu, sql)
    finally:
        cloud.stop()
    with open(os.path.join(work_dir, 'results.json'), 'w') as out:
        json.dump(results, out, indent=2)
    print('results in %s' % os.path.join(work_dir, 'results.json'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
