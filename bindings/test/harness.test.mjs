// The package's harness (bindings/npm/harness, over pkg-node here): a scripted device standing
// in three lines with roots, a mode and a script of replies, linked through a memory instance
// or to a ws:// URL; Calls' promises, which a dropped link rejects rather than leaving hanging;
// and bad options refused naming the option.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

import { makeHarness } from "../npm/harness/make.mjs";
import { memoryInstance } from "../npm/harness/memory-instance.mjs";
import { Calls, LINK_LOST, LinkError, RpcError, TimeoutError } from "../npm/calls.mjs";

const require = createRequire(import.meta.url);
const lembas = require("../pkg-node/lembas_bindings.js");
const { WebSocket, WebSocketServer } = require("ws");
const { scriptedDevice } = makeHarness(async () => lembas);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const said = (calls) => {
  const texts = [];
  calls.driver.next((e) => {
    const text = e.kind === "notification" && e.params?.update?.content?.text;
    if (text) texts.push(text);
    return false;
  }, 60_000).catch(() => {});
  return texts;
};
const allowOnce = { result: { outcome: { outcome: "selected", optionId: "once" } } };

test("three lines: a scripted device with roots, a mode and replies, and a client linked to it", async () => {
  const device = await scriptedDevice({ roots: ["/work"], maxMode: "edit", replies: ["permit deploy\nsay shipped", "say second"] });
  let hello;
  const client = await device.connect({ onEvent: (e) => e.kind === "hello" && (hello = e.hello) });
  try {
    assert.ok(client.driver.capabilities().includes("turns"));
    // The roots and the mode reach the client as the device's limits.
    assert.deepEqual(hello.limits.roots, ["/work"]);
    assert.equal(hello.limits.max_mode, "edit");
    const { sessionId } = await client.request("session/new", { cwd: "/work" });
    const texts = said(client);

    const answered = client.prompt(sessionId, "whatever the UI sends");
    const card = await client.next((e) => e.kind === "request" && e.method === "session/request_permission");
    assert.equal(card.params.toolCall.title, "deploy");
    assert.equal(client.respond(card.id, allowOnce), true);
    assert.equal((await answered).stopReason, "end_turn");

    assert.equal((await client.prompt(sessionId, "and this")).stopReason, "end_turn");
    // Past the replies, a prompt's own text is its script.
    assert.equal((await client.prompt(sessionId, "say own words")).stopReason, "end_turn");
    assert.deepEqual(texts, ["allowed", "shipped", "second", "own words"]);

    // The roots bound the device: a session elsewhere is refused, an RpcError saying so.
    const outside = await client.request("session/new", { cwd: "/elsewhere" }).catch((e) => e);
    assert.ok(outside instanceof RpcError, `${outside}`);
    assert.match(outside.message, /^session\/new: .*\(JSON-RPC error -32\d+\)$/);
  } finally {
    client.stop();
    device.stop();
  }
});

test("a dropped link rejects the request waiting on it at once; a prompt outlives it", async () => {
  // Writes that wait: session/new is answered only once its write settles, so it is in flight.
  const inner = new lembas.MemStore();
  let hold = false;
  const held = [];
  const store = {
    entries: () => inner.entries(),
    apply(records) {
      inner.apply(records);
      return hold ? new Promise((r) => held.push(r)) : undefined;
    },
  };
  const device = await scriptedDevice({ store });
  const client = await device.connect({ timeoutMs: 5000 });
  try {
    const { sessionId } = await client.request("session/new", { cwd: "/work" });
    hold = true;
    const waiting = client.request("session/new", { cwd: "/work" });
    await sleep(20);
    const started = Date.now();
    device.instance.drop(1006, "cable pulled");
    const e = await waiting.catch((e) => e);
    assert.ok(e instanceof LinkError, `${e}`);
    assert.equal(e.code, 1006);
    assert.match(e.message, /session\/new: the link dropped before its answer \(close 1006: cable pulled\)/);
    assert.ok(Date.now() - started < 1000, "it waited for its timeout instead");
    hold = false;
    held.splice(0).forEach((r) => r());

    // The device dials again; the prompt sent before a drop is answered on the next link.
    await client.ready();
    const answered = client.prompt(sessionId, "sleep 150\nsay after the drop");
    await sleep(50);
    device.instance.drop();
    assert.equal((await answered).stopReason, "end_turn");
  } finally {
    client.stop();
    device.stop();
  }
});

test("the core answers a call cut off by its link going down, so a bare driver's waiter settles too", async () => {
  const instance = memoryInstance();
  const inner = new lembas.MemStore();
  let hold = false;
  const store = { entries: () => inner.entries(), apply: (r) => (inner.apply(r), hold ? new Promise(() => {}) : undefined) };
  const device = await scriptedDevice({ instance, store });
  const ui = new lembas.ClientDriver({ config: { seed: 6 } });
  try {
    const ready = ui.next((e) => e.kind === "ready");
    instance.accept((socket) => ui.attach(socket));
    await ready;
    hold = true;
    const id = ui.call("session/new", { cwd: "/work" });
    const answer = ui.next((e) => e.kind === "answer" && e.id === id, 5000);
    await sleep(20);
    instance.drop(1006, "cable pulled");
    const e = await answer;
    assert.equal(e.method, "session/new");
    assert.equal(e.error.code, LINK_LOST);
    assert.match(e.error.message, /the link went down before the device answered: call again once a link is ready/);
    assert.equal(e.result, undefined);
  } finally {
    ui.stop();
    device.stop();
  }
});

test("a second client takes the device's link from the first", async () => {
  const device = await scriptedDevice({ replies: ["say to the second"] });
  const first = await device.connect();
  const second = await device.connect({ timeoutMs: 2000 });
  try {
    assert.equal(first.driver.isReady(), false, "the first kept the link");
    const { sessionId } = await second.request("session/new", { cwd: "/work" });
    assert.equal((await second.prompt(sessionId, "hi")).stopReason, "end_turn");
    await assert.rejects(first.request("session/new", { cwd: "/work" }), /not ready/);
  } finally {
    first.stop();
    second.stop();
    device.stop();
  }
});

test("nothing waits forever: a timeout says what it awaited, stop rejects what waits", async () => {
  const device = await scriptedDevice();
  const client = await device.connect({ promptTimeoutMs: 5000 });
  try {
    const e = await client.next(() => false, 30).catch((e) => e);
    assert.ok(e instanceof TimeoutError, `${e}`);
    assert.match(e.message, /next: no event it accepts within 30 ms/);
    const { sessionId } = await client.request("session/new", { cwd: "/work" });
    const waiting = client.prompt(sessionId, "permit never answered");
    await client.next((e) => e.kind === "request");
    client.stop();
    await assert.rejects(waiting, (e) => e instanceof LinkError && /stopped before an answer/.test(e.message));
    // Not ready: refused at once, saying so.
    await assert.rejects(client.request("session/new", { cwd: "/work" }), /not ready/);
  } finally {
    device.stop();
  }
});

test("a UI's own ClientDriver takes the device's links from a memory instance", async () => {
  const instance = memoryInstance();
  const device = await scriptedDevice({ instance, replies: ["say from the harness"] });
  const ui = new lembas.ClientDriver({ config: { seed: 4 } });
  try {
    const ready = ui.next((e) => e.kind === "ready");
    instance.accept((socket) => ui.attach(socket));
    await ready;
    const made = ui.next((e) => e.kind === "answer");
    ui.call("session/new", { cwd: "/work" });
    const sessionId = (await made).result.sessionId;
    const text = ui.next((e) => e.kind === "notification" && e.params?.update?.content?.text === "from the harness");
    ui.prompt(sessionId, [{ type: "text", text: "hi" }]);
    await text;
  } finally {
    ui.stop();
    device.stop();
  }
});

test("a scripted device links to an instance URL with its token", async () => {
  const TOKEN = "harness-url-token-31";
  const client = new Calls(new lembas.ClientDriver({ config: { seed: 5 } }));
  const wss = new WebSocketServer({
    host: "127.0.0.1",
    port: 0,
    verifyClient: (info) => info.req.headers.authorization === `Bearer ${TOKEN}`,
  });
  await new Promise((r) => wss.on("listening", r));
  wss.on("connection", (socket) => client.attach(socket));
  const url = `ws://127.0.0.1:${wss.address().port}/api/devices/link`;
  const device = await scriptedDevice({ instance: url, token: TOKEN, WebSocket, replies: ["say over ws"] });
  try {
    await client.ready();
    const { sessionId } = await client.request("session/new", { cwd: "/work" });
    assert.equal((await client.prompt(sessionId, "hi")).stopReason, "end_turn");
    await assert.rejects(device.connect(), /links to an instance URL/);
  } finally {
    device.stop();
    client.stop();
    await new Promise((r) => wss.close(r));
  }
});

test("bad options say which and why, and never carry the token", async () => {
  const refused = async (options, pattern) => {
    const e = await scriptedDevice(options).then(
      (d) => (d.stop(), null),
      (e) => e,
    );
    assert.ok(e instanceof TypeError, `${JSON.stringify(options)} was taken`);
    assert.match(e.message, pattern);
    assert.ok(!e.message.includes("sekrit"), e.message);
  };
  await refused({ rots: ["/w"] }, /unknown option `rots` \(it takes roots, /);
  await refused({ roots: ["work"] }, /options\.roots: "work" is not an absolute path/);
  await refused({ roots: "/work" }, /options\.roots must be an array/);
  await refused({ maxMode: "yolo" }, /options\.maxMode must be one of plan, manual, edit, auto/);
  await refused({ replies: "say hi" }, /options\.replies must be an array of strings/);
  await refused({ instance: "http://127.0.0.1:1/x", token: "sekrit" }, /ws:\/\/ or wss:\/\/, not http:/);
  await refused({ instance: "ws://127.0.0.1:1/x" }, /options\.token is needed/);
  await refused({ instance: "ws://127.0.0.1:1/x", token: "sekrit" }, /options\.WebSocket is needed/);
  await refused({ token: "sekrit" }, /options\.token is for an instance URL/);
  await refused({ instance: {} }, /options\.instance must be/);
  await refused(7, /the options must be an object/);
  await refused([], /the options must be an object, not an array/);
  await refused({ instance: null }, /options\.instance must be a device link's ws:\/\/ URL or a memoryInstance\(\)/);
  await refused({ config: [] }, /options\.config must be a DeviceConfig object, not an array/);

  assert.throws(() => new Calls({}), /driver must be a ClientDriver/);
  const driver = new lembas.ClientDriver();
  assert.throws(() => new Calls(driver, { timeout: 5 }), /unknown option `timeout` \(it takes timeoutMs, promptTimeoutMs\)/);
  assert.throws(() => new Calls(driver, { timeoutMs: 0 }), /options\.timeoutMs must be a whole number of milliseconds/);
  const device = await scriptedDevice();
  await assert.rejects(device.connect({ timeoutMs: -1 }), /options\.timeoutMs must be a whole number/);
  await assert.rejects(device.connect({ config: "seed" }), /options\.config must be a ClientConfig object, not string/);
  // A prompt's arguments are checked before anything is sent.
  const client = await device.connect();
  const { sessionId } = await client.request("session/new", { cwd: "/work" });
  await assert.rejects(client.prompt(sessionId, { text: "hi" }), /blocks must be a string or an array of ACP content blocks/);
  await assert.rejects(client.prompt(sessionId, [{ text: "hi" }]), /blocks must be a string or an array/);
  await assert.rejects(client.prompt(undefined, "hi"), /sessionId must be a session's id \(a string\), not undefined/);
  await assert.rejects(client.prompt(sessionId, "hi", { turnId: 7 }), /options\.turnId must be a non-empty string/);
  assert.deepEqual(client.driver.incomplete(), [], "a refused prompt was sent");
  client.stop();
  device.stop();
  driver.stop();
  // The driver refuses replies beside the model engine, naming both.
  assert.throws(
    () => new lembas.DeviceDriver({ dial: () => null, replies: ["say hi"], model: { instance: "http://127.0.0.1:1", token: "sekrit" } }),
    (e) => /options\.replies/.test(e.message) && /options\.model/.test(e.message) && !e.message.includes("sekrit"),
  );
  assert.throws(() => new lembas.DeviceDriver({ dial: () => null, replies: [1] }), /options\.replies/);
});
