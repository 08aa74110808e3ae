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

"""Request filter ``isolate_vcpu_fallback`` (Nova bug 1889633).

A pinned request with the ``isolate`` CPU thread policy asks placement for
``PCPU`` without hyperthreaded hosts; Nova's VCPU fallback query, made for
legacy hosts that report no ``PCPU``, then asks again without that
forbidden trait, so a hyperthreaded host configured with
``cpu_dedicated_set`` is a candidate for an instance that must not run on
hyperthreads. Nova rejects it late, in its NUMA fitting. This filter, by
``[pcpu_ext] isolate_fallback_mode``:

* ``drop``: makes no fallback query for ``isolate`` requests;
* ``legacy_only``: makes the fallback query of every pinned request
  forbid, on the host, the trait of hosts that report ``PCPU`` (see
  :mod:`nova_pcpu_ext.pcpu_trait`), so it yields legacy hosts only. While
  placement does not know that trait, no host carries it and the query
  is stock Nova's: placement refuses a query naming a trait it does not
  know, and Nova's scheduler then fails the boot.

An explicit ``trait:HW_CPU_HYPERTHREADING=forbidden`` extra spec is carried
by both of Nova's queries already, so ``drop`` leaves such requests alone.
"""

from keystoneauth1 import exceptions as ks_exc
import nova.conf
from nova import objects
from nova.objects import fields
from nova.scheduler.client import report
from nova.virt import hardware
import os_traits
from oslo_log import log as logging

from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext import plugins

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

HYPERTHREADING = os_traits.HW_CPU_HYPERTHREADING
#: Placement's answers to ``GET /traits/{name}``: the trait is known, or
#: not; any other answer is a problem, told by its text.
KNOWN, UNKNOWN = 204, 404


def requests_isolate(spec_obj):
    """Whether the flavor or image asks for the isolate thread policy."""
    if 'image' in spec_obj and spec_obj.image:
        image = spec_obj.image
    else:
        image = objects.ImageMeta(properties=objects.ImageMetaProps())
    return (hardware.get_cpu_thread_policy_constraint(spec_obj.flavor, image)
            == fields.CPUThreadAllocationPolicy.ISOLATE)


class IsolateVcpuFallbackFilter(plugins.RequestFilter):
    """No VCPU fallback query without the trait for isolate requests."""

    nova_symbols = (
        ('nova.virt.hardware:get_cpu_thread_policy_constraint',
         ('flavor', 'image_meta')),
        ('nova.scheduler.client.report:report_client_singleton', ()),
        ('nova.scheduler.client.report:SchedulerReportClient.get',
         ('self', 'url', '*', 'version', 'global_request_id')),
    )

    def __init__(self):
        super().__init__()
        #: What placement last said of the trait, for logging changes
        #: only: a scheduler asks on every pinned request.
        self._last_answer = None

    @staticmethod
    def _drops(spec_obj):
        """Whether the filter drops the fallback query of this request."""
        return (CONF.pcpu_ext.isolate_fallback_mode == 'drop' and
                requests_isolate(spec_obj))

    @staticmethod
    def _log(context, spec_obj, decision):
        LOG.info('Request %(request)s for instance %(instance)s asks for '
                 'the isolate CPU thread policy, which forbids %(trait)s: '
                 '%(decision)s',
                 {'request': getattr(context, 'request_id', None),
                  'instance': spec_obj.instance_uuid,
                  'trait': HYPERTHREADING, 'decision': decision})

    def allow_fallback(self, context, spec_obj, resources):
        if not self._drops(spec_obj):
            return True
        self._log(context, spec_obj,
                  'not making the VCPU fallback placement query ([pcpu_ext] '
                  'isolate_fallback_mode = drop), so only hosts reporting '
                  'PCPU without hyperthreads are candidates.')
        return False

    def fallback_request(self, context, spec_obj, resources):
        if CONF.pcpu_ext.isolate_fallback_mode != 'legacy_only':
            return resources
        answer = self._ask_about_trait(context)
        if answer != KNOWN:
            # NOTE: no provider carries a trait placement does not know,
            # so forbidding it would change no candidate.
            if requests_isolate(spec_obj):
                self._log(context, spec_obj,
                          'the VCPU fallback placement query is made as '
                          'stock Nova makes it: placement %s %s '
                          '([pcpu_ext] isolate_fallback_mode = legacy_only).'
                          % ('does not know' if answer == UNKNOWN else
                             'did not say whether it knows',
                             pcpu_trait.TRAIT))
            return resources
        # NOTE: a new set: the root traits alias the RequestSpec's, which
        # the first query and later moves read too.
        resources._root_forbidden = (
            resources._root_forbidden | {pcpu_trait.TRAIT})
        if requests_isolate(spec_obj):
            self._log(context, spec_obj,
                      'the VCPU fallback placement query forbids %s on the '
                      'host, so only legacy hosts (no PCPU inventory) are '
                      'candidates through it ([pcpu_ext] '
                      'isolate_fallback_mode = legacy_only).'
                      % pcpu_trait.TRAIT)
        return resources

    def _ask_about_trait(self, context):
        """:data:`KNOWN`, :data:`UNKNOWN` or why placement did not say.

        Asked for each request, not remembered: a trait no provider
        carries can be deleted, and a query naming it would then fail
        every pinned boot. Only the ``pcpu_trait`` mixin of computes that
        report PCPU creates it.
        """
        try:
            response = report.report_client_singleton().get(
                '/traits/%s' % pcpu_trait.TRAIT, version='1.6',
                global_request_id=context.global_id)
        except ks_exc.ClientException as error:
            answer = str(error) or type(error).__name__
        else:
            answer = response.status_code
            if answer not in (KNOWN, UNKNOWN):
                answer = '%d %s' % (answer, response.text)
        if answer != self._last_answer:
            self._last_answer = answer
            self._log_answer(answer)
        return answer

    @staticmethod
    def _log_answer(answer):
        values = {'trait': pcpu_trait.TRAIT, 'problem': answer}
        if answer == KNOWN:
            LOG.info('Placement knows the trait %(trait)s: the VCPU '
                     'fallback query of pinned requests forbids it on the '
                     'host ([pcpu_ext] isolate_fallback_mode = '
                     'legacy_only).', values)
        elif answer == UNKNOWN:
            LOG.info('Placement does not know the trait %(trait)s, so no '
                     'host reports PCPU through the pcpu_trait mixin: the '
                     'VCPU fallback query of pinned requests is made as '
                     'stock Nova makes it ([pcpu_ext] '
                     'isolate_fallback_mode = legacy_only).', values)
        else:
            LOG.warning('Cannot ask placement whether it knows the trait '
                        '%(trait)s (%(problem)s): until it answers, the '
                        'VCPU fallback query of pinned requests is made as '
                        'stock Nova makes it, without forbidding it '
                        '([pcpu_ext] isolate_fallback_mode = legacy_only). '
                        'Asked again with the next pinned request.',
                        values)
