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

"""Feature detection of the Nova symbols nova-pcpu-ext hooks.

Nova has no plugin interface for what we change, so before touching a
class we check that each symbol exists with the shape we rely on, and stop
the service with a message naming the Nova version and the missing piece
when it does not.
"""

import importlib
import inspect

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: Nova major versions, oldest and newest, that nova-pcpu-ext is tested with.
OLDEST_TESTED = 29
NEWEST_TESTED = 34
SUPPORTED = 'Nova 29 (2024.1) to 34 (2026.2)'


def _nova_version():
    try:
        from nova import version
        return version.version_string()
    except Exception:  # noqa: broad on purpose, only for the message
        return 'unknown'


def _fail(symbol, problem):
    from nova_pcpu_ext import exception
    raise exception.IncompatibleNova(
        'nova-pcpu-ext cannot hook Nova %s: %s %s. Supported: %s. Disable '
        'the plugin that needs it in [pcpu_ext] or install a supported '
        'Nova.' % (_nova_version(), symbol, problem, SUPPORTED))


def warn_if_untested():
    """Log one warning when the running Nova is outside the tested range.

    The symbol checks still decide whether the service starts; this only
    tells the operator that nobody has run this combination yet.
    """
    version = _nova_version()
    try:
        major = int(version.split('.')[0])
    except ValueError:
        major = None
    if major is None or not OLDEST_TESTED <= major <= NEWEST_TESTED:
        LOG.warning('nova-pcpu-ext runs on Nova %(running)s, which it was '
                    'not tested with: tested with %(supported)s.',
                    {'running': version, 'supported': SUPPORTED})


def resolve(symbol):
    """Return the object named ``module:attr.attr``, or None if missing."""
    module_name, _, path = symbol.partition(':')
    try:
        obj = importlib.import_module(module_name)
    except ImportError:
        return None
    for attr in path.split('.') if path else ():
        obj = getattr(obj, attr, None)
        if obj is None:
            return None
    return obj


def require(symbol, params=None):
    """Check that ``symbol`` exists with the expected parameters.

    If ``params`` is given, the symbol must be callable and its leading
    parameters must have exactly these names. Every wrapper takes these
    and passes any later parameter on unchanged, so a parameter that Nova
    appends keeps working while one it inserts, renames or removes stops
    the service here.

    :returns: the resolved object.
    :raises IncompatibleNova: with a message an operator can act on.
    """
    obj = resolve(symbol)
    if obj is None:
        _fail(symbol, 'is missing')
    if params is not None:
        if not callable(obj):
            _fail(symbol, 'is not callable')
        actual = tuple(inspect.signature(obj).parameters)[:len(params)]
        if actual != tuple(params):
            _fail(symbol, 'takes (%s), expected (%s)' % (
                ', '.join(actual), ', '.join(params)))
    return obj


def require_source(symbol, names):
    """Check that the source code of ``symbol`` mentions every name.

    For what no signature shows: an attribute a function reads or a method
    sets. Where Nova is installed without its source, nothing is checked.

    :raises IncompatibleNova: naming the symbol and what it lacks.
    """
    try:
        source = inspect.getsource(require(symbol))
    except (OSError, TypeError):
        LOG.warning('The source of %s is not installed: not checking that '
                    'it uses %s.', symbol, ', '.join(names))
        return
    missing = [name for name in names if name not in source]
    if missing:
        _fail(symbol, 'no longer uses %s' % ', '.join(missing))


def require_option(conf, group, name):
    """Check that Nova registers the option ``[group] name``."""
    if group not in conf or name not in conf[group]:
        _fail('[%s] %s' % (group, name), 'is not a Nova option')


def owner_and_name(symbol):
    """The owner and attribute name of the last part of a symbol."""
    module_name, _, path = symbol.partition(':')
    owner_path, _, name = path.rpartition('.')
    owner = require('%s:%s' % (module_name, owner_path) if owner_path
                    else module_name)
    return owner, name


def require_all(symbols):
    """Check every ``(symbol, params)`` pair; see :func:`require`."""
    for symbol, params in symbols:
        require(symbol, params)
