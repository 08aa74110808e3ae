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

import contextlib
from importlib import metadata
import os
import sys
import threading

from oslo_log import log as logging

from nova_pcpu_ext import exception

LOG = logging.getLogger(__name__)
#: The distribution whose version the services log and the commands print.
DISTRIBUTION = 'nova-pcpu-ext'

lock = threading.RLock()
# (owner, attribute name) -> original value, in the order applied.
_originals = {}
# Services ('scheduler', 'compute') whose activation has run.
_active = set()


def is_active(service):
    return service in _active


def version():
    """The version of nova-pcpu-ext installed, as its metadata says.

    ``unknown`` if the package is not installed (run from a source tree).
    """
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return 'unknown'


def mark_active(service):
    """Record that ``service``'s activation has run; log it with the version.

    :param service: ``scheduler`` or ``compute``: the Nova service is
        ``nova-<service>``.
    """
    if service not in _active:
        LOG.info('%s %s: active in nova-%s', DISTRIBUTION, version(),
                 service)
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


def exit_on_error(activate):
    """Call ``activate()``; on a configuration or compatibility error, stop.

    The error is logged (to Nova's log file, once logging is set up) and
    the process exits with the same one line on stderr, never a traceback.
    """
    try:
        return activate()
    except exception.PcpuExtError as error:
        message = str(error)
    # NOTE: outside the except block, where oslo.log would repeat the
    # exception after the message.
    LOG.error('%s', message)
    sys.exit('nova-pcpu-ext: %s' % message)


@contextlib.contextmanager
def _program_name(name):
    """Be program ``name``, in the directory of the running script.

    oslo.config derives its default configuration files and directories
    (``/etc/nova/<name>.conf.d`` and others) from ``sys.argv[0]``.
    """
    program = sys.argv[0]
    sys.argv[0] = os.path.join(os.path.dirname(program), name)
    try:
        yield
    finally:
        sys.argv[0] = program


def run_nova_service(nova_cmd, activate):
    """Run a Nova service with the plugins activated.

    The configuration is parsed under Nova's program name
    (``nova.cmd.compute`` is ``nova-compute``), so the service reads the
    configuration Nova's reads. ``activate()`` is called right after Nova
    has parsed its configuration and logging is set up from it, before any
    service object is created.

    :param nova_cmd: a ``nova.cmd.*`` module; importing it has already
        applied Nova's concurrency set-up.
    """
    config = nova_cmd.config
    parse_args = config.parse_args
    program = 'nova-' + nova_cmd.__name__.rpartition('.')[2]

    def parse_args_then_activate(*args, **kwargs):
        # NOTE: for the parsing only: the process title Nova's launcher
        # sets from sys.argv keeps naming the script that runs, which is
        # how nova-pcpu-ext-status finds the extension's scheduler.
        with _program_name(program):
            parse_args(*args, **kwargs)
        # NOTE: Nova's main() sets up logging right after parsing; doing it
        # here first sends the activation messages and errors where the
        # operator reads the service's log. Nova's second set-up replaces
        # the handlers with equal ones.
        logging.setup(config.CONF, 'nova')
        exit_on_error(activate)

    config.parse_args = parse_args_then_activate
    try:
        return nova_cmd.main()
    finally:
        config.parse_args = parse_args
