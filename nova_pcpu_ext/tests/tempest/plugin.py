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

import os

from tempest import config
from tempest.test_discover import plugins

from nova_pcpu_ext.tests.tempest import config as pcpu_config


class NovaPcpuExtTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        test_dir = os.path.dirname(os.path.abspath(__file__))
        # The directory holding the nova_pcpu_ext package.
        top_dir = os.path.dirname(os.path.dirname(os.path.dirname(test_dir)))
        return test_dir, top_dir

    def register_opts(self, conf):
        config.register_opt_group(conf, config.service_available_group,
                                  [pcpu_config.service_option])
        config.register_opt_group(conf, pcpu_config.group, pcpu_config.opts)

    def get_opt_lists(self):
        return [
            (pcpu_config.group.name, pcpu_config.opts),
            ('service_available', [pcpu_config.service_option]),
        ]
