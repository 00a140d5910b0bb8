#!/usr/bin/env bash
# Build the wasm bindings and package them with the pinned wasm-bindgen-cli: bindings/pkg-node
# (CommonJS for node) and bindings/pkg-web (an ES module for a browser). No wasm-pack, and no
# wasm-opt (Debian's breaks wasm-bindgen 0.2.130's output). Prints the .wasm size.
set -euo pipefail
cd "$(dirname "$0")/.."

need=0.2.130
if ! wasm-bindgen --version 2>/dev/null | grep -q " $need\$"; then
  echo "wasm-bindgen-cli $need is needed: cargo install wasm-bindgen-cli --version $need" >&2
  exit 1
fi

cargo build -p lembas-bindings --target wasm32-unknown-unknown --profile wasm-release
wasm=target/wasm32-unknown-unknown/wasm-release/lembas_bindings.wasm
rm -rf bindings/pkg-node bindings/pkg-web
wasm-bindgen --remove-name-section --target nodejs --out-dir bindings/pkg-node "$wasm"
wasm-bindgen --remove-name-section --target web --out-dir bindings/pkg-web "$wasm"

out=bindings/pkg-web/lembas_bindings_bg.wasm
raw=$(wc -c <"$out")
gz=$(gzip -9 -c "$out" | wc -c)
echo "lembas_bindings_bg.wasm: $raw bytes raw, $gz bytes gzipped"
