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

import logging

import fixtures
from keystoneauth1 import exceptions as ks_exc
from nova.compute import provider_tree
import requests

from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext.tests.unit import base

TRAIT = pcpu_trait.TRAIT


def response(status, body=b'{}'):
    resp = requests.Response()
    resp.status_code = status
    resp._content = body
    return resp


class FakeReportClient(object):
    """Answers the trait's existence check and creation as told."""

    def __init__(self):
        #: Answers, in order, each a response or an exception to raise.
        self.answers = []
        self.calls = []

    def _answer(self, method, url):
        self.calls.append((method, url))
        if not self.answers:
            return response(200, b'{"traits": ["%s"]}' % TRAIT.encode())
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def get(self, url, version=None, global_request_id=None):
        return self._answer('GET', url)

    def put(self, url, data, version=None, global_request_id=None):
        return self._answer('PUT', url)


class _MarkTestBase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = provider_tree.ProviderTree()
        self.tree.new_root('node1', 'uuid1')
        self.tree.update_traits('node1', ['CUSTOM_OPERATOR'])
        # The mixin's own state, without a resource tracker under it.
        self.mixin = pcpu_trait.PcpuTraitMixin.__new__(
            pcpu_trait.PcpuTraitMixin)
        self.mixin.reportclient = self.client = FakeReportClient()
        self.mixin._creation_warned = False

    def mark(self, inventory, child_inventory=None):
        def update():
            self.tree.update_inventory('node1', inventory)
            if child_inventory is not None:
                if not self.tree.exists('child1'):
                    self.tree.new_child('child1', 'uuid1', uuid='uuid2')
                self.tree.update_inventory('child1', child_inventory)

        self.mixin._mark_pcpu(update, self.tree, 'node1')
        return self.tree.data('node1').traits


class MarkTest(_MarkTestBase):

    def test_host_reporting_pcpu_gets_the_trait(self):
        traits = self.mark({'PCPU': {'total': 2}, 'VCPU': {'total': 2}})
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'}, traits)
        self.assertIn('Compute node node1 reports PCPU inventory: adding',
                      self.logger.output)

    def test_legacy_host_gets_none(self):
        self.assertEqual({'CUSTOM_OPERATOR'},
                         self.mark({'VCPU': {'total': 4}}))
        self.assertEqual('', self.logger.output)

    def test_pcpu_of_a_child_marks_the_compute_node(self):
        traits = self.mark({'VCPU': {'total': 4}}, {'PCPU': {'total': 2}})
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'}, traits)
        self.assertEqual(set(), self.tree.data('child1').traits)

    def test_trait_goes_with_the_pcpu_inventory(self):
        self.mark({'PCPU': {'total': 2}})
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'},
                         self.mark({'PCPU': {'total': 2}}))
        self.assertEqual({'CUSTOM_OPERATOR'},
                         self.mark({'VCPU': {'total': 4}}))
        self.assertIn('Compute node node1 no longer reports PCPU '
                      'inventory: removing', self.logger.output)
        self.assertEqual(2, self.logger.output.count('Compute node node1'))


class TraitCreationTest(_MarkTestBase):
    """Placement does not know the trait and may fail to create it."""

    PCPU = {'PCPU': {'total': 2}}
    UNKNOWN = b'{"traits": []}'

    def test_an_unknown_trait_is_created_first(self):
        self.client.answers = [response(200, self.UNKNOWN), response(201)]
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'}, self.mark(self.PCPU))
        self.assertEqual([('GET', '/traits?name=in:' + TRAIT),
                          ('PUT', '/traits/' + TRAIT)], self.client.calls)

    def test_a_failed_creation_leaves_the_trait_out_warned_once(self):
        refused = response(403, b'{"errors": [{"title": "Forbidden"}]}')
        self.client.answers = [response(200, self.UNKNOWN), refused,
                               response(200, self.UNKNOWN), refused]
        warnings = self.useFixture(fixtures.FakeLogger(
            level=logging.WARNING, name=pcpu_trait.__name__))

        self.assertEqual({'CUSTOM_OPERATOR'}, self.mark(self.PCPU))
        self.assertEqual({'CUSTOM_OPERATOR'}, self.mark(self.PCPU))

        self.assertEqual(1, warnings.output.count('could not create'))
        self.assertIn('PUT /traits/%s: 403 {"errors": [{"title": '
                      '"Forbidden"}]}' % TRAIT, warnings.output)
        self.assertNotIn('Traceback', warnings.output)
        # Known again, the trait is added; a later failure warns again.
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'}, self.mark(self.PCPU))
        self.tree.remove_traits('node1', TRAIT)
        self.client.answers = [ks_exc.ConnectFailure('reset')]
        self.assertEqual({'CUSTOM_OPERATOR'}, self.mark(self.PCPU))
        self.assertEqual(2, warnings.output.count('could not create'))
        self.assertIn('GET /traits?name=in:%s: reset' % TRAIT,
                      warnings.output)

    def test_a_failed_existence_check_leaves_the_trait_out(self):
        self.client.answers = [response(503)]
        self.assertEqual({'CUSTOM_OPERATOR'}, self.mark(self.PCPU))
        self.assertEqual([('GET', '/traits?name=in:' + TRAIT)],
                         self.client.calls)

    def test_nothing_asked_when_the_trait_stays(self):
        self.mark(self.PCPU)
        self.client.calls = []
        self.mark(self.PCPU)
        self.mark({'VCPU': {'total': 4}})
        self.assertEqual([], self.client.calls)


class MutantsTest(_MarkTestBase):
    """Cases the mutation run found untested (tools/mutation)."""

    PCPU = {'PCPU': {'total': 2}}

    def test_a_known_trait_is_not_created_again(self):
        # Kills the mutants of ``resp.status_code == 200`` in the first
        # check of ensure_trait (< 200, == 199): a known trait was PUT.
        self.assertEqual({TRAIT, 'CUSTOM_OPERATOR'}, self.mark(self.PCPU))
        self.assertEqual([('GET', '/traits?name=in:' + TRAIT)],
                         self.client.calls)

    def test_the_reason_keeps_200_characters_of_the_answer(self):
        # Kills resp.text[:199] and resp.text[:201].
        self.client.answers = [response(503, b'x' * 300)]
        self.assertEqual('GET /traits?name=in:%s: 503 %s' % (TRAIT, 'x' * 200),
                         pcpu_trait.ensure_trait(self.client))


class Tracker(object):
    """The part of Nova's resource tracker the mixin builds on."""

    def __init__(self, host, driver):
        self.driver = driver
        self.reportclient = FakeReportClient()


class Driver(object):

    def update_provider_tree(self, provider_tree, nodename):
        provider_tree.update_inventory(nodename, {'PCPU': {'total': 2}})


class MixedTracker(pcpu_trait.PcpuTraitMixin, Tracker):
    pass


class ConstructedTest(base.TestCase):

    def test_the_first_failure_to_create_the_trait_is_a_warning(self):
        # Kills ``self._creation_warned = True`` in __init__: the first
        # failure was logged at DEBUG only.
        warnings = self.useFixture(fixtures.FakeLogger(
            level=logging.WARNING, name=pcpu_trait.__name__))
        tracker = MixedTracker('host1', Driver())
        tracker.reportclient.answers = [response(503)]
        tree = provider_tree.ProviderTree()
        tree.new_root('node1', 'uuid1')

        tracker.driver.update_provider_tree(tree, 'node1')

        self.assertEqual(set(), tree.data('node1').traits)
        self.assertEqual(1, warnings.output.count('could not create'))
