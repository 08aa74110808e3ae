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

"""Nova's own functional suites with every plugin active (tox -e nova-suites).

The modules below exercise what the plugins touch. Every plugin is
activated before they are imported, so Nova's services and Nova's test
classes use the extended classes. The tests listed in
``intended-differences.yaml`` must fail, each with an assertion message
matching the failure pattern given there: a listed test that passes, errors
or fails otherwise fails the run, so the list stays true.
"""

# Nova's functional package applies Nova's concurrency setup on import.
import nova.tests.functional  # noqa: F401  isort:skip

import unittest

from nova_pcpu_ext import compute
from nova_pcpu_ext import scheduler
from nova_pcpu_ext.tests import nova_suites

MODULES = (
    'nova.tests.functional.test_report_client',
    'nova.tests.functional.test_servers_provider_tree',
    'nova.tests.functional.compute.test_resource_tracker',
    'nova.tests.functional.libvirt.test_numa_servers',
    'nova.tests.functional.libvirt.test_report_cpu_traits',
    'nova.tests.functional.libvirt.test_reshape',
    'nova.tests.functional.test_service',
    # Regressions of the resource tracker and provider tree paths.
    'nova.tests.functional.regressions.test_bug_1837955',
    'nova.tests.functional.regressions.test_bug_1839560',
    'nova.tests.functional.regressions.test_bug_1853009',
    'nova.tests.functional.regressions.test_bug_1995153',
)


def _tests(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _tests(test)
        else:
            yield test


def load_tests(loader, standard_tests, pattern):
    compute.activate_plugins()
    scheduler.activate_plugins()
    differences = nova_suites.intended_differences()
    suite = unittest.TestSuite()
    found = set()
    for module in MODULES:
        for test in _tests(loader.loadTestsFromName(module)):
            if test.id() in differences:
                found.add(test.id())
                difference = differences[test.id()]
                nova_suites.expect_failure(test, difference['reason'],
                                           difference['failure'])
            suite.addTest(test)
    missing = set(differences) - found
    if missing:
        raise LookupError('intended-differences.yaml names tests that do '
                          'not exist: %s' % ', '.join(sorted(missing)))
    return suite
