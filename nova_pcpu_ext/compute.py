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

"""Activation of the compute plugins.

``nova-pcpu-ext-compute`` (:mod:`nova_pcpu_ext.cmd.compute`) runs
nova-compute with them. ``ComputeManager.__init__`` looks up
``resource_tracker.ResourceTracker`` and ``report.SchedulerReportClient``
when the service is created, so replacing them (and wrapping the methods
plugins ask for) right after Nova parses its configuration takes effect
for the whole service.
"""

from nova_pcpu_ext import activation
from nova_pcpu_ext import compat
from nova_pcpu_ext import plugins

RESOURCE_TRACKER = 'nova.compute.resource_tracker:ResourceTracker'
REPORT_CLIENT = 'nova.scheduler.client.report:SchedulerReportClient'

NOVA_SYMBOLS = (
    ('nova.compute.manager:ComputeManager', None),
    # NOTE: ComputeManager passes reportclient by keyword.
    (RESOURCE_TRACKER, ('host', 'driver', '*', 'reportclient')),
    (REPORT_CLIENT, None),
)


def check_plugins():
    """Load the compute plugins named in ``[pcpu_ext]`` and check Nova.

    :returns: ``{'module:Class': [mixin, ...]}`` for the Nova classes the
        configured plugins extend.
    :raises PcpuExtError: on bad configuration or an unsupported Nova.
    """
    by_class = {RESOURCE_TRACKER: plugins.load_resource_tracker_mixins(),
                REPORT_CLIENT: plugins.load_report_client_mixins()}
    by_class = {symbol: mixins for symbol, mixins in by_class.items()
                if mixins}
    compat.require_all(NOVA_SYMBOLS)
    for mixins in by_class.values():
        for mixin in mixins:
            compat.require_all(mixin.nova_symbols)
    return by_class


def activate_plugins():
    """Activate the compute plugins named in ``[pcpu_ext]``.

    Idempotent. Raises a :class:`~nova_pcpu_ext.exception.PcpuExtError`
    subclass on bad configuration or an unsupported Nova.
    """
    with activation.lock:
        if activation.is_active('compute'):
            return
        by_class = check_plugins()
        compat.warn_if_untested()
        all_mixins = [m for mixins in by_class.values() for m in mixins]
        # Everything was checked first: a failure leaves Nova untouched.
        # Wrappers go on Nova's own classes, before any subclass is made.
        for mixin in all_mixins:
            for symbol, wrap in mixin.method_wrappers.items():
                owner, name = compat.owner_and_name(symbol)
                activation.patch(owner, name, wrap(getattr(owner, name)))
        for symbol, mixins in by_class.items():
            owner, name = compat.owner_and_name(symbol)
            activation.patch(owner, name, activation.compose(
                getattr(owner, name), mixins))
        activation.mark_active('compute')
