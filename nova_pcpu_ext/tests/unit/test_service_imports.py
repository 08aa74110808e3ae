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

"""What a service or command imports never includes the test package.

The wheel carries ``nova_pcpu_ext.tests``, as Nova's carries
``nova.tests``; some of it changes Nova (``late_check`` strips Nova's
late NUMA check), so no module an entry point names may import it.
"""

import json
import subprocess
import sys

from nova_pcpu_ext.tests.unit import base

#: Imports every module the package's entry points name, except the
#: tempest plugin (a test package itself), and prints what of
#: ``nova_pcpu_ext.tests`` got imported.
SCRIPT = '''
import importlib, importlib.metadata, json, sys
modules = sorted({
    entry.value.split(':')[0] for entry in
    importlib.metadata.distribution('nova-pcpu-ext').entry_points
    if entry.group != 'tempest.test_plugins'})
for module in modules:
    importlib.import_module(module)
print(json.dumps([modules, sorted(
    name for name in sys.modules if name.startswith('nova_pcpu_ext.tests'))]))
'''


class ServiceImportsTest(base.TestCase):

    def test_no_test_code_imported(self):
        result = subprocess.run([sys.executable, '-c', SCRIPT],
                                capture_output=True, text=True, check=True)
        modules, test_modules = json.loads(result.stdout.splitlines()[-1])
        self.assertIn('nova_pcpu_ext.cmd.compute', modules)
        self.assertIn('nova_pcpu_ext.serialized_client', modules)
        self.assertEqual([], test_modules)
