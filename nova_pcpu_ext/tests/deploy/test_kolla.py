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

kolla-build renders the Dockerfiles of nova-base, nova-compute and
nova-scheduler with the recipe's template override, as for a build, for
kolla's Debian and Ubuntu bases (no container engine is needed for that).
Then the rendered swap runs in a venv laid out like the image's
``/var/lib/kolla/venv``, and the image's ``nova-compute`` is started as
kolla-ansible starts it and found by kolla's own health check.
"""

from importlib import metadata
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
import kolla
import testtools

from nova_pcpu_ext.tests.deploy.test_recipes import recipe

KOLLA_VENV = '/var/lib/kolla/venv'
IMAGES = ('nova-base', 'nova-compute', 'nova-scheduler')
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
ACTIVATION_LINES = (
    '[pcpu_ext] resource_tracker_mixins: loaded allocation_ratios',
    '[pcpu_ext] report_client: loaded serialized',
    'nova-pcpu-ext: nova.compute.resource_tracker.ResourceTracker replaced',
    'nova-pcpu-ext: nova.scheduler.client.report.SchedulerReportClient '
    'replaced',
)


def render(base, work_dir):
    """``{image: Dockerfile text}`` as kolla-build renders them."""
    run(os.path.join(sysconfig.get_path('scripts'), 'kolla-build'),
        '--config-file', recipe('kolla', 'kolla-build.conf'),
        '--template-only', '--work-dir', work_dir,
        '--template-override', recipe('kolla', 'template-overrides.j2'),
        '--base', base, '^(%s)$' % '|'.join(IMAGES))
    dockerfiles = {}
    for image in IMAGES:
        with open(os.path.join(work_dir, 'docker', 'nova', image,
                               'Dockerfile')) as dockerfile:
            dockerfiles[image] = dockerfile.read()
    return dockerfiles


class _KollaImagesChecks:
    """For each base: what kolla-build renders with the recipe."""

    base = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        work_dir = fixtures.TempDir()
        work_dir.setUp()
        cls.addClassCleanup(work_dir.cleanUp)
        cls.dockerfiles = render(cls.base, work_dir.path)

    def test_nova_base_installs_the_plugin(self):
        dockerfile = self.dockerfiles['nova-base']
        self.assertIn('ADD plugins-archive /', dockerfile)
        self.assertIn(PLUGINS_INSTALL, dockerfile)

    def test_services_run_the_extension(self):
        """The swap, last, in images built on nova-base."""
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


class KollaDebianImagesTest(_KollaImagesChecks, testtools.TestCase):
    """kolla 2026.2's default base, Debian 13 (Python 3.13)."""

    base = 'debian'

    def test_swapped_nova_compute_runs_the_extension(self):
        venv = kolla_like_venv(self.useFixture(fixtures.TempDir()).path)
        for swap in SWAP_MARKER.findall(self.dockerfiles['nova-compute']):
            # Exactly as rendered, in this venv instead of the image's.
            run('sh', '-c', swap.replace(KOLLA_VENV, venv)
                .removeprefix('RUN '))
        bus = self.useFixture(MessageBusStandIn())
        home = self.useFixture(fixtures.TempDir()).path
        log_file = os.path.join(home, 'nova-compute.log')
        # NOTE: in nova-compute's own configuration directory: read only
        # if the program is still nova-compute.
        conf_d = os.path.join(home, '.nova', 'nova-compute.conf.d')
        os.makedirs(conf_d)
        with open(os.path.join(conf_d, 'kolla.conf'), 'w') as conf:
            conf.write('[DEFAULT]\nlog_file = %s\n'
                       'transport_url = rabbit://nova:nova@127.0.0.1:%d/\n'
                       'compute_driver = fake.FakeDriver\n' % (
                           log_file, bus.port))

        # As kolla_start runs the command of kolla-ansible's config.json.
        process = subprocess.Popen(
            ['nova-compute'], env=dict(
                os.environ, HOME=home,
                PATH=os.path.join(venv, 'bin') + os.pathsep +
                os.environ['PATH']),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.addCleanup(process.wait, 30)
        self.addCleanup(process.kill)

        log = wait_for_log(log_file, ACTIVATION_LINES[-1])
        for line in ACTIVATION_LINES:
            self.assertEqual(1, log.count(line), log)
        with open('/proc/%d/comm' % process.pid) as comm:
            self.assertEqual('nova-compute', comm.read().strip())
        self.assertTrue(kolla_health_check('nova-compute', bus.port),
                        'healthcheck_port nova-compute %d failed' % bus.port)
        self.assertIsNone(process.poll(), 'nova-compute stopped')


class KollaUbuntuImagesTest(_KollaImagesChecks, testtools.TestCase):
    """kolla 2026.2's Ubuntu base, 24.04 (Python 3.12)."""

    base = 'ubuntu'


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

    venv = os.path.join(path, 'venv')
    # NOTE: without pip and its setuptools, which would shadow this
    # environment's for the build; this environment's pip installs.
    run(sys.executable, '-m', 'venv', '--without-pip', venv)
    python = os.path.join(venv, 'bin', 'python')
    site_packages = run(python, '-c', 'import sysconfig; '
                        'print(sysconfig.get_path("purelib"))').strip()
    with open(os.path.join(site_packages, 'deps.pth'), 'w') as pth:
        pth.write(sysconfig.get_path('purelib') + '\n')
    # NOTE: --ignore-installed: pip sees this environment's Nova through
    # the .pth file and would install nothing.
    run(sys.executable, '-m', 'pip', '--python', python, 'install',
        '--quiet', '--no-deps', '--ignore-installed', '--no-build-isolation',
        'nova==%s' % metadata.version('nova'),
        *[os.path.join(plugins, name) for name in os.listdir(plugins)])
    return venv


def run(*command, **environ):
    """The output of ``command``; its error output if it fails.

    ``environ`` adds to the environment of the command.
    """
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=600, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, **environ))
    if result.returncode:
        raise AssertionError('%s failed: %s' % (' '.join(command),
                                                result.stderr))
    return result.stdout


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


def wait_for_log(path, until, seconds=120):
    deadline = time.monotonic() + seconds
    text = ''
    while time.monotonic() < deadline and until not in text:
        time.sleep(0.5)
        if os.path.exists(path):
            with open(path) as log:
                text = log.read()
    return text


def kolla_health_check(process, port, seconds=60):
    """Whether kolla's ``healthcheck_port`` passes within ``seconds``."""
    script = os.path.join(os.path.dirname(kolla.__file__), 'docker', 'base',
                          'healthcheck_port')
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if subprocess.run(['bash', script, process, str(port)],
                          timeout=60).returncode == 0:
            return True
        time.sleep(1)
    return False
