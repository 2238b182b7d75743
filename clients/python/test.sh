#!/usr/bin/env bash
# The Python client's tests (pytest) against a live `archmax serve` on the tape in
# clients/testdata/workspace: a fresh temporary root, a port the system picks, a token.
#
# Usage: clients/python/test.sh [pytest arguments]   (from anywhere; CI calls it from .ci/run)
#   ARCHMAX_BIN          the archmax binary to serve (default: built here, debug)
#   ARCHMAX_CLIENT_VENV  where the pinned virtualenv lives (default target/python-client-venv)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${ARCHMAX_CLIENT_VENV:-${CARGO_TARGET_DIR:-$repo/target}/python-client-venv}"

if ! command -v python3 >/dev/null; then
    echo "error: python3 is not installed; the Python client's tests need Python 3.10 or newer with venv" >&2
    exit 1
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "error: $(python3 --version) is too old; the Python client needs Python 3.10 or newer" >&2
    exit 1
fi
# The virtualenv, with exactly the pinned requirements (made again when they change).
if [ ! -x "$venv/bin/pytest" ] || ! cmp -s "$here/requirements-test.txt" "$venv/requirements-test.txt"; then
    echo "python client: creating $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements-test.txt"
    cp "$here/requirements-test.txt" "$venv/requirements-test.txt"
fi

# shellcheck source=../testdata/serve.sh
source "$here/../testdata/serve.sh"
archmax_serve_start

cd "$here"
"$venv/bin/pytest" -p no:cacheprovider "$@"
