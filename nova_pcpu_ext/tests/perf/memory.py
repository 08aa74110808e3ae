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

"""nova-compute's resident memory with N provider trees, one variant.

    python -m nova_pcpu_ext.tests.perf.memory stock|extension TREES

Each variant runs in a process of its own, so the resident set measured
is its own. The compute of provider_updates reports N nodes to a real
placement server, one tree per node, as an ironic compute does. Prints
one JSON line: resident KiB before the trees, with them, and the number
of tree locks left once the trees have left the cache.
"""

import nova.tests.functional  # noqa: F401  isort:skip

import gc
import json
import os
import sys

from nova_pcpu_ext.tests.cloud import processes
from nova_pcpu_ext.tests.perf import base
from nova_pcpu_ext.tests.perf import provider_updates


def rss_kib():
    return processes.rss_kib(os.getpid())


class MemoryBench(base.BenchCase):

    variant = 'stock'
    trees = 1000

    def test_memory(self):
        compute = provider_updates.Compute(
            self.variant, self.cell_context(), self.trees)
        gc.collect()
        before = rss_kib()
        for node in compute.nodes:
            compute.update_node(node)
        gc.collect()
        result = {'variant': self.variant, 'trees': self.trees,
                  'failed': sum(compute.failures.values()),
                  'rss_kib_before': before, 'rss_kib': rss_kib()}
        locks = getattr(compute.client, 'provider_locks', None)
        if locks is not None:
            compute.client.clear_provider_cache()
            gc.collect()
            result['locks_left'] = len(locks._locks)
        self.results['memory'] = result


def main(argv):
    results = {}
    ok = base.run(MemoryBench, variant=argv[0], trees=int(argv[1]),
                  results=results)
    if ok:
        print(json.dumps(results['memory']))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
