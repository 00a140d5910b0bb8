// `@lembas/link/harness` in node: the harness over the package's module (node.mjs).
import * as lembas from "../node.mjs";
import { makeHarness } from "./make.mjs";

export const { scriptedDevice } = makeHarness(async () => lembas);
export { memoryInstance } from "./memory-instance.mjs";
export { pair, unopenedPair } from "./socket-pair.mjs";
export { Calls, LINK_LOST, LinkError, RpcError, TimeoutError } from "../calls.mjs";
