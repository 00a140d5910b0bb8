// Compiled, never run: the typed JS surface (lembas.d.ts through pkg-web, driver.d.mts,
// idb.d.mts) must accept what a web UI writes against it. `npx tsc -p test-types` in bindings/.
import { DeviceDriver, ClientDriver, memoryStore } from "../driver.mjs";
import { idbStore, idbKept } from "../idb.mjs";
import * as lembas from "../pkg-web/lembas_bindings.js";
declare const ws: WebSocket;
async function f() {
  const store = await idbStore("x");
  const d = await DeviceDriver.open({ lembas, config: { seed: 1, remote: { enabled: true } }, dial: () => ws, store });
  d.start();
  const n: number = d.device.sessionCount();
  const c = await ClientDriver.open({ lembas, kept: await idbKept() });
  c.attach(ws);
  const e = await c.next((e) => e.kind === "ready");
  const id = c.input((cl, now) => cl.call("session/new", { cwd: "/w" }, now));
  const m = memoryStore(lembas);
  // The event union narrows on `kind`.
  const caps: string[] = e.kind === "ready" ? e.capabilities : [];
  for (const out of d.device.drain()) {
    if (out.type === "effect" && out.effect.kind === "persist") await store.apply(out.effect.records);
  }
  return [n, caps, id, m];
}
f();
