// In a fresh project with @lembas/link installed from its tarball: both roles imported by the
// package's name in node — the harness's scripted device (the full module) and a client of the
// client-only module (`@lembas/link/client`), linked through a memory instance, run a prompt
// with a card.
import { test } from "node:test";
import assert from "node:assert/strict";

import { DeviceDriver, MemStore, version } from "@lembas/link";
import { ClientDriver } from "@lembas/link/client";
import * as clientOnly from "@lembas/link/client";
import { scriptedDevice, memoryInstance, Calls, TimeoutError } from "@lembas/link/harness";
import { fakeInstance } from "@lembas/link/harness/fake-instance";
import pkg from "@lembas/link/package.json" with { type: "json" };

test("the package's entries resolve by name, at the workspace's version", () => {
  assert.equal(typeof DeviceDriver, "function");
  assert.equal(typeof MemStore, "function");
  assert.equal(version(), pkg.version);
  assert.equal(clientOnly.DeviceDriver, undefined, "the client-only module has a device");
  assert.equal(typeof fakeInstance, "function");
});

test("sideEffects lists the entries whose import instantiates a module, and they are in the package", async () => {
  // Importing them is what makes the module usable in node: a bundler told they do nothing
  // would skip them and bind their re-exports to a module never instantiated.
  for (const entry of [".", "./client"]) {
    const file = pkg.exports[entry].node;
    assert.ok(pkg.sideEffects.includes(file), `${file} (${entry} in node) is not in sideEffects`);
  }
  for (const file of pkg.sideEffects) {
    await import(new URL(file, import.meta.resolve("@lembas/link/package.json")));
  }
});

test("a Calls with no link says so in a TimeoutError", async () => {
  const client = new Calls(new ClientDriver(), { timeoutMs: 20 });
  await assert.rejects(client.ready(), (e) => e instanceof TimeoutError && /attach a device's socket/.test(e.message));
  client.stop();
});

test("a client of the client-only module runs a prompt with a card on the harness's device", async () => {
  const instance = memoryInstance();
  const device = await scriptedDevice({ instance, roots: ["/work"], replies: ["permit deploy\nsay shipped"] });
  const client = new Calls(new ClientDriver({ config: { seed: 1 } }));
  instance.accept((socket) => client.attach(socket));
  try {
    assert.ok((await client.ready()).includes("turns"));
    const { sessionId } = await client.request("session/new", { cwd: "/work" });
    const answered = client.prompt(sessionId, "ship it");
    const card = await client.next((e) => e.kind === "request" && e.method === "session/request_permission");
    client.respond(card.id, { result: { outcome: { outcome: "selected", optionId: "once" } } });
    assert.equal((await answered).stopReason, "end_turn");
  } finally {
    client.stop();
    device.stop();
  }
});
