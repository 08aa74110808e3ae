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

"""Fakes the unit tests of the operator commands' judging share."""

import copy


class FakePlacement(object):
    """Placement's state for one provider; conflicts on the first writes."""

    def __init__(self, inventories, conflicts=0):
        self.generation = 1
        self.stored = inventories
        self.conflicts = conflicts
        self.writes = []

    def providers(self, **query):
        return [{'uuid': 'rp-uuid', 'name': 'compute1'}]

    def inventories(self, uuid):
        return self.generation, copy.deepcopy(self.stored)

    def replace_inventories(self, uuid, generation, inventories):
        self.writes.append(inventories)
        if self.conflicts:
            # Another writer got there first and repaired VCPU.
            self.conflicts -= 1
            self.generation += 1
            self.stored['VCPU']['allocation_ratio'] = 8.0
            return False
        self.generation, self.stored = generation + 1, inventories
        return True
