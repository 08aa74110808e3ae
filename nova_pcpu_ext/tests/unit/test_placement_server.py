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

"""The test placement server's gunicorn options, by what gunicorn knows."""

import subprocess
import sys

import fixtures

from nova_pcpu_ext.tests import placement_server
from nova_pcpu_ext.tests.unit import base

WITH_CONTROL_SOCKET = """usage: gunicorn [OPTIONS] [APP_MODULE]
  --control-socket PATH
                        Unix socket path for control interface.
  --no-control-socket   Disable control socket. [False]
"""
WITHOUT = """usage: gunicorn [OPTIONS] [APP_MODULE]
  --workers INT         The number of worker processes. [1]
"""


class GunicornOptionsTest(base.TestCase):

    def options(self, usage):
        placement_server._gunicorn_options.cache_clear()
        self.addCleanup(placement_server._gunicorn_options.cache_clear)
        self.useFixture(fixtures.MockPatch(
            'subprocess.run', return_value=subprocess.CompletedProcess(
                [], 0, stdout=usage)))
        return placement_server._gunicorn_options()

    def test_no_control_socket_where_gunicorn_has_one(self):
        self.assertEqual(['--no-control-socket'],
                         self.options(WITH_CONTROL_SOCKET))

    def test_nothing_gunicorn_does_not_know(self):
        self.assertEqual([], self.options(WITHOUT))

    def test_the_installed_gunicorn_takes_them(self):
        # Its own --help, and an option it does not know exits 2 there.
        placement_server._gunicorn_options.cache_clear()
        self.addCleanup(placement_server._gunicorn_options.cache_clear)
        options = placement_server._gunicorn_options()
        result = subprocess.run(
            [sys.executable, '-m', 'gunicorn', *options,
             '--check-config', 'nova_pcpu_ext.tests:__name__'],
            capture_output=True, text=True, stdin=subprocess.DEVNULL)
        self.assertNotIn('unrecognized arguments', result.stderr)
