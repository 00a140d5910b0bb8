// The official ACP TypeScript SDK (@agentclientprotocol/sdk) as the client of `lembas serve
// --stdio`: initialize, session/new, and a prompt (by default one whose scripted `permit`
// directive puts a permission card to the client) whose permission cards the client allows
// once. The SDK parses every message with its schemas, so an update it hands on is a valid
// one. Prints one JSON line of what happened.
//
//   node client.mjs <path to lembas> <cwd> [<prompt text>]
import * as acp from "@agentclientprotocol/sdk";
import { serve } from "./frames.mjs";

const [bin, cwd, text = "say before\npermit run the tests\nsay after"] = process.argv.slice(2);
const agent = serve(bin);

const asks = [];
const updates = [];
const app = acp
  .client({ name: "lembas-interop" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    asks.push(params);
    const once = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: once.optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  });

const result = await app.connectWith(agent.stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const answer = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text }],
  });
  return {
    protocolVersion: init.protocolVersion,
    loadSession: init.agentCapabilities?.loadSession ?? null,
    sessionId: session.sessionId,
    stopReason: answer.stopReason,
  };
});
const code = await agent.end();
console.log(
  JSON.stringify({
    ...result,
    exitCode: code,
    invalid: agent.invalid(),
    asks: asks.map((a) => ({
      title: a.toolCall?.title,
      kind: a.toolCall?.kind,
      options: a.options.map((o) => o.kind),
    })),
    tools: updates
      .filter((u) => u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update")
      .map((u) => ({
        update: u.sessionUpdate,
        id: u.toolCallId,
        kind: u.kind,
        status: u.status,
        content: (u.content ?? []).map((c) => c.type),
        diff: (u.content ?? []).find((c) => c.type === "diff"),
      })),
    said: updates
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content.text),
  }),
);
