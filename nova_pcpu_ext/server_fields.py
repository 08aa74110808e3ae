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

"""The fields of a server as the operator commands read it.

A server is a ``dict`` as the Compute API shows it, whether the Compute
API or Nova's databases (:mod:`nova_pcpu_ext.nova_db`) gave it; these
name the fields the judging reads by name, and the one only Nova's
databases give.
"""

#: A server's compute node, as the Compute API shows it.
NODE = 'OS-EXT-SRV-ATTR:hypervisor_hostname'
#: The compute nodes of a server's moves that did not end, which may hold
#: its resources; Nova's databases show them, no Compute API view does.
MOVE_NODES = 'move_nodes'
#: The name of a server's cell (its UUID where it has no name); Nova's
#: databases show it, no Compute API view does.
CELL = 'cell'
