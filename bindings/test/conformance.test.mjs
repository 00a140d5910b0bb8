// Replays every transcript in spec/conformance through the wasm bindings (bindings/pkg-node):
// each role on a fresh Device / Client, every input at its virtual time, and every drained
// output must equal the transcript's, as the Rust replay (bindings/tests/conformance.rs) does.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const require = createRequire(import.meta.url);
const { Device, Client, MemStore } = require("../pkg-node/lembas_bindings.js");

const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.join(here, "../../spec/conformance");
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();

/** Drives a device as a transcript says, each input through `Device.handle`; a `restart` (a
 * step of the transcript, not an input of the device) rebuilds it from what it persisted. */
class DeviceReplay {
  constructor(config) {
    this.config = config;
    this.device = new Device(config, 0);
    this.store = new MemStore();
  }

  step(input, at) {
    let returns;
    if (input.type === "restart") {
      this.device.free();
      this.device = Device.restore(this.config, this.store.entries(), at);
      assert.deepEqual(this.device.unreadable(), []);
    } else {
      returns = this.device.handle(input, at);
    }
    const outputs = this.device.drain();
    for (const o of outputs) {
      if (o.type === "effect" && o.effect.kind === "persist") this.store.apply(o.effect.records);
    }
    return { returns, outputs };
  }
}

/** Drives a client as a transcript says, each input through `Client.handle`. */
class ClientReplay {
  constructor(config) {
    this.client = new Client(config, 0);
  }

  step(input, at) {
    const returns = this.client.handle(input, at);
    return { returns, outputs: this.client.drain() };
  }
}

assert.ok(files.length >= 6, `expected the conformance transcripts in ${dir}`);

for (const file of files) {
  const t = JSON.parse(readFileSync(path.join(dir, file), "utf8"));
  for (const role of ["device", "client"]) {
    test(`${t.name}: the ${role} replays frame for frame`, () => {
      const r = role === "device" ? new DeviceReplay(t.device) : new ClientReplay(t.client);
      let n = 0;
      t.steps.forEach((s, i) => {
        if (s.role !== role) return;
        const got = r.step(s.input, s.at);
        const where = `${file} step ${i} (${JSON.stringify(s.input).slice(0, 160)})`;
        if (s.returns !== undefined) assert.deepStrictEqual(got.returns, s.returns, where);
        assert.deepStrictEqual(got.outputs, s.outputs, where);
        n++;
      });
      assert.ok(n > 0);
    });
  }
}
