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

"""The ``[pcpu_ext]`` option group: every option of nova-pcpu-ext."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'pcpu_ext',
    title='nova-pcpu-ext options',
    help="""
Options of the nova-pcpu-ext plugin set. The plugins are switched on by
``[filter_scheduler] available_filters = nova_pcpu_ext.scheduler.activate``
on scheduler hosts and by running ``nova-pcpu-ext-compute`` instead of
``nova-compute`` on compute hosts; these options choose what is activated.
""")

plugin_opts = [
    cfg.ListOpt(
        'request_filters',
        default=['isolate_vcpu_fallback'],
        help="""
Request filters nova-scheduler consults for the placement queries of pinned
requests.

The filters see every request that goes through ``select_destinations``
(boots, rebuilds to a new image, resizes, cold and live migrations,
evacuations and unshelves) whose flavor or image asks for dedicated CPUs,
and decide whether Nova makes its VCPU fallback query and what it asks.
Unpinned requests and ``[workarounds] disable_fallback_pcpu_query = True``
make no fallback query, so the filters are not consulted.

Names of entry points in the ``nova_pcpu_ext.request_filters`` namespace,
applied in the order given. An empty list leaves Nova's placement queries
untouched. An unknown name stops nova-scheduler at startup.

Changing this option takes effect when the service restarts.

Related options:

* ``isolate_fallback_mode``
"""),
    cfg.ListOpt(
        'resource_tracker_mixins',
        default=['allocation_ratios', 'pcpu_trait'],
        help="""
Mixins composed into Nova's resource tracker in nova-compute.

Names of entry points in the ``nova_pcpu_ext.resource_tracker`` namespace;
the first name is outermost in the method resolution order. An empty list
leaves Nova's resource tracker untouched. An unknown name stops nova-compute
at startup.

``pcpu_trait`` reports the ``CUSTOM_PCPU_EXT_REPORTS_PCPU`` trait on every
compute node provider whose tree has ``PCPU`` inventory, and removes it
where that inventory is gone; ``[pcpu_ext] isolate_fallback_mode =
legacy_only`` on the schedulers relies on it.

Changing this option takes effect when the service restarts.
"""),
    cfg.StrOpt(
        'report_client',
        default='serialized',
        help="""
Report client wrapper nova-compute uses to talk to placement.

Name of an entry point in the ``nova_pcpu_ext.report_client`` namespace, or
an empty value to keep Nova's own report client. An unknown name stops
nova-compute at startup.

Changing this option takes effect when the service restarts.
"""),
]

report_client_opts = [
    cfg.FloatOpt(
        'provider_lock_warn_seconds',
        default=5.0,
        min=0.0,
        help="""
Log a warning when an operation of nova-compute has waited this long for
the lock of a provider tree, naming the operation holding it, while it is
still waiting.

The ``serialized`` report client runs every read-modify-write of its cached
provider trees (the resource tracker's update, compute status changes,
cache invalidation) under one re-entrant lock per root provider, granted
in the order asked. Long waits show contention, for example a slow
placement.

Changing this option takes effect when the service restarts.

Related options:

* ``report_client`` must be ``serialized``.
"""),
    cfg.FloatOpt(
        'provider_lock_timeout',
        default=10.0,
        min=0.0,
        help="""
Seconds a compute status change (enabling or disabling the compute service)
waits for the locks of its nodes' provider trees, counted from its start for
all the nodes together, before it updates the ``COMPUTE_STATUS_DISABLED``
trait of each node whose tree is still held without the lock. ``0`` means
wait as long as it takes.

The ``serialized`` report client runs the resource tracker's whole periodic
update under the tree lock, including its call to nova-conductor for the
service record. With nova-conductor or the message broker in trouble, that
update can hold the tree for up to ``[DEFAULT] rpc_response_timeout``; Nova
without the ``serialized`` report client makes the status change at once.
After this timeout the status change goes ahead as Nova alone does, and logs
a warning naming the provider, the wait and the operation holding the tree.
Should that operation's flush then undo the trait, the next periodic update
re-syncs it from the service record. Every other operation keeps waiting for
the lock.

Changing this option takes effect when the service restarts.

Related options:

* ``provider_lock_warn_seconds``: a status change that waits longer than it
  also logs the usual warning while it waits.
* ``report_client`` must be ``serialized``.
"""),
]

request_filter_opts = [
    cfg.StrOpt(
        'isolate_fallback_mode',
        default='drop',
        choices=[
            ('drop', 'Do not make the VCPU fallback query for requests '
                     'with the isolate CPU thread policy (flavor or '
                     'image): only hosts reporting PCPU without '
                     'hyperthreads take isolate instances.'),
            ('legacy_only', 'Make the VCPU fallback query of every pinned '
                            'request forbid the CUSTOM_PCPU_EXT_REPORTS_PCPU '
                            'trait on the host, so it yields legacy hosts '
                            '(no PCPU inventory) only, with or without '
                            'hyperthreads.'),
        ],
        help="""
What the ``isolate_vcpu_fallback`` request filter does with Nova's VCPU
fallback placement query.

For a pinned request Nova asks placement for ``PCPU`` first and then, so
that legacy hosts (configured with ``vcpu_pin_set``, or with no dedicated
CPUs, reporting no ``PCPU``) can take it too, a second time for ``VCPU``.
For the ``isolate`` CPU thread policy (``hw:cpu_thread_policy=isolate``
in the flavor or ``hw_cpu_thread_policy=isolate`` in the image) the first
query forbids the ``HW_CPU_HYPERTHREADING`` trait and the second does not,
so a hyperthreaded host configured with ``[compute] cpu_dedicated_set``
comes back as a candidate that Nova only rejects late, in its NUMA fitting
(Nova bug 1889633).

``drop`` (the default) makes no fallback query for ``isolate`` requests:
one placement query, but no legacy host takes, or is the destination of a
move of, an ``isolate`` instance. Nothing changes for a cloud without
legacy hosts.

``legacy_only`` keeps the fallback query and makes it forbid, on the host,
the ``CUSTOM_PCPU_EXT_REPORTS_PCPU`` trait that the ``pcpu_trait``
resource tracker mixin of ``nova-pcpu-ext-compute`` reports on hosts with
``PCPU`` inventory: the fallback of every pinned request then yields legacy
hosts only, with and without hyperthreads, as Nova intends, and never a
host that reports ``PCPU``. A host whose compute does not report the trait
yet (not running the mixin) is a candidate as in stock Nova.

An explicit ``trait:HW_CPU_HYPERTHREADING=forbidden`` is carried by both
queries, and ``drop`` leaves such requests alone.

Changing this option takes effect when the service restarts.

Related options:

* ``request_filters`` must contain ``isolate_vcpu_fallback``.
* ``resource_tracker_mixins`` of the computes must contain ``pcpu_trait``
  for ``legacy_only``.
* ``[workarounds] disable_fallback_pcpu_query``: when set, Nova makes no
  fallback query at all (for every pinned request, as ``drop`` does for
  ``isolate`` requests) and this option has no effect.
"""),
]

#: Read by the operator commands only, at each run.
database_opts = [
    cfg.StrOpt(
        'cell_database_connection',
        secret=True,
        help="""
The URL ``nova-pcpu-ext-status`` and ``nova-pcpu-ext-manage`` open each
cell database with, filled per cell from its cell mapping's
``database_connection``; unset, that URL itself, normally Nova's
read-write account.

Set it to read with an account of its own, such as one granted ``SELECT``
only. The fields are those of Nova's cell mapping templates, taken from
the cell mapping's URL as SQLAlchemy (and so Nova) parses it:
``{scheme}``, ``{username}`` and ``{password}`` (escaped as a URL writes
them), ``{hostname}`` (an IPv6 address in brackets), ``{port}`` (empty
where the URL has none), ``{path}`` (the database name), ``{query}`` and
``{fragment}`` (always empty: a ``#`` belongs to the part it is in); and
``{host}``, the host with ``:port`` where the URL has one. For example::

    mysql+pymysql://nova_reader:SECRET@{host}/{path}?{query}

Where it is unset and ``[database] slave_connection`` is set, the cell
whose URL is ``[database] connection`` is read from that replica. Likewise
the API database is read from ``[api_database] slave_connection`` where
set. A cell named in ``cell_database_connections`` is read with the URL
given there.

Changing this option takes effect at the next run of a command; no
service reads it.

Related options:

* ``cell_database_connections``
* ``database_timeout``
"""),
    cfg.MultiStrOpt(
        'cell_database_connections',
        secret=True,
        default=[],
        help="""
One cell's URL for ``nova-pcpu-ext-status`` and ``nova-pcpu-ext-manage``,
as ``CELL=URL``: the name or UUID of a cell mapping, then the URL to read
that cell's database with, such as a replica of its own. Give the option
once for each such cell. It wins over ``cell_database_connection`` and
``[database] slave_connection`` for that cell. A name or UUID no cell
mapping has stops the commands with an error naming it. For example::

    cell_database_connections = cell1=mysql+pymysql://r:SECRET@db1-ro/cell1
    cell_database_connections = cell2=mysql+pymysql://r:SECRET@db2:3307/cell2

Changing this option takes effect at the next run of a command; no
service reads it.

Related options:

* ``cell_database_connection``
"""),
    cfg.IntOpt(
        'database_timeout',
        default=30,
        min=1,
        help="""
Seconds the operator commands wait for Nova's API or a cell database to
accept a connection, and for each statement to answer, before they give
up on that database and say so, naming this option.

Passed to the database driver: ``connect_timeout``, ``read_timeout`` and
``write_timeout`` for MySQL, ``connect_timeout`` and ``statement_timeout``
for PostgreSQL, ``timeout`` (waiting for a lock) for SQLite; a value the
URL already sets is kept.

Changing this option takes effect at the next run of a command; no
service reads it.

Related options:

* ``postgresql_statement_timeout``
"""),
    cfg.BoolOpt(
        'postgresql_statement_timeout',
        default=True,
        help="""
Whether ``database_timeout`` bounds each statement on PostgreSQL too, sent
as the startup parameter ``options=-c statement_timeout=...`` when the
operator commands connect.

PgBouncer refuses that parameter (``unsupported startup parameter:
options``), so every reading of a database behind it fails: set this to
False there. Connecting stays bounded by ``database_timeout``; statements
then run as long as the server lets them. MySQL and SQLite are bounded
either way.

Changing this option takes effect at the next run of a command; no
service reads it.
"""),
]

ALL_OPTS = (plugin_opts + request_filter_opts + report_client_opts +
            database_opts)


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(ALL_OPTS, group=GROUP)


def validate(conf):
    """Read every ``[pcpu_ext]`` option once.

    A bad value then stops the service at startup instead of failing the
    first request that reads it.
    """
    from nova_pcpu_ext import exception
    for opt in ALL_OPTS:
        try:
            getattr(conf.pcpu_ext, opt.dest)
        except ValueError as error:
            raise exception.InvalidConfig(
                invalid_value(conf, GROUP.name, opt.name, error))


def invalid_value(conf, group, name, error):
    """The message for an option oslo.config could not read.

    ``[group] name = value is invalid: reason``: oslo.config's own message
    names the file but, for a value out of range, not the value.
    """
    reason = str(error).rpartition('is not valid: ')[2]
    return '[%s] %s = %s is invalid: %s' % (
        group, name, _raw_value(conf, group, name), reason)


def _raw_value(conf, group, name):
    """The option as written in ``conf``'s files or environment."""
    try:
        files = conf.config_file or []
        dirs = conf.config_dir or []
    except cfg.NoSuchOptError:
        return '?'  # not parsed from files (tests)
    raw = cfg.ConfigOpts()
    raw.register_opt(cfg.StrOpt(name),
                     group=None if group == 'DEFAULT' else group)
    args = [arg for path in files for arg in ('--config-file', path)]
    args += [arg for path in dirs for arg in ('--config-dir', path)]
    raw(args=args, default_config_files=[], default_config_dirs=[])
    return (raw if group == 'DEFAULT' else raw[group])[name]


def list_opts():
    """Options for oslo-config-generator and the documentation."""
    return [(GROUP, ALL_OPTS)]


register_opts(cfg.CONF)
CONF = cfg.CONF
