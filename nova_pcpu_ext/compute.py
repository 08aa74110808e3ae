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

Run ``nova-pcpu-ext-compute`` instead of ``nova-compute``, with the same
arguments. ``ComputeManager.__init__`` looks up
``resource_tracker.ResourceTracker`` and ``report.SchedulerReportClient``
when the service is created, so replacing them right after Nova parses its
configuration takes effect for the whole service.
"""

from nova_pcpu_ext import activation
from nova_pcpu_ext import compat
from nova_pcpu_ext import plugins

NOVA_SYMBOLS = (
    ('nova.compute.manager:ComputeManager', None),
    ('nova.compute.resource_tracker:ResourceTracker',
     ('host', 'driver', 'reportclient')),
    ('nova.scheduler.client.report:SchedulerReportClient', None),
)


def activate():
    """Activate the compute plugins named in ``[pcpu_ext]``.

    Idempotent. Raises a :class:`~nova_pcpu_ext.exception.PcpuExtError`
    subclass on bad configuration or an unsupported Nova.
    """
    from nova.compute import resource_tracker
    from nova.scheduler.client import report

    with activation._lock:
        if (activation.is_patched(resource_tracker, 'ResourceTracker') or
                activation.is_patched(report, 'SchedulerReportClient')):
            return
        rt_mixins = plugins.load_resource_tracker_mixins()
        client_mixins = plugins.load_report_client_mixins()
        if not (rt_mixins or client_mixins):
            return
        compat.require_all(NOVA_SYMBOLS)
        for mixin in rt_mixins + client_mixins:
            compat.require_all(mixin.nova_symbols)
        # Checked everything first: a failure leaves Nova untouched.
        for owner, name, mixins in (
                (resource_tracker, 'ResourceTracker', rt_mixins),
                (report, 'SchedulerReportClient', client_mixins)):
            if mixins:
                activation.patch(owner, name, activation.compose(
                    getattr(owner, name), mixins))


def main():
    """``nova-pcpu-ext-compute``: nova-compute with the plugins on."""
    from nova.cmd import compute as nova_compute
    activation.run_nova_service(nova_compute, activate)
