// `@lembas/link/client` in node: the client-only module, instantiated at import (see node.mjs).
import { readFileSync } from "node:fs";
import { initSync } from "./client/lembas_bindings.js";

initSync({ module: readFileSync(new URL("./client/lembas_bindings_bg.wasm", import.meta.url)) });

export * from "./client/lembas_bindings.js";
export { default } from "./client/lembas_bindings.js";
