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

"""MariaDB, RabbitMQ and libvirt from Debian, as plain processes.

None of them runs as a system service: each has a private data directory
under the work directory, its own port, and is stopped by pid.
"""

import os
import shutil
import subprocess

from nova_pcpu_ext.tests import placement_server

RABBIT_BIN = '/usr/lib/rabbitmq/bin'
DB_USER = 'cloud'
DB_PASSWORD = 'cloud-db'


class MariaDB:
    """One database server; ``name`` is its process's and directory's."""

    def __init__(self, procs, work_dir, port, name='mariadb'):
        self.procs = procs
        self.name = name
        self.data_dir = os.path.join(work_dir, name)
        self.socket = os.path.join(work_dir, name + '.sock')
        self.port = port

    def start(self):
        if not os.path.isdir(os.path.join(self.data_dir, 'mysql')):
            subprocess.run(
                ['mariadb-install-db', '--no-defaults',
                 '--datadir=%s' % self.data_dir, '--user=root',
                 '--skip-test-db', '--auth-root-authentication-method=socket'],
                check=True, capture_output=True)
        self.procs.start(self.name, [
            'mariadbd', '--no-defaults', '--datadir=%s' % self.data_dir,
            '--socket=%s' % self.socket, '--port=%d' % self.port,
            '--bind-address=127.0.0.1', '--user=root', '--skip-name-resolve',
            '--max-connections=1000'])
        self.wait()
        self.sql("CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY "
                 "'%s'; GRANT ALL ON *.* TO '%s'@'127.0.0.1';" % (
                     DB_USER, DB_PASSWORD, DB_USER))

    def wait(self):
        """Until the server answers."""
        self.procs.wait_for(
            self.name, lambda: subprocess.run(
                ['mariadb-admin', '-S', self.socket, 'ping'],
                capture_output=True).returncode == 0, 60, 'ping')

    def sql(self, statements):
        subprocess.run(['mariadb', '-S', self.socket, '-u', 'root', '-e',
                        statements], check=True, capture_output=True)

    def database(self, name):
        """A new, empty database; its SQLAlchemy URL."""
        self.sql('DROP DATABASE IF EXISTS `%s`; CREATE DATABASE `%s` '
                 'CHARACTER SET utf8mb4;' % (name, name))
        return 'mysql+pymysql://%s:%s@127.0.0.1:%d/%s?charset=utf8mb4' % (
            DB_USER, DB_PASSWORD, self.port, name)


class RabbitMQ:
    """One node; each deployment gets its own virtual host."""

    def __init__(self, procs, work_dir, port):
        self.procs = procs
        self.base = os.path.join(work_dir, 'rabbitmq')
        self.port = port
        epmd_port = placement_server.free_port()
        self.env = dict(
            os.environ, HOME=self.base,
            RABBITMQ_NODENAME='rabbit@localhost',
            RABBITMQ_NODE_IP_ADDRESS='127.0.0.1',
            RABBITMQ_NODE_PORT=str(port),
            RABBITMQ_DIST_PORT=str(placement_server.free_port()),
            RABBITMQ_MNESIA_BASE=os.path.join(self.base, 'mnesia'),
            RABBITMQ_LOG_BASE=os.path.join(self.base, 'log'),
            RABBITMQ_PID_FILE=os.path.join(self.base, 'rabbit.pid'),
            RABBITMQ_CONFIG_FILE=os.path.join(self.base, 'rabbitmq'),
            RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(self.base, 'plugins'),
            RABBITMQ_CONF_ENV_FILE=os.path.join(self.base, 'rabbitmq-env'),
            # A private epmd, so that nothing outlives the run.
            ERL_EPMD_PORT=str(epmd_port), ERL_EPMD_ADDRESS='127.0.0.1')
        self.epmd_port = epmd_port

    def start(self):
        os.makedirs(self.base, exist_ok=True)
        for name, text in (('plugins', '[].\n'), ('rabbitmq-env', ''),
                           ('rabbitmq.conf', '')):
            with open(os.path.join(self.base, name), 'w') as f:
                f.write(text)
        self.procs.start('epmd', ['epmd', '-port', str(self.epmd_port)],
                         env=self.env)
        self.procs.wait_for_port('epmd', self.epmd_port, 30)
        self.procs.start('rabbitmq', [os.path.join(RABBIT_BIN,
                                                   'rabbitmq-server')],
                         env=self.env)
        self.procs.wait_for_port('rabbitmq', self.port, 90)

    def transport_url(self, vhost):
        return 'rabbit://guest:guest@127.0.0.1:%d/%s' % (self.port, vhost)

    def add_vhost(self, name):
        """A virtual host for one deployment."""
        self.ctl('add_vhost', name)
        self.ctl('set_permissions', '-p', name, 'guest', '.*', '.*', '.*')

    def consumers(self, vhost, queue):
        """How many consumers ``queue`` of ``vhost`` has; 0 if none."""
        out = self.ctl('list_queues', '-p', vhost, '--quiet',
                       '--no-table-headers', 'name', 'consumers')
        counts = dict(line.split() for line in out.splitlines() if line)
        return int(counts.get(queue, 0))

    def ctl(self, *args):
        return subprocess.run(
            [os.path.join(RABBIT_BIN, 'rabbitmqctl')] + list(args),
            env=self.env, check=True, capture_output=True, text=True).stdout


class Libvirt:
    """libvirtd and virtlogd, for the real-libvirt computes."""

    QEMU_CONF = '/etc/libvirt/qemu.conf'

    def __init__(self, procs, work_dir):
        self.procs = procs
        self.qemu_conf = os.path.join(work_dir, 'qemu.conf')

    def start(self):
        """Start libvirtd unless one answers already; True if started."""
        if self.answers():
            return False
        # QEMU runs as root here. As Debian's libvirt-qemu user it cannot
        # open this machine's root-only /dev/kvm, which libvirt's probe (as
        # root) could: libvirt then finds its QEMU capabilities outdated on
        # every lookup and probes QEMU again, about 100 s per guest start.
        # The setting is bind-mounted for libvirtd alone; the system's file
        # stays as it is.
        shutil.copy(self.QEMU_CONF, self.qemu_conf)
        with open(self.qemu_conf, 'a') as f:
            f.write('user = "+0"\ngroup = "+0"\n')
        self.procs.start('virtlogd', ['virtlogd'])
        self.procs.start('libvirtd', [
            'unshare', '--mount', '--propagation', 'private', '--', 'sh',
            '-c', 'mount --bind "$1" "$2" && exec libvirtd', 'sh',
            self.qemu_conf, self.QEMU_CONF])
        # The first start probes QEMU's capabilities (about 12 s).
        self.procs.wait_for('libvirtd', self.answers, 120, 'virsh version')
        return True

    @staticmethod
    def answers():
        if not shutil.which('virsh'):
            return False
        return subprocess.run(['virsh', '-c', 'qemu:///system', 'version'],
                              capture_output=True).returncode == 0

    @staticmethod
    def destroy_domains(prefixes):
        """Remove the guests of the cloud that outlived their computes."""
        try:
            import libvirt
            conn = libvirt.open('qemu:///system')
        except Exception:
            return []
        removed = []
        for domain in conn.listAllDomains():
            if domain.name().startswith(tuple(prefixes)):
                if domain.isActive():
                    domain.destroy()
                domain.undefine()
                removed.append(domain.name())
        conn.close()
        return removed
