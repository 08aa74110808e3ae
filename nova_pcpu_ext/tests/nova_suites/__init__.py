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

"""Nova's own functional suites, run with every plugin active."""

import functools
import os
import re

import yaml

DIFFERENCES = os.path.join(os.path.dirname(__file__),
                           'intended-differences.yaml')


def intended_differences():
    """The tests that fail with the plugins active, by design.

    :returns: ``{test id: {'plugin': name, 'reason': text, 'failure':
        pattern}}``; ``failure`` is a regular expression the assertion
        message must match.
    """
    with open(DIFFERENCES) as differences:
        return yaml.safe_load(differences) or {}


def expect_failure(test, reason, failure):
    """Make ``test`` pass only by failing for the reason given.

    That is an assertion whose message matches ``failure``; a pass, an
    error or another failure fails it.
    """
    method = getattr(test, test._testMethodName)

    def for_the_reason():
        try:
            method()
        except test.failureException as error:
            if not re.search(failure, str(error), re.DOTALL):
                raise RuntimeError(
                    'failed, but not for the reason intended-differences'
                    '.yaml gives (its failure pattern %r does not match '
                    'this message): %s' % (failure, error)) from error
            raise

    @functools.wraps(method)
    def expected_to_fail():
        test.expectFailure(reason, for_the_reason)

    setattr(test, test._testMethodName, expected_to_fail)
