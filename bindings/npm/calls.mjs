// Promises over a ClientDriver that always settle: a request's answer, a prompt's, or an error
// that says what to do. The driver itself hands out events (`next`). A call whose link drops
// is answered by the core at once with a `LINK_LOST` error (its answer can never come); this
// layer turns that into a LinkError carrying the socket's close code, which it watches for.
// Works over either module: the full one (`@lembas/link`) or the client-only one
// (`@lembas/link/client`).

/** The code of the core's own answer to a call whose link went down first
 * (`lembas_core::jsonrpc::code::LINK_LOST`). */
export const LINK_LOST = -32000;

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
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    const kind = options === null ? "null" : Array.isArray(options) ? "an array" : typeof options;
    throw new TypeError(`${what}: the options must be an object, not ${kind}`);
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

const closed = (drop) =>
  drop === undefined
    ? ""
    : drop.code === null
      ? " (a socket error)"
      : ` (close ${drop.code}${drop.reason ? `: ${drop.reason}` : ""})`;

/** A prompt's content blocks (a string is one text block), or null when `blocks` is neither a
 * string nor an array of ACP blocks (objects with a `type`). */
const blocksOf = (blocks) =>
  typeof blocks === "string"
    ? [{ type: "text", text: blocks }]
    : Array.isArray(blocks) && blocks.every((b) => typeof b?.type === "string")
      ? blocks
      : null;

export class Calls {
  /** What waits: `ready()` is settled early when any attached socket goes down. */
  #pending = new Set();
  /** The attached socket that opened last: the driver's link, which a request goes out on. */
  #link = null;
  /** How each attached socket went down: `{ code, reason }`, `code` null for an `error`. */
  #drops = new WeakMap();
  #lastDrop;

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
    // Listening before the driver does, so a drop's close code is known here before the
    // driver's answers to the calls it cut are handed out (a browser runs promise callbacks
    // between two listeners of one event).
    const listening = typeof socket?.addEventListener === "function";
    const opened = () => (this.#link = socket);
    const down = (ev) => this.#dropped(socket, ev);
    if (listening) {
      socket.addEventListener("open", opened);
      socket.addEventListener("close", down);
      socket.addEventListener("error", down);
    }
    try {
      this.driver.attach(socket);
    } catch (e) {
      if (listening) {
        socket.removeEventListener?.("open", opened);
        socket.removeEventListener?.("close", down);
        socket.removeEventListener?.("error", down);
      }
      throw e;
    }
    if (socket.readyState === 1) this.#link = socket;
  }

  /** The device's capabilities once the link is ready. */
  async ready(options) {
    const o = knownOptions(options, ["timeoutMs"], "ready(options)");
    if (this.driver.isReady()) return this.driver.capabilities();
    const ms = milliseconds(o.timeoutMs, this.timeoutMs, "options.timeoutMs");
    const e = await this.#wait("ready", (e) => e.kind === "ready" || e.kind === "refused", ms, true);
    if (e.kind === "refused") {
      throw new LinkError(`the link was refused${closed(e)}`, { code: e.code, reason: e.reason });
    }
    return e.capabilities;
  }

  /** Call `method`; its result, or an RpcError (the device refused), a LinkError (the link
   * dropped first: the core answers such a call with LINK_LOST) or a TimeoutError. Rejects at
   * once when the link is not ready. */
  async request(method, params, options) {
    const o = knownOptions(options, ["timeoutMs"], `request(${JSON.stringify(method)}, params, options)`);
    const ms = milliseconds(o.timeoutMs, this.timeoutMs, "options.timeoutMs");
    const link = this.#link;
    const id = this.driver.call(method, params);
    const e = await this.#wait(method, (e) => e.kind === "answer" && e.id === id, ms);
    if (e.error?.code === LINK_LOST) {
      // Known here, unless the driver let the link go for a newer one (its close comes later).
      const drop = link ? this.#drops.get(link) : undefined;
      throw new LinkError(`${method}: the link dropped before its answer${closed(drop)}`, drop);
    }
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
    if (typeof sessionId !== "string" || sessionId === "") {
      throw new TypeError(`prompt(sessionId, …): sessionId must be a session's id (a string), not ${JSON.stringify(sessionId)}`);
    }
    const content = blocksOf(blocks);
    if (!content) {
      throw new TypeError("prompt(sessionId, blocks): blocks must be a string or an array of ACP content blocks ({ type, … })");
    }
    if (o.turnId !== undefined && (typeof o.turnId !== "string" || o.turnId === "")) {
      throw new TypeError(`options.turnId must be a non-empty string (the turn's id), not ${JSON.stringify(o.turnId)}`);
    }
    const turn = this.driver.prompt(sessionId, content, o.turnId);
    const e = await this.#wait(
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
    return this.#wait("next", accepts, ms);
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
    if (this.#drops.has(socket)) return;
    const drop =
      ev?.type === "close" && typeof ev.code === "number"
        ? { code: ev.code, reason: typeof ev.reason === "string" ? ev.reason : "" }
        : { code: null, reason: "" };
    this.#drops.set(socket, drop);
    this.#lastDrop = drop;
    if (this.#link === socket) this.#link = null;
    for (const p of [...this.#pending]) {
      if (p.untilLinkDrops) p.reject(new LinkError(`${p.what}: the link dropped before it was ready${closed(drop)}`, drop));
    }
  }

  /** A promise of the first event `accepts` takes, settled early by `stop` (and, with
   * `untilLinkDrops`, when an attached socket goes down). */
  #wait(what, accepts, ms, untilLinkDrops = false) {
    return new Promise((resolve, reject) => {
      const entry = { what, reject, untilLinkDrops };
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
          const drop = this.#lastDrop ? `; the link last dropped${closed(this.#lastDrop)}` : "";
          const none = what === "ready" ? "no ready link" : what === "next" ? "no event it accepts" : "no answer";
          const hint = what === "ready" && !this.#lastDrop ? " (attach a device's socket with calls.attach)" : "";
          reject(new TimeoutError(`${what}: ${none} within ${ms} ms${drop}${hint}`, ms));
        },
      );
    });
  }
}
