// A fake LLeMbas instance for the model engine's tests, on loopback (node's `http`):
// `GET /v1/models` and a streamed, OpenAI-compatible `POST /v1/chat/completions`, each checking
// the bearer token. With `cors`, a page of another origin may call it (as a web UI's harness
// would): the preflight is answered and `retry-after` exposed.
import http from "node:http";
import { knownOptions } from "../calls.mjs";

export function json(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** One server-sent event carrying a chat completion chunk's `delta`. */
export const sse = (delta) => `data: ${JSON.stringify({ choices: [{ delta }] })}\n\n`;

/** A chat completion streamed a piece at a time, then `finish_reason` and `[DONE]`. */
export const streamed = (pieces) => (req, res) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  let i = 0;
  const next = () => {
    if (res.destroyed) return;
    if (i < pieces.length) {
      res.write(sse({ content: pieces[i++] }));
      setTimeout(next, 5);
    } else {
      res.write(`data: ${JSON.stringify({ choices: [{ delta: {}, finish_reason: "stop" }] })}\n\n`);
      res.end("data: [DONE]\n\n");
    }
  };
  next();
};

/** One piece, then the stream stays open until the caller lets it go. */
export const held = (piece) => (req, res) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.write(sse({ content: piece }));
};

/** The instance, serving the chat `models` to `token`. `chat(req, res, body)` answers a chat
 * completion (default: "Hel", "lo"); `modelsStatus` other than 200 makes `/v1/models` fail.
 * Every request is recorded in `requests`, and a response whose connection closed before it
 * ended is counted in `cutShort`. */
export async function fakeInstance(options) {
  const { token, models, cors = false } = knownOptions(options, ["token", "models", "cors"], "fakeInstance(options)");
  if (typeof token !== "string" || token === "") {
    throw new TypeError("fakeInstance(options): options.token must be a non-empty string, the device token it serves");
  }
  if (!Array.isArray(models) || !models.every((m) => typeof m === "string" && m !== "")) {
    throw new TypeError("fakeInstance(options): options.models must be an array of model ids (strings), the chat models it lists");
  }
  if (typeof cors !== "boolean") {
    throw new TypeError(`fakeInstance(options): options.cors must be true or false, not ${JSON.stringify(cors)}`);
  }
  const inst = { requests: [], modelsStatus: 200, chat: streamed(["Hel", "lo"]), cutShort: 0 };
  const server = http.createServer((req, res) => {
    if (cors) {
      res.setHeader("access-control-allow-origin", "*");
      res.setHeader("access-control-expose-headers", "retry-after");
      if (req.method === "OPTIONS") {
        res.writeHead(204, {
          "access-control-allow-methods": "GET, POST",
          "access-control-allow-headers": "authorization, content-type, accept",
        });
        return res.end();
      }
    }
    const body = [];
    req.on("data", (c) => body.push(c));
    req.on("end", () => {
      const seen = {
        method: req.method,
        url: req.url,
        authorization: req.headers.authorization,
        accept: req.headers.accept,
        contentType: req.headers["content-type"],
        body: Buffer.concat(body).toString(),
      };
      inst.requests.push(seen);
      res.on("close", () => {
        if (!res.writableFinished) inst.cutShort++;
      });
      if (req.headers.authorization !== `Bearer ${token}`) {
        return json(res, 401, { error: { message: "invalid device token" } });
      }
      if (req.method === "GET" && req.url === "/v1/models") {
        if (inst.modelsStatus !== 200) {
          return json(res, inst.modelsStatus, { error: { message: "models are down" } });
        }
        const data = models.map((id) => ({ id, kind: "chat", context_length: 32768 }));
        data.push({ id: "nomic/embed", kind: "embedding" });
        return json(res, 200, { object: "list", data });
      }
      if (req.method === "POST" && req.url === "/v1/chat/completions") {
        let body;
        try {
          body = JSON.parse(seen.body);
        } catch (e) {
          return json(res, 400, { error: { message: `the body is not JSON: ${e.message}` } });
        }
        return inst.chat(req, res, body);
      }
      json(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  inst.url = `http://127.0.0.1:${server.address().port}`;
  inst.chats = () => inst.requests.filter((r) => r.url === "/v1/chat/completions");
  inst.close = () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    });
  return inst;
}
