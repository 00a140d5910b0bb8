#!/usr/bin/env bash
# Assemble the npm package `@lembas/link` in bindings/dist/package (ignored) from bindings/npm
# (its package.json, entries, harness and README), idb.mjs, and the web builds bindings/build.sh
# made: pkg-web as web/ (both roles; node.mjs instantiates the same .wasm in node, so it is
# shipped once) and pkg-web-client as client/. The version is the Cargo workspace's.
#
# `pack.sh --tarball` also runs `npm pack` into bindings/dist and prints the tarball's size.
# Prints each module's size raw and gzipped.
set -euo pipefail
cd "$(dirname "$0")"

for pkg in pkg-web pkg-web-client; do
  [ -f "$pkg/lembas_bindings_bg.wasm" ] || { echo "no bindings/$pkg: run bindings/build.sh first" >&2; exit 1; }
done
version=$(cargo metadata --no-deps --format-version 1 --manifest-path ../Cargo.toml \
  | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () =>
      console.log(JSON.parse(s).packages.find((p) => p.name === "lembas-bindings").version))')

out=dist/package
rm -rf dist
mkdir -p "$out/web" "$out/client"
cp -R npm/. "$out/"
for f in lembas_bindings.js lembas_bindings.d.ts lembas_bindings_bg.wasm; do
  cp "pkg-web/$f" "$out/web/$f"
  cp "pkg-web-client/$f" "$out/client/$f"
done
cp idb.mjs "$out/idb.mjs"
# idb.d.mts names its types' module by its place in bindings/; in the package it is web/.
sed 's#"./pkg-web/lembas_bindings.js"#"./web/lembas_bindings.js"#' idb.d.mts >"$out/idb.d.mts"
grep -q '"./web/lembas_bindings.js"' "$out/idb.d.mts" || { echo "idb.d.mts: its import was not rewritten" >&2; exit 1; }
node -e '
  const fs = require("node:fs");
  const file = process.argv[1];
  const p = JSON.parse(fs.readFileSync(file, "utf8"));
  fs.writeFileSync(file, JSON.stringify({ name: p.name, version: process.argv[2], ...p }, null, 2) + "\n");
' "$out/package.json" "$version"

for mod in web client; do
  wasm=$out/$mod/lembas_bindings_bg.wasm
  js=$out/$mod/lembas_bindings.js
  echo "@lembas/link $version $mod/: .wasm $(wc -c <"$wasm") B raw, $(gzip -9 -c "$wasm" | wc -c) B gzipped;" \
    ".js $(wc -c <"$js") B raw, $(gzip -9 -c "$js" | wc -c) B gzipped"
done

if [ "${1:-}" = "--tarball" ]; then
  tarball=$(cd dist && npm pack ./package --silent)
  echo "dist/$tarball: $(wc -c <"dist/$tarball") B"
fi
