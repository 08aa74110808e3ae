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

import ast
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


#: Parameter kinds a caller can pass by position, and by keyword.
_BY_POSITION = (inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD,
               inspect.Parameter.KEYWORD_ONLY)


def _describe(parameters):
    """``(a, /, b, *, c)``: the names of parameters with their kinds."""
    parts = []
    star = False
    for index, param in enumerate(parameters):
        if param.kind == param.KEYWORD_ONLY and not star:
            parts.append('*')
        star = star or param.kind in (param.VAR_POSITIONAL,
                                      param.KEYWORD_ONLY)
        parts.append({param.VAR_POSITIONAL: '*', param.VAR_KEYWORD: '**'}.get(
            param.kind, '') + param.name)
        following = parameters[index + 1:index + 2]
        if (param.kind == param.POSITIONAL_ONLY and
                not any(p.kind == p.POSITIONAL_ONLY for p in following)):
            parts.append('/')
    return '(%s)' % ', '.join(parts)


def _expected(positional, keyword):
    parts = ['(%s, ...)' % ', '.join(positional)] if positional else []
    if keyword:
        parts.append('%s by keyword' % ', '.join(keyword))
    return ' by position, then '.join(parts)


def _takes(parameters, positional, keyword):
    """Whether parameters take what a wrapper passes, the way it passes it.

    Each name of ``positional`` in order is passed by position; each of
    ``keyword``, by keyword. A name of ``keyword`` that callers can still
    pass by position must come next, in the same order, for the wrapper's
    own signature to receive what they pass.
    """
    by_position = [('*' if p.kind == p.VAR_POSITIONAL else '') + p.name
                   for p in parameters
                   if p.kind in _BY_POSITION + (p.VAR_POSITIONAL,)]
    head = by_position[:len(positional) + len(keyword)]
    rest = head[len(positional):]
    kinds = {p.name: p.kind for p in parameters}
    return (head[:len(positional)] == list(positional) and
            rest == list(keyword[:len(rest)]) and
            all(kinds.get(name) in _BY_KEYWORD for name in keyword))


def require(symbol, params=None):
    """Check that ``symbol`` exists with the expected parameters.

    If ``params`` is given, the symbol must be callable and take these
    parameters first: the names before an optional ``'*'`` by position, in
    this order, and the names after it by keyword, as in a signature. Every
    wrapper takes these, passes the first by position and the others by
    keyword (as Nova's own callers do), and passes any later parameter on
    unchanged. So a parameter that Nova appends, or makes keyword-only
    among those after ``'*'``, keeps working, while one it inserts,
    renames, removes or makes keyword-only among the others stops the
    service here.

    :returns: the resolved object.
    :raises IncompatibleNova: with a message an operator can act on.
    """
    obj = resolve(symbol)
    if obj is None:
        _fail(symbol, 'is missing')
    if params is not None:
        if not callable(obj):
            _fail(symbol, 'is not callable')
        params = tuple(params)
        star = params.index('*') if '*' in params else len(params)
        positional, keyword = params[:star], params[star + 1:]
        parameters = list(inspect.signature(obj).parameters.values())
        if not _takes(parameters, positional, keyword):
            _fail(symbol, 'takes %s, expected %s' % (
                _describe(parameters), _expected(positional, keyword)))
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


def source_tree(module_name):
    """The ``ast`` of a module's source, or None where it is not installed."""
    try:
        return ast.parse(inspect.getsource(
            importlib.import_module(module_name)))
    except (OSError, TypeError):
        LOG.warning('The source of %s is not installed: not checking how '
                    'it calls what nova-pcpu-ext hooks.', module_name)
        return None


def _definition(tree, path):
    """The class or function ``path`` (``Class.method``) defines in ``tree``.

    Read from the module's source rather than from the function object: a
    decorator that keeps no ``__wrapped__`` (oslo.messaging's
    ``expected_exceptions``) hides the function from ``inspect``.
    """
    node = tree
    for name in path.split('.'):
        node = next((child for child in node.body if isinstance(
            child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and child.name == name), None)
        if node is None:
            return None
    return node


def _references(tree, module_name):
    """The expressions by which a module's top-level imports name a module.

    ``from nova.scheduler import utils`` gives ``utils``; ``import
    nova.scheduler.utils`` gives ``nova.scheduler.utils``.
    """
    package, _, name = module_name.rpartition('.')
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == package:
            names.update(alias.asname or alias.name for alias in node.names
                         if alias.name == name)
        elif isinstance(node, ast.Import):
            names.update(alias.asname or alias.name for alias in node.names
                         if alias.name == module_name)
    return names


def reads(node, attribute):
    """Whether the code of ``node`` reads an attribute of that name."""
    return any(isinstance(child, ast.Attribute) and child.attr == attribute
               and isinstance(child.ctx, ast.Load)
               for child in ast.walk(node))


def require_calls(symbol, tree, function, uses=()):
    """Check that ``symbol`` calls ``function`` through its module.

    nova-pcpu-ext replaces a module's function, which reaches only the
    calls that look it up through the module at call time.

    :param symbol: ``module:Class.method``, defined in ``tree``.
    :param tree: the ``ast`` of the symbol's module (see
        :func:`source_tree`).
    :param function: ``module.function``, the function called.
    :param uses: attribute names the symbol must read too.
    :raises IncompatibleNova: naming the symbol and what it does instead.
    """
    node = _definition(tree, symbol.partition(':')[2])
    if node is None:
        _fail(symbol, 'is not defined in the source of its module')
    module_name, _, name = function.rpartition('.')
    calls = [call for call in ast.walk(node) if isinstance(call, ast.Call)
             and name in (getattr(call.func, 'attr', None),
                          getattr(call.func, 'id', None))]
    if not calls:
        _fail(symbol, 'no longer calls %s' % function)
    through = _references(tree, module_name)
    for call in calls:
        if not (isinstance(call.func, ast.Attribute) and
                ast.unparse(call.func.value) in through):
            _fail(symbol, 'calls %s as %s (line %d), not through its '
                  'module' % (function, ast.unparse(call.func),
                              call.lineno))
    missing = [use for use in uses if not reads(node, use)]
    if missing:
        _fail(symbol, 'no longer reads %s' % ', '.join(missing))


def require_any_call(symbol, tree, names):
    """Which of the functions or methods ``names`` ``symbol`` calls.

    For a call whose target shows how Nova behaves, such as the report
    client method the resource tracker takes its snapshot with.

    :param symbol: ``module:Class.method``, defined in ``tree``.
    :param tree: the ``ast`` of the symbol's module (see
        :func:`source_tree`).
    :param names: names called as ``anything.name(...)`` or ``name(...)``.
    :returns: the names it calls, in the order of ``names``; never empty.
    :raises IncompatibleNova: when it calls none of them.
    """
    node = _definition(tree, symbol.partition(':')[2])
    if node is None:
        _fail(symbol, 'is not defined in the source of its module')
    called = {getattr(call.func, 'attr', getattr(call.func, 'id', None))
              for call in ast.walk(node) if isinstance(call, ast.Call)}
    found = [name for name in names if name in called]
    if not found:
        _fail(symbol, 'calls neither %s' % ' nor '.join(names))
    return found


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
