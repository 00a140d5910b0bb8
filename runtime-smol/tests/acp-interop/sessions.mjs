// The official ACP TypeScript SDK (@agentclientprotocol/sdk) as an editor that comes back to a
// session: `lembas serve --stdio` (on its own, or relayed to a running service's hub) is asked
// for its sessions under <cwd> (session/list), loads <session> (session/load: its history is
// replayed as session/update before the answer), prompts in it, resumes it (no replay) and
// closes it. The SDK parses every message with the ACP v1 schemas, so what it hands on is
// valid. Prints one JSON line of what happened.
//
//   node sessions.mjs <path to lembas> <cwd> <session>
import * as acp from "@agentclientprotocol/sdk";
import { serve } from "./frames.mjs";

const [bin, cwd, sessionId] = process.argv.slice(2);
const agent = serve(bin);

let updates = [];
const app = acp
  .client({ name: "lembas-interop-sessions" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const once = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: once.optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  });

const kinds = () => updates.map((u) => u.sessionUpdate);
const result = await app.connectWith(agent.stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const listed = await ctx.request(acp.methods.agent.session.list, { cwd });
  updates = [];
  const loaded = await ctx.request(acp.methods.agent.session.load, {
    sessionId,
    cwd,
    mcpServers: [],
  });
  const replayed = kinds();
  const replayedTexts = updates.filter((u) => u.content?.type === "text").map((u) => u.content.text);
  updates = [];
  const answer = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "say from the sdk" }],
  });
  const said = updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => u.content.text);
  updates = [];
  await ctx.request(acp.methods.agent.session.resume, { sessionId, cwd });
  const resumedReplayed = kinds();
  await ctx.request(acp.methods.agent.session.close, { sessionId });
  return {
    loadSession: init.agentCapabilities?.loadSession ?? null,
    sessionCapabilities: init.agentCapabilities?.sessionCapabilities ?? null,
    listed: listed.sessions.map((s) => ({
      sessionId: s.sessionId,
      cwd: s.cwd,
      updatedAt: s.updatedAt,
    })),
    loadedMode: loaded.modes?.currentModeId ?? null,
    replayed,
    replayedTexts,
    stopReason: answer.stopReason,
    said,
    resumedReplayed,
  };
});
const code = await agent.end();
console.log(JSON.stringify({ ...result, exitCode: code, invalid: agent.invalid() }));
