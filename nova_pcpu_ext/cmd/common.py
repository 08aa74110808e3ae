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

"""What the operator commands share: one-line errors and result tables."""

import logging
import signal
import sys
import threading
import time
import traceback

from oslo_config import cfg
import prettytable

from nova_pcpu_ext import activation
from nova_pcpu_ext import exception

#: Exit code of a command that could not run: bad configuration, a
#: service that cannot be used.
COULD_NOT_RUN = 2
#: Exit code of an unexpected error, as oslo.upgradecheck's.
UNEXPECTED = 255
#: Exit code after Ctrl-C, as shells report a command SIGINT ended.
INTERRUPTED = 128 + signal.SIGINT
#: Seconds of a run before its progress is reported, and between reports.
PROGRESS_INTERVAL = 5


def version():
    """What ``--version`` prints: ``nova-pcpu-ext <version>``."""
    return '%s %s' % (activation.DISTRIBUTION, activation.version())


def parse_args(conf, prog, argv=None, epilog=None):
    """Parse the command line and Nova's configuration files into ``conf``.

    With ``--version``, print :func:`version` and exit 0 (oslo.config's
    option, listed by ``--help``, which ends with ``epilog``).
    """
    conf(sys.argv[1:] if argv is None else argv, project='nova', prog=prog,
         version=version(), epilog=epilog)


def unexpected(prog, error):
    """Report an error nothing expected, in one line; the exit code."""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    sys.stderr.write('%s: unexpected error: %s: %s (at %s:%d). Please '
                     'report it.\n' % (prog, type(error).__name__, error,
                                       frame.filename, frame.lineno))
    return UNEXPECTED


def run(prog, command):
    """``command()``'s exit code; errors end in one line on stderr."""
    # Libraries' warnings (keystoneauth retrying, for one) would break the
    # one-line errors; failures are reported by the command.
    logging.basicConfig(level=logging.ERROR, format='%(name)s: %(message)s')
    logging.captureWarnings(True)
    try:
        return command()
    except (exception.PcpuExtError, cfg.Error) as error:
        sys.stderr.write('%s: %s\n' % (prog, error))
        return COULD_NOT_RUN
    except Exception as error:
        return unexpected(prog, error)
    except KeyboardInterrupt:
        # Ctrl-C where no command reports it (during a scan, say).
        sys.stderr.write('%s: interrupted\n' % prog)
        return INTERRUPTED


def nova_database(conf):
    """Nova's databases where nova.conf names its API database, or None.

    Imported only then: Nova's objects take a second to import, and
    eventlet with them, whose warnings would break the one-line errors of
    commands that read no server; :func:`run` reports warnings as logs.
    """
    if not conf.api_database.connection:
        return None
    from nova_pcpu_ext import nova_db
    return nova_db.connect(conf)


def table(headings, rows):
    result = prettytable.PrettyTable(headings, hrules=prettytable.ALL,
                                     max_width=40, align='l')
    result.add_rows(rows)
    return result


class Progress(object):
    """Reports the progress of a long run on stderr, never on stdout.

    ``progress(what, done, total)``, from any thread, prints ``PROG: what:
    done of total`` (``done`` alone if the total is unknown) once the run
    has taken :data:`PROGRESS_INTERVAL` seconds, and then at most once per
    interval: a short run prints nothing.
    """

    def __init__(self, prog):
        self.prog = prog
        self._reported = time.monotonic()
        self._lock = threading.Lock()

    def __call__(self, what, done, total):
        with self._lock:
            now = time.monotonic()
            if now - self._reported < PROGRESS_INTERVAL:
                return
            self._reported = now
        sys.stderr.write('%s: %s: %s\n' % (
            self.prog, what, done if total is None else
            '%d of %d' % (done, total)))
