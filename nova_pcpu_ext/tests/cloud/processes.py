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

"""The cloud's processes: each in its own session, with a pid file and a
log file under the work directory, so that every one of them can be found
and stopped by pid, also from another run (``--stop``).
"""

import collections
import os
import signal
import socket
import subprocess
import time

import requests


class StartError(Exception):
    pass


class Processes:
    """Starts, watches and stops the processes of one work directory."""

    def __init__(self, work_dir):
        self.pid_dir = os.path.join(work_dir, 'pids')
        self.log_dir = os.path.join(work_dir, 'logs')
        os.makedirs(self.pid_dir, exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        # How each process was started, to start it again after a drill.
        self.commands = {}
        # [name, stop sent, started again or None] of each stop: the log
        # check excuses a stop's own records within it.
        self.stops = []

    def log_path(self, name):
        return os.path.join(self.log_dir, '%s.log' % name)

    def start(self, name, argv, env=None, cwd=None):
        """Start ``argv`` as ``name``, printing to ``logs/name.out``.

        ``logs/name.log`` is for the service's own log file. The process
        leads a new session, so stopping its process group also stops what
        it forked (gunicorn workers, privsep helpers).
        """
        with open(os.path.join(self.log_dir, '%s.out' % name), 'ab') as log:
            process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                start_new_session=True)
        with open(self._pid_file(name), 'w') as f:
            f.write('%d\n' % process.pid)
        self.commands[name] = (argv, env, cwd)
        for stop in self.stops:
            if stop[0] == name and stop[2] is None:
                stop[2] = time.time()
        return process

    def start_again(self, name):
        """Start ``name`` as it was started last, after it stopped."""
        argv, env, cwd = self.commands[name]
        return self.start(name, argv, env=env, cwd=cwd)

    def kill(self, name):
        """SIGKILL the process group of ``name``: no clean-up happens."""
        self.stop(name, timeout=10, sig=signal.SIGKILL)

    def send_signal(self, name, sig):
        """Send ``sig`` (SIGSTOP, SIGCONT) to the process group of ``name``."""
        pid = self.pid(name)
        if pid:
            _signal_group(pid, sig)

    def _pid_file(self, name):
        return os.path.join(self.pid_dir, '%s.pid' % name)

    def pid(self, name):
        try:
            with open(self._pid_file(name)) as f:
                return int(f.read())
        except (FileNotFoundError, ValueError):
            return None

    def running(self):
        """{name: pid} of every recorded process still alive."""
        alive = {}
        for entry in sorted(os.listdir(self.pid_dir)):
            name = entry[:-len('.pid')]
            pid = self.pid(name)
            if pid and _alive(pid):
                alive[name] = pid
        return alive

    def check_alive(self, name):
        pid = self.pid(name)
        if not pid or not _alive(pid):
            raise StartError('%s exited; see %s.{out,log}' % (
                name, os.path.join(self.log_dir, name)))

    def stop(self, *names, timeout=30, sig=signal.SIGTERM):
        """Send ``sig`` to the process groups of ``names`` together.

        SIGKILL what outlives ``timeout`` seconds.
        """
        running = [name for name in names if self.pid(name)]
        pids = [self.pid(name) for name in running]
        self.stops += [[name, time.time(), None] for name in running]
        for pid in pids:
            _signal_group(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and set(pids) & live_groups():
            for pid in pids:
                _reap(pid)
            time.sleep(0.1)
        for pid in pids:
            _signal_group(pid, signal.SIGKILL)
            _reap(pid)
        for name in names:
            try:
                os.unlink(self._pid_file(name))
            except FileNotFoundError:
                pass

    def wait_for(self, name, ready, timeout, what):
        """Poll ``ready()`` until true; fail early if ``name`` exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive(name)
            try:
                if ready():
                    return
            except (OSError, requests.RequestException):
                pass
            time.sleep(0.25)
        raise StartError('%s: %s not ready after %ds; see %s.{out,log}' % (
            name, what, timeout, os.path.join(self.log_dir, name)))

    def wait_for_port(self, name, port, timeout=60):
        def ready():
            with socket.create_connection(('127.0.0.1', port), timeout=1):
                return True
        self.wait_for(name, ready, timeout, 'port %d' % port)

    def wait_for_http(self, name, url, timeout=60):
        def ready():
            return requests.get(url, timeout=5).status_code < 500
        self.wait_for(name, ready, timeout, url)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


#: ``cpu``: seconds of CPU time used so far, user and system.
Process = collections.namedtuple('Process', 'pid pgid state name cpu')


def _stat(pid):
    with open('/proc/%s/stat' % pid) as f:
        stat = f.read()
    # The name, in parentheses, may hold spaces and parentheses itself.
    name, fields = stat[stat.index('(') + 1:stat.rindex(')')], \
        stat[stat.rindex(')') + 1:].split()
    return Process(int(pid), int(fields[2]), fields[0], name,
                   (int(fields[11]) + int(fields[12])) /
                   os.sysconf('SC_CLK_TCK'))


def process_table():
    """A :class:`Process` for every process of the machine."""
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                yield _stat(entry)
            except (FileNotFoundError, ProcessLookupError):
                continue  # gone meanwhile


def live_groups():
    """The process groups with a process that is not a zombie."""
    return {process.pgid for process in process_table()
            if process.state != 'Z'}


def _is_zombie(pid):
    try:
        return _stat(pid).state == 'Z'
    except FileNotFoundError:
        return False


def _signal_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid):
    """Collect ``pid`` if it is our child (a started process)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def rss_kib(pid):
    """Resident memory of a process in KiB; 0 once it is gone."""
    try:
        with open('/proc/%d/status' % pid) as f:
            return sum(int(line.split()[1]) for line in f
                       if line.startswith('VmRSS:'))
    except (FileNotFoundError, ProcessLookupError):
        return 0
