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

"""The one place that changes Nova's classes and functions.

Every change is recorded so that activating twice changes nothing and
:func:`deactivate` restores Nova exactly (tests rely on both).
"""

import sys
import threading

from oslo_log import log as logging

from nova_pcpu_ext import exception

LOG = logging.getLogger(__name__)

lock = threading.RLock()
# (owner, attribute name) -> original value, in the order applied.
_originals = {}
# Services ('scheduler', 'compute') whose activation has run.
_active = set()


def is_active(service):
    return service in _active


def mark_active(service):
    _active.add(service)


def is_patched(owner, name):
    return (owner, name) in _originals


def patch(owner, name, replacement):
    """Replace ``owner.name`` unless it was already replaced."""
    with lock:
        if is_patched(owner, name):
            return
        _originals[(owner, name)] = getattr(owner, name)
        setattr(owner, name, replacement)
        LOG.info('nova-pcpu-ext: %s.%s replaced',
                 getattr(owner, '__name__', owner), name)


def original(owner, name):
    """The value ``owner.name`` had before it was patched."""
    with lock:
        return _originals.get((owner, name), getattr(owner, name))


def deactivate():
    """Undo every patch, newest first."""
    with lock:
        for (owner, name), value in reversed(list(_originals.items())):
            setattr(owner, name, value)
        _originals.clear()
        _active.clear()


def compose(stock, mixins):
    """A subclass of ``stock`` with ``mixins`` first in its MRO."""
    if not mixins:
        return stock
    return type(stock.__name__, tuple(mixins) + (stock,),
                {'__module__': __name__, '__doc__': stock.__doc__})


def run_nova_service(nova_cmd, activate):
    """Run a Nova service with the plugins activated.

    ``activate()`` is called right after Nova has parsed its configuration,
    before any service object is created.

    :param nova_cmd: a ``nova.cmd.*`` module; importing it has already
        applied Nova's concurrency patching.
    """
    config = nova_cmd.config
    parse_args = config.parse_args

    def parse_args_then_activate(*args, **kwargs):
        parse_args(*args, **kwargs)
        try:
            activate()
        except exception.PcpuExtError as error:
            LOG.error('%s', error)
            sys.exit('nova-pcpu-ext: %s' % error)

    config.parse_args = parse_args_then_activate
    try:
        return nova_cmd.main()
    finally:
        config.parse_args = parse_args
