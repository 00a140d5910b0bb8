// Types of @lembas/link/harness (node.mjs in node, web.mjs in a browser).
import type { DeviceConfig, DeviceDriver, DeviceStore, Effect, ClientConfig, ClientEvent, KeptDeletes, Mode, SocketLike } from "../web/lembas_bindings.js";
import type { Calls } from "../calls.mjs";

export { Calls, LINK_LOST, LinkError, RpcError, TimeoutError, type CallsOptions, type PromptResult } from "../calls.mjs";

/** An instance in memory: a device's `dial` makes a link; the `accept`ed handler takes the
 * client's end of each. A link opens once taken, so nothing is lost before a client comes. */
export interface MemoryInstance {
  dial(): SocketLike;
  /** `handler(socket)` gets each device link from now on (and the one waiting): a UI's
   * `(socket) => driver.attach(socket)`. Replaces the handler before, and cuts the link that
   * one holds (close 1000), so the device dials again to this one. */
  accept(handler: (socket: SocketLike) => void): void;
  /** Cut the current link, as a network would (default code 1006). The device dials again
   * after its backoff (20 ms in the harness). */
  drop(code?: number, reason?: string): void;
}

export function memoryInstance(): MemoryInstance;

/** Two connected WebSocket-like ends in memory, opening in a microtask; `frames` records what
 * reaches the second. */
export function pair(frames?: string[]): [SocketLike, SocketLike];
export function unopenedPair(frames?: string[]): { ends: [SocketLike, SocketLike]; open(): void };

/** Unknown options, and wrong ones, are refused with a TypeError naming the option and why. */
export interface ScriptedDeviceOptions {
  /** Directories a session may be opened in (`remote.roots`); absolute. Default `["/work"]`. */
  roots?: string[];
  /** Trusted directories (`remote.trusted`); default the roots. */
  trusted?: string[];
  /** The highest mode a session may take (`remote.maxMode`). */
  maxMode?: Mode;
  /** The scripted engine's script for each prompt in turn, whatever its text; past the list a
   * prompt's own text is its script. A script's lines: `say <text>`, `think <text>`,
   * `sleep <ms>`, `tool <title>`, `chunks <n> <bytes>`, `fail <message>`, `permit <title>`
   * (a permission card), `ask <question> | <option> | …` (a question card), `plan <title>`. */
  replies?: string[];
  /** Where the device links: a memory instance (default: a new one, `device.instance`), or a
   * device link's `ws://`/`wss://` URL (with `token` and `WebSocket`). */
  instance?: MemoryInstance | string;
  /** The device token for a URL: sent as `Authorization: Bearer`, never put in an error. */
  token?: string;
  /** A WebSocket class that sends headers, for a URL: npm `ws`'s (a browser's cannot). */
  WebSocket?: new (url: string, options: { headers: Record<string, string> }) => SocketLike;
  /** Where its sessions are kept: a MemStore, or `idbStore()` (survives a reload). */
  store?: DeviceStore;
  /** More of the device's config; `remote` and `backoff` members override the harness's. Its
   * `seed` is random unless given here. */
  config?: DeviceConfig;
  onEffect?: (effect: Effect) => unknown;
  onStop?: (message: string) => void;
}

export interface ConnectOptions {
  /** Its `seed` is random unless given: a reloaded page must not make the turn ids of the
   * page before it (the device would answer them from its ledger). */
  config?: ClientConfig;
  onEvent?: (event: ClientEvent) => void;
  storage?: { getItem(key: string): string | null | undefined; setItem(key: string, value: string): void };
  storageKey?: string;
  kept?: KeptDeletes;
  timeoutMs?: number;
  promptTimeoutMs?: number;
}

export interface ScriptedDevice {
  readonly driver: DeviceDriver;
  /** The memory instance it links to; null with a URL. */
  readonly instance: MemoryInstance | null;
  /** A ClientDriver linked to it through the memory instance, ready, in a Calls. The device
   * has one link: a client connected before (or a handler `accept`ed) loses it to this one. */
  connect(options?: ConnectOptions): Promise<Calls>;
  stop(): void;
}

/** A device on the core's scripted engine, started and dialling. */
export function scriptedDevice(options?: ScriptedDeviceOptions): Promise<ScriptedDevice>;
