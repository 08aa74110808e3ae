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

Stock Nova never creates this trait: while placement cannot create it (a
policy stricter than the default, or a fault), the trait is left out of
the provider's traits, so the rest of the resource update is written as
stock Nova writes it, and creating it is tried again on the next update.
"""

from keystoneauth1 import exceptions as ks_exc
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


def ensure_trait(client):
    """Make placement know :data:`TRAIT`, creating it if need be.

    Not Nova's ``_ensure_traits``: that one hides a reset connection, and
    the provider's trait write would then fail on the unknown trait.

    :param client: Nova's report client.
    :returns: None once placement knows the trait, else why not.
    """
    known = '/traits?name=in:' + TRAIT
    create = '/traits/' + TRAIT
    call = 'GET ' + known
    try:
        resp = client.get(known, version='1.6')
        if resp.status_code == 200 and TRAIT in resp.json()['traits']:
            return None
        if resp.status_code == 200:
            call = 'PUT ' + create
            resp = client.put(create, None, version='1.6')
            if resp:
                return None
    except ks_exc.ClientException as error:
        return '%s: %s' % (call, error)
    return '%s: %d %s' % (call, resp.status_code, resp.text[:200])


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
        ('nova.scheduler.client.report:SchedulerReportClient.get',
         ('self', 'url', '*', 'version', 'global_request_id')),
        ('nova.scheduler.client.report:SchedulerReportClient.put',
         ('self', 'url', 'data', '*', 'version', 'global_request_id')),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.driver = plugins.DriverView(self.driver, self._mark_pcpu)
        # Whether the failure to create the trait was logged at WARNING
        # since the trait was last known: once per failure, not per update.
        self._creation_warned = False

    def _trait_known(self):
        """Whether placement knows the trait; a failure is logged once."""
        error = ensure_trait(self.reportclient)
        if error is None:
            self._creation_warned = False
            return True
        log = LOG.debug if self._creation_warned else LOG.warning
        self._creation_warned = True
        log('Placement could not create the %(trait)s trait (%(error)s). '
            'Compute node providers are updated without it, as stock Nova '
            'updates them, and it is tried again on the next resource '
            'update. Meanwhile the VCPU fallback query does not tell this '
            'host from a legacy one where [pcpu_ext] isolate_fallback_mode '
            '= legacy_only.', {'trait': TRAIT, 'error': error})
        return False

    def _mark_pcpu(self, update, provider_tree, nodename):
        # NOTE: after the driver: it sets the inventory, and leaves custom
        # traits it does not manage as they are.
        update()
        wanted = reports_pcpu(provider_tree, nodename)
        if provider_tree.has_traits(nodename, [TRAIT]) == wanted:
            return
        # NOTE: a trait placement does not know fails the provider's whole
        # trait write, and with it the resource update.
        if wanted and not self._trait_known():
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
