#!/usr/bin/env bash
# CI for the container image (deploy/Containerfile): builds it with podman from the release
# binary, runs it on the host's network on a free port, waits for /healthz, runs one
# session over HTTP on a tape to completion (start, park at the decision, decide), and
# checks that the image's own HEALTHCHECK reports healthy. The container, the images and
# podman's store (a temporary one, see deploy/images/podman-env.sh) are removed at the end,
# whatever happened.
#
# Usage: .ci/container.sh   (from anywhere, as root or with sudo)
#   ARCHMAX_BIN  the release binary to put in the image (default target/release/archmax;
#                it is never built here: CI builds it first)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
# shellcheck source=../deploy/images/podman-env.sh
. deploy/images/podman-env.sh

fail() {
    echo "error: container check: $*" >&2
    exit 1
}
started=$SECONDS
binary="${ARCHMAX_BIN:-target/release/archmax}"
[ -x "$binary" ] || fail "$binary is not an executable; build it first (cargo build --release -p archmax-cli) or set ARCHMAX_BIN"
podman_env_install

work="$(mktemp -d)"
name="archmax-ci-$$"
image="localhost/archmax:ci-$$"
cleanup() {
    local status=$?
    set +e
    if [ "$status" -ne 0 ] && podman container exists "$name" 2>/dev/null; then
        echo "--- the container's log ---" >&2
        podman logs "$name" >&2 2>&1 || true
    fi
    podman rm --force --time 5 "$name" >/dev/null 2>&1 || true
    podman_env_reset
    rm -rf "$work" || echo "warning: could not remove $work" >&2
    exit "$status"
}
trap cleanup EXIT
podman_env "$work/podman"

# The image: the binary and its libraries, staged, then built (the docker format keeps
# the HEALTHCHECK).
deploy/images/archmax-context.sh "$binary" "$work/context"
podman build --quiet --format docker -f deploy/Containerfile -t "$image" "$work/context" >/dev/null \
    || fail "podman build of deploy/Containerfile failed"
size="$(podman image inspect --format '{{.Size}}' "$image")"
user="$(podman image inspect --format '{{.Config.User}}' "$image")"
health="$(podman image inspect --format '{{if .Config.Healthcheck}}{{.Config.Healthcheck.Test}}{{end}}' "$image")"
echo "image $image: $((size / 1024 / 1024)) MiB, user $user, health check $health"
[ "$user" = "65532:65532" ] || fail "the image runs as '$user', not the unprivileged 65532:65532"
[ -n "$health" ] || fail "the image has no HEALTHCHECK (was it built with --format docker?)"

# The workspace: the fleet example (a workflow that parks at a human decision, and its
# tape), writable by the image's user for the file store's sessions/.
workspace="$work/ws"
cp -R deploy/example/. "$workspace/"
chown -R 65532:65532 "$workspace"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
token="ci-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
podman run --detach --name "$name" --network host \
    --volume "$workspace:/ws:Z" \
    --env ARCHMAX_SERVE_TOKEN="$token" \
    --env ARCHMAX_PROBE_URL="$base/healthz" \
    "$image" serve --root /ws --listen "127.0.0.1:$port" --tape /ws/tape.yaml >/dev/null \
    || fail "podman run failed"

for _ in $(seq 1 120); do
    if curl -fsS --max-time 2 "$base/healthz" >/dev/null 2>&1; then break; fi
    [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] \
        || fail "the container exited before answering /healthz"
    sleep 0.5
done
curl -fsS --max-time 5 "$base/healthz" >/dev/null || fail "$base/healthz did not answer within a minute"

# One session over HTTP: it parks at the decision, and the decision completes it.
api() {
    local method="$1" path="$2" body="${3:-}"
    local args=(-sS --max-time 90 -X "$method" -H "Authorization: Bearer $token" -w '\n%{http_code}')
    [ -z "$body" ] || args+=(-H 'Content-Type: application/json' --data "$body")
    curl "${args[@]}" "$base$path"
}
# Checks one answer (body, then its status on the last line) with a Python expression
# over `status` and the parsed `body`.
expect() {
    local answer="$1" check="$2" what="$3"
    ANSWER="$answer" python3 -c '
import json, os, sys
text = os.environ["ANSWER"]
body, _, status = text.rpartition("\n")
body = json.loads(body) if body.strip() else None
status = int(status)
sys.exit(0 if ('"$check"') else 1)
' || fail "$what: got $answer"
}
answer="$(api POST '/v1/workflows/desk/sessions?wait=60' '{"message":"Pay invoice 7.","sessionId":"ci-image"}')"
expect "$answer" 'status == 200 and body["status"] == "awaiting_decision"' "the session did not park at the decision"
answer="$(api POST '/v1/sessions/ci-image/decide?wait=60' '{"to":"done","comment":"paid by the image check"}')"
expect "$answer" 'status == 200 and body["status"] == "completed" and body["turn"]["reply"] == "Your payout was paid."' \
    "the decision did not complete the session"
answer="$(api GET /v1/sessions/ci-image)"
expect "$answer" 'status == 200 and body["status"] == "completed"' "the completed session does not read back"
[ -d "$workspace/sessions" ] || fail "the file store wrote nothing under the mounted workspace"

# The image's own health check, run by podman.
podman healthcheck run "$name" >/dev/null || fail "podman healthcheck run reports the container unhealthy"
state="$(podman inspect --format '{{.State.Health.Status}}' "$name")"
[ "$state" = healthy ] || fail "podman reports the container's health as '$state'"
echo "container check: the image answers /healthz, completes a session on its tape and is healthy ($((SECONDS - started)) s)"
