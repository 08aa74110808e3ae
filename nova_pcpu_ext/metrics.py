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

"""The upgrade checks' results for node_exporter's textfile collector.

``nova-pcpu-ext-status upgrade check`` run from cron has no one reading
its output: node_exporter's textfile collector is the usual way to turn
such a run into metrics that alerts can watch. The format is Prometheus'
text exposition format 0.0.4, written here by hand, since
prometheus_client is no requirement of the package.
"""

import contextlib
import math
import os
import tempfile

from nova_pcpu_ext import exception

PREFIX = 'nova_pcpu_ext_upgrade_check_'

#: ``(name, help)`` of each family, in the order they are written.
RESULT = (PREFIX + 'result',
          'Result of each upgrade check: 0 success, 1 warning, 2 failure.')
CELL_UP = (PREFIX + 'cell_up',
           '1 when the cell\'s database answered the checks, 0 when not.')
CELL_READ = (PREFIX + 'cell_read_seconds',
             'Seconds the cell\'s read took, or was waited for when its '
             'database did not answer.')
LAST_RUN = (PREFIX + 'last_run_timestamp_seconds',
            'Unix time the last run of the upgrade checks ended.')


def _escaped(value):
    """A label value as the format quotes it.

    The backslash first, so that the ones added for the others are not
    doubled.
    """
    return (value.replace('\\', '\\\\').replace('"', '\\"')
            .replace('\n', '\\n'))


def _number(value):
    """A sample value as Go's ParseFloat, which Prometheus uses, reads it.

    Integers stay integers (a check's code reads ``2``, not ``2.0``);
    Python writes infinities and NaN in a way Go does not read.
    """
    if isinstance(value, int):
        return str(int(value))
    value = float(value)
    if math.isnan(value):
        return 'NaN'
    if math.isinf(value):
        return '+Inf' if value > 0 else '-Inf'
    return repr(value)


def _family(family, samples, label=None):
    """The lines of one gauge family, ``samples`` ``[(label value, value)]``.

    A family without samples keeps its HELP and TYPE lines: the file has
    the same shape on every run, and node_exporter's parser (Prometheus'
    expfmt) drops a family without samples, so a nova.conf that reads no
    cell (no [api_database] connection) costs no more than those lines.
    """
    name, help_text = family
    lines = ['# HELP %s %s' % (name, help_text), '# TYPE %s gauge' % name]
    for label_value, value in samples:
        labels = '{%s="%s"}' % (label, _escaped(label_value)) if label else ''
        lines.append('%s%s %s' % (name, labels, _number(value)))
    return lines


def textfile(checks, cells, finished):
    """The metrics of one run of the checks, in Prometheus' text format.

    :param checks: ``[(check name, code)]``, the code oslo.upgradecheck's
        (0 success, 1 warning, 2 failure)
    :param cells: objects with ``name``, ``answered`` (whether the cell's
        database answered) and ``seconds`` (how long its read took or was
        waited for)
    :param finished: the Unix time the run ended
    """
    cells = list(cells)
    lines = (_family(RESULT, checks, 'check') +
             _family(CELL_UP, [(cell.name, int(bool(cell.answered)))
                               for cell in cells], 'cell') +
             _family(CELL_READ, [(cell.name, cell.seconds)
                                 for cell in cells], 'cell') +
             _family(LAST_RUN, [(None, finished)]))
    return '\n'.join(lines) + '\n'


def _fill(fd, text):
    """Write ``text`` to ``fd`` and close it, on disk and readable by all.

    ``mkstemp`` makes the file 0600, which node_exporter, running as
    another user, could not read; ``fchmod`` is not subject to the umask.
    """
    with os.fdopen(fd, 'w', encoding='utf-8') as stream:
        os.fchmod(stream.fileno(), 0o644)
        stream.write(text)
        stream.flush()
        os.fsync(stream.fileno())


def write_textfile(path, text):
    """Write ``text`` to ``path`` so that no reader sees half of it.

    node_exporter reads the directory whenever Prometheus scrapes it: the
    text goes to a temporary file of the same directory (a rename does not
    cross file systems), hidden and not ending in ``.prom`` so that the
    collector skips it, and replaces ``path`` once it is on disk.

    :raises: :class:`~nova_pcpu_ext.exception.InvalidConfig` naming
        ``path`` when it cannot be written: the path the operator gave is
        what has to change, or its directory's permissions.
    """
    directory, name = os.path.split(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(
            dir=directory, prefix='.%s.' % name, suffix='.tmp')
        try:
            _fill(fd, text)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError as error:
        raise exception.InvalidConfig(
            'Cannot write the upgrade checks\' metrics to %s: %s. Name a '
            'file in a directory the command can write, such as '
            'node_exporter\'s --collector.textfile.directory.' % (
                path, error.strerror or error)) from error
