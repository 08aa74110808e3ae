#!/bin/bash
# Install nova-pcpu-ext as an operator would, from a built wheel, into the
# Nova environment this script runs in (tox -e install), and check what the
# operator then has: the entry points, the console scripts and the tempest
# plugin. The sdist and the wheel are built from a clean clone of HEAD, so
# a file that is not committed cannot make this pass.
#
# First the build the README's steps make, of a clone without tags: its
# wheel must be the development version RELEASE.devN. Then a release's: in
# the clone, HEAD carries an annotated tag RELEASE, the release being
# prepared, as when a release is cut (doc/source/contributor/releasing.rst).
# Its files must have the names pbr and setuptools give that release and
# pass twine check, and the installed commands must print that version.
set -euo pipefail
cd "$(dirname "$0")/.."
# The release in the making, as setup.cfg names it.
RELEASE=$(sed -n 's/^version = //p' setup.cfg)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git clone --quiet "$PWD" "$work/src"
# A tag of that name elsewhere in the history is not HEAD's: the clone's
# copy is removed.
git -C "$work/src" tag --delete "$RELEASE" > /dev/null 2>&1 || true

# Untagged, as the README's steps build a clone of the published
# repository: the development version of the release in the making.
python -m build --wheel --outdir "$work/untagged" "$work/src" \
    > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
untagged=$(cd "$work/untagged" && ls)
development="^nova_pcpu_ext-${RELEASE//./[.]}[.]dev[0-9]+-py3-none-any[.]whl\$"
[[ "$untagged" =~ $development ]] || {
    echo "untagged build: $untagged; expected ${RELEASE}.devN" >&2; exit 1; }
echo "untagged build: $untagged"

git -C "$work/src" -c user.name=release-check -c user.email=release-check \
    tag -a "$RELEASE" -m "$RELEASE"
python -m build --sdist --wheel --outdir "$work/dist" "$work/src" \
    > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
started=$SECONDS
wheel=nova_pcpu_ext-$RELEASE-py3-none-any.whl
sdist=nova_pcpu_ext-$RELEASE.tar.gz
built=$(cd "$work/dist" && ls | sort | tr '\n' ' ')
expected=$(printf '%s\n' "$wheel" "$sdist" | sort | tr '\n' ' ')
[ "$built" = "$expected" ] || {
    echo "built: $built; expected: $expected" >&2; exit 1; }
twine check --strict "$work/dist/$wheel" "$work/dist/$sdist"
(cd "$work/dist" && sha256sum "$wheel" "$sdist")
pip install --quiet -c constraints.txt "$work/dist/$wheel"

# Installed from the wheel, not from this tree.
cd "$work"
for script in nova-pcpu-ext-status nova-pcpu-ext-manage; do
    printed=$(OS_NOVA_DISABLE_EVENTLET_PATCHING=1 "$script" --version)
    [ "$printed" = "nova-pcpu-ext $RELEASE" ] || {
        echo "$script --version printed: $printed" >&2; exit 1; }
done
echo "release $RELEASE: ok (file names, twine check, --version;" \
     "$((SECONDS - started)) s)"

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
