// `@lembas/link` in node: the web build's module (both roles), instantiated at import from the
// .wasm beside it, so nothing needs awaiting first (`init()` resolves at once if called). One
// build serves node and the browser: the package ships the 1.6 MB module once, not twice.
import { readFileSync } from "node:fs";
import { initSync } from "./web/lembas_bindings.js";

initSync({ module: readFileSync(new URL("./web/lembas_bindings_bg.wasm", import.meta.url)) });

export * from "./web/lembas_bindings.js";
export { default } from "./web/lembas_bindings.js";
