// The harness over a module of the wasm build (`load()` resolves to it, instantiated):
// `scriptedDevice` stands up a DeviceDriver on the core's scripted engine, linked to an
// instance URL or to a memory instance, and `connect()` links a ClientDriver to it.
import { Calls, knownOptions, milliseconds } from "../calls.mjs";
import { memoryInstance } from "./memory-instance.mjs";

const MODES = ["plan", "manual", "edit", "auto"];
const DEVICE = ["roots", "trusted", "maxMode", "replies", "instance", "token", "WebSocket", "store", "config", "onEffect", "onStop"];
const CONNECT = ["config", "onEvent", "storage", "storageKey", "kept", "timeoutMs", "promptTimeoutMs"];

/** A seed for a driver's ids. Random, not the core's fixed default: a reloaded page's client
 * would make the turn ids of the page before it, and the device would answer them from its
 * ledger instead of running them. */
const randomSeed = () => {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2));
  return high * 2 ** 21 + (low >>> 11);
};

/** An options member that must be a plain object (a config), or left out. */
function object(value, what, kind) {
  if (value !== undefined && (value === null || typeof value !== "object" || Array.isArray(value))) {
    const got = value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
    throw new TypeError(`${what} must be a ${kind} object, not ${got}`);
  }
  return value;
}

const absolute = (p) => typeof p === "string" && (p.startsWith("/") || /^[A-Za-z]:[\\/]/.test(p));

function paths(value, fallback, what) {
  if (value === undefined) return fallback;
  if (!Array.isArray(value)) throw new TypeError(`${what} must be an array of absolute paths, not ${typeof value}`);
  const bad = value.find((p) => !absolute(p));
  if (bad !== undefined) {
    throw new TypeError(`${what}: ${JSON.stringify(bad)} is not an absolute path (a session's cwd is checked against it)`);
  }
  return value;
}

/** How the device reaches its instance: `dial`, and the memory instance if it is one. */
function linkTo(o) {
  if (typeof o.instance === "string") {
    let url;
    try {
      url = new URL(o.instance);
    } catch {
      throw new TypeError(`options.instance: ${JSON.stringify(o.instance)} is not a URL (a device link is ws://host/api/devices/link)`);
    }
    if (url.protocol !== "ws:" && url.protocol !== "wss:") {
      throw new TypeError(`options.instance: a device link's URL is ws:// or wss://, not ${url.protocol}//`);
    }
    if (typeof o.token !== "string" || o.token === "") {
      throw new TypeError("options.token is needed with an instance URL: the instance takes a device by its token");
    }
    if (typeof o.WebSocket !== "function") {
      throw new TypeError(
        "options.WebSocket is needed with an instance URL: a WebSocket class that sends the token in an " +
          "Authorization header, as npm ws's does (a browser's cannot; use a memory instance in a page)",
      );
    }
    const headers = { Authorization: `Bearer ${o.token}` };
    return { dial: () => new o.WebSocket(url.href, { headers }), memory: null };
  }
  for (const k of ["token", "WebSocket"]) {
    if (o[k] !== undefined) throw new TypeError(`options.${k} is for an instance URL; a memory instance takes none`);
  }
  const memory = o.instance === undefined ? memoryInstance() : o.instance;
  if (typeof memory?.dial !== "function" || typeof memory?.accept !== "function") {
    throw new TypeError("options.instance must be a device link's ws:// URL or a memoryInstance()");
  }
  return { dial: () => memory.dial(), memory };
}

export function makeHarness(load) {
  class ScriptedDevice {
    constructor(driver, instance) {
      /** The DeviceDriver: `deleteSession`, `sessionCount`, `turnState`, `stop`, ... */
      this.driver = driver;
      /** The memory instance it links to (null with a URL): `accept` a UI's driver, `drop` the link. */
      this.instance = instance;
    }

    /** A ClientDriver linked to this device through its memory instance, in a Calls, ready. */
    async connect(options) {
      const o = knownOptions(options, CONNECT, "connect(options)");
      if (!this.instance) {
        throw new Error("connect(): this device links to an instance URL; a client reaches it through that instance");
      }
      object(o.config, "options.config", "ClientConfig");
      const timeouts = {};
      for (const k of ["timeoutMs", "promptTimeoutMs"]) {
        if (o[k] !== undefined) timeouts[k] = milliseconds(o[k], undefined, `options.${k}`);
      }
      const { ClientDriver } = await load();
      const driverOptions = Object.fromEntries(
        ["onEvent", "storage", "storageKey", "kept"].filter((k) => o[k] !== undefined).map((k) => [k, o[k]]),
      );
      driverOptions.config = { seed: randomSeed(), ...o.config };
      const driver = o.kept ? await ClientDriver.open(driverOptions) : new ClientDriver(driverOptions);
      const calls = new Calls(driver, timeouts);
      this.instance.accept((socket) => calls.attach(socket));
      await calls.ready();
      return calls;
    }

    stop() {
      this.driver.stop();
    }
  }

  /** A device on the core's scripted engine, started. See harness/index.d.mts. */
  async function scriptedDevice(options) {
    const o = knownOptions(options, DEVICE, "scriptedDevice(options)");
    const roots = paths(o.roots, ["/work"], "options.roots");
    const trusted = paths(o.trusted, roots, "options.trusted");
    if (o.maxMode !== undefined && !MODES.includes(o.maxMode)) {
      throw new TypeError(`options.maxMode must be one of ${MODES.join(", ")}, not ${JSON.stringify(o.maxMode)}`);
    }
    if (o.replies !== undefined && !(Array.isArray(o.replies) && o.replies.every((r) => typeof r === "string"))) {
      throw new TypeError("options.replies must be an array of strings: the scripted engine's script for each prompt in turn");
    }
    object(o.config, "options.config", "DeviceConfig");
    const { dial, memory } = linkTo(o);
    const config = {
      seed: randomSeed(),
      ...o.config,
      remote: { enabled: true, roots, trusted, ...(o.maxMode && { maxMode: o.maxMode }), ...o.config?.remote },
      // A harness's link comes back at once after a drop, not after the default's seconds.
      backoff: { initialMs: 20, maxMs: 500, ...o.config?.backoff },
    };
    const driverOptions = { config, dial };
    for (const k of ["replies", "store", "onEffect", "onStop"]) if (o[k] !== undefined) driverOptions[k] = o[k];
    const { DeviceDriver } = await load();
    const driver = o.store ? await DeviceDriver.open(driverOptions) : new DeviceDriver(driverOptions);
    driver.start();
    return new ScriptedDevice(driver, memory);
  }

  return { scriptedDevice };
}
