// In a fresh project with @lembas/link installed from its tarball: a page in headless Chromium
// (Debian's, driven by playwright-core from bindings/node_modules: LEMBAS_NODE_MODULES) imports
// the web entries through an import map, links a client to the harness's device, runs a
// prompt with a card, and after a reload finds the session kept and runs another.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, normalize, extname, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ROOT = dirname(fileURLToPath(import.meta.url));
const TYPES = { ".html": "text/html", ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm" };

/** The project on loopback: the page, and the installed package under node_modules. */
async function serve() {
  const server = createServer((req, res) => {
    const path = normalize(join(ROOT, decodeURIComponent(new URL(req.url, "http://x").pathname)));
    const type = TYPES[extname(path)];
    if (!path.startsWith(ROOT + sep) || !type || !existsSync(path)) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": type, "cache-control": "no-store" }).end(readFileSync(path));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return server;
}

test("a page imports @lembas/link by an import map, prompts through a card, and survives a reload", async (t) => {
  if (!existsSync(CHROMIUM)) {
    const what = `no Chromium at ${CHROMIUM} (apt-get install chromium)`;
    assert.ok(!process.env.LEMBAS_TEST_PROGRAMS_REQUIRED, `${what}; LEMBAS_TEST_PROGRAMS_REQUIRED is set`);
    return t.skip(what);
  }
  assert.ok(process.env.LEMBAS_NODE_MODULES, "LEMBAS_NODE_MODULES names bindings/node_modules (playwright-core)");
  const { chromium } = createRequire(join(process.env.LEMBAS_NODE_MODULES, "noop.js"))("playwright-core");
  const server = await serve();
  const profile = mkdtempSync(join(tmpdir(), "lembas-consumer-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`http://127.0.0.1:${server.address().port}/page.html`);
    const version = await page.evaluate(async () => (await window.lembas).version);
    const pkg = JSON.parse(readFileSync(join(ROOT, "node_modules/@lembas/link/package.json"), "utf8"));
    assert.equal(version, pkg.version);

    const first = await page.evaluate(async () => (await window.lembas).first());
    assert.match(first.sessionId, /^ses_/);
    assert.deepEqual([first.card, first.texts, first.stopReason], ["deploy", ["allowed", "shipped"], "end_turn"]);

    await page.reload();
    assert.equal(await page.evaluate(async () => (await window.lembas).sessions()), 1);
    const after = await page.evaluate(async (s) => (await window.lembas).afterReload(s), first.sessionId);
    assert.deepEqual([after.exists, after.card, after.texts, after.stopReason], [true, "deploy", ["allowed", "shipped"], "end_turn"]);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
    server.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
