// A wasm DEVICE in the page running the model engine against an instance of another origin
// (the test's fake one), its HTTP through the browser's `fetch`, linked in memory to a wasm
// client: `run` makes a `lembas_model` session, has a prompt answered, then cancels a second
// prompt whose stream the instance holds open ("hold" in its text), and says what it saw.
import init, { DeviceDriver, ClientDriver } from "../pkg-web/lembas_bindings.js";
import { pair } from "../npm/harness/socket-pair.mjs";

const ROOT = "/home/dev/work";
const config = { seed: 12, remote: { enabled: true, roots: [ROOT], trusted: [ROOT] } };

const isChunk = (e) =>
  e.kind === "notification" && e.params?.update?.sessionUpdate === "agent_message_chunk";

window.run = async (instance, token, model) => {
  await init();
  const events = [];
  const logs = [];
  const client = new ClientDriver({ config: { seed: 3 }, onEvent: (e) => events.push(e) });
  const dial = () => {
    const [d, c] = pair();
    client.attach(c);
    return d;
  };
  const device = new DeviceDriver({ config, dial, model: { instance, token }, onLog: (l) => logs.push(l) });
  try {
    const ready = client.next((e) => e.kind === "ready");
    device.start();
    const { capabilities } = await ready;
    const made = client.next((e) => e.kind === "answer");
    client.call("session/new", { cwd: ROOT, _meta: { lembas_model: model } });
    const sessionId = (await made).result.sessionId;

    let answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, [{ type: "text", text: "say hello" }], "m1");
    const first = await answered;
    const said = events.filter(isChunk).map((e) => e.params.update.content.text).join("");

    const chunk = client.next(isChunk);
    answered = client.next((e) => e.kind === "prompt_answered");
    client.prompt(sessionId, [{ type: "text", text: "hold on" }], "m2");
    await chunk;
    client.notify("session/cancel", { sessionId });
    const second = await answered;
    return { capabilities, said, first: first.result?.stopReason, second: second.result?.stopReason, logs };
  } finally {
    device.stop();
    client.stop();
  }
};
