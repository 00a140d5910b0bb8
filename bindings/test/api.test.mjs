// The JS surface itself: a device, a client and the scripted engine joined in JS with virtual
// time (a fake device that behaves like the native one), a card answered from the web, errors
// as Error objects with the core's sentence, and a restore from the store.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Device, Client, ScriptedEngine, MemStore, version } = require("../pkg-node/lembas_bindings.js");

const ROOT = "/home/dev/work";
const deviceConfig = {
  seed: 3,
  host: "jsbox",
  platform: "node",
  remote: { enabled: true, roots: [ROOT], trusted: [ROOT] },
  models: [{ id: "lembas/default", instance: true }],
};

/** Both ends and the engine, routed as a shell routes them, in virtual time. */
class JsPair {
  constructor(config = deviceConfig) {
    this.now = 0;
    this.store = new MemStore();
    this.device = new Device(config, 0);
    this.client = new Client({ seed: 5 }, 0);
    this.engine = new ScriptedEngine();
    this.link = undefined;
    this.events = [];
    /** Every frame the client sent, as text. */
    this.sent = [];
    this.effects = [];
    this.queue = [];
  }

  drive() {
    for (let guard = 0; guard < 100000; guard++) {
      const d = this.device.drain();
      const c = this.client.drain();
      const e = this.engine.drain();
      if (!d.length && !c.length && !e.length) {
        const next = this.queue.shift();
        if (!next) return;
        next();
        continue;
      }
      for (const o of d) this.routeDevice(o);
      for (const o of c) this.routeClient(o);
      for (const r of e) this.device.engine(r.sessionId, r.turnId, r.event, this.now);
    }
    throw new Error("livelock");
  }

  routeDevice(o) {
    if (o.type === "send" && o.conn === this.link) {
      this.queue.push(() => this.client.frame(o.frame, this.now));
    } else if (o.type === "effect") {
      const e = o.effect;
      this.effects.push(e);
      if (e.kind === "dial") {
        this.link = this.device.open("link", this.now);
        this.client.linkUp(this.now);
      } else if (e.kind === "persist") {
        this.store.apply(e.records);
        this.device.persisted(e.seq, this.now);
      } else if (e.kind === "resolve_path") {
        this.device.pathResolved(e.request, { path: e.path }, this.now);
      } else if (e.kind === "read_history") {
        const read = this.store.history(e.sessionId, e.before, e.limit, e.maxBytes);
        this.device.historyRead(e.request, read, this.now);
      } else if (e.kind === "read_events") {
        this.device.eventsRead(e.request, this.store.events(e.sessionId), this.now);
      } else if (e.kind === "open_terminal") {
        // A fake shell: it echoes its keystrokes, and ends with 129 (SIGHUP) when hung up.
        this.device.terminalOpened(e.terminalId, { shell: "bash", integration: false }, this.now);
      } else if (e.kind === "terminal_input") {
        this.device.terminalOutput(e.terminalId, Buffer.from(e.base64, "base64"), this.now);
      } else if (e.kind === "close_terminal") {
        this.device.terminalExit(e.terminalId, 129, this.now);
      } else {
        this.engine.handle(e, this.now);
      }
    }
  }

  routeClient(o) {
    if (o.type === "send") {
      this.sent.push(o.frame);
      const link = this.link;
      this.queue.push(() => this.device.frame(link, o.frame, this.now));
    } else if (o.type === "event") {
      this.events.push(o.event);
    }
  }

  /** The link drops: both ends hear it, frames in flight are lost; the device dials again. */
  cut() {
    this.queue = [];
    this.device.closed(this.link, undefined, this.now);
    this.client.linkDown(this.now);
    this.link = undefined;
  }

  advance(ms) {
    const target = this.now + ms;
    for (;;) {
      this.drive();
      const next = [this.device.nextDeadline(), this.client.nextDeadline(), this.engine.nextDeadline()]
        .filter((t) => t !== undefined && t <= target);
      if (!next.length) break;
      this.now = Math.max(this.now, Math.min(...next));
      this.device.tick(this.now);
      this.client.tick(this.now);
      this.engine.tick(this.now);
    }
    this.now = target;
    this.drive();
  }
}

test("a JS pair links, makes a session, runs a prompt with a card answered from the web", () => {
  const p = new JsPair();
  p.device.startLink(0);
  p.drive();
  assert.ok(p.client.isReady());
  assert.ok(p.client.capabilities().includes("turns"));
  const hello = p.events.find((e) => e.kind === "hello");
  assert.equal(hello.hello.device.host, "jsbox");

  const id = p.client.call("session/new", { cwd: ROOT }, p.now);
  p.drive();
  const answer = p.events.find((e) => e.kind === "answer" && e.id === id);
  const sessionId = answer.result.sessionId;
  assert.match(sessionId, /^ses_/);

  const turn = p.client.prompt(sessionId, [{ type: "text", text: "permit deploy\nsay shipped" }], undefined, p.now);
  p.drive();
  assert.equal(p.device.turnState(sessionId, turn), "running");
  const card = p.events.find((e) => e.kind === "request" && e.method === "session/request_permission");
  assert.ok(card, "the web got the card");
  assert.deepEqual(p.client.openCards().map((c) => c.id), [card.id]);
  p.client.respond(card.id, { result: { outcome: { outcome: "selected", optionId: "once" } } }, p.now);
  p.advance(100);

  const done = p.events.find((e) => e.kind === "prompt_answered" && e.turnId === turn);
  assert.equal(done.result.stopReason, "end_turn");
  const said = p.events
    .filter((e) => e.kind === "notification" && e.method === "session/update")
    .map((e) => e.params.update?.content?.text)
    .filter(Boolean)
    .join("|");
  assert.match(said, /allowed/);
  assert.match(said, /shipped/);
  assert.equal(p.device.turnState(sessionId, turn), "done");

  // The device's store rebuilds it: the ledger still knows the turn.
  const restored = Device.restore(deviceConfig, p.store.entries(), p.now);
  assert.deepEqual(restored.unreadable(), []);
  assert.equal(restored.turnState(sessionId, turn), "done");
  assert.equal(restored.sessionCount(), 1);
});

test("a JS client cut mid-turn reattaches from its last seq: the turn's text reaches it whole", () => {
  const p = new JsPair();
  p.device.startLink(0);
  p.drive();
  const id = p.client.call("session/new", { cwd: ROOT }, p.now);
  p.drive();
  const sessionId = p.events.find((e) => e.kind === "answer" && e.id === id).result.sessionId;
  const words = Array.from({ length: 30 }, (_, i) => `w${String(i).padStart(2, "0")}`);
  const script = words.map((w) => `say ${w}\nsleep 100`).join("\n");
  p.client.prompt(sessionId, [{ type: "text", text: script }], "t1", p.now);
  p.advance(450);
  const before = p.events.length;
  p.cut();
  p.advance(60_000);
  assert.ok(p.client.isReady(), "linked again");

  const said = p.events
    .filter((e) => e.kind === "notification" && e.method === "session/update")
    .map((e) => e.params.update?.content?.text)
    .filter(Boolean)
    .join("");
  assert.equal(said, words.join(""), "no chunk missing, none twice");
  assert.ok(
    p.sent.some((f) => JSON.parse(f).method === "_lembas/session/events"),
    "the missed ones were fetched",
  );
  assert.deepEqual(p.events.filter((e) => e.kind === "gap"), []);
  // Chunks streamed while the link was down came first, then the turn followed live.
  const after = p.events.slice(before);
  const firstWord = after.findIndex((e) => e.kind === "notification" && e.params.update?.content?.text);
  const following = after.findIndex((e) => e.kind === "reattached");
  assert.ok(firstWord >= 0 && following > firstWord, `${firstWord} ${following}`);
  // Seqs rise one by one across the cut: the fetched ones are handed out as the live ones.
  const seqs = p.events
    .slice(before)
    .filter((e) => e.kind === "notification" && e.params?.sessionId === sessionId)
    .map((e) => e.params._meta.lembas.seq);
  assert.ok(seqs.length > 0 && seqs.every((q, i) => i === 0 || q === seqs[i - 1] + 1), String(seqs));
});

test("a client keeps an undelivered delete across a reload", () => {
  const c = new Client({}, 0);
  c.deleteSession("ses_gone", 0);
  const kept = c.pendingDeletes();
  assert.deepEqual(kept, [{ sessionId: "ses_gone", refusals: 0 }]);
  const reloaded = new Client({}, 10);
  reloaded.restorePendingDeletes(kept);
  assert.deepEqual(reloaded.pendingDeletes(), kept);
});

test("misuse and bad shapes are Errors with the core's sentence", () => {
  const d = new Device(deviceConfig, 0);
  assert.throws(() => d.frame(9, "{}", 0), (e) => e instanceof Error && /no open connection 9/.test(e.message));
  assert.throws(() => d.open("link", 0), /no dial was asked for/);
  assert.throws(() => d.open("socket", 0), /connection kind `socket`/);
  assert.throws(() => d.tick(-1), /finite number/);
  assert.throws(() => new Device({ remote: { maxmode: "auto" } }, 0), /maxmode/);
  assert.throws(() => new Device({ remote: { roots: ["work"] } }, 0), /not an absolute path/);
  const c = new Client(undefined, 0);
  assert.throws(() => c.call("session/new", { cwd: ROOT }, 0), /not ready/);
  assert.throws(() => c.respond(1, { result: 1, error: { code: 1, message: "x" } }, 0), /exactly one/);
  assert.equal(typeof version(), "string");
});

test("handle takes every input as one object and gives back what the method would", () => {
  const d = new Device(deviceConfig, 0);
  assert.throws(() => d.handle({ type: "open", kind: "link" }, 0), /no dial was asked for/);
  assert.throws(() => d.handle({ type: "fly" }, 0), /device input: `type`: unknown variant `fly`/);
  assert.throws(() => d.handle({ type: "tick", conn: 1 }, 0), /unknown field `conn`/);
  assert.equal(d.handle({ type: "start_link" }, 0), undefined);
  assert.deepEqual(d.drain(), [{ type: "effect", effect: { kind: "dial" } }]);
  assert.equal(d.handle({ type: "open", kind: "link" }, 1), 0);
  assert.equal(d.handle({ type: "delete_session", sessionId: "ses_none" }, 2), false);
  assert.equal(d.handle({ type: "reconfigure", remote: deviceConfig.remote }, 3), false);
  assert.equal(d.handle({ type: "reconfigure", remote: { ...deviceConfig.remote, maxMode: "plan" } }, 3), true);
  const c = new Client({}, 0);
  assert.throws(() => c.handle({ type: "call", method: "session/new", params: {} }, 0), /not ready/);
  assert.equal(c.handle({ type: "respond", id: 1, result: null }, 0), false);
  assert.equal(c.handle({ type: "link_up" }, 0), undefined);
});

test("a frame may be a string or bytes", () => {
  const d = new Device(deviceConfig, 0);
  const conn = d.open("stdio", 0);
  const init = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}';
  d.frame(conn, new TextEncoder().encode(init), 1);
  const [out] = d.drain();
  assert.equal(out.type, "send");
  assert.equal(out.conn, conn);
  assert.equal(JSON.parse(out.frame).id, 0);
  assert.deepEqual(d.connections(), [{ conn, kind: "stdio" }]);
});

test("a JS device with terminals on: open, keystrokes echoed back as output, close and exit", () => {
  const p = new JsPair({ ...deviceConfig, remote: { ...deviceConfig.remote, terminal: true } });
  p.device.startLink(0);
  p.drive();
  assert.ok(p.client.capabilities().includes("terminal"));
  const id = p.client.call("_lembas/terminal/open", { cols: 100, rows: 30 }, p.now);
  p.drive();
  const opened = p.events.find((e) => e.kind === "answer" && e.id === id);
  assert.equal(opened.result.cwd, ROOT);
  assert.equal(opened.result.shell, "bash");
  const terminalId = opened.result.terminalId;
  p.client.notify(
    "_lembas/terminal/input",
    { terminalId, data: Buffer.from("ls\r").toString("base64") },
    p.now,
  );
  p.advance(10);
  const output = p.events
    .filter((e) => e.kind === "notification" && e.method === "_lembas/terminal/output")
    .map((e) => Buffer.from(e.params.data, "base64").toString())
    .join("");
  assert.equal(output, "ls\r");
  p.client.notify("_lembas/terminal/close", { terminalId }, p.now);
  p.drive();
  const exit = p.events.find((e) => e.kind === "notification" && e.method === "_lembas/terminal/exit");
  assert.deepEqual(exit.params, { terminalId, code: 129 });
  assert.throws(() => p.device.terminalOpened(terminalId, { shell: "bash" }, p.now), /terminal start/);
});

test("every config member the core has is set from JS: terminals, outbound, inbound, sessions", () => {
  const config = {
    ...deviceConfig,
    remote: { ...deviceConfig.remote, terminal: true },
    terminals: { maxPerLink: 1, defaultSize: [100, 40] },
    sessions: { maxHeldBytes: 64 * 1024 * 1024, maxAnswerBytes: 1024 },
    inbound: { pauseBytes: 4096 },
  };
  const p = new JsPair(config);
  p.device.startLink(0);
  p.drive();
  const first = p.client.call("_lembas/terminal/open", {}, p.now);
  p.drive();
  // A terminal opened without a size opens at `terminals.defaultSize`.
  const open = p.effects.find((e) => e.kind === "open_terminal");
  assert.deepEqual([open.cols, open.rows], [100, 40]);
  assert.ok(p.events.find((e) => e.kind === "answer" && e.id === first).result.terminalId);
  // `terminals.maxPerLink: 1`: a second one on the link is refused, naming the bound.
  const second = p.client.call("_lembas/terminal/open", {}, p.now);
  p.drive();
  const refused = p.events.find((e) => e.kind === "answer" && e.id === second);
  assert.match(refused.error.message, /at most 1 terminals a link \(terminals\.max_per_link\); this link has 1 open/);
  // `sessions.maxAnswerBytes: 1024`: the history keeps that much of a longer answer.
  const made = p.client.call("session/new", { cwd: ROOT }, p.now);
  p.drive();
  const sessionId = p.events.find((e) => e.kind === "answer" && e.id === made).result.sessionId;
  const turn = p.client.prompt(sessionId, [{ type: "text", text: `say ${"x".repeat(3000)}` }], undefined, p.now);
  p.advance(100);
  assert.ok(p.events.find((e) => e.kind === "prompt_answered" && e.turnId === turn).result);
  const asked = p.client.call("_lembas/session/history", { sessionId }, p.now);
  p.drive();
  const history = JSON.stringify(p.events.find((e) => e.kind === "answer" && e.id === asked).result);
  assert.match(history, /the history keeps the first 1024 \(sessions.max_answer_bytes\)/);
  // `outbound` reaches the core's check of it.
  assert.throws(
    () => new Device({ outbound: { pauseBytes: 20, maxBytes: 10 } }, 0),
    /outbound: pause_bytes must be between 1 and max_bytes \(got 20 and 10\)/,
  );
  // A bad member is named by its path.
  assert.throws(() => new Device({ terminals: { cols: [20] } }, 0), /`terminals.cols`/);
  assert.throws(() => new Device({ liveness: {} }, 0), /unknown field `liveness`/);
});
