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

"""The loopback cloud's fake hypervisor keeps its guests across restarts."""

# Nova's functional package applies Nova's concurrency setup on import: it
# must come before anything else imports Nova.
import nova.tests.functional  # noqa: F401  isort:skip

import os
import time

import fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
import testtools

from nova_pcpu_ext.tests.cloud import fake_compute

GUEST = ("<domain type='kvm'><name>%s</name><uuid>%s</uuid>"
         "<memory>131072</memory><vcpu>1</vcpu>"
         "<os><type arch='x86_64'>hvm</type></os><devices/></domain>")
STATES = {'running': fakelibvirt.VIR_DOMAIN_RUNNING,
          'paused': fakelibvirt.VIR_DOMAIN_PAUSED,
          'shutoff': fakelibvirt.VIR_DOMAIN_SHUTOFF}


def connection():
    return fakelibvirt.Connection(
        'qemu:///system', version=fakelibvirt.FAKE_LIBVIRT_VERSION,
        hv_version=fakelibvirt.FAKE_QEMU_VERSION)


class KeepGuestsTest(testtools.TestCase):

    def test_guests_are_defined_again_in_their_state(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'guests.json')
        before = connection()
        for number, name in enumerate(STATES):
            domain = before.defineXML(GUEST % (
                name, '00000000-0000-0000-0000-00000000000%d' % number))
            domain.create()
            if name == 'paused':
                domain.suspend()
            elif name == 'shutoff':
                domain.destroy()
        self.addCleanup(fake_compute.keep_guests(before, path, 0.05).set)
        deadline = time.monotonic() + 5
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)

        # A new process: a new connection that knows no guest.
        after = connection()
        self.addCleanup(fake_compute.keep_guests(after, path, 0.05).set)
        listed = after.listAllDomains(
            fakelibvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE |
            fakelibvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE)
        self.assertEqual(STATES, {d.name(): d.info()[0] for d in listed})
