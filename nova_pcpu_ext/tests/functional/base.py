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

import ast
import inspect
import textwrap

import fixtures
from nova.scheduler.client import report
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base as libvirt_base
from nova.virt import hardware

from nova_pcpu_ext import activation
from nova_pcpu_ext import compute

ACTIVATE_SCHEDULER = 'nova_pcpu_ext.scheduler.activate'

#: A host with one NUMA node, two cores and two threads per core.
HYPERTHREADED = dict(cpu_nodes=1, cpu_sockets=1, cpu_cores=2, cpu_threads=2)
#: The same four CPUs without hyperthreads.
NO_HYPERTHREADS = dict(cpu_nodes=1, cpu_sockets=1, cpu_cores=4,
                       cpu_threads=1)

ISOLATE = {'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'isolate'}
DEDICATED = {'hw:cpu_policy': 'dedicated'}


class StripIsolateMitigation(fixtures.Fixture):
    """Remove Nova's late check for bug 1889633 from ``nova.virt.hardware``.

    Since Victoria, ``_pack_instance_onto_cores`` refuses an ``isolate``
    instance on a hyperthreaded host configured with ``cpu_dedicated_set``,
    which hides the scheduling bug as a late NUMA rejection. Tests that show
    the bug itself rebuild that function without the check; if the check
    cannot be found the fixture fails rather than silently testing nothing.
    """

    def _setUp(self):
        function = hardware._pack_instance_onto_cores
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        checks = [
            node for node in ast.walk(tree)
            if isinstance(node, ast.If) and
            'pcpuset' in ast.unparse(node.test) and
            '1889633' in ''.join(ast.unparse(stmt) for stmt in node.body)]
        if len(checks) != 1:
            raise AssertionError(
                'Nova changed: the bug 1889633 check in '
                'nova.virt.hardware._pack_instance_onto_cores was not found')
        checks[0].test = ast.Constant(False)
        namespace = {}
        exec(compile(ast.fix_missing_locations(tree), hardware.__file__,
                     'exec'), hardware.__dict__, namespace)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.hardware._pack_instance_onto_cores',
            namespace[function.__name__]))


class ExtensionTestBase(libvirt_base.ServersTestBase):
    """Nova with nova-pcpu-ext activated, or stock Nova.

    ``extension`` chooses, per test class or per scenario; the scheduler is
    activated from nova.conf exactly as operators do, the compute side
    through :func:`nova_pcpu_ext.compute.activate`, before any compute
    service starts.
    """

    ADDITIONAL_FILTERS = ['NUMATopologyFilter']
    extension = True

    def setUp(self):
        # Undo the patches even if setUp fails half-way.
        self.addCleanup(activation.deactivate)
        super().setUp()
        if self.extension:
            compute.activate()
        self.placement_queries = self._spy_allocation_candidates()

    def _setup_scheduler_service(self):
        if self.extension:
            self.flags(group='filter_scheduler', available_filters=[
                'nova.scheduler.filters.all_filters', ACTIVATE_SCHEDULER])
        return super()._setup_scheduler_service()

    def _spy_allocation_candidates(self):
        """Record the query string of every GET /allocation_candidates."""
        queries = []
        stock = report.SchedulerReportClient.get_allocation_candidates

        def get_allocation_candidates(client, context, resources):
            queries.append(resources.to_querystring())
            return stock(client, context, resources)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.'
            'get_allocation_candidates', get_allocation_candidates))
        return queries

    def start_host(self, hostname, topology, dedicated=None, shared=None,
                   vcpu_pin_set=None):
        """Start a compute with the given CPU topology and configuration."""
        self.flags(cpu_dedicated_set=dedicated, cpu_shared_set=shared,
                   group='compute')
        self.flags(vcpu_pin_set=vcpu_pin_set)
        self.start_compute(hostname=hostname,
                           host_info=fakelibvirt.HostInfo(**topology))
        return self.compute_rp_uuids[hostname]

    def boot(self, extra_spec, expected_state='ACTIVE', vcpu=1):
        flavor_id = self._create_flavor(vcpu=vcpu, extra_spec=extra_spec)
        return self._create_server(flavor_id=flavor_id,
                                   expected_state=expected_state)

    def usages(self, rp_uuid):
        """Non-zero usages of a resource provider."""
        return {rc: used for rc, used in
                self._get_provider_usages(rp_uuid).items() if used}
