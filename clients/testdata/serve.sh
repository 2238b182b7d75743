# Sourced by clients/*/test.sh: starts `archmax serve` on the workspace beside this file
# (its tape answers every model call, so no network and no model endpoint), in a fresh
# temporary root, on a port the system picks, with one token holding every scope. Exports
# ARCHMAX_BASE_URL and ARCHMAX_TOKEN for the tests and stops the server when the calling
# script exits.
#
#   ARCHMAX_BIN  the archmax binary to serve (default: `cargo build -p archmax-cli --bin archmax`
#                in the repository, and its debug binary)

clients_testdata="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
clients_repo="$(cd "$clients_testdata/../.." && pwd)"

archmax_serve_start() {
    for tool in curl od; do
        if ! command -v "$tool" >/dev/null; then
            echo "error: $tool is not installed; the client tests need it to start the server" >&2
            exit 1
        fi
    done
    if [ -z "${ARCHMAX_BIN:-}" ]; then
        if ! command -v cargo >/dev/null; then
            echo "error: ARCHMAX_BIN is not set and cargo is not installed to build archmax" >&2
            exit 1
        fi
        (cd "$clients_repo" && cargo build --quiet -p archmax-cli --bin archmax)
        ARCHMAX_BIN="${CARGO_TARGET_DIR:-$clients_repo/target}/debug/archmax"
    fi
    if [ ! -x "$ARCHMAX_BIN" ]; then
        echo "error: ARCHMAX_BIN=$ARCHMAX_BIN is not an executable" >&2
        exit 1
    fi

    archmax_root="$(mktemp -d)"
    archmax_log="$archmax_root/serve.log"
    : >"$archmax_log" # made here, so reading it never races the server's start
    cp -R "$clients_testdata/workspace/." "$archmax_root/"
    ARCHMAX_TOKEN="client-tests-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    # Port 0: the system picks a free port; the server's first log line names it.
    ARCHMAX_SERVE_TOKEN="$ARCHMAX_TOKEN" "$ARCHMAX_BIN" serve --root "$archmax_root" --listen 127.0.0.1:0 \
        --tape "$archmax_root/tape.yaml" --log-format text --color never >"$archmax_log" 2>&1 &
    archmax_pid=$!
    trap archmax_serve_stop EXIT

    ARCHMAX_BASE_URL=""
    for _ in $(seq 1 240); do
        if ! kill -0 "$archmax_pid" 2>/dev/null; then
            echo "error: archmax serve exited before answering; its log:" >&2
            cat "$archmax_log" >&2
            exit 1
        fi
        if [ -z "$ARCHMAX_BASE_URL" ]; then
            ARCHMAX_BASE_URL="$(sed -n 's/.*is listening address=\(http:\/\/[0-9.:]*\).*/\1/p' "$archmax_log" | head -n 1 || true)"
        fi
        if [ -n "$ARCHMAX_BASE_URL" ] && curl -fsS "$ARCHMAX_BASE_URL/healthz" >/dev/null 2>&1; then
            break
        fi
        sleep 0.25
    done
    if [ -z "$ARCHMAX_BASE_URL" ] || ! curl -fsS "$ARCHMAX_BASE_URL/healthz" >/dev/null 2>&1; then
        echo "error: archmax serve did not answer /healthz within a minute; its log:" >&2
        cat "$archmax_log" >&2
        exit 1
    fi
    export ARCHMAX_BASE_URL ARCHMAX_TOKEN
    echo "archmax serve: $ARCHMAX_BASE_URL (root $archmax_root)" >&2
}

archmax_serve_stop() {
    local status=$?
    if [ -n "${archmax_pid:-}" ]; then
        kill "$archmax_pid" 2>/dev/null || true
        wait "$archmax_pid" 2>/dev/null || true
    fi
    if [ "$status" -eq 0 ]; then
        rm -rf "$archmax_root"
    else
        echo "the server's log is kept: $archmax_log" >&2
    fi
    exit "$status"
}
