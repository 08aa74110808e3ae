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

"""Shared pieces of the unit tests: mocks belong here, not in functional."""

from importlib import metadata
import logging

import fixtures
from oslo_config import fixture as config_fixture
from oslotest import base
import stevedore

from nova_pcpu_ext import activation
from nova_pcpu_ext import conf


class TestCase(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(conf.CONF))
        self.logger = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.addCleanup(activation.deactivate)

    def flags(self, group='pcpu_ext', **kwargs):
        self.conf.config(group=group, **kwargs)


class EntryPoints(fixtures.Fixture):
    """Makes ``namespace`` hold exactly the given ``{name: target}``."""

    def __init__(self, namespace, targets):
        self.entry_points = [metadata.EntryPoint(name, target, namespace)
                             for name, target in targets.items()]
        self.namespace = namespace

    def _setUp(self):
        def select(group=None, **kwargs):
            return list(self.entry_points) if group == self.namespace else []

        self.useFixture(fixtures.MockPatch(
            'nova_pcpu_ext.plugins.metadata.entry_points', side_effect=select))
        self.useFixture(fixtures.MockPatchObject(
            stevedore.ExtensionManager, 'ENTRY_POINT_CACHE',
            {self.namespace: self.entry_points}))
