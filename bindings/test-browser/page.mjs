// The page the browser test drives: loads the client-only web build (pkg-web-client, what a
// web UI loads), runs a ClientDriver whose undelivered deletes live in IndexedDB, and keeps a
// browser WebSocket to the relay URL given in the query string (?relay=ws://127.0.0.1:PORT/api/devices/relay; no token in it: the relay
// is the test instance's, and the device's own link carries the token). A socket the relay
// refuses (no device linked) or closes is opened again after a short wait. The test calls
// `window.harness`.
import init, { ClientDriver } from "../pkg-web-client/lembas_bindings.js";
import { idbKept } from "../idb.mjs";

const relay = new URL(location.href).searchParams.get("relay");
const events = [];

async function start() {
  await init();
  const kept = await idbKept("lembas-test-client");
  const driver = await ClientDriver.open({
    config: { seed: 7 },
    kept,
    onEvent: (e) => events.push(e),
  });
  const connect = () => {
    const ws = new WebSocket(relay);
    let again = false;
    const retry = () => {
      if (again) return;
      again = true;
      setTimeout(connect, 150);
    };
    ws.addEventListener("close", retry);
    ws.addEventListener("error", retry);
    driver.attach(ws);
  };
  connect();
  return {
    driver,
    kept,
    events,
    /** Resolves with the first event `pred` accepts, from those seen or to come. */
    next(pred, timeoutMs = 15000) {
      const seen = events.find(pred);
      return seen ? Promise.resolve(seen) : driver.next(pred, timeoutMs);
    },
    async call(method, params) {
      const id = driver.call(method, params);
      return driver.next((e) => e.kind === "answer" && e.id === id);
    },
    prompt(sessionId, text, turnId) {
      const turn = driver.prompt(sessionId, [{ type: "text", text }], turnId);
      return driver.next((e) => e.kind === "prompt_answered" && e.turnId === turn, 20000);
    },
    respond(id, outcome) {
      driver.respond(id, outcome);
    },
    deleteSession(sessionId) {
      driver.deleteSession(sessionId);
      return kept.flushed();
    },
  };
}

window.harness = start();
