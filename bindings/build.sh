#!/usr/bin/env bash
# Build the wasm bindings and package them with the pinned wasm-bindgen-cli: bindings/pkg-node
# (CommonJS for node) and bindings/pkg-web (an ES module for a browser), both roles; and
# bindings/pkg-web-client, the client role alone (`--no-default-features`: Client and
# ClientDriver), which is what a web UI loads. No wasm-pack. Prints each .wasm's size.
#
# `build.sh --opt` also runs `wasm-opt -Oz` from the npm package binaryen pinned in
# package.json (`npm ci` in bindings/ first; never Debian's wasm-opt 108, which breaks
# wasm-bindgen 0.2.130's output). Off by default: measured on this build it takes ~75 s and
# makes the module 12% smaller raw but 17% larger gzipped, which is what a page downloads.
set -euo pipefail
cd "$(dirname "$0")/.."

need=0.2.130
if ! wasm-bindgen --version 2>/dev/null | grep -q " $need\$"; then
  echo "wasm-bindgen-cli $need is needed: cargo install wasm-bindgen-cli --version $need" >&2
  exit 1
fi

# Where cargo puts it: CARGO_TARGET_DIR when set (relative to the root, as cargo takes it here).
wasm=${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/wasm-release/lembas_bindings.wasm
rm -rf bindings/pkg-node bindings/pkg-web bindings/pkg-web-client
# The client alone first: both builds write the same file, so each is packaged before the next.
cargo build -p lembas-bindings --target wasm32-unknown-unknown --profile wasm-release \
  --no-default-features
wasm-bindgen --remove-name-section --target web --out-dir bindings/pkg-web-client "$wasm"
cargo build -p lembas-bindings --target wasm32-unknown-unknown --profile wasm-release
wasm-bindgen --remove-name-section --target nodejs --out-dir bindings/pkg-node "$wasm"
wasm-bindgen --remove-name-section --target web --out-dir bindings/pkg-web "$wasm"

if [ "${1:-}" = "--opt" ]; then
  opt=bindings/node_modules/.bin/wasm-opt
  [ -x "$opt" ] || { echo "no $opt: run npm ci in bindings/ first" >&2; exit 1; }
  # The features rustc's wasm32 target emits by default; wasm-opt must be told of them.
  features=(--enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext
    --enable-mutable-globals --enable-reference-types --enable-multivalue)
  for pkg in pkg-web pkg-web-client; do
    "$opt" -Oz --strip-debug --strip-producers "${features[@]}" \
      "bindings/$pkg/lembas_bindings_bg.wasm" -o "bindings/$pkg/lembas_bindings_bg.wasm"
  done
  cp bindings/pkg-web/lembas_bindings_bg.wasm bindings/pkg-node/lembas_bindings_bg.wasm
fi

for pkg in pkg-web pkg-web-client; do
  out=bindings/$pkg/lembas_bindings_bg.wasm
  raw=$(wc -c <"$out")
  gz=$(gzip -9 -c "$out" | wc -c)
  echo "$pkg/lembas_bindings_bg.wasm: $raw bytes raw, $gz bytes gzipped"
done
