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

"""The command server: a forked child runs as the console script would.

Entry points of :mod:`command_entries` stand in for Nova's commands,
apart from ``nova-pcpu-ext-status --help``, run both ways and compared.
"""

import json
import os
import signal
import subprocess
import sys
import sysconfig
import threading
import time

import ddt
import fixtures

from nova_pcpu_ext.tests import command_server
from nova_pcpu_ext.tests.unit import base
from nova_pcpu_ext.tests.unit import command_entries

ENTRIES = command_entries.__name__
STATUS = os.path.join(sysconfig.get_path('scripts'), 'nova-pcpu-ext-status')


class Server(fixtures.Fixture):
    """A command server of ``modules``, ``env`` added to our environment."""

    def __init__(self, modules=(ENTRIES,), **env):
        super().__init__()
        self.modules = modules
        self.env = env

    def _setUp(self):
        self.server = command_server.CommandServer(
            self.modules, env=dict(os.environ, **self.env))
        self.addCleanup(self.server.stop)

    def run(self, function, *args, env=None, cwd=None, timeout=30):
        """An entry point of :mod:`command_entries`, through the server."""
        return self.server.run(
            ['entry'] + list(args), '%s:%s' % (ENTRIES, function),
            os.environ if env is None else env, cwd or os.getcwd(), timeout)


class ChildTest(base.TestCase):
    """What a console script's process would be, and how it ends."""

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(Server())

    def test_a_process_of_its_own(self):
        folder = os.path.realpath(self.useFixture(fixtures.TempDir()).path)
        result = self.server.run('echo', 'a', '--b', cwd=folder)

        seen = json.loads(result.stdout)
        self.assertEqual((0, ''), (result.returncode, result.stderr))
        self.assertEqual(['entry', 'a', '--b'], seen['argv'])
        self.assertNotIn(seen['pid'], (os.getpid(), self.server.server.pid))
        self.assertEqual(self.server.server.pid, seen['ppid'])
        self.assertEqual(seen['pid'], seen['sid'])  # a session of its own
        self.assertEqual(folder, seen['cwd'])

    def test_the_request_s_environment(self):
        env = {'PATH': os.environ['PATH'], 'ONLY_HERE': 'yes'}
        seen = json.loads(self.server.run('echo', env=env).stdout)
        self.assertEqual(env, seen['env'])

    def exit_of(self, how):
        result = self.server.run('exit_with', how)
        return (result.returncode, result.stdout,
                result.stderr.splitlines()[-1])

    def test_exit_codes(self):
        ways = ('0', '1', '2', '255', 'none', 'message', 'error')
        self.assertEqual(
            {'0': (0, 'unflushed stdout\n', 'stderr'),
             '1': (1, 'unflushed stdout\n', 'stderr'),
             '2': (2, 'unflushed stdout\n', 'stderr'),
             '255': (255, 'unflushed stdout\n', 'stderr'),
             'none': (0, 'unflushed stdout\n', 'stderr'),
             'message': (1, 'unflushed stdout\n', 'a message'),
             'error': (1, 'unflushed stdout\n', 'ValueError: an error')},
            {how: self.exit_of(how) for how in ways})

    def test_an_uncaught_error_prints_its_traceback(self):
        stderr = self.server.run('exit_with', 'error').stderr
        self.assertIn('Traceback (most recent call last):', stderr)
        self.assertIn("raise ValueError('an error')", stderr)

    def test_keyboard_interrupt_ends_by_sigint(self):
        self.assertEqual((-signal.SIGINT, 'unflushed stdout\n',
                          'KeyboardInterrupt'), self.exit_of('interrupt'))

    def test_threads_are_waited_for(self):
        self.assertEqual('late thread\n',
                         self.server.run('late_thread').stdout)

    def test_a_late_command_is_killed(self):
        started = time.monotonic()
        late = self.assertRaises(subprocess.TimeoutExpired, self.server.run,
                                 'sleep', '60', timeout=1)

        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(1, late.timeout)
        self.assertFalse(os.path.exists('/proc/%d' % int(late.output)))
        self.assertEqual(0, self.server.run('sleep', '0').returncode)

    def test_requests_at_once(self):
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            self.server.run('sleep', '3'))) for _i in range(3)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        # One after the other, they would take 9 seconds; at once, 3 and
        # the 5 the bound leaves a loaded machine.
        self.assertLess(time.monotonic() - started, 8)
        self.assertEqual([0] * 3, [result.returncode for result in results])
        self.assertEqual(3, len({result.stdout for result in results}))


class ImportTest(base.TestCase):

    def test_a_failed_import_stops_the_start(self):
        failed = self.assertRaises(
            RuntimeError, command_server.CommandServer,
            [ENTRIES + '_missing'])
        self.assertIn('ModuleNotFoundError', str(failed))

    def test_printed_again_by_each_child(self):
        server = self.useFixture(Server(**{
            command_entries.PRINTED: 'printed at import'}))
        for _run in range(2):
            self.assertEqual('printed at import\nstderr\n',
                             server.run('exit_with', '0').stderr)


@ddt.ddt
class ForkSafetyTest(base.TestCase):
    """Forked only where no other thread nor an eventlet hub runs."""

    @ddt.unpack
    @ddt.data(('thread', '2 Python threads'),
              ('native thread', '2 native threads'),
              ('eventlet hub', 'an eventlet hub (eventlet.hubs.'))
    def test_refused(self, start, found):
        server = self.useFixture(Server(**{command_entries.START: start}))
        refused = self.assertRaises(command_server.ForkRefused, server.run,
                                    'echo')
        self.assertIn('refused to fork the command server: ', str(refused))
        self.assertIn(found, str(refused))

    def test_eventlet_without_a_hub(self):
        server = self.useFixture(Server(**{
            command_entries.START: 'eventlet'}))
        self.assertEqual(0, server.run('echo').returncode)

    def test_a_thread_here(self):
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(stop.set)
        self.assertIn('%d Python threads' % threading.active_count(),
                      command_server.fork_hazards())


@ddt.ddt
class NovaCommandTest(base.TestCase):
    """The real status command's help: as its console script prints it.

    With the console scripts' modules imported by the server, in Nova's
    eventlet mode (0) and native threading (1): forking is safe in both.
    """

    @ddt.data('0', '1')
    def test_help_as_the_console_script(self, disabled):
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING=disabled)
        server = self.useFixture(Server(
            command_server.COMMAND_MODULES,
            OS_NOVA_DISABLE_EVENTLET_PATCHING=disabled))
        routed = command_server.ROUTES['server']

        through_server = command_server.run(
            [STATUS, '--help'], env=env, timeout=120, server=server.server)
        real = subprocess.run([STATUS, '--help'], capture_output=True,
                              text=True, env=env, timeout=120,
                              stdin=subprocess.DEVNULL)

        self.assertEqual(routed + 1, command_server.ROUTES['server'])
        self.assertEqual(0, real.returncode, real.stderr)
        self.assertIn('upgrade', real.stdout)
        self.assertEqual(
            (real.returncode, real.stdout, real.stderr),
            (through_server.returncode, through_server.stdout,
             through_server.stderr))


class RouteTest(base.TestCase):
    """Through the server, or as a process: the parent tells."""

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(Server())
        self.script = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'echo')
        with open(self.script, 'w') as script:
            script.write('#!%s\nimport sys\nfrom %s import echo\n'
                         'if __name__ == "__main__":\n'
                         '    sys.exit(echo())\n' % (sys.executable,
                                                     ENTRIES))
        os.chmod(self.script, 0o755)

    def parent(self, **kwargs):
        result = command_server.run([self.script], timeout=60,
                                    server=self.server.server, **kwargs)
        self.assertEqual(0, result.returncode, result.stderr)
        return json.loads(result.stdout)['ppid']

    def test_the_console_script_s_entry_point(self):
        self.assertEqual('%s:echo' % ENTRIES,
                         command_server.console_script_entry(self.script))
        self.assertEqual('nova_pcpu_ext.cmd.status:main',
                         command_server.console_script_entry(STATUS))

    def test_through_the_server(self):
        self.assertEqual(self.server.server.pid, self.parent())
        # Read by the command alone, not at import.
        self.assertEqual(self.server.server.pid, self.parent(
            env=dict(os.environ, NOT_READ_AT_IMPORT='1')))

    def test_variables_read_at_import_need_a_process(self):
        """The server's imports read them with its own environment."""
        for name in (command_entries.PRINTED, 'PYTHONHASHSEED',
                     'PYTHONPATH', 'OS_NOVA_DISABLE_EVENTLET_PATCHING'):
            other = '2' if os.environ.get(name) == '1' else '1'
            env = dict(os.environ, **{name: other})
            self.assertEqual(os.getpid(), self.parent(env=env), name)

    def test_another_working_directory_needs_a_process(self):
        """openstacksdk's imports read it."""
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(os.path.dirname(self.script))
        self.assertEqual(os.getpid(), self.parent())

    def test_asked_for_a_process(self):
        self.assertEqual(os.getpid(), self.parent(real_process=True))
        self.useFixture(fixtures.EnvironmentVariable(
            command_server.REAL_COMMANDS, '1'))
        self.assertEqual(os.getpid(), self.parent())

    def test_scripts_the_server_cannot_run(self):
        """Not a console script of this interpreter: a process."""
        for text in ('#!/bin/sh\nexec true\n',
                     '#!/usr/bin/python3\nimport sys\nfrom %s import echo\n'
                     'sys.exit(echo())\n' % ENTRIES):
            with open(self.script, 'w') as script:
                script.write(text)
            self.assertIsNone(command_server.console_script_entry(
                self.script))
        self.assertIsNone(command_server.console_script_entry(
            os.path.join(self.script, 'missing')))
