// Types of @lembas/link/harness/fake-instance (node only): an instance's model API on loopback,
// for a DeviceDriver's `model` option.

/** node's `http` request and response, as far as a handler needs them (no @types/node needed). */
export interface Request {
  method?: string;
  url?: string;
  headers: Record<string, string | string[] | undefined>;
}
export interface Response {
  readonly destroyed: boolean;
  writeHead(status: number, headers?: Record<string, string>): unknown;
  write(chunk: string): unknown;
  end(chunk?: string): unknown;
}

export type Handler = (req: Request, res: Response, body: unknown) => void;

export interface FakeInstance {
  /** http://127.0.0.1:<port>: the `model.instance` option. */
  url: string;
  /** Every request seen. */
  requests: { method: string; url: string; authorization?: string; accept?: string; contentType?: string; body: string }[];
  /** 200 unless set: `/v1/models` fails with this status. */
  modelsStatus: number;
  /** Answers `POST /v1/chat/completions` (default: `streamed(["Hel", "lo"])`). */
  chat: Handler;
  /** Responses whose connection closed before they ended (a cancelled turn's). */
  cutShort: number;
  chats(): FakeInstance["requests"];
  close(): Promise<void>;
}

/** Serves the chat `models` to `token` (a wrong token is answered 401, a chat completion whose
 * body is not JSON 400); `cors` for a page. Bad options are refused with a TypeError naming
 * them (never showing the token). */
export function fakeInstance(options: { token: string; models: string[]; cors?: boolean }): Promise<FakeInstance>;
/** A chat completion streamed a piece at a time, then `finish_reason` and `[DONE]`. */
export function streamed(pieces: string[]): Handler;
/** One piece, then the stream stays open. */
export function held(piece: string): Handler;
/** One server-sent event carrying a chunk's `delta`. */
export function sse(delta: unknown): string;
export function json(res: Response, status: number, body: unknown): void;
