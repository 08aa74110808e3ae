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

"""What every benchmark case shares.

Nova's test environment (databases, configuration), with Nova's report
client pointed at a real placement server.
"""

import nova.tests.functional  # noqa: F401  isort:skip

import sys
import unittest
import uuid

import nova.conf
from nova import context as nova_context
from nova import test

from nova_pcpu_ext.tests import placement_server

CONF = nova.conf.CONF


class BenchCase(test.TestCase):
    """One benchmark run; the runner sets the size and ``results``."""

    #: Gives each run a new placement database (``database(name)``
    #: returns its URL); None: a fresh sqlite file.
    database_server = None
    #: Shared with the runner: ``{(scenario, n, limit): figures}``.
    results = None

    def setUp(self):
        super().setUp()
        db_url = None
        if self.database_server is not None:
            db_url = self.database_server.database(
                'placement_%s' % uuid.uuid4().hex[:8])
        self.placement_server = self.useFixture(
            placement_server.PlacementServer(db_url=db_url))
        self.placement_server.configure_nova(CONF)

    def cell_context(self):
        """An admin context aimed at the cell the computes are in."""
        ctxt = nova_context.get_admin_context()
        nova_context.set_target_cell(ctxt, self.cell_mappings['cell1'])
        return ctxt


def run(case_class, **attributes):
    """Run the one test of ``case_class`` with these class attributes.

    Prints what failed; returns whether it passed.
    """
    test_name = unittest.TestLoader().getTestCaseNames(case_class)[0]
    case = type(case_class.__name__, (case_class,), attributes)(test_name)
    result = unittest.TestResult()
    case.run(result)
    for _test, trace in result.errors + result.failures:
        print(trace, file=sys.stderr)
    return result.wasSuccessful()
