#!/usr/bin/env bash
# CI for the fleet (deploy/compose.yaml): builds its images (Debian root filesystems made
# by mmdebstrap for nginx and PostgreSQL, the release binary on scratch for the runners),
# brings it up with podman-compose, waits for every service's health, then:
# - starts a session through the proxy (it parks at a human decision), noting which
#   runner served it;
# - opens the session's event stream through the proxy and sees its history arrive
#   while the stream stays open (so the proxy does not buffer it);
# - decides the session through the OTHER runner, directly, and sees that runner's
#   `decided` event arrive on the stream held through the proxy (the runners share the
#   PostgreSQL store and its notifications);
# - reads the completed session back through the proxy.
# The fleet is taken down and podman's temporary store removed at the end, whatever
# happened. The fleet uses the host's network on fixed ports (15432, 18787, 18788,
# 18080): they must be free.
#
# Usage: .ci/compose.sh   (from anywhere, as root or with sudo)
#   ARCHMAX_BIN  the release binary to put in the image (default target/release/archmax;
#                never built here)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
# shellcheck source=../deploy/images/podman-env.sh
. deploy/images/podman-env.sh

fail() {
    echo "error: fleet check: $*" >&2
    exit 1
}
started=$SECONDS
binary="${ARCHMAX_BIN:-target/release/archmax}"
[ -x "$binary" ] || fail "$binary is not an executable; build it first (cargo build --release -p archmax-cli) or set ARCHMAX_BIN"
podman_env_install
python3 -c 'import venv' 2>/dev/null || fail "python3 has no venv module (apt-get install python3-venv)"
for port in 15432 18787 18788 18080; do
    if python3 -c 'import socket, sys; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
        continue
    fi
    fail "port $port is in use; the fleet runs on the host's network and needs 15432, 18787, 18788 and 18080"
done

work="$(mktemp -d)"
project="archmax-ci-$$"
compose=()
cleanup() {
    local status=$?
    set +e
    if [ "${#compose[@]}" -gt 0 ]; then
        if [ "$status" -ne 0 ]; then
            echo "--- the fleet's logs ---" >&2
            "${compose[@]}" logs >&2 2>&1 || true
        fi
        "${compose[@]}" down --volumes --timeout 10 >/dev/null 2>&1 || true
    fi
    podman_env_reset
    rm -rf "$work" || echo "warning: could not remove $work" >&2
    exit "$status"
}
trap cleanup EXIT
podman_env "$work/podman"

# podman-compose, pinned, in a virtualenv of this run.
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r deploy/requirements.txt \
    || fail "could not install podman-compose from deploy/requirements.txt"

# The images. The two Debian root filesystems are made side by side (each is mostly a
# download); the runner image is the release binary and its libraries on scratch.
deploy/images/debian-rootfs.sh localhost/archmax-base-nginx:bookworm nginx-light >"$work/nginx.log" 2>&1 &
nginx_build=$!
deploy/images/debian-rootfs.sh localhost/archmax-base-postgres:bookworm postgresql-15 >"$work/postgres.log" 2>&1 &
postgres_build=$!
deploy/images/archmax-context.sh "$binary" "$work/context"
podman build --quiet --format docker -f deploy/Containerfile -t localhost/archmax:latest "$work/context" >/dev/null \
    || fail "podman build of deploy/Containerfile failed"
wait "$nginx_build" || { cat "$work/nginx.log" >&2; fail "the nginx base image was not made"; }
wait "$postgres_build" || { cat "$work/postgres.log" >&2; fail "the PostgreSQL base image was not made"; }
cat "$work/nginx.log" "$work/postgres.log"
echo "images ready ($((SECONDS - started)) s)"

ARCHMAX_SERVE_TOKEN="ci-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
ARCHMAX_DB_PASSWORD="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
export ARCHMAX_SERVE_TOKEN ARCHMAX_DB_PASSWORD
compose=("$work/venv/bin/podman-compose" --project-name "$project" -f deploy/compose.yaml)
"${compose[@]}" build >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "podman-compose build failed"; }
# Health. Without systemd podman schedules no health checks, so they are run here
# (`podman healthcheck run` records the result); and podman-compose with podman 4.3
# ignores `condition: service_healthy`, so the services come up in their order: the
# database, then the runners on it, then the proxy.
healthy() {
    local container="${project}_$1_1"
    podman healthcheck run "$container" >/dev/null 2>&1 || true
    [ "$(podman inspect --format '{{.State.Health.Status}}' "$container" 2>/dev/null)" = healthy ]
}
up() {
    "${compose[@]}" up -d "$@" >>"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; fail "podman-compose up -d $* failed"; }
}
wait_healthy() {
    local service
    for _ in $(seq 1 120); do
        sleep 1
        for service in "$@"; do
            healthy "$service" || continue 2
        done
        return 0
    done
    for service in "$@"; do
        healthy "$service" || fail "$service is not healthy after 120 checks"
    done
}
up postgres
wait_healthy postgres
up runner-a runner-b
wait_healthy runner-a runner-b
up proxy
for _ in $(seq 1 60); do
    if curl -fsS --max-time 2 http://127.0.0.1:18080/readyz >/dev/null 2>&1; then break; fi
    sleep 0.5
done
curl -fsS --max-time 5 http://127.0.0.1:18080/readyz >/dev/null || fail "the proxy does not answer /readyz on 18080"
echo "fleet healthy ($((SECONDS - started)) s)"

# The session, the stream and the decision, in one Python program (it holds the stream
# open while it decides). Each read on the stream gives up after 20 s; the whole
# program after three minutes, in case a buffering proxy trickles keep-alives.
timeout 180 python3 - <<'PYTHON' || fail "the session through the proxy and the other runner did not go as expected (above; status 124 is the three-minute limit)"
import http.client, json, os, sys

token = os.environ["ARCHMAX_SERVE_TOKEN"]
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
runners = {"127.0.0.1:18787", "127.0.0.1:18788"}

def call(port, method, path, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=90)
    connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    response = connection.getresponse()
    text = response.read().decode()
    return response.status, json.loads(text) if text else None, response.getheader("X-Archmax-Upstream")

def check(condition, message):
    if not condition:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(1)

status, body, upstream = call(18080, "POST", "/v1/workflows/desk/sessions?wait=60",
                              {"message": "Pay invoice 12.", "sessionId": "ci-fleet"})
check(status == 200 and body["status"] == "awaiting_decision", f"start through the proxy: {status} {body}")
check(upstream in runners, f"the proxy names no runner it used: {upstream!r}")
other = (runners - {upstream}).pop()
print(f"started through the proxy on {upstream}; deciding through {other}")

# The event stream through the proxy: its history (up to `parked`) must arrive while the
# stream is open, and the other runner's decision must follow on it.
stream = http.client.HTTPConnection("127.0.0.1", 18080, timeout=20)
stream.request("GET", "/v1/sessions/ci-fleet/events", headers={"Authorization": f"Bearer {token}"})
events = stream.getresponse()
check(events.status == 200, f"the event stream through the proxy answered {events.status}")

def next_event():
    data = None
    while True:
        try:
            line = events.readline()
        except TimeoutError:
            check(False, "no event arrived through the proxy within 20 s while the stream was open: is it buffering?")
        check(line != b"", "the event stream through the proxy ended early")
        line = line.decode().rstrip("\r\n")
        if line.startswith("data:"):
            data = json.loads(line[5:].strip())
        elif line == "" and data is not None:
            return data

while next_event()["event"] != "parked":
    pass
status, body, _ = call(int(other.rsplit(":", 1)[1]), "POST", "/v1/sessions/ci-fleet/decide?wait=60",
                       {"to": "done", "comment": "decided on the other runner"})
check(status == 200 and body["status"] == "completed", f"decide through {other}: {status} {body}")
while next_event()["event"] != "decided":
    pass
print("the stream through the proxy delivered the other runner's decision")
stream.close()

status, body, _ = call(18080, "GET", "/v1/sessions/ci-fleet")
check(status == 200 and body["status"] == "completed", f"the session read through the proxy: {status} {body}")
PYTHON
echo "fleet check: a session started through the proxy, decided on the other runner, completed ($((SECONDS - started)) s)"
