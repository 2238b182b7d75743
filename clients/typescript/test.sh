#!/usr/bin/env bash
# The TypeScript client's checks against a live `archmax serve` on the tape in
# clients/testdata/workspace (a fresh temporary root, a port the system picks, a token):
#   1. src/schema.d.ts is exactly what openapi-typescript (pinned in package-lock.json)
#      makes of the live server's /v1/openapi.json, so the types cannot drift from the API;
#   2. the package builds with tsc to dist/;
#   3. the tests (node:test) pass.
#
# Usage: clients/typescript/test.sh   (from anywhere; CI calls it from .ci/run)
#   ARCHMAX_BIN  the archmax binary to serve (default: built here, debug)
# To take a changed API's types: run with ARCHMAX_UPDATE_SCHEMA=1, which writes the new
# src/schema.d.ts instead of failing, then commit it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

for tool in node npm; do
    if ! command -v "$tool" >/dev/null; then
        echo "error: $tool is not installed; the TypeScript client needs Node.js 20 or newer with npm" >&2
        exit 1
    fi
done
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    echo "error: Node.js $(node --version) is too old; the TypeScript client needs 20 or newer" >&2
    exit 1
fi

cd "$here"
# Exactly the locked packages.
npm ci --no-audit --no-fund --loglevel=error

# shellcheck source=../testdata/serve.sh
source "$here/../testdata/serve.sh"
archmax_serve_start

generated="$archmax_root/schema.d.ts"
curl -fsS "$ARCHMAX_BASE_URL/v1/openapi.json" -o "$archmax_root/openapi.json"
npx --no-install openapi-typescript "$archmax_root/openapi.json" --empty-objects-unknown -o "$generated" >/dev/null
if ! cmp -s "$generated" src/schema.d.ts; then
    if [ "${ARCHMAX_UPDATE_SCHEMA:-}" = 1 ]; then
        cp "$generated" src/schema.d.ts
        echo "typescript client: src/schema.d.ts updated from the server's OpenAPI document" >&2
    else
        echo "error: src/schema.d.ts differs from what the server's /v1/openapi.json generates:" >&2
        diff -u src/schema.d.ts "$generated" | head -n 60 >&2 || true
        echo "run ARCHMAX_UPDATE_SCHEMA=1 clients/typescript/test.sh and commit src/schema.d.ts" >&2
        exit 1
    fi
fi
echo "typescript client: src/schema.d.ts matches the server's OpenAPI document" >&2

rm -rf dist build-test
npm run --silent build
npm test --silent
