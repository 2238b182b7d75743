# Sourced by .ci/container.sh and .ci/compose.sh (bash): podman with a configuration and
# an image store of its own, in the directory given, so a run neither reads nor leaves
# anything in the machine's podman (nothing is cached between runs) and works on
# machines like CI's:
# - `default_ulimits = []`: the default file-limit setting is refused there;
# - the `cgroupfs` cgroup manager and the `runc` runtime: there is no systemd to ask;
# - host networking: there is no container network (no netavark bridge or slirp);
# - the overlay storage driver where the kernel takes it, else `vfs` (slower, works
#   anywhere).
# Usage: podman_env DIR   (then podman and podman-compose use it; podman_env_reset
# removes every container, volume and image of it; the caller then removes DIR)
podman_env() {
    local dir="$1"
    mkdir -p "$dir/graph" "$dir/run" "$dir/tmp" "$dir/networks"
    PODMAN_ENV_DIR="$dir"
    cat >"$dir/containers.conf" <<CONF
[containers]
default_ulimits = []
netns = "host"

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
events_logfile_path = "$dir/events.log"

[network]
network_config_dir = "$dir/networks"
CONF
    export CONTAINERS_CONF="$dir/containers.conf"
    export TMPDIR="$dir/tmp"
    local driver
    for driver in overlay vfs; do
        cat >"$dir/storage.conf" <<CONF
[storage]
driver = "$driver"
graphroot = "$dir/graph"
runroot = "$dir/run"
CONF
        export CONTAINERS_STORAGE_CONF="$dir/storage.conf"
        if podman info >"$dir/podman-info.log" 2>&1; then
            echo "podman: $driver storage in $dir" >&2
            return 0
        fi
        rm -rf "${dir:?}/graph" "${dir:?}/run"
        mkdir -p "$dir/graph" "$dir/run"
    done
    echo "error: podman does not start with overlay or vfs storage; its last words:" >&2
    cat "$dir/podman-info.log" >&2
    return 1
}

# Removes what this run made in its store (never `podman system reset`, which would also
# clear the machine's shared network definitions), then any mount left under it.
# The store is named on every command (not only through CONTAINERS_STORAGE_CONF, which
# podman_env may not have exported yet when a run fails early), so these never reach the
# machine's own store.
podman_env_reset() {
    [ -n "${PODMAN_ENV_DIR:-}" ] || return 0
    local own=(--root "$PODMAN_ENV_DIR/graph" --runroot "$PODMAN_ENV_DIR/run")
    podman "${own[@]}" rm --all --force --time 5 >/dev/null 2>&1 || true
    podman "${own[@]}" volume rm --all --force >/dev/null 2>&1 || true
    podman "${own[@]}" rmi --all --force >/dev/null 2>&1 || true
    local mount
    { findmnt -rn -o TARGET | grep -F "$PODMAN_ENV_DIR/" | sort -r || true; } | while read -r mount; do
        umount -l "$mount" 2>/dev/null || true
    done
}

# Installs podman, runc and mmdebstrap (and any further packages named) with apt-get
# when one is missing; stops, loudly, when that cannot be done.
podman_env_install() {
    local missing=()
    local tool
    for tool in podman runc mmdebstrap curl python3 "$@"; do
        command -v "$tool" >/dev/null || missing+=("$tool")
    done
    if [ "${#missing[@]}" -eq 0 ] && [ -s /etc/ssl/certs/ca-certificates.crt ]; then
        return 0
    fi
    echo "installing podman runc mmdebstrap ca-certificates (missing: ${missing[*]:-the CA bundle})" >&2
    local sudo_if_needed=()
    if [ "$(id -u)" -ne 0 ]; then sudo_if_needed=(sudo); fi
    if ! { "${sudo_if_needed[@]}" apt-get update \
        && "${sudo_if_needed[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
            podman runc mmdebstrap ca-certificates curl python3 python3-venv; }; then
        echo "error: could not install podman, runc and mmdebstrap; the container checks need them" >&2
        return 1
    fi
    for tool in podman runc mmdebstrap curl python3 "$@"; do
        if ! command -v "$tool" >/dev/null; then
            echo "error: $tool is still missing after the install" >&2
            return 1
        fi
    done
}
