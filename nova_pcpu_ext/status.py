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

"""``nova-pcpu-ext-status``: upgrade checks and the placement audit.

::

    nova-pcpu-ext-status [--config-file nova.conf] upgrade check [--json]
    nova-pcpu-ext-status [--config-file nova.conf] audit
        [--format table|json] [--fix] [--dry-run] [--ratio RC=VALUE]

Both exit 0 when everything passes, 1 on warnings and 2 on failures or
when a service cannot be used. Credentials come from nova.conf's
``[placement]`` section, or from keystoneauth's ``--os-*`` options and
``OS_*`` environment variables when an auth type is given there.
"""

import argparse
import dataclasses
import json
import logging
import os
import sys

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
import nova.conf
from oslo_config import cfg
from oslo_upgradecheck import upgradecheck
import prettytable

from nova_pcpu_ext import allocation_ratios
from nova_pcpu_ext import audit
from nova_pcpu_ext import compute
from nova_pcpu_ext import exception
from nova_pcpu_ext import scheduler

CONF = nova.conf.CONF
PROG = 'nova-pcpu-ext-status'
ACTIVATE_SCHEDULER = 'nova_pcpu_ext.scheduler.activate'
#: Seconds per request unless --timeout or [placement] timeout say.
DEFAULT_TIMEOUT = 30.0

#: The services the command talks to, as named in its options.
SERVICES = ('placement', 'compute')

CODES = {audit.WARNING: upgradecheck.Code.WARNING,
         audit.FAILURE: upgradecheck.Code.FAILURE}


def _ratio_override(text):
    rc, _sep, value = text.partition('=')
    if rc not in audit.RULED:
        raise argparse.ArgumentTypeError(
            '%r: expected RESOURCE_CLASS=RATIO with one of %s' % (
                text, ', '.join(audit.RULED)))
    try:
        ratio = float(value)
    except ValueError:
        ratio = None
    if not allocation_ratios.is_usable(ratio):
        raise argparse.ArgumentTypeError(
            '%r: the ratio must be a positive finite number' % text)
    return rc, ratio


def _add_service_arguments(parser, argv):
    """keystoneauth's standard options, and endpoints per service.

    Session and region options exist only with an auth type on the command
    line or in ``OS_AUTH_TYPE``; otherwise ``[placement]`` in nova.conf
    says all of that, and giving them is a usage error rather than ignored.
    """
    if ks_loading.register_auth_argparse_arguments(parser, argv):
        ks_loading.register_session_argparse_arguments(parser)
        # keystoneauth's default is 600 s; DEFAULT_TIMEOUT applies instead.
        parser.set_defaults(timeout=None)
        parser.add_argument('--os-region-name', metavar='<name>',
                            default=os.environ.get('OS_REGION_NAME'),
                            help='Region of the cloud to use.')
    for service in SERVICES:
        env = 'OS_%s_' % service.upper()
        parser.add_argument(
            '--os-%s-endpoint-override' % service, metavar='<url>',
            default=os.environ.get(env + 'ENDPOINT_OVERRIDE'),
            help='URL of the %s API instead of the catalog\'s.' % service)
        parser.add_argument(
            '--os-%s-interface' % service, metavar='<name>',
            default=os.environ.get(env + 'INTERFACE'),
            help='Catalog interface of the %s API.' % service)


def _command_parsers(argv):
    def add_parsers(subparsers):
        upgrade = subparsers.add_parser(
            'upgrade', help='Run every check, as nova-status does.')
        upgrade.add_argument('check', choices=['check'])
        upgrade.add_argument('--json', action='store_true',
                             help='Print the results as JSON.')
        _add_service_arguments(upgrade, argv)

        audit_parser = subparsers.add_parser(
            'audit', help='List damage in placement; repair ratios.')
        audit_parser.add_argument('--format', choices=['table', 'json'],
                                  default='table')
        audit_parser.add_argument(
            '--fix', action='store_true',
            help='Set bad allocation ratios to the allocation_ratios rule '
                 'of this nova.conf, or to --ratio.')
        audit_parser.add_argument(
            '--dry-run', action='store_true',
            help='Change nothing, even with --fix (the default without).')
        audit_parser.add_argument(
            '--ratio', action='append', type=_ratio_override, default=[],
            metavar='RC=VALUE',
            help='Ratio --fix writes for VCPU, MEMORY_MB or DISK_GB, '
                 'instead of the rule; repeatable.')
        _add_service_arguments(audit_parser, argv)
    return add_parsers


def _services(args):
    """The placement and Compute API clients, from --os-* or nova.conf."""
    try:
        if args.os_auth_type:
            auth = ks_loading.load_auth_from_argparse_arguments(args)
            session = ks_loading.load_session_from_argparse_arguments(
                args, auth=auth)
            placement = ks_adapter.Adapter(
                session, auth=auth, service_type='placement',
                region_name=args.os_region_name)
        else:
            auth = ks_loading.load_auth_from_conf_options(CONF, 'placement')
            session = ks_loading.load_session_from_conf_options(
                CONF, 'placement', auth=auth)
            placement = ks_loading.load_adapter_from_conf_options(
                CONF, 'placement', session=session, auth=auth)
    except (ks_exc.ClientException, OSError, TypeError) as error:
        # TypeError: keystoneauth's word for a bad [placement]
        # valid_interfaces; OSError: an unreadable certificate file.
        raise exception.InvalidConfig(
            '[placement] or --os-* options: %s' % error)
    if auth is None:
        raise exception.InvalidConfig(
            'no credentials: set auth_type and its options in [placement] '
            'of nova.conf, or give --os-auth-type (or OS_AUTH_TYPE) and '
            'its options')
    if session.timeout is None:
        session.timeout = DEFAULT_TIMEOUT
    try:
        # Once, up front: a failure here is the identity service's.
        session.get_token(auth)
    except ks_exc.ClientException as error:
        raise exception.ServiceError(
            'identity: cannot authenticate: %s. Check the credentials and '
            'the identity service they name.' % audit.reason(error))
    compute_api = ks_adapter.Adapter(
        session, auth=auth, service_type='compute',
        region_name=placement.region_name, interface=placement.interface)
    adapters = {'placement': placement, 'compute': compute_api}
    for service, adapter in adapters.items():
        for setting in ('interface', 'endpoint_override'):
            value = getattr(args, 'os_%s_%s' % (service, setting))
            if value:
                setattr(adapter, setting, value)
    return audit.Placement(placement), audit.Compute(compute_api)


def config_problem():
    """The worst problem of nova.conf and the installed Nova, or None."""
    try:
        allocation_ratios.validate_ratio_options(CONF)
        request_filters = scheduler.check_plugins()
        compute.check_plugins()
    except exception.PcpuExtError as error:
        return audit.FAILURE, str(error)
    if (request_filters and ACTIVATE_SCHEDULER not in
            CONF.filter_scheduler.available_filters):
        return (audit.WARNING,
                '[pcpu_ext] request_filters are set but [filter_scheduler] '
                'available_filters lacks %s: add it on scheduler hosts, or '
                'the request filters never run.' % ACTIVATE_SCHEDULER)
    return None


def _worst(findings):
    return max([CODES[f.severity] for f in findings],
               default=upgradecheck.Code.SUCCESS)


def _summary(findings, what, advice):
    """One check's result: how many findings, the worst one, what to run."""
    if not findings:
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)
    worst = max(findings, key=lambda f: CODES[f.severity])
    return upgradecheck.Result(CODES[worst.severity], (
        '%s: %d found, the worst on %s (%s): %s. Run %s %s.' % (
            what, len(findings), worst.provider_name,
            worst.consumer or worst.provider_uuid, worst.problem, PROG,
            advice)))


class UpgradeChecks(upgradecheck.UpgradeCommands):
    """The checks of ``upgrade check``.

    A placement or Compute API failure is the failed result of the check
    that met it, so the other results and ``--json`` output stay whole.
    """

    display_title = 'nova-pcpu-ext upgrade check results'

    def __init__(self, args):
        super().__init__()
        self._args = args
        self._services = None
        self._failure = None

    def _placement_check(self, find, what, advice):
        # The clients, and a failure to use them, are shared by the checks:
        # a placement that timed out once is not waited for again.
        if self._failure is None:
            try:
                self._services = self._services or _services(self._args)
                return _summary(find(*self._services), what, advice)
            except exception.PcpuExtError as error:
                self._failure = str(error)
        return upgradecheck.Result(upgradecheck.Code.FAILURE, self._failure)

    def _check_config(self):
        problem = config_problem()
        if problem is None:
            return upgradecheck.Result(upgradecheck.Code.SUCCESS)
        severity, message = problem
        return upgradecheck.Result(CODES[severity], message)

    def _check_inventories(self):
        return self._placement_check(
            lambda placement, _compute: audit.audit_inventories(
                placement, audit.fix_ratios(CONF)),
            'Bad allocation ratios', 'audit for the list and audit --fix '
            'to repair them')

    def _check_allocations(self):
        return self._placement_check(
            audit.audit_allocations,
            'Servers with dedicated CPUs consuming VCPU on hyperthreaded '
            'hosts', 'audit for the list and the migration commands')

    _upgrade_checks = (
        ('Configuration', _check_config),
        ('Placement allocation ratios', _check_inventories),
        ('Placement allocations of dedicated CPUs', _check_allocations),
    )


def _upgrade_check(args):
    return UpgradeChecks(args).check()


def _audit(args):
    placement, compute_api = _services(args)
    ratios = audit.fix_ratios(CONF, dict(args.ratio))
    findings = (audit.audit_inventories(placement, ratios,
                                        fix=args.fix and not args.dry_run) +
                audit.audit_allocations(placement, compute_api))
    if args.format == 'json':
        print(json.dumps([dataclasses.asdict(finding) for finding in findings],
                         indent=2))
    elif findings:
        print(_table(findings))
    else:
        print('No findings.')
    return _worst([f for f in findings if not f.fixed])


def _table(findings):
    table = prettytable.PrettyTable(
        ['Severity', 'Resource provider', 'Consumer', 'Problem', 'Action'],
        hrules=prettytable.ALL, max_width=40, align='l')
    for f in findings:
        table.add_row([f.severity, '%s\n%s' % (f.provider_name,
                                               f.provider_uuid),
                       f.consumer, f.problem,
                       ('FIXED: ' if f.fixed else '') + f.action])
    return table


COMMANDS = {'upgrade': _upgrade_check, 'audit': _audit}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    CONF.register_cli_opt(cfg.SubCommandOpt(
        'command', handler=_command_parsers(argv)))
    # Libraries' warnings (keystoneauth retrying discovery, for one) would
    # break the one-line errors; failures are reported by this command.
    logging.basicConfig(level=logging.ERROR, format='%(name)s: %(message)s')
    try:
        CONF(argv, project='nova', prog=PROG)
        # UpgradeCommands.check() finds --json through this module global.
        upgradecheck.CONF = CONF
        return COMMANDS[CONF.command.name](CONF.command)
    except (exception.PcpuExtError, cfg.Error,
            ks_exc.ClientException) as error:
        sys.stderr.write('%s: %s\n' % (PROG, error))
        return upgradecheck.Code.FAILURE
