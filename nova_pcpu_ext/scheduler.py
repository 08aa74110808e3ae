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

"""Activation of the scheduler plugins.

Enable in the scheduler's nova.conf, beside Nova's own filters::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_pcpu_ext.scheduler.activate

Nova calls :func:`activate` from ``HostManager.__init__``, after the
configuration is parsed and before the scheduler takes requests.
"""

import functools

import nova.conf
from oslo_log import log as logging

from nova_pcpu_ext import activation
from nova_pcpu_ext import compat
from nova_pcpu_ext import plugins

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

MANAGER = 'nova.scheduler.manager'
SELECT_DESTINATIONS = MANAGER + ':SchedulerManager.select_destinations'
RESOURCES_FROM_REQUEST_SPEC = ('nova.scheduler.utils.'
                               'resources_from_request_spec')
#: What select_destinations reads to decide on the VCPU fallback query:
#: the first is set by ResourceRequest for that query only.
FALLBACK_USES = ('cpu_pinning_requested', 'disable_fallback_pcpu_query')

# NOTE: SchedulerManager.select_destinations looks this function up through
# its module on every request (Train to 2026.2), calling it once with
# enable_pinning_translate=True and, when ResourceRequest.
# cpu_pinning_requested is set and [workarounds] disable_fallback_pcpu_query
# is not, once more with False for the VCPU fallback. It passes
# enable_pinning_translate by keyword, and so does the wrapper.
NOVA_SYMBOLS = (
    ('nova.scheduler.utils:resources_from_request_spec',
     ('ctxt', 'spec_obj', 'host_manager', '*', 'enable_pinning_translate')),
    ('nova.scheduler.utils:ResourceRequest.get_request_group',
     ('self', 'ident')),
    (SELECT_DESTINATIONS, None),
)
#: Names the source of a symbol must mention, for what signatures miss.
NOVA_SOURCE_USES = (
    ('nova.scheduler.utils:ResourceRequest.__init__',
     ('self.cpu_pinning_requested', 'self._root_forbidden')),
    # NOTE: the legacy_only mode of the isolate filter forbids a trait on
    # the host through the request's root traits (placement 1.35).
    ('nova.scheduler.utils:ResourceRequest.to_querystring',
     ('self._root_forbidden',)),
)
#: The Nova option the request filters read: (group, name).
NOVA_OPTION = ('workarounds', 'disable_fallback_pcpu_query')


def _with_request_filters(stock, request_filters):
    # NOTE: no *args: a parameter after enable_pinning_translate, which
    # Nova's callers pass by keyword, comes by keyword too.
    @functools.wraps(stock)
    def resources_from_request_spec(ctxt, spec_obj, host_manager,
                                    enable_pinning_translate=True,
                                    **kwargs):
        resources = stock(ctxt, spec_obj, host_manager,
                          enable_pinning_translate=enable_pinning_translate,
                          **kwargs)
        if not enable_pinning_translate:
            for request_filter in request_filters:
                resources = request_filter.fallback_request(
                    ctxt, spec_obj, resources)
        elif (resources.cpu_pinning_requested and
                not CONF.workarounds.disable_fallback_pcpu_query):
            # cpu_pinning_requested only tells the scheduler to make the
            # fallback query; it is read nowhere else.
            resources.cpu_pinning_requested = all(
                f.allow_fallback(ctxt, spec_obj, resources)
                for f in request_filters)
        return resources
    return resources_from_request_spec


def makes_fallback_query(tree):
    """Whether Nova's scheduler makes the VCPU fallback placement query.

    :param tree: the ``ast`` of ``nova.scheduler.manager``.
    :returns: False once nothing in the module reads
        ``cpu_pinning_requested`` (the query goes with ``vcpu_pin_set``
        support, see the TODO in ``select_destinations``), else True.
    :raises IncompatibleNova: when ``select_destinations`` makes the query
        in a way the request filters cannot reach.
    """
    if not compat.reads(tree, FALLBACK_USES[0]):
        return False
    compat.require_calls(SELECT_DESTINATIONS, tree,
                         RESOURCES_FROM_REQUEST_SPEC, FALLBACK_USES)
    return True


def check_plugins():
    """Load the request filters named in ``[pcpu_ext]`` and check Nova.

    :returns: the request filters, in order; none when Nova makes no VCPU
        fallback query, so they have nothing to fix.
    :raises PcpuExtError: on bad configuration or an unsupported Nova.
    """
    request_filters = plugins.load_request_filters()
    if not request_filters:
        return []
    tree = compat.source_tree(MANAGER)
    if tree is not None and not makes_fallback_query(tree):
        LOG.warning('nova-scheduler makes no VCPU fallback placement query '
                    '(nothing in %(module)s reads %(flag)s): the request '
                    'filters %(filters)s have nothing to fix and stand '
                    'aside. Remove them from [pcpu_ext] request_filters.',
                    {'module': MANAGER, 'flag': FALLBACK_USES[0],
                     'filters': ', '.join(CONF.pcpu_ext.request_filters)})
        return []
    compat.require_all(NOVA_SYMBOLS)
    for symbol, names in NOVA_SOURCE_USES:
        compat.require_source(symbol, names)
    compat.require_option(CONF, *NOVA_OPTION)
    for request_filter in request_filters:
        compat.require_all(request_filter.nova_symbols)
    return request_filters


def activate_plugins():
    """Activate the scheduler plugins named in ``[pcpu_ext]``.

    Idempotent. Raises a :class:`~nova_pcpu_ext.exception.PcpuExtError`
    subclass on bad configuration or an unsupported Nova.
    """
    from nova.scheduler import utils

    with activation.lock:
        if activation.is_active('scheduler'):
            return
        request_filters = check_plugins()
        compat.warn_if_untested()
        if request_filters:
            activation.patch(
                utils, 'resources_from_request_spec',
                _with_request_filters(utils.resources_from_request_spec,
                                      request_filters))
        activation.mark_active('scheduler')


def activate():
    """The ``available_filters`` entry: activate, return no host filter.

    A configuration or compatibility error stops nova-scheduler with one
    line naming what to fix, as the console script does.
    """
    activation.exit_on_error(activate_plugins)
    return []
