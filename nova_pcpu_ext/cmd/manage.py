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

"""``nova-pcpu-ext-manage``: repairs, each with a dry run.

::

    nova-pcpu-ext-manage [--config-file nova.conf]
        [--os-compute-endpoint-override URL] placement audit [--fix]
        [--dry-run] [--host HOST | --provider UUID] [--ratio RC=VALUE]
        [--format table|json]
    nova-pcpu-ext-manage [--config-file nova.conf]
        [--os-compute-endpoint-override URL] heal isolate [--dry-run]
        [--host HOST] [--max-count N] [--max-parallel N]
        [--timeout SECONDS] [--cold] [--continue-on-error]
        [--include-legacy] [--format table|json]

``placement audit`` exits 0 when nothing is left to fix, 1 when some
findings were left (found, not fixed). ``heal isolate`` exits, as ``nova-manage
placement heal_allocations`` does:

* 0: every server that forbids hyperthreads on a hyperthreaded host was
  moved off, or there was none;
* 1: ``--max-count`` (or ``--dry-run``) left servers to move, and nothing
  else is left: run it again;
* 3: some servers were skipped (locked, busy, unsure, no destination) or
  their move failed or still runs: running again does not help before
  they are looked at;
* 4: servers were not judged (a cell's database could not be read, or
  the Compute API showed them ``UNKNOWN``), and nothing else is left but
  servers for the next run.

Both exit 2 when the command could not run, 130 when interrupted (Ctrl-C;
``heal isolate`` prints every row first) and 255 on an unexpected error.
Servers isolated the legacy way, which ``heal isolate`` leaves alone unless
given ``--include-legacy``, are no items left.
"""

import argparse
import dataclasses
import json
import sys

import nova.conf
from oslo_config import cfg

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import clients
from nova_pcpu_ext import cloud_hosts
from nova_pcpu_ext.cmd import common
from nova_pcpu_ext import heal
from nova_pcpu_ext import isolate_scan
from nova_pcpu_ext import ratio_audit

CONF = nova.conf.CONF
PROG = 'nova-pcpu-ext-manage'
DONE = 0
ITEMS_LEFT = 1
#: ``heal isolate``'s exit codes besides DONE, each winning over the next.
SERVERS_LEFT = 3
CELL_NOT_READ = 4
MORE_TO_MOVE = ITEMS_LEFT
HEAL_EXIT_CODES = (
    'Exit codes: 0 nothing left to move; 1 --max-count or --dry-run left '
    'servers to move, and nothing else is left: run it again; 2 the '
    'command could not run; 3 servers were skipped, or their move failed or '
    'still runs: look at their rows; 4 servers were not judged (a cell\'s '
    'database could not be read, or the Compute API showed them UNKNOWN), '
    'and nothing else is left but servers to move; 130 interrupted; 255 '
    'an unexpected error.')


def _ratio_override(text):
    rc, _sep, value = text.partition('=')
    if rc not in ratio_audit.RULED:
        raise argparse.ArgumentTypeError(
            '%r: expected RESOURCE_CLASS=RATIO with one of %s' % (
                text, ', '.join(ratio_audit.RULED)))
    try:
        ratio = float(value)
    except ValueError:
        ratio = None
    if not allocation_ratios.is_usable(ratio):
        raise argparse.ArgumentTypeError(
            '%r: the ratio must be a positive finite number' % text)
    return rc, ratio


def _whole_number(low, high=None):
    """An argparse type: a whole number from ``low`` to ``high``."""
    def whole_number(text):
        if text.isdigit() and low <= int(text) <= (high or float('inf')):
            return int(text)
        raise argparse.ArgumentTypeError('%r: give a whole number of %s' % (
            text, '%d to %d' % (low, high) if high else '%d or more' % low))
    return whole_number


def _print(rows, args, headings, row):
    if args.format == 'json':
        print(json.dumps([{field.name: getattr(r, field.name)
                           for field in dataclasses.fields(r) if field.repr}
                          for r in rows], indent=2))
    elif rows:
        print(common.table(headings, [row(r) for r in rows]))
    else:
        print('Nothing found.')


def placement_audit(args):
    placement, compute = clients.connect(CONF)
    ratios = ratio_audit.fix_ratios(CONF, dict(args.ratio))
    targets = cloud_hosts.providers(placement, compute, args.compute_node,
                                    args.provider)
    findings = ratio_audit.audit_inventories(
        placement, ratios, fix=args.fix and not args.dry_run,
        targets=targets, progress=common.Progress(PROG))
    _print(findings, args,
           ['Severity', 'Resource provider', 'Problem', 'Action'],
           lambda f: [f.severity, '%s\n%s' % (f.provider_name,
                                              f.provider_uuid),
                      f.problem, ('FIXED: ' if f.fixed else '') + f.action])
    # A provider deleted during the run is noted, not left to fix.
    return ITEMS_LEFT if any(not f.fixed and f.severity != ratio_audit.NOTE
                             for f in findings) else DONE


def heal_isolate(args):
    placement, compute = clients.connect(CONF)
    scan = isolate_scan.isolate_servers(placement, compute,
                                        args.compute_node,
                                        common.Progress(PROG),
                                        database=common.nova_database(CONF))
    moves = heal.plan(scan, placement, args.cold,
                      mode=CONF.pcpu_ext.isolate_fallback_mode,
                      include_legacy=args.include_legacy)
    heal.limit(moves, args.max_count)
    interrupted = False
    if args.dry_run:
        for move in moves:
            if move.result == 'planned':
                move.result = 'dry run: would %s (room on %s)' % (
                    move.how, move.room)
    else:
        healer = heal.Healer(placement, compute, args.timeout,
                             args.max_parallel, args.continue_on_error,
                             lambda message: sys.stderr.write(
                                 '%s: %s\n' % (PROG, message)))
        healer.run(moves)
        interrupted = healer.interrupted
    cells = any(move.cell for move in moves)
    _print(moves, args,
           ['Server'] + ['Cell'] * cells + [
               'From host', 'Status', 'To host', 'Before', 'After', 'Result'],
           lambda m: [m.server] + [m.cell or ''] * cells + [
               m.from_host, m.status, m.to_host, m.before, m.after,
               m.result])
    if interrupted:
        return common.INTERRUPTED
    return heal_code(moves)


def heal_code(moves):
    """The exit code of ``heal isolate`` for its rows (see the module)."""
    left = [move for move in moves if move.wanted and not move.healed]
    if any(not (move.not_judged or move.for_next_run) for move in left):
        return SERVERS_LEFT
    if any(move.not_judged for move in left):
        return CELL_NOT_READ
    return MORE_TO_MOVE if left else DONE


def _add_format(parser):
    parser.add_argument('--format', choices=['table', 'json'],
                        default='table')


def _add_commands(subparsers):
    placement = subparsers.add_parser(
        'placement', help='Placement inventories.').add_subparsers(
            dest='action', required=True)
    audit_parser = placement.add_parser(
        'audit', help='Find, and with --fix repair, bad allocation ratios.')
    audit_parser.set_defaults(function=placement_audit)
    audit_parser.add_argument(
        '--fix', action='store_true',
        help='Set bad allocation ratios to the allocation_ratios rule of '
             'this nova.conf, or to --ratio.')
    audit_parser.add_argument(
        '--dry-run', action='store_true',
        help='Change nothing, even with --fix (the default without).')
    only = audit_parser.add_mutually_exclusive_group()
    # NOTE: not dest 'host', which is a nova.conf option already.
    only.add_argument('--host', dest='compute_node', metavar='HOST',
                      help='Only the resource providers of this compute '
                           'host or compute node.')
    only.add_argument('--provider', metavar='UUID',
                      help='Only this resource provider.')
    audit_parser.add_argument(
        '--ratio', action='append', type=_ratio_override, default=[],
        metavar='RC=VALUE',
        help='Ratio --fix writes for VCPU, MEMORY_MB or DISK_GB, instead of '
             'the rule; repeatable.')
    _add_format(audit_parser)

    heal_commands = subparsers.add_parser(
        'heal', help='Move servers that Nova bug 1889633 put on '
                     'hyperthreaded hosts.').add_subparsers(
            dest='action', required=True)
    isolate = heal_commands.add_parser(
        'isolate', help='Move servers that forbid hyperthreads off '
                        'hyperthreaded hosts.', epilog=HEAL_EXIT_CODES)
    isolate.set_defaults(function=heal_isolate)
    isolate.add_argument('--dry-run', action='store_true',
                         help='Print the plan; move nothing.')
    isolate.add_argument('--host', dest='compute_node', metavar='HOST',
                         help='Only servers of this compute host or '
                              'compute node.')
    isolate.add_argument(
        '--max-count', type=_whole_number(1), metavar='N',
        help='Move at most N servers this run, the first N of the plan; '
             'the others are listed as not attempted, left for the next '
             'run, and make the exit code 1 where nothing else is left '
             '(default: all).')
    isolate.add_argument(
        '--max-parallel', type=_whole_number(1, heal.MAX_PARALLEL),
        default=1, metavar='N',
        help='Moves at a time, 1 to %d (default 1).' % heal.MAX_PARALLEL)
    isolate.add_argument(
        '--timeout', type=_whole_number(1), default=heal.DEFAULT_TIMEOUT,
        metavar='SECONDS',
        help='Seconds a move may take; one still running then is reported '
             'as running and the run goes on (default %d).' %
             heal.DEFAULT_TIMEOUT)
    isolate.add_argument('--cold', action='store_true',
                         help='Cold-migrate and confirm ACTIVE servers too, '
                              'instead of live migration (SHUTOFF servers '
                              'are always cold-migrated, PAUSED ones live).')
    isolate.add_argument('--continue-on-error', action='store_true',
                         help='Go on after a move failed (default: start '
                              'no more).')
    isolate.add_argument(
        '--include-legacy', action='store_true',
        help='Also move isolate servers of hyperthreaded hosts without PCPU '
             'inventory (vcpu_pin_set), for example to retire those hosts. '
             'Nova pins such a server on one thread per core and reserves '
             'the siblings, so it is isolated and not the bug\'s: by '
             'default each is listed as skipped and left where it is.')
    _add_format(isolate)


def main():
    CONF.register_cli_opts(clients.CLI_OPTS)
    CONF.register_cli_opt(cfg.SubCommandOpt('category',
                                            handler=_add_commands))

    def command():
        common.parse_args(CONF, PROG, epilog=(
            'placement audit exits 0 when nothing is left to fix, 1 when '
            'findings were left. heal isolate: ' + HEAL_EXIT_CODES))
        return CONF.category.function(CONF.category)
    return common.run(PROG, command)
