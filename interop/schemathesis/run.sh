#!/usr/bin/env bash
# Schemathesis against a live `archmax serve`, driven by the server's own
# /v1/openapi.json: every check, the examples, coverage, fuzzing and stateful phases, for a
# bounded number of examples. Fails on any finding, and when the server is not alive and
# answering /healthz at the end of the run.
#
# Usage: interop/schemathesis/run.sh   (from anywhere; CI calls it from .ci/run)
#   SCHEMATHESIS_MAX_EXAMPLES  examples per operation and phase (default 15)
#   SCHEMATHESIS_VENV          where the pinned virtualenv lives (default target/schemathesis-venv)
#   ARCHMAX_BIN                the archmax binary to serve (default: built here, debug)
#
# The server runs the small workspace beside this script on its tape (no network, no
# model endpoint), in a fresh root so every run starts with no sessions, with one token
# holding every scope.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

target_dir="${CARGO_TARGET_DIR:-$repo/target}"
venv="${SCHEMATHESIS_VENV:-$target_dir/schemathesis-venv}"
max_examples="${SCHEMATHESIS_MAX_EXAMPLES:-15}"

if ! command -v python3 >/dev/null; then
    echo "error: python3 is not installed; Schemathesis needs Python 3.10 or newer with venv" >&2
    exit 1
fi
# The virtualenv, with exactly the pinned requirements (reinstalled when they change).
if [ ! -x "$venv/bin/schemathesis" ] || ! cmp -s "$here/requirements.txt" "$venv/requirements.txt"; then
    echo "schemathesis: creating $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$venv/requirements.txt"
fi

if [ -z "${ARCHMAX_BIN:-}" ]; then
    cargo build --quiet -p archmax-cli --bin archmax
    ARCHMAX_BIN="$target_dir/debug/archmax"
fi

root="$(mktemp -d)"
log="$root/serve.log"
cp -R "$here/workspace/." "$root/"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
token="schemathesis-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"

ARCHMAX_SERVE_TOKEN="$token" "$ARCHMAX_BIN" serve --root "$root" --listen "127.0.0.1:$port" \
    --tape "$root/tape.yaml" >"$log" 2>&1 &
pid=$!
stop() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
trap stop EXIT

for _ in $(seq 1 120); do
    if curl -fsS "$base/healthz" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "error: archmax serve exited before answering; its log:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.5
done

status=0
"$venv/bin/schemathesis" --config-file "$here/schemathesis.toml" run "$base/v1/openapi.json" \
    --checks all \
    --phases examples,coverage,fuzzing,stateful \
    --max-examples "$max_examples" \
    --seed 29 \
    --workers 2 \
    --request-timeout 30 \
    -H "Authorization: Bearer $token" \
    --report junit --report-dir "$root/report" \
    || status=$?

# The server must have lived through it, and still answer.
if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" || echo "error: archmax serve died during the run (status $?); its log follows" >&2
    tail -n 50 "$log" >&2
    exit 1
fi
if ! curl -fsS --max-time 10 "$base/healthz" >/dev/null; then
    echo "error: archmax serve is running but /healthz did not answer after the run" >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    echo "error: schemathesis reported findings (status $status); the server's log is $log" >&2
    trap - EXIT
    stop
    exit "$status"
fi
echo "schemathesis: no findings; the server is alive and answers /healthz"
rm -rf "$root"
