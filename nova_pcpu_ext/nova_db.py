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
task in progress, see :data:`STATUS`), so the checks judge both alike; a
server of a cell whose database does not answer is shown with status
``UNKNOWN``, as the Compute API shows it, and the cell is named.
"""

import concurrent.futures

from nova.compute import vm_states
from nova import context as nova_context
from nova.db.api import api as api_db_api
from nova.db.main import api as main_db_api
from nova.db.main import models
from nova import objects
import os_traits
import oslo_messaging
from oslo_utils import importutils
import sqlalchemy as sa

from nova_pcpu_ext import audit
from nova_pcpu_ext import exception

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


class NovaDatabase(object):
    """Nova's servers by UUID, from its API and cell databases."""

    def __init__(self, conf):
        # One attempt to reach a database: a cell that does not answer is
        # reported at once, not after oslo.db's retries (100 s by
        # default); the command writes nothing there.
        for group in ('database', 'api_database'):
            conf.set_override('max_retries', 1, group)
            conf.set_override('retry_interval', 0, group)
        if not conf.database.connection:
            # Nova's instance queries pick the SQL of their filters by the
            # type of [database] connection, unset where nova.conf serves
            # only the Compute API: take the API database's type.
            conf.set_override('connection', conf.api_database.connection,
                              'database')
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
        #: ``{cell name: why it did not answer}``.
        self.down_cells = {}
        self._candidates = None

    def servers(self, wanted, progress=lambda listed: None):
        """``{UUID: server}`` of the servers of ``wanted`` Nova has.

        Consumers that are no server (a migration's allocation, a deleted
        server's) are left out, as the Compute API's listing leaves them.
        """
        by_cell = {}
        try:
            for batch in _batches(sorted(wanted)):
                for mapping in objects.InstanceMappingList.\
                        get_by_instance_uuids(self.context, batch):
                    if mapping.cell_mapping is not None:  # else building
                        by_cell.setdefault(mapping.cell_mapping.uuid, (
                            mapping.cell_mapping, []))[1].append(
                                mapping.instance_uuid)
        except Exception as error:
            raise _api_database_error(error)
        found = {}
        for cell, uuids, servers in self._in_each_cell(
                self._read_cell, by_cell.values()):
            found.update(servers if servers is not None else (
                (uuid, {'id': uuid, 'status': 'UNKNOWN'}) for uuid in uuids))
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

        Or None when a cell's database did not answer (it is then in
        :attr:`down_cells`). Each cell but cell0 (no server there has a
        host) is asked once for the servers whose flavor names
        ``isolate`` or the hyperthreading trait, or whose image's thread
        policy is ``isolate``: more than the checks keep, never fewer.
        Each is shown with :data:`~nova_pcpu_ext.audit.MOVE_NODES`.
        """
        self.read_candidates_ahead()
        return self._candidates.result()

    def _read_candidates(self):
        try:
            cells = [cell for cell in objects.CellMappingList.get_all(
                self.context) if not cell.is_cell0()]
        except Exception as error:
            raise _api_database_error(error)
        found = {}
        for _cell, _args, servers in self._in_each_cell(
                self._candidates_of, [(cell, None) for cell in cells]):
            found.update(servers or {})
        return None if self.down_cells else found

    def _in_each_cell(self, read, reads):
        """``(cell, args, read(cell, args) or None)`` of each of ``reads``.

        The cells are read at the same time; None for a cell whose
        database did not answer, which :attr:`down_cells` names.
        """
        with concurrent.futures.ThreadPoolExecutor(
                max(1, len(reads))) as pool:
            futures = {pool.submit(read, cell, args): (cell, args)
                       for cell, args in reads}
            for future in concurrent.futures.as_completed(futures):
                cell, args = futures[future]
                try:
                    result = future.result()
                except Exception as error:
                    self.down_cells[cell.name or cell.uuid] = str(error)
                    result = None
                yield cell, args, result

    def _candidates_of(self, cell, _args):
        cell_context = self._target(cell)
        move_nodes = _candidates(cell_context)
        servers = self._read(cell_context, sorted(move_nodes))
        for uuid, server in servers.items():
            server[audit.MOVE_NODES] = move_nodes[uuid]
        return servers

    def _read_cell(self, cell, uuids):
        return self._read(self._target(cell), uuids)

    def _target(self, cell):
        # The cell's database alone: Nova's target_cell would also set up
        # a message transport this command never uses.
        cell_context = self.context.elevated()
        cell_context.db_connection = main_db_api.create_context_manager(
            cell.database_connection)
        return cell_context

    @staticmethod
    def _read(cell_context, uuids):
        """``{UUID: server}`` of ``uuids`` in a cell, a batch a query."""
        servers = {}
        for batch in _batches(uuids):
            servers.update(
                (instance.uuid, _as_shown(instance)) for instance in
                objects.InstanceList.get_by_filters(
                    cell_context, {'uuid': batch, 'deleted': False},
                    expected_attrs=['flavor', 'system_metadata']))
        return servers


def _api_database_error(error):
    return exception.DatabaseError(
        'Nova\'s API database ([api_database] connection) cannot be read: '
        '%s' % error)


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


def _batches(items):
    return [items[start:start + BATCH]
            for start in range(0, len(items), BATCH)]


def _flavor_as_shown(flavor):
    """A server's flavor as the Compute API shows it since 2.47."""
    return {'vcpus': flavor.vcpus, 'ram': flavor.memory_mb,
            'disk': flavor.root_gb, 'ephemeral': flavor.ephemeral_gb,
            'swap': flavor.swap, 'original_name': flavor.name,
            'extra_specs': dict(flavor.extra_specs)}


def _as_shown(instance):
    """An instance as the Compute API shows it, with what the checks read."""
    properties = {key[len(IMAGE_PREFIX):]: value for key, value in
                  instance.system_metadata.items()
                  if key.startswith(IMAGE_PREFIX)}
    return {
        'id': instance.uuid,
        'name': instance.display_name,
        'status': STATUS.get(instance.vm_state, 'UNKNOWN'),
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
