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

"""A fork server for the tests' runs of the operator commands.

Run as a process of its own, ``nova-pcpu-ext-status`` or ``-manage``
imports Nova first: seconds of CPU for each of the functional tests' hundred
commands. The server, one per test process (:func:`shared`: started at
its first command, stopped at exit), imports the console scripts' modules
once; each command is a child forked from it that becomes the console
script's process: a session of its own, stdin from /dev/null, stdout and
stderr into files, the request's environment, working directory and
``sys.argv``, ``sys.exit(main())`` as the script runs it, and the
interpreter's exit.

:func:`run` returns what ``subprocess.run`` would. It runs a real process
instead where a child would not be the script's process: an environment
or working directory unlike the server's in what its imports read
(:meth:`CommandServer.changed_at_import`); or where ``real_process``, or
``NOVA_PCPU_EXT_REAL_COMMANDS=1`` for a whole run, asks for one.

The server is ``python -m nova_pcpu_ext.tests.command_server SOCKET
[MODULE ...]``: one thread, a select loop over its Unix socket, the
children's pidfds and its stdin, a pipe from the test process whose
closing ends it. Before each fork it checks that forking is safe
(:func:`fork_hazards`), and refuses otherwise: the test fails.
"""

import atexit
import collections
import importlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import traceback

#: The modules of the console scripts the server runs: Nova with them.
COMMAND_MODULES = ('nova_pcpu_ext.cmd.status', 'nova_pcpu_ext.cmd.manage')
#: Set to ``1``, every command runs as a process of its own.
REAL_COMMANDS = 'NOVA_PCPU_EXT_REAL_COMMANDS'
#: Variables read before the server's imports can be watched: by the
#: interpreter's start (``PYTHON*``: PYTHONPATH, PYTHONHASHSEED, ...), by
#: the C library (the locale, the time zone); Nova's concurrency mode and
#: eventlet's settings also in case a series reads them unwatched.
STARTUP_VARIABLES = frozenset((
    'OS_NOVA_DISABLE_EVENTLET_PATCHING', 'LANG', 'LANGUAGE', 'TZ'))
STARTUP_PREFIXES = ('PYTHON', 'LC_', 'EVENTLET_')
#: Seconds the test process waits for an answer past the command's
#: timeout, which the server enforces.
ANSWER_GRACE = 60
#: Runs of :func:`run`: ``server`` or ``process``.
ROUTES = collections.Counter()
#: The directory the process's temporary files go to, not a test's.
_PROCESS_TEMP = tempfile.gettempdir()
#: The test process's environment and working directory when it imported
#: this module, before any test changed them: the shared server's.
_ENVIRONMENT = dict(os.environ)
_CWD = os.getcwd()
_MODULE = 'nova_pcpu_ext.tests.command_server'
#: ``from MODULE import FUNCTION``: a console script's import, as pip and
#: uv write it.
_SCRIPT_IMPORT = re.compile(r'^from ([\w.]+) import (\w+)$', re.MULTILINE)


class ForkRefused(AssertionError):
    """The server found forking unsafe: the test fails."""


# The server.

class _RecordingEnviron(os._Environ):
    """``os.environ`` noting the names read (get, ``in`` and ``[]``).

    A whole copy of the environment is not counted: at import only
    wsgiref's handlers take one, for WSGI servers the commands do not run.
    """

    def __init__(self, environ):
        super().__init__(environ._data, environ.encodekey,
                         environ.decodekey, environ.encodevalue,
                         environ.decodevalue)
        self.read = set()
        self._copying = 0

    def __iter__(self):
        # A copy of the whole environment reads each name while it
        # iterates: not a read of any one.
        self._copying += 1
        try:
            yield from super().__iter__()
        finally:
            self._copying -= 1

    def __getitem__(self, name):
        if not self._copying:
            self.read.add(name)
        return super().__getitem__(name)


def _import_watched(modules):
    """Import ``modules``: the variables they read, and what they printed.

    What they print (warnings, say) on stdout and stderr, each child
    prints again, where a real process would print it.
    """
    captures = [tempfile.TemporaryFile() for _fd in (1, 2)]
    saved = [os.dup(fd) for fd in (1, 2)]
    original = os.environ
    recording = os.environ = _RecordingEnviron(original)
    try:
        for fd, capture in zip((1, 2), captures):
            os.dup2(capture.fileno(), fd)
        for name in modules:
            importlib.import_module(name)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.environ = original
    printed = []
    for capture in captures:
        capture.seek(0)
        printed.append(capture.read())
        capture.close()
    return recording.read, printed


def fork_hazards():
    """Why forking this process now is unsafe, in words; [] if it is safe.

    A child keeps only the thread that forked it: a lock another thread
    held stays locked in the child for ever, and state half-updated stays
    so. An eventlet hub holds an epoll descriptor, timers and greenlets a
    child would share or find half-run. Neither may exist at a fork.
    """
    hazards = []
    if threading.active_count() != 1:
        hazards.append('%d Python threads' % threading.active_count())
    # Threads started below Python's threading module count here only.
    tasks = len(os.listdir('/proc/self/task'))
    if tasks != 1:
        hazards.append('%d native threads' % tasks)
    hubs = sys.modules.get('eventlet.hubs')
    # eventlet keeps each native thread's hub in this thread-local.
    hub = hubs and getattr(hubs._threadlocal, 'hub', None)
    if hub is not None:
        hazards.append('an eventlet hub (%s)' % type(hub).__module__)
    return hazards


def _open_fds():
    return {int(fd) for fd in os.listdir('/proc/self/fd')}


class _Child(object):
    """A command running: its connection waits for the exit code."""

    def __init__(self, pid, connection, timeout):
        self.pid = pid
        self.connection = connection
        # Readable once the child exits: the loop sleeps until then.
        self.pidfd = os.pidfd_open(pid)
        self.deadline = None if timeout is None else (
            time.monotonic() + timeout)
        self.timed_out = False


class _Server(object):
    """The select loop: requests in, children forked, exit codes out."""

    def __init__(self, listener, printed, inherited):
        self.listener = listener
        self.printed = printed
        #: Descriptors open after the imports, which a child keeps.
        self.inherited = inherited
        self.requests = {}  # connection: the bytes read so far
        self.children = []

    def serve(self):
        """Serve until stdin, the test process's pipe, is closed."""
        while True:
            waiting = {0: self._stdin, self.listener.fileno(): self._accept}
            for connection in self.requests:
                waiting[connection.fileno()] = (
                    lambda connection=connection: self._read(connection))
            waiting.update((child.pidfd, self._reap)
                           for child in self.children)
            ready, _w, _x = select.select(list(waiting), [], [],
                                          self._until_deadline())
            for fd in ready:
                if waiting[fd]() is False:
                    return
            self._reap()
            self._expire()

    def _until_deadline(self):
        deadlines = [child.deadline for child in self.children
                     if child.deadline and not child.timed_out]
        return max(0, min(deadlines) - time.monotonic()) if deadlines else (
            None)

    def _stdin(self):
        if os.read(0, 4096):
            return True
        for child in self.children:  # the tests are over
            _kill(child.pid)
        return False

    def _accept(self):
        connection, _address = self.listener.accept()
        connection.setblocking(False)
        self.requests[connection] = b''

    def _read(self, connection):
        try:
            data = connection.recv(65536)
        except OSError:  # the test process gave up
            del self.requests[connection]
            connection.close()
            return
        if data:
            self.requests[connection] += data
            return
        # The client shut its side: the request is whole.
        request = json.loads(self.requests.pop(connection))
        hazards = fork_hazards()
        if hazards:
            _answer(connection, {'error': 'refused to fork the command '
                                 'server: ' + ', '.join(hazards)})
        else:
            self._fork(connection, request)

    def _fork(self, connection, request):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(request, self.printed, self.inherited)
        self.children.append(_Child(pid, connection, request['timeout']))

    def _reap(self):
        for child in list(self.children):
            pid, status = os.waitpid(child.pid, os.WNOHANG)
            if pid:
                self.children.remove(child)
                os.close(child.pidfd)
                _answer(child.connection, {
                    'pid': pid, 'timed_out': child.timed_out,
                    'returncode': os.waitstatus_to_exitcode(status)})

    def _expire(self):
        now = time.monotonic()
        for child in self.children:
            if child.deadline and child.deadline <= now and (
                    not child.timed_out):
                child.timed_out = True
                _kill(child.pid)


def _kill(pid):
    """Kill a child and its session's processes."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # before its setsid
        os.kill(pid, signal.SIGKILL)


def _answer(connection, answer):
    connection.setblocking(True)
    try:
        connection.sendall(json.dumps(answer).encode())
    except OSError:
        pass  # the test process no longer waits
    connection.close()


# The child: the console script.

def _run_child(request, printed, inherited):
    """In the forked child: become the command, run it, exit."""
    code = 1
    try:
        _become(request, inherited)
        for fd, output in zip((1, 2), printed):
            os.write(fd, output)
        code = exit_code(_entry_point(request['entry_point']))
    except BaseException:
        # The server's failure: in the command's stderr, where the tests
        # look for tracebacks.
        traceback.print_exc()
    finally:
        _exit(code)


def _become(request, inherited):
    """The process of the request's console script, before ``main()``.

    As ``subprocess.run`` starts one: stdin from /dev/null, stdout and
    stderr to the files, only those and the descriptors the imports
    opened, the request's environment, working directory and argv.
    """
    os.setsid()  # the server kills a late command's processes at once
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, request['stdout'], os.O_WRONLY),
                            (2, request['stderr'], os.O_WRONLY)):
        opened = os.open(path, flags | os.O_CLOEXEC)
        os.dup2(opened, fd)
        os.close(opened)
    for fd in _open_fds() - inherited - {0, 1, 2}:
        try:
            os.close(fd)
        except OSError:
            pass  # the listing's own descriptor, closed
    os.chdir(request['cwd'])
    os.environ.clear()
    os.environ.update(request['env'])
    sys.argv = list(request['argv'])
    # A script's directory, where the interpreter puts a script's.
    sys.path[0] = os.path.dirname(os.path.realpath(sys.argv[0]))


def _entry_point(spec):
    module, _colon, attributes = spec.partition(':')
    function = importlib.import_module(module)
    for attribute in attributes.split('.'):
        function = getattr(function, attribute)
    return function


def exit_code(function):
    """The exit code of ``sys.exit(function())``, as CPython makes it.

    SystemExit's None is 0 and an int itself; anything else is printed
    on stderr, and 1. An uncaught exception's traceback is printed by
    ``sys.excepthook``, and 1; KeyboardInterrupt's ends the process by
    SIGINT (:func:`_exit`), as the interpreter does.
    """
    try:
        sys.exit(function())
    except SystemExit as stop:
        if stop.code is None:
            return 0
        if isinstance(stop.code, int):
            return stop.code & 0xFF  # what the C library's exit keeps
        sys.stderr.write('%s\n' % (stop.code,))
        return 1
    except BaseException as error:
        sys.excepthook(type(error), error, error.__traceback__)
        return -signal.SIGINT if isinstance(error, KeyboardInterrupt) else 1


def _exit(code):
    """End the child as the interpreter ends after the script.

    Its non-daemon threads are waited for, atexit's functions run, stdout
    and stderr are flushed (120 if that fails); then ``os._exit``, so that
    nothing of the server's own (its loop, its sockets) runs on.
    """
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
    finally:
        flushed = True
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                flushed = False
        if code == -signal.SIGINT:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code if flushed else 120)


def main(argv=None):
    """``command_server SOCKET [MODULE ...]``: import, then serve.

    Prints one JSON line on stdout once it serves, or fails: its pid and
    the variables the imports read, or the error.
    """
    path, *modules = sys.argv[1:] if argv is None else argv
    # Where a console script's imports start: its directory, not ``-m``'s
    # working directory.
    sys.path[0] = os.path.realpath(sysconfig.get_path('scripts'))
    try:
        variables, printed = _import_watched(modules or COMMAND_MODULES)
    except Exception:
        print(json.dumps({'error': traceback.format_exc()}), flush=True)
        return 1
    inherited = _open_fds()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print(json.dumps({'pid': os.getpid(),
                      'import_variables': sorted(variables)}), flush=True)
    _Server(listener, printed, inherited).serve()
    return 0


# The test process's side.

class CommandServer(object):
    """A server started for this process, and its requests."""

    def __init__(self, modules=COMMAND_MODULES, env=None, cwd=None):
        #: The server's environment and working directory, which its
        #: imports read.
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd or os.getcwd()
        # Not in a test's temporary directory, removed after the test.
        self.folder = tempfile.mkdtemp(prefix='command-server-',
                                       dir=_PROCESS_TEMP)
        self.path = os.path.join(self.folder, 'socket')
        self.log = os.path.join(self.folder, 'log')
        with open(self.log, 'w') as log:
            self.process = subprocess.Popen(
                [sys.executable, '-m', _MODULE, self.path, *modules],
                env=self.env, cwd=self.cwd,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                start_new_session=True)
        ready = self.process.stdout.readline()
        self.process.stdout.close()
        ready = json.loads(ready) if ready else {'error': 'exited'}
        if 'error' in ready:
            self.stop()
            raise RuntimeError('The command server did not start: %s %s' % (
                ready['error'], self._log_text()))
        self.pid = ready['pid']
        self.import_variables = frozenset(ready['import_variables'])

    def _log_text(self):
        try:
            with open(self.log, errors='replace') as log:
                return log.read()[-4000:]
        except OSError:
            return ''

    def stop(self):
        """Stop the server, which kills the commands still running."""
        self.process.stdin.close()
        if self.process.poll() is None:
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def changed_at_import(self, env, cwd):
        """What the imports read that ``env`` and ``cwd`` would change.

        A child has the modules the server imported with its own
        environment and working directory (openstacksdk's search path of
        clouds.yaml starts there): a command whose environment or working
        directory differs there would not run as its console script, and
        needs a real process.
        """
        names = self.import_variables | STARTUP_VARIABLES | {
            name for name in set(env) | set(self.env)
            if name.startswith(STARTUP_PREFIXES)}
        changed = sorted(name for name in names
                         if env.get(name) != self.env.get(name))
        return changed + (['the working directory'] if cwd != self.cwd
                          else [])

    def run(self, argv, entry_point, env, cwd, timeout=None):
        """What ``subprocess.run`` would return; a forked child runs it."""
        folder = tempfile.mkdtemp(prefix='command-')
        try:
            request = {'argv': list(argv), 'entry_point': entry_point,
                       'env': dict(env), 'cwd': cwd, 'timeout': timeout}
            for name in ('stdout', 'stderr'):
                request[name] = os.path.join(folder, name)
                open(request[name], 'w').close()
            answer = self._ask(request)
            # As subprocess decodes them: the locale's encoding, universal
            # newlines.
            stdout, stderr = (_read(request[name])
                              for name in ('stdout', 'stderr'))
        finally:
            shutil.rmtree(folder)
        if 'error' in answer:
            raise ForkRefused(answer['error'])
        if answer['timed_out']:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess(argv, answer['returncode'],
                                           stdout, stderr)

    def _ask(self, request):
        timeout = request['timeout']
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ask:
                ask.settimeout(None if timeout is None else
                               timeout + ANSWER_GRACE)
                ask.connect(self.path)
                ask.sendall(json.dumps(request).encode())
                ask.shutdown(socket.SHUT_WR)
                answer = b''.join(iter(lambda: ask.recv(65536), b''))
        except OSError as error:
            answer, reason = b'', error
        else:
            reason = 'no answer'
        if not answer:
            raise RuntimeError('The command server failed: %s %s' % (
                reason, self._log_text()))
        return json.loads(answer)


def _read(path):
    with open(path) as output:
        return output.read()


def console_script_entry(path):
    """``module:function`` that console script ``path`` runs, or None.

    A script as pip and uv write them (``from MODULE import FUNCTION``,
    then ``sys.exit(FUNCTION())``) for this interpreter (its ``#!`` line):
    another one runs where the server cannot.
    """
    try:
        with open(path) as script:
            text = script.read(4096)
    except (OSError, UnicodeDecodeError):
        return None
    found = _SCRIPT_IMPORT.search(text)
    if (not text.startswith('#!%s\n' % sys.executable) or not found or
            'sys.exit(%s())' % found.group(2) not in text):
        return None
    return '%s:%s' % found.groups()


_shared = None
_home = None
_shared_lock = threading.Lock()


def home():
    """A home directory for the commands of this process: empty, its own.

    Tests isolate HOME (oslotest makes one for each test), and the
    commands' imports read it (openstacksdk's and stevedore's directories
    there): the shared server imports with this one, which the commands
    then need, whatever test runs them.
    """
    global _home
    with _shared_lock:
        if _home is None:
            _home = tempfile.mkdtemp(prefix='command-home-',
                                     dir=_PROCESS_TEMP)
            atexit.register(shutil.rmtree, _home, True)
        return _home


def shared():
    """This process's server of the console scripts, started once.

    With the process's first environment and working directory, its HOME
    :func:`home`.
    """
    global _shared
    directory = home()
    with _shared_lock:
        if _shared is None:
            _shared = CommandServer(
                env=dict(_ENVIRONMENT, HOME=directory), cwd=_CWD)
            atexit.register(_shared.stop)
        return _shared


def run(argv, env=None, timeout=None, real_process=False, server=None):
    """``subprocess.run(argv, ...)``'s result, its output as text.

    A console script of this interpreter runs through ``server`` (this
    process's :func:`shared` one by default), unless ``real_process``,
    ``NOVA_PCPU_EXT_REAL_COMMANDS=1``, or an environment or working
    directory that changes what the server's imports read asks for a
    process of its own.
    """
    env = dict(os.environ if env is None else env)
    entry_point = None if real_process or (
        os.environ.get(REAL_COMMANDS) == '1') else console_script_entry(
            argv[0])
    if entry_point:
        server = server or shared()
        cwd = os.getcwd()
        if not server.changed_at_import(env, cwd):
            ROUTES['server'] += 1
            return server.run(argv, entry_point, env, cwd, timeout)
    ROUTES['process'] += 1
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


if __name__ == '__main__':
    sys.exit(main())
