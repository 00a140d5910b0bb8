// A wasm DeviceDriver running the model engine against a fake instance in this test (node's
// `http` on loopback: `GET /v1/models` and a streamed `POST /v1/chat/completions`, each
// checking the bearer token), its HTTP performed with node's global `fetch`, linked in memory
// to a ClientDriver: a `lembas_model` session streams the instance's answer, a cancel aborts the
// HTTP request, a 401 fails the prompt saying to log in again, a model list that cannot be
// fetched keeps the last one, attachments are read back through `readAttachment`, and bad
// options are refused without ever showing the token.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import net from "node:net";

import { pair } from "../npm/harness/socket-pair.mjs";
import { fakeInstance as fake, held, json, streamed } from "../npm/harness/fake-instance.mjs";

const require = createRequire(import.meta.url);
const { DeviceDriver, ClientDriver } = require("../pkg-node/lembas_bindings.js");

const ROOT = "/home/dev/work";
const TOKEN = "dev_model_token_4f2a9c";
const MODEL = "qwen/coder";
const config = {
  seed: 31,
  remote: { enabled: true, roots: [ROOT], trusted: [ROOT] },
  backoff: { initialMs: 20, maxMs: 100 },
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fakeInstance = () => fake({ token: TOKEN, models: [MODEL] });

/** A model-engine device on `instance` and a client linked to it in memory. */
async function linked(instance, extra = {}, engine = undefined, limits = {}) {
  const events = [];
  const client = new ClientDriver({ config: { seed: 5 }, onEvent: (e) => events.push(e) });
  const links = [];
  const dial = () => {
    const [d, c] = pair();
    client.attach(c);
    links.push(d);
    return d;
  };
  const logs = [];
  const device = new DeviceDriver({
    config,
    dial,
    model: { instance, token: TOKEN, engine, ...limits },
    onLog: (line) => logs.push(line),
    ...extra,
  });
  const ready = client.next((e) => e.kind === "ready");
  device.start();
  const r = await ready;
  return { client, device, events, logs, links, capabilities: r.capabilities };
}

async function newSession(client, meta) {
  const id = client.call("session/new", { cwd: ROOT, _meta: meta });
  return client.next((e) => e.kind === "answer" && e.id === id);
}

const isChunk = (e) =>
  e.kind === "notification" && e.params?.update?.sessionUpdate === "agent_message_chunk";
const said = (events) =>
  events
    .filter(isChunk)
    .map((e) => e.params.update.content.text)
    .join("");

/** Resolves once `check()` holds, or fails after `ms`. */
async function until(check, what, ms = 2000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

test("a lembas_model session streams the instance's chat completion and ends end_turn", async () => {
  const inst = await fakeInstance();
  const { client, device, events, logs, capabilities } = await linked(inst.url);
  try {
    // The models were fetched before the dial: the hello lists the model capabilities.
    assert.equal(inst.requests[0].url, "/v1/models");
    assert.equal(inst.requests[0].authorization, `Bearer ${TOKEN}`);
    assert.ok(capabilities.includes("model") && capabilities.includes("configure"), capabilities.join());

    const made = await newSession(client, { lembas_model: MODEL });
    assert.ok(made.result, JSON.stringify(made.error));
    const sessionId = made.result.sessionId;
    const answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, [{ type: "text", text: "say hello" }], "t1");
    const a = await answered;
    assert.equal(a.result?.stopReason, "end_turn", JSON.stringify(a));
    assert.equal(said(events), "Hello");
    assert.ok(events.filter(isChunk).length >= 2, "the answer came in pieces");

    const [chat] = inst.chats();
    assert.equal(chat.authorization, `Bearer ${TOKEN}`);
    assert.equal(chat.accept, "text/event-stream");
    assert.equal(chat.contentType, "application/json");
    const body = JSON.parse(chat.body);
    assert.equal(body.model, MODEL);
    assert.equal(body.stream, true);
    // A page runs no tools, so the model is offered none.
    assert.equal(body.tools, undefined);
    assert.ok(JSON.stringify(body.messages).includes("say hello"));
    assert.deepEqual(logs, []);
  } finally {
    device.stop();
    client.stop();
    await inst.close();
  }
});

test("reads smaller than what the instance sends at once keep every byte for the next read", async () => {
  const inst = await fakeInstance();
  const pieces = ["the quick brown fox ", "jumps over ", "the lazy dog — ünïcode too"];
  inst.chat = streamed(pieces);
  // Each SSE event is ~60 bytes in one write; the engine asks for 5 bytes a read.
  const engine = { read_bytes: 5 };
  const { client, device, events } = await linked(inst.url, {}, engine);
  try {
    const sessionId = (await newSession(client, { lembas_model: MODEL })).result.sessionId;
    const answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, [{ type: "text", text: "a pangram" }], "t1");
    assert.equal((await answered).result?.stopReason, "end_turn");
    assert.equal(said(events), pieces.join(""));
  } finally {
    device.stop();
    client.stop();
    await inst.close();
  }
});

test("a cancel mid-stream aborts the HTTP request and the turn is cancelled", async () => {
  const inst = await fakeInstance();
  // One piece, then the stream stays open until the device lets it go.
  inst.chat = held("Thinking");
  const { client, device, events } = await linked(inst.url);
  try {
    const sessionId = (await newSession(client, { lembas_model: MODEL })).result.sessionId;
    const first = client.next(isChunk);
    const answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, [{ type: "text", text: "think forever" }], "t1");
    await first;
    assert.equal(inst.cutShort, 0);
    client.notify("session/cancel", { sessionId });
    const a = await answered;
    assert.equal(a.result?.stopReason, "cancelled", JSON.stringify(a));
    await until(() => inst.cutShort === 1, "the instance to see the request closed");
    assert.equal(said(events), "Thinking");
  } finally {
    device.stop();
    client.stop();
    await inst.close();
  }
});

test("a 401 from the instance fails the prompt, saying to log in again, never with the token", async () => {
  const inst = await fakeInstance();
  inst.chat = (req, res) => json(res, 401, { error: { message: "the device token was revoked" } });
  const { client, device, logs } = await linked(inst.url);
  try {
    const sessionId = (await newSession(client, { lembas_model: MODEL })).result.sessionId;
    const answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, [{ type: "text", text: "hi" }], "t1");
    const a = await answered;
    assert.ok(a.error, JSON.stringify(a));
    assert.match(a.error.message, /log in again/);
    assert.match(a.error.message, /revoked/, "the instance's own words");
    assert.equal(inst.chats().length, 1, "a 401 is not retried");
    assert.ok(!JSON.stringify([a, logs]).includes(TOKEN));
  } finally {
    device.stop();
    client.stop();
    await inst.close();
  }
});

test("a model list that cannot be fetched is logged and the last one kept", async () => {
  const inst = await fakeInstance();
  const { client, device, logs, links } = await linked(inst.url);
  try {
    inst.modelsStatus = 500;
    // The link drops; the device fetches the models again before it redials.
    const again = client.next((e) => e.kind === "ready");
    links.at(-1).close(1006);
    const r = await again;
    assert.equal(inst.requests.filter((q) => q.url === "/v1/models").length, 2);
    assert.equal(logs.length, 1, logs.join("\n"));
    assert.match(logs[0], /\/v1\/models answered HTTP 500; the last model list is kept/);
    assert.ok(r.capabilities.includes("model"));
    const made = await newSession(client, { lembas_model: MODEL });
    assert.ok(made.result, JSON.stringify(made.error));
  } finally {
    device.stop();
    client.stop();
    await inst.close();
  }

  // An instance that cannot be reached: the device links with no models, and says why.
  const gone = await fakeInstance();
  await gone.close();
  const { client: c2, device: d2, logs: l2, capabilities } = await linked(gone.url);
  try {
    assert.equal(l2.length, 1, l2.join("\n"));
    assert.ok(l2[0].startsWith(`${gone.url}/v1/models: `), l2[0]);
    assert.ok(!l2[0].includes(TOKEN));
    assert.ok(!capabilities.includes("model"));
    const refused = await newSession(c2, { lembas_model: MODEL });
    assert.equal(refused.error?.code, -32602, JSON.stringify(refused));
  } finally {
    d2.stop();
    c2.stop();
  }
});

test("a model list with no answer is given up after modelsTimeoutMs, and stop() lets one go at once", async () => {
  // An instance that takes the request and never answers. (`open` holds the connections a
  // request came on: node's fetch may open a spare one of its own.)
  const open = new Set();
  const sockets = new Set();
  const silent = net.createServer((socket) => {
    sockets.add(socket);
    socket.once("data", () => open.add(socket));
    socket.on("close", () => open.delete(socket));
  });
  await new Promise((r) => silent.listen(0, "127.0.0.1", r));
  const instance = `http://127.0.0.1:${silent.address().port}`;
  try {
    const { client, device, logs } = await linked(instance, {}, undefined, { modelsTimeoutMs: 50 });
    device.stop();
    client.stop();
    assert.equal(logs.length, 1, logs.join("\n"));
    assert.match(logs[0], /\/v1\/models gave no answer within 50 ms \(options\.model\.modelsTimeoutMs\)/);

    const quiet = [];
    const waiting = new DeviceDriver({
      dial: () => pair()[0],
      model: { instance, token: TOKEN },
      onLog: (line) => quiet.push(line),
    });
    waiting.start();
    await until(() => open.size === 1, "the model list's request to reach the instance");
    waiting.stop();
    await until(() => open.size === 0, "the stopped device to close the request");
    await sleep(20);
    assert.deepEqual(quiet, [], "a stopped device said nothing of the fetch it let go");
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise((r) => silent.close(r));
  }
});

test("attachments written through onEffect are read back through readAttachment", async () => {
  const inst = await fakeInstance();
  const files = new Map();
  const onEffect = (e) => {
    if (e.kind === "write_attachment") files.set(`${e.sessionId}/${e.fileName}`, Buffer.from(e.base64, "base64"));
  };
  const asked = [];
  const readAttachment = async (sessionId, fileName, max) => {
    asked.push({ sessionId, fileName, max });
    return files.get(`${sessionId}/${fileName}`);
  };
  const resource = { type: "resource", resource: { uri: "file:///w/notes.md", mimeType: "text/markdown", text: "ship it on friday" } };
  const { client, device } = await linked(inst.url, { onEffect, readAttachment });
  try {
    const sessionId = (await newSession(client, { lembas_model: MODEL })).result.sessionId;
    const answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, [{ type: "text", text: "read my notes" }, resource], "t1");
    assert.equal((await answered).result?.stopReason, "end_turn");
    assert.equal(asked.length, 1);
    assert.equal(asked[0].sessionId, sessionId);
    assert.ok(asked[0].max > 0);
    assert.ok(inst.chats()[0].body.includes("ship it on friday"), inst.chats()[0].body);
  } finally {
    device.stop();
    client.stop();
  }

  // Without readAttachment the turn runs, told that the file could not be read and why.
  const { client: c2, device: d2, events } = await linked(inst.url, { onEffect });
  try {
    const sessionId = (await newSession(c2, { lembas_model: MODEL })).result.sessionId;
    const answered = c2.next((e) => e.kind === "prompt_answered");
    c2.prompt(sessionId, [{ type: "text", text: "read my notes" }, resource], "t2");
    assert.equal((await answered).result?.stopReason, "end_turn");
    assert.ok(!inst.chats()[1].body.includes("ship it on friday"));
    assert.match(JSON.stringify(events), /could not be read: attachment [^ ]+ cannot be read: this device was given no options.readAttachment/);
  } finally {
    d2.stop();
    c2.stop();
    await inst.close();
  }
});

test("bad model options are refused, naming the member and why, never showing the token", () => {
  const dial = () => pair()[0];
  const refused = (model, pattern) => {
    assert.throws(
      () => new DeviceDriver({ dial, model }),
      (e) => {
        assert.ok(e instanceof Error);
        assert.match(e.message, pattern);
        assert.ok(!e.message.includes(TOKEN) && !e.message.includes("s3cret"), e.message);
        return true;
      },
    );
  };
  refused({ instance: "ftp://example", token: TOKEN }, /options\.model\.instance must be an http:\/\/ or https:\/\/ URL/);
  refused({ token: TOKEN }, /options\.model\.instance is needed/);
  refused({ instance: "http://127.0.0.1:9" }, /options\.model\.token is needed/);
  refused({ instance: "http://user:s3cret@127.0.0.1:9", token: TOKEN }, /must not carry credentials/);
  refused({ instance: "http://127.0.0.1:9", token: `${TOKEN}\n` }, /options\.model\.token must be printable ASCII/);
  refused({ instance: "http://127.0.0.1:9", token: TOKEN, tokn: 1 }, /options\.model has no member `tokn`/);
  refused({ instance: "http://127.0.0.1:9", token: TOKEN, engine: { max_retries: "many" } }, /options\.model\.engine: .*max_retries/);
  refused({ instance: "http://127.0.0.1:9", token: TOKEN, engine: { read_bytes: 0 } }, /options\.model\.engine\.read_bytes must be at least 1/);
  refused({ instance: "http://127.0.0.1:9", token: TOKEN, modelsTimeoutMs: -1 }, /options\.model\.modelsTimeoutMs must be a finite number/);
  assert.throws(() => new DeviceDriver({ dial, readAttachment: "files" }), /options\.readAttachment must be a function/);
  // A good one builds, with the engine's settings taken.
  new DeviceDriver({ dial, model: { instance: "http://127.0.0.1:9/", token: TOKEN, engine: { max_retries: 1 } } }).stop();
});

test("the fake instance refuses bad options naming them, and a chat body that is not JSON with a 400", async () => {
  const refused = (options, pattern) =>
    assert.rejects(fake(options), (e) => e instanceof TypeError && pattern.test(e.message) && !e.message.includes(TOKEN));
  await refused({ token: TOKEN }, /options\.models must be an array of model ids/);
  await refused({ token: TOKEN, models: "m" }, /options\.models must be an array/);
  await refused({ models: [MODEL] }, /options\.token must be a non-empty string/);
  await refused({ token: TOKEN, models: [MODEL], cors: "yes" }, /options\.cors must be true or false/);
  await refused({ token: TOKEN, models: [MODEL], tokn: TOKEN }, /unknown option `tokn` \(it takes token, models, cors\)/);
  await refused(undefined, /options\.token must be/);

  const inst = await fakeInstance();
  try {
    const res = await fetch(`${inst.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: "{not json",
    });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, /the body is not JSON/);
  } finally {
    await inst.close();
  }
});
