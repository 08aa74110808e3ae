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

"""kolla's images built with the recipe in ``deploy/kolla``.

For kolla 21, 22 and 23, the releases of Nova 2025.2, 2026.1 and 2026.2,
each installed from the package index into a venv of its own: kolla-build
renders the Dockerfiles of nova-base, nova-compute and nova-scheduler with
the recipe's template override, as for a build, for kolla's Rocky Linux
(its default), Debian and Ubuntu bases (no container engine is needed for
that). Then the swaps each release rendered for Debian run in a venv laid
out like the image's ``/var/lib/kolla/venv``, and the image's
``nova-compute`` and ``nova-scheduler`` are started as kolla-ansible
starts them and found by the release's own health check.

What is each series' own here: kolla's release (its ``OPENSTACK_RELEASE``
is checked), its Dockerfile templates (the blocks the override fills, where
they fall, how nova-base installs the plugins) and its health check script.
What is not: the Nova that runs the swapped commands is this environment's
(2026.2, eventlet off) on this environment's Python, not the image's; Nova
of each series with the package is tested by the ``py3xx-novaSERIES``
environments.
"""

import http.server
from importlib import metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tarfile
import threading
import time

import fixtures
import testtools

from nova_pcpu_ext.tests.deploy.test_recipes import recipe
from nova_pcpu_ext.tests.functional.test_console_scripts import (
    SchedulerProcessesLock)

#: The kolla release of each maintained Nova series.
KOLLA_RELEASES = {
    '2025.2': '21.3.0',
    '2026.1': '22.2.0',
    '2026.2': '23.0.0',
}
KOLLA_VENV = '/var/lib/kolla/venv'
IMAGES = ('nova-base', 'nova-compute', 'nova-scheduler')
SERVICES = ('nova-compute', 'nova-scheduler')
#: Each swap in the override is the line after such a comment.
SWAP_MARKER = re.compile(r'^# nova-pcpu-ext: .*\n(RUN .*)$', re.MULTILINE)
SWAPS = {
    'nova-compute': 'RUN cp %(venv)s/bin/nova-pcpu-ext-compute '
                    '%(venv)s/bin/nova-compute' % {'venv': KOLLA_VENV},
    'nova-scheduler': 'RUN cp %(venv)s/bin/nova-pcpu-ext-scheduler '
                      '%(venv)s/bin/nova-scheduler' % {'venv': KOLLA_VENV},
}
PLUGINS_INSTALL = ('pip --no-cache-dir install --upgrade '
                   '-c /requirements/upper-constraints.txt /plugins/*')
#: What each service logs when it runs the extension, the last line last.
ACTIVATION_LINES = {
    'nova-compute': (
        '[pcpu_ext] resource_tracker_mixins: loaded allocation_ratios',
        '[pcpu_ext] report_client: loaded serialized',
        'nova-pcpu-ext: nova.compute.resource_tracker.ResourceTracker '
        'replaced',
        'nova-pcpu-ext: nova.scheduler.client.report.SchedulerReportClient '
        'replaced',
        ': active in nova-compute',
    ),
    'nova-scheduler': (
        '[pcpu_ext] request_filters: loaded isolate_vcpu_fallback',
        'nova-pcpu-ext: nova.scheduler.utils.resources_from_request_spec '
        'replaced',
        ': active in nova-scheduler',
    ),
}
#: nova-base's parents, and the nova images.
KEPT_IMAGE_DIRECTORIES = ('base', 'openstack-base', 'nova')
IMAGES_FOUND = re.compile(r'Found the container image folder at (\S+)')


def kolla_venv(version, path):
    """A venv with kolla ``version``, as pip installs it; its path.

    Its images directory keeps only the nova images and their parents:
    kolla-build renders the template of every image it finds, whichever
    it is asked to build (about 8 CPU seconds a base; 1 trimmed), and
    renders each on its own, so the nova images' Dockerfiles come out the
    same (compared with a render from kolla's whole directory, byte for
    byte, for each release and base tested here).
    """
    venv = venv_over_this_environment(path)
    run(sys.executable, '-m', 'pip', '--python',
        os.path.join(venv, 'bin', 'python'), 'install', '--quiet',
        '--no-deps', '--ignore-installed', 'kolla==' + version)
    images_dir = run(os.path.join(venv, 'bin', 'python'), '-c',
                     'from kolla.image import kolla_worker; '
                     'print(kolla_worker.KollaWorker._get_images_dir(None))')
    for entry in os.scandir(images_dir.strip()):
        if entry.is_dir() and entry.name not in KEPT_IMAGE_DIRECTORIES:
            shutil.rmtree(entry.path)
    return venv


def render(kolla, base, work_dir):
    """The Dockerfiles kolla-build in venv ``kolla`` renders.

    :returns: ``({image: Dockerfile text}, kolla's images directory)``
    """
    output = run(os.path.join(kolla, 'bin', 'kolla-build'),
                 '--config-file', recipe('kolla', 'kolla-build.conf'),
                 '--template-only', '--work-dir', work_dir,
                 '--template-override',
                 recipe('kolla', 'template-overrides.j2'),
                 '--base', base, '^(%s)$' % '|'.join(IMAGES),
                 stderr=subprocess.STDOUT)
    (images_dir,) = IMAGES_FOUND.findall(output)
    # NOTE: the release's own templates, not another kolla's on the path.
    assert images_dir.startswith(kolla + os.sep), output
    dockerfiles = {}
    for image in IMAGES:
        with open(os.path.join(work_dir, 'docker', 'nova', image,
                               'Dockerfile')) as dockerfile:
            dockerfiles[image] = dockerfile.read()
    return dockerfiles, images_dir


class _KollaImagesChecks:
    """For a series and a base: what its kolla renders with the recipe."""

    series = None
    base = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        work_dir = fixtures.TempDir()
        work_dir.setUp()
        cls.addClassCleanup(work_dir.cleanUp)
        kolla = kolla_venv(KOLLA_RELEASES[cls.series],
                           os.path.join(work_dir.path, 'kolla'))
        cls.openstack_release = run(
            os.path.join(kolla, 'bin', 'python'), '-c',
            'from kolla.common import config; '
            'print(config.OPENSTACK_RELEASE)').strip()
        cls.dockerfiles, cls.images_dir = render(
            kolla, cls.base, os.path.join(work_dir.path, 'work'))

    def test_kolla_release_of_the_series(self):
        self.assertEqual(self.series, self.openstack_release)

    def test_nova_base_installs_the_plugin(self):
        dockerfile = self.dockerfiles['nova-base']
        self.assertIn('ADD plugins-archive /', dockerfile)
        self.assertIn(PLUGINS_INSTALL, dockerfile)

    def test_services_run_the_extension(self):
        """The swap, last, in the series' images built on nova-base."""
        for image, swap in SWAPS.items():
            dockerfile = self.dockerfiles[image]
            self.assertRegex(dockerfile.splitlines()[0],
                             r'^FROM \S+/nova-base:', image)
            self.assertEqual([swap], SWAP_MARKER.findall(dockerfile), image)
            # After every installation in the image, before its user.
            swapped_at = dockerfile.index(swap)
            self.assertLess(dockerfile.rfind('pip'), swapped_at, image)
            self.assertLess(swapped_at, dockerfile.rindex('USER nova'),
                            image)


class _KollaServicesRun:
    """The swaps as the series' kolla rendered them, run and started."""

    def test_swapped_services_run_the_extension(self):
        venv = kolla_like_venv(self.useFixture(fixtures.TempDir()).path)
        for service in SERVICES:
            for swap in SWAP_MARKER.findall(self.dockerfiles[service]):
                # Exactly as rendered, in this venv instead of the image's.
                run('sh', '-c', swap.replace(KOLLA_VENV, venv)
                    .removeprefix('RUN '))
        bus = self.useFixture(MessageBusStandIn())
        # The scheduler asks placement for its API versions, and finds its
        # service record and the cells in the databases, before it listens
        # on the bus.
        placement = self.useFixture(PlacementStandIn())
        home = self.useFixture(fixtures.TempDir()).path
        databases = nova_databases(home)

        # NOTE: the test workers and other test runs on this host share the
        # lock of the tests that run or look for scheduler processes.
        self.useFixture(SchedulerProcessesLock())
        processes, log_files = {}, {}
        for service in SERVICES:
            log_files[service] = os.path.join(home, service + '.log')
            # NOTE: in the service's own configuration directory: read
            # only if the program is still nova-compute or nova-scheduler.
            conf_d = os.path.join(home, '.nova', service + '.conf.d')
            os.makedirs(conf_d)
            with open(os.path.join(conf_d, 'kolla.conf'), 'w') as conf:
                conf.write(
                    '[DEFAULT]\nlog_file = %s\n'
                    'transport_url = rabbit://nova:nova@127.0.0.1:%d/\n'
                    'compute_driver = fake.FakeDriver\n'
                    '[scheduler]\nworkers = 1\n'
                    '[placement]\nauth_type = none\n'
                    'endpoint_override = %s\n%s' % (
                        log_files[service], bus.port, placement.url,
                        databases))
            # As kolla_start runs the command of kolla-ansible's
            # config.json.
            process = subprocess.Popen(
                [service], env=dict(
                    os.environ, HOME=home,
                    PATH=os.path.join(venv, 'bin') + os.pathsep +
                    os.environ['PATH']),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            self.addCleanup(process.wait, 30)
            self.addCleanup(process.kill)
            processes[service] = process

        health_check = os.path.join(self.images_dir, 'base',
                                    'healthcheck_port')
        for service, process in processes.items():
            lines = ACTIVATION_LINES[service]
            log = wait_for_log(log_files[service], lines[-1])
            for line in lines:
                self.assertEqual(1, log.count(line), log)
            # NOTE: the scheduler's launcher retitles the process
            # 'nova-scheduler: master process [...]', of which the kernel
            # keeps 15 characters.
            with open('/proc/%d/comm' % process.pid) as comm:
                self.assertEqual(service, comm.read().strip().rstrip(':'))
            self.assertTrue(
                kolla_health_check(health_check, service, bus.port,
                                   process),
                'healthcheck_port %s %d failed: %s' % (
                    service, bus.port, read(log_files[service])))
            self.assertIsNone(process.poll(), '%s stopped: %s' % (
                service, read(log_files[service])))


class Kolla21DebianImagesTest(_KollaServicesRun, _KollaImagesChecks,
                              testtools.TestCase):
    """kolla 21 (2025.2), Debian 12 base."""

    series = '2025.2'
    base = 'debian'


class Kolla21UbuntuImagesTest(_KollaImagesChecks, testtools.TestCase):
    """kolla 21 (2025.2), Ubuntu 24.04 base."""

    series = '2025.2'
    base = 'ubuntu'


class Kolla21RockyImagesTest(_KollaImagesChecks, testtools.TestCase):
    """kolla 21 (2025.2), Rocky Linux 10 base, kolla's default."""

    series = '2025.2'
    base = 'rocky'


class Kolla22DebianImagesTest(_KollaServicesRun, _KollaImagesChecks,
                              testtools.TestCase):
    """kolla 22 (2026.1), Debian 13 base."""

    series = '2026.1'
    base = 'debian'


class Kolla22UbuntuImagesTest(_KollaImagesChecks, testtools.TestCase):
    """kolla 22 (2026.1), Ubuntu 24.04 base."""

    series = '2026.1'
    base = 'ubuntu'


class Kolla22RockyImagesTest(_KollaImagesChecks, testtools.TestCase):
    """kolla 22 (2026.1), Rocky Linux 10 base, kolla's default."""

    series = '2026.1'
    base = 'rocky'


class Kolla23DebianImagesTest(_KollaServicesRun, _KollaImagesChecks,
                              testtools.TestCase):
    """kolla 23 (2026.2), Debian 13 base."""

    series = '2026.2'
    base = 'debian'


class Kolla23UbuntuImagesTest(_KollaImagesChecks, testtools.TestCase):
    """kolla 23 (2026.2), Ubuntu 24.04 base."""

    series = '2026.2'
    base = 'ubuntu'


class Kolla23RockyImagesTest(_KollaImagesChecks, testtools.TestCase):
    """kolla 23 (2026.2), Rocky Linux 10 base, kolla's default."""

    series = '2026.2'
    base = 'rocky'


def venv_over_this_environment(venv):
    """A venv without packages of its own that imports this environment's.

    Packages installed into it come before this environment's.
    """
    # NOTE: without pip and its setuptools, which would shadow this
    # environment's for a build; this environment's pip installs.
    run(sys.executable, '-m', 'venv', '--without-pip', venv)
    site_packages = run(os.path.join(venv, 'bin', 'python'), '-c',
                        'import sysconfig; '
                        'print(sysconfig.get_path("purelib"))').strip()
    with open(os.path.join(site_packages, 'deps.pth'), 'w') as pth:
        pth.write(sysconfig.get_path('purelib') + '\n')
    return venv


def kolla_like_venv(path):
    """A venv with Nova and the package, as in kolla's nova-base image.

    The package goes in as kolla puts a plugin in: an sdist built from the
    checkout, unpacked under ``plugins/`` and installed with pip. Nova's
    dependencies come from this environment; Nova and the package are
    installed into the venv, console scripts and all.
    """
    source = os.path.join(path, 'src')
    root = recipe('..')
    for name in ('setup.py', 'setup.cfg', 'README.rst', 'requirements.txt'):
        os.makedirs(source, exist_ok=True)
        shutil.copy(os.path.join(root, name), source)
    shutil.copytree(os.path.join(root, 'nova_pcpu_ext'),
                    os.path.join(source, 'nova_pcpu_ext'),
                    ignore=shutil.ignore_patterns('__pycache__'))
    dist = os.path.join(path, 'dist')
    # NOTE: the copy has no git history for pbr to take a version from.
    run(sys.executable, '-m', 'build', '--sdist', '--no-isolation',
        '--outdir', dist, source,
        PBR_VERSION=metadata.version('nova-pcpu-ext'))
    (sdist,) = os.listdir(dist)
    plugins = os.path.join(path, 'plugins')
    # NOTE: kolla accepts a plugin only as a directory or a tar archive.
    with tarfile.open(os.path.join(dist, sdist)) as archive:
        archive.extractall(plugins, filter='data')

    venv = venv_over_this_environment(os.path.join(path, 'venv'))
    # NOTE: --ignore-installed: pip sees this environment's Nova through
    # the .pth file and would install nothing. --no-compile: the services
    # compile only the modules they import, and Nova has many more.
    run(sys.executable, '-m', 'pip', '--python',
        os.path.join(venv, 'bin', 'python'), 'install', '--quiet',
        '--no-deps', '--ignore-installed', '--no-build-isolation',
        '--no-compile', 'nova==%s' % metadata.version('nova'),
        *[os.path.join(plugins, name) for name in os.listdir(plugins)])
    return venv


def run(*command, stderr=subprocess.PIPE, **environ):
    """The output of ``command``; its error output if it fails.

    ``stderr=subprocess.STDOUT`` adds the error output to the output.
    ``environ`` adds to the environment of the command.
    """
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=stderr,
                            text=True, timeout=600, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, **environ))
    if result.returncode:
        raise AssertionError('%s failed: %s' % (
            ' '.join(command), result.stderr or result.stdout))
    return result.stdout


def nova_databases(path):
    """Nova's API and cell databases in ``path``, as configuration lines.

    The tables as Nova's models define them: the scheduler needs its
    service record and the cell mappings, not the migrations' history.
    """
    connections = {
        section: 'sqlite:///' + os.path.join(path, section + '.sqlite')
        for section in ('api_database', 'database')}
    run(sys.executable, '-c', """if True:
        import sqlalchemy
        from nova.db.api import models as api
        from nova.db.main import models as main
        for models, url in ((api, %r), (main, %r)):
            models.BASE.metadata.create_all(sqlalchemy.create_engine(url))
        """ % (connections['api_database'], connections['database']))
    return ''.join('[%s]\nconnection = %s\n' % item
                   for item in connections.items())


def read(path):
    if not os.path.exists(path):
        return ''
    with open(path) as text:
        return text.read()


class MessageBusStandIn(fixtures.Fixture):
    """A port that accepts connections, as RabbitMQ's does, and holds them.

    kolla's health check of nova-compute looks for a connection of the
    named process to RabbitMQ's port; nova-compute connects and waits for
    a conductor, which is all this test needs of it.
    """

    def _setUp(self):
        self.server = socket.create_server(('127.0.0.1', 0))
        self.addCleanup(self.server.close)
        self.port = self.server.getsockname()[1]
        self.connections = []
        self.addCleanup(self._close_connections)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.connections.append(self.server.accept()[0])
            except OSError:
                return  # closed

    def _close_connections(self):
        for connection in self.connections:
            connection.close()


class PlacementStandIn(fixtures.Fixture):
    """Placement's version document at its root, and nothing else."""

    DOCUMENT = json.dumps({'versions': [{
        'id': 'v1.0', 'min_version': '1.0', 'max_version': '1.39',
        'status': 'CURRENT', 'links': [{'rel': 'self', 'href': ''}]}]})

    class Handler(http.server.BaseHTTPRequestHandler):

        def do_GET(self):
            body = PlacementStandIn.DOCUMENT.encode()
            self.send_response(200 if self.path == '/' else 404)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    def _setUp(self):
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                 self.Handler)
        self.addCleanup(server.server_close)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.shutdown)
        self.url = 'http://127.0.0.1:%d/' % server.server_address[1]


def wait_for_log(path, until, seconds=120):
    deadline = time.monotonic() + seconds
    text = ''
    while time.monotonic() < deadline and until not in text:
        time.sleep(0.5)
        if os.path.exists(path):
            with open(path) as log:
                text = log.read()
    return text


def kolla_health_check(script, name, port, process, seconds=60):
    """Whether kolla's ``healthcheck_port`` passes within ``seconds``.

    ``False`` as soon as ``process`` has stopped.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if subprocess.run(['bash', script, name, str(port)],
                          timeout=60).returncode == 0:
            return True
        time.sleep(1)
    return False
