// `@lembas/link/harness` in a browser: the harness over the web module (both roles), which it
// instantiates on first use (from web/lembas_bindings_bg.wasm; a page that did already is fine).
import init, * as lembas from "../web/lembas_bindings.js";
import { makeHarness } from "./make.mjs";

export const { scriptedDevice } = makeHarness(async () => (await init(), lembas));
export { memoryInstance } from "./memory-instance.mjs";
export { pair, unopenedPair } from "./socket-pair.mjs";
export { Calls, LINK_LOST, LinkError, RpcError, TimeoutError } from "../calls.mjs";
