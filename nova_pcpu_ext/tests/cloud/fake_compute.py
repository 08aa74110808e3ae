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

"""Run a nova-compute console script on fakelibvirt, as its own process.

``python -m nova_pcpu_ext.tests.cloud.fake_compute CORES THREADS SCRIPT
[ARGS...]`` runs the console script ``SCRIPT`` (``nova-compute`` or
``nova-pcpu-ext-compute``, by path or name) with ``ARGS``, on one NUMA
node of ``CORES`` cores with ``THREADS`` threads each. It does for one
process what Nova's functional libvirt tests do in theirs: Nova's libvirt
fixtures, and no disk, cgroup or sysfs access.

The guests outlive the process, as libvirtd's outlive nova-compute: a
compute started again finds them in the state they were left in.

A cold migration (or resize) between two such processes runs Nova's own
code on both sides except the disk copy: the source powers the guest off
and hands over no disks (the fake guests have none), the destination
defines and starts the guest again from Nova's XML. fakelibvirt cannot
live-migrate a guest to another process.
"""

import importlib
from importlib import metadata
import json
import os
import sys


#: Set in the environment, the compute runs without Nova's late check for
#: bug 1889633 (see nova_pcpu_ext.tests.late_check).
STRIP_LATE_CHECK = 'CLOUD_STRIP_LATE_CHECK'


def console_script(path):
    name = os.path.basename(path)
    (entry_point,) = metadata.entry_points(group='console_scripts',
                                           name=name)
    return entry_point


def fake_host(cores, threads, hostname, state_path):
    """Nova's libvirt fixtures, kept for the life of the process."""
    from unittest import mock

    from nova.tests import fixtures as nova_fixtures
    from nova.tests.fixtures import libvirt as fakelibvirt

    for fixture in (nova_fixtures.LibvirtFixture(),
                    nova_fixtures.LibvirtImageBackendFixture(),
                    nova_fixtures.CGroupsFixture()):
        fixture.setUp()
    host_info = fakelibvirt.HostInfo(cpu_nodes=1, cpu_sockets=1,
                                     cpu_cores=cores, cpu_threads=threads)
    connection = fakelibvirt.Connection(
        'qemu:///system', version=fakelibvirt.FAKE_LIBVIRT_VERSION,
        hv_version=fakelibvirt.FAKE_QEMU_VERSION, host_info=host_info,
        hostname=hostname)
    driver = 'nova.virt.libvirt.driver.LibvirtDriver.'
    for target, value in (
            ('nova.virt.libvirt.host.Host.get_connection',
             lambda self: connection),
            ('nova.virt.libvirt.host.Host.get_online_cpus',
             lambda self: set(range(cores * threads))),
            (driver + '_get_local_gb_info',
             lambda self: {'total': 128, 'used': 44, 'free': 84}),
            (driver + '_create_image', _create_image),
            (driver + 'migrate_disk_and_power_off',
             _migrate_disk_and_power_off),
            ('nova.virt.libvirt.driver.libvirt_utils.is_valid_hostname',
             lambda hostname: True),
            ('nova.privsep.utils.supports_direct_io', lambda path: True)):
        mock.patch(target, value).start()
    keep_guests(connection, os.path.join(state_path, 'fake-guests.json'))


def keep_guests(connection, path, interval=0.5):
    """Define the guests saved in ``path``, and save them every interval.

    Each guest is saved as its XML and state; a SIGKILL loses at most the
    changes of the last ``interval`` seconds. Returns the event that stops
    the saving.
    """
    import threading

    from nova.tests.fixtures import libvirt as fakelibvirt

    try:
        with open(path) as f:
            saved = json.load(f)
    except FileNotFoundError:
        saved = []
    for xml, state in saved:
        domain = connection.defineXML(xml)
        if state in (fakelibvirt.VIR_DOMAIN_RUNNING,
                     fakelibvirt.VIR_DOMAIN_PAUSED):
            domain.create()
        if state == fakelibvirt.VIR_DOMAIN_PAUSED:
            domain.suspend()

    stop = threading.Event()

    def save():
        while True:
            try:
                guests = [(domain.XMLDesc(0), domain.info()[0])
                          for domain in list(connection._vms.values())]
                with open(path + '.new', 'w') as f:
                    json.dump(guests, f)
                os.replace(path + '.new', path)
            except Exception as error:
                # NOTE: the next round saves them; the thread must live.
                print('fake_compute: guests not saved: %r' % error,
                      file=sys.stderr)
            if stop.wait(interval):
                return

    threading.Thread(target=save, name='keep-guests', daemon=True).start()
    return stop


def _create_image(self, context, instance, disk_mapping, *args, **kwargs):
    """Empty disk files where the driver looks for them on power-on."""
    from nova.virt.libvirt import utils as libvirt_utils

    instance_dir = libvirt_utils.get_instance_path(instance)
    os.makedirs(instance_dir, exist_ok=True)
    for name in disk_mapping:
        if name != 'root':
            open(os.path.join(instance_dir, name), 'a').close()
    return False, False


def _migrate_disk_and_power_off(self, context, instance, dest, flavor,
                                network_info, block_device_info=None,
                                timeout=0, retry_interval=0):
    """Power off, and no disk to copy (Nova's answer is their list)."""
    self.power_off(instance, timeout, retry_interval)
    return '[]'


def main():
    cores, threads, script = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    entry_point = console_script(script)
    # The script's module first: it applies Nova's concurrency set-up
    # before anything else is imported.
    importlib.import_module(entry_point.module)
    if os.environ.get(STRIP_LATE_CHECK):
        from nova_pcpu_ext.tests import late_check
        late_check.strip()
    sys.argv = [script] + sys.argv[4:]
    fake_host(cores, threads, _option_value('host'),
              _option_value('state_path'))
    sys.exit(entry_point.load()())


def _option_value(name):
    """``[DEFAULT] name`` from the process's config files, before Nova."""
    import configparser

    parser = configparser.ConfigParser(strict=False, interpolation=None)
    args = sys.argv[1:]
    parser.read([args[i + 1] for i, arg in enumerate(args)
                 if arg == '--config-file'])
    return parser.get('DEFAULT', name)


if __name__ == '__main__':
    main()
