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

"""A WSGI application named by ``CLOUD_WSGI_APP`` (``module:name``), for
gunicorn.

keystone and nova-api parse ``sys.argv`` when their application is
imported, and gunicorn's arguments are not theirs: clear them first.
"""

import importlib
import os
import sys

_module, _name = os.environ['CLOUD_WSGI_APP'].split(':')
sys.argv = sys.argv[:1]
application = getattr(importlib.import_module(_module), _name)
