#!/usr/bin/env bash
# Makes a base image from Debian's packages alone, for machines that reach a package
# mirror but no image registry: mmdebstrap builds a root filesystem (the `essential`
# variant, Debian's smallest bootable set, plus the packages named) into a tarball, and
# `podman import` turns it into a local image. The fleet's proxy and database images
# (deploy/proxy/Containerfile, deploy/images/postgres/Containerfile) start FROM these.
#
# Usage: deploy/images/debian-rootfs.sh IMAGE PACKAGE...
#   e.g. deploy/images/debian-rootfs.sh localhost/archmax-base-nginx:bookworm nginx-light
#   DEBIAN_SUITE   the release (default bookworm)
#   DEBIAN_MIRROR  the package mirror (default http://deb.debian.org/debian)
# Runs as root (mmdebstrap's root mode). Documentation, manual pages and translations are
# left out of the root filesystem; nothing is cached between runs.
set -euo pipefail
if [ "$#" -lt 2 ]; then
    echo "usage: $0 IMAGE PACKAGE..." >&2
    exit 2
fi
image="$1"
shift
packages="$(IFS=,; echo "$*")"
suite="${DEBIAN_SUITE:-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
for tool in mmdebstrap podman; do
    if ! command -v "$tool" >/dev/null; then
        echo "error: $tool is not installed (apt-get install $tool)" >&2
        exit 1
    fi
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! mmdebstrap --quiet --variant=essential --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$work/rootfs.tar" "$mirror" >"$work/mmdebstrap.log" 2>&1; then
    echo "error: mmdebstrap could not make the $suite root filesystem with $packages; its log:" >&2
    tail -n 40 "$work/mmdebstrap.log" >&2
    exit 1
fi
podman import --quiet "$work/rootfs.tar" "$image" >/dev/null
echo "$image: Debian $suite with $packages"
