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
installed beside any deployment.
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
    cfg.BoolOpt('new_style_cpu_config',
                default=False,
                help='Compute hosts set [compute] cpu_dedicated_set and '
                     'cpu_shared_set (they report PCPU).'),
    cfg.BoolOpt('all_hosts_hyperthreaded',
                default=True,
                help='Every compute host has hyperthreads '
                     '(HW_CPU_HYPERTHREADING).'),
    cfg.BoolOpt('host_without_hyperthreads',
                default=False,
                help='At least one new-style compute host without '
                     'hyperthreads has a free PCPU.'),
    cfg.FloatOpt('cpu_allocation_ratio', default=4.0,
                 help='VCPU allocation ratio the hosts should report.'),
    cfg.FloatOpt('ram_allocation_ratio', default=1.0,
                 help='MEMORY_MB allocation ratio the hosts should report.'),
    cfg.FloatOpt('disk_allocation_ratio', default=1.0,
                 help='DISK_GB allocation ratio the hosts should report.'),
]
