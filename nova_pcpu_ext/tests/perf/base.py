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

import nova.conf
from nova import test

from nova_pcpu_ext.tests import placement_server

CONF = nova.conf.CONF


class BenchCase(test.TestCase):
    """One benchmark run; the runner sets the size and ``results``."""

    #: Placement database URL; None for a fresh sqlite file.
    db_url = None
    #: ``{(scenario, n): {variant: figures}}``, shared with the runner.
    results = None

    def setUp(self):
        super().setUp()
        self.placement_server = self.useFixture(
            placement_server.PlacementServer(db_url=self.db_url))
        self.placement_server.configure_nova(CONF)
