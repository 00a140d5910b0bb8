// Compiled, never run, in the fresh project: what a web UI and its harness write against the
// package's types, each entry by name.
import init, { ClientDriver, type ClientEvent, type DeviceConfig } from "@lembas/link";
import initClient, { ClientDriver as ProductionClient } from "@lembas/link/client";
import { idbStore, idbKept } from "@lembas/link/idb";
import { scriptedDevice, memoryInstance, Calls, LinkError, RpcError, TimeoutError } from "@lembas/link/harness";
import { fakeInstance, streamed } from "@lembas/link/harness/fake-instance";

export async function harness(): Promise<string> {
  await init();
  const device = await scriptedDevice({ roots: ["/work"], maxMode: "edit", replies: ["say hi"], store: await idbStore() });
  const client: Calls = await device.connect({ kept: await idbKept() });
  const { sessionId } = (await client.request("session/new", { cwd: "/work" })) as { sessionId: string };
  const answer = await client.prompt(sessionId, "hello");
  const stop: string = "stopReason" in answer ? answer.stopReason : "imported";
  const count: number = device.driver.sessionCount();
  device.instance?.drop(1006);
  return `${stop} ${count}`;
}

export async function production(socket: WebSocket): Promise<void> {
  await initClient();
  // Every option has a default: `new ProductionClient()` is a driver as it is.
  const driver = socket.protocol ? new ProductionClient({ onEvent: (e: ClientEvent) => void e }) : new ProductionClient();
  const calls = new Calls(driver, { timeoutMs: 5000 });
  calls.attach(socket);
  try {
    await calls.ready();
  } catch (e) {
    if (e instanceof LinkError) console.log(e.code, e.reason);
    else if (e instanceof RpcError) console.log(e.code, e.method, e.data);
    else if (e instanceof TimeoutError) console.log(e.timeoutMs);
  }
}

export async function model(): Promise<void> {
  const fake = await fakeInstance({ token: "t", models: ["m"] });
  fake.chat = streamed(["a", "b"]);
  const config: DeviceConfig = { seed: 1 };
  const instance = memoryInstance();
  const both = new ClientDriver();
  instance.accept((s) => both.attach(s));
  void config;
  await fake.close();
}
