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

"""Tables the compatibility page takes from the code, so they cannot drift.

``.. nova-symbols::`` lists every Nova symbol the plugins check before they
hook Nova, from the plugins' own symbol lists; ``.. intended-differences::``
lists the Nova functional tests that fail by design, from the file
``tox -e nova-suites`` enforces.
"""

import collections
from importlib import metadata

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList

from nova_pcpu_ext import compute
from nova_pcpu_ext import plugins
from nova_pcpu_ext import scheduler
from nova_pcpu_ext.tests import nova_suites


def _literal(text):
    return '``%s``' % text


def _symbol_checks():
    """``{symbol: {what is checked}}`` and ``{symbol: {who uses it}}``."""
    checks = collections.defaultdict(set)
    users = collections.defaultdict(set)

    def add(symbols, user):
        for symbol, params in symbols:
            # A literal: a keyword-only marker (*) is no emphasis.
            checks[symbol].add('parameters start %s' % _literal(
                '(%s)' % ', '.join(params)) if params else 'exists')
            users[symbol].add(user)

    add(scheduler.NOVA_SYMBOLS, 'scheduler activation')
    for symbol, names in scheduler.NOVA_SOURCE_USES:
        checks[symbol].add('source uses %s' % ', '.join(names))
        users[symbol].add('scheduler activation')
    checks[scheduler.SELECT_DESTINATIONS].add(
        'source calls %s through its module and reads %s, unless nothing '
        'in %s reads %s' % (
            scheduler.RESOURCES_FROM_REQUEST_SPEC,
            ', '.join(scheduler.FALLBACK_USES), scheduler.MANAGER,
            scheduler.FALLBACK_USES[0]))
    checks['[%s] %s' % scheduler.NOVA_OPTION].add('registered')
    users['[%s] %s' % scheduler.NOVA_OPTION].add('scheduler activation')
    add(compute.NOVA_SYMBOLS, 'compute activation')
    for namespace in (plugins.REQUEST_FILTERS, plugins.RESOURCE_TRACKER,
                      plugins.REPORT_CLIENT):
        for entry_point in metadata.entry_points(group=namespace):
            plugin = entry_point.load()
            add(plugin.nova_symbols, entry_point.name)
            for symbol in plugin.method_wrappers:
                users[symbol].discard(entry_point.name)
                users[symbol].add('%s (wrapped in place)' % entry_point.name)
    return checks, users


class _TableDirective(Directive):
    header = ()
    widths = ()

    def rows(self):
        raise NotImplementedError()

    def run(self):
        lines = ['.. list-table::', '   :header-rows: 1',
                 '   :widths: %s' % ' '.join(map(str, self.widths)), '']
        for row in [self.header] + list(self.rows()):
            for index, cell in enumerate(row):
                bullet = '*' if index == 0 else ' '
                lines.append('   %s - %s' % (bullet, cell))
        container = nodes.container()
        self.state.nested_parse(StringList(lines), self.content_offset,
                                container)
        return container.children


class NovaSymbols(_TableDirective):
    header = ('Nova symbol', 'Checked at start', 'Used by')
    widths = (40, 30, 30)

    def rows(self):
        checks, users = _symbol_checks()
        for symbol in sorted(checks):
            yield (_literal(symbol), '; '.join(sorted(checks[symbol])),
                   ', '.join(sorted(users[symbol])))


class IntendedDifferences(_TableDirective):
    header = ('Nova test', 'Plugin', 'Why it fails by design')
    widths = (40, 15, 45)

    def rows(self):
        differences = nova_suites.intended_differences()
        for test_id in sorted(differences):
            difference = differences[test_id]
            yield (_literal(test_id.replace('nova.tests.functional.', '')),
                   difference['plugin'], difference['reason'])


def setup(app):
    app.add_directive('nova-symbols', NovaSymbols)
    app.add_directive('intended-differences', IntendedDifferences)
    return {'parallel_read_safe': True}
