// The official ACP TypeScript SDK as an editor on a running service (`lembas serve --stdio` is
// relayed to its hub), in a session the web shares: the prompt puts two permission cards. The
// first is left open here until the device withdraws it (`$/cancel_request`, which aborts the
// handler's signal) because the web answered it; the second is answered here at once, and the
// web is told it was settled. Prints one JSON line of what happened.
//
//   node shared.mjs <path to lembas> <cwd>
import * as acp from "@agentclientprotocol/sdk";
import { serve } from "./frames.mjs";

const [bin, cwd] = process.argv.slice(2);
const agent = serve(bin);

const asks = [];
const updates = [];
const app = acp
  .client({ name: "lembas-interop-shared" })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params, signal }) => {
    const ask = { title: params.toolCall?.title, withdrawn: false };
    asks.push(ask);
    if (ask.title === "answered on the web") {
      // A person looking at the dialog: it stays until it is taken down.
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      ask.withdrawn = true;
      return { outcome: { outcome: "cancelled" } };
    }
    const once = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: once.optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  });

const result = await app.connectWith(agent.stream, async (ctx) => {
  await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const answer = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [
      {
        type: "text",
        text: "say first\npermit answered on the web\nsay second\npermit answered here\nsay third",
      },
    ],
  });
  return { sessionId: session.sessionId, stopReason: answer.stopReason };
});
const code = await agent.end();
console.log(
  JSON.stringify({
    ...result,
    exitCode: code,
    invalid: agent.invalid(),
    asks,
    said: updates
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content.text),
  }),
);
