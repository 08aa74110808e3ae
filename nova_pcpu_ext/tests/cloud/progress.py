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

"""How far a run of the cloud got, a line at a time on stdout."""

import threading
import time

#: The journey and tempest run in threads of their own: one line at a time.
_PRINTING = threading.Lock()


def line(message):
    """Print ``message`` at once, after the time of day.

    A run cut short (CI's time limit, Ctrl-C) still shows where it was.
    """
    with _PRINTING:
        print('%s cloud: %s' % (time.strftime('%H:%M:%S'), message),
              flush=True)
