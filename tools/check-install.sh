#!/bin/bash
# Install nova-pcpu-ext as an operator would, from a built wheel, into the
# Nova environment this script runs in (tox -e install), and check what the
# operator then has: the entry points, the console scripts and the tempest
# plugin. The sdist and the wheel are built from a clean clone of HEAD, so
# a file that is not committed cannot make this pass.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git clone --quiet "$PWD" "$work/src"
python -m build --sdist --wheel --outdir "$work/dist" "$work/src" \
    > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
ls "$work"/dist/nova_pcpu_ext-*.tar.gz > /dev/null
pip install --quiet -c constraints.txt "$work"/dist/nova_pcpu_ext-*.whl

# Installed from the wheel, not from this tree.
cd "$work"
python - <<'PYTHON'
from importlib import metadata

import nova_pcpu_ext

assert '/site-packages/' in nova_pcpu_ext.__file__, nova_pcpu_ext.__file__
expected = {
    'nova_pcpu_ext.request_filters': {'isolate_vcpu_fallback'},
    'nova_pcpu_ext.resource_tracker': {'allocation_ratios'},
    'nova_pcpu_ext.report_client': {'serialized'},
    'oslo.config.opts': {'nova_pcpu_ext'},
    'tempest.test_plugins': {'nova-pcpu-ext'},
    'console_scripts': {'nova-pcpu-ext-compute', 'nova-pcpu-ext-scheduler',
                        'nova-pcpu-ext-status', 'nova-pcpu-ext-manage'},
}
for group, names in expected.items():
    found = {ep.name: ep for ep in metadata.entry_points(group=group)
             if ep.name in names}
    assert set(found) == names, (group, sorted(found))
    # Console scripts are run as processes below: importing one here would
    # apply Nova's concurrency set-up to this process.
    if group != 'console_scripts':
        for entry_point in found.values():
            entry_point.load()
print('entry points: ok')
PYTHON

# Each service stops at once, with one line, on an unknown plugin name.
printf '[pcpu_ext]\nrequest_filters = isolate\nreport_client = lock\n' \
    > nova.conf
for script in nova-pcpu-ext-compute nova-pcpu-ext-scheduler; do
    if OS_NOVA_DISABLE_EVENTLET_PATCHING=1 timeout 60 "$script" \
            --config-file nova.conf 2> err < /dev/null; then
        echo "$script started with an unknown plugin" >&2
        exit 1
    fi
    grep -q '^nova-pcpu-ext: \[pcpu_ext\] [a-z_]*: unknown plugin' err || {
        cat err; exit 1; }
done
nova-pcpu-ext-status --help > /dev/null
nova-pcpu-ext-manage --help > /dev/null
echo 'console scripts: ok'

tempest list-plugins | grep -q 'nova-pcpu-ext'
echo 'tempest plugin: ok'
