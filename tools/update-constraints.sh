#!/bin/bash
# Regenerate constraints.txt: resolve Nova, placement, the test, docs and
# lint requirements together in a fresh virtualenv and record the result.
#
#   tools/update-constraints.sh [UPSTREAM_CONSTRAINTS]
#
# UPSTREAM_CONSTRAINTS (optional) is an OpenStack upper-constraints file to
# start from; lines that conflict with NOVA/PLACEMENT are dropped.
set -euo pipefail
cd "$(dirname "$0")/.."

NOVA=${NOVA:-nova==34.0.0}
PLACEMENT=${PLACEMENT:-openstack-placement==16.0.0}
upstream=${1:-}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
pip="$work/venv/bin/pip"
"$pip" install --quiet --upgrade pip

: > "$work/upstream.txt"
[ -n "$upstream" ] && cp "$upstream" "$work/upstream.txt"

# Drop each upstream pin that conflicts with the requested versions.
for _ in $(seq 1 20); do
    if "$pip" install --quiet -c "$work/upstream.txt" "$NOVA" "$PLACEMENT" \
            -r requirements.txt -r test-requirements.txt \
            -r doc/requirements.txt hacking bashate 2> "$work/err"; then
        break
    fi
    conflict=$(grep -oP 'The user requested \(constraint\) \K[^=]+' \
        "$work/err" | head -1)
    if [ -z "$conflict" ]; then
        cat "$work/err" >&2
        exit 1
    fi
    pattern=$(echo "$conflict" | sed 's/[-_.]/[-_.]/g')
    grep -viE "^${pattern}===" "$work/upstream.txt" > "$work/next" || true
    mv "$work/next" "$work/upstream.txt"
done

{
    echo "# Known-good versions for tests, docs and linters: resolved on Python"
    echo "# $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
        "against $NOVA and $PLACEMENT. Regenerate"
    echo "# with tools/update-constraints.sh after changing requirements."
    "$pip" freeze --exclude-editable | grep -v '^nova-pcpu-ext'
} > constraints.txt
