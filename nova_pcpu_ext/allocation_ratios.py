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

"""Resource tracker mixin ``allocation_ratios`` (Nova bug 1789654).

One rule decides the allocation ratio of ``VCPU``, ``MEMORY_MB`` and
``DISK_GB`` (see :func:`effective_ratio`): Nova's own precedence, except
that a value that is not a positive finite number is passed over. It is
applied to the placement inventory and to the ComputeNode on every resource
update, so ``0.0``, unset or non-finite ratios never reach either, the two
never drift, and a usable ratio placement holds is kept. ``PCPU`` always
gets 1.0.
"""

import math

import nova.conf
import os_resource_classes as orc
from oslo_log import log as logging

from nova_pcpu_ext import conf as pcpu_ext_conf
from nova_pcpu_ext import exception
from nova_pcpu_ext import plugins

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

#: (resource class, option stem, built-in default): the option stem names
#: ``[DEFAULT] <stem>_allocation_ratio``, its ``initial_`` form and the
#: ComputeNode field.
RATIOS = (
    (orc.VCPU, 'cpu', 4.0),
    (orc.MEMORY_MB, 'ram', 1.0),
    (orc.DISK_GB, 'disk', 1.0),
)
#: The six ``[DEFAULT]`` options the rule reads.
RATIO_OPTIONS = tuple(
    option for _rc, stem, _default in RATIOS
    for option in ('%s_allocation_ratio' % stem,
                   'initial_%s_allocation_ratio' % stem))


def is_usable(ratio):
    """Whether a ratio is a positive finite number."""
    return ratio is not None and math.isfinite(ratio) and ratio > 0


def effective_ratio(configured, initial, default, held=None):
    """The allocation ratio to report.

    Nova's precedence (``ComputeDriver._get_allocation_ratios``): the
    configured ratio, else the ratio placement holds, else, for inventory
    placement does not have yet, the initial ratio. Each value that is not
    a positive finite number is passed over, down to the built-in default.

    :param configured: ``[DEFAULT] <stem>_allocation_ratio``.
    :param initial: ``[DEFAULT] initial_<stem>_allocation_ratio``.
    :param default: the built-in default.
    :param held: the ratio placement holds, None for new inventory.
    :returns: the first of configured, held and initial that is a positive
        finite number, else the default.
    """
    for ratio in (configured, held, initial):
        if is_usable(ratio):
            return float(ratio)
    return default


def configured_ratios(conf, held=None):
    """``{resource class: ratio}`` of :data:`RATIOS` by the rule.

    :param conf: Nova's configuration.
    :param held: ``{resource class: ratio}`` placement holds; a resource
        class missing from it is new inventory.
    """
    held = held or {}
    return {rc: effective_ratio(
                getattr(conf, '%s_allocation_ratio' % stem),
                getattr(conf, 'initial_%s_allocation_ratio' % stem),
                default, held.get(rc))
            for rc, stem, default in RATIOS}


def validate_ratio_options(conf):
    """Check the six ``[DEFAULT] *allocation_ratio`` options.

    :raises InvalidConfig: naming the option and what to set.
    """
    for option in RATIO_OPTIONS:
        try:
            ratio = getattr(conf, option)
        except ValueError as error:
            raise exception.InvalidConfig(
                '%s. Set a positive ratio such as 1.5, or leave it unset for '
                'the default.' % pcpu_ext_conf.invalid_value(
                    conf, 'DEFAULT', option, error))
        if ratio is not None and not math.isfinite(ratio):
            raise exception.InvalidConfig(
                '[DEFAULT] %s = %s is not a finite number: set a positive '
                'ratio such as 1.5, or leave it unset for the default.' % (
                    option, ratio))


def _ratios_held(provider_tree, nodename):
    return {rc: inv.get('allocation_ratio') for rc, inv in
            provider_tree.data(nodename).inventory.items()}


def _compute_node_ratios(compute_node):
    return {rc: getattr(compute_node, '%s_allocation_ratio' % stem)
            for rc, stem, _default in RATIOS
            if compute_node.obj_attr_is_set('%s_allocation_ratio' % stem)}


class AllocationRatiosMixin(plugins.ResourceTrackerMixin):
    """Allocation ratios from config with sane defaults.

    Every override takes the parameters it needs and passes the rest on
    unchanged.
    """

    nova_symbols = (
        ('nova.compute.resource_tracker:ResourceTracker.__init__',
         ('self', 'host', 'driver')),
        ('nova.compute.resource_tracker:ResourceTracker._copy_resources',
         ('self', 'compute_node', 'resources')),
        ('nova.compute.resource_tracker:ResourceTracker._update_to_placement',
         ('self', 'context', 'compute_node')),
        ('nova.virt.driver:ComputeDriver.update_provider_tree',
         ('self', 'provider_tree', 'nodename')),
    )

    @classmethod
    def validate_config(cls, config):
        validate_ratio_options(config)
        for option in RATIO_OPTIONS:
            if getattr(config, option) == 0.0:
                LOG.warning('[DEFAULT] %s = 0.0 means unset: the next ratio '
                            'of Nova\'s precedence applies, down to the '
                            'default.', option)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.driver = plugins.DriverView(self.driver, self._apply_ratios)
        # nodename -> {resource class: ratio} last sent to placement
        self._placement_ratios = {}

    def _apply_ratios(self, update, provider_tree, nodename):
        """Apply the ratio rule to what the driver reports."""
        held = _ratios_held(provider_tree, nodename)
        update()
        ratios = configured_ratios(CONF, held)
        root_uuid = provider_tree.data(nodename).uuid
        for uuid in provider_tree.get_provider_uuids(nodename):
            wanted = dict(ratios) if uuid == root_uuid else {}
            wanted[orc.PCPU] = 1.0
            inventory = provider_tree.data(uuid).inventory
            stale = [rc for rc, ratio in wanted.items() if rc in inventory
                     and inventory[rc].get('allocation_ratio') != ratio]
            for rc in stale:
                inventory[rc]['allocation_ratio'] = wanted[rc]
            if stale:
                provider_tree.update_inventory(uuid, inventory)
        self._placement_ratios[nodename] = ratios

    def _set_compute_node_ratios(self, compute_node, ratios):
        for rc, stem, _default in RATIOS:
            setattr(compute_node, '%s_allocation_ratio' % stem, ratios[rc])

    def _copy_resources(self, compute_node, resources, *args, **kwargs):
        super()._copy_resources(compute_node, resources, *args, **kwargs)
        # NOTE: before this process has sent the node's ratios to
        # placement, the ComputeNode's own ratios stand for what placement
        # holds: a restart must not lower a ratio the node had, even for
        # the moment until the update to placement.
        nodename = resources['hypervisor_hostname']
        held = (self._placement_ratios.get(nodename) or
                _compute_node_ratios(compute_node))
        self._set_compute_node_ratios(compute_node,
                                      configured_ratios(CONF, held))

    def _update_to_placement(self, context, compute_node, *args, **kwargs):
        super()._update_to_placement(context, compute_node, *args, **kwargs)
        # The ComputeNode follows what was just sent to placement, so the
        # NUMA filter and weighers see the same capacity as placement.
        ratios = self._placement_ratios.get(compute_node.hypervisor_hostname)
        if ratios:
            self._set_compute_node_ratios(compute_node, ratios)
