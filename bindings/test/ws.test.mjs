// A wasm DeviceDriver over the npm `ws` package, dialling a loopback WebSocket server in this
// test whose accepted sockets are driven by a wasm ClientDriver: the device sends its token in
// `Authorization` (which a browser cannot), the link comes up, a session is made and a prompt
// is answered; then the device process "restarts" from its store and the client's delete made
// while it was away is delivered on the next link.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { DeviceDriver, ClientDriver, MemStore } = require("../pkg-node/lembas_bindings.js");
const { WebSocket, WebSocketServer } = require("ws");

const ROOT = "/home/dev/work";
const TOKEN = "dev_token_for_tests";
const config = {
  seed: 11,
  host: "wasmbox",
  platform: "node",
  remote: { enabled: true, roots: [ROOT], trusted: [ROOT] },
  models: [{ id: "lembas/default", instance: true }],
  backoff: { initialMs: 20, maxMs: 200 },
};

/** A loopback server that hands every authorized link to `client`. */
async function server(client) {
  const wss = new WebSocketServer({
    host: "127.0.0.1",
    port: 0,
    verifyClient: (info) => info.req.headers.authorization === `Bearer ${TOKEN}`,
  });
  await new Promise((r) => wss.on("listening", r));
  wss.on("connection", (socket) => client.attach(socket));
  return { wss, url: `ws://127.0.0.1:${wss.address().port}/api/devices/link` };
}

test("a wasm device over ws links, runs a prompt, and keeps its ledger and deletes across a restart", async () => {
  const storage = new Map();
  const localStorage = { getItem: (k) => storage.get(k), setItem: (k, v) => storage.set(k, v) };
  const client = new ClientDriver({ config: { seed: 2 }, storage: localStorage });
  const { wss, url } = await server(client);
  // A store in JS that outlives the device (a MemStore is one), so it can restart from it.
  const store = new MemStore();
  const dial = () => new WebSocket(url, { headers: { Authorization: `Bearer ${TOKEN}` } });
  let device = new DeviceDriver({ config, store, dial });
  try {
    const ready = client.next((e) => e.kind === "ready");
    device.start();
    const r = await ready;
    assert.ok(r.capabilities.includes("turns"));

    const made = client.next((e) => e.kind === "answer");
    client.call("session/new", { cwd: ROOT });
    const sessionId = (await made).result.sessionId;

    const answered = client.next((e) => e.kind === "prompt_answered");
    const turn = client.prompt(sessionId, [{ type: "text", text: "think about it\nsleep 30\nsay hello from wasm" }], "t1");
    const a = await answered;
    assert.equal(a.turnId, turn);
    assert.equal(a.result.stopReason, "end_turn");
    assert.equal(device.turnState(sessionId, "t1"), "done");

    // The device process dies; the client deletes the session meanwhile (kept in storage).
    const down = new Promise((r) => setTimeout(r, 50));
    device.stop();
    await down;
    client.deleteSession(sessionId);
    assert.deepEqual(JSON.parse(storage.get("lembas.pendingDeletes")), [{ sessionId, refusals: 0 }]);

    // A page reload: a new client from the same storage; a new device from the same store.
    client.stop();
    const reloaded = new ClientDriver({ config: { seed: 3 }, storage: localStorage });
    wss.removeAllListeners("connection");
    wss.on("connection", (socket) => reloaded.attach(socket));
    assert.deepEqual(reloaded.pendingDeletes(), [{ sessionId, refusals: 0 }]);
    const deleted = reloaded.next((e) => e.kind === "deleted");
    device = new DeviceDriver({ config, store, dial });
    assert.deepEqual(device.unreadable(), []);
    assert.equal(device.turnState(sessionId, "t1"), "done", "the ledger survived the restart");
    device.start();
    const d = await deleted;
    assert.equal(d.sessionId, sessionId);
    assert.equal(d.existed, true);
    assert.deepEqual(JSON.parse(storage.get("lembas.pendingDeletes")), []);
    assert.equal(device.sessionCount(), 0);
    reloaded.stop();
  } finally {
    device.stop();
    client.stop();
    await new Promise((r) => wss.close(r));
  }
});

test("a dial the server refuses is a transient failure and the device redials", async () => {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, verifyClient: () => false });
  await new Promise((r) => wss.on("listening", r));
  let dials = 0;
  const url = `ws://127.0.0.1:${wss.address().port}/`;
  const device = new DeviceDriver({
    config,
    dial: () => (dials++, new WebSocket(url)),
  });
  try {
    device.start();
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(dials >= 2, `redialled ${dials} times`);
  } finally {
    device.stop();
    await new Promise((r) => wss.close(r));
  }
});
