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

"""The upgrade checks' metrics, as node_exporter's textfile collector reads.

prometheus_client's own parser reads the text back: what it cannot parse,
or parses into other names, labels or values, Prometheus would not read
either.
"""

import collections
import errno
import math
import os
import stat

import fixtures
from prometheus_client import parser

from nova_pcpu_ext import exception
from nova_pcpu_ext import metrics
from nova_pcpu_ext.tests.unit import base

Cell = collections.namedtuple('Cell', 'name answered seconds')

RESULT = 'nova_pcpu_ext_upgrade_check_result'
CELL_UP = 'nova_pcpu_ext_upgrade_check_cell_up'
CELL_READ = 'nova_pcpu_ext_upgrade_check_cell_read_seconds'
LAST_RUN = 'nova_pcpu_ext_upgrade_check_last_run_timestamp_seconds'

CHECKS = [('Configuration', 0), ('Isolate on hyperthreads', 1),
          ('Legacy hosts', 2)]
CELLS = [Cell('cell1', True, 0.25), Cell('cell2', False, 30.0)]
FINISHED = 1718000000.5

#: Each of the three characters the format escapes, and a backslash
#: before an ``n`` and at the end, which an unescaped backslash would
#: turn into a newline or an escaped closing quote.
AWKWARD_CHECK = 'Say "hi"\\'
AWKWARD_CELL = 'C:\\new\ncell "2"'


def families(text):
    """``{name: (type, help, [(labels, value)])}`` as Prometheus reads it."""
    return {family.name: (family.type, family.documentation,
                          [(sample.labels, sample.value)
                           for sample in family.samples])
            for family in parser.text_string_to_metric_families(text)}


class TextfileTest(base.TestCase):

    def test_text(self):
        text = metrics.textfile(CHECKS[:1], CELLS[1:], FINISHED)

        self.assertEqual(
            '# HELP %(result)s Result of each upgrade check: 0 success, '
            '1 warning, 2 failure.\n'
            '# TYPE %(result)s gauge\n'
            '%(result)s{check="Configuration"} 0\n'
            '# HELP %(up)s 1 when the cell\'s database answered the checks, '
            '0 when not.\n'
            '# TYPE %(up)s gauge\n'
            '%(up)s{cell="cell2"} 0\n'
            '# HELP %(read)s Seconds the cell\'s read took, or was waited '
            'for when its database did not answer.\n'
            '# TYPE %(read)s gauge\n'
            '%(read)s{cell="cell2"} 30.0\n'
            '# HELP %(last)s Unix time the last run of the upgrade checks '
            'ended.\n'
            '# TYPE %(last)s gauge\n'
            '%(last)s 1718000000.5\n' % {
                'result': RESULT, 'up': CELL_UP, 'read': CELL_READ,
                'last': LAST_RUN},
            text)

    def test_parses_back(self):
        found = families(metrics.textfile(CHECKS, CELLS, FINISHED))

        self.assertEqual([RESULT, CELL_UP, CELL_READ, LAST_RUN],
                         list(found))
        self.assertEqual({'gauge'}, {kind for kind, _, _ in found.values()})
        self.assertIn('0 success, 1 warning, 2 failure', found[RESULT][1])
        self.assertEqual([({'check': 'Configuration'}, 0),
                          ({'check': 'Isolate on hyperthreads'}, 1),
                          ({'check': 'Legacy hosts'}, 2)], found[RESULT][2])
        self.assertEqual([({'cell': 'cell1'}, 1), ({'cell': 'cell2'}, 0)],
                         found[CELL_UP][2])
        self.assertEqual([({'cell': 'cell1'}, 0.25),
                          ({'cell': 'cell2'}, 30.0)], found[CELL_READ][2])
        self.assertEqual([({}, FINISHED)], found[LAST_RUN][2])

    def test_label_values_escaped(self):
        text = metrics.textfile([(AWKWARD_CHECK, 2)],
                                [Cell(AWKWARD_CELL, False, 1.5)], FINISHED)
        found = families(text)

        self.assertEqual([({'check': AWKWARD_CHECK}, 2)], found[RESULT][2])
        self.assertEqual([({'cell': AWKWARD_CELL}, 0)], found[CELL_UP][2])
        self.assertEqual([({'cell': AWKWARD_CELL}, 1.5)],
                         found[CELL_READ][2])
        # One line a sample, eight of HELP and TYPE.
        self.assertEqual(12, len(text.splitlines()))

    def test_no_cells(self):
        # A nova.conf without [api_database] connection reads no cell.
        text = metrics.textfile(CHECKS, [], FINISHED)
        found = families(text)

        self.assertEqual([], found[CELL_UP][2])
        self.assertEqual([], found[CELL_READ][2])
        self.assertEqual(3, len(found[RESULT][2]))
        self.assertEqual([({}, FINISHED)], found[LAST_RUN][2])
        self.assertNotIn('cell=', text)

    def test_cells_read_once(self):
        # The cells may come from a generator: both families get them.
        found = families(metrics.textfile(CHECKS, iter(CELLS), FINISHED))

        self.assertEqual(2, len(found[CELL_UP][2]))
        self.assertEqual(2, len(found[CELL_READ][2]))

    def test_values_go_reads(self):
        # Python writes ``inf``; Prometheus reads ``+Inf``.
        text = metrics.textfile([('Check', 1)],
                                [Cell('cell1', 1, float('inf'))], 12.0)
        found = families(text)

        self.assertIn('%s{cell="cell1"} +Inf\n' % CELL_READ, text)
        self.assertTrue(math.isinf(found[CELL_READ][2][0][1]))
        self.assertIn('%s{cell="cell1"} 1\n' % CELL_UP, text)
        self.assertIn('%s{check="Check"} 1\n' % RESULT, text)
        self.assertIn('%s 12.0\n' % LAST_RUN, text)


class WriteTextfileTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.directory = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.directory, 'nova_pcpu_ext.prom')
        self.text = metrics.textfile(CHECKS, CELLS, FINISHED)

    def read(self):
        with open(self.path, encoding='utf-8') as stream:
            return stream.read()

    def test_written(self):
        # The umask of a cron job must not keep node_exporter out.
        self.addCleanup(os.umask, os.umask(0o077))

        metrics.write_textfile(self.path, self.text)

        self.assertEqual(self.text, self.read())
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertEqual(['nova_pcpu_ext.prom'], os.listdir(self.directory))

    def test_replaces_the_last_run(self):
        metrics.write_textfile(self.path, 'old\n')
        metrics.write_textfile(self.path, self.text)

        self.assertEqual(self.text, self.read())
        self.assertEqual(['nova_pcpu_ext.prom'], os.listdir(self.directory))

    def test_non_ascii_label(self):
        text = metrics.textfile(CHECKS, [Cell('zürich', True, 1.0)], 1.0)

        metrics.write_textfile(self.path, text)

        self.assertEqual(text, self.read())

    def test_failed_replace_keeps_the_last_run(self):
        metrics.write_textfile(self.path, 'old\n')
        temporaries = []

        def replace(source, target):
            temporaries.append(source)
            raise PermissionError(errno.EPERM, 'Operation not permitted')

        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.metrics.os.replace', side_effect=replace))
        error = self.assertRaises(exception.InvalidConfig,
                                  metrics.write_textfile, self.path, 'new\n')

        self.assertIn(self.path, str(error))
        self.assertIn('Operation not permitted', str(error))
        self.assertEqual('old\n', self.read())
        self.assertEqual(['nova_pcpu_ext.prom'], os.listdir(self.directory))
        # A temporary file of the same directory that the collector,
        # which reads *.prom, skips.
        directory, name = os.path.split(temporaries[0])
        self.assertEqual(self.directory, directory)
        self.assertTrue(name.startswith('.'), name)
        self.assertFalse(name.endswith('.prom'), name)

    def test_unwritable_directory(self):
        # Root writes a read-only directory: the error it would get.
        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.metrics.tempfile.mkstemp',
            side_effect=PermissionError(errno.EACCES, 'Permission denied')))

        error = self.assertRaises(exception.InvalidConfig,
                                  metrics.write_textfile, self.path, 'x\n')

        self.assertIn(self.path, str(error))
        self.assertIn('Permission denied', str(error))
        self.assertEqual([], os.listdir(self.directory))

    def test_read_only_directory(self):
        if os.geteuid() == 0:
            self.skipTest('root writes a read-only directory')
        os.chmod(self.directory, 0o555)
        self.addCleanup(os.chmod, self.directory, 0o755)

        error = self.assertRaises(exception.InvalidConfig,
                                  metrics.write_textfile, self.path, 'x\n')

        self.assertIn(self.path, str(error))
        self.assertIn('Permission denied', str(error))

    def test_missing_directory(self):
        path = os.path.join(self.directory, 'missing', 'nova_pcpu_ext.prom')

        error = self.assertRaises(exception.InvalidConfig,
                                  metrics.write_textfile, path, 'x\n')

        self.assertIn(path, str(error))
        self.assertIn('No such file or directory', str(error))
