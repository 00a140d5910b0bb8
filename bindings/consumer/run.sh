#!/usr/bin/env bash
# @lembas/link as a web UI's project gets it: the tarball bindings/pack.sh --tarball made,
# installed into a fresh temporary project (copied in by npm: no link to the workspace), and
# there a node test importing it by name for both roles, a TypeScript compile of a consumer,
# and a page in headless Chromium importing it through an import map. The tools (tsc,
# playwright-core) are bindings/node_modules' (npm ci in bindings/ first), not the project's.
set -euo pipefail
bindings=$(cd "$(dirname "$0")/.." && pwd)
shopt -s nullglob
tarballs=("$bindings"/dist/lembas-link-*.tgz)
[ ${#tarballs[@]} -eq 1 ] || { echo "want one bindings/dist/lembas-link-*.tgz: run bindings/pack.sh --tarball" >&2; exit 1; }
[ -x "$bindings/node_modules/.bin/tsc" ] || { echo "no tsc in bindings/node_modules: run npm ci in bindings/" >&2; exit 1; }

project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT
cp "$bindings"/consumer/*.{mjs,mts,html,json} "$project/"
cd "$project"
npm init -y >/dev/null
# The package has no dependencies: nothing is fetched.
npm install --offline --no-audit --no-fund "${tarballs[0]}" >/dev/null
installed=node_modules/@lembas/link
[ -d "$installed" ] && [ ! -L "$installed" ] || { echo "$installed is not a copy of the tarball" >&2; exit 1; }
echo "installed $(node -p 'require("@lembas/link/package.json").version') from ${tarballs[0]##*/} into $project"

"$bindings/node_modules/.bin/tsc" -p tsconfig.json
echo "consumer.mts compiles against the package's types"
LEMBAS_NODE_MODULES="$bindings/node_modules" node --test node.test.mjs browser.test.mjs
