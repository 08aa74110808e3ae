#!/bin/bash
# Regenerate the constraints of one Nova series: resolve Nova, placement and
# the package's requirements together in a fresh virtualenv, starting from
# that series' OpenStack upper-constraints, and record the result.
#
#   tools/update-constraints.sh [SERIES [UPSTREAM_CONSTRAINTS]]
#
# SERIES is 2026.2 (the default; writes constraints.txt, which also pins the
# docs and lint tools), 2026.1, 2025.2, 2025.1, 2024.2 or 2024.1 (write
# constraints/nova-SERIES.txt),
# or cloud (writes constraints/cloud.txt: constraints.txt plus the loopback
# cloud's services, started from constraints.txt so the two agree).
# UPSTREAM_CONSTRAINTS (optional) is the series' upper-constraints file;
# lines that conflict with the chosen Nova and placement are dropped.
set -euo pipefail
cd "$(dirname "$0")/.."

series=${1:-2026.2}
upstream=${2:-}
extra=()
case "$series" in
    2026.2) nova=nova==34.0.0; placement=openstack-placement==16.0.0
            out=constraints.txt
            extra=(-r doc/requirements.txt hacking bashate) ;;
    2026.1) nova=nova==33.0.2; placement=openstack-placement==15.0.0 ;;
    2025.2) nova=nova==32.2.1; placement=openstack-placement==14.0.0 ;;
    2025.1) nova=nova==31.3.1; placement=openstack-placement==13.0.1 ;;
    2024.2) nova=nova==30.3.0; placement=openstack-placement==12.0.2 ;;
    2024.1) nova=nova==29.4.0; placement=openstack-placement==11.0.1 ;;
    cloud) nova=nova==34.0.0; placement=openstack-placement==16.0.0
           out=constraints/cloud.txt; upstream=${upstream:-constraints.txt}
           extra=(-r cloud-requirements.txt libvirt-python) ;;
    *) echo "unknown series $series: 2024.1 to 2026.2, or cloud" >&2
       exit 2 ;;
esac
out=${out:-constraints/nova-$series.txt}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
pip="$work/venv/bin/pip"
"$pip" install --quiet --upgrade pip

: > "$work/upstream.txt"
# gunicorn only serves placement in the tests, with the newest release's
# options: leave it unpinned by the series.
[ -n "$upstream" ] && grep -viE '^gunicorn===?' "$upstream" \
    > "$work/upstream.txt"

# Drop each upstream pin that conflicts with the requested versions.
for _ in $(seq 1 20); do
    if "$pip" install --quiet -c "$work/upstream.txt" "$nova" "$placement" \
            -r requirements.txt -r test-requirements.txt "${extra[@]}" \
            2> "$work/err"; then
        break
    fi
    conflict=$(grep -oP 'The user requested \(constraint\) \K[^=]+' \
        "$work/err" | head -1)
    if [ -z "$conflict" ]; then
        cat "$work/err" >&2
        exit 1
    fi
    pattern=$(echo "$conflict" | sed 's/[-_.]/[-_.]/g')
    grep -viE "^${pattern}===?" "$work/upstream.txt" > "$work/next" || true
    mv "$work/next" "$work/upstream.txt"
done

mkdir -p "$(dirname "$out")"
{
    echo "# Known-good versions for Nova $series: resolved on Python" \
        "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    echo "# against $nova and $placement. Regenerate with"
    echo "# tools/update-constraints.sh $series after changing requirements."
    "$pip" freeze --exclude-editable | grep -v '^nova-pcpu-ext'
} > "$out"
