// A wasm DEVICE (bindings/pkg-node's DeviceDriver, over the npm `ws` package) against the
// native test instance (`lembas test-instance`: the core's client role in Rust behind a real
// WebSocket listener): the device sends its token in `Authorization`, links, opens a session,
// answers a prompt with the scripted engine, and puts a permission card the native client
// answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { NativeInstance } from "./native.mjs";

const require = createRequire(import.meta.url);
const { DeviceDriver } = require("../pkg-node/lembas_bindings.js");
const { WebSocket } = require("ws");

const ROOT = "/home/dev/work";
const TOKEN = "wasm-device-token-0123456789";

test("a wasm device links to the native instance, answers a prompt and a card", async () => {
  const instance = await NativeInstance.start({ token: TOKEN });
  const url = `ws://127.0.0.1:${instance.port}/api/devices/link`;
  let dials = 0;
  const device = new DeviceDriver({
    config: {
      seed: 5,
      host: "wasmbox",
      platform: "node",
      remote: { enabled: true, roots: [ROOT], trusted: [ROOT] },
      backoff: { initialMs: 50, maxMs: 500 },
    },
    dial: () => (dials++, new WebSocket(url, { headers: { Authorization: `Bearer ${TOKEN}` } })),
  });
  try {
    device.start();
    const ready = await instance.event("ready");
    assert.ok(ready.capabilities.includes("turns"), ready.capabilities.join(","));
    assert.equal(dials, 1);

    instance.send({ call: "session/new", params: { cwd: ROOT } });
    await instance.next((l) => l.called !== undefined);
    const made = await instance.event("answer", (a) => a.method === "session/new");
    const sessionId = made.result.sessionId;
    assert.match(sessionId, /^ses_/);

    instance.send({ prompt: sessionId, blocks: [{ type: "text", text: "say hello from wasm" }], turnId: "t1" });
    const answered = await instance.event("prompt_answered", (a) => a.turnId === "t1");
    assert.equal(answered.result.stopReason, "end_turn");
    assert.equal(device.turnState(sessionId, "t1"), "done");

    // A card: the device asks, the native client allows once, the turn goes on and ends.
    instance.send({ prompt: sessionId, blocks: [{ type: "text", text: "permit rm -rf build\nsay done" }], turnId: "t2" });
    const card = await instance.event("request", (r) => r.method === "session/request_permission");
    assert.equal(card.params.toolCall.title, "rm -rf build");
    instance.send({ respond: card.id, result: { outcome: { outcome: "selected", optionId: "once" } } });
    const said = instance.event(
      "notification",
      (n) => n.params?.update?.content?.text?.includes("allowed"),
    );
    const second = await instance.event("prompt_answered", (a) => a.turnId === "t2");
    assert.equal(second.result.stopReason, "end_turn");
    await said;
  } finally {
    device.stop();
    await instance.stop();
  }
});
