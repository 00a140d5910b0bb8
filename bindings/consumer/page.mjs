// The harness in a page: a scripted device whose store is IndexedDB, and a client linked to it
// in memory whose undelivered deletes are too, so both outlive a reload.
import init, { version } from "@lembas/link";
import { scriptedDevice } from "@lembas/link/harness";
import { idbStore, idbKept } from "@lembas/link/idb";

const allowOnce = { result: { outcome: { outcome: "selected", optionId: "once" } } };

window.lembas = (async () => {
  await init();
  const device = await scriptedDevice({
    roots: ["/work"],
    replies: ["permit deploy\nsay shipped"],
    store: await idbStore("consumer-device"),
  });
  const client = await device.connect({ kept: await idbKept("consumer-client") });

  /** A prompt whose card the page allows; what it said, and how it ended. */
  async function promptWithCard(sessionId) {
    const texts = [];
    const answered = client.prompt(sessionId, "ship it");
    const card = await client.next((e) => e.kind === "request" && e.method === "session/request_permission");
    client.next((e) => {
      const text = e.kind === "notification" && e.params?.update?.content?.text;
      if (text) texts.push(text);
      return false;
    }, 5000).catch(() => {});
    client.respond(card.id, allowOnce);
    const { stopReason } = await answered;
    return { card: card.params.toolCall.title, texts, stopReason };
  }

  return {
    version: version(),
    sessions: () => device.driver.sessionCount(),
    async first() {
      const { sessionId } = await client.request("session/new", { cwd: "/work" });
      return { sessionId, ...(await promptWithCard(sessionId)) };
    },
    async afterReload(sessionId) {
      const status = await client.request("_lembas/session/status", { sessionId });
      return { exists: status.exists, ...(await promptWithCard(sessionId)) };
    },
  };
})();
