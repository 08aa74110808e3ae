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

"""Servers read from Nova's databases, as ``nova-status`` reads them.

Through Nova's own objects: the instance mappings of the API database
(``[api_database] connection``) name each server's cell, and each cell's
database gives its instances with the flavor they were booted with and the
image properties Nova stored in their system metadata, those of a volume's
image for a server booted from volume. A server is shown as the Compute
API shows it at microversion 2.98 (but for the status of a server with a
task other than a move in progress, see :data:`MOVE_STATUS`), so the
checks judge both alike, in every state (SOFT_DELETED too); a
server of a cell whose database does not answer is shown with status
``UNKNOWN``, as the Compute API shows it, and the cell is named.

Each database is opened with the account the operator gives: the API
database with ``[api_database] slave_connection`` where set, else
``[api_database] connection``; each cell with ``[pcpu_ext]
cell_database_connection`` filled from its cell mapping where set, else
``[database] slave_connection`` for the cell ``[database] connection``
names, else its cell mapping's URL; ``[pcpu_ext]
cell_database_connections`` names a cell's own URL, which wins. ``[pcpu_ext]
database_timeout`` bounds every connection and statement.

A cell whose database does not answer, or whose URL cannot be opened, costs
that cell alone: it is asked once a run, and the other cells are read as
when all answer. No message shows any part of a URL's password.
"""

import concurrent.futures
import dataclasses
import threading
import time
import traceback
import urllib.parse

from nova.compute import task_states
from nova.compute import vm_states
from nova import context as nova_context
from nova.db.api import api as api_db_api
from nova.db.api import models as api_models
from nova.db.main import api as main_db_api
from nova.db.main import models
from nova import objects
import os_traits
from oslo_db import exception as db_exception
import oslo_messaging
from oslo_utils import importutils
import sqlalchemy as sa

from nova_pcpu_ext import exception
from nova_pcpu_ext import server_fields

profiler_opts = importutils.try_import('osprofiler.opts')
#: The Compute API's status of a server by its ``vm_state``, with no task
#: in progress (a task keeps it from being moved, whatever the status).
#: Not read from Nova's API package: importing it applies eventlet's
#: monkey patching (2024.1 to 2025.2), and the commands use native threads.
STATUS = {vm_states.ACTIVE: 'ACTIVE', vm_states.BUILDING: 'BUILD',
          vm_states.STOPPED: 'SHUTOFF', vm_states.PAUSED: 'PAUSED',
          vm_states.SUSPENDED: 'SUSPENDED', vm_states.RESCUED: 'RESCUE',
          vm_states.RESIZED: 'VERIFY_RESIZE',
          vm_states.SOFT_DELETED: 'SOFT_DELETED',
          vm_states.SHELVED: 'SHELVED',
          vm_states.SHELVED_OFFLOADED: 'SHELVED_OFFLOADED',
          vm_states.ERROR: 'ERROR', vm_states.DELETED: 'DELETED'}

#: The Compute API's status of a server being moved, by its ``vm_state``
#: and ``task_state``: ``heal isolate`` prints it. A server with another
#: task (reboot, rebuild) shows the status of its ``vm_state``
#: (:data:`STATUS`); a task keeps it from being moved either way.
_RESIZING = dict.fromkeys((task_states.RESIZE_PREP,
                           task_states.RESIZE_MIGRATING,
                           task_states.RESIZE_MIGRATED,
                           task_states.RESIZE_FINISH), 'RESIZE')
MOVE_STATUS = {
    vm_states.ACTIVE: dict(_RESIZING, **{task_states.MIGRATING:
                                         'MIGRATING'}),
    vm_states.STOPPED: _RESIZING,
    vm_states.PAUSED: {task_states.MIGRATING: 'MIGRATING'},
    vm_states.RESIZED: {task_states.RESIZE_REVERTING: 'REVERT_RESIZE'}}

#: Servers asked for in one query: well below SQLite's limit of bound
#: parameters, and few round trips to MySQL.
BATCH = 500
#: The prefix of the image properties in an instance's system metadata.
IMAGE_PREFIX = 'image_'
HYPERTHREADING = os_traits.HW_CPU_HYPERTHREADING
#: Statuses of a migration that ended: it holds nothing any more. Any
#: other may hold resources of its source or destination, an evacuation
#: ``done`` its source's until that compute starts again, one that failed
#: what its clean-up missed.
ENDED = ('completed', 'confirmed', 'reverted', 'cancelled')
#: What a database that failed raises: the driver's errors through
#: SQLAlchemy, and oslo.db's. Anything else failed after it answered.
DATABASE_ERRORS = (sa.exc.SQLAlchemyError, db_exception.DBError)
#: The fields of ``[pcpu_ext] cell_database_connection``: the names of
#: Nova's cell mapping templates, and ``host``.
FIELDS = ('scheme', 'username', 'password', 'hostname', 'port', 'host',
          'path', 'query', 'fragment')


def connect(conf):
    """The :class:`NovaDatabase` of this process.

    The same for every call: Nova's database API is configured once a
    process.
    """
    global _connected
    if _connected is None:
        _connected = NovaDatabase(conf)
    return _connected


_connected = None


@dataclasses.dataclass
class CellRead:
    """How a cell's database answered this run."""

    name: str
    answered: bool = True
    #: Seconds its readings took, or were waited for.
    seconds: float = 0.0
    #: Why it did not answer, or why its URL cannot be opened.
    reason: str = ''
    #: Compute hosts and servers the API database maps to it, or None
    #: where the account may not read the mappings.
    hosts: int = None
    servers: int = None

    @property
    def maps(self):
        """What the API database maps to the cell, in words, or ''."""
        if self.hosts is None:
            return ''
        return 'the cell maps %d compute hosts and %d servers' % (
            self.hosts, self.servers)


class NovaDatabase(object):
    """Nova's servers by UUID, from its API and cell databases."""

    def __init__(self, conf):
        self.conf = conf
        #: Seconds each connection and statement may wait.
        self.timeout = conf.pcpu_ext.database_timeout
        # One attempt to reach a database: a cell that does not answer is
        # reported at once, not after oslo.db's retries (100 s by
        # default); the command writes nothing there.
        for group in ('database', 'api_database'):
            conf.set_override('max_retries', 1, group)
            conf.set_override('retry_interval', 0, group)
        # nova.conf's own values, before the overrides below.
        self._cell_default = conf.database.connection
        self._cell_replica = conf.database.slave_connection
        self._own_urls = _own_urls(conf.pcpu_ext.cell_database_connections)
        self._statement_bound = conf.pcpu_ext.postgresql_statement_timeout
        #: The option the API database is read with.
        self.api_option = '[api_database] %s' % (
            'slave_connection' if conf.api_database.slave_connection
            else 'connection')
        # Nova would give every cell an engine on [database]
        # slave_connection, the replica of one cell: see _cell_url.
        conf.set_override('slave_connection', None, 'database')
        if not conf.database.connection:
            # Nova's instance queries pick the SQL of their filters by the
            # type of [database] connection, unset where nova.conf serves
            # only the Compute API: take the API database's type. The
            # cell mappings' templates Nova then fills with it are refused
            # (_cell_url).
            conf.set_override('connection', conf.api_database.connection,
                              'database')
        # Only read here: the replica where there is one, one engine.
        conf.set_override('connection', _bounded(
            conf.api_database.slave_connection or
            conf.api_database.connection, self.timeout,
            self._statement_bound), 'api_database')
        conf.set_override('slave_connection', None, 'api_database')
        if profiler_opts:
            # Registers [profiler], which Nova's database API reads where
            # osprofiler is installed, as Nova's own start does.
            profiler_opts.set_defaults(conf)
        objects.register_all()
        # Registers [DEFAULT] transport_url, which Nova formats the cell
        # mappings with, as nova-status's start does; connects nothing.
        oslo_messaging.TransportURL.parse(conf)
        api_db_api.configure(conf)
        self.context = nova_context.get_admin_context()
        #: ``{cell name: CellRead}`` of the cells read so far; a cell that
        #: did not answer once is not asked again.
        self.cells = {}
        #: ``{cell name: names of its compute nodes}`` of the cells that
        #: answered :meth:`candidates`, where the account may read them.
        self.cell_nodes = {}
        self._mappings = {}
        self._candidates = None
        self._lock = threading.Lock()
        #: ``{cell UUID: context manager}``: one engine a cell.
        self._cells = {}
        #: ``{cell UUID: URL}`` of the cells opened: their passwords are
        #: taken out of every message.
        self._opened = {}
        self._templated = None

    @property
    def down_cells(self):
        """``{cell name: why}`` of the cells whose database did not answer."""
        return {name: read.reason for name, read in self.cells.items()
                if not read.answered}

    def servers(self, wanted, progress=lambda listed: None):
        """``{UUID: server}`` of the servers of ``wanted`` Nova has.

        Consumers that are no server (a migration's allocation, a deleted
        server's) are left out, as the Compute API's listing leaves them.
        A server of a cell that did not answer has the status ``UNKNOWN``.
        """
        by_cell = {}
        started = time.monotonic()
        try:
            for batch in _batches(sorted(wanted)):
                for mapping in objects.InstanceMappingList.\
                        get_by_instance_uuids(self.context, batch):
                    if mapping.cell_mapping is not None:  # else building
                        by_cell.setdefault(mapping.cell_mapping.uuid, (
                            mapping.cell_mapping, []))[1].append(
                                mapping.instance_uuid)
        except Exception as error:
            raise self._api_error(error, started)
        found = {}
        for cell, uuids, servers in self._in_each_cell(
                self._read_cell, by_cell.values()):
            found.update(servers if servers is not None else (
                (uuid, {'id': uuid, 'status': 'UNKNOWN',
                        server_fields.CELL: _name(cell)}) for uuid in uuids))
            progress(len(found))
        return found

    def read_candidates_ahead(self):
        """Start reading :meth:`candidates` in the background.

        So that they are read while placement is, not after it.
        """
        if self._candidates is None:
            pool = concurrent.futures.ThreadPoolExecutor(1)
            self._candidates = pool.submit(self._read_candidates)
            pool.shutdown(wait=False)

    def candidates(self):
        """``{UUID: server}`` of the servers that may forbid hyperthreads.

        Of the cells whose database answered: :attr:`down_cells` names the
        others, :attr:`cell_nodes` gives the compute nodes of those that
        did. Each cell but cell0 (no server there has a host) is asked
        once for the servers whose flavor names ``isolate`` or the
        hyperthreading trait, or whose image's thread policy is
        ``isolate``: more than the checks keep, never fewer. Each is shown
        with :data:`~nova_pcpu_ext.server_fields.MOVE_NODES`.
        """
        self.read_candidates_ahead()
        return self._candidates.result()

    def cell_reads(self):
        """The :class:`CellRead` of each cell read, with what it maps.

        The hosts and servers the API database maps to each cell, counted
        when asked: a cell that did not answer is still described.
        """
        try:
            hosts, servers = _mapped(self.context)
        except DATABASE_ERRORS:
            # An account granted what earlier releases read, not the
            # host mappings: the cells are described without the counts.
            return [read for _name, read in sorted(self.cells.items())]
        return [dataclasses.replace(
            read, hosts=hosts.get(self._mappings[name].id, 0),
            servers=servers.get(self._mappings[name].id, 0))
            for name, read in sorted(self.cells.items())]

    def _read_candidates(self):
        started = time.monotonic()
        try:
            cells = [cell for cell in objects.CellMappingList.get_all(
                self.context) if not cell.is_cell0()]
        except Exception as error:
            raise self._api_error(error, started)
        _check_named(self._own_urls, cells)
        found = {}
        for cell, _args, read in self._in_each_cell(
                self._candidates_of, [(cell, None) for cell in cells]):
            if read is not None:
                servers, nodes = read
                found.update(servers)
                if nodes is not None:
                    self.cell_nodes[_name(cell)] = nodes
        return found

    def _in_each_cell(self, read, reads):
        """``(cell, args, read(cell, args) or None)`` of each of ``reads``.

        The cells are read at the same time; None for a cell whose
        database did not answer or whose URL cannot be opened, which
        :attr:`cells` tells, now or in an earlier reading. A cell whose
        database answered but whose servers Nova's objects could not read
        raises :class:`~nova_pcpu_ext.exception.NovaDataError`.
        """
        started = time.monotonic()
        try:
            if not self._cell_default:
                self._templated_cells()  # the API database's, not a cell's
        except Exception as error:
            raise self._api_error(error, started)
        asked = []
        for cell, args in reads:
            self._mappings[_name(cell)] = cell
            if _name(cell) in self.down_cells:
                yield cell, args, None
            else:
                asked.append((cell, args))
        try:
            with concurrent.futures.ThreadPoolExecutor(
                    max(1, len(asked))) as pool:
                futures = {pool.submit(self._answered, read, cell, args):
                           (cell, args) for cell, args in asked}
                for future in concurrent.futures.as_completed(futures):
                    cell, args = futures[future]
                    try:
                        seconds, result = future.result()
                        reason = ''
                    except _Unanswered as why:
                        seconds, result, reason = why.seconds, None, str(why)
                    read_before = self.cells.get(_name(cell))
                    self.cells[_name(cell)] = CellRead(
                        _name(cell), result is not None, seconds + (
                            read_before.seconds if read_before else 0),
                        reason)
                    yield cell, args, result
        finally:
            self._release()

    def _answered(self, read, cell, args):
        """``(seconds, read(cell, args))``, its failures told apart.

        :class:`_Unanswered` where the database failed or its URL cannot
        be opened, with why; :class:`~nova_pcpu_ext.exception.
        NovaDataError` where Nova's objects failed on what it answered.
        """
        started = time.monotonic()
        try:
            result = read(cell, args)
            return time.monotonic() - started, result
        except _Unanswered as why:
            why.seconds = time.monotonic() - started
            raise
        except exception.PcpuExtError:
            raise
        except DATABASE_ERRORS as error:
            raise _Unanswered(_scrubbed(self._why(error, started),
                                        self._opened.get(cell.uuid)),
                              time.monotonic() - started) from error
        except ImportError as error:
            raise _Unanswered('the driver of its URL cannot be loaded: %s' %
                              _first_line(error)) from error
        except Exception as error:
            raise exception.NovaDataError(_scrubbed(
                'Cell %s: its database answered, but Nova\'s objects could '
                'not read its servers: %s' % (_name(cell), _what(error)),
                self._opened.get(cell.uuid)))

    def _why(self, error, started):
        """Why a database failed, with how long it was waited for."""
        return '%s (after %.1f s; [pcpu_ext] database_timeout = %d s bounds ' \
            'each connection and statement)' % (
                _first_line(error), time.monotonic() - started, self.timeout)

    def _api_error(self, error, started):
        if isinstance(error, DATABASE_ERRORS):
            return exception.DatabaseError(_scrubbed(
                'Nova\'s API database (%s) cannot be read: %s' % (
                    self.api_option, self._why(error, started)),
                self.conf.api_database.connection))
        if isinstance(error, exception.PcpuExtError):
            return error
        return exception.NovaDataError(
            'Nova\'s API database answered, but Nova\'s objects could not '
            'read its mappings: %s' % _what(error))

    def _database(self, cell):
        """The context manager of ``cell``'s database, made once a cell.

        :raises _Unanswered: if its URL cannot be parsed.
        """
        with self._lock:
            if cell.uuid not in self._cells:
                self._opened[cell.uuid] = url = self._cell_url(cell)
                self._cells[cell.uuid] = main_db_api.create_context_manager(
                    _bounded(url, self.timeout, self._statement_bound))
            return self._cells[cell.uuid]

    def _release(self):
        """Close the pooled connections of every cell's engine.

        After each reading of the cells: none stays open while the
        command goes on with placement or moves servers; the engines stay,
        one a cell, for a later reading.
        """
        with self._lock:
            for manager in self._cells.values():
                manager.dispose_pool()

    def _cell_url(self, cell):
        """The URL to read ``cell`` with: the operator's account first.

        :raises _Unanswered: if it cannot be parsed as SQLAlchemy parses
            URLs; never with any part of it, which may hold a password.
        """
        own = self._own_urls.get(cell.uuid) or self._own_urls.get(cell.name)
        if own:
            return _parsed(own, '[pcpu_ext] cell_database_connections\' '
                           'URL of the cell')
        if not self._cell_default and cell.uuid in self._templated_cells():
            # Nova filled it from the override of __init__: the API
            # database's account and host.
            raise exception.InvalidConfig(
                'The database_connection of the mapping of cell %s is a '
                'template, filled from [database] connection, which '
                'nova.conf does not set: set [database] connection to an '
                'account that may read the cell databases.' % _name(cell))
        url = _parsed(cell.database_connection,
                      'the database_connection of its cell mapping')
        template = self.conf.pcpu_ext.cell_database_connection
        if template:
            return _parsed(_filled(template, url),
                           '[pcpu_ext] cell_database_connection, filled')
        if (self._cell_replica and self._cell_default and
                _same_database(url, self._cell_default)):
            return _parsed(self._cell_replica, '[database] slave_connection')
        return url

    def _templated_cells(self):
        if self._templated is None:
            self._templated = _templated_cells(self.context)
        return self._templated

    def _candidates_of(self, cell, _args):
        """``(servers, compute node names or None)`` of a cell."""
        cell_context = self._target(cell)
        move_nodes = _candidates(cell_context)
        servers = self._read_cell(cell, sorted(move_nodes), cell_context)
        for uuid, server in servers.items():
            server[server_fields.MOVE_NODES] = move_nodes[uuid]
        try:
            nodes = _compute_nodes(cell_context)
        except DATABASE_ERRORS:
            # An account granted what earlier releases read, not the
            # compute nodes: the cell's hosts are then read as those of a
            # cell that did not answer (its servers are judged all the
            # same), and destinations are not kept to the cell.
            nodes = None
        return servers, nodes

    def _read_cell(self, cell, uuids, cell_context=None):
        servers = _read(cell_context or self._target(cell), uuids)
        for server in servers.values():
            server[server_fields.CELL] = _name(cell)
        return servers

    def _target(self, cell):
        # The cell's database alone: Nova's target_cell would also set up
        # a message transport this command never uses.
        cell_context = self.context.elevated()
        cell_context.db_connection = self._database(cell)
        return cell_context


class _Unanswered(Exception):
    """A cell's database failed, or its URL cannot be opened.

    The message says why, never with any part of a URL's password.
    """

    def __init__(self, why, seconds=0.0):
        super().__init__(why)
        #: How long it was waited for.
        self.seconds = seconds


def _name(cell):
    return cell.name or cell.uuid


def _first_line(error):
    # Drivers' messages go on with the statement and its parameters.
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _what(error):
    """An error in one line: its type, message and where it was raised."""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return '%s: %s (at %s:%d)' % (type(error).__name__, _first_line(error),
                                  frame.filename, frame.lineno)


@api_db_api.context_manager.reader
def _templated_cells(context):
    """UUIDs of the cell mappings whose ``database_connection`` is a template.

    As stored: Nova's objects show it filled.
    """
    return {uuid for uuid, url in context.session.execute(sa.select(
        api_models.CellMapping.uuid,
        api_models.CellMapping.database_connection)) if '{' in (url or '')}


def _own_urls(values):
    """``{cell name or UUID: URL}``: ``[pcpu_ext] cell_database_connections``.

    No value is shown in an error: it holds a password.
    """
    urls = {}
    for number, value in enumerate(values, 1):
        cell, _sep, url = (part.strip() for part in value.partition('='))
        if not (cell and url):
            raise exception.InvalidConfig(
                '[pcpu_ext] cell_database_connections: value %d of %d is not '
                'CELL=URL, a cell mapping\'s name or UUID, "=" and the URL '
                'to read it with (not shown: it may hold a password).' % (
                    number, len(values)))
        urls[cell] = url
    return urls


def _check_named(urls, cells):
    """Refuse a cell of ``[pcpu_ext] cell_database_connections`` no cell has.

    Its cell would otherwise be read where the operator did not want it.
    """
    unknown = set(urls) - {cell.name for cell in cells} - {
        cell.uuid for cell in cells}
    if unknown:
        raise exception.InvalidConfig(
            '[pcpu_ext] cell_database_connections names %s, which no cell '
            'mapping (but cell0) has: the cells are %s.' % (
                ', '.join(sorted(unknown)),
                ', '.join(sorted(_name(cell) for cell in cells))))


def _parsed(url, what):
    """``url`` as SQLAlchemy's URL, which Nova opens it as.

    :raises _Unanswered: naming ``what``, if it does not parse.
    """
    try:
        return sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError, TypeError):
        # NOTE: the parser's messages show the text around what it could
        # not read: a password, where it holds "/", "?" or "#".
        raise _Unanswered('%s is not a URL SQLAlchemy can parse (not shown: '
                          'it may hold a password)' % what) from None


def _password(url):
    """The password of ``url`` (a string or SQLAlchemy URL), or None."""
    try:
        return sa.engine.make_url(url).password
    except (sa.exc.ArgumentError, ValueError, TypeError):
        return None


def _scrubbed(text, url):
    """``text`` without the password of ``url``, as written or escaped.

    A driver's message may hold what it was given.
    """
    password = url and _password(url)
    if not password:
        return text
    for form in {password, urllib.parse.quote(password, safe=''),
                 urllib.parse.quote_plus(password)}:
        text = text.replace(form, '***')
    return text


def _filled(template, url):
    """``[pcpu_ext] cell_database_connection`` filled from a cell's URL.

    :param url: the SQLAlchemy URL of its cell mapping. The user name and
        password are given escaped, as a URL writes them.
    """
    hostname = url.host or ''
    if ':' in hostname:
        hostname = '[%s]' % hostname  # an IPv6 literal, as a URL writes it
    values = {
        'scheme': url.drivername,
        'username': urllib.parse.quote(url.username or '', safe=''),
        'password': urllib.parse.quote(url.password or '', safe=''),
        'hostname': hostname, 'port': url.port or '',
        'host': hostname + (':%d' % url.port if url.port else ''),
        'path': (url.database or '').lstrip('/'),
        'query': urllib.parse.urlencode(url.query, doseq=True),
        # SQLAlchemy's URLs have none: a "#" belongs to what it is in.
        'fragment': ''}
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as error:
        # Neither the template nor the URL is shown: both may hold a
        # password.
        raise exception.InvalidConfig(
            '[pcpu_ext] cell_database_connection cannot be filled: %s: %s; '
            'its fields are %s.' % (type(error).__name__, error, ', '.join(
                '{%s}' % field for field in FIELDS)))


def _same_database(url, other):
    try:
        return sa.engine.make_url(url) == sa.engine.make_url(other)
    except (sa.exc.ArgumentError, ValueError):
        return url == other


def _bounds(backend, seconds, statements=True):
    """The connection arguments of ``backend`` that bound its waits.

    :param statements: whether PostgreSQL's statements are bounded too,
        which PgBouncer refuses.
    """
    postgresql = {'connect_timeout': seconds}
    if statements:
        postgresql['options'] = '-c statement_timeout=%d' % (seconds * 1000)
    return {
        'mysql': {'connect_timeout': seconds, 'read_timeout': seconds,
                  'write_timeout': seconds},
        'postgresql': postgresql,
        # How long to wait for another connection's lock.
        'sqlite': {'timeout': seconds},
    }.get(backend, {})


def _bounded(url, seconds, statements=True):
    """``url`` with its driver's waits bounded, where it does not say.

    A URL that does not parse is left to fail where it is opened.
    """
    try:
        parsed = sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):  # ValueError: a bad port
        return url
    added = {key: str(value) for key, value in
             _bounds(parsed.get_backend_name(), seconds, statements).items()
             if key not in parsed.query}
    return parsed.update_query_dict(added).render_as_string(
        hide_password=False)


@api_db_api.context_manager.reader
def _mapped(context):
    """``({cell ID: compute hosts}, {cell ID: servers})`` the API maps."""
    hosts = sa.select(api_models.HostMapping.cell_id, sa.func.count()).\
        group_by(api_models.HostMapping.cell_id)
    queued = api_models.InstanceMapping.queued_for_delete
    servers = sa.select(api_models.InstanceMapping.cell_id,
                        sa.func.count()).where(
        sa.or_(queued == sa.false(), queued.is_(None))).group_by(
        api_models.InstanceMapping.cell_id)
    return (dict(context.session.execute(hosts).all()),
            dict(context.session.execute(servers).all()))


@main_db_api.pick_context_manager_reader
def _compute_nodes(context):
    """The names of the compute nodes of a cell."""
    return frozenset(context.session.scalars(sa.select(
        models.ComputeNode.hypervisor_hostname).where(
            models.ComputeNode.deleted == 0)))


@main_db_api.pick_context_manager_reader
def _candidates(context):
    """``{UUID: compute nodes of its moves}`` of the cell's candidates.

    The servers that may forbid hyperthreads, with the source and
    destination nodes of their migrations that did not end.
    """
    flavor = sa.select(models.InstanceExtra.instance_uuid).where(
        models.InstanceExtra.deleted == 0, sa.or_(
            models.InstanceExtra.flavor.like('%isolate%'),
            models.InstanceExtra.flavor.like('%' + HYPERTHREADING + '%')))
    image = sa.select(models.InstanceSystemMetadata.instance_uuid).where(
        models.InstanceSystemMetadata.deleted == 0,
        models.InstanceSystemMetadata.key == (
            IMAGE_PREFIX + 'hw_cpu_thread_policy'),
        models.InstanceSystemMetadata.value == 'isolate')
    candidates = sa.select(models.Instance.uuid).where(
        models.Instance.deleted == 0,
        sa.or_(models.Instance.uuid.in_(flavor),
               models.Instance.uuid.in_(image)))
    move_nodes = {uuid: set() for uuid in
                  context.session.scalars(candidates)}
    for uuid, source, dest in context.session.execute(sa.select(
            models.Migration.instance_uuid, models.Migration.source_node,
            models.Migration.dest_node).where(
                models.Migration.deleted == 0,
                models.Migration.status.not_in(ENDED),
                models.Migration.instance_uuid.in_(candidates))):
        # NOTE: a server created between the two queries is not one of
        # this run's candidates.
        move_nodes.get(uuid, set()).update({source, dest} - {None})
    return move_nodes


def _read(cell_context, uuids):
    """``{UUID: server}`` of ``uuids`` in a cell, a batch a query."""
    servers = {}
    for batch in _batches(uuids):
        # NOTE: without soft_deleted, Nova leaves SOFT_DELETED servers
        # out, which keep their allocations and are restored where they
        # ran; the Compute API shows them.
        servers.update(
            (instance.uuid, _as_shown(instance)) for instance in
            objects.InstanceList.get_by_filters(
                cell_context, {'uuid': batch, 'deleted': False,
                               'soft_deleted': True},
                expected_attrs=['flavor', 'system_metadata']))
    return servers


def _batches(items):
    return [items[start:start + BATCH]
            for start in range(0, len(items), BATCH)]


def _flavor_as_shown(flavor):
    """A server's flavor as the Compute API shows it since 2.47."""
    return {'vcpus': flavor.vcpus, 'ram': flavor.memory_mb,
            'disk': flavor.root_gb, 'ephemeral': flavor.ephemeral_gb,
            'swap': flavor.swap, 'original_name': flavor.name,
            'extra_specs': dict(flavor.extra_specs)}


def _status(instance):
    """A server's status as the Compute API shows it."""
    moving = MOVE_STATUS.get(instance.vm_state, {})
    return moving.get(instance.task_state) or STATUS.get(
        instance.vm_state, 'UNKNOWN')


def _as_shown(instance):
    """An instance as the Compute API shows it, with what the checks read."""
    properties = {key[len(IMAGE_PREFIX):]: value for key, value in
                  instance.system_metadata.items()
                  if key.startswith(IMAGE_PREFIX)}
    return {
        'id': instance.uuid,
        'name': instance.display_name,
        'status': _status(instance),
        'OS-EXT-STS:task_state': instance.task_state,
        'OS-EXT-SRV-ATTR:host': instance.host,
        'OS-EXT-SRV-ATTR:hypervisor_hostname': instance.node,
        'locked': instance.locked,
        'created': instance.created_at.strftime('%Y-%m-%dT%H:%M:%SZ'),
        'flavor': _flavor_as_shown(instance.flavor),
        # NOTE: '' for a server booted from volume, whose properties are
        # its volume's image's.
        'image': {'id': instance.image_ref, 'properties': properties},
    }
