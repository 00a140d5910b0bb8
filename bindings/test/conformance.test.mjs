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

/** Drives a device as a transcript says; a `restart` rebuilds it from what it persisted. */
class DeviceReplay {
  constructor(config) {
    this.config = config;
    this.device = new Device(config, 0);
    this.store = new MemStore();
  }

  step(input, at) {
    const d = this.device;
    let returns;
    switch (input.type) {
      case "start_link": d.startLink(at); break;
      case "open": returns = d.open(input.kind, at); break;
      case "dial_failed": d.dialFailed(input.failure, at); break;
      case "frame": d.frame(input.conn, input.frame, at); break;
      case "closed": d.closed(input.conn, input.code ?? undefined, at); break;
      case "tick": d.tick(at); break;
      case "persisted": d.persisted(input.seq, at); break;
      case "path_resolved": {
        const { type, request, ...resolution } = input;
        d.pathResolved(request, resolution, at);
        break;
      }
      case "engine": d.engine(input.sessionId, input.turnId, input.event, at); break;
      case "delete_session": returns = d.deleteSession(input.sessionId, at); break;
      case "restart": {
        this.device.free();
        this.device = Device.restore(this.config, this.store.entries(), at);
        assert.deepEqual(this.device.unreadable(), []);
        break;
      }
      default: throw new Error(`unknown device input ${input.type}`);
    }
    const outputs = this.device.drain();
    for (const o of outputs) {
      if (o.type === "effect" && o.effect.kind === "persist") this.store.apply(o.effect.records);
    }
    return { returns, outputs };
  }
}

class ClientReplay {
  constructor(config) {
    this.client = new Client(config, 0);
  }

  step(input, at) {
    const c = this.client;
    let returns;
    switch (input.type) {
      case "link_up": c.linkUp(at); break;
      case "link_down": c.linkDown(at); break;
      case "frame": c.frame(input.frame, at); break;
      case "tick": c.tick(at); break;
      case "call": returns = c.call(input.method, input.params, at); break;
      case "notify": c.notify(input.method, input.params, at); break;
      case "respond": {
        const { type, id, ...outcome } = input;
        c.respond(id, outcome, at);
        break;
      }
      case "prompt": returns = c.prompt(input.sessionId, input.blocks, input.turnId ?? undefined, at); break;
      case "delete_session": c.deleteSession(input.sessionId, at); break;
      case "restore_pending_deletes": c.restorePendingDeletes(input.kept); break;
      default: throw new Error(`unknown client input ${input.type}`);
    }
    return { returns, outputs: c.drain() };
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
