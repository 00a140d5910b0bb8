// The client-only web module (bindings/pkg-web-client, `--no-default-features`): what a web UI
// loads. It has the client role and nothing of the device's, it fits the 400 KB budget, and
// its Client links to a Device of the full module, frame for frame, in virtual time.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { gzipSync } from "node:zlib";

import init, * as clientOnly from "../pkg-web-client/lembas_bindings.js";

const require = createRequire(import.meta.url);
const full = require("../pkg-node/lembas_bindings.js");

const WASM = new URL("../pkg-web-client/lembas_bindings_bg.wasm", import.meta.url);
const BUDGET = 400 * 1000;

test("the client-only module fits the budget and exports the client role alone", async (t) => {
  const bytes = readFileSync(WASM);
  t.diagnostic(`pkg-web-client: ${bytes.length} B raw, ${gzipSync(bytes, { level: 9 }).length} B gzipped`);
  assert.ok(bytes.length <= BUDGET, `${bytes.length} B is over the ${BUDGET} B budget`);
  await init({ module_or_path: bytes });
  assert.equal(typeof clientOnly.Client, "function");
  assert.equal(typeof clientOnly.ClientDriver, "function");
  for (const name of ["Device", "DeviceDriver", "ScriptedEngine", "MemStore"]) {
    assert.equal(clientOnly[name], undefined, `${name} is in the client-only module`);
  }
});

test("its Client links to a Device of the full module", async () => {
  await init({ module_or_path: readFileSync(WASM) });
  const device = new full.Device({ seed: 1, remote: { enabled: true, roots: ["/w"], trusted: ["/w"] } }, 0);
  const client = new clientOnly.Client({ seed: 2 }, 0);
  let link;
  let now = 0;
  device.startLink(now);
  for (let round = 0; round < 20 && !client.isReady(); round++) {
    now += 1;
    for (const o of device.drain()) {
      if (o.type === "effect" && o.effect.kind === "dial") {
        link = device.open("link", now);
        client.linkUp(now);
      } else if (o.type === "effect" && o.effect.kind === "persist") {
        device.persisted(o.effect.seq, now);
      } else if (o.type === "send" && o.conn === link) {
        client.frame(o.frame, now);
      }
    }
    for (const o of client.drain()) {
      if (o.type === "send") device.frame(link, o.frame, now);
    }
  }
  assert.ok(client.isReady(), "the handshake did not finish");
  assert.ok(client.capabilities().includes("delete"), `${client.capabilities()}`);
});
