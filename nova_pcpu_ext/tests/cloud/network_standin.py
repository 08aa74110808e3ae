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

"""The cloud's only stand-in: a read-only network API.

Servers boot with ``"networks": "none"``, so Nova never asks for a port;
but nova-api lists ports and security groups for every server view and on
delete. This answers every collection GET with an empty list and quota
GETs with -1 (unlimited), and refuses every write.

``python -m nova_pcpu_ext.tests.cloud.network_standin PORT``
"""

from http import server
import json
import sys


class Handler(server.BaseHTTPRequestHandler):

    def do_GET(self):
        parts = self.path.split('?')[0].strip('/').split('/')
        if parts == ['']:
            body = {'versions': [{'id': 'v2.0', 'status': 'CURRENT',
                                  'links': []}]}
        elif parts[:2] == ['v2.0', 'quotas'] and len(parts) > 2:
            body = {'quota': dict.fromkeys(
                ('network', 'subnet', 'port', 'router', 'floatingip',
                 'security_group', 'security_group_rule'), -1)}
        elif len(parts) == 2 and parts[0] == 'v2.0':
            body = {parts[1].replace('.json', '').replace('-', '_'): []}
        else:
            self.send_error(404)
            return
        self._reply(200, body)

    def _refuse(self):
        self.send_error(405, 'read-only network API stand-in')

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        sys.stderr.write('%s\n' % (format % args))


if __name__ == '__main__':
    server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])),
                               Handler).serve_forever()
