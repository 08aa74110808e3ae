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

"""Give a fresh clone's stestr repository the tests' times.

stestr shares the tests among its workers by the times its repository
holds, round robin where it holds none: on a fresh clone, py313's three
functional workers ended 938, 985 and 1,173 seconds into the run.

``seed_test_times.py [FILE]`` loads the times of FILE into a new
repository in the working directory. ``tools/test-times.txt``, the
default, holds those of a py313 run's functional tests and Nova's suites
(``TEST_ID SECONDS`` a line, as ``stestr slowest --all | awk 'NR > 2
{print $1, $2}'`` prints them for the last run). An existing repository
keeps its own, newer times; a test missing from the file is shared out
as stestr does without times.
"""

import datetime
import io
import os
import subprocess
import sys

import subunit

TIMES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     'test-times.txt')


def stream(lines):
    """A subunit v2 stream of each test passing in its time."""
    out = io.BytesIO()
    result = subunit.StreamResultToBytes(out)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    for line in lines:
        test_id, seconds = line.split()
        result.status(test_id=test_id, test_status='inprogress',
                      timestamp=start)
        result.status(test_id=test_id, test_status='success',
                      timestamp=start + datetime.timedelta(
                          seconds=float(seconds)))
    return out.getvalue()


def main(path=TIMES):
    if os.path.exists('.stestr'):
        return
    with open(path) as times:
        data = stream(line for line in times if line.strip())
    subprocess.run([sys.executable, '-m', 'stestr', 'load', '--force-init'],
                   input=data, stdout=subprocess.DEVNULL, check=True)


if __name__ == '__main__':
    main(*sys.argv[1:])
