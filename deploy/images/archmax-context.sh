#!/usr/bin/env bash
# Stages the build context of the archmax image (deploy/Containerfile): the release
# binary and exactly the shared libraries `ldd` lists for it (the loader included), each
# at the path the binary looks for it, plus the CA bundle (model endpoints and managed
# PostgreSQL are reached over TLS, verified against the system's roots), a passwd entry
# for the image's user and a /tmp. Nothing else: the image has no shell and no package
# manager, so there is nothing in it to patch but the binary and its libraries.
#
# Usage: deploy/images/archmax-context.sh BINARY DIR
#   BINARY  the release build (target/release/archmax; never rebuilt here)
#   DIR     the context to write (emptied first); then
#           podman build --format docker -f deploy/Containerfile -t archmax DIR
set -euo pipefail
if [ "$#" -ne 2 ]; then
    echo "usage: $0 BINARY DIR" >&2
    exit 2
fi
binary="$1"
context="$2"
if [ ! -x "$binary" ]; then
    echo "error: $binary is not an executable; build it first (cargo build --release -p archmax-cli)" >&2
    exit 1
fi
bundle=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$bundle" ]; then
    echo "error: $bundle is missing; install the ca-certificates package" >&2
    exit 1
fi
# Only a context this script made is emptied: never a folder of something else (a typo
# such as `.` or `~` as DIR must not delete it).
if [ -e "$context" ] && [ -n "$(ls -A "$context" 2>/dev/null)" ] && [ ! -d "$context/rootfs" ]; then
    echo "error: $context is not empty and is not an image context this script made; give a new or empty folder" >&2
    exit 1
fi
rm -rf "${context:?}/rootfs"
root="$context/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/ws"
chmod 1777 "$root/tmp"
cp "$binary" "$root/usr/local/bin/archmax"
cp "$bundle" "$root/etc/ssl/certs/ca-certificates.crt"
# `ldd` prints `name => /path (address)` for each library and `/path (address)` for the
# loader; the vDSO has no file. A library it cannot find would fail at start: stop here.
listing="$(ldd "$binary" 2>&1 || true)"
if grep -q 'not found' <<<"$listing"; then
    echo "error: $binary needs libraries this machine lacks:" >&2
    grep 'not found' <<<"$listing" >&2
    exit 1
fi
libraries=0
while read -r library; do
    # Copied under their own path, symbolic links resolved to the file they name.
    mkdir -p "$root$(dirname "$library")"
    cp -L "$library" "$root$library"
    libraries=$((libraries + 1))
done < <(grep -o '/[^ ]*' <<<"$listing" | sort -u)
# The image's user: a fixed, unprivileged id that owns nothing in the image.
printf 'root:x:0:0:root:/:/nonexistent\narchmax:x:65532:65532:archmax:/ws:/nonexistent\n' >"$root/etc/passwd"
printf 'root:x:0:\narchmax:x:65532:\n' >"$root/etc/group"
echo "$context: archmax and $libraries libraries ($(du -sh "$root" | cut -f1))"
