// The drivers (bindings/pkg-node's DeviceDriver and ClientDriver, runtime-wasm in Rust) joined
// by an in-memory pair of WebSocket-like objects: what the Rust shell does beyond the socket
// itself — a store whose writes are promises, a resolvePath that answers later, effects it
// leaves to onEffect, an onEvent that calls back into the client, refusals as Errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

import { pair } from "../npm/harness/socket-pair.mjs";

const require = createRequire(import.meta.url);
const { DeviceDriver, ClientDriver, MemStore } = require("../pkg-node/lembas_bindings.js");

const ROOT = "/home/dev/work";
const config = {
  seed: 21,
  remote: { enabled: true, roots: [ROOT], trusted: [ROOT] },
  backoff: { initialMs: 20, maxMs: 100 },
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A device and a client linked in memory. */
async function linked(deviceOptions = {}, clientOptions = {}) {
  const client = new ClientDriver({ config: { seed: 3 }, ...clientOptions });
  const dial = () => {
    const [d, c] = pair();
    client.attach(c);
    return d;
  };
  const open = deviceOptions.open ?? false;
  delete deviceOptions.open;
  const options = { config, dial, ...deviceOptions };
  const device = open ? await DeviceDriver.open(options) : new DeviceDriver(options);
  const ready = client.next((e) => e.kind === "ready");
  device.start();
  await ready;
  return { client, device };
}

/** A store over `inner` whose writes finish a moment later, as a real disk's do; its reads
 * fail ("the database is locked") while `canRead()` says no. */
function slowStore(inner, canRead = () => true) {
  return {
    entries: async () => {
      if (!canRead()) throw new Error("the database is locked");
      return inner.entries();
    },
    apply(records) {
      inner.apply(records);
      return new Promise((resolve) => setTimeout(resolve, 1));
    },
  };
}

async function newSession(client, cwd = ROOT) {
  const id = client.call("session/new", { cwd });
  return client.next((e) => e.kind === "answer" && e.id === id);
}

test("a store whose writes are promises holds the frames that wait on them, and restores", async () => {
  const inner = new MemStore();
  let hold = false;
  const held = [];
  const store = {
    entries: async () => inner.entries(),
    apply(records) {
      inner.apply(records);
      return new Promise((resolve) => (hold ? held.push(resolve) : setTimeout(resolve, 1)));
    },
  };
  const { client, device } = await linked({ store, open: true });
  try {
    hold = true;
    const answered = newSession(client);
    let answer;
    answered.then((a) => (answer = a));
    await sleep(50);
    assert.equal(answer, undefined, "the new session was answered before its write settled");
    assert.ok(held.length > 0, "nothing was written");
    hold = false;
    held.splice(0).forEach((resolve) => resolve());
    const sessionId = (await answered).result.sessionId;
    assert.match(sessionId, /^ses_/);
    device.stop();

    const restarted = await DeviceDriver.open({ config, store, dial: () => pair()[0] });
    assert.deepEqual(restarted.unreadable(), []);
    assert.equal(restarted.sessionCount(), 1);
    restarted.stop();
  } finally {
    device.stop();
    client.stop();
  }
});

test("past sessions.maxLive a session is set aside and read back from the store's entries()", async () => {
  const store = slowStore(new MemStore());
  const bounded = { ...config, sessions: { maxLive: 1 } };
  const { client, device } = await linked({ store, open: true, config: bounded });
  try {
    const first = (await newSession(client)).result.sessionId;
    const title = client.call("_lembas/session/title", { sessionId: first, title: "kept" });
    await client.next((e) => e.kind === "answer" && e.id === title);
    await newSession(client);
    assert.equal(device.sessionCount(), 2);
    // The first left memory; its status reads it back through entries().
    const status = client.call("_lembas/session/status", { sessionId: first });
    const answer = await client.next((e) => e.kind === "answer" && e.id === status);
    assert.equal(answer.result.exists, true, JSON.stringify(answer));
    assert.equal(answer.result.title, "kept");
    assert.deepEqual(device.unreadable(), []);
  } finally {
    device.stop();
    client.stop();
  }
});

test("without a store no session is set aside: past sessions.maxLive session/new is refused", async () => {
  const bounded = { ...config, sessions: { maxLive: 1 } };
  const { client, device } = await linked({ config: bounded });
  try {
    await newSession(client);
    const refused = await newSession(client);
    assert.equal(refused.error?.code, -32602, JSON.stringify(refused));
    assert.match(refused.error.message, /the limit of 1 \(sessions\.max_live\), and without a store/);
    assert.equal(device.sessionCount(), 1);
  } finally {
    device.stop();
    client.stop();
  }
});

test("effects the driver does not perform reach onEffect; the engine's never do", async () => {
  const effects = [];
  const { client, device } = await linked({ onEffect: (e) => effects.push(e) });
  try {
    const sessionId = (await newSession(client)).result.sessionId;
    const answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, [{ type: "text", text: "say hi" }], "t1");
    assert.equal((await answered).result.stopReason, "end_turn");
    assert.equal(device.deleteSession(sessionId), true);
    assert.equal(device.deleteSession(sessionId), false);
    assert.deepEqual(effects, [{ kind: "remove_attachments", sessionId }]);
  } finally {
    device.stop();
    client.stop();
  }
});

test("an onEvent that answers a card at once, from inside the driver", async () => {
  let client;
  let device;
  let responded;
  ({ client, device } = await linked(
    {},
    {
      onEvent: (e) => {
        if (e.kind === "request" && e.method === "session/request_permission") {
          responded = client.respond(e.id, { result: { outcome: { outcome: "selected", optionId: "once" } } });
        }
      },
    },
  ));
  const sessionId = (await newSession(client)).result.sessionId;
  const said = [];
  const done = client.next((e) => {
    if (e.kind === "notification" && e.params?.update?.content?.text) said.push(e.params.update.content.text);
    return e.kind === "prompt_answered";
  });
  client.prompt(sessionId, [{ type: "text", text: "permit deploy\nsay shipped" }], "t1");
  assert.equal((await done).result.stopReason, "end_turn");
  assert.equal(responded, true);
  assert.deepEqual(said, ["allowed", "shipped"]);
  assert.deepEqual(client.openCards(), []);
  device.stop();
  client.stop();
});

test("a socket that does not drain holds the engine at outbound.pauseBytes; it goes on as it drains", async () => {
  const PAUSE = 4096;
  // The device's end counts what it was given as buffered (`bufferedAmount`) until drained.
  let socket;
  const chunks = [];
  const client = new ClientDriver({
    config: { seed: 3 },
    onEvent: (e) => {
      const text = e.kind === "notification" && e.params?.update?.content?.text;
      if (text) chunks.push(text.slice(0, 10));
    },
  });
  const dial = () => {
    const [d, c] = pair();
    client.attach(c);
    const send = d.send;
    d.bufferedAmount = 0;
    d.send = (data) => {
      d.bufferedAmount += Buffer.byteLength(data);
      send(data);
    };
    socket = d;
    return d;
  };
  const device = new DeviceDriver({ config: { ...config, outbound: { pauseBytes: PAUSE } }, dial });
  const ready = client.next((e) => e.kind === "ready");
  device.start();
  await ready;
  try {
    const sessionId = (await newSession(client)).result.sessionId;
    socket.bufferedAmount = 0;
    let answered = false;
    const done = client.next((e) => e.kind === "prompt_answered");
    done.then(() => (answered = true));
    client.prompt(sessionId, [{ type: "text", text: "chunks 40 500" }], "t1");
    // Time for several of the driver's looks at the socket: nothing more is sent to it.
    await sleep(150);
    const held = chunks.length;
    assert.ok(held > 0 && held < 40, `${held} of 40 chunks sent to a socket that never drains`);
    // A chunk is two frames of about 600 bytes: at most one event's frames past the bound.
    assert.ok(socket.bufferedAmount < PAUSE + 2048, `${socket.bufferedAmount} bytes buffered`);
    await sleep(100);
    assert.equal(chunks.length, held, "the engine ran on while the socket was full");
    // The socket drains (as a network would, a bufferful at a time): the turn goes on.
    let drains = 0;
    while (!answered) {
      assert.ok(++drains < 200, "the turn did not end as the socket drained");
      assert.ok(socket.bufferedAmount < PAUSE + 2048, `${socket.bufferedAmount} bytes buffered`);
      socket.bufferedAmount = 0;
      await sleep(10);
    }
    assert.equal((await done).result.stopReason, "end_turn");
    assert.deepEqual(chunks, Array.from({ length: 40 }, (_, i) => String(i).padStart(10, "0")));
  } finally {
    device.stop();
    client.stop();
  }
});

test("a link whose socket holds outbound.maxBytes is closed, and dialed again", async () => {
  const MAX = 8192;
  const closes = [];
  let socket;
  let dials = 0;
  const client = new ClientDriver({ config: { seed: 3 } });
  const dial = () => {
    dials += 1;
    const [d, c] = pair();
    client.attach(c);
    const close = d.close;
    d.close = (code, reason) => {
      closes.push({ code, reason });
      close(code);
    };
    socket = d;
    return d;
  };
  const outbound = { pauseBytes: 4096, maxBytes: MAX };
  const device = new DeviceDriver({ config: { ...config, outbound }, dial, onLog: () => {} });
  const ready = client.next((e) => e.kind === "ready");
  device.start();
  await ready;
  try {
    // The client reads nothing more: its socket's buffer is full to the bound.
    socket.bufferedAmount = MAX;
    const again = client.next((e) => e.kind === "ready");
    client.call("session/new", { cwd: ROOT });
    await again;
    assert.equal(closes.length, 1, JSON.stringify(closes));
    // 1008 goes out as 1000: a browser's WebSocket refuses any other code under 3000.
    assert.equal(closes[0].code, 1000);
    assert.match(closes[0].reason, /over the bound of 8192 \(outbound\.max_bytes\)/);
    assert.equal(dials, 2, "the device dialed again");
  } finally {
    device.stop();
    client.stop();
  }
});

test("resolvePath may answer later, or refuse", async () => {
  const asked = [];
  const { client, device } = await linked({
    resolvePath: async (path) => {
      asked.push(path);
      return path === `${ROOT}/link` ? { path: `${ROOT}/real` } : { error: "no such directory" };
    },
  });
  try {
    const made = await newSession(client, `${ROOT}/link`);
    assert.match(made.result.sessionId, /^ses_/);
    const refused = await newSession(client, `${ROOT}/missing`);
    assert.deepEqual(asked, [`${ROOT}/link`, `${ROOT}/missing`]);
    assert.ok(refused.error, JSON.stringify(refused));
    assert.match(refused.error.message, /no such directory/);
  } finally {
    device.stop();
    client.stop();
  }
});

test("a misused driver says so in an Error", async () => {
  const dial = () => pair()[0];
  assert.throws(() => new DeviceDriver({ config, dial, lembas: {} }), /no member `lembas`/);
  assert.throws(() => new DeviceDriver({ config }), /options\.dial is needed/);
  assert.throws(
    () => new DeviceDriver({ config, dial, store: { entries: async () => [], apply() {} } }),
    /DeviceDriver\.open/,
  );
  assert.throws(() => new DeviceDriver({ config: { sed: 1 }, dial }), /sed/);
  assert.throws(() => new ClientDriver({ kept: { load: async () => [], save() {} } }), /ClientDriver\.open/);
  await assert.rejects(DeviceDriver.open({ config, dial, onstop() {} }), /no member `onstop`/);
  await assert.rejects(ClientDriver.open({ kept: { load: async () => [{ id: "x" }], save() {} } }), /pending deletes/);
  const client = new ClientDriver();
  assert.throws(() => client.call("session/new", { cwd: ROOT }), /not ready/);
  assert.throws(() => client.attach({}), /addEventListener/);
  await assert.rejects(client.next(() => false, 20), /within 20 ms/);
  client.stop();
});

test("a dial that throws is retried after the backoff", async () => {
  let dials = 0;
  const device = new DeviceDriver({
    config,
    dial: () => {
      dials++;
      throw new Error("offline");
    },
  });
  device.start();
  await sleep(250);
  device.stop();
  assert.ok(dials >= 3, `dialled ${dials} times`);
  const after = dials;
  await sleep(150);
  assert.equal(dials, after, "a stopped device dialled again");
});

test("a write_attachment onEffect rejects refuses its prompt with the reason; one it settles runs", async () => {
  const written = [];
  let fail = true;
  const onEffect = async (e) => {
    if (e.kind !== "write_attachment") return;
    await sleep(5);
    if (fail) throw new Error("the disk is full");
    written.push(e);
  };
  const { client, device } = await linked({ onEffect });
  try {
    const sessionId = (await newSession(client)).result.sessionId;
    const blocks = [
      { type: "text", text: "say hi" },
      { type: "image", mimeType: "image/png", data: "aGk=", uri: "file:///tmp/shot.png" },
    ];
    let answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, blocks, "t1");
    const refused = await answered;
    assert.equal(refused.error?.code, -32603, JSON.stringify(refused));
    assert.match(refused.error.message, /`shot\.png` could not be written.*the disk is full/);

    fail = false;
    answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, blocks, "t1");
    const ran = await answered;
    assert.equal(ran.result?.stopReason, "end_turn", JSON.stringify(ran));
    assert.equal(written.length, 1);
    assert.equal(typeof written[0].request, "number");
    assert.match(written[0].fileName, /-shot\.png$/);
  } finally {
    device.stop();
    client.stop();
  }
});

test("a store whose entries() rejects while reading a session back refuses the waiting request", async () => {
  let failReads = false;
  const store = slowStore(new MemStore(), () => !failReads);
  const bounded = { ...config, sessions: { maxLive: 1 } };
  const { client, device } = await linked({ store, open: true, config: bounded });
  try {
    const first = (await newSession(client)).result.sessionId;
    await newSession(client);
    failReads = true;
    let status = client.call("_lembas/session/status", { sessionId: first });
    const refused = await client.next((e) => e.kind === "answer" && e.id === status);
    assert.equal(refused.error?.code, -32603, JSON.stringify(refused));
    assert.match(refused.error.message, /could not be read back from the store: the database is locked/);
    failReads = false;
    status = client.call("_lembas/session/status", { sessionId: first });
    const answer = await client.next((e) => e.kind === "answer" && e.id === status);
    assert.equal(answer.result?.exists, true, JSON.stringify(answer));
  } finally {
    device.stop();
    client.stop();
  }
});

test("a ClientDriver given no seed draws one, so a reloaded page makes new turn ids", async () => {
  const blocks = [{ type: "text", text: "say hi" }];
  const turnOf = async (clientOptions) => {
    const { client, device } = await linked({}, clientOptions);
    try {
      return client.prompt("ses_reload", blocks);
    } finally {
      device.stop();
    }
  };
  // The same seed: the same ids (what a reload with a fixed seed would repeat).
  assert.equal(await turnOf({ config: { seed: 5 } }), await turnOf({ config: { seed: 5 } }));
  // None given: each driver its own.
  const ids = new Set([await turnOf({ config: undefined }), await turnOf({ config: {} }), await turnOf({ config: {} })]);
  assert.equal(ids.size, 3, [...ids].join(", "));
});
