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

"""Entry points for the command server's unit tests, Nova's stand-ins.

The server imports this module as it imports the console scripts'. Its
environment's :data:`START` makes the import start what forbids a fork
(a Python thread, a thread unknown to Python's threading module, an
eventlet hub) or what does not (eventlet imported without a hub, as the
commands' imports of Nova before 2026.2 leave it); :data:`PRINTED` makes
it print on stderr.
"""

import _thread
import json
import os
import sys
import threading
import time

START = 'COMMAND_ENTRIES_START'
PRINTED = 'COMMAND_ENTRIES_PRINTED'


def _start(what):
    if what == 'thread':
        threading.Thread(target=time.sleep, args=(3600,),
                         daemon=True).start()
    elif what == 'native thread':
        _thread.start_new_thread(time.sleep, (3600,))
    elif what == 'eventlet hub':
        from eventlet import hubs
        hubs.get_hub()
    elif what == 'eventlet':
        import eventlet  # noqa: F401


_start(os.environ.get(START))
if os.environ.get(PRINTED):
    sys.stderr.write(os.environ[PRINTED] + '\n')


def echo():
    """Print what the process is, as JSON; its stdin's text on stderr."""
    sys.stderr.write(sys.stdin.read())
    print(json.dumps({
        'argv': sys.argv, 'pid': os.getpid(), 'ppid': os.getppid(),
        'sid': os.getsid(0), 'cwd': os.getcwd(), 'env': dict(os.environ),
        'path0': sys.path[0]}))


def exit_with():
    """Ends as ``sys.argv[1]`` says: a code, a message, an error."""
    how = sys.argv[1]
    print('unflushed stdout')
    sys.stderr.write('stderr\n')
    if how == 'none':
        return None
    if how == 'message':
        raise SystemExit('a message')
    if how == 'error':
        raise ValueError('an error')
    if how == 'interrupt':
        raise KeyboardInterrupt()
    return int(how)


def sleep():
    """Print the pid, then sleep ``sys.argv[1]`` seconds."""
    print(os.getpid(), flush=True)
    time.sleep(float(sys.argv[1]))


def late_thread():
    """A non-daemon thread prints after ``main()`` returned."""
    def late():
        time.sleep(0.5)
        print('late thread')

    threading.Thread(target=late).start()
