// A wasm DEVICE in the page with its store in IndexedDB, linked in memory to a wasm client
// (a page cannot take a device's link, and a browser WebSocket cannot send its token). The
// test runs `phase1` (a session, a turn, then a delete made while unlinked), reloads the page,
// and runs `phase2` (the device restored from IndexedDB: the kept session's ledger is there, and the pending
// delete goes out on the next link and is then forgotten).
import init, { DeviceDriver, ClientDriver } from "../pkg-web/lembas_bindings.js";
import { idbStore } from "../idb.mjs";
import { pair } from "../npm/harness/socket-pair.mjs";

const ROOT = "/home/dev/work";
const config = {
  seed: 9,
  remote: { enabled: true, roots: [ROOT], trusted: [ROOT] },
  backoff: { initialMs: 20, maxMs: 100 },
  sessions: { deleteConfirmMs: 100 },
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function setup() {
  await init();
  const store = await idbStore("lembas-test-device");
  const client = new ClientDriver({ config: { seed: 3 } });
  const frames = [];
  let online = true;
  let clientEnd;
  const dial = () => {
    if (!online) throw new Error("offline");
    const [d, c] = pair(frames);
    clientEnd = c;
    client.attach(c);
    return d;
  };
  const device = await DeviceDriver.open({ config, store, dial });
  return { store, client, device, frames, setOnline: (v) => (online = v), cut: () => clientEnd?.close(1001) };
}

window.phase1 = async () => {
  const { store, client, device, setOnline, cut } = await setup();
  const ready = client.next((e) => e.kind === "ready");
  device.start();
  await ready;
  const session = async () => {
    const made = client.next((e) => e.kind === "answer");
    client.call("session/new", { cwd: ROOT });
    return (await made).result.sessionId;
  };
  const kept = await session();
  const gone = await session();
  const answered = client.next((e) => e.kind === "prompt_answered");
  client.prompt(kept, [{ type: "text", text: "say kept in IndexedDB" }], "k1");
  await answered;
  // Unlinked: the link is cut and every redial fails; then the device deletes the session.
  setOnline(false);
  cut();
  await sleep(100);
  device.deleteSession(gone);
  await sleep(200);
  const tables = (await store.entries()).map((e) => e.table);
  device.stop();
  return { kept, gone, tables };
};

window.phase2 = async (kept, gone) => {
  const { store, client, device, frames } = await setup();
  const before = (await store.entries()).map((e) => e.table);
  const ledger = device.turnState(kept, "k1");
  const sessions = device.sessionCount();
  const ready = client.next((e) => e.kind === "ready");
  device.start();
  await ready;
  await sleep(400);
  const sent = frames.some((f) => f.includes("_lembas/session/deleted") && f.includes(gone));
  const after = (await store.entries()).map((e) => e.table);
  device.stop();
  return { before, ledger, sessions, sent, after, unreadable: device.unreadable() };
};
