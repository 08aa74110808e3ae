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

"""A server boots through the Nova API with and without the extension."""

from nova_pcpu_ext.tests.functional import base  # isort:skip

from nova.compute import resource_tracker
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils

from nova_pcpu_ext import activation


class _BootTest(object):

    def test_boot_server(self):
        rp_uuid = self.start_host('compute1', base.HYPERTHREADED,
                                  dedicated='0-1', shared='2-3')

        server = self.boot(base.DEDICATED)

        self.assertEqual('compute1', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({'PCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         self.usages(rp_uuid))
        compute = self.computes['compute1']
        self.assertEqual(self.extension, activation.is_patched(
            scheduler_utils, 'resources_from_request_spec'))
        self.assertEqual(
            self.extension,
            type(compute.manager.rt) is not activation.original(
                resource_tracker, 'ResourceTracker'))
        self.assertEqual(
            self.extension,
            type(compute.manager.reportclient) is not activation.original(
                report, 'SchedulerReportClient'))


class BootWithExtensionTest(_BootTest, base.ExtensionTestBase):
    extension = True


class BootWithoutExtensionTest(_BootTest, base.ExtensionTestBase):
    extension = False
