// Every line `lembas serve --stdio` writes, checked against the ACP v1 JSON schema shipped in the
// SDK package: every message by the schema's root, the params of each ACP method the agent sends by
// its type, and an answer by the response type of the request it answers. The SDK's own parsing is lenient about
// members it does not read; the schema is the contract an editor may hold us to.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import Ajv2020 from "ajv/dist/2020.js";

const require = createRequire(import.meta.url);
const schema = require("@agentclientprotocol/sdk/schema/v1/schema.json");

const ajv = new Ajv2020({ strict: false, validateFormats: false });
ajv.addSchema(schema, "acp");
const root = ajv.compile({ $ref: "acp" });

// The answer type of each agent method the scripts call.
const ANSWERS = {
  initialize: "InitializeResponse",
  "session/new": "NewSessionResponse",
  "session/load": "LoadSessionResponse",
  "session/list": "ListSessionsResponse",
  "session/resume": "ResumeSessionResponse",
  "session/close": "CloseSessionResponse",
  "session/prompt": "PromptResponse",
};
// The params type of each method the agent sends (the root takes any other as an extension).
const PARAMS = {
  "session/update": "SessionNotification",
  "session/request_permission": "RequestPermissionRequest",
  "$/cancel_request": "CancelRequestNotification",
};
const paramsOf = {};
for (const [method, def] of Object.entries(PARAMS)) {
  paramsOf[method] = ajv.compile({ $ref: `acp#/$defs/${def}` });
}
const answerOf = {};
for (const [method, def] of Object.entries(ANSWERS)) {
  if (schema.$defs[def]) {
    answerOf[method] = ajv.compile({ $ref: `acp#/$defs/${def}` });
  }
}

// Tap a web ReadableStream of bytes: lines pass through unchanged and are kept in `lines`.
export function tap(readable) {
  const lines = [];
  let partial = "";
  const decoder = new TextDecoder();
  const stream = readable.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        partial += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = partial.indexOf("\n")) >= 0) {
          lines.push(partial.slice(0, nl));
          partial = partial.slice(nl + 1);
        }
        controller.enqueue(chunk);
      },
    }),
  );
  return { stream, lines };
}

// Tap the client's side too, to know which method each answer answers.
export function tapWrites(writable, sent) {
  const decoder = new TextDecoder();
  let partial = "";
  const tee = new TransformStream({
    transform(chunk, controller) {
      partial += decoder.decode(chunk, { stream: true });
      let nl;
      while ((nl = partial.indexOf("\n")) >= 0) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        try {
          const m = JSON.parse(line);
          if (m.method !== undefined && m.id !== undefined) sent.set(JSON.stringify(m.id), m.method);
        } catch {}
      }
      controller.enqueue(chunk);
    },
  });
  tee.readable.pipeTo(writable).catch(() => {});
  return tee.writable;
}

// Each line that breaks the schema: `{ line, method, errors }` (empty when all hold).
export function invalid(lines, sent) {
  const bad = [];
  for (const line of lines) {
    if (line.trim() === "") continue;
    let m;
    try {
      m = JSON.parse(line);
    } catch (e) {
      bad.push({ line, errors: [String(e)] });
      continue;
    }
    const method = m.method ?? sent.get(JSON.stringify(m.id));
    const errors = root(m) ? [] : root.errors.slice(0, 3);
    const answer = m.method === undefined && "result" in m ? answerOf[method] : undefined;
    if (answer && !answer(m.result)) errors.push(...answer.errors.slice(0, 3));
    const params = m.method !== undefined ? paramsOf[m.method] : undefined;
    if (params && !params(m.params)) errors.push(...params.errors.slice(0, 3));
    if (errors.length > 0) bad.push({ line: line.slice(0, 400), method, errors });
  }
  return bad;
}

// `lembas serve --stdio` as the scripts' agent: `stream` for the SDK, `end()` closes its stdin
// and resolves to its exit code, `invalid()` the frames it wrote that break the schema.
export function serve(bin) {
  const child = spawn(bin, ["serve", "--stdio"], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const sent = new Map();
  const out = tap(Readable.toWeb(child.stdout));
  const stream = acp.ndJsonStream(tapWrites(Writable.toWeb(child.stdin), sent), out.stream);
  return {
    stream,
    end: () => {
      child.stdin.end();
      return exited;
    },
    invalid: () => invalid(out.lines, sent),
  };
}
