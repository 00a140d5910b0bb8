// Types of calls.mjs: promises over a ClientDriver that always settle.
import type { ClientDriver, ClientEvent, Outcome, RequestId, SocketLike, StopReason } from "./web/lembas_bindings.js";

/** The code of the core's own answer (an `answer` event's `error.code`) to a call whose link
 * went down before the device answered: that answer can never come. `request` turns it into a
 * LinkError. */
export const LINK_LOST: -32000;

/** The link went down before the answer (`code`: its close code; null for an `error` event, or
 * when the driver let the link go for a newer one), the link was refused (`code` 4400: the
 * device or the client is too old), the session is gone from the device, or the Calls was
 * stopped (`code` null). */
export class LinkError extends Error {
  name: "LinkError";
  code: number | null;
  reason: string;
}

/** The device answered with a JSON-RPC error: `code` as the spec names (-32602 invalid params,
 * -32601 no such method, -32603 internal, ...), `message` saying which bound or rule. */
export class RpcError extends Error {
  name: "RpcError";
  method: string;
  code: number;
  data?: unknown;
}

/** Nothing answered within `timeoutMs`; the message says what was awaited and the last drop. */
export class TimeoutError extends Error {
  name: "TimeoutError";
  timeoutMs: number;
}

/** Unknown members are refused (a TypeError naming them). */
export interface CallsOptions {
  /** How long `ready`, `request` and `next` wait (default 10000). */
  timeoutMs?: number;
  /** How long `prompt` waits, across dropped links (default 60000). */
  promptTimeoutMs?: number;
}

/** A prompt's outcome: the device's answer, or the history of a turn that finished while the
 * link was down (imported on the next link). */
export type PromptResult = { stopReason: StopReason; [member: string]: unknown } | { imported: unknown[] };

export class Calls {
  constructor(driver: ClientDriver, options?: CallsOptions);
  readonly driver: ClientDriver;
  readonly timeoutMs: number;
  readonly promptTimeoutMs: number;
  /** Hand the driver a device's link and watch it: attach through here, not the driver, or
   * `ready` does not see a drop (it waits out its timeout) and a request's LinkError has no
   * close code. */
  attach(socket: SocketLike): void;
  /** The capabilities once the link is ready; rejects with a LinkError when it is refused or the
   * socket goes down first, a TimeoutError when no link comes. */
  ready(options?: { timeoutMs?: number }): Promise<string[]>;
  /** A call's result. Rejects at once with an `Error` when the link is not ready or the device
   * lacks the method's capability; later with an RpcError, a LinkError (its link dropped: the
   * answer can never come) or a TimeoutError. */
  request(method: string, params?: unknown, options?: { timeoutMs?: number }): Promise<unknown>;
  /** A prompt (content blocks, or a string as one text block). It outlives dropped links (the
   * core reattaches it on the next); rejects with an RpcError, a LinkError (the session is gone,
   * or `stop`) or a TimeoutError; at once with a TypeError for a `sessionId`, `blocks` or
   * `turnId` that cannot be one. */
  prompt(sessionId: string, blocks: unknown[] | string, options?: { turnId?: string; timeoutMs?: number }): Promise<PromptResult>;
  /** The first event `accepts` takes from now on (a card: `e.kind === "request"`); rejects with
   * a TimeoutError after `timeoutMs` (default the Calls' `timeoutMs`), or with what `accepts`
   * threw. */
  next(accepts: (event: ClientEvent) => boolean, timeoutMs?: number): Promise<ClientEvent>;
  /** Answer a card: see `ClientDriver.respond`. */
  respond(id: RequestId, outcome: Outcome): boolean;
  /** Stop the driver; whatever waits rejects with a LinkError. */
  stop(): void;
}
