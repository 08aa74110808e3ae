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

"""``nova-pcpu-ext-status upgrade check``: read-only checks, as nova-status.

::

    nova-pcpu-ext-status [--config-file nova.conf]
        [--os-compute-endpoint-override URL] [--metrics-textfile PATH]
        upgrade check [--json]

Exits 0 when every check passes, 1 on warnings, 2 on failures, 3 when no
check failed but a cell's database did not answer (the results leave its
servers out) and 255 on an unexpected error. Placement and the Compute API
are reached with the credentials of nova.conf's ``[placement]``; nothing
is written but the metrics file.
"""

import json
import os
import re
import sys
import time

import nova.conf
from oslo_config import cfg
from oslo_upgradecheck import upgradecheck
import prettytable

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import clients
from nova_pcpu_ext import cloud_hosts
from nova_pcpu_ext.cmd import common
from nova_pcpu_ext import compute
from nova_pcpu_ext import destinations
from nova_pcpu_ext import exception
from nova_pcpu_ext import isolate_scan
from nova_pcpu_ext import metrics
from nova_pcpu_ext import pcpu_trait
from nova_pcpu_ext import ratio_audit
from nova_pcpu_ext import scheduler

CONF = nova.conf.CONF
PROG = 'nova-pcpu-ext-status'
MANAGE = 'nova-pcpu-ext-manage'
ACTIVATE_SCHEDULER = 'nova_pcpu_ext.scheduler.activate'
SCHEDULER_COMMAND = 'nova-pcpu-ext-scheduler'
#: What every console script running the extension's scheduler imports.
SCHEDULER_ENTRY_POINT = 'nova_pcpu_ext.cmd.scheduler'
#: ``nova-scheduler: master process [/path/to/nova-scheduler --config-file
#: ...]``, cotyledon's title of a service's master process.
MASTER_TITLE = re.compile(r': master process \[(\S+)')

CODES = {ratio_audit.WARNING: upgradecheck.Code.WARNING,
         ratio_audit.FAILURE: upgradecheck.Code.FAILURE}
#: Exit code when no check failed but a cell's database did not answer.
CELL_DOWN = 3
EXIT_CODES = (
    'Exit codes: 0 every check passed; 1 a warning; 2 a failure; 3 no '
    'failure, but a cell\'s database did not answer: its servers were not '
    'judged; 255 an unexpected error.')
CLI_OPTS = [
    cfg.StrOpt('metrics-textfile', metavar='PATH',
               help='Also write the results, and how each cell\'s database '
                    'answered, to PATH for node_exporter\'s textfile '
                    'collector (a .prom file in its '
                    '--collector.textfile.directory). Given before the '
                    'command.'),
]

#: The request filter whose modes the isolate checks follow.
ISOLATE_FILTER = 'isolate_vcpu_fallback'
#: :func:`fallback_mode` where Nova's own workaround drops the fallback.
WORKAROUND = 'workaround'
#: :func:`fallback_mode` where the request filter is not configured.
STOCK = 'stock'
#: Hosts named in a result, at most.
SHOWN = 5
NO_LEGACY = (
    'No legacy host: every compute node reports PCPU, so [pcpu_ext] '
    'isolate_fallback_mode = drop (the default) costs this cloud nothing, '
    'and so does Nova\'s own [workarounds] disable_fallback_pcpu_query = '
    'True, which drops the VCPU fallback query for every pinned request.')
KEEP_LEGACY = (
    'To keep them, %sset [pcpu_ext] isolate_fallback_mode = legacy_only on '
    'the schedulers, with the pcpu_trait resource tracker mixin on the '
    'computes that report PCPU (nova-pcpu-ext-compute); or configure them '
    'with [compute] cpu_dedicated_set.')
FILTER_OFF = (
    'The isolate_vcpu_fallback request filter is off in this nova.conf '
    '(not in [pcpu_ext] request_filters): judged as stock Nova schedules, '
    'its VCPU fallback query offering pinned requests, isolate ones '
    'included, every legacy host (no PCPU inventory). Run the check with '
    'the nova.conf that switches the filter on to see what its mode '
    'costs.')
NOT_ACTIVATED = (
    'Judged as if the schedulers ran the isolate_vcpu_fallback request '
    'filter in %s mode, as this nova.conf configures it; no scheduler '
    'activates it on this host (see the Configuration check), and a '
    'scheduler that does not makes the VCPU fallback query as stock Nova.')


def _script_text(pid, path):
    """The start of the script file ``path`` as process ``pid`` sees it.

    Through ``/proc/<pid>/root`` (or ``cwd`` for a relative path), so that
    a process in a container is judged by the container's files.
    """
    base = 'root' if os.path.isabs(path) else 'cwd'
    try:
        with open(os.path.join('/proc', pid, base, path.lstrip('/')),
                  errors='replace') as script:
            return script.read(4096)
    except OSError:
        return ''  # gone meanwhile, not ours to read, or not a file


def _scripts(argv):
    """Where the script a command line runs may be named.

    The script itself, or an interpreter running it; or, for the master
    process of a service with workers in Nova's threading mode, the start
    of the command line in the title cotyledon gave it.
    """
    title = MASTER_TITLE.search(argv[0])
    return [title.group(1)] if title else argv[:2]


def _runs_extension_scheduler(pid, argv):
    """Whether a command line runs the extension's scheduler.

    As ``nova-pcpu-ext-scheduler``, or as a ``nova-scheduler`` console
    script that calls it (the image of the kolla recipe).
    """
    for arg in _scripts(argv):
        name = os.path.basename(arg)
        if name == SCHEDULER_COMMAND:
            return True
        if name == 'nova-scheduler':
            return SCHEDULER_ENTRY_POINT in _script_text(pid, arg)
    return False


def _scheduler_command_runs():
    """Whether a process on this host runs the extension's scheduler."""
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as cmdline:
                argv = cmdline.read().decode(errors='replace').split('\0')
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if _runs_extension_scheduler(pid, argv):
            return True
    return False


def activated_here():
    """Whether a scheduler on this host would run the request filters.

    By the ``available_filters`` entry of this nova.conf, or a process
    here running the extension's scheduler.
    """
    return (ACTIVATE_SCHEDULER in CONF.filter_scheduler.available_filters or
            _scheduler_command_runs())


def config_problems():
    """``[(severity, message)]``: the problems of nova.conf and Nova.

    Each is found whatever the others are, so one bad value does not hide
    another.
    """
    failures = []
    for check in (allocation_ratios.validate_ratio_options,
                  lambda _conf: compute.check_plugins()):
        try:
            check(CONF)
        except exception.PcpuExtError as error:
            failures.append(str(error))
    try:
        request_filters = scheduler.check_plugins()
    except exception.PcpuExtError as error:
        failures.append(str(error))
        request_filters = None
    # NOTE: a bad ratio is both a compute plugin's and Nova's problem.
    problems = [(ratio_audit.FAILURE, message) for message in
                dict.fromkeys(failures)]
    if request_filters and not activated_here():
        problems.append((
            ratio_audit.WARNING,
            '[pcpu_ext] request_filters are set but [filter_scheduler] '
            'available_filters lacks %s and no scheduler on this host runs '
            '%s: add the entry on scheduler hosts, or run the scheduler as '
            '%s, or the request filters never run.' % (
                ACTIVATE_SCHEDULER, SCHEDULER_ENTRY_POINT, SCHEDULER_COMMAND)))
    return problems


def _summary(findings, what, advice):
    """One check's result: how many findings, the worst one, what to do.

    Notes (providers deleted during the run) follow, and change no code.
    """
    notes = _deleted_note((f.provider_name, f.provider_uuid)
                          for f in findings if f.severity == ratio_audit.NOTE)
    findings = [f for f in findings if f.severity != ratio_audit.NOTE]
    if not findings:
        return upgradecheck.Result(upgradecheck.Code.SUCCESS, notes or None)
    worst = max(findings, key=lambda f: CODES[f.severity])
    return upgradecheck.Result(CODES[worst.severity], ' '.join(filter(None, (
        '%s: %d found, the worst on %s (%s): %s. %s' % (
            what, len(findings), worst.provider_name,
            worst.consumer or worst.provider_uuid, worst.problem, advice),
        notes))))


def _deleted_note(providers):
    """The note of ``(name, UUID)`` of providers deleted, skipped, or ''."""
    listed = ', '.join('%s (%s)' % provider for provider in providers)
    return ('Resource providers deleted during the run, skipped: %s.' %
            listed if listed else '')


def _server_list(isolate_servers, shown=5):
    listed = ', '.join('%s on %s (%s)' % (found.server['id'], found.host,
                                          found.reason)
                       for found in isolate_servers[:shown])
    more = len(isolate_servers) - shown
    return listed + (' and %d more' % more if more > 0 else '')


def fallback_mode():
    """What the schedulers do with Nova's VCPU fallback query, by nova.conf.

    :data:`WORKAROUND` where Nova's ``[workarounds]
    disable_fallback_pcpu_query`` drops it for every pinned request,
    :data:`STOCK` where the ``isolate_vcpu_fallback`` request filter is not
    configured, else ``[pcpu_ext] isolate_fallback_mode``; None for a bad
    value, which the configuration check names.
    """
    try:
        if CONF.workarounds.disable_fallback_pcpu_query:
            return WORKAROUND
        if ISOLATE_FILTER not in CONF.pcpu_ext.request_filters:
            return STOCK
        return CONF.pcpu_ext.isolate_fallback_mode
    except (cfg.Error, ValueError):
        return None


def scans_legacy_hosts(mode):
    """Whether the isolate scan covers legacy hosts without hyperthreads.

    Where ``mode`` takes isolate servers away from them: drop (or an
    unreadable mode, judged as the default) and Nova's workaround; not
    ``legacy_only`` nor without the request filter, where the fallback
    query offers them every legacy host.
    """
    return mode not in ('legacy_only', STOCK)


def left_out(mode, nodes):
    """The legacy hosts that take no isolate server in ``mode``.

    :param nodes: :class:`~nova_pcpu_ext.cloud_hosts.ComputeNodes`.
    """
    if mode in ('drop', WORKAROUND):
        return nodes.legacy
    return []


def _names(providers, shown=SHOWN):
    listed = ', '.join(provider['name'] for provider in providers[:shown])
    more = len(providers) - shown
    return listed + (' and %d more' % more if more > 0 else '')


def assumption(mode, activated=True):
    """What the checks of the fallback mode assume of the schedulers.

    :param mode: see :func:`fallback_mode`.
    :param activated: :func:`activated_here`.
    :returns: a sentence, or None where they judge nova.conf's mode as it
        is.
    """
    if mode == STOCK:
        return FILTER_OFF
    if mode in ('drop', 'legacy_only') and not activated:
        return NOT_ACTIVATED % mode
    return None


def judge_legacy_hosts(mode, nodes, servers, lacking=()):
    """The result of the legacy hosts check.

    :param mode: see :func:`fallback_mode`.
    :param nodes: :class:`~nova_pcpu_ext.cloud_hosts.ComputeNodes`.
    :param servers: the isolate servers judged on the hosts
        :func:`left_out`.
    :param lacking: in ``legacy_only`` mode, the compute nodes that report
        PCPU without the trait of the ``pcpu_trait`` mixin.
    """
    if mode in (None, STOCK):
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)
    hosts = left_out(mode, nodes)
    if lacking:
        return upgradecheck.Result(upgradecheck.Code.WARNING, ' '.join(filter(
            None, (
                '%d compute nodes report PCPU without the %s trait: %s. '
                'Their computes do not run the pcpu_trait resource tracker '
                'mixin, so with [pcpu_ext] isolate_fallback_mode = '
                'legacy_only the VCPU fallback query still offers them to '
                'pinned requests, as stock Nova does (hyperthreaded ones '
                'to isolate requests too: bug 1889633). Run '
                'nova-pcpu-ext-compute there with pcpu_trait in [pcpu_ext] '
                'resource_tracker_mixins (the default): the trait is '
                'reported when the compute starts.' % (
                    len(lacking), pcpu_trait.TRAIT, _names(lacking)),
                '' if nodes.legacy else NO_LEGACY))))
    if not nodes.legacy:
        return upgradecheck.Result(upgradecheck.Code.SUCCESS, NO_LEGACY)
    if not hosts:
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)
    which = ('legacy hosts (no PCPU inventory: vcpu_pin_set, or no '
             'dedicated CPUs; %d with hyperthreads)' % sum(
                 provider['uuid'] in nodes.hyperthreaded
                 for provider in hosts))
    if mode == WORKAROUND:
        rule = ('With Nova\'s [workarounds] disable_fallback_pcpu_query '
                '= True, whatever [pcpu_ext] isolate_fallback_mode says,')
        what, keep = 'a pinned server', 'unset the workaround and '
    else:
        rule = 'With [pcpu_ext] isolate_fallback_mode = drop'
        what, keep = 'an isolate server', ''
    return upgradecheck.Result(upgradecheck.Code.WARNING, (
        '%d %s: %s; %d isolate servers run on them. %s none of them takes '
        '%s, nor is the destination of a move (migrate, resize, evacuate, '
        'unshelve) of one, although Nova places and pins such servers '
        'correctly there. %s' % (
            len(hosts), which, _names(hosts), len(servers), rule, what,
            KEEP_LEGACY % keep)))


def _on_hyperthreaded_hosts(name, hyperthreaded):
    """The hosts the isolate checks always cover."""
    return hyperthreaded


def _blind_spots(scan, covers=_on_hyperthreaded_hosts):
    """What an isolate check could not judge, or ''.

    :param covers: ``covers(host, hyperthreaded)``: whether the check
        covers the host (a compute node provider's name).
    """
    unsure = [found for found in scan.found if found.unsure and covers(
        found.provider['name'], found.hyperthreaded)]
    notes = []
    if unsure:
        notes.append('%d servers are unsure: %s; check their thread policy '
                     'by hand.' % (len(unsure), '; '.join(
                         '%s on %s: %s' % (found.server['id'], found.host,
                                           found.unsure)
                         for found in unsure[:5])))
    for hyperthreaded, what in ((True, 'hyperthreaded hosts'), (
            False, 'legacy hosts without hyperthreads')):
        hosts = {name for name in scan.unseen
                 if (name not in scan.without_ht) == hyperthreaded and
                 covers(name, hyperthreaded)}
        for cell, on_hosts in scan.unseen_by_cell(hosts):
            notes.append(_not_judged(scan, cell, on_hosts, what))
    return ' '.join(notes)


def _not_judged(scan, cell, on_hosts, what):
    """The note of the servers of one cell not judged on ``on_hosts``."""
    servers = sum(map(len, on_hosts.values()))
    hosts = _names([{'name': name} for name in sorted(on_hosts)])
    if cell is None:
        return 'The Compute API could not show %d servers of %d %s (%s): ' \
            'is a cell down?' % (servers, len(on_hosts), what, hosts)
    read = {read.name: read for read in scan.cells}[cell]
    return 'Could not judge %d servers of %d %s of cell %s (%s): its ' \
        'database could not be read: %s.' % (
            servers, len(on_hosts), what, cell, hosts, '; '.join(
                filter(None, (read.reason, read.maps))))


def _with_blind_spots(result, scan, covers=_on_hyperthreaded_hosts):
    """``result``, a warning at least, when some servers were not judged."""
    blind_spots = _blind_spots(scan, covers)
    if not blind_spots:
        return result
    return upgradecheck.Result(
        max(result.code, upgradecheck.Code.WARNING),
        ' '.join(filter(None, (result.details, blind_spots))))


def _not_judged_here(scan):
    """What the scan met but rightly did not judge, or ''."""
    notes = []
    if scan.elsewhere:
        notes.append(
            '%d servers that forbid hyperthreads hold resources of a '
            'scanned host they do not run on, judged where they run: %s.' % (
                len(scan.elsewhere), '; '.join(
                    '%s runs on %s, holds resources of %s: %s' % (
                        moved.server['id'], moved.runs_on,
                        moved.provider['name'], moved.why)
                    for moved in scan.elsewhere[:SHOWN])))
    notes.append(_deleted_note((provider['name'], provider['uuid'])
                               for provider in scan.gone))
    return ' '.join(filter(None, notes))


def _with_assumption(result, assumed):
    """``result`` with what it assumed first in its details, its code kept.

    A failure judged nothing, so assumed nothing either.
    """
    if not assumed or result.code == upgradecheck.Code.FAILURE:
        return result
    return upgradecheck.Result(result.code, ' '.join(filter(
        None, (assumed, result.details))))


def _with_notes(result, notes):
    """``result`` with ``notes`` added to its details, its code kept."""
    if not notes:
        return result
    return upgradecheck.Result(result.code, ' '.join(filter(
        None, (result.details, notes))))


class UpgradeChecks(upgradecheck.UpgradeCommands):
    """The checks of ``upgrade check``.

    A placement or Compute API failure is the failed result of the check
    that met it, so the other results and ``--json`` output stay whole.
    """

    display_title = 'nova-pcpu-ext upgrade check results'

    def __init__(self):
        super().__init__()
        self._services = None
        self._failure = None
        self._isolate_scan = None
        self._compute_nodes = None
        self._activated = None
        self._progress = common.Progress(PROG)

    def check(self):
        """Run the checks; print them as oslo.upgradecheck does, and cells.

        ``--json`` adds ``cells``, how each cell's database answered; the
        metrics file gets both. The exit code is the worst result's, or
        :data:`CELL_DOWN` where a cell did not answer and none failed.
        """
        try:
            self._read_servers_ahead()
            results = [(name, run_check(self))
                       for name, run_check in self._upgrade_checks]
            cells = self._isolate_scan.cells if self._isolate_scan else []
            if CONF.command.json:
                print(json.dumps(self._json(results, cells)))
            else:
                print(self._table(results))
            if CONF.metrics_textfile:
                metrics.write_textfile(CONF.metrics_textfile, metrics.textfile(
                    [(name, result.code) for name, result in results],
                    cells, time.time()))
        except exception.PcpuExtError as error:  # the metrics file's
            sys.stderr.write('%s: %s\n' % (PROG, error))
            return common.COULD_NOT_RUN
        except Exception as error:
            # oslo.upgradecheck would print the whole traceback.
            return common.unexpected(PROG, error)
        worst = max(result.code for _name, result in results)
        if worst < upgradecheck.Code.FAILURE and any(
                not cell.answered for cell in cells):
            return CELL_DOWN
        return worst

    def _json(self, results, cells):
        """The results as oslo.upgradecheck's ``--json``, and the cells."""
        return {'name': self.display_title,
                'checks': [{'check': name, 'result': result.code,
                            'details': result.details}
                           for name, result in results],
                'cells': [{'cell': cell.name,
                           'state': 'up' if cell.answered else 'down',
                           'reason': cell.reason or None,
                           'seconds': round(cell.seconds, 3),
                           'hosts': cell.hosts, 'servers': cell.servers}
                          for cell in cells]}

    def _table(self, results):
        """The results as oslo.upgradecheck's table shows them."""
        table = prettytable.PrettyTable([self.display_title],
                                        hrules=prettytable.ALL, align='l')
        for name, result in results:
            table.add_row(['Check: %s\nResult: %s\nDetails: %s' % (
                name, upgradecheck.UPGRADE_CHECK_MSG_MAP[result.code],
                self._get_details(result))])
        return table

    @staticmethod
    def _read_servers_ahead():
        """Read Nova's databases while placement's inventories are read."""
        try:
            database = common.nova_database(CONF)
        except Exception:
            return  # the isolate checks report it
        if database is not None:
            database.read_candidates_ahead()

    def _service_check(self, check):
        # The clients, and a failure to use them, are shared by the checks:
        # a placement that timed out once is not waited for again. Any
        # other error is this check's alone.
        if self._failure is None:
            try:
                self._services = self._services or clients.connect(
                    CONF, read_only=True)
            except exception.PcpuExtError as error:
                self._failure = str(error)
        if self._failure is not None:
            return upgradecheck.Result(upgradecheck.Code.FAILURE,
                                       self._failure)
        try:
            return check(*self._services)
        except exception.ServiceError as error:
            self._failure = str(error)
            return upgradecheck.Result(upgradecheck.Code.FAILURE,
                                       self._failure)
        except exception.PcpuExtError as error:
            return upgradecheck.Result(upgradecheck.Code.FAILURE, str(error))

    def _assumption(self, mode):
        """:func:`assumption` of ``mode``, /proc read once a run."""
        if mode in ('drop', 'legacy_only') and self._activated is None:
            self._activated = activated_here()
        return assumption(mode, self._activated)

    def _nodes(self, placement):
        if self._compute_nodes is None:
            self._compute_nodes = cloud_hosts.compute_nodes(
                placement, self._progress)
        return self._compute_nodes

    def _scan(self, placement, compute_api):
        if self._isolate_scan is None:
            legacy_hosts = (self._nodes(placement).legacy if
                            scans_legacy_hosts(fallback_mode()) else ())
            self._isolate_scan = isolate_scan.isolate_servers(
                placement, compute_api, progress=self._progress,
                legacy_hosts=legacy_hosts, database=common.nova_database(CONF))
        return self._isolate_scan

    def _isolate_check(self, select, judge, covers=_on_hyperthreaded_hosts):
        """A check of the servers that forbid hyperthreads.

        ``judge(placement, servers)`` gives the result for the servers
        ``select`` keeps of those judged; servers on the hosts it
        ``covers`` (see :func:`_blind_spots`) that could not be judged make
        a success a warning.
        """
        def check(placement, compute_api):
            scan = self._scan(placement, compute_api)
            found = [f for f in scan.found if select(f) and not f.unsure]
            return _with_blind_spots(
                judge(placement, found) if found else
                upgradecheck.Result(upgradecheck.Code.SUCCESS), scan, covers)
        return self._service_check(check)

    def _check_config(self):
        problems = config_problems()
        if not problems:
            return upgradecheck.Result(upgradecheck.Code.SUCCESS)
        return upgradecheck.Result(
            max(CODES[severity] for severity, _message in problems),
            ' '.join(message for _severity, message in problems))

    def _check_bad_ratios(self):
        return self._service_check(lambda placement, _compute: _summary(
            ratio_audit.audit_inventories(
                placement, ratio_audit.fix_ratios(CONF),
                progress=self._progress),
            'Bad allocation ratios', 'Run %s placement audit for the list '
            'and placement audit --fix to repair them.' % MANAGE))

    def _check_ratio_changes(self):
        return self._service_check(lambda placement, _compute: _summary(
            ratio_audit.ratio_changes(placement, CONF, self._progress),
            'Allocation ratios the allocation_ratios rule of this nova.conf '
            'changes', 'A ratio set in nova.conf overrides the one placement '
            'holds, with or without the plugin: unset it on the computes '
            'whose ratio must stay.'))

    def _check_isolate_on_ht(self):
        result = self._isolate_check(
            lambda found: not found.legacy,
            lambda _placement, found: upgradecheck.Result(
                upgradecheck.Code.FAILURE, (
                    '%d servers that forbid hyperthreads run on '
                    'hyperthreaded hosts (bug 1889633): %s. With the '
                    'isolate_vcpu_fallback request filter active, run %s '
                    'heal isolate --dry-run, then without --dry-run.' % (
                        len(found), _server_list(found), MANAGE))))
        if self._isolate_scan is None:
            return result  # the scan failed: the result says why
        return _with_notes(result, _not_judged_here(self._isolate_scan))

    def _check_isolate_stuck(self):
        mode = fallback_mode()

        def judge(placement, found):
            cells = destinations.cells_nodes(placement, self._isolate_scan)
            with_room = sum(destinations.destination(
                placement, f, mode, destinations.in_cell(cells, f))
                is not None for f in found)
            without_ht = sum(not f.hyperthreaded for f in found)
            if without_ht:
                where = ('legacy hosts (no PCPU inventory: vcpu_pin_set, or '
                         'no dedicated CPUs), %d on hosts without '
                         'hyperthreads' % without_ht)
                isolated = (
                    'Nova pinned each on whole cores (on hyperthreaded '
                    'hosts one thread per core, the siblings reserved): '
                    'they are isolated, not bug 1889633, and %s heal '
                    'isolate moves those on hyperthreaded hosts only with '
                    '--include-legacy, the others never' % MANAGE)
            else:
                where = ('hyperthreaded hosts configured with vcpu_pin_set '
                         '(no PCPU inventory)')
                isolated = (
                    'Nova pinned each on one thread per core and reserved '
                    'the siblings: they are isolated, not bug 1889633, and '
                    '%s heal isolate moves them only with --include-legacy'
                    % MANAGE)
            reshaped = sum(f.reshaped for f in found)
            if reshaped:
                where += (', or pinned there before the host was converted '
                          'to cpu_dedicated_set (%d, holding PCPU since)' %
                          reshaped)
            if mode == WORKAROUND:
                rule = 'With [workarounds] disable_fallback_pcpu_query = True'
            else:
                rule = ('With the isolate_vcpu_fallback request filter in '
                        'drop mode')
            return upgradecheck.Result(upgradecheck.Code.WARNING, (
                '%d isolate servers run on %s: %s. %s. %s they can move '
                '(migrate, resize, evacuate, unshelve) only to enabled hosts '
                'without hyperthreads that report PCPU; %d of them each '
                'have room on one now, if moved alone.' % (
                    len(found), where, _server_list(found), isolated, rule,
                    with_room)))

        if mode in ('legacy_only', STOCK):
            # NOTE: the fallback query offers them every legacy host, as
            # in stock Nova.
            result = self._isolate_check(lambda found: False, judge)
        else:
            result = self._isolate_check(
                lambda found: found.legacy, judge,
                covers=lambda name, hyperthreaded: True)
        return _with_assumption(result, self._assumption(mode))

    def _check_legacy_hosts(self):
        mode = fallback_mode()

        def check(placement, compute_api):
            if mode in (None, STOCK):
                return upgradecheck.Result(upgradecheck.Code.SUCCESS)
            nodes = self._nodes(placement)
            lacking = (cloud_hosts.lacking_trait(placement, nodes.new_style,
                                                 pcpu_trait.TRAIT)
                       if mode == 'legacy_only' else [])
            hosts = {provider['name'] for provider in left_out(mode, nodes)}
            if not hosts:
                return judge_legacy_hosts(mode, nodes, [], lacking)
            scan = self._scan(placement, compute_api)
            servers = [found for found in scan.found if found.legacy and
                       not found.unsure and found.provider['name'] in hosts]
            return _with_blind_spots(
                judge_legacy_hosts(mode, nodes, servers, lacking), scan,
                lambda name, _hyperthreaded: name in hosts)
        return _with_assumption(self._service_check(check),
                                self._assumption(mode))

    _upgrade_checks = (
        ('Configuration', _check_config),
        ('Placement allocation ratios', _check_bad_ratios),
        ('Allocation ratios to be changed', _check_ratio_changes),
        ('Servers that forbid hyperthreads on hyperthreaded hosts',
         _check_isolate_on_ht),
        ('Servers that forbid hyperthreads and can hardly move',
         _check_isolate_stuck),
        ('Legacy hosts and the isolate fallback mode', _check_legacy_hosts),
    )


def main():
    CONF.register_cli_opts(clients.CLI_OPTS + CLI_OPTS)

    def command():
        # NOTE: upgradecheck.main() parses the command line without a
        # version; these are its steps, with --version and the exit codes.
        upgradecheck.register_cli_options(CONF, UpgradeChecks())
        common.parse_args(CONF, PROG, epilog=EXIT_CODES)
        return upgradecheck.run(CONF)
    return common.run(PROG, command)
