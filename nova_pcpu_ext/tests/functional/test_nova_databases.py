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

"""The operator commands read servers from Nova's databases.

Where nova.conf names ``[api_database] connection``, as ``nova-status``
reads it. Stock Nova without its late check leaves the bug's victims.
"""

from nova_pcpu_ext.tests.functional import base  # noqa: F401  isort:skip

import contextlib
import json
import os
import sqlite3
import uuid

import fixtures
import nova.conf
from nova.tests import fixtures as nova_fixtures
import sqlalchemy

from nova_pcpu_ext import nova_db
from nova_pcpu_ext.tests.functional.base import DEDICATED
from nova_pcpu_ext.tests.functional.base import HYPERTHREADED
from nova_pcpu_ext.tests.functional.base import ISOLATE
from nova_pcpu_ext.tests.functional import operator_commands
from nova_pcpu_ext.tests.functional.test_status import assert_victims
from nova_pcpu_ext.tests.functional.test_status import check
from nova_pcpu_ext.tests.functional.test_status import CHECKS

ON_HT = CHECKS[3]
#: What the image of the volume booted from asks for.
ISOLATE_IMAGE = {'hw_cpu_policy': 'dedicated',
                 'hw_cpu_thread_policy': 'isolate'}


class NovaDatabasesTest(operator_commands.OperatorCommandTestBase):

    extension = False

    def setUp(self):
        super().setUp()
        # Six dedicated cores: each isolate server takes a whole one.
        self.rp_uuid = self.start_host(
            'compute1', dict(HYPERTHREADED, cpu_cores=7), dedicated='0-11',
            shared='12-13')

    def heal_dry_run(self, extra_conf='', real_process=False):
        result = self.manage('heal', 'isolate', '--dry-run', '--format',
                             'json', extra_conf=extra_conf,
                             real_process=real_process)
        self.assertTrue(result.stdout, result.stderr)
        return result.returncode, json.loads(result.stdout)

    def boot_from_isolate_volume(self):
        """A server booted from a volume whose image forbids hyperthreads.

        Nova keeps the volume's image properties in the server's system
        metadata, which no microversion of the Compute API shows.
        """
        volume = nova_fixtures.CinderFixture.IMAGE_BACKED_VOL

        def get(_api, *args, **kwargs):
            found = self.cinder.fake_get(*args, **kwargs)
            if found['id'] == volume:
                found['volume_image_metadata'].update(ISOLATE_IMAGE)
            return found

        self.useFixture(fixtures.MonkeyPatch('nova.volume.cinder.API.get',
                                             get))
        server = self._build_server(image_uuid='', flavor_id=(
            self._create_flavor()))
        server['block_device_mapping_v2'] = [{
            'boot_index': 0, 'uuid': volume, 'source_type': 'volume',
            'destination_type': 'volume'}]
        return self._wait_for_state_change(
            self.api.post_server({'server': server}), 'ACTIVE')

    def test_what_the_compute_api_shows_and_servers_booted_from_volume(self):
        flavor_isolate = self.boot(ISOLATE)
        self.boot(dict(DEDICATED, **{'hw:cpu_thread_policy': 'prefer'}))
        volume_isolate = self.boot_from_isolate_volume()
        databases = self.nova_databases()

        # The one run of each command as its console script's process:
        # reading Nova's databases, the command imports Nova's objects,
        # eventlet with them, in a process that imported nothing else.
        code, checks = check(self.status, extra_conf=databases,
                             real_process=True)
        _code, through_api = check(self.status)
        _code, rows = self.heal_dry_run(databases, real_process=True)
        _code, rows_through_api = self.heal_dry_run()

        self.assertEqual(2, code)
        result, details = checks[ON_HT]
        self.assertEqual(2, result)
        assert_victims(
            self, details,
            (flavor_isolate, 'flavor hw:cpu_thread_policy=isolate'),
            (volume_isolate, 'image hw_cpu_thread_policy=isolate'))
        # The Compute API shows no image properties of a server booted
        # from volume; the rest is alike.
        self.assertNotIn(volume_isolate['id'], through_api[ON_HT][1])
        self.assertIn(flavor_isolate['id'], through_api[ON_HT][1])
        del checks[ON_HT], through_api[ON_HT]
        self.assertEqual(through_api, checks)
        # The Compute API shows no cell; no host of its has room either.
        self.assertEqual({'cell1'}, {row.pop('cell') for row in rows})
        for row in rows:
            row['result'] = row['result'].replace(' in its cell', '')
        self.assertEqual([None], [row.pop('cell')
                                  for row in rows_through_api])
        self.assertEqual(
            [row for row in rows if row['server'] != volume_isolate['id']],
            rows_through_api)
        self.assertEqual(2, len(rows), rows)

    def test_placement_asked_about_hosts_of_candidates_only(self):
        """What the hosts of servers that may forbid hyperthreads hold.

        One read a host, not one a server, and not every host.
        """
        isolate = [self.boot(ISOLATE), self.boot(ISOLATE)]
        # The CPU sets are process-wide flags: the same as compute1's.
        self.start_host('compute2', dict(HYPERTHREADED, cpu_cores=7),
                        dedicated='0-11', shared='12-13')
        for _shared in range(2):
            self._create_server(flavor_id=self._create_flavor(),
                                az='nova:compute2')
        proxy = self.useFixture(operator_commands.FaultyProxy(
            self.placement_server.endpoint, lambda method, path: None))
        status = operator_commands.Command(
            self, 'nova-pcpu-ext-status', proxy.endpoint,
            self.compute_api.endpoint)

        code, checks = check(status, extra_conf=self.nova_databases())

        self.assertEqual(2, code)
        assert_victims(self, checks[ON_HT][1], *(
            (server, 'flavor hw:cpu_thread_policy=isolate')
            for server in isolate))
        self.assertEqual(
            ['/resource_providers/%s/allocations' % self.rp_uuid],
            [path for _method, path, _status in proxy.statuses
             if 'allocations' in path])

    def test_a_cell_that_does_not_answer(self):
        server = self.boot(ISOLATE)
        # The build goes on after ACTIVE (it tells the scheduler).
        self._wait_for_instance_action_event(
            server, 'create', 'compute__do_build_and_run_instance', 'success')
        databases = self.nova_databases(down=['cell1'])

        code, checks = check(self.status, extra_conf=databases)
        heal_code, rows = self.heal_dry_run(databases)

        # A partial result: neither a warning nor "run again".
        self.assertEqual(3, code, checks)
        result, details = checks[ON_HT]
        self.assertEqual(1, result)
        self.assertRegex(
            details, r'^Could not judge 1 servers of 1 hyperthreaded hosts of '
            r'cell cell1 \(compute1\): its database could not be read: '
            r'.* \(after \d+\.\d s; .*\); the cell maps 1 compute hosts and '
            r'1 servers\.$')
        self.assertEqual(4, heal_code)
        row, = rows
        self.assertEqual(('', 'cell1', 'compute1'),
                         (row['server'], row['cell'], row['from_host']))
        self.assertTrue(row['result'].startswith(
            'not judged: 1 servers on 1 hosts: the database of cell cell1 '
            'could not be read: '), row)

    def copies(self):
        """nova.conf lines of :meth:`nova_databases`, and the cells' files.

        ``{cell name: path}``; the cell mappings name ``sqlite:///path``.
        """
        databases = self.nova_databases()
        return databases, {name: os.path.join(_directory(databases),
                                              name + '.db')
                           for name in self.cell_mappings}

    def built(self, extra_spec):
        server = self.boot(extra_spec)
        # The build goes on after ACTIVE (it tells the scheduler).
        self._wait_for_instance_action_event(
            server, 'create', 'compute__do_build_and_run_instance', 'success')
        return server

    def test_the_operator_s_connections(self):
        """nova.conf's accounts and bounds, not the cell mappings' alone.

        One server for the three readings: the set-up is most of the cost
        of a test here, and the series envs run it too.
        """
        server = self.built(ISOLATE)
        victim = (server, 'flavor hw:cpu_thread_policy=isolate')

        databases, paths = self.copies()
        with _locked(paths['cell1']):
            code, checks = check(self.status, extra_conf=(
                databases + '[pcpu_ext]\ndatabase_timeout = 1\n'))
        self.assertEqual(3, code, checks)
        self.assertIn('its database could not be read: '
                      '(sqlite3.OperationalError) database is locked '
                      '(after ', checks[ON_HT][1])
        self.assertIn('[pcpu_ext] database_timeout = 1 s bounds each '
                      'connection and statement', checks[ON_HT][1])

        # The reader's copies stand for databases another account opens;
        # where the cell mappings point nothing is left.
        for path in paths.values():
            os.rename(path, path + '.reader')
        template = ('[pcpu_ext]\ncell_database_connection = '
                    '{scheme}:////{path}.reader\n')
        # A replica of the cell [database] connection names.
        replica = ('[database]\nconnection = sqlite:///%s\n'
                   'slave_connection = sqlite:///%s.reader\n' % (
                       paths['cell1'], paths['cell1']))
        for conf in (template, replica):
            code, checks = check(self.status, extra_conf=databases + conf)
            self.assertEqual(2, code, checks)
            assert_victims(self, checks[ON_HT][1], victim)

        # Nova's API database's account must not fill a cell template.
        refused = self.manage('heal', 'isolate', '--dry-run',
                              extra_conf=self.template_mapping())
        self.assertEqual((2, ''), (refused.returncode, refused.stdout))
        # The last line: eventlet may warn of itself as it is imported.
        self.assertTrue(refused.stderr.strip().splitlines()[-1].startswith(
            'nova-pcpu-ext-manage: The database_connection of the mapping '
            'of cell cell1 is a template, filled from [database] '
            'connection, which nova.conf does not set'), refused.stderr)

    def template_mapping(self):
        """nova.conf lines naming databases where cell1's URL is a template.

        Of ``[database] connection``'s scheme, as Nova fills it.
        """
        databases, paths = self.copies()
        api = sqlite3.connect(os.path.join(_directory(databases), 'api.db'))
        with api:
            api.execute(
                'UPDATE cell_mappings SET database_connection = ? '
                'WHERE name = ?', ('{scheme}:///' + paths['cell1'], 'cell1'))
        api.close()
        return databases

    def test_an_api_database_that_cannot_be_read(self):
        self.boot(ISOLATE)
        result = self.status('upgrade', 'check', '--json', extra_conf=(
            '[api_database]\nconnection = sqlite:////nonexistent/api.db\n'))

        checks = {c['check']: (c['result'], c['details']) for c in
                  json.loads(result.stdout)['checks']}
        self.assertEqual(2, result.returncode)
        self.assertEqual(2, checks[ON_HT][0])
        self.assertTrue(checks[ON_HT][1].startswith(
            "Nova's API database ([api_database] connection) cannot be "
            "read: "), checks[ON_HT][1])
        # Placement's checks do not need it.
        self.assertEqual(0, checks[CHECKS[1]][0])

    def test_statements_do_not_grow_with_the_servers(self):
        """Three queries up to a batch of servers, whatever their number."""
        # In this process, where Nova's fixtures configured the databases
        # and own their engines (in memory under eventlet: not to close).
        self.useFixture(fixtures.MockPatch('nova.db.api.api.configure'))
        self.useFixture(fixtures.MockPatchObject(
            nova_db.NovaDatabase, '_release'))
        # Nova's fixtures name each cell's database by the cell's name.
        self.useFixture(fixtures.MockPatchObject(
            nova_db.NovaDatabase, '_cell_url',
            lambda _self, cell: cell.database_connection))
        database = nova_db.NovaDatabase(nova.conf.CONF)
        statements = []

        def count(_connection, _cursor, statement, *_args):
            if 'instance' in statement:
                statements.append(statement)

        sqlalchemy.event.listen(sqlalchemy.engine.Engine,
                                'before_cursor_execute', count)
        self.addCleanup(sqlalchemy.event.remove, sqlalchemy.engine.Engine,
                        'before_cursor_execute', count)
        servers = [self.boot(ISOLATE), self.boot({}), self.boot({})]
        for server in servers:
            self._wait_for_instance_action_event(
                server, 'create', 'compute__do_build_and_run_instance',
                'success')

        read = {}
        for how_many in (1, 3):
            del statements[:]
            wanted = {server['id'] for server in servers[:how_many]}
            found = database.servers(wanted | {str(uuid.uuid4())})
            read[how_many] = len(statements), sorted(found)

        # The instance mappings; the instances with their flavors, then
        # their system metadata (Nova's selectin load).
        self.assertEqual((3, sorted(server['id'] for server in servers)),
                         read[3])
        self.assertEqual(3, read[1][0])


def _directory(databases):
    """The directory of the copies :meth:`nova_databases` names."""
    return os.path.dirname(databases.partition('sqlite:///')[2].strip())


@contextlib.contextmanager
def _locked(path):
    """An SQLite database another connection holds exclusively."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        # A WAL database lets readers past a writer.
        holder.execute('PRAGMA journal_mode = DELETE')
        holder.execute('BEGIN EXCLUSIVE')
        yield
        holder.execute('ROLLBACK')
    finally:
        holder.close()
