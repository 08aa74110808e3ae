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

import itertools
from unittest import mock

import ddt
import fixtures
from keystoneauth1 import exceptions as ks_exc
from nova import objects
from nova.scheduler import utils as scheduler_utils

from nova_pcpu_ext import isolate_filter
from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext import scheduler
from nova_pcpu_ext.tests.unit import base

HT = 'HW_CPU_HYPERTHREADING'

objects.register_all()


def request_spec(cpu_policy=None, thread_policy=None, image_thread=None,
                 explicit_trait=None):
    extra_specs = {}
    if cpu_policy:
        extra_specs['hw:cpu_policy'] = cpu_policy
    if thread_policy:
        extra_specs['hw:cpu_thread_policy'] = thread_policy
    if explicit_trait:
        extra_specs['trait:%s' % HT] = explicit_trait
    props = {}
    if image_thread:
        props['hw_cpu_thread_policy'] = image_thread
    spec = objects.RequestSpec(
        flavor=objects.Flavor(vcpus=2, memory_mb=1024, root_gb=1,
                              ephemeral_gb=0, swap=0,
                              extra_specs=extra_specs),
        image=objects.ImageMeta(properties=objects.ImageMetaProps(**props)),
        instance_uuid='00000000-0000-0000-0000-000000000001',
        requested_resources=[], is_bfv=False)
    return spec


def _valid(cpu_policy, thread_policy, image_thread, explicit_trait):
    """Whether Nova's API accepts the combination.

    Thread policies and explicit traits need pinning, and the image may not
    contradict the flavor's thread policy.
    """
    threads = thread_policy or image_thread
    if threads and cpu_policy != 'dedicated':
        return False
    if thread_policy and image_thread and thread_policy != image_thread:
        return False
    return not (explicit_trait and cpu_policy != 'dedicated')


COMBINATIONS = [combo for combo in itertools.product(
    (None, 'shared', 'dedicated'),
    (None, 'prefer', 'require', 'isolate'),
    (None, 'prefer', 'isolate'),
    (None, 'required', 'forbidden')) if _valid(*combo)]


@ddt.ddt
class DecisionTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.filter = isolate_filter.IsolateVcpuFallbackFilter()
        # Placement knows the trait: see TraitKnownTest.
        self.useFixture(fixtures.MockPatchObject(
            self.filter, '_ask_about_trait',
            return_value=isolate_filter.KNOWN))

    def primary(self, spec):
        return scheduler_utils.ResourceRequest.from_request_spec(spec)

    def fallback(self, spec):
        return scheduler_utils.ResourceRequest.from_request_spec(
            spec, enable_pinning_translate=False)

    @ddt.data(*COMBINATIONS)
    @ddt.unpack
    def test_drop_mode(self, cpu_policy, thread, image_thread, trait):
        spec = request_spec(cpu_policy, thread, image_thread, trait)
        resources = self.primary(spec)
        isolate = 'isolate' in (thread, image_thread)
        forbids = isolate or trait == 'forbidden'

        self.assertEqual(forbids, HT in resources.get_request_group(
            None).forbidden_traits, 'Nova translates the request the same')
        self.assertEqual(not isolate, self.filter.allow_fallback(
            None, spec, resources))
        query = self.fallback(spec).to_querystring()
        self.assertEqual(query, self.filter.fallback_request(
            None, spec, self.fallback(spec)).to_querystring())

    def test_request_spec_left_alone(self):
        self.flags(isolate_fallback_mode='legacy_only')
        spec = request_spec('dedicated', 'isolate')
        spec.request_level_params = objects.RequestLevelParams(
            root_forbidden={'CUSTOM_OTHER'})

        fallback = self.filter.fallback_request(None, spec,
                                                self.fallback(spec))

        self.assertEqual({'CUSTOM_OTHER'},
                         spec.request_level_params.root_forbidden)
        self.assertIn('root_required=%21CUSTOM_OTHER%2C%21' +
                      pcpu_trait.TRAIT, fallback.to_querystring())
        self.assertNotIn(pcpu_trait.TRAIT,
                         self.primary(spec).to_querystring())

    @ddt.data(*COMBINATIONS)
    @ddt.unpack
    def test_legacy_only_mode(self, cpu_policy, thread, image_thread, trait):
        self.flags(isolate_fallback_mode='legacy_only')
        spec = request_spec(cpu_policy, thread, image_thread, trait)
        stock = self.fallback(spec).to_querystring()

        self.assertTrue(self.filter.allow_fallback(
            None, spec, self.primary(spec)))
        query = self.filter.fallback_request(
            None, spec, self.fallback(spec)).to_querystring()
        # Only the host's trait is added: hyperthreads stay allowed.
        self.assertEqual(stock + '&root_required=%21' + pcpu_trait.TRAIT,
                         query)

    def test_explicit_trait_is_carried_by_nova_fallback(self):
        """What leaks is the isolate policy, not an explicit trait."""
        spec = request_spec('dedicated', explicit_trait='forbidden')
        self.assertFalse(isolate_filter.requests_isolate(spec))
        self.assertIn(HT, self.fallback(spec).get_request_group(
            None).forbidden_traits)
        spec = request_spec('dedicated', 'isolate')
        self.assertTrue(isolate_filter.requests_isolate(spec))
        self.assertNotIn(HT, self.fallback(spec).get_request_group(
            None).forbidden_traits)


def answer(status, text=''):
    return mock.Mock(status_code=status, text=text)


class _TraitCheckBase(base.TestCase):
    """An isolate request in legacy_only mode; placement's answers mocked."""

    def setUp(self):
        super().setUp()
        self.flags(isolate_fallback_mode='legacy_only')
        self.get = self.useFixture(fixtures.MockPatch(
            'nova.scheduler.client.report.report_client_singleton')
        ).mock.return_value.get
        self.filter = isolate_filter.IsolateVcpuFallbackFilter()
        self.context = mock.Mock(global_id='req-1')
        self.spec = request_spec('dedicated', 'isolate')

    def forbids_trait(self):
        query = self.filter.fallback_request(
            self.context, self.spec,
            scheduler_utils.ResourceRequest.from_request_spec(
                self.spec, enable_pinning_translate=False)).to_querystring()
        return pcpu_trait.TRAIT in query


class TraitKnownTest(_TraitCheckBase):
    """legacy_only forbids its trait only where placement knows it."""

    def test_asked_for_each_request(self):
        """A trait deleted since the last request is noticed."""
        self.get.side_effect = [answer(204), answer(404), answer(204)]

        self.assertEqual([True, False, True],
                         [self.forbids_trait() for _request in range(3)])
        self.get.assert_called_with(
            '/traits/%s' % pcpu_trait.TRAIT, version='1.6',
            global_request_id='req-1')
        self.assertEqual(3, self.get.call_count)
        self.assertNotIn('Cannot ask placement', self.logger.output)

    def test_no_answer_leaves_the_query_as_stock(self):
        self.get.side_effect = [
            ks_exc.ConnectFailure('refused'), answer(403, 'forbidden'),
            answer(403, 'forbidden'), answer(503, 'down'), answer(204)]

        self.assertEqual([False] * 4 + [True],
                         [self.forbids_trait() for _request in range(5)])
        # Once per change of the answer, not once per request.
        self.assertEqual(3, self.logger.output.count(
            'Cannot ask placement whether it knows the trait %s'
            % pcpu_trait.TRAIT))
        for problem in ('(refused)', '(403 forbidden)', '(503 down)'):
            self.assertIn(problem, self.logger.output)
        # Each isolate request says why its query is stock's.
        self.assertEqual(4, self.logger.output.count(
            'placement did not say whether it knows %s' % pcpu_trait.TRAIT))


class RecordingFilter(object):

    def __init__(self, allow):
        self.allow = allow
        self.calls = []

    def allow_fallback(self, context, spec_obj, resources):
        self.calls.append('allow_fallback')
        return self.allow

    def fallback_request(self, context, spec_obj, resources):
        self.calls.append('fallback_request')
        return resources


class SchedulerHookTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.spec = request_spec('dedicated', 'isolate')

    def hook(self, *filters):
        def stock(ctxt, spec_obj, host_manager, enable_pinning_translate):
            return scheduler_utils.ResourceRequest.from_request_spec(
                spec_obj, enable_pinning_translate)
        return scheduler._with_request_filters(stock, filters)

    def test_fallback_kept_when_every_filter_allows(self):
        filters = RecordingFilter(True), RecordingFilter(True)
        resources = self.hook(*filters)(None, self.spec, None)
        self.assertTrue(resources.cpu_pinning_requested)
        self.assertEqual([['allow_fallback']] * 2, [f.calls for f in filters])

    def test_fallback_dropped_when_a_filter_refuses(self):
        refuse = RecordingFilter(False)
        resources = self.hook(refuse)(None, self.spec, None)
        self.assertFalse(resources.cpu_pinning_requested)

    def test_fallback_query_goes_through_filters(self):
        first, second = RecordingFilter(True), RecordingFilter(True)
        self.hook(first, second)(None, self.spec, None,
                                 enable_pinning_translate=False)
        self.assertEqual(['fallback_request'], first.calls)
        self.assertEqual(['fallback_request'], second.calls)

    def test_workaround_means_filters_are_not_asked(self):
        self.flags(group='workarounds', disable_fallback_pcpu_query=True)
        refuse = RecordingFilter(False)
        resources = self.hook(refuse)(None, self.spec, None)
        self.assertTrue(resources.cpu_pinning_requested)
        self.assertEqual([], refuse.calls)

    def test_unpinned_request_not_asked(self):
        refuse = RecordingFilter(False)
        self.hook(refuse)(None, request_spec(), None)
        self.assertEqual([], refuse.calls)


class MutantsTest(_TraitCheckBase):
    """Cases the mutation run found untested (tools/mutation)."""

    def test_drop_read_from_a_file_drops(self):
        # Kills ``isolate_fallback_mode is 'drop'``: a value oslo.config
        # parsed from a file is equal to the literal, not the same object.
        self.flags(isolate_fallback_mode=''.join(['dr', 'op']))
        self.assertFalse(self.filter.allow_fallback(
            self.context, self.spec, None))

    def test_an_error_is_a_warning(self):
        # An error is logged as one, never as an unknown trait, whatever
        # its text.
        self.get.side_effect = [ks_exc.ConnectFailure('write failed')]
        self.assertFalse(self.forbids_trait())
        self.assertIn('Cannot ask placement whether it knows the trait %s '
                      '(write failed)' % pcpu_trait.TRAIT, self.logger.output)
        self.assertNotIn('Placement does not know', self.logger.output)

    def test_a_trait_already_forbidden_stays_forbidden(self):
        # Kills ``_root_forbidden ^ {TRAIT}``: a request forbidding the
        # trait itself had it taken out of the fallback query.
        self.get.return_value = answer(204)
        self.spec.request_level_params = objects.RequestLevelParams(
            root_forbidden={pcpu_trait.TRAIT})
        self.assertTrue(self.forbids_trait())

    def test_the_decision_names_the_trait(self):
        # Kills ``'... %s ...' + TRAIT`` for '%' in both decisions logged.
        self.get.side_effect = [answer(404), answer(204)]
        self.forbids_trait()
        self.forbids_trait()
        self.assertIn('placement does not know %s ([pcpu_ext]'
                      % pcpu_trait.TRAIT, self.logger.output)
        self.assertIn('the VCPU fallback placement query forbids %s on the '
                      'host' % pcpu_trait.TRAIT, self.logger.output)

    def test_legacy_only_read_from_a_file_forbids(self):
        # Kills ``isolate_fallback_mode is not 'legacy_only'``.
        self.flags(isolate_fallback_mode=''.join(['legacy', '_only']))
        self.get.return_value = answer(204)
        self.assertTrue(self.forbids_trait())

    def test_isolate_from_the_database_is_isolate(self):
        # Kills ``get_cpu_thread_policy_constraint(...) is ISOLATE``: the
        # extra spec Nova reads is equal to the constant, not the same.
        spec = request_spec('dedicated', ''.join(['iso', 'late']))
        self.assertTrue(isolate_filter.requests_isolate(spec))

    def test_a_request_without_image_properties(self):
        # Kills ``'image' in spec_obj or spec_obj.image``: a RequestSpec
        # whose image is None (set, but empty) was read as an image.
        self.spec.image = None
        self.assertTrue(isolate_filter.requests_isolate(self.spec))
