// The CLIENT role in headless Chromium (Debian's, driven by playwright-core): the client-only
// web build (pkg-web-client) in a page served on loopback, over a browser WebSocket to the test
// instance's relay, to a native `lembas link` device. It completes a prompt, answers a permission card (scripted engine
// `permit <title>`), and a delete made while the device is unlinked is kept in IndexedDB
// across a page reload and delivered once the device links again. A wasm device in a page
// keeps its store in IndexedDB across a reload, and one runs the model engine through the
// browser's fetch against a fake instance of another origin.
//
// Needs /usr/bin/chromium (`apt-get install chromium`; .ci/run installs it), bindings/pkg-web
// and pkg-web-client (bindings/build.sh) and the lembas binary (`cargo build -p lembas`). A
// missing Chromium skips each test, saying so, unless LEMBAS_TEST_PROGRAMS_REQUIRED is set (as
// .ci/run sets it): then it fails, as anything else missing always does.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join, dirname, normalize, extname, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { NativeInstance, NativeHome, LEMBAS } from "../test/native.mjs";
import { fakeInstance, held, streamed } from "../npm/harness/fake-instance.mjs";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const TOKEN = "browser-test-device-token-42";
const ROOT = normalize(join(dirname(fileURLToPath(import.meta.url)), ".."));
const TYPES = { ".html": "text/html", ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm" };

/** bindings/ on loopback: the pages, idb.mjs and the web builds. Nothing outside it is served. */
async function serve() {
  const server = createServer((req, res) => {
    const path = normalize(join(ROOT, decodeURIComponent(new URL(req.url, "http://x").pathname)));
    const type = TYPES[extname(path)];
    if (!path.startsWith(ROOT + sep) || !type || !existsSync(path) || path.includes("node_modules")) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": type, "cache-control": "no-store" }).end(readFileSync(path));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return server;
}

function launch(profile) {
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** Whether Chromium is installed; else the test skips, saying how to install it (or fails, with
 * LEMBAS_TEST_PROGRAMS_REQUIRED set). */
function chromiumInstalled(t) {
  if (existsSync(CHROMIUM)) return true;
  const what = `no Chromium at ${CHROMIUM} (apt-get install chromium)`;
  assert.ok(!process.env.LEMBAS_TEST_PROGRAMS_REQUIRED, `${what}; LEMBAS_TEST_PROGRAMS_REQUIRED is set`);
  t.skip(what);
  return false;
}

/** Wait in the page until the client's link is (or is not) ready. */
function linkReady(page, want) {
  return page.evaluate(async (want) => {
    const h = await window.harness;
    for (let i = 0; i < 300 && h.driver.isReady() !== want; i++) await new Promise((r) => setTimeout(r, 50));
    return h.driver.isReady();
  }, want);
}

test("a wasm client in Chromium prompts, answers a card, and keeps a delete across a reload", async (t) => {
  if (!chromiumInstalled(t)) return;
  assert.ok(existsSync(join(ROOT, "pkg-web-client/lembas_bindings_bg.wasm")), "no pkg-web-client: run bindings/build.sh");
  const instance = await NativeInstance.start({ token: TOKEN, relay: true });
  const home = new NativeHome(TOKEN);
  const server = await serve();
  const profile = mkdtempSync(join(tmpdir(), "lembas-chromium-"));
  let link;
  let context;
  try {
    home.login(instance.url);
    link = home.link();
    await instance.next((l) => l.event === "link_up");

    context = await launch(profile);
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    const relay = `ws://127.0.0.1:${instance.port}/api/devices/relay`;
    await page.goto(`http://127.0.0.1:${server.address().port}/test-browser/page.html?relay=${encodeURIComponent(relay)}`);

    const ready = await page.evaluate(async () => (await window.harness).next((e) => e.kind === "ready"));
    assert.ok(ready.capabilities.includes("delete"), ready.capabilities.join(","));
    await instance.next((l) => l.event === "relay_up");

    const made = await page.evaluate(async (cwd) => (await window.harness).call("session/new", { cwd }), home.work);
    assert.ok(made.result, JSON.stringify(made));
    const sessionId = made.result.sessionId;

    const first = await page.evaluate(
      async (s) => (await window.harness).prompt(s, "say hello from the browser", "b1"),
      sessionId,
    );
    assert.equal(first.result.stopReason, "end_turn");

    // The card: the device asks the page, the page allows once, the turn says so and ends.
    const card = await page.evaluate(async (s) => {
      const h = await window.harness;
      const answered = h.prompt(s, "permit rm -rf build\nsay done", "b2");
      const card = await h.next((e) => e.kind === "request" && e.method === "session/request_permission");
      h.respond(card.id, { result: { outcome: { outcome: "selected", optionId: "once" } } });
      const a = await answered;
      const said = h.events
        .filter((e) => e.kind === "notification" && e.params?.update?.content?.text)
        .map((e) => e.params.update.content.text);
      return { title: card.params.toolCall.title, stop: a.result.stopReason, said };
    }, sessionId);
    assert.equal(card.title, "rm -rf build");
    assert.equal(card.stop, "end_turn");
    assert.ok(card.said.includes("allowed"), JSON.stringify(card.said));
    assert.ok(card.said.includes("done"), JSON.stringify(card.said));

    // The device goes away; the page deletes the session meanwhile, kept in IndexedDB.
    await link.stop();
    assert.ok(link.stderr().length > 0, "lembas link -vv logged nothing");
    assert.ok(!link.stderr().includes(TOKEN), "the device token leaked into lembas link's log");
    assert.equal(await linkReady(page, false), false);
    const pending = await page.evaluate(async (s) => {
      const h = await window.harness;
      await h.deleteSession(s);
      return { client: h.driver.pendingDeletes(), stored: await h.kept.load() };
    }, sessionId);
    assert.deepEqual(pending.client, [{ sessionId, refusals: 0 }]);
    assert.deepEqual(pending.stored, [{ sessionId, refusals: 0 }]);

    // A reload: a new client, which finds the delete in IndexedDB ...
    await page.reload();
    const restored = await page.evaluate(async () => (await window.harness).driver.pendingDeletes());
    assert.deepEqual(restored, [{ sessionId, refusals: 0 }]);

    // ... and delivers it when the device links again.
    link = home.link();
    const deleted = await page.evaluate(async () => (await window.harness).next((e) => e.kind === "deleted", 20000));
    assert.equal(deleted.sessionId, sessionId);
    assert.equal(deleted.existed, true);
    const after = await page.evaluate(async () => {
      const h = await window.harness;
      await h.kept.flushed();
      return h.kept.load();
    });
    assert.deepEqual(after, []);
    assert.deepEqual(errors, []);

    // The device's own store no longer has it.
    await link.stop();
    link = undefined;
    const list = spawnSync(LEMBAS, ["sessions", "list"], { env: home.env, encoding: "utf8" });
    assert.equal(list.status, 0, list.stderr);
    assert.ok(!list.stdout.includes(sessionId), list.stdout);
  } finally {
    await context?.close();
    await link?.stop();
    await instance.stop();
    server.close();
    home.remove();
    rmSync(profile, { recursive: true, force: true });
  }
});

test("a wasm device in Chromium keeps its ledger and a pending delete in IndexedDB across a reload", async (t) => {
  if (!chromiumInstalled(t)) return;
  const server = await serve();
  const profile = mkdtempSync(join(tmpdir(), "lembas-chromium-"));
  const context = await launch(profile);
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`http://127.0.0.1:${server.address().port}/test-browser/device.html`);
    await page.waitForFunction(() => window.phase1 !== undefined);
    const one = await page.evaluate(() => window.phase1());
    // The delete made while unlinked is a record of its own in IndexedDB.
    assert.ok(one.tables.includes("deletes"), JSON.stringify(one.tables));
    assert.ok(one.tables.includes("turns"), JSON.stringify(one.tables));

    await page.reload();
    await page.waitForFunction(() => window.phase2 !== undefined);
    const two = await page.evaluate(([k, g]) => window.phase2(k, g), [one.kept, one.gone]);
    assert.deepEqual(two.unreadable, []);
    assert.ok(two.before.includes("deletes"), JSON.stringify(two.before));
    assert.equal(two.ledger, "done", "the kept session's turn ledger survived the reload");
    assert.equal(two.sessions, 1);
    assert.equal(two.sent, true, "the pending delete went out on the next link");
    assert.ok(!two.after.includes("deletes"), `sent, then forgotten: ${JSON.stringify(two.after)}`);

    // idb.mjs refuses, saying why: one database for both kinds, and a record it cannot write
    // (nothing of that batch is written).
    const refused = await page.evaluate(async () => {
      const { idbStore, idbKept } = await import("/idb.mjs");
      (await idbStore("lembas-test-shared")).close();
      const shared = await idbKept("lembas-test-shared").then(() => "opened", (e) => e.message);
      const store = await idbStore("lembas-test-ops");
      const put = { op: "put", table: "t", key: "k", value: 1 };
      const bad = await store.apply([put, { op: "zap", table: "t", key: "k" }]).then(() => "applied", (e) => e.message);
      const left = (await store.entries()).length;
      store.close();
      return { shared, bad, left };
    });
    assert.match(refused.shared, /idbKept\("lembas-test-shared"\): .*give idbStore and idbKept different names/);
    assert.match(refused.bad, /unknown store record op "zap" .*nothing was written/);
    assert.equal(refused.left, 0, "the put before the bad record was written");
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    server.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test("a wasm device in Chromium runs the model engine against an instance of another origin through fetch", async (t) => {
  if (!chromiumInstalled(t)) return;
  const MODEL = "qwen/coder";
  const inst = await fakeInstance({ token: TOKEN, models: [MODEL], cors: true });
  // "hold" in the prompt: one piece, then the stream stays open until the page cancels.
  inst.chat = (req, res, body) =>
    (JSON.stringify(body.messages).includes("hold") ? held("Holding") : streamed(["Hel", "lo"]))(req, res);
  const server = await serve();
  const profile = mkdtempSync(join(tmpdir(), "lembas-chromium-"));
  const context = await launch(profile);
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`http://127.0.0.1:${server.address().port}/test-browser/model.html`);
    await page.waitForFunction(() => window.run !== undefined);
    const r = await page.evaluate(([url, token, model]) => window.run(url, token, model), [inst.url, TOKEN, MODEL]);
    assert.ok(r.capabilities.includes("model"), r.capabilities.join(","));
    assert.equal(r.first, "end_turn");
    assert.equal(r.said, "Hello");
    assert.equal(r.second, "cancelled");
    assert.deepEqual(r.logs, []);
    // The connection is Chromium's network service's to close once the page aborts the fetch:
    // at once in 45 runs here (0-23 ms), but one CI run saw no close within 2 s. What is held
    // is that it closes, not how soon: up to 10 s.
    for (let i = 0; i < 500 && inst.cutShort < 1; i++) await new Promise((res) => setTimeout(res, 20));
    assert.equal(inst.cutShort, 1, "the held stream was not closed at the instance");
    const chats = inst.chats();
    assert.equal(chats.length, 2);
    assert.equal(chats[0].authorization, `Bearer ${TOKEN}`);
    assert.equal(chats[0].accept, "text/event-stream");
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    server.close();
    await inst.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
