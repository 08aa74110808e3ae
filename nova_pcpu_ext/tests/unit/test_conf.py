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

from nova_pcpu_ext import conf
from nova_pcpu_ext.tests.unit import base


class OptionsTest(base.TestCase):

    def test_every_option_says_when_it_takes_effect(self):
        for opt in conf.ALL_OPTS:
            self.assertFalse(opt.mutable, opt.name)
            if opt.deprecated_for_removal:
                self.assertTrue(opt.help.strip().startswith(
                    'Has no effect.'), opt.name)
                continue
            self.assertIn(
                'takes effect at the next run of a command'
                if opt in conf.database_opts else
                'takes effect when the service restarts',
                ' '.join(opt.help.split()), opt.name)
