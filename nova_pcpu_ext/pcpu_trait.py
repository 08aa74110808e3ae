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

"""Resource tracker mixin ``pcpu_trait``: a trait on hosts that report PCPU.

Nova's VCPU fallback placement query exists for legacy hosts, which report
no ``PCPU`` (``vcpu_pin_set``, or no dedicated CPUs), but placement cannot
tell them apart from hosts that do: no query can forbid a resource class.
This mixin reports :data:`TRAIT` on every compute node provider whose tree
has ``PCPU`` inventory, and removes it when that inventory goes (a host
converted back), so ``[pcpu_ext] isolate_fallback_mode = legacy_only``
on the schedulers can make the fallback forbid it on the host.
"""

import os_resource_classes as orc
from oslo_log import log as logging

from nova_pcpu_ext import plugins

LOG = logging.getLogger(__name__)

#: The trait on a compute node provider whose tree reports PCPU.
TRAIT = 'CUSTOM_PCPU_EXT_REPORTS_PCPU'


def reports_pcpu(provider_tree, nodename):
    """Whether the tree of a compute node has PCPU inventory."""
    return any(orc.PCPU in provider_tree.data(uuid).inventory
               for uuid in provider_tree.get_provider_uuids(nodename))


class PcpuTraitMixin(plugins.ResourceTrackerMixin):
    """Reports :data:`TRAIT` on compute nodes with PCPU inventory."""

    nova_symbols = (
        ('nova.compute.resource_tracker:ResourceTracker.__init__',
         ('self', 'host', 'driver')),
        ('nova.virt.driver:ComputeDriver.update_provider_tree',
         ('self', 'provider_tree', 'nodename')),
        ('nova.compute.provider_tree:ProviderTree.add_traits',
         ('self', 'name_or_uuid', '*traits')),
        ('nova.compute.provider_tree:ProviderTree.remove_traits',
         ('self', 'name_or_uuid', '*traits')),
        ('nova.compute.provider_tree:ProviderTree.has_traits',
         ('self', 'name_or_uuid', 'traits')),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.driver = plugins.DriverView(self.driver, self._mark_pcpu)

    @staticmethod
    def _mark_pcpu(update, provider_tree, nodename):
        # NOTE: after the driver: it sets the inventory, and leaves custom
        # traits it does not manage as they are.
        update()
        wanted = reports_pcpu(provider_tree, nodename)
        if provider_tree.has_traits(nodename, [TRAIT]) == wanted:
            return
        if wanted:
            provider_tree.add_traits(nodename, TRAIT)
        else:
            provider_tree.remove_traits(nodename, TRAIT)
        LOG.info('Compute node %(node)s %(reports)s PCPU inventory: '
                 '%(action)s the %(trait)s trait, which the VCPU fallback '
                 'query forbids where [pcpu_ext] isolate_fallback_mode = '
                 'legacy_only.',
                 {'node': nodename, 'trait': TRAIT,
                  'reports': 'reports' if wanted else 'no longer reports',
                  'action': 'adding' if wanted else 'removing'})
