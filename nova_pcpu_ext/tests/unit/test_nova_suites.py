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

"""nova-suites' verdict on a Nova test that fails by design."""

import testtools

from nova_pcpu_ext.tests import nova_suites


class _NovaTest(testtools.TestCase):
    """Stands for a Nova test; its methods are not collected."""

    def ratio(self):
        self.assertEqual(10.0, 4.0)

    def passes(self):
        pass

    def errors(self):
        raise KeyError('VCPU')


class ExpectFailureTest(testtools.TestCase):

    def outcome(self, name, failure):
        test = _NovaTest(name)
        nova_suites.expect_failure(test, 'the ratio rule', failure)
        result = testtools.TestResult()
        test.run(result)
        return result

    def test_failing_for_the_reason_given_passes(self):
        result = self.outcome('ratio', r'10\.0 != 4\.0')
        self.assertTrue(result.wasSuccessful())
        self.assertEqual(1, len(result.expectedFailures))

    def test_failing_for_another_reason_fails_the_run(self):
        result = self.outcome('ratio', r'Items in expected')
        self.assertFalse(result.wasSuccessful())
        [(_, traceback)] = result.errors
        self.assertIn('not for the reason intended-differences.yaml gives',
                      traceback)

    def test_a_pass_or_an_error_fails_the_run(self):
        self.assertFalse(self.outcome('passes', '').wasSuccessful())
        self.assertFalse(self.outcome('errors', 'VCPU').wasSuccessful())


class IntendedDifferencesTest(testtools.TestCase):

    def test_each_names_its_plugin_reason_and_failure(self):
        for test_id, difference in nova_suites.intended_differences().items():
            self.assertEqual({'plugin', 'reason', 'failure'},
                             set(difference), test_id)
