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

"""The operator commands on a cloud of three cells.

Nova's services run as in its own tests of many cells: a hyperthreaded
compute in each cell with a server that forbids hyperthreads on it (stock
Nova without its late check), and a host without hyperthreads in cell1
alone. The commands read a copy of each cell's database.
"""

from nova_pcpu_ext.tests.functional import base  # noqa: F401  isort:skip

import json
import os
import shutil
import sqlite3

from prometheus_client import parser

from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests.functional.base import NO_HYPERTHREADS
from nova_pcpu_ext.tests.functional import operator_commands
from nova_pcpu_ext.tests.functional.test_nova_databases import _directory
from nova_pcpu_ext.tests.functional.test_nova_databases import _locked
from nova_pcpu_ext.tests.functional.test_status import check
from nova_pcpu_ext.tests.functional.test_status import CHECKS

ON_HT = CHECKS[3]
CELLS = ('cell1', 'cell2', 'cell3')
#: A password holding what ends each part of a URL to ``urlsplit``.
PASSWORD = 'Sup3rS#cr?t/x[y'


class ManyCellsTest(operator_commands.OperatorCommandTestBase):

    NUMBER_OF_CELLS = 3
    extension = False

    def setUp(self):
        super().setUp()
        #: ``{cell: its server}``.
        self.servers = {}
        for number, cell in enumerate(CELLS, 1):
            host = 'compute%d' % number
            # CPU sets are process-wide flags: the same for every host.
            self.start_host(host, dict(HYPERTHREADED, cpu_cores=4),
                            dedicated='0-5', shared='6-7', cell_name=cell)
            self.servers[cell] = self.built(host)
        self.start_host('compute4', dict(NO_HYPERTHREADS, cpu_cores=8),
                        dedicated='0-5', shared='6-7', cell_name='cell1')

    def built(self, host):
        server = self._create_server(
            flavor_id=self._create_flavor(extra_spec=ISOLATE),
            az='nova:' + host)
        # The build goes on after ACTIVE (it tells the scheduler).
        self._wait_for_instance_action_event(
            server, 'create', 'compute__do_build_and_run_instance', 'success')
        return server

    def status_json(self, extra_conf, *args):
        result = self.status(*args, 'upgrade', 'check', '--json',
                             extra_conf=extra_conf)
        self.assertTrue(result.stdout, result.stderr)
        return result.returncode, json.loads(result.stdout), result

    def heal_dry_run(self, extra_conf='', *args):
        return self.manage.json('heal', 'isolate', '--dry-run', *args,
                                extra_conf=extra_conf)

    def copies(self, down=()):
        """nova.conf lines naming copies of the databases, and the files."""
        databases = self.nova_databases(down=down)
        directory = _directory(databases)
        return databases, {cell: os.path.join(directory, cell + '.db')
                           for cell in CELLS}

    def victims(self, details, *cells):
        """Assert ``details`` name the servers of ``cells``, no others."""
        self.assertTrue(details.startswith(
            '%d servers that forbid hyperthreads run on hyperthreaded hosts '
            '(bug 1889633): ' % len(cells)), details)
        for cell in CELLS:
            (self.assertIn if cell in cells else self.assertNotIn)(
                self.servers[cell]['id'], details)

    def test_a_cell_refused_and_a_cell_hanging_cost_themselves_alone(self):
        databases, paths = self.copies(down=['cell2'])
        textfile = os.path.join(_directory(databases), 'checks.prom')
        with _locked(paths['cell3']):
            code, status, _result = self.status_json(
                databases + '[pcpu_ext]\ndatabase_timeout = 1\n',
                '--metrics-textfile', textfile)
            heal_code, rows = self.heal_dry_run(
                databases + '[pcpu_ext]\ndatabase_timeout = 1\n')

        # Failed: cell1's server is judged as when every cell answers.
        self.assertEqual(2, code)
        details = {c['check']: c['details'] for c in status['checks']}
        self.victims(details[ON_HT], 'cell1')
        self.assertIn(
            'Could not judge 1 servers of 1 hyperthreaded hosts of cell '
            'cell2 (compute2): its database could not be read: '
            '(sqlite3.OperationalError) unable to open database file (after ',
            details[ON_HT])
        self.assertIn(
            'Could not judge 1 servers of 1 hyperthreaded hosts of cell '
            'cell3 (compute3): its database could not be read: '
            '(sqlite3.OperationalError) database is locked (after ',
            details[ON_HT])
        self.assertIn('the cell maps 1 compute hosts and 1 servers.',
                      details[ON_HT])
        cells = {cell.pop('cell'): cell for cell in status['cells']}
        self.assertEqual(
            [('cell1', 'up', None, 2, 1), ('cell2', 'down', 'refused', 1, 1),
             ('cell3', 'down', 'locked', 1, 1)],
            [(name, cell['state'], cell['reason'] and (
                'locked' if 'locked' in cell['reason'] else 'refused'),
              cell['hosts'], cell['servers'])
             for name, cell in sorted(cells.items())])
        # The locked cell was waited for once: its statement's bound.
        self.assertGreaterEqual(cells['cell3']['seconds'], 1)
        self.assertLess(cells['cell3']['seconds'], 4)

        # What node_exporter's textfile collector reads: the same.
        with open(textfile) as metrics:
            samples = {(sample.name, tuple(sample.labels.values())):
                       sample.value for family in
                       parser.text_string_to_metric_families(metrics.read())
                       for sample in family.samples}
        self.assertEqual({(check['check'],): check['result']
                          for check in status['checks']}, {
            labels: value for (name, labels), value in samples.items()
            if name == 'nova_pcpu_ext_upgrade_check_result'})
        self.assertEqual({('cell1',): 1, ('cell2',): 0, ('cell3',): 0}, {
            labels: value for (name, labels), value in samples.items()
            if name == 'nova_pcpu_ext_upgrade_check_cell_up'})
        self.assertEqual(cells['cell3']['seconds'], round(samples[(
            'nova_pcpu_ext_upgrade_check_cell_read_seconds', ('cell3',))], 3))

        # A row for each cell not read; cell1's server goes to cell1's
        # host without hyperthreads.
        self.assertEqual(4, heal_code)
        self.assertEqual(
            [(self.servers['cell1']['id'], 'cell1', 'compute1',
              'dry run: would live-migrate (room on compute4)'),
             ('', 'cell2', 'compute2', 'not judged: 1 servers on 1 hosts: '
              'the database of cell cell2 could not be read: '),
             ('', 'cell3', 'compute3', 'not judged: 1 servers on 1 hosts: '
              'the database of cell cell3 could not be read: ')],
            [(row['server'], row['cell'], row['from_host'],
              row['result'][:len(expected)])
             for row, expected in zip(rows, (
                 'dry run: would live-migrate (room on compute4)',
                 'not judged: 1 servers on 1 hosts: the database of cell '
                 'cell2 could not be read: ',
                 'not judged: 1 servers on 1 hosts: the database of cell '
                 'cell3 could not be read: '))])

    def test_both_reading_paths_agree_but_on_cells(self):
        """The Compute API shows no cell: its room may be in another."""
        databases = self.nova_databases()

        code, status = check(self.status, extra_conf=databases)
        self.assertEqual((code, status), check(self.status))
        self.victims(status[ON_HT][1], *CELLS)

        heal_code, rows = self.heal_dry_run(databases)
        api_code, api_rows = self.heal_dry_run()
        by_cell = {row.pop('cell'): row for row in rows}
        self.assertEqual([None] * 3, [row.pop('cell') for row in api_rows])
        self.assertEqual(by_cell['cell1'], api_rows[0])
        for cell in ('cell2', 'cell3'):
            self.assertEqual(
                'no eligible destination: no enabled host without '
                'hyperthreads in its cell has room for DISK_GB:20, '
                'MEMORY_MB:2048, PCPU:2', by_cell[cell]['result'])
        self.assertEqual(
            ['dry run: would live-migrate (room on compute4)'] * 3,
            [row['result'] for row in api_rows])
        # Skipped servers are the operator's to look at, not for a rerun.
        self.assertEqual((3, 1), (heal_code, api_code))
        self.assertEqual(3, self.heal_dry_run(databases, '--max-count',
                                              '1')[0])

    def test_a_replica_of_its_own_and_a_password_holding_url_ends(self):
        databases, paths = self.copies()
        directory = _directory(databases)
        # cell1 and cell2 from replicas of their own, by name and by UUID.
        for cell in ('cell1', 'cell2'):
            os.rename(paths[cell], paths[cell] + '.replica')
        own = ('[pcpu_ext]\ncell_database_connections = cell1=sqlite:///'
               '%s.replica\ncell_database_connections = %s=sqlite:///'
               '%s.replica\n' % (paths['cell1'],
                                 self.cell_mappings['cell2'].uuid,
                                 paths['cell2']))
        # cell3's mapping names MySQL with that password; the template
        # reads its copy, named after the host, port and database.
        self.remap('cell3', 'mysql+pymysql://nova:%s@db3:3307/nova_cell3'
                   % PASSWORD, databases)
        shutil.copy(paths['cell3'],
                    os.path.join(directory, 'db3-3307-nova_cell3.db'))
        template = ('cell_database_connection = sqlite:///%s/'
                    '{hostname}-{port}-{path}.db\n' % directory)

        code, status, result = self.status_json(databases + own + template)
        self.assertEqual(2, code, result.stderr)
        self.victims(status['checks'][3]['details'], *CELLS)
        self.assertEqual(['up'] * 3,
                         [cell['state'] for cell in status['cells']])

        # A URL that does not parse: that cell alone is down, its URL not
        # shown.
        self.remap('cell3', 'mysql+pymysql://nova:%s@db3:33x/nova_cell3'
                   % PASSWORD, databases)
        code, status, result = self.status_json(databases + own + template)
        heal_code, rows = self.heal_dry_run(databases + own + template)
        self.assertEqual(2, code, result.stderr)
        self.assertEqual(
            [('cell1', 'up', None), ('cell2', 'up', None),
             ('cell3', 'down', 'the database_connection of its cell mapping '
              'is not a URL SQLAlchemy can parse (not shown: it may hold a '
              'password)')],
            [(cell['cell'], cell['state'], cell['reason'])
             for cell in status['cells']])
        self.assertEqual(3, heal_code)
        for output in (result.stdout, result.stderr, json.dumps(rows)):
            self.assertNotIn('Sup3r', output)

    def remap(self, cell, url, databases):
        """Point the copy's mapping of ``cell`` at ``url``."""
        api = sqlite3.connect(os.path.join(_directory(databases), 'api.db'))
        with api:
            api.execute('UPDATE cell_mappings SET database_connection = ? '
                        'WHERE name = ?', (url, cell))
        api.close()
