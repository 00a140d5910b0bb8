// Promises over a ClientDriver that always settle: a request's answer, a prompt's, or an error
// that says what to do. The driver itself hands out events (`next`); a call whose link drops is
// forgotten by the core (its answer can never come), so this layer watches the sockets it
// attaches and rejects what waited on one that went down. Works over either module: the full
// one (`@lembas/link`) or the client-only one (`@lembas/link/client`).

/** The link went down (or was refused, or the Calls stopped) before the answer. */
export class LinkError extends Error {
  constructor(message, { code = null, reason = "" } = {}) {
    super(message);
    this.name = "LinkError";
    this.code = code;
    this.reason = reason;
  }
}

/** The device answered with a JSON-RPC error. */
export class RpcError extends Error {
  constructor(method, error) {
    super(`${method}: ${error.message} (JSON-RPC error ${error.code})`);
    this.name = "RpcError";
    this.method = method;
    this.code = error.code;
    this.data = error.data;
  }
}

/** Nothing answered within the time allowed. */
export class TimeoutError extends Error {
  constructor(message, timeoutMs) {
    super(message);
    this.name = "TimeoutError";
    this.timeoutMs = timeoutMs;
  }
}

/** Refuse an options object with a member not in `known`, naming it and what is known. */
export function knownOptions(options, known, what) {
  if (options === undefined) return {};
  if (options === null || typeof options !== "object") {
    throw new TypeError(`${what}: the options must be an object, not ${options === null ? "null" : typeof options}`);
  }
  for (const k of Object.keys(options)) {
    if (!known.includes(k)) throw new TypeError(`${what}: unknown option \`${k}\` (it takes ${known.join(", ")})`);
  }
  return options;
}

/** A whole number of milliseconds, at least 1, or the default when left out. */
export function milliseconds(value, fallback, what) {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new TypeError(`${what} must be a whole number of milliseconds, at least 1, not ${JSON.stringify(value)}`);
  }
  return value;
}

const closed = (code, reason) => (code === null ? "" : ` (close ${code}${reason ? `: ${reason}` : ""})`);

/** What every link that drops rejects; a request waits on its own link only. */
const ANY_LINK = Symbol("any link");

export class Calls {
  #pending = new Set();
  /** The attached socket that opened last: a request goes out on it. */
  #link = null;
  #down = new WeakSet();
  #lastDrop = null;

  constructor(driver, options) {
    if (!driver || typeof driver.call !== "function" || typeof driver.next !== "function") {
      throw new TypeError("new Calls(driver): driver must be a ClientDriver (of @lembas/link or @lembas/link/client)");
    }
    const o = knownOptions(options, ["timeoutMs", "promptTimeoutMs"], "new Calls(driver, options)");
    this.driver = driver;
    this.timeoutMs = milliseconds(o.timeoutMs, 10_000, "options.timeoutMs");
    this.promptTimeoutMs = milliseconds(o.promptTimeoutMs, 60_000, "options.promptTimeoutMs");
  }

  /** Hand the driver a device's link (open or opening) and watch it go down. */
  attach(socket) {
    this.driver.attach(socket);
    if (socket.readyState === 1) this.#link = socket;
    socket.addEventListener("open", () => (this.#link = socket));
    const down = (ev) => this.#dropped(socket, ev);
    socket.addEventListener("close", down);
    socket.addEventListener("error", down);
  }

  /** The device's capabilities once the link is ready. */
  async ready(options) {
    const o = knownOptions(options, ["timeoutMs"], "ready(options)");
    if (this.driver.isReady()) return this.driver.capabilities();
    const ms = milliseconds(o.timeoutMs, this.timeoutMs, "options.timeoutMs");
    const e = await this.#wait(ANY_LINK, "ready", (e) => e.kind === "ready" || e.kind === "refused", ms);
    if (e.kind === "refused") {
      throw new LinkError(`the link was refused${closed(e.code, e.reason)}`, { code: e.code, reason: e.reason });
    }
    return e.capabilities;
  }

  /** Call `method`; its result, or an RpcError (the device refused), a LinkError (the link
   * dropped first) or a TimeoutError. Throws at once when the link is not ready. */
  async request(method, params, options) {
    const o = knownOptions(options, ["timeoutMs"], `request(${JSON.stringify(method)}, params, options)`);
    const ms = milliseconds(o.timeoutMs, this.timeoutMs, "options.timeoutMs");
    const link = this.#link;
    const id = this.driver.call(method, params);
    const e = await this.#wait(link, method, (e) => e.kind === "answer" && e.id === id, ms);
    if (e.error) throw new RpcError(method, e.error);
    return e.result;
  }

  /** Send a prompt (content blocks, or a string as one text block). It survives dropped links
   * (the core reattaches it on the next); resolves with the answer's result (`{ stopReason }`),
   * or `{ imported }` when it had finished while unlinked; rejects with an RpcError, a
   * LinkError (the session is gone, or the Calls stopped) or a TimeoutError. */
  async prompt(sessionId, blocks, options) {
    const o = knownOptions(options, ["turnId", "timeoutMs"], "prompt(sessionId, blocks, options)");
    const ms = milliseconds(o.timeoutMs, this.promptTimeoutMs, "options.timeoutMs");
    const content = typeof blocks === "string" ? [{ type: "text", text: blocks }] : blocks;
    const turn = this.driver.prompt(sessionId, content, o.turnId);
    const e = await this.#wait(
      null,
      `prompt ${turn}`,
      (e) =>
        (e.kind === "prompt_answered" || (e.kind === "reattached" && (e.how === "gone" || e.how === "imported"))) &&
        e.sessionId === sessionId &&
        e.turnId === turn,
      ms,
    );
    if (e.kind === "reattached" && e.how === "gone") {
      throw new LinkError(`prompt ${turn}: session ${sessionId} is gone from the device`);
    }
    if (e.kind === "reattached") return { imported: e.turns ?? [] };
    if (e.error) throw new RpcError("session/prompt", e.error);
    return e.result;
  }

  /** The driver's `next`, its timeout a TimeoutError saying what was awaited. */
  next(accepts, timeoutMs) {
    const ms = milliseconds(timeoutMs, this.timeoutMs, "next(accepts, timeoutMs): timeoutMs");
    return this.#wait(null, "next", accepts, ms);
  }

  /** Answer a card (a request the device sent): see ClientDriver.respond. */
  respond(id, outcome) {
    return this.driver.respond(id, outcome);
  }

  /** Stop the driver; everything still waiting rejects with a LinkError. */
  stop() {
    this.driver.stop();
    for (const p of [...this.#pending]) p.reject(new LinkError(`${p.what}: stopped before an answer`));
  }

  #dropped(socket, ev) {
    if (this.#down.has(socket)) return;
    this.#down.add(socket);
    const code = typeof ev?.code === "number" ? ev.code : null;
    const reason = typeof ev?.reason === "string" ? ev.reason : "";
    this.#lastDrop = { code, reason };
    if (this.#link === socket) this.#link = null;
    for (const p of [...this.#pending]) {
      if (p.link === socket || p.link === ANY_LINK) {
        const what = p.link === ANY_LINK ? "the link dropped before it was ready" : "the link dropped before its answer";
        p.reject(new LinkError(`${p.what}: ${what}${closed(code, reason)}`, { code, reason }));
      }
    }
  }

  /** A promise of the first event `accepts` takes, settled early when `link` goes down. */
  #wait(link, what, accepts, ms) {
    return new Promise((resolve, reject) => {
      const entry = { link, what, reject };
      this.#pending.add(entry);
      const done = () => this.#pending.delete(entry);
      let waiting;
      try {
        waiting = this.driver.next(accepts, ms);
      } catch (e) {
        done();
        return reject(e);
      }
      waiting.then(
        (e) => (done(), resolve(e)),
        (e) => {
          done();
          if (!/within \d+ ms/.test(String(e?.message))) return reject(e);
          const drop = this.#lastDrop ? `; the link last dropped${closed(this.#lastDrop.code, this.#lastDrop.reason)}` : "";
          const none = link === ANY_LINK ? "no ready link" : "no answer";
          const hint = link === ANY_LINK && !this.#lastDrop ? " (attach a device's socket with calls.attach)" : "";
          reject(new TimeoutError(`${what}: ${none} within ${ms} ms${drop}${hint}`, ms));
        },
      );
    });
  }
}
