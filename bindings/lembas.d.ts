// The plain objects that cross between JS and the LLeMbas link core: the core types' serde shapes
// (DeviceConfig, Effect, EngineEvent, Decision, ... derive theirs in core/), and the boundary's
// own (runtime-wasm/src/json.rs). Times are milliseconds on a clock the caller picks.

/** A JSON-RPC request id: the device's are numbers; a client's are numbers it made. */
export type RequestId = number | string;

export type Mode = "plan" | "manual" | "edit" | "auto";
export type ConnKind = "link" | "stdio" | "terminal" | "hub";
export type TurnPhase = "queued" | "running" | "done";
export type StoreTable = "sessions" | "turns" | "history" | "deletes" | "device" | "events";

/** The core's `DeviceConfig` (core/src/config.rs), camelCase. Every member is optional: what is
 * left out takes the core's default. Unknown members are refused. No `liveness`: a JS socket can
 * neither ping nor report a pong. */
export interface DeviceConfig {
  /** Seeds every id and jitter the device makes (deterministic for a given seed). */
  seed?: number;
  version?: string;
  host?: string;
  platform?: string;
  connection?: string | null;
  remote?: {
    enabled?: boolean;
    /** Absolute, already resolved directories a session may be opened in. */
    roots?: string[];
    maxMode?: Mode;
    requireTrust?: boolean;
    approvalTimeoutMs?: number;
    terminal?: boolean;
    trusted?: string[];
    /** The most subdirectories one `_lembas/directories` answer lists (default 1000). */
    maxDirectoryEntries?: number;
  };
  frames?: FrameLimits;
  backoff?: { initialMs?: number; maxMs?: number };
  sessions?: {
    maxBlockBytes?: number;
    maxPromptBytes?: number;
    ledgerTurns?: number;
    maxQueued?: number;
    ledgerTtlMs?: number;
    maxTitleChars?: number;
    maxSteer?: number;
    /** A delete made on the device is forgotten once the link that carried it stayed up this long. */
    deleteConfirmMs?: number;
    /** Bytes a link may send while one of its session requests waits for its directory check;
     * past it the link is closed (1008). At least `frames.maxFrameBytes`. */
    maxHeldBytes?: number;
    /** Sessions kept in memory at once; past it the least recently used idle one is set aside
     * (read back with a `load_session` effect when named), or with none `session/new` is
     * refused. */
    maxLive?: number;
    /** Of a turn's answer (and its reasoning), the bytes kept for the session's history. */
    maxAnswerBytes?: number;
    /** A turn is given at most this many of the session's last finished turns as context. */
    maxContextTurns?: number;
    /** Bytes of those turns (prompts and answers) a turn's start copies, newest first. */
    maxContextBytes?: number;
    /** The bytes of the summary `/compact` keeps (and gives the model in place of the turns it
     * folds); past it the summary is cut, and the cut said in a `notice`. */
    maxSummaryBytes?: number;
    /** A session's event log (`_lembas/session/events`, our extension): the bytes of its
     * recent events kept, in memory and in the store (`events` table); the oldest give way. */
    eventLogBytes?: number;
    /** And at most this many events. */
    eventLogEvents?: number;
    /** Events one `_lembas/session/events` answers when it names no `limit`. */
    eventsPage?: number;
    /** The most it answers at once; a larger `limit` is refused naming it. */
    maxEventsPage?: number;
    /** Reads of set-aside sessions' logs (`read_events`) waiting at once; one more
     * `_lembas/session/events` needing one is refused naming it. */
    maxEventReads?: number;
    /** The bytes of turns one `_lembas/session/history` answers (the newest that fit; one turn
     * over it is cut, saying so). */
    historyBytes?: number;
    /** The most turns one `history` answers, and what it answers with no `limit`. */
    maxHistoryTurns?: number;
    /** The `_meta.lembas` context a `session/new` or `session/prompt` gives, in bytes of JSON;
     * a larger one is refused naming it. */
    maxMetaBytes?: number;
  };
  /** Remote terminals (`remote.terminal`); ranges are `[min, max]`. */
  terminals?: {
    maxPerLink?: number;
    cols?: [number, number];
    rows?: [number, number];
    /** `[cols, rows]` of a terminal opened without a size. */
    defaultSize?: [number, number];
    maxOutputFrameBytes?: number;
    batchMs?: number;
  };
  /** What may wait to be sent on a connection: bounds the shell enforces. Past `pauseBytes`
   * waiting (a `DeviceDriver`: its link socket's `bufferedAmount` and what it has not handed the
   * socket yet) the engine events of the sessions it holds wait, so their turns pause instead of
   * piling up in memory; the driver looks again every 20 ms. `maxBytes`: the `lembas` binary
   * closes a link past it (the wasm drivers never queue past one pump's frames). */
  outbound?: { pauseBytes?: number; maxBytes?: number };
  /** What a connection's reader may hold unhandled: a bound the shell enforces, as `outbound`. */
  inbound?: { pauseBytes?: number };
  /** The bounds on a prompt's `@path` mentions (a page's device reads none: it has no disk). */
  mentions?: { maxFileBytes?: number; maxListingEntries?: number; maxPerPrompt?: number };
  /** The recent files kept to nudge `_lembas/files/search` (default 256). */
  files?: { maxRecent?: number };
  /** The bounds on a session's command files (defaults 64 files, 32 KiB a file, 160 characters
   * a description). */
  commands?: { maxFiles?: number; maxFileBytes?: number; maxDescriptionChars?: number };
  /** The models the device can speak to; the first is a session's default. */
  models?: {
    id: string;
    instance?: boolean;
    /** Takes images as image parts. */
    vision?: boolean;
    /** Its context window in tokens, where the instance's `/v1/models` says it. */
    contextLength?: number;
  }[];
  /** Whether the shell answers `load_session` from a store (default true). Without one no
   * session is set aside. A `DeviceDriver` sets it from its `store` option. */
  hasStore?: boolean;
}

export interface FrameLimits {
  maxFrameBytes?: number;
  maxDepth?: number;
}

export interface ClientConfig {
  /** Seeds the client's ids (turn ids among them). A `ClientDriver` given none draws one from
   * the page's randomness, so a reloaded page never repeats the ids of the page before it; a
   * `Client` given none uses 1 (the conformance transcripts' runs are deterministic). */
  seed?: number;
  frames?: FrameLimits;
  /** Whether this client offers the `show` viewer. */
  show?: boolean;
  /** How long a delete waits for its answer before it counts as undelivered. */
  requestTimeoutMs?: number;
}

// ---- inputs: what `Device.handle` and `Client.handle` take -----------------------------------
// The conformance transcripts' steps (spec/conformance/*.json); each is the method of the same
// name (`{ type: "dial_failed", failure }` is `dialFailed(failure, at)`).

export type DeviceInput =
  | { type: "start_link" }
  | { type: "open"; kind: ConnKind }
  | { type: "dial_failed"; failure: DialFailure }
  /** One message, as its text. */
  | { type: "frame"; conn: number; frame: string }
  /** A pong or ping on the connection. */
  | { type: "activity"; conn: number }
  | { type: "closed"; conn: number; code?: number | null }
  | { type: "tick" }
  | { type: "persisted"; seq: number }
  | ({ type: "path_resolved"; request: number } & PathResolution)
  | { type: "directory_listed"; request: number; listing: DirectoryListing }
  | { type: "directory_listed"; request: number; error: string }
  /** One read a mention asked, in order (`read_mentions`' answer). */
  | { type: "mentions_read"; request: number; read: MentionRead[] }
  | { type: "mentions_read"; request: number; error: string }
  | { type: "files_found"; request: number; found: FoundFiles }
  | { type: "files_found"; request: number; error: string }
  | { type: "commands_read"; request: number; commands: CommandsRead }
  | { type: "commands_read"; request: number; error: string }
  /** What a `/review` would read (`check_changes`' answer); `error`: git could not tell. */
  | { type: "changes_checked"; request: number; changes: Changes }
  | { type: "changes_checked"; request: number; error: string }
  /** What the shell did with a turn's files (`undo_files`' answer). */
  | { type: "files_undone"; request: number; undone: FilesUndone }
  | { type: "files_undone"; request: number; error: string }
  | { type: "session_loaded"; request: number; entries: StoreEntry[] }
  | { type: "session_load_failed"; request: number; error: string }
  | { type: "history_read"; request: number; entries: StoreEntry[] }
  | { type: "history_read"; request: number; error: string }
  | { type: "events_read"; request: number; entries: StoreEntry[] }
  | { type: "events_read"; request: number; error: string }
  /** `error` absent: it was written. */
  | { type: "attachment_written"; request: number; error?: string | null }
  | { type: "engine"; sessionId: string; turnId: string; event: EngineEvent }
  | ({ type: "terminal_opened"; terminalId: string } & TerminalStart)
  | { type: "terminal_output"; terminalId: string; base64: string }
  | { type: "terminal_exit"; terminalId: string; code: number }
  /** New `remote` settings (`Device.handle` returns whether anything changed). */
  | { type: "reconfigure"; remote: NonNullable<DeviceConfig["remote"]> }
  /** The instance's model list, fetched again (`Device.handle` returns whether it changed). */
  | { type: "models"; models: NonNullable<DeviceConfig["models"]> }
  | { type: "delete_session"; sessionId: string };

export type ClientInput =
  | { type: "link_up" }
  | { type: "link_down" }
  | { type: "frame"; frame: string }
  | { type: "activity" }
  | { type: "tick" }
  | { type: "call"; method: string; params?: unknown }
  | { type: "notify"; method: string; params?: unknown }
  | ({ type: "respond"; id: RequestId } & Outcome)
  | { type: "prompt"; sessionId: string; blocks: unknown; turnId?: string | null }
  | { type: "delete_session"; sessionId: string }
  | { type: "restore_pending_deletes"; kept: { sessionId: string; refusals?: number }[] };

// ---- the device's outputs ------------------------------------------------------------------

export type DeviceOutput =
  /** Send one message (a WebSocket text message, a stdio line) on a connection. */
  | { type: "send"; conn: number; frame: string }
  /** Close a connection with this code and reason. */
  | { type: "close"; conn: number; code: number; reason: string }
  | { type: "effect"; effect: Effect };

export type Effect =
  /** Dial the instance link; then `open("link")` or `dialFailed(...)`. */
  | { kind: "dial" }
  /** Stop linking for good; tell the person `message`. */
  | { kind: "stop"; message: string }
  /** Write these records durably, in order, then call `persisted(seq)`. */
  | { kind: "persist"; seq: number; records: StoreRecord[] }
  /** Resolve `path` (symlinks followed); answer with `pathResolved(request, ...)`. */
  | { kind: "resolve_path"; request: number; path: string }
  /** List `path`'s subdirectories (symlinks followed, hidden ones too): the first `maxEntries`
   * by name, each with its real path, and how many in all; answer with `handle({ type:
   * "directory_listed", request, listing | error })`. A page with no disk answers an error. */
  | { kind: "list_directory"; request: number; path: string; maxEntries: number }
  /** Read a prompt's `@path` mentions, confined to `project`, `roots` (empty: no bound besides
   * the project) and the shell's protected paths; answer with `handle({ type: "mentions_read",
   * request, read | error })`. A page with no disk answers an error (they stay text). */
  /** Search `root` (inside `roots` when not empty) for `query` from an index of it, ignore-aware,
   * fuzzy, `recent` (relative paths, best first) nudged up; answer with `handle({ type:
   * "files_found", request, found | error })`. A page with no disk answers an error. */
  | {
      kind: "search_files";
      request: number;
      root: string;
      roots: string[];
      query: string;
      limit: number;
      recent: string[];
    }
  /** Read a session's command files (`<project>/.agent/commands/<name>.md`, the person's own,
   * then skills `<project>/.agent/skills/<name>/SKILL.md` and the person's), a project's only inside
   * `project` and `roots` (symlinks followed), at most `maxFiles`, none over `maxFileBytes`;
   * answer with `handle({ type: "commands_read", request, commands | error })`. A page with no
   * disk answers `{ root: project, files: [] }` (the built-ins alone). */
  | { kind: "read_commands"; request: number; project: string; roots: string[]; maxFiles: number; maxFileBytes: number }
  /** Look in git for what a `/review` would read, in `project` only (resolved; inside `roots`
   * when there are any): with no `branch`, the changes not committed yet (`git status
   * --porcelain -- .`, untracked files too); with one, `git diff --quiet <branch>...HEAD -- .`;
   * answer with `handle({ type: "changes_checked", request, changes | error })`. A page with no
   * disk answers `no_disk` (the review then says it has nothing to review). */
  | { kind: "check_changes"; request: number; project: string; roots: string[]; branch?: string }
  | {
      kind: "read_mentions";
      request: number;
      project: string;
      roots: string[];
      mentions: Mention[];
      maxFileBytes: number;
      maxEntries: number;
    }
  /** Read back a session set aside from memory (`sessions.max_live`): its entries in the store,
   * then `sessionLoaded(request, entries)`, or `sessionLoadFailed(request, error)` when the read
   * fails (the requests waiting for it are refused with the error). Asked for once the persists
   * before it are durable. */
  | { kind: "load_session"; request: number; sessionId: string }
  /** Read part of a session's history from the store (`history` table, keys `<session>/<index,
   * 10 digits>`): the entries before index `before` (all when absent), newest first, at most
   * `limit`, taken while their values fit `maxBytes` in all (the newest always); then
   * `historyRead(request, entries)` (`MemStore.history` reads it so), or
   * `historyReadFailed(request, error)`. Asked for once the persists before it are durable. */
  | { kind: "read_history"; request: number; sessionId: string; before?: number; limit: number; maxBytes: number }
  /** Read a set-aside session's event log alone (`events` table, keys `<session>/<first seq,
   * 20 digits>`): every block of it; then `eventsRead(request, entries)` (`MemStore.events`
   * reads it so), or `eventsReadFailed(request, error)` (the `_lembas/session/events` request
   * is refused with it). The session stays set aside. Asked for once the persists before it
   * are durable. */
  | { kind: "read_events"; request: number; sessionId: string }
  /** Write an attachment of a prompt under the session's directory; answer with
   * `attachmentWritten(request, error?)`. Its turn starts once all of its are written; an
   * error refuses the prompt with it. (A `DeviceDriver` hands it to `onEffect`: a throw or a
   * rejected promise is the error, and without `onEffect` it counts as written.) */
  | { kind: "write_attachment"; request: number; sessionId: string; fileName: string; base64: string }
  /** `/undo`: put back the files turn `turnId` changed, as the shell kept them when its tools
   * wrote, each only while it is still what the turn left and inside `project` and `roots`
   * (empty: no bound besides the project); a file the turn created is removed. Answer with
   * `handle({ type: "files_undone", request, undone | error })`. A page's engine writes no
   * files: it answers `{ restored: [] }`. */
  | { kind: "undo_files"; request: number; sessionId: string; turnId: string; project: string; roots: string[] }
  /** Remove a deleted session's attachment directory. Nothing to answer: the session is gone. */
  | { kind: "remove_attachments"; sessionId: string }
  /** Run a turn on the engine; report with `engine(sessionId, turnId, event)`. */
  | { kind: "start_turn"; turn: TurnStart }
  | { kind: "cancel_turn"; sessionId: string; turnId: string }
  | { kind: "card_decided"; sessionId: string; turnId: string; toolCallId: string; decision: Decision }
  | { kind: "steer"; sessionId: string; turnId: string; id: number; text: string }
  /** Start a login shell in a PTY; answer with `terminalOpened(terminalId, ...)`, then
   * `terminalOutput` and `terminalExit`. Only with `remote.terminal: true`. */
  | { kind: "open_terminal"; terminalId: string; cwd: string; cols: number; rows: number }
  | { kind: "terminal_input"; terminalId: string; base64: string }
  | { kind: "resize_terminal"; terminalId: string; cols: number; rows: number }
  /** Hang the terminal up (SIGHUP); its exit is still reported. */
  | { kind: "close_terminal"; terminalId: string };

/** How a terminal's shell started, or why it did not. */
export type TerminalStart = { shell: "bash" | "zsh" | "fish" | "other"; integration: boolean } | { error: string };

export type StoreRecord =
  | { op: "put"; table: StoreTable; key: string; value: string }
  | { op: "delete"; table: StoreTable; key: string }
  | { op: "delete_prefix"; table: StoreTable; prefix: string };

export interface StoreEntry {
  table: StoreTable;
  key: string;
  value: string;
}

export type DialFailure =
  /** Unreachable, timed out, TLS failed: the device redials later. */
  | { type: "transient" }
  /** 401 or 403 at the handshake. */
  | { type: "token_refused" }
  /** Discovery says the server does not speak protocol 3. */
  | { type: "unsupported"; message: string };

export type PathResolution = { path: string } | { error: string };

/** What the shell did with a turn's files (`undo_files`' answer): the files put back (relative
 * to the project), and those left as they are, with why. */
export interface FilesUndone {
  restored: string[];
  kept?: { path: string; why: string }[];
}

/** What a shell's index found under a root (`search_files`' answer). */
export interface FoundFiles {
  /** The root searched, symlinks followed. */
  root: string;
  files: { path: string; kind: "file" | "dir" }[];
  /** Entries the index holds; `truncated`: it stopped at its bound. */
  indexed: number;
  truncated: boolean;
}

/** What `check_changes` found: something to review, or why there is nothing. */
export type Changes = "found" | "none" | "no_repository" | "unknown_branch" | "no_disk";

/** A session's command files as read (`read_commands`' answer), in the set's order. */
export interface CommandsRead {
  /** The project, symlinks followed. */
  root: string;
  files: { kind: "custom" | "skill"; name: string; source: string; text: string }[];
  /** Files over the byte bound, not read. */
  tooLarge?: string[];
  /** Files past the count bound, not read. */
  leftOut?: number;
}

/** An `@path` of a prompt: as written, the path (escapes undone), its lines, a listing. */
export interface Mention {
  written: string;
  path: string;
  lines?: [number, number];
  dir?: boolean;
}

/** What a shell read of a mention: a file's bytes (base64; at most the bound, `size` in all),
 * a directory's entries, or why it was not read. */
export type MentionRead =
  | { kind: "file"; real: string; bytes: string; size: number; text: boolean; linesTotal?: number }
  | { kind: "listing"; real: string; entries: string[]; total: number }
  | { kind: "refused"; reason: string };

/** A directory's subdirectories as a shell found them (`list_directory`'s answer). */
export interface DirectoryListing {
  /** The directory, symlinks followed. */
  path: string;
  /** The first by name, each with its real path or why it did not resolve. */
  dirs: ({ name: string; real: string } | { name: string; error: string })[];
  /** How many subdirectories in all (more than `dirs` when cut). */
  total: number;
}

// ---- the engine boundary -------------------------------------------------------------------

export interface Attachment {
  fileName: string;
  name: string;
  mimeType: string;
  size: number;
  text: boolean;
  /** An `@file#10-20` mention's first line: its text is numbered from there. */
  firstLine?: number;
}

export interface TurnStart {
  sessionId: string;
  turnId: string;
  text: string;
  attachments: Attachment[];
  /** As the client's `_meta.lembas` said it (snake_case keys, as the core keeps them). */
  context: { system_prompt?: unknown; personalization?: unknown; library?: unknown; prototypes?: unknown };
  mode: Mode;
  model: string | null;
  effort: string | null;
  cwd: string;
  /** Where tools may act besides the project: the device's roots, for a session opened from
   *  the link (left out when there are none). */
  roots?: string[];
  /** The session's finished turns, oldest first (left out when there are none). */
  history?: PriorTurn[];
  /** What `/compact` folded the earlier turns into: given before `history`, in their place
   *  (left out when the session has none). */
  summary?: string;
  /** A compaction, not a prompt: answer with a summary of `summary` and `history`, using no
   *  tools; what the engine says is the summary (left out when false). */
  compact?: boolean;
}

export interface PriorTurn {
  prompt: string;
  answer: string;
}

/** A file a tool changed (ACP `diff` content); `oldText` null for a new file. */
export interface FileDiff {
  path: string;
  oldText: string | null;
  newText: string;
}

export type StopReason = "end_turn" | "max_turn_requests" | "max_tokens" | "cancelled";
export type ToolStatus = "pending" | "in_progress" | "completed" | "failed";

export interface Question {
  header: string;
  question: string;
  multiple?: boolean;
  options: { label: string; description?: string; recommended?: boolean }[];
}

export type Ask =
  | {
      type: "permission";
      title: string;
      kind: string;
      rawInput: unknown;
      alwaysOffered: boolean;
      reason: string;
      purpose?: string | null;
    }
  | { type: "question"; why?: string | null; questions: Question[] }
  | { type: "plan"; path: string; text: string; plan?: unknown };

export type EngineEvent =
  | { type: "text"; text: string }
  | { type: "thought"; text: string }
  | { type: "tool_call"; id: string; title: string; kind: string; rawInput: unknown }
  | { type: "tool_call_update"; id: string; status: ToolStatus; output?: string | null; diff?: FileDiff }
  | { type: "steered"; ids: number[] }
  | { type: "mode_changed"; mode: Mode }
  | { type: "plan"; plan: unknown | null }
  | { type: "ask"; toolCallId: string; ask: Ask }
  | { type: "step"; step: number }
  | { type: "usage"; inputTokens: number; outputTokens: number }
  | { type: "notice"; text: string }
  | { type: "done"; stopReason: StopReason }
  | { type: "failed"; message: string };

/** A `ScriptedEngine.drain()` item: hand `event` to `Device.engine(sessionId, turnId, event)`. */
export interface EngineReport {
  sessionId: string;
  turnId: string;
  event: EngineEvent;
}

export type QuestionAnswer =
  | { kind: "options"; labels: string[] }
  | { kind: "custom"; text: string }
  | { kind: "back"; text: string }
  | { kind: "skipped" };

/** How a card was decided, as the engine is told. */
export type Decision =
  | { type: "allow_once"; command?: string | null }
  | { type: "allow_always" }
  | { type: "deny"; feedback?: string | null; timedOut?: boolean }
  | { type: "answered"; answers: QuestionAnswer[] }
  | { type: "question_dismissed"; timedOut?: boolean }
  | { type: "approve"; mode: Mode }
  | { type: "revise"; feedback: string }
  | { type: "plan_dismissed"; timedOut?: boolean }
  | { type: "nobody_to_ask" }
  | { type: "refused"; reason: string };

// ---- the client's outputs ------------------------------------------------------------------

export interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}

/** A call's outcome: exactly one of `result` or `error`. */
export type Outcome = { result: unknown } | { error: RpcError };

export interface Hello {
  protocol: number;
  version: string;
  harness_spec: string | null;
  device: { host: string; platform: string };
  limits: { roots: string[]; max_mode: Mode; require_trust: boolean };
}

export type ClientOutput =
  | { type: "send"; frame: string }
  | { type: "close"; code: number; reason: string }
  | { type: "event"; event: ClientEvent };

/** What a client hears: `ClientDriver`'s `onEvent` and `next` get every one, in order. */
export type ClientEvent =
  /** The device greeted the client (`_lembas/hello`): its version, host and limits. */
  | { kind: "hello"; hello: Hello }
  /** `initialize` was answered: the link is ready; `call` may use what `capabilities` lists. */
  | { kind: "ready"; capabilities: string[] }
  /** The client refused the link and closed it with `code` (4400: the device speaks another link
   * protocol; `reason` says which side to update). */
  | { kind: "refused"; code: number; reason: string }
  /** The answer to `call(method, …)`, whose id was `id`. A call whose link went down before
   * the device answered is answered by the client itself, at once, with `error.code` -32000
   * (`LINK_LOST` of `@lembas/link/calls`; the device answers only on the link that asked):
   * call again once ready. `Calls.request` rejects with a `LinkError` for it. */
  | ({ kind: "answer"; id: RequestId; method: string } & Outcome)
  /** A prompt was answered, on its link or after a reattach on a later one. */
  | ({ kind: "prompt_answered"; sessionId: string; turnId: string } & Outcome)
  /** An incomplete prompt was picked up on a new link: `following` (running; its answer
   * follows), `waiting` (queued), `imported` (finished meanwhile: `turns`), `resent` (the device
   * did not know it: sent again), `gone` (its session is gone from the device). */
  | {
      kind: "reattached";
      sessionId: string;
      turnId: string;
      how: "following" | "waiting" | "imported" | "resent" | "gone";
      /** For `imported`: the turn's history entries (its user turn and the answer after it). */
      turns?: unknown[];
    }
  /** A `deleteSession` was answered (`existed`: the device still had it). */
  | { kind: "deleted"; sessionId: string; existed: boolean }
  /** A delete was refused five times and given up; `reason` is the device's. */
  | { kind: "delete_given_up"; sessionId: string; reason: string }
  /** A card is no longer waited for (answered elsewhere, or timed out): take it down. */
  | { kind: "card_settled"; sessionId: string; toolCallId: string }
  /** What the session sent after seq `since` (the lower of the last `session/update` and the
   * last other event handed out) could not all be fetched on the new link (the device's event
   * log no longer reaches back, or it has none): import its `history`
   * (`_lembas/session/history`, capability `sessions`). Events after the gap follow as usual;
   * the missed ones that could be fetched came before it. */
  | { kind: "gap"; sessionId: string; since: number }
  /** A notification from the device (`session/update`: a turn's text, tool calls, plans, …).
   * One about a session carries its seq, `params._meta.lembas.seq` (see `SessionSeq`), the
   * `available_commands_update` that follows a `_lembas/session/announce` too. */
  | { kind: "notification"; method: string; params: unknown }
  /** A request from the device: a card (`session/request_permission`, a question, a plan),
   * answered with `respond(id, outcome)`. Its `params._meta.lembas.seq` is its first offer's,
   * on every link it is put again on. */
  | { kind: "request"; id: RequestId; method: string; params: unknown };

/** An event's place in its session's stream (with the device's `events` capability, our
 * extension): `params._meta.lembas.seq` of a `notification` or `request` about a session. It
 * rises with every event the device sends about the session, and across the device's restarts
 * (each start begins 2^32 higher, so it stays an exact JS number). The client hands each seq out
 * once and in order: on a new link it fetches what came after the last one it handed out
 * (`_lembas/session/events`) before the live ones, and drops a seq it has seen, so a turn's
 * text neither misses nor repeats a chunk; what it cannot fetch is a `gap`. A seq may skip
 * numbers the client keeps to itself (a card's settled notice for a card it answered), and of a
 * session only announced to it (a terminal's it never opened) every number but its command
 * sets': those are all it is sent, live or fetched, and fetching them does not open it. */
export type SessionSeq = number;

// ---- errors --------------------------------------------------------------------------------
// What JS sees go wrong, and its shape:
// - A misused driver throws (or, from `open`, rejects with) an `Error` whose message names the
//   option or argument and why: "DeviceDriverOptions has no member `onstop` (known: …)",
//   "options.dial is needed: …", "options.kept loads asynchronously: open the driver with
//   ClientDriver.open", "not ready" from `call` before the link is. A token is never in one.
// - A core type handed in with a bad shape (a config, an outcome) is an `Error` with the core's
//   sentence, naming the member ("config.remote.roots: …").
// - `ClientDriver.next` rejects with an `Error` ("no event the predicate accepts came within N
//   ms") after its timeout, or with what the predicate threw.
// - The device's refusals reach the client as answers with `error: RpcError` (the spec's code,
//   a message naming the bound or rule); a prompt's as `prompt_answered` with `error`. A call
//   cut off by its link going down is answered by the client with code -32000 (see `answer`);
//   a prompt is not: it is reattached on the next link.
// - `@lembas/link/calls` turns these into `RpcError`, `LinkError` (a dropped or refused link,
//   with its close code) and `TimeoutError` (calls.d.mts).
// - A failed store write, `onEffect` or `dial` never throws into the caller: a write is never
//   acknowledged (and reported as an unhandled promise rejection), an attachment's refuses its
//   prompt with the reason, a dial's is retried after the backoff.

// ---- the drivers (DeviceDriver, ClientDriver) ------------------------------------------------

/** What the drivers need of a socket: a browser `WebSocket` and npm `ws` both are one. */
export interface SocketLike {
  /** 1 when open already (a server's accepted socket); `ClientDriver.attach` waits for "open" otherwise. */
  readyState?: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open", listener: () => void): void;
  addEventListener(type: "message", listener: (ev: { data: string | Uint8Array | ArrayBuffer }) => void): void;
  addEventListener(type: "close", listener: (ev: { code?: number }) => void): void;
  addEventListener(type: "error", listener: (ev: unknown) => void): void;
}

/** A device's store. `apply` may return a promise: the device hears the records are durable
 * (and sends what waited on them) once it settles; a rejected one is reported and never
 * acknowledged. An asynchronous `entries` needs `DeviceDriver.open`. When reading a session
 * set aside back fails (`entries` throws or rejects), the requests waiting for it are refused
 * with the error, and the next one naming it reads again. */
export interface DeviceStore {
  entries(): StoreEntry[] | Promise<StoreEntry[]>;
  apply(records: StoreRecord[]): void | Promise<void>;
}

/** Unknown members are refused. */
export interface DeviceDriverOptions {
  config?: DeviceConfig;
  /** Makes the socket of the instance link (npm `ws` can send the `Authorization` header). A
   * dial that throws, or a socket that fails before it opens, is a transient failure: the
   * device dials again after its backoff. */
  dial: () => SocketLike;
  /** Default: none; the device's state lives as long as the driver. A `MemStore` is one. */
  store?: DeviceStore;
  /** Resolves a session's or a terminal's `cwd` (symlinks followed). Default: as given. */
  resolvePath?: (path: string) => PathResolution | Promise<PathResolution>;
  /** The device gave up linking (4400, a refused token, an unsupported server). */
  onStop?: (message: string) => void;
  /** Effects the driver does not perform itself: attachments, terminals (answer these with
   * `terminalOpened`, `terminalOutput`, `terminalExit`). For a `write_attachment` it returns
   * once written, or a promise settled then; a throw or a rejection refuses its prompt.
   * Any other value it returns is ignored (`unknown`, so `(e) => list.push(e)` fits). */
  onEffect?: (effect: Effect) => unknown;
  /** Milliseconds; default `performance.now()`. */
  clock?: () => number;
  /** Run the model engine on this instance's models instead of the scripted engine (the
   * default). Its HTTP goes through the global `fetch`. */
  model?: ModelOptions;
  /** The model engine reads a prompt's attachments (written through `onEffect`'s
   * `write_attachment`) back with this: the file (a `Uint8Array`, cut to `max` bytes here), or
   * its first bytes and whole size, or a promise of either. A throw or a rejection fails the
   * read with its message. Without it an attachment cannot be read, and the turn is told so. */
  readAttachment?: (
    sessionId: string,
    fileName: string,
    max: number,
  ) => AttachmentRead | Promise<AttachmentRead>;
  /** What the device has to say that is no one's answer (a model list that could not be
   * fetched, and the last one kept). Default: `console.warn`. */
  onLog?: (line: string) => void;
  /** The scripted engine's script for each of the next prompts in turn, whatever its text (a
   * harness scripting its device's answers); past them a prompt's own text is its script. A
   * script's lines are `say`, `think`, `sleep`, `tool`, `chunks`, `fail`, `permit`, `ask` and
   * `plan` steps (core/src/scripted.rs). Refused beside `model`. */
  replies?: string[];
}

export type AttachmentRead = Uint8Array | { bytes: Uint8Array; size: number };

/** The model engine's instance. Unknown members are refused. Before each dial (the first at
 * `start()`) the driver fetches `GET <instance>/v1/models` with the token, and the device and
 * the engine take its chat models; a failure goes to `onLog` and the last list is kept. */
export interface ModelOptions {
  /** The instance's base URL, `http://` or `https://`: a call's path (`/v1/chat/completions`)
   * is joined to it. */
  instance: string;
  /** The device token, sent as `Authorization: Bearer <token>` and nowhere else: never in a
   * URL, an error, or a log line. */
  token: string;
  /** The engine's settings; what is left out takes the core's default. */
  engine?: ModelEngineConfig;
  /** The whole `GET /v1/models`, answer and body (default 15000). */
  modelsTimeoutMs?: number;
  /** Its body's bytes (default 4 MiB). */
  maxModelsBytes?: number;
}

/** The core's `ModelEngineConfig` (core/src/model/engine.rs), snake_case; every member is
 * optional and named where its bound refuses or gives up. Unknown members are refused, and so
 * are settings that would stop every turn (a zero bound, `retry_max_ms` under
 * `retry_initial_ms`). */
export interface ModelEngineConfig {
  /** The context budget, in tokens, for a model whose `/v1/models` entry gives no length. */
  context_tokens?: number;
  /** Retries of a request answered 429 (waiting its `Retry-After`). */
  max_rate_limited?: number;
  /** Retries of a 5xx, or of a connection that failed before its first byte. */
  max_retries?: number;
  /** The first retry's wait; it doubles, up to `retry_max_ms`. */
  retry_initial_ms?: number;
  retry_max_ms?: number;
  /** The longest `Retry-After` honoured; a longer one fails the turn. */
  max_retry_after_ms?: number;
  /** A request or a stream silent this long is given up. */
  idle_timeout_ms?: number;
  /** Bytes asked for per body read. */
  read_bytes?: number;
  /** The bytes of an error response's body read for its words. */
  max_error_body_bytes?: number;
  /** The server-sent events parser's bounds. */
  sse?: { max_line_bytes?: number; max_event_bytes?: number };
  /** An attachment's bytes given to the model; more is cut, and a notice says so. */
  max_attachment_bytes?: number;
  /** Chat models kept of the instance's list (default 1000). */
  max_models?: number;
  /** The device's own system text, before the instance's instructions. */
  system_text?: string;
  /** The device's own personalization, used unless the client sends the account's. */
  personalization?: { personality?: string; personality_custom?: string; instructions?: string } | null;
  /** The instance's name, for `## Instructions from <instance>`. */
  instance_name?: string | null;
  /** The model's tools and their bounds (core/src/model/tools.rs). */
  tools?: ToolsConfig;
}

/** The core's `ToolsConfig` (`engine.tools`), snake_case; a zero bound is refused by name. */
export interface ToolsConfig {
  /** Whether the model is offered tools at all (default true in config.yaml; in a
   *  `DeviceDriver`, false unless given: a page has no project on a disk, and refuses every
   *  tool call with the reason). */
  enabled?: boolean;
  /** Model calls in one turn; the turn then ends `max_turn_requests` (default 50). */
  max_steps?: number;
  /** Tool calls in one model call; more fails the turn (default 32). */
  max_calls_per_step?: number;
  /** Bytes of one call's id, name and arguments; a longer call is refused to the model. */
  max_argument_bytes?: number;
  /** Bytes of one tool result given to the model; more is cut (default 64 KiB). */
  max_result_bytes?: number;
  /** Lines one `read` returns at most (default 2000). */
  read_max_lines?: number;
  read_max_bytes?: number;
  list_max_entries?: number;
  find_max_results?: number;
  search_max_matches?: number;
  /** The largest file `write` or `edit` works on. */
  max_file_bytes?: number;
  /** A command running longer is stopped (default 120000). */
  run_timeout_ms?: number;
  /** A command's output kept; more is read and dropped. */
  run_max_output_bytes?: number;
  /** A running command's output reaches the client at most once per this (default 250). */
  progress_interval_ms?: number;
  /** "Allow always" rules kept in memory, across sessions; the oldest is forgotten first. */
  max_remembered?: number;
}

/** A client's undelivered deletes, kept where a reload cannot lose them. */
export interface KeptDeletes {
  load(): Promise<{ sessionId: string; refusals: number }[] | undefined>;
  save(list: { sessionId: string; refusals: number }[]): void | Promise<void>;
}

/** Unknown members are refused. Undelivered deletes are written (only when they change) to
 * `storage` or `kept`, not both. */
export interface ClientDriverOptions {
  config?: ClientConfig;
  /** Every event, before the promises of `next` hear it. It may call back into the driver
   * (`respond` to a card at once). */
  onEvent?: (event: ClientEvent) => void;
  /** A localStorage-like object: the deletes are kept in it under `storageKey`. */
  storage?: { getItem(key: string): string | null | undefined; setItem(key: string, value: string): void };
  /** Default "lembas.pendingDeletes". */
  storageKey?: string;
  /** An asynchronous keeper of them (IndexedDB, `idbKept` of idb.mjs): needs `ClientDriver.open`. */
  kept?: KeptDeletes;
  clock?: () => number;
}
