// The wasm shell in JS: runs a Device or a Client of the bindings over a WebSocket-like object
// (a browser `WebSocket`, or the npm `ws` package in node, which can send the `Authorization`
// header a browser cannot), with `setTimeout` timers and a store the caller hands in. It works
// the same with bindings/pkg-node and bindings/pkg-web: pass the loaded module as `lembas`.
//
// A WebSocket-like object has send(string), close(code?, reason?), and addEventListener for
// "open", "message" (event.data: a string or bytes), "close" (event.code) and "error".

const realClock = () => (globalThis.performance ? performance.now() : Date.now());

/** Re-arms one setTimeout at the earliest of some deadlines. */
class Timer {
  constructor(clock, fire) {
    this.clock = clock;
    this.fire = fire;
    this.handle = undefined;
  }

  arm(deadlines) {
    if (this.handle !== undefined) clearTimeout(this.handle);
    this.handle = undefined;
    const due = deadlines.filter((d) => d !== undefined);
    if (!due.length) return;
    const wait = Math.max(0, Math.min(...due) - this.clock());
    this.handle = setTimeout(() => {
      this.handle = undefined;
      this.fire();
    }, Math.min(wait, 2 ** 31 - 1));
  }

  stop() {
    if (this.handle !== undefined) clearTimeout(this.handle);
    this.handle = undefined;
  }
}

/**
 * An in-memory store with the shape the driver asks for: `entries()` at start-up and
 * `apply(records)` (may return a promise; the device hears `persisted` once it settles).
 * Backed by the bindings' MemStore, so it applies records exactly as the native store does.
 */
export function memoryStore(lembas) {
  const inner = new lembas.MemStore();
  return { entries: () => inner.entries(), apply: (records) => inner.apply(records), inner };
}

export class DeviceDriver {
  /**
   * @param {object} o
   * @param {object} o.lembas     the loaded bindings module
   * @param {object} o.config     a DeviceConfig
   * @param {() => object} o.dial makes a WebSocket-like object for the instance link
   * @param {object} [o.store]    { entries(), apply(records) }; default: in memory. With a
   *   store whose entries() is asynchronous (IndexedDB, bindings/idb.mjs), use DeviceDriver.open
   * @param {object[]} [o.entries] the store's entries, read already (what DeviceDriver.open does)
   * @param {object} [o.engine]   default: the bindings' ScriptedEngine
   * @param {(path: string) => object} [o.resolvePath] a PathResolution; default: as given
   * @param {(message: string) => void} [o.onStop] the device gave up linking
   * @param {(effect: object) => void} [o.onEffect] effects the driver does not handle itself
   */
  constructor(o) {
    this.lembas = o.lembas;
    this.clock = o.clock ?? realClock;
    this.store = o.store ?? memoryStore(o.lembas);
    this.dialer = o.dial;
    this.engine = o.engine ?? new o.lembas.ScriptedEngine();
    this.resolvePath = o.resolvePath ?? ((path) => ({ path }));
    this.onStop = o.onStop ?? (() => {});
    this.onEffect = o.onEffect ?? (() => {});
    this.device = o.lembas.Device.restore(o.config, o.entries ?? this.store.entries(), this.clock());
    this.unreadable = this.device.unreadable();
    this.socket = undefined;
    this.conn = undefined;
    this.stopped = false;
    this.timer = new Timer(this.clock, () => this.input((d, now) => {
      d.tick(now);
      this.engine.tick(now);
    }));
  }

  /** A driver over a store whose `entries()` may be a promise (IndexedDB). */
  static async open(o) {
    const store = o.store ?? memoryStore(o.lembas);
    return new DeviceDriver({ ...o, store, entries: await store.entries() });
  }

  /** Start linking (dials at once). */
  start() {
    this.input((d, now) => d.startLink(now));
  }

  /** Stop for good: close the link, clear the timer. */
  stop() {
    this.stopped = true;
    this.timer.stop();
    const s = this.socket;
    this.socket = undefined;
    this.conn = undefined;
    if (s) s.close(1000, "stopped");
  }

  /** Feed one input, then drain the device and the engine until both are quiet. */
  input(fn) {
    if (this.stopped) return;
    fn(this.device, this.clock());
    this.pump();
  }

  pump() {
    for (let guard = 0; guard < 100000; guard++) {
      const outs = this.device.drain();
      const reports = this.engine.drain();
      if (!outs.length && !reports.length) break;
      for (const o of outs) this.route(o);
      for (const r of reports) this.device.engine(r.sessionId, r.turnId, r.event, this.clock());
    }
    if (!this.stopped) this.timer.arm([this.device.nextDeadline(), this.engine.nextDeadline()]);
  }

  route(o) {
    if (o.type === "send") {
      if (o.conn === this.conn && this.socket) this.socket.send(o.frame);
      return;
    }
    if (o.type === "close") {
      if (o.conn === this.conn && this.socket) {
        const s = this.socket;
        this.socket = undefined;
        this.conn = undefined;
        s.close(o.code >= 3000 || o.code === 1000 ? o.code : 1000, o.reason);
      }
      return;
    }
    const e = o.effect;
    const now = this.clock();
    switch (e.kind) {
      case "dial":
        this.dial();
        break;
      case "persist": {
        const done = () => this.input((d, t) => d.persisted(e.seq, t));
        const r = this.store.apply(e.records);
        if (r && typeof r.then === "function") r.then(done);
        else queueMicrotask(done);
        break;
      }
      case "resolve_path": {
        const resolved = this.resolvePath(e.path);
        queueMicrotask(() => this.input((d, t) => d.pathResolved(e.request, resolved, t)));
        break;
      }
      case "stop":
        this.onStop(e.message);
        break;
      default:
        if (!this.engine.handle(e, now)) this.onEffect(e);
    }
  }

  dial() {
    let socket;
    try {
      socket = this.dialer();
    } catch {
      queueMicrotask(() => this.input((d, t) => d.dialFailed({ type: "transient" }, t)));
      return;
    }
    let opened = false;
    let gone = false;
    socket.addEventListener("open", () => {
      if (this.stopped) return socket.close(1000, "stopped");
      opened = true;
      this.socket = socket;
      this.input((d, t) => {
        this.conn = d.open("link", t);
      });
    });
    socket.addEventListener("message", (ev) => {
      if (this.socket !== socket) return;
      this.input((d, t) => d.frame(this.conn, ev.data, t));
    });
    const down = (code) => {
      if (gone) return;
      gone = true;
      if (!opened) {
        this.input((d, t) => d.dialFailed({ type: "transient" }, t));
      } else if (this.socket === socket) {
        const conn = this.conn;
        this.socket = undefined;
        this.conn = undefined;
        this.input((d, t) => d.closed(conn, code, t));
      }
    };
    socket.addEventListener("close", (ev) => down(ev.code));
    socket.addEventListener("error", () => down(undefined));
  }
}

export class ClientDriver {
  /**
   * @param {object} o
   * @param {object} o.lembas   the loaded bindings module
   * @param {object} [o.config] a ClientConfig
   * @param {(event: object) => void} [o.onEvent] every ClientEvent
   * @param {object} [o.storage] a localStorage-like object: undelivered deletes are kept in it
   *   under `storageKey`, so they survive a reload
   * @param {object} [o.kept] or an asynchronous keeper of them, { load(), save(list) } (IndexedDB,
   *   bindings/idb.mjs): use ClientDriver.open, which loads them before the first link
   */
  constructor(o) {
    this.clock = o.clock ?? realClock;
    this.client = new o.lembas.Client(o.config, this.clock());
    this.onEvent = o.onEvent ?? (() => {});
    this.storage = o.storage;
    this.storageKey = o.storageKey ?? "lembas.pendingDeletes";
    this.socket = undefined;
    this.waiters = [];
    this.timer = new Timer(this.clock, () => this.input((c, now) => c.tick(now)));
    this.kept = o.kept;
    this.saved = "[]";
    const kept = o.pendingDeletes ?? JSON.parse(this.storage?.getItem(this.storageKey) ?? "null");
    if (kept) this.input((c) => c.restorePendingDeletes(kept));
  }

  /** A driver whose undelivered deletes are first loaded from `o.kept` (IndexedDB). */
  static async open(o) {
    return new ClientDriver({ ...o, pendingDeletes: o.kept ? await o.kept.load() : undefined });
  }

  /** Take a device's link (an accepted or opened WebSocket-like object). */
  attach(socket) {
    const up = () => {
      this.socket = socket;
      this.input((c, t) => c.linkUp(t));
    };
    if (socket.readyState === 1) up();
    else socket.addEventListener("open", up);
    socket.addEventListener("message", (ev) => {
      if (this.socket === socket) this.input((c, t) => c.frame(ev.data, t));
    });
    const down = () => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      this.input((c, t) => c.linkDown(t));
    };
    socket.addEventListener("close", down);
    socket.addEventListener("error", down);
  }

  /** Run `fn(client, now)` (a call, a prompt, a respond, a delete) and send what it made. */
  input(fn) {
    const r = fn(this.client, this.clock());
    this.pump();
    return r;
  }

  /** The first event `pred` accepts from now on. */
  next(pred, timeoutMs = 10000) {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no such event in time")), timeoutMs);
      this.waiters.push({ pred, resolve: (e) => (clearTimeout(t), resolve(e)) });
    });
  }

  pump() {
    for (let outs = this.client.drain(); outs.length; outs = this.client.drain()) {
      this.route(outs);
    }
    const pending = this.client.pendingDeletes();
    if (this.storage) this.storage.setItem(this.storageKey, JSON.stringify(pending));
    // Written only when changed: an IndexedDB transaction per frame would be wasted work.
    const text = JSON.stringify(pending);
    if (this.kept && text !== this.saved) {
      this.saved = text;
      this.kept.save(pending);
    }
    this.timer.arm([this.client.nextDeadline()]);
  }

  route(outs) {
    for (const o of outs) {
      if (o.type === "send") {
        if (this.socket) this.socket.send(o.frame);
      } else if (o.type === "close") {
        const s = this.socket;
        if (s) {
          this.socket = undefined;
          s.close(o.code, o.reason);
          this.client.linkDown(this.clock());
        }
      } else if (o.type === "event") {
        this.onEvent(o.event);
        this.waiters = this.waiters.filter((w) => !(w.pred(o.event) && (w.resolve(o.event), true)));
      }
    }
  }

  stop() {
    this.timer.stop();
  }
}
