// Reattach by seq through the wasm drivers (issue #16's JS side): a ClientDriver linked in
// memory to a scripted DeviceDriver (pkg-node, real timers), the link cut mid-stream and kept
// down while the device goes on streaming, then linked again. The client asks
// `_lembas/session/events` for what it missed after its last seq and hands it out before the
// live ones: the turn's text arrives whole, no chunk twice, and every session event's
// `_meta.lembas.seq` rises by one. When the device's event log (a small `eventLogEvents`) no
// longer reaches back, JS gets a `gap` and imports the session's history instead.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

import { makeHarness } from "../npm/harness/make.mjs";
import { memoryInstance } from "../npm/harness/memory-instance.mjs";
import { Calls } from "../npm/calls.mjs";

const require = createRequire(import.meta.url);
const lembas = require("../pkg-node/lembas_bindings.js");
const { scriptedDevice } = makeHarness(async () => lembas);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const WORDS = Array.from({ length: 40 }, (_, i) => `w${String(i).padStart(2, "0")}`);
/** One word every 25 ms: a turn of about a second. */
const SCRIPT = WORDS.map((w) => `say ${w}\nsleep 25`).join("\n");

/** A device on a memory instance the test can take offline (its dials fail), a client linked
 * to it, and what the client heard: every event, and the frames the device sent it. */
async function linked(sessions = {}) {
  const memory = memoryInstance();
  let online = true;
  const instance = {
    dial: () => {
      if (!online) throw new Error("offline");
      return memory.dial();
    },
    accept: (handler) => memory.accept(handler),
  };
  const device = await scriptedDevice({
    instance,
    replies: [SCRIPT],
    // With a store the device lists `sessions`: `_lembas/session/history` is there to import.
    store: new lembas.MemStore(),
    config: { backoff: { initialMs: 10, maxMs: 20 }, sessions },
  });
  const events = [];
  const frames = [];
  const calls = new Calls(new lembas.ClientDriver({ config: { seed: 12 }, onEvent: (e) => events.push(e) }));
  memory.accept((socket) => {
    socket.addEventListener("message", (ev) => frames.push(JSON.parse(ev.data)));
    calls.attach(socket);
  });
  await calls.ready();
  const { sessionId } = await calls.request("session/new", { cwd: "/work" });
  const cut = () => {
    online = false;
    memory.drop(1006, "cable pulled");
  };
  const reconnect = () => (online = true);
  const stop = () => (calls.stop(), device.stop());
  return { device, calls, sessionId, events, frames, cut, reconnect, stop };
}

/** The text of the chunks handed out, and their seqs, from `events[from..]`. */
function chunks(events, sessionId, from = 0) {
  const said = events
    .slice(from)
    .filter((e) => e.kind === "notification" && e.params.sessionId === sessionId && e.params.update?.content?.text);
  return { text: said.map((e) => e.params.update.content.text).join(""), seqs: said.map((e) => e.params._meta.lembas.seq) };
}

/** The missed events the device answered `_lembas/session/events` with. */
const fetched = (frames) => frames.filter((f) => Array.isArray(f.result?.events)).flatMap((f) => f.result.events);

test("a client cut mid-stream reattaches from its last seq: the turn's text whole, no chunk twice", async () => {
  const l = await linked();
  try {
    const answered = l.calls.prompt(l.sessionId, "stream it");
    await l.calls.next((e) => e.kind === "notification" && e.params.update?.content?.text === WORDS[3]);
    l.cut();
    const heardBeforeCut = chunks(l.events, l.sessionId).text;
    await sleep(300);
    assert.equal(l.calls.driver.isReady(), false, "still down");
    assert.equal(chunks(l.events, l.sessionId).text, heardBeforeCut, "nothing heard while down");
    l.reconnect();

    assert.equal((await answered).stopReason, "end_turn");
    const { text, seqs } = chunks(l.events, l.sessionId);
    assert.equal(text, WORDS.join(""), "no chunk missing, none twice");
    // Every event of the session carries its seq, the command set too, and they rise one by
    // one across the cut.
    const all = l.events.filter((e) => e.kind === "notification" && e.params.sessionId === l.sessionId);
    const every = all.map((e) => e.params._meta?.lembas?.seq);
    assert.ok(every.every((q, i) => Number.isSafeInteger(q) && (i === 0 || q === every[i - 1] + 1)), String(every));
    assert.equal(seqs.length, WORDS.length);
    // What was streamed while down came from the device's log, fetched after the last seq heard.
    const missed = fetched(l.frames).map((e) => e.params.update?.content?.text).filter(Boolean);
    assert.ok(missed.length >= 3, `the chunks streamed while down were fetched: ${missed}`);
    assert.ok(!heardBeforeCut.includes(missed[0]), `${missed[0]} was heard before the cut`);
    assert.deepEqual(l.events.filter((e) => e.kind === "gap"), []);
    assert.ok(l.events.some((e) => e.kind === "reattached" && e.how === "following"), "followed the running turn");
  } finally {
    l.stop();
  }
});

test("a log that no longer reaches back: JS gets a gap, then imports the history", async () => {
  const l = await linked({ eventLogEvents: 4 });
  try {
    const answered = l.calls.prompt(l.sessionId, "stream it");
    await l.calls.next((e) => e.kind === "notification" && e.params.update?.content?.text === WORDS[3]);
    l.cut();
    // The client resumes from the lower of its two streams' last seqs (cut right after a
    // chunk, neither lifted past it by a later frame that is no chunk).
    const lastOf = (method) =>
      Math.max(0, ...l.events.filter((e) => e.method === method).map((e) => e.params?._meta?.lembas?.seq ?? 0));
    const lastHeard = Math.min(lastOf("session/update"), lastOf("_lembas/event"));
    // Down until the turn is done: far more events than the log's four.
    for (let i = 0; i < 200 && l.device.driver.turnState(l.sessionId, l.calls.driver.incomplete()[0]?.turnId) !== "done"; i++) {
      await sleep(25);
    }
    l.reconnect();

    const gap = await l.calls.next((e) => e.kind === "gap");
    assert.deepEqual(gap, { kind: "gap", sessionId: l.sessionId, since: lastHeard });
    // The prompt finished while unlinked: the core imports its turn from the history.
    const { imported } = await answered;
    const answer = imported.find((t) => t.role === "assistant");
    assert.equal(answer?.text, WORDS.join(""), JSON.stringify(imported));
    // And a UI told of a gap imports the session's history itself.
    const history = await l.calls.request("_lembas/session/history", { sessionId: l.sessionId });
    assert.equal(history.turns.at(-1).text, WORDS.join(""));
    // Only the log's newest events came back, not the whole stream (and, on a later page, the
    // command set told to the new link as it took the session up again).
    const streamed = fetched(l.frames).filter((e) => e.params.update?.sessionUpdate !== "available_commands_update");
    assert.ok(streamed.length <= 4, JSON.stringify(fetched(l.frames)));
  } finally {
    l.stop();
  }
});
