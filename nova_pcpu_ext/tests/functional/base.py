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

"""Real Nova services in-process against real placement.

API, conductor, scheduler and compute (libvirt driver over Nova's
fakelibvirt) run in this process as in Nova's own functional tests;
placement is openstack-placement's application on sqlite.
"""

# Nova's functional package applies Nova's concurrency setup on import: it
# must come before anything else imports Nova.
import nova.tests.functional  # noqa: F401  isort:skip
# On 2025.2 nova.test applies it instead; without it, modules such as
# socketserver keep blocking selectors that starve eventlet's hub (an HTTP
# server of a test then stops every service of the process).
import nova.test  # noqa: F401,H306  isort:skip

import threading

import fixtures
from nova import context as nova_context
from nova.scheduler.client import report
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base as libvirt_base

from nova_pcpu_ext import activation
from nova_pcpu_ext import compute
from nova_pcpu_ext.tests import late_check

ACTIVATE_SCHEDULER = 'nova_pcpu_ext.scheduler.activate'

#: A host with one NUMA node, two cores and two threads per core.
HYPERTHREADED = dict(cpu_nodes=1, cpu_sockets=1, cpu_cores=2, cpu_threads=2)
#: The same four CPUs without hyperthreads.
NO_HYPERTHREADS = dict(cpu_nodes=1, cpu_sockets=1, cpu_cores=4,
                       cpu_threads=1)

#: Seconds any wait of a test may take before it counts as a deadlock.
TIMEOUT = 30
#: Seconds a status update racing a flush gets to finish first.
STATUS_WAIT = 5

ISOLATE = {'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}
DEDICATED = {'hw:cpu_policy': 'dedicated'}


class StripIsolateMitigation(fixtures.Fixture):
    """Remove Nova's late check for bug 1889633 (see :mod:`late_check`)."""

    def _setUp(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.hardware._pack_instance_onto_cores',
            late_check.stripped_pack_instance_onto_cores()))


class Gate(object):
    """Holds the first call of an object's method until released."""

    def __init__(self, test, obj, name):
        self.reached = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()
        stock = getattr(obj, name)

        def gated(*args, **kwargs):
            if not self.reached.is_set():
                self.reached.set()
                self.release.wait(TIMEOUT)
            try:
                return stock(*args, **kwargs)
            finally:
                self.returned.set()

        setattr(obj, name, gated)
        test.addCleanup(delattr, obj, name)
        # Never leave a service thread waiting behind a failed test.
        test.addCleanup(self.release.set)


class ExtensionTestBase(libvirt_base.ServersTestBase):
    """Nova with nova-pcpu-ext activated, or stock Nova.

    ``extension`` chooses, per test class or per scenario; the scheduler is
    activated from nova.conf exactly as operators do, the compute side
    through :func:`nova_pcpu_ext.compute.activate_plugins`, before any compute
    service starts.
    """

    ADDITIONAL_FILTERS = ['NUMATopologyFilter']
    extension = True

    def setUp(self):
        # Undo the patches even if setUp fails half-way.
        self.addCleanup(activation.deactivate)
        super().setUp()
        # Spy on Nova's own class, before the extension may subclass it.
        self.placement_queries = self._spy_allocation_candidates()
        if self.extension:
            compute.activate_plugins()

    def _setup_scheduler_service(self):
        if self.extension:
            self.flags(group='filter_scheduler', available_filters=[
                'nova.scheduler.filters.all_filters', ACTIVATE_SCHEDULER])
        return super()._setup_scheduler_service()

    def _spy_allocation_candidates(self):
        """Record the query string of every GET /allocation_candidates.

        And in :attr:`placement_answers` how many candidates each
        returned (None where placement did not answer).
        """
        queries, self.placement_answers = [], []
        stock = report.SchedulerReportClient.get_allocation_candidates

        def get_allocation_candidates(client, context, resources):
            queries.append(resources.to_querystring())
            answer = stock(client, context, resources)
            self.placement_answers.append(
                len(answer[0] or ()) if answer else None)
            return answer

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.'
            'get_allocation_candidates', get_allocation_candidates))
        return queries

    def start_host(self, hostname, topology, dedicated=None, shared=None,
                   vcpu_pin_set=None, cell_name=None):
        """Start a compute with the given CPU topology and configuration."""
        self.flags(cpu_dedicated_set=dedicated, cpu_shared_set=shared,
                   group='compute')
        self.flags(vcpu_pin_set=vcpu_pin_set)
        self.start_compute(hostname=hostname,
                           host_info=fakelibvirt.HostInfo(**topology),
                           cell_name=cell_name)
        return self.compute_rp_uuids[hostname]

    def boot(self, extra_spec, expected_state='ACTIVE', vcpu=1):
        flavor_id = self._create_flavor(vcpu=vcpu, extra_spec=extra_spec)
        return self._create_server(flavor_id=flavor_id,
                                   expected_state=expected_state)

    def usages(self, rp_uuid):
        """Non-zero usages of a resource provider."""
        return {rc: used for rc, used in
                self._get_provider_usages(rp_uuid).items() if used}

    def in_thread(self, target, *args):
        errors = []

        def run():
            try:
                target(*args)
            except Exception as error:  # reported by the test
                errors.append(error)

        thread = threading.Thread(target=run, daemon=True)
        thread.errors = errors
        thread.start()
        return thread

    def join(self, *threads):
        for thread in threads:
            thread.join(TIMEOUT)
            self.assertFalse(thread.is_alive(), 'deadlock: %s' % thread)
            self.assertEqual([], thread.errors)

    def periodic(self, hostname='compute1'):
        """The update_available_resource periodic of compute1.

        Not through _run_periodics: its cell targeting holds the cell
        database fixture's lock, which would block the API meanwhile.
        """
        self.computes[hostname].manager.update_available_resource(
            nova_context.get_admin_context())

    def traits(self, rp_uuid):
        return set(self._get_provider_traits(rp_uuid))

    def disable_service(self, hostname='compute1'):
        """Disable a compute service through the API, as operators do."""
        self.admin_api.microversion = '2.53'
        service = self.admin_api.get_services(
            binary='nova-compute', host=hostname)[0]
        self.admin_api.put_service(service['id'], {'status': 'disabled'})

    def race_disable_with_flush(self, hostname='compute1'):
        """Disable the host while a periodic update waits before its flush.

        The resource tracker has already read the service as enabled; the
        status update adds COMPUTE_STATUS_DISABLED meanwhile.

        :returns: whether the status update finished before the flush.
        """
        manager = self.computes[hostname].manager
        flush = Gate(self, manager.reportclient, 'update_from_provider_tree')
        status = Gate(self, manager.virtapi, 'update_compute_provider_status')
        status.release.set()
        periodic = self.in_thread(self.periodic, hostname)
        self.assertTrue(flush.reached.wait(TIMEOUT))

        disable = self.in_thread(self.disable_service, hostname)
        self.assertTrue(status.reached.wait(TIMEOUT))
        # NOTE: room for a loaded machine; where the status update waits
        # for the flush, the whole wait is spent.
        status_done_first = status.returned.wait(STATUS_WAIT)
        flush.release.set()
        self.join(periodic, disable)
        return status_done_first
