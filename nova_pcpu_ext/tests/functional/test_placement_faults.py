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

"""Every placement fault on the compute side: no worse than stock Nova.

nova-compute reaches a real placement server over HTTP through a proxy
that answers chosen requests with a fault instead: an error status, a
reset connection, or no answer within ``[placement] timeout``. Each test
runs one call of the compute plugins through every fault, on stock Nova
(:class:`StockTest`) and with the extension (:class:`ExtensionTest`), and
both must show the same outcome: whether the call was made, whether the
periodic update failed, whether placement holds the change after the
faulted update, and after the next one. The extension may log the cause
once at WARNING, never a traceback. ``doc/source/admin/placement-faults.rst``
is the table of these tests.
"""

from nova_pcpu_ext.tests.functional import base  # isort:skip

import logging
import re
import threading
import time

import fixtures
import nova.conf
from nova import context as nova_context
from nova import objects
import os_traits

from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext.tests.functional import operator_commands

CONF = nova.conf.CONF
DISABLED = os_traits.COMPUTE_STATUS_DISABLED
#: Seconds of ``[placement] timeout``, ample for a loaded machine; the
#: proxy holds a faulted request longer.
PLACEMENT_TIMEOUT = 5
TIMEOUT = 'timeout'
DROP = operator_commands.FaultyProxy.DROP


def _error(status, title, code='placement.undefined_code'):
    """An answer as placement words its errors."""
    return (status, {'errors': [{
        'status': status, 'title': title, 'code': code,
        'detail': 'injected by the test proxy',
        'request_id': 'req-00000000-0000-0000-0000-000000000000'}]})


#: Every fault, by name: what the proxy answers instead of placement.
FAULTS = {
    '400': _error(400, 'Bad Request'),
    '403': _error(403, 'Forbidden'),
    '404': _error(404, 'Not Found'),
    '409': _error(409, 'Conflict', 'placement.concurrent_update'),
    '500': _error(500, 'Internal Server Error'),
    '503': _error(503, 'Service Unavailable'),
    'reset': DROP,
    'timeout': TIMEOUT,
}

#: The message of Nova's own error when a periodic update fails.
PERIODIC_ERROR = 'Error updating resources for node'


class Records(logging.Handler):
    """Keeps the log records of one logger at WARNING and above."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record)


class _FaultTestBase(base.ExtensionTestBase):
    """compute1 on placement over HTTP, behind a fault-injecting proxy."""

    def setUp(self):
        placement = operator_commands.PlacementBehindProxy(PLACEMENT_TIMEOUT)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.functional.fixtures.PlacementFixture',
            lambda: placement))
        super().setUp()
        self.direct = operator_commands.Placement(placement.server)
        #: ``(method pattern, path pattern, fault name)`` of the requests
        #: answered with a fault.
        self.fault = None
        self.hits = 0
        self._hits_lock = threading.Lock()
        placement.fault = self.respond
        self.ours = self._records('nova_pcpu_ext')
        self.nova = self._records('nova.compute.manager')
        self.rp_uuid = self.start_host('compute1', base.HYPERTHREADED,
                                       dedicated='0-1', shared='2-3')
        self.manager = self.computes['compute1'].manager

    def _records(self, name):
        records = Records()
        logger = logging.getLogger(name)
        logger.addHandler(records)
        self.addCleanup(logger.removeHandler, records)
        return records

    def respond(self, method, path):
        fault = self.fault
        if (fault is None or not re.fullmatch(fault[0], method) or
                not re.search(fault[1], path)):
            return None
        with self._hits_lock:
            self.hits += 1
        answer = FAULTS[fault[2]]
        if answer == TIMEOUT:
            # NOTE: longer than the client waits; then the connection goes.
            time.sleep(PLACEMENT_TIMEOUT + 1)
            return DROP
        return answer

    def provider_path(self, tail):
        return '^/resource_providers/%s/%s$' % (self.rp_uuid, tail)

    def periodic_failed(self):
        """Run the periodic update; whether Nova logged its failure."""
        before = self._periodic_errors()
        self.periodic()
        return self._periodic_errors() > before

    def _periodic_errors(self):
        return sum(PERIODIC_ERROR in record.getMessage()
                   for record in self.nova.records)

    def faulted(self, method, pattern, name, act):
        """Run ``act`` while requests matching are answered with a fault.

        :returns: whether any request met the fault, and what act returned.
        """
        self.hits = 0
        self.fault = (method, pattern, name)
        try:
            result = act()
        finally:
            self.fault = None
        return self.hits > 0, result

    def matrix(self, method, pattern, change, holds, act=None):
        """Every fault on one call, each followed by a clean update.

        :param change: makes a change the next update must write, given the
            round's number.
        :param holds: whether placement holds that change.
        :param act: what runs while the fault is on, returning whether it
            failed; the periodic update by default.
        :returns: ``{fault: (call made, act failed, written during the
            fault, written by the next periodic update)}``.
        """
        outcomes = {}
        for number, name in enumerate(FAULTS):
            change(number)
            ours = len(self.ours.records)
            made, failed = self.faulted(method, pattern, name,
                                        act or self.periodic_failed)
            during = holds()
            self.assertFalse(self.periodic_failed(), name)
            outcomes[name] = (made, failed, during, holds())
            self.assertCauseOnce(self.ours.records[ours:], name)
        return outcomes

    def assertCauseOnce(self, records, fault):
        """At most one record of ours per fault, and no traceback."""
        self.assertLessEqual(len(records), 1, (fault, [
            record.getMessage() for record in records]))
        for record in records:
            self.assertIsNone(record.exc_info, (fault, record.getMessage()))

    def assertEveryFault(self, expected, outcomes, **exceptions):
        """The same outcome for every fault but those named."""
        self.assertEqual(dict({name: expected for name in FAULTS},
                              **exceptions), outcomes)

    # What the tests change and observe.

    def ratio_written(self):
        return (self.direct.ratios(self.rp_uuid)['VCPU'] ==
                CONF.cpu_allocation_ratio)

    def set_service_disabled(self, disabled):
        """Change the service record alone, as a lost status update does.

        The periodic update synchronizes the status trait from it.
        """
        service = objects.Service.get_by_compute_host(
            nova_context.get_admin_context(), 'compute1')
        service.disabled = disabled
        service.save()

    def service_disabled(self):
        return objects.Service.get_by_compute_host(
            nova_context.get_admin_context(), 'compute1').disabled

    def status_written(self):
        traits = set(self.direct.traits(self.rp_uuid))
        return (DISABLED in traits) == self.service_disabled()

    def marked(self):
        return pcpu_trait.TRAIT in self.direct.traits(self.rp_uuid)

    def forget_trait(self):
        """Take the extension's trait out of placement; empty the cache.

        An operator may delete it once no provider carries it.
        """
        traits = self.direct.call(
            'GET', '/resource_providers/%s/traits' % self.rp_uuid)
        if pcpu_trait.TRAIT in traits['traits']:
            self.direct.call(
                'PUT', '/resource_providers/%s/traits' % self.rp_uuid,
                {'traits': sorted(set(traits['traits']) -
                                  {pcpu_trait.TRAIT}),
                 'resource_provider_generation':
                     traits['resource_provider_generation']})
            self.direct.call('DELETE', '/traits/%s' % pcpu_trait.TRAIT)
        self.manager.reportclient.clear_provider_cache()

    def toggle_service(self):
        """Disable or enable compute1 through the API, as operators do.

        :returns: whether Nova logged a traceback meanwhile.
        """
        tracebacks = self._nova_tracebacks()
        self.admin_api.microversion = '2.53'
        service = self.admin_api.get_services(
            binary='nova-compute', host='compute1')[0]
        self.admin_api.put_service(service['id'], {
            'status': 'enabled' if service['status'] == 'disabled'
            else 'disabled'})
        return self._nova_tracebacks() > tracebacks

    def _nova_tracebacks(self):
        return sum(record.exc_info is not None
                   for record in self.nova.records)


class _Faults(object):
    """The fault matrices, each the same with and without the extension."""

    def test_inventory_write(self):
        """The flush's inventory write (``allocation_ratios``, flush)."""
        def change(number):
            self.flags(cpu_allocation_ratio=2.0 + number)

        outcomes = self.matrix(
            'PUT', self.provider_path('inventories'), change,
            self.ratio_written)
        self.assertEveryFault((True, True, False, True), outcomes)
        self.assertEqual(self.extension, self.marked())

    def test_provider_traits_write(self):
        """The flush's trait write (``pcpu_trait``, flush)."""
        outcomes = self.matrix(
            'PUT', self.provider_path('traits'),
            lambda number: self.set_service_disabled(number % 2 == 0),
            self.status_written)
        # NOTE: Nova's trait write logs a reset connection and returns:
        # the update goes on, and the next one writes the traits.
        self.assertEveryFault((True, True, False, True), outcomes,
                              reset=(True, False, False, True))
        self.assertEqual(self.extension, self.marked())

    def test_provider_tree_load(self):
        """Loading the provider tree into an empty cache (``serialized``)."""
        def change(number):
            self.flags(cpu_allocation_ratio=2.0 + number)
            self.set_service_disabled(number % 2 == 0)
            # As a SIGHUP does.
            self.manager.reset()

        outcomes = self.matrix(
            'GET', r'^/resource_providers(\?in_tree=|/%s/(traits|'
            'aggregates)$)' % self.rp_uuid, change,
            lambda: self.ratio_written() and self.status_written())
        self.assertEveryFault((True, True, False, True), outcomes)
        self.assertEqual(self.extension, self.marked())

    def test_trait_creation(self):
        """Creating ``CUSTOM_PCPU_EXT_REPORTS_PCPU`` (``pcpu_trait``).

        Stock Nova makes no such call: a fault there must not keep the
        periodic update from writing what stock writes.
        """
        def change(number):
            self.forget_trait()
            self.set_service_disabled(number % 2 == 0)

        outcomes = self.matrix(
            'GET|PUT', '^/traits.*%s' % pcpu_trait.TRAIT, change,
            lambda: (self.status_written(), self.marked()))
        self.assertEveryFault(
            (self.extension, False, (True, False), (True, self.extension)),
            outcomes)
        self.assertEqual(len(FAULTS) if self.extension else 0, sum(
            'could not create' in record.getMessage()
            for record in self.ours.records))

    def test_status_update(self):
        """The status update from a service disable or enable.

        Failed, it is written by the next periodic update, as in Nova.
        """
        outcomes = self.matrix(
            'PUT', self.provider_path('traits'), lambda number: None,
            self.status_written, act=self.toggle_service)
        # NOTE: Nova's trait write logs a reset connection at WARNING; a
        # timeout with a traceback.
        self.assertEveryFault((True, False, False, True), outcomes,
                              timeout=(True, True, False, True))

    def test_status_update_uncached(self):
        """The status update's read of the provider, its tree not cached.

        As after a SIGHUP, or a flush that failed.
        """
        outcomes = self.matrix(
            'GET', r'^/resource_providers(\?in_tree=|/%s/(traits|'
            'aggregates)$)' % self.rp_uuid,
            lambda number: self.manager.reset(), self.status_written,
            act=self.toggle_service)
        # NOTE: Nova logs a lost connection with a traceback; an error
        # answer at WARNING.
        self.assertEveryFault((True, False, False, True), outcomes,
                              reset=(True, True, False, True),
                              timeout=(True, True, False, True))


class StockTest(_Faults, _FaultTestBase):
    extension = False


class ExtensionTest(_Faults, _FaultTestBase):
    extension = True
