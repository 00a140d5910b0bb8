// Compiled, never run: the typed JS surface (lembas.d.ts and the driver classes through
// pkg-web, idb.d.mts) must accept what a web UI writes against it. `npx tsc -p test-types` in
// bindings/.
import { idbStore, idbKept } from "../idb.mjs";
import { DeviceDriver, ClientDriver, MemStore, type ClientEvent, type Effect } from "../pkg-web/lembas_bindings.js";
declare const ws: WebSocket;
async function f() {
  const store = await idbStore("x");
  const effects: Effect[] = [];
  const d = await DeviceDriver.open({
    config: { seed: 1, remote: { enabled: true } },
    dial: () => ws,
    store,
    resolvePath: async (path) => ({ path }),
    onEffect: (e) => effects.push(e),
  });
  d.start();
  const n: number = d.sessionCount();
  const phase: "queued" | "running" | "done" | undefined = d.turnState("ses_1", "t1");
  // A MemStore is a store the driver takes.
  const restarted = new DeviceDriver({ dial: () => ws, store: new MemStore() });
  // The model engine on an instance, its attachments read back from the page's own copy.
  const modelled = new DeviceDriver({
    dial: () => ws,
    model: { instance: "https://llembas.example", token: "t", engine: { max_retries: 1, sse: { max_line_bytes: 1024 } } },
    readAttachment: async (_sessionId, _fileName, max) => ({ bytes: new Uint8Array(Math.min(max, 1)), size: 1 }),
    onLog: (line: string) => void line,
  });
  const c = await ClientDriver.open({ kept: await idbKept(), onEvent: (e: ClientEvent) => void e });
  c.attach(ws);
  const e = await c.next((e) => e.kind === "ready");
  const id: number | string = c.call("session/new", { cwd: "/w" });
  const turn: string = c.prompt("ses_1", [{ type: "text", text: "hi" }]);
  // The event union narrows on `kind`.
  const caps: string[] = e.kind === "ready" ? e.capabilities : [];
  const cards = c.openCards().map((card) => c.respond(card.id, { result: {} }));
  const kept = new ClientDriver({ storage: localStorage, storageKey: "k" }).pendingDeletes();
  // Every option has a default: none at all is a driver too.
  const bare = [new ClientDriver(), await ClientDriver.open()];
  return [n, phase, restarted, modelled, caps, id, turn, cards, kept, bare];
}
f();
