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

"""tempest against one deployment: the project's plugin tests and the
upstream list (``upstream-tests.txt``), one subunit stream per deployment.
"""

import io
import os
import re
import subprocess
import sys
import sysconfig

import subunit
import testtools

from nova_pcpu_ext.tests.cloud import deploy
from nova_pcpu_ext.tests import devstack

HERE = os.path.dirname(os.path.abspath(__file__))
UPSTREAM_LIST = os.path.join(HERE, 'upstream-tests.txt')
PROJECT_TESTS = 'nova_pcpu_ext.tests.tempest.'
#: Project tests carrying this attribute target a bug: they must fail on
#: stock Nova.
BUG_ATTR = 'stock-fails'

#: What this cloud does not have (see the upstream list).
FEATURES_OFF = ('change_password', 'console_output', 'resize', 'pause',
                'shelve', 'shelve_migrate', 'suspend', 'cold_migration',
                'live_migration', 'metadata_service', 'vnc_console',
                'rescue', 'interface_attach', 'snapshot', 'personality',
                'config_drive', 'attach_encrypted_volume')


def upstream_tests():
    with open(UPSTREAM_LIST) as f:
        return [line.strip() for line in f
                if line.strip() and not line.startswith('#')]


def tempest_conf(deployment, workspace, image_id, flavor_ids, libvirt):
    shared = deployment.shared
    conf = {
        'DEFAULT': {'log_file': 'tempest.log'},
        'auth': {'use_dynamic_credentials': 'True',
                 'admin_username': 'admin',
                 'admin_password': deploy.ADMIN_PASSWORD,
                 'admin_project_name': 'admin',
                 'admin_domain_name': 'Default'},
        'identity': {'uri_v3': shared.keystone_url, 'auth_version': 'v3',
                     'region': deployment.name},
        'identity-feature-enabled': {'api_v2': 'False'},
        'service_available': {'nova': 'True', 'glance': 'True',
                              'neutron': 'False', 'cinder': 'False',
                              'swift': 'False'},
        'compute': {'image_ref': image_id, 'image_ref_alt': image_id,
                    'flavor_ref': flavor_ids[0],
                    'flavor_ref_alt': flavor_ids[1],
                    # Servers are created with "networks": "none".
                    'min_microversion': '2.37',
                    'max_microversion': 'latest',
                    'build_timeout': '120'},
        'compute-feature-enabled': dict.fromkeys(FEATURES_OFF, 'False'),
        'placement': {'min_microversion': '1.0',
                      'max_microversion': 'latest'},
        'validation': {'run_validation': 'False'},
        # Where tempest's lock for serial test classes lives.
        'oslo_concurrency': {'lock_path': os.path.join(workspace, 'lock')},
    }
    if libvirt:
        conf['pcpu_ext'] = {
            'libvirt_host': 'libvirt', 'libvirt_uri': 'qemu:///system',
            'libvirt_cpu_dedicated_set': '1'}
    return conf


def run(deployment, image_id, flavor_ids, libvirt, work_dir):
    """Run tempest against ``deployment``; {test id: status}."""
    workspace = os.path.join(work_dir, 'tempest-%s' % deployment.name)
    tempest = os.path.join(sysconfig.get_path('scripts'), 'tempest')
    if not os.path.isdir(workspace):
        # Registered in the work directory, not in the user's list.
        deploy.run([tempest, 'init', '--workspace-path',
                    os.path.join(work_dir, 'tempest-workspaces.yaml'),
                    workspace])
    conf_path = os.path.join(workspace, 'etc', 'tempest.conf')
    deploy.write_conf(conf_path,
                      tempest_conf(deployment, workspace, image_id,
                                   flavor_ids, libvirt))
    # The extension's part comes from the devstack plugin, for both
    # deployments: stock is tested as configured for the extension. The
    # cloud is the tests' own: the status tests, which disable and enable
    # its computes, run too ([pcpu_ext] destructive_tests = True).
    devstack.run_plugin(['stack', 'test-config'], workspace,
                        TEMPEST_CONFIG=conf_path,
                        NOVA_PCPU_EXT_TEMPEST_DESTRUCTIVE='True',
                        NOVA_PCPU_EXT_TEMPEST_STATUS_STORM_SECONDS='30')
    # Stock runs what proves the project's tests can fail; the upstream
    # list, which must pass on both, only where it tests the extension.
    include = os.path.join(workspace, 'include-list')
    with open(include, 'w') as f:
        f.write('\n'.join(
            (upstream_tests() if deployment.extension else []) +
            ['^' + PROJECT_TESTS]) + '\n')
    with open(os.path.join(work_dir, 'logs', 'tempest-%s.out' %
                           deployment.name), 'wb') as out:
        code = subprocess.run([tempest, 'run', '--include-list', include,
                               '--concurrency', '2'], cwd=workspace,
                              stdout=out, stderr=subprocess.STDOUT).returncode
    stream = subprocess.run(
        [sys.executable, '-m', 'stestr', 'last', '--subunit'],
        cwd=workspace, capture_output=True, check=True).stdout
    with open(os.path.join(workspace, 'results.subunit'), 'wb') as f:
        f.write(stream)
    results = statuses(stream)
    if code and 'failed' not in {status for status, _ in results.values()}:
        # tempest itself failed (a worker lost, a bad list): judged as an
        # upstream failure.
        results['tempest run (exit code %d)' % code] = ('failed', [])
    return results


def statuses(stream):
    """{test id without attributes: (status, attributes)} of a stream."""
    results = {}

    def record(test):
        test_id = test['id']
        if test['status'] == 'exists':
            return
        name, _, attrs = test_id.partition('[')
        status = {'success': 'passed', 'fail': 'failed',
                  'skip': 'skipped'}.get(test['status'], test['status'])
        results[name] = (status, attrs.rstrip(']').split(','))

    result = testtools.StreamToDict(record)
    result.startTestRun()
    subunit.ByteStreamToStreamResult(io.BytesIO(stream)).run(result)
    result.stopTestRun()
    return results


def is_project(test_id):
    # Also a failed class set-up: "setUpClass (nova_pcpu_ext...)".
    return PROJECT_TESTS in test_id


def targets_bug(attrs):
    return BUG_ATTR in attrs


def verdict(results, libvirt, with_stock=True):
    """The checks a run must pass; [failure message].

    The upstream list runs on ext only: each of its lines must match a
    test there, and each test must pass. Without stock, nothing shows
    that the project's tests of a bug fail there.
    """
    failures = []
    stock, ext = results.get('stock', {}), results.get('ext', {})
    judged = (('stock', stock), ('ext', ext)) if with_stock else (
        ('ext', ext),)
    for name, tests in judged:
        if not tests:
            failures.append('%s: no tempest results' % name)
        for test_id, (status, attrs) in tests.items():
            if not is_project(test_id) and status == 'failed':
                failures.append('%s: upstream %s failed' % (name, test_id))
    # A class skipped as a whole is one 'setUpClass (class id)'.
    ids = [test_id.replace('setUpClass (', '') for test_id in ext]
    failures += ['ext: %s in upstream-tests.txt matches no test' % regex
                 for regex in upstream_tests() if ext and not any(
                     re.search(regex, test_id) for test_id in ids)]
    project = {test_id: result for test_id, result in ext.items()
               if is_project(test_id)}
    if not project:
        failures.append('ext: no project test ran')
    for test_id, (status, attrs) in project.items():
        # A class skipped as a whole is one 'setUpClass (...)' result,
        # without the attributes of its tests.
        needs_libvirt = 'libvirt' in attrs or (
            status == 'skipped' and test_id.startswith('setUpClass '))
        if status != 'passed' and not (needs_libvirt and not libvirt):
            failures.append('ext: %s %s' % (test_id, status))
        if with_stock and targets_bug(attrs) and stock.get(
                test_id, ('missing',))[0] != 'failed':
            failures.append('stock: %s should fail and is %s' % (
                test_id, stock.get(test_id, ('missing',))[0]))
    return failures


def table(results):
    ids = sorted(set(results.get('stock', {})) | set(results.get('ext', {})))
    width = max([len(i) for i in ids] + [10])
    lines = ['%-*s  %-8s %-8s' % (width, 'test', 'stock', 'ext')]
    for test_id in ids:
        lines.append('%-*s  %-8s %-8s' % (
            width, test_id,
            results.get('stock', {}).get(test_id, ('-',))[0],
            results.get('ext', {}).get(test_id, ('-',))[0]))
    return '\n'.join(lines)
