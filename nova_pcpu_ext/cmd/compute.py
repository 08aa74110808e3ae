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

"""``nova-pcpu-ext-compute``: nova-compute with the compute plugins."""

# NOTE: first, so that Nova's concurrency set-up precedes every other import.
from nova.cmd import compute as nova_compute  # noqa: I100  isort:skip

from nova_pcpu_ext import activation
from nova_pcpu_ext import compute


def main():
    activation.run_nova_service(nova_compute, compute.activate_plugins)
