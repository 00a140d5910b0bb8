// Types of driver.mjs (the JS shell that runs the bindings over sockets, timers and a store).
// The plain objects are those of lembas.d.ts, which the built package (pkg-node, pkg-web)
// exports as well.
import type * as lembas from "./pkg-web/lembas_bindings.js";
import type {
  ClientConfig,
  ClientEvent,
  DeviceConfig,
  Effect,
  PathResolution,
  StoreEntry,
  StoreRecord,
} from "./pkg-web/lembas_bindings.js";

/** What the drivers need of a socket: a browser `WebSocket` and npm `ws` both are one. */
export interface SocketLike {
  readyState?: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open", f: () => void): void;
  addEventListener(type: "message", f: (ev: { data: string | Uint8Array | ArrayBuffer }) => void): void;
  addEventListener(type: "close", f: (ev: { code?: number }) => void): void;
  addEventListener(type: "error", f: (ev: unknown) => void): void;
}

/** A device's store: `apply` may return a promise (the device hears `persisted` once it settles). */
export interface DeviceStore {
  entries(): StoreEntry[] | Promise<StoreEntry[]>;
  apply(records: StoreRecord[]): void | Promise<void>;
}

/** Runs `engine.handle` for the effects meant for an engine; the bindings' ScriptedEngine is one. */
export interface EngineLike {
  handle(effect: Effect, now: number): boolean;
  drain(): { sessionId: string; turnId: string; event: unknown }[];
  nextDeadline(): number | undefined;
  tick(now: number): void;
}

export function memoryStore(bindings: typeof lembas): DeviceStore & { inner: lembas.MemStore };

export interface DeviceDriverOptions {
  lembas: typeof lembas;
  config?: DeviceConfig;
  /** Makes a socket for the instance link (npm `ws` can send the `Authorization` header). */
  dial: () => SocketLike;
  /** Default: in memory. An asynchronous one (IndexedDB) needs `DeviceDriver.open`. */
  store?: DeviceStore;
  /** The store's entries, read already. */
  entries?: StoreEntry[];
  /** Default: the bindings' ScriptedEngine. */
  engine?: EngineLike;
  resolvePath?: (path: string) => PathResolution;
  onStop?: (message: string) => void;
  onEffect?: (effect: Effect) => void;
  /** Milliseconds; default `performance.now()`. */
  clock?: () => number;
}

export class DeviceDriver {
  constructor(o: DeviceDriverOptions);
  static open(o: DeviceDriverOptions): Promise<DeviceDriver>;
  readonly device: lembas.Device;
  readonly unreadable: { table: string; key: string; why: string }[];
  start(): void;
  stop(): void;
  /** Feed one input to the device, then drain it and the engine. */
  input(fn: (device: lembas.Device, now: number) => void): void;
}

/** A client's undelivered deletes, kept where a reload cannot lose them. */
export interface KeptDeletes {
  load(): Promise<{ sessionId: string; refusals: number }[]>;
  save(list: { sessionId: string; refusals: number }[]): void | Promise<void>;
}

export interface ClientDriverOptions {
  lembas: typeof lembas;
  config?: ClientConfig;
  onEvent?: (event: ClientEvent) => void;
  /** A localStorage-like object that keeps the undelivered deletes under `storageKey`. */
  storage?: { getItem(key: string): string | null | undefined; setItem(key: string, value: string): void };
  storageKey?: string;
  /** Or an asynchronous keeper of them (IndexedDB): use `ClientDriver.open`. */
  kept?: KeptDeletes;
  pendingDeletes?: { sessionId: string; refusals: number }[];
  clock?: () => number;
}

export class ClientDriver {
  constructor(o: ClientDriverOptions);
  static open(o: ClientDriverOptions): Promise<ClientDriver>;
  readonly client: lembas.Client;
  /** Take a device's link (a socket open or opening). */
  attach(socket: SocketLike): void;
  /** Run a call, a prompt, a respond or a delete, and send what it made. */
  input<T>(fn: (client: lembas.Client, now: number) => T): T;
  /** The first event `pred` accepts from now on. */
  next(pred: (event: ClientEvent) => boolean, timeoutMs?: number): Promise<ClientEvent>;
  stop(): void;
}
