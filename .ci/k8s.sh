#!/usr/bin/env bash
# The Kubernetes manifests of deploy/k8s against the Kubernetes schemas, strictly (an
# unknown field is an error, not a warning), with kubernetes-validate from PyPI, pinned in
# deploy/k8s/validator-requirements.txt. The validator carries the schemas, so after its
# install this runs offline. What a schema cannot see (the grace period against --grace,
# the probes against the server's routes, archmax.toml against its reader) is checked by
# `cargo test -p archmax-cli --test deploy`.
#
# Usage: .ci/k8s.sh   (from anywhere; CI calls it from .ci/run)
#   K8S_VALIDATE_VENV   where the pinned virtualenv lives (default target/k8s-validate-venv)
#   K8S_VERSIONS        the Kubernetes versions to validate against (default "1.30.0 1.37.0":
#                       the oldest the manifests support and the newest the validator knows)
#
# Before it trusts a pass, it shows the validator failing on broken copies of the
# Deployment (a misspelled field, a wrong type) and on a kind it has no schema for.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
k8s="$repo/deploy/k8s"
requirements="$k8s/validator-requirements.txt"
venv="${K8S_VALIDATE_VENV:-${CARGO_TARGET_DIR:-$repo/target}/k8s-validate-venv}"
read -r -a versions <<<"${K8S_VERSIONS:-1.30.0 1.37.0}"

if ! command -v python3 >/dev/null; then
    echo "error: python3 is not installed; the manifest validator needs Python 3.9 or newer with venv" >&2
    exit 1
fi
# The virtualenv, with exactly the pinned requirements (reinstalled when they change).
if [ ! -x "$venv/bin/kubernetes-validate" ] || ! cmp -s "$requirements" "$venv/requirements.txt"; then
    echo "k8s: creating $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
    cp "$requirements" "$venv/requirements.txt"
fi

# Validates the files named against Kubernetes `$version`; passes only when the validator
# passes and says nothing (with --quiet it speaks only of warnings and failures: a kind
# without a schema is a warning that would otherwise pass).
validate() {
    local said
    if ! said="$("$venv/bin/kubernetes-validate" --strict --quiet --kubernetes-version "$version" "$@" 2>&1)"; then
        printf '%s\n' "$said"
        return 1
    fi
    if [ -n "$said" ]; then
        printf '%s\n' "$said"
        return 1
    fi
}

# The manifests are exactly what kustomization.yaml lists (the deploy test checks that
# it lists every file here).
mapfile -t manifests < <("$venv/bin/python" - "$k8s/kustomization.yaml" <<'PY'
import sys, yaml
with open(sys.argv[1]) as file:
    for resource in yaml.safe_load(file)["resources"]:
        print(resource)
PY
)
if [ "${#manifests[@]}" -eq 0 ]; then
    echo "error: deploy/k8s/kustomization.yaml lists no resources" >&2
    exit 1
fi

# The validator must refuse what is wrong.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
sed 's/readinessProbe:/readinesProbe:/' "$k8s/deployment.yaml" >"$scratch/misspelled.yaml"
sed 's/replicas: [0-9]*/replicas: two/' "$k8s/deployment.yaml" >"$scratch/mistyped.yaml"
sed 's/^kind: Deployment/kind: Deploymint/' "$k8s/deployment.yaml" >"$scratch/unknown-kind.yaml"
for broken in misspelled mistyped unknown-kind; do
    if cmp -s "$k8s/deployment.yaml" "$scratch/$broken.yaml"; then
        echo "error: the $broken copy is unchanged; update .ci/k8s.sh's broken copies to the Deployment" >&2
        exit 1
    fi
    if version="${versions[-1]}" validate "$scratch/$broken.yaml" >/dev/null; then
        echo "error: the validator accepted a broken Deployment ($broken); the check cannot be trusted" >&2
        exit 1
    fi
done

status=0
for version in "${versions[@]}"; do
    for manifest in "${manifests[@]}"; do
        if validate "$k8s/$manifest"; then
            echo "k8s: $manifest is valid for Kubernetes $version (strict)"
        else
            echo "error: deploy/k8s/$manifest does not validate against Kubernetes $version" >&2
            status=1
        fi
    done
done
exit "$status"
