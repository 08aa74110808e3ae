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

"""Plugin kinds, their base classes, and loading them by name.

Each kind has a stevedore namespace owned by this project; third parties
may add entry points to it. Plugins are loaded by the names given in
``[pcpu_ext]``: an unknown or broken name is a startup error that names the
option and lists what is installed.
"""

import abc
from importlib import metadata

from oslo_log import log as logging
import stevedore

from nova_pcpu_ext import conf
from nova_pcpu_ext import exception

LOG = logging.getLogger(__name__)


class Plugin(abc.ABC):
    """What every plugin kind shares."""

    #: Nova symbols the plugin overrides or calls, as accepted by
    #: :func:`nova_pcpu_ext.compat.require`; checked before activation.
    nova_symbols = ()

    #: Nova methods the plugin needs wrapped in place, as
    #: ``{'module:Class.method': wrapper factory}``; a factory takes the
    #: stock function and returns its replacement.
    method_wrappers = {}

    @classmethod
    def validate_config(cls, conf):
        """Check the configuration the plugin depends on.

        Raise :class:`~nova_pcpu_ext.exception.InvalidConfig` on a bad
        value, so the service stops at startup rather than later.
        """


class RequestFilter(Plugin):
    """Adjusts the placement queries nova-scheduler makes for one request.

    Instances are created once per scheduler process and consulted for every
    request; they must not keep per-request state.
    """

    @abc.abstractmethod
    def allow_fallback(self, context, spec_obj, resources):
        """Return whether Nova may make its VCPU fallback query.

        Called only when Nova would make it: the request asks for pinned
        CPUs and ``[workarounds] disable_fallback_pcpu_query`` is off.

        :param resources: the ``ResourceRequest`` of the first (PCPU) query.
        """

    @abc.abstractmethod
    def fallback_request(self, context, spec_obj, resources):
        """Return the ``ResourceRequest`` for the VCPU fallback query.

        :param resources: the request Nova built for the fallback query; it
            may be changed and returned. Sets it shares with the RequestSpec
            (root required/forbidden traits) must not be changed in place.
        """


class ResourceTrackerMixin(Plugin):
    """Mixed into Nova's ``ResourceTracker`` class in nova-compute."""


class DriverView(object):
    """The resource tracker's view of the virt driver.

    Every attribute is the driver's own, but ``update_provider_tree`` runs
    through ``edit(update, provider_tree, nodename)``: ``update()`` calls
    the driver's method with exactly what the resource tracker passed (it
    names ``allocations`` only when it reshapes), and ``edit`` may read or
    change the tree before and after.
    """

    def __init__(self, driver, edit):
        self._driver = driver
        self._edit = edit

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def update_provider_tree(self, provider_tree, nodename, *args,
                             **kwargs):
        def update():
            self._driver.update_provider_tree(provider_tree, nodename,
                                              *args, **kwargs)
        self._edit(update, provider_tree, nodename)


class ReportClientMixin(Plugin):
    """Mixed into Nova's ``SchedulerReportClient`` class in nova-compute."""


REQUEST_FILTERS = 'nova_pcpu_ext.request_filters'
RESOURCE_TRACKER = 'nova_pcpu_ext.resource_tracker'
REPORT_CLIENT = 'nova_pcpu_ext.report_client'


def installed(namespace):
    """Names of the entry points installed in a namespace, sorted."""
    return sorted({ep.name for ep in metadata.entry_points(group=namespace)})


def _load(option, namespace, names, base):
    """Load the plugin classes named by ``[pcpu_ext] <option>``, in order."""
    conf.validate(conf.CONF)
    available = installed(namespace)
    unknown = [name for name in names if name not in available]
    if unknown:
        raise exception.PluginNotFound(
            '[pcpu_ext] %s: unknown plugin %s; installed in %s: %s' % (
                option, ', '.join(unknown), namespace,
                ', '.join(available) or '(none)'))

    def load_failed(manager, entrypoint, error):
        raise exception.PluginLoadFailed(
            '[pcpu_ext] %s: plugin %s (%s) cannot be loaded: %s' % (
                option, entrypoint.name, entrypoint.value, error))

    manager = stevedore.NamedExtensionManager(
        namespace, names, name_order=True,
        on_load_failure_callback=load_failed)
    classes = []
    for ext in manager:
        if not (isinstance(ext.plugin, type) and
                issubclass(ext.plugin, base)):
            raise exception.PluginLoadFailed(
                '[pcpu_ext] %s: plugin %s (%s) is not a %s.%s subclass' % (
                    option, ext.name, ext.entry_point.value,
                    base.__module__, base.__qualname__))
        ext.plugin.validate_config(conf.CONF)
        classes.append(ext.plugin)
    LOG.info('[pcpu_ext] %s: loaded %s', option,
             ', '.join(names) or '(none)')
    return classes


def load_request_filters():
    """Instances of the request filters named in ``[pcpu_ext]``."""
    classes = _load('request_filters', REQUEST_FILTERS,
                    conf.CONF.pcpu_ext.request_filters, RequestFilter)
    return [cls() for cls in classes]


def load_resource_tracker_mixins():
    """Mixin classes named in ``[pcpu_ext] resource_tracker_mixins``."""
    return _load('resource_tracker_mixins', RESOURCE_TRACKER,
                 conf.CONF.pcpu_ext.resource_tracker_mixins,
                 ResourceTrackerMixin)


def load_report_client_mixins():
    """The report client mixin named in ``[pcpu_ext]``, as a list of 0/1."""
    name = conf.CONF.pcpu_ext.report_client
    return _load('report_client', REPORT_CLIENT, [name] if name else [],
                 ReportClientMixin)
