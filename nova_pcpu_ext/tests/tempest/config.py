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

"""tempest.conf options of the nova-pcpu-ext tempest plugin.

Every test skips cleanly from these options alone, so the plugin can be
installed beside any deployment; the tests that change more than what they
create run only with ``destructive_tests``.
"""

from oslo_config import cfg

service_option = cfg.BoolOpt(
    'nova_pcpu_ext',
    default=False,
    help='Whether nova-pcpu-ext is active in the deployment under test.')

group = cfg.OptGroup(
    'pcpu_ext', title='nova-pcpu-ext deployment layout',
    help='What the compute hosts of the deployment look like.')

opts = [
    cfg.FloatOpt('cpu_allocation_ratio', default=4.0,
                 help='VCPU allocation ratio the hosts should report.'),
    cfg.FloatOpt('ram_allocation_ratio', default=1.0,
                 help='MEMORY_MB allocation ratio the hosts should report.'),
    cfg.FloatOpt('disk_allocation_ratio', default=1.0,
                 help='DISK_GB allocation ratio the hosts should report.'),
    cfg.BoolOpt('destructive_tests', default=False,
                help='Run the tests that change the cloud beyond the '
                     'servers and flavors they create and delete: they '
                     'disable and enable compute services (one, and then '
                     'every compute for status_storm_seconds, during which '
                     'no server can be scheduled). Leave False on a cloud '
                     'in use.'),
    cfg.IntOpt('status_storm_seconds', default=60, min=1,
               help='How long the status test disables and enables every '
                    'compute service (with destructive_tests only).'),
    cfg.StrOpt('libvirt_host',
               help='Service host of a compute on libvirt whose guests the '
                    'whitebox test may inspect (unset: test skipped).'),
    cfg.StrOpt('libvirt_uri', default='qemu:///system',
               help='libvirt connection URI of libvirt_host, from where '
                    'tempest runs (needs the libvirt-python package).'),
    cfg.StrOpt('libvirt_cpu_dedicated_set',
               help='[compute] cpu_dedicated_set of libvirt_host, as libvirt '
                    'writes a cpuset (for example 1 or 2-3).'),
]
