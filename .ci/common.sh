# Shared by .ci/run and .ci/periodic: installs tox and makes the
# interpreters its environments need findable; runs a command, printing
# its failed tests again at the end of its output.

# A command's status, not tee's, is the pipeline's.
set -o pipefail

python3 -m pip install --quiet 'tox>=4.6,<5' 'tox-uv>=1.32'

# NOTE: tox looks for python3.10, python3.12 and python3.13 on PATH, and a
# missing one fails the run. pyenv's shims answer only for the selected
# version, so link each installed one into a directory of its own (not
# their bin/, whose python3 would replace this one). The directory stays:
# the virtualenvs tox makes link their python to it.
if command -v pyenv > /dev/null; then
    interpreters=$PWD/.tox/interpreters
    mkdir -p "$interpreters"
    for minor in 3.10 3.12 3.13; do
        version=$(pyenv versions --bare | grep -x "${minor//./\\.}\.[0-9]*" \
            | sort -V | tail -n 1) || true
        if [ -n "$version" ]; then
            ln -sfn "$(pyenv root)/versions/$version/bin/python$minor" \
                "$interpreters/python$minor"
        fi
    done
    export PATH="$interpreters:$PATH"
fi

# run_reporting NAME COMMAND...: runs COMMAND; if it fails, prints its
# failed tests and their tracebacks again under NAME (and appends them to
# the file $CI_REPORT, where set), and returns its status. The output of
# a whole run is long: this is what to read first.
run_reporting() {
    local name=$1 output status=0
    shift
    output=$(mktemp)
    "$@" 2>&1 | tee "$output" || status=$?
    if [ "$status" -ne 0 ]; then
        {
            echo "=== $name failed: $* ==="
            grep -E '\.\.\. FAILED|: FAIL code|^FAILED: |^seed [0-9]+: [1-9]' \
                "$output" || true
            awk '/^Failed [0-9]+ tests? - output below/ {n = 150} n-- > 0' \
                "$output" | tail -n 400
        } | tee -a "${CI_REPORT:-/dev/null}"
    fi
    rm -f "$output"
    return "$status"
}
