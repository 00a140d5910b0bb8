// The official ACP TypeScript SDK (@agentclientprotocol/sdk) as the client of `lembas serve
// --stdio`: initialize, session/new, and a prompt whose scripted `permit` directive puts a
// permission card to the client, which allows it once. Prints one JSON line of what happened.
//
//   node client.mjs <path to lembas> <cwd>
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [bin, cwd] = process.argv.slice(2);
const child = spawn(bin, ["serve", "--stdio"], { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

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

const result = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const answer = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "say before\npermit run the tests\nsay after" }],
  });
  return {
    protocolVersion: init.protocolVersion,
    loadSession: init.agentCapabilities?.loadSession ?? null,
    sessionId: session.sessionId,
    stopReason: answer.stopReason,
  };
});
child.stdin.end();
const code = await exited;
console.log(
  JSON.stringify({
    ...result,
    exitCode: code,
    asks: asks.map((a) => ({ title: a.toolCall?.title, options: a.options.map((o) => o.kind) })),
    said: updates
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content.text),
  }),
);
