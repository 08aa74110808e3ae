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

"""How ``nova-pcpu-ext-status`` judges legacy hosts and the fallback modes."""

import ddt
from oslo_upgradecheck import upgradecheck

from nova_pcpu_ext import cloud_hosts
from nova_pcpu_ext.cmd import status
from nova_pcpu_ext import isolate_scan
from nova_pcpu_ext.tests.unit import base

SUCCESS = upgradecheck.Code.SUCCESS
WARNING = upgradecheck.Code.WARNING


def provider(name):
    return {'uuid': name + '-uuid', 'name': name}


def nodes(legacy=(), new_style=(), hyperthreaded=()):
    """:class:`cloud_hosts.ComputeNodes` of providers named as given."""
    return cloud_hosts.ComputeNodes(
        [provider(name) for name in legacy],
        [provider(name) for name in new_style],
        frozenset(name + '-uuid' for name in hyperthreaded))


def found(name, host, hyperthreaded=True, legacy=True, unsure=''):
    return isolate_scan.IsolateServer(
        {'id': name, 'OS-EXT-SRV-ATTR:host': host}, provider(host),
        'flavor hw:cpu_thread_policy=isolate', {}, legacy=legacy,
        dedicated=True, unsure=unsure, hyperthreaded=hyperthreaded)


@ddt.ddt
class FallbackModeTest(base.TestCase):

    @ddt.data('drop', 'legacy_only')
    def test_the_mode_of_the_request_filter(self, mode):
        self.flags(isolate_fallback_mode=mode)
        self.assertEqual(mode, status.fallback_mode())

    def test_without_the_request_filter(self):
        self.flags(request_filters=[], isolate_fallback_mode='drop')
        self.assertEqual(status.STOCK, status.fallback_mode())

    def test_nova_s_workaround_wins(self):
        self.flags(isolate_fallback_mode='legacy_only')
        self.flags(group='workarounds', disable_fallback_pcpu_query=True)
        self.assertEqual(status.WORKAROUND, status.fallback_mode())

    @ddt.unpack
    @ddt.data(('drop', True), (status.WORKAROUND, True), (None, True),
              (status.STOCK, False), ('legacy_only', False))
    def test_legacy_hosts_without_ht_scanned(self, mode, scanned):
        self.assertEqual(scanned, status.scans_legacy_hosts(mode))

    def test_without_the_request_filter_judged_as_stock_nova(self):
        """Not as drop: stock Nova's fallback offers every legacy host."""
        for activated in (True, False):
            self.assertEqual(
                'The isolate_vcpu_fallback request filter is off in this '
                'nova.conf (not in [pcpu_ext] request_filters): judged as '
                'stock Nova schedules, its VCPU fallback query offering '
                'pinned requests, isolate ones included, every legacy host '
                '(no PCPU inventory). Run the check with the nova.conf that '
                'switches the filter on to see what its mode costs.',
                status.assumption(status.STOCK, activated))

    @ddt.data('drop', 'legacy_only')
    def test_request_filter_not_activated_here(self, mode):
        self.assertIsNone(status.assumption(mode, activated=True))
        self.assertEqual(
            'Judged as if the schedulers ran the isolate_vcpu_fallback '
            'request filter in %s mode, as this nova.conf configures it; no '
            'scheduler activates it on this host (see the Configuration '
            'check), and a scheduler that does not makes the VCPU fallback '
            'query as stock Nova.' % mode,
            status.assumption(mode, activated=False))

    @ddt.data(status.WORKAROUND, None)
    def test_nothing_assumed(self, mode):
        """Nova's workaround acts without the extension; a bad mode fails.

        The configuration check names the bad mode.
        """
        for activated in (True, False):
            self.assertIsNone(status.assumption(mode, activated))

    @ddt.unpack
    @ddt.data(('drop', ['l1', 'l2']), (status.WORKAROUND, ['l1', 'l2']),
              ('legacy_only', []), (status.STOCK, []), (None, []))
    def test_left_out(self, mode, names):
        cloud = nodes(legacy=['l1', 'l2'], new_style=['n1'],
                      hyperthreaded=['l2', 'n1'])
        self.assertEqual(names, [p['name'] for p in
                                 status.left_out(mode, cloud)])


class JudgeLegacyHostsTest(base.TestCase):

    CLOUD = nodes(legacy=['legacy-ht', 'legacy'], new_style=['new'],
                  hyperthreaded=['legacy-ht', 'new'])
    SERVERS = [found('a', 'legacy-ht'), found('b', 'legacy', False)]

    def judge(self, mode, cloud=CLOUD, servers=(), lacking=()):
        result = status.judge_legacy_hosts(mode, cloud, list(servers),
                                           list(lacking))
        return result.code, result.details

    def test_drop_leaves_out_every_legacy_host(self):
        self.assertEqual((WARNING, (
            '2 legacy hosts (no PCPU inventory: vcpu_pin_set, or no '
            'dedicated CPUs; 1 with hyperthreads): legacy-ht, legacy; 2 '
            'isolate servers run on them. With [pcpu_ext] '
            'isolate_fallback_mode = drop none of them takes an isolate '
            'server, nor is the destination of a move (migrate, resize, '
            'evacuate, unshelve) of one, although Nova places and pins such '
            'servers correctly there. To keep them, set [pcpu_ext] '
            'isolate_fallback_mode = legacy_only on the schedulers, with the '
            'pcpu_trait resource tracker mixin on the computes that report '
            'PCPU (nova-pcpu-ext-compute); or configure them with [compute] '
            'cpu_dedicated_set.')), self.judge('drop', servers=self.SERVERS))

    def test_a_legacy_host_without_servers_is_a_cost_too(self):
        code, details = self.judge('drop')
        self.assertEqual(WARNING, code)
        self.assertIn('legacy-ht, legacy; 0 isolate servers run on them.',
                      details)

    def test_at_most_five_hosts_named(self):
        cloud = nodes(legacy=['l%d' % n for n in range(7)])
        _code, details = self.judge('drop', cloud)
        self.assertIn('0 with hyperthreads): l0, l1, l2, l3, l4 and 2 more; ',
                      details)

    def test_nova_s_workaround(self):
        code, details = self.judge(status.WORKAROUND, servers=self.SERVERS)
        self.assertEqual(WARNING, code)
        self.assertIn(
            "With Nova's [workarounds] disable_fallback_pcpu_query = True, "
            "whatever [pcpu_ext] isolate_fallback_mode says, none of them "
            "takes a pinned server, nor is", details)
        self.assertIn('To keep them, unset the workaround and set [pcpu_ext] '
                      'isolate_fallback_mode = legacy_only', details)

    def test_no_legacy_host_costs_nothing(self):
        for mode in ('drop', status.WORKAROUND, 'legacy_only'):
            self.assertEqual((SUCCESS, status.NO_LEGACY), self.judge(
                mode, nodes(new_style=['new'], hyperthreaded=['new'])))
        self.assertEqual(
            "No legacy host: every compute node reports PCPU, so [pcpu_ext] "
            "isolate_fallback_mode = drop (the default) costs this cloud "
            "nothing, and so does Nova's own [workarounds] "
            "disable_fallback_pcpu_query = True, which drops the VCPU "
            "fallback query for every pinned request.", status.NO_LEGACY)

    def test_legacy_only_keeps_every_legacy_host(self):
        self.assertEqual((SUCCESS, None), self.judge('legacy_only'))

    def test_legacy_only_and_computes_without_the_mixin(self):
        lacking = [provider('new'), provider('other')]

        code, details = self.judge('legacy_only', lacking=lacking)
        _code, without_legacy = self.judge(
            'legacy_only', nodes(new_style=['new', 'other']),
            lacking=lacking)

        self.assertEqual((WARNING, (
            '2 compute nodes report PCPU without the '
            'CUSTOM_PCPU_EXT_REPORTS_PCPU trait: new, other. Their computes '
            'do not run the pcpu_trait resource tracker mixin, so with '
            '[pcpu_ext] isolate_fallback_mode = legacy_only the VCPU '
            'fallback query still offers them to pinned requests, as stock '
            'Nova does (hyperthreaded ones to isolate requests too: bug '
            '1889633). Run nova-pcpu-ext-compute there with pcpu_trait in '
            '[pcpu_ext] resource_tracker_mixins (the default): the trait is '
            'reported when the compute starts.')), (code, details))
        self.assertEqual(details + ' ' + status.NO_LEGACY, without_legacy)

    def test_nothing_without_the_request_filter(self):
        for mode in (status.STOCK, None):
            self.assertEqual((SUCCESS, None),
                             self.judge(mode, servers=self.SERVERS))


class BlindSpotsTest(base.TestCase):

    SCAN = isolate_scan.IsolateScan(
        [found('a', 'ht', unsure='image x changed'),
         found('b', 'noht', hyperthreaded=False, unsure='image y changed')],
        {'ht': ['c'], 'noht': ['d', 'e']}, frozenset(['noht']))

    def test_hyperthreaded_hosts_only(self):
        self.assertEqual(
            '1 servers are unsure: a on ht: image x changed; check their '
            'thread policy by hand. The Compute API could not show 1 '
            'servers of 1 hyperthreaded hosts (ht): is a cell down?',
            status._blind_spots(self.SCAN))

    def test_legacy_hosts_without_ht_too(self):
        self.assertEqual(
            '2 servers are unsure: a on ht: image x changed; b on noht: '
            'image y changed; check their thread policy by hand. The '
            'Compute API could not show 1 servers of 1 hyperthreaded hosts '
            '(ht): is a cell down? The Compute API could not show 2 servers '
            'of 1 legacy hosts without hyperthreads (noht): is a cell down?',
            status._blind_spots(self.SCAN, lambda name, ht: True))

    def test_a_success_becomes_a_warning(self):
        result = status._with_blind_spots(
            upgradecheck.Result(SUCCESS), self.SCAN,
            lambda name, ht: name == 'noht')
        self.assertEqual(WARNING, result.code)
        self.assertTrue(result.details.startswith(
            '1 servers are unsure: b on noht'), result.details)
