//! The test instance's OpenAI-compatible API, for the model engine's tests: `GET /v1/models`
//! (a list the test sets) and `POST /v1/chat/completions` answered as server-sent events over
//! chunked HTTP, with replies scripted per test ([`ChatReply`], taken in order; with none left,
//! the last user message is echoed). Both check `Authorization: Bearer <token>`. Every chat
//! request body is recorded, and every stream the client closed before its end is counted: a
//! test proves a cancel really aborted the HTTP request. It also serves
//! `GET`/`PUT /v1/me/personalization`. With an [`Upstream`], chat completions are passed on to
//! a real OpenAI-compatible server instead (the optional end-to-end test), and (state per test; a partial `PUT` merged, each body
//! recorded; 403 with a `detail` when not available; 404 when the test gives none).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use serde_json::{json, Value};

use crate::instance::{InstanceOptions, Io};
use crate::instance_upstream::Upstream;

/// A request body bigger than this is refused (413): the test instance's own bound.
const MAX_BODY: usize = 16 << 20;

/// How a `stream: true` chat completion is answered.
#[derive(Clone, Debug)]
pub struct ChatStream {
    /// Reasoning deltas (`reasoning_content`), sent first.
    pub reasoning: Vec<String>,
    /// Text deltas (`content`).
    pub text: Vec<String>,
    /// The wait before each event after the first.
    pub delay: Duration,
    pub finish_reason: String,
    /// `usage` (prompt and completion tokens), sent in a last chunk with no choices.
    pub usage: Option<(u64, u64)>,
    /// Tool calls, after the text: each as `tool_calls` deltas, its arguments in pieces.
    pub tool_calls: Vec<ToolCallScript>,
}

/// A tool call the scripted model makes: its function's name and arguments.
#[derive(Clone, Debug)]
pub struct ToolCallScript {
    pub name: String,
    pub arguments: Value,
}

impl Default for ChatStream {
    fn default() -> Self {
        ChatStream {
            reasoning: Vec::new(),
            text: Vec::new(),
            delay: Duration::ZERO,
            finish_reason: "stop".into(),
            usage: None,
            tool_calls: Vec::new(),
        }
    }
}

/// One scripted answer of `POST /v1/chat/completions`.
#[derive(Clone, Debug)]
pub enum ChatReply {
    /// Stream these deltas, then `[DONE]`.
    Stream(ChatStream),
    /// Answer this status with `{"error":{"message":...}}` (and `Retry-After` when given).
    Status {
        status: u16,
        retry_after: Option<String>,
        message: String,
    },
    /// Send the head of an event stream, then nothing until the client goes.
    Hang,
}

impl ChatReply {
    /// Stream these text deltas at once.
    pub fn text(deltas: &[&str]) -> ChatReply {
        ChatReply::Stream(ChatStream {
            text: deltas.iter().map(|d| d.to_string()).collect(),
            ..ChatStream::default()
        })
    }

    /// Call these tools (name, arguments), finishing with `tool_calls`.
    pub fn tools(calls: &[(&str, Value)]) -> ChatReply {
        ChatReply::Stream(ChatStream {
            tool_calls: calls
                .iter()
                .map(|(name, arguments)| ToolCallScript {
                    name: name.to_string(),
                    arguments: arguments.clone(),
                })
                .collect(),
            finish_reason: "tool_calls".into(),
            ..ChatStream::default()
        })
    }

    /// An error status and the instance's words for it.
    pub fn status(status: u16, message: &str) -> ChatReply {
        ChatReply::Status {
            status,
            retry_after: None,
            message: message.into(),
        }
    }

    /// 429 with `Retry-After: <seconds>`.
    pub fn rate_limited(seconds: u64) -> ChatReply {
        ChatReply::Status {
            status: 429,
            retry_after: Some(seconds.to_string()),
            message: "rate limited: slow down".into(),
        }
    }
}

/// The default `/v1/models` entries: two chat models and one embedding model.
pub fn default_models() -> Vec<Value> {
    vec![
        json!({"id": "test/chat-small", "object": "model", "owned_by": "test", "kind": "chat"}),
        json!({"id": "test/chat-large", "object": "model", "owned_by": "test", "kind": "chat",
               "context_length": 32768}),
        json!({"id": "test/embed", "object": "model", "owned_by": "test", "kind": "embedding"}),
    ]
}

/// What every connection of one test instance shares.
pub(crate) struct Api {
    token: String,
    models: Vec<Value>,
    models_delay: std::time::Duration,
    script: Mutex<VecDeque<ChatReply>>,
    requests: Mutex<Vec<Value>>,
    aborted: AtomicUsize,
    /// Answer `/v1/models` with this status instead of the list (0: the list).
    models_status: AtomicU16,
    /// `/v1/models` requests answered (either way).
    models_served: AtomicUsize,
    /// Answer a link's upgrade with 503 (the instance is down for the device).
    links_refused: AtomicBool,
    /// When each streamed event was written, if asked to note it.
    sse_writes: Option<Mutex<Vec<(String, Instant)>>>,
    /// `/v1/me/personalization`'s state (`None`: not served, 404).
    personalization: Mutex<Option<Value>>,
    /// Every `PUT /v1/me/personalization` body, in order.
    personalization_puts: Mutex<Vec<Value>>,
    /// Refuse a `PUT` with 403 and this `detail` (a token that is not a device's, say).
    refuse_puts: Mutex<Option<String>>,
    /// Where chat completions are passed on to, in place of the script.
    upstream: Option<Upstream>,
}

impl Api {
    pub(crate) fn new(options: &InstanceOptions) -> Api {
        Api {
            personalization: Mutex::new(options.personalization.clone()),
            personalization_puts: Mutex::new(Vec::new()),
            refuse_puts: Mutex::new(None),
            token: options.token.clone(),
            models: options.models.clone(),
            models_delay: options.models_delay,
            script: Mutex::new(options.chat.clone().into()),
            requests: Mutex::new(Vec::new()),
            aborted: AtomicUsize::new(0),
            models_status: AtomicU16::new(0),
            models_served: AtomicUsize::new(0),
            links_refused: AtomicBool::new(false),
            sse_writes: options.record_sse_writes.then(|| Mutex::new(Vec::new())),
            upstream: options.upstream.clone(),
        }
    }

    /// From now on answer `/v1/models` with `status` (an outage), or the list again (`None`).
    pub(crate) fn fail_models(&self, status: Option<u16>) {
        self.models_status
            .store(status.unwrap_or(0), Ordering::SeqCst);
    }

    /// From now on answer a link's upgrade with 503 (`true`), or take links again.
    pub(crate) fn refuse_links(&self, refused: bool) {
        self.links_refused.store(refused, Ordering::SeqCst);
    }

    /// A link dialled now is answered 503, unless it is taken.
    pub(crate) async fn refused_link(
        &self,
        stream: &mut Box<dyn Io>,
    ) -> Option<std::io::Result<()>> {
        if !self.links_refused.load(Ordering::SeqCst) {
            return None;
        }
        Some(detail(stream, 503, "links are refused for now").await)
    }

    /// `/v1/models` requests answered so far.
    pub(crate) fn models_served(&self) -> usize {
        self.models_served.load(Ordering::SeqCst)
    }

    /// Every chat request body received, in order.
    pub(crate) fn chat_requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The events written since the last call, and when (empty unless noted).
    pub(crate) fn sse_writes(&self) -> Vec<(String, Instant)> {
        self.sse_writes.as_ref().map_or_else(Vec::new, |w| {
            std::mem::take(&mut *w.lock().unwrap_or_else(|e| e.into_inner()))
        })
    }

    /// Chat streams the client closed before their end.
    pub(crate) fn aborted_streams(&self) -> usize {
        self.aborted.load(Ordering::SeqCst)
    }

    /// `/v1/me/personalization`'s state now.
    pub(crate) fn personalization(&self) -> Option<Value> {
        lock(&self.personalization).clone()
    }

    /// Every `PUT /v1/me/personalization` body, in order.
    pub(crate) fn personalization_puts(&self) -> Vec<Value> {
        lock(&self.personalization_puts).clone()
    }

    /// From now on refuse a `PUT` with 403 and `detail` (`None`: take them again).
    pub(crate) fn refuse_personalization_puts(&self, detail: Option<String>) {
        *lock(&self.refuse_puts) = detail;
    }

    /// `GET /v1/me/personalization`.
    pub(crate) async fn get_personalization(
        &self,
        stream: &mut Box<dyn Io>,
        head: &[u8],
    ) -> std::io::Result<()> {
        if !self.authorized(head) {
            return detail(stream, 401, "the device token is not valid").await;
        }
        match self.personalization() {
            None => detail(stream, 404, "Not Found").await,
            Some(state) => {
                let body = state.to_string();
                respond(stream, 200, &[("content-type", "application/json")], &body).await
            }
        }
    }

    /// `PUT /v1/me/personalization`: the fields given are merged into the state.
    pub(crate) async fn put_personalization(
        &self,
        stream: &mut Box<dyn Io>,
        head: Vec<u8>,
    ) -> std::io::Result<()> {
        if !self.authorized(&head) {
            return detail(stream, 401, "the device token is not valid").await;
        }
        let Some(body) = read_body(stream, head).await? else {
            return detail(
                stream,
                411,
                "a content-length of at most 16 MiB is required",
            )
            .await;
        };
        let Ok(Value::Object(put)) = serde_json::from_slice::<Value>(&body) else {
            return detail(stream, 422, "the body is not a JSON object").await;
        };
        lock(&self.personalization_puts).push(Value::Object(put.clone()));
        let Some(mut state) = self.personalization() else {
            return detail(stream, 404, "Not Found").await;
        };
        if state["available"] != true {
            return detail(stream, 403, "personalization is not available on this plan").await;
        }
        let refusal = lock(&self.refuse_puts).clone();
        if let Some(why) = refusal {
            return detail(stream, 403, &why).await;
        }
        for (key, value) in &put {
            let fits = match key.as_str() {
                "enabled" => value.is_boolean(),
                k if crate::personalization::FIELDS.contains(&k) => value.is_string(),
                _ => true,
            };
            if !fits {
                let want = if key == "enabled" {
                    "a boolean"
                } else {
                    "a string"
                };
                return detail(stream, 422, &format!("{key} must be {want}")).await;
            }
            if key == "enabled" || crate::personalization::FIELDS.contains(&key.as_str()) {
                state[key] = value.clone();
            }
        }
        *lock(&self.personalization) = Some(state.clone());
        let body = state.to_string();
        respond(stream, 200, &[("content-type", "application/json")], &body).await
    }

    fn authorized(&self, head: &[u8]) -> bool {
        let want = format!("Bearer {}", self.token);
        header(head, "authorization").is_some_and(|v| v == want)
    }

    /// `GET /v1/models`.
    pub(crate) async fn models(
        &self,
        stream: &mut Box<dyn Io>,
        head: &[u8],
    ) -> std::io::Result<()> {
        self.models_served.fetch_add(1, Ordering::SeqCst);
        if !self.models_delay.is_zero() {
            smol::Timer::after(self.models_delay).await;
        }
        if !self.authorized(head) {
            return error(stream, 401, None, "the device token is not valid").await;
        }
        let failing = self.models_status.load(Ordering::SeqCst);
        if failing != 0 {
            return error(stream, failing, None, "the model list is unavailable").await;
        }
        let body = json!({ "object": "list", "data": self.models }).to_string();
        respond(stream, 200, &[("content-type", "application/json")], &body).await
    }

    /// `POST /v1/chat/completions`. `head` holds the request's head and whatever of its body
    /// was read with it.
    pub(crate) async fn chat(
        &self,
        stream: &mut Box<dyn Io>,
        head: Vec<u8>,
    ) -> std::io::Result<()> {
        if !self.authorized(&head) {
            return error(stream, 401, None, "the device token is not valid").await;
        }
        let Some(len) = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok())
        else {
            return error(stream, 411, None, "a content-length is required").await;
        };
        if len > MAX_BODY {
            return error(stream, 413, None, "the request is too big").await;
        }
        let Some(body) = read_body(stream, head).await? else {
            return Ok(());
        };
        let Ok(request) = serde_json::from_slice::<Value>(&body) else {
            return error(stream, 400, None, "the body is not JSON").await;
        };
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request.clone());
        if request["stream"] != true {
            return error(stream, 400, None, "this test instance only streams").await;
        }
        if let Some(upstream) = &self.upstream {
            if !upstream.pass_on(stream, body).await? {
                self.aborted.fetch_add(1, Ordering::SeqCst);
            }
            return Ok(());
        }
        let next = self
            .script
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        let reply = next.unwrap_or_else(|| echo(&request));
        let model = request["model"].as_str().unwrap_or("").to_string();
        let finished = match reply {
            ChatReply::Status {
                status,
                retry_after,
                message,
            } => return error(stream, status, retry_after.as_deref(), &message).await,
            ChatReply::Hang => {
                stream_head(stream).await?;
                // Until the client goes: there is no end to reach.
                !client_left(stream, Duration::from_secs(600)).await
            }
            ChatReply::Stream(s) => {
                let nth = lock(&self.requests).len();
                send_stream(stream, &model, &s, nth, &self.sse_writes).await
            }
        };
        if !finished {
            self.aborted.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The request's body: what of it `head` holds (read with the head), then the rest up to its
/// `content-length`. `None`: no length, one past [`MAX_BODY`], or the client left first.
async fn read_body(stream: &mut Box<dyn Io>, head: Vec<u8>) -> std::io::Result<Option<Vec<u8>>> {
    let Some(len) = header(&head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|len| *len <= MAX_BODY)
    else {
        return Ok(None);
    };
    let start = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(head.len(), |i| i + 4);
    let mut body = head[start..].to_vec();
    let mut buf = [0u8; 8192];
    while body.len() < len {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&buf[..n]);
    }
    body.truncate(len);
    Ok(Some(body))
}

/// The default reply: the last user message's text, in three deltas.
fn echo(request: &Value) -> ChatReply {
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"));
    let text = match last.map(|m| &m["content"]) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    let chars: Vec<char> = text.chars().collect();
    let third = chars.len().div_ceil(3).max(1);
    ChatReply::Stream(ChatStream {
        text: chars.chunks(third).map(|c| c.iter().collect()).collect(),
        ..ChatStream::default()
    })
}

/// Stream `s`'s events, the `nth` reply's (its tool call ids unique across replies, as a
/// server's are); whether the stream reached its end (false: the client left).
async fn send_stream(
    stream: &mut Box<dyn Io>,
    model: &str,
    s: &ChatStream,
    nth: usize,
    writes: &Option<Mutex<Vec<(String, Instant)>>>,
) -> bool {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
            "model": model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
    };
    let mut events = Vec::new();
    for r in &s.reasoning {
        events.push(chunk(json!({ "reasoning_content": r }), None).to_string());
    }
    for t in &s.text {
        events.push(chunk(json!({ "content": t }), None).to_string());
    }
    for (index, call) in s.tool_calls.iter().enumerate() {
        // As servers send them: the id and name first, the arguments in pieces after.
        let id = format!("call_{nth}_{index}_{}", call.name);
        events.push(
            chunk(
                json!({ "tool_calls": [{ "index": index, "id": id, "type": "function",
                        "function": { "name": call.name, "arguments": "" } }] }),
                None,
            )
            .to_string(),
        );
        let arguments: Vec<char> = call.arguments.to_string().chars().collect();
        for piece in arguments.chunks(7) {
            let piece: String = piece.iter().collect();
            events.push(
                chunk(
                    json!({ "tool_calls": [{ "index": index,
                            "function": { "arguments": piece } }] }),
                    None,
                )
                .to_string(),
            );
        }
    }
    if let Some(first) = events.first_mut() {
        let mut v: Value = serde_json::from_str(first).unwrap_or_default();
        v["choices"][0]["delta"]["role"] = json!("assistant");
        *first = v.to_string();
    }
    events.push(chunk(json!({}), Some(&s.finish_reason)).to_string());
    if let Some((prompt, completion)) = s.usage {
        events.push(
            json!({
                "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [],
                "usage": { "prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion },
            })
            .to_string(),
        );
    }
    events.push("[DONE]".into());
    if stream_head(stream).await.is_err() {
        return false;
    }
    for (i, data) in events.iter().enumerate() {
        if i > 0 && !s.delay.is_zero() && client_left(stream, s.delay).await {
            return false;
        }
        let event = format!("data: {data}\n\n");
        let framed = format!("{:x}\r\n{event}\r\n", event.len());
        if stream.write_all(framed.as_bytes()).await.is_err() || stream.flush().await.is_err() {
            return false;
        }
        if let Some(w) = writes {
            let at = Instant::now();
            w.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((data.clone(), at));
        }
    }
    stream.write_all(b"0\r\n\r\n").await.is_ok() && stream.flush().await.is_ok()
}

/// Wait `how_long`, watching the socket: whether the client closed it meanwhile (it sends
/// nothing more after its request, so a read that ends is its close).
async fn client_left(stream: &mut Box<dyn Io>, how_long: Duration) -> bool {
    let mut buf = [0u8; 256];
    future::or(
        async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => continue,
                }
            }
        },
        async {
            smol::Timer::after(how_long).await;
            false
        },
    )
    .await
}

async fn stream_head(stream: &mut Box<dyn Io>) -> std::io::Result<()> {
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
              transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await?;
    stream.flush().await
}

/// An error as LLeMbas's own API answers one: `{"detail": ...}`.
async fn detail(stream: &mut Box<dyn Io>, status: u16, detail: &str) -> std::io::Result<()> {
    let body = json!({ "detail": detail }).to_string();
    respond(
        stream,
        status,
        &[("content-type", "application/json")],
        &body,
    )
    .await
}

async fn error(
    stream: &mut Box<dyn Io>,
    status: u16,
    retry_after: Option<&str>,
    message: &str,
) -> std::io::Result<()> {
    let body = json!({ "error": { "message": message } }).to_string();
    let mut headers = vec![("content-type", "application/json")];
    if let Some(r) = retry_after {
        headers.push(("retry-after", r));
    }
    respond(stream, status, &headers, &body).await
}

async fn respond(
    stream: &mut Box<dyn Io>,
    status: u16,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        411 => "Length Required",
        404 => "Not Found",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.close().await
}

/// A header's value in a request head (names compared without case).
fn header(head: &[u8], name: &str) -> Option<String> {
    let end = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(head.len());
    String::from_utf8_lossy(&head[..end])
        .lines()
        .skip(1)
        .find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::Input;
    use crate::engine_io::{Performer, Target};
    use crate::instance::{InstanceOptions, TestInstance};
    use crate::link::Instance;
    use lembas_core::engine_io::{HttpMethod, IoCall, IoId, IoReply};
    use std::sync::Arc;

    /// The engine's performer against the test instance, with `token`.
    fn performer(
        instance: &TestInstance,
        token: &str,
    ) -> (Performer, smol::channel::Receiver<Input>) {
        let target = Target::new(
            Instance::parse(&instance.url()).unwrap(),
            token.into(),
            None,
        );
        let (tx, rx) = smol::channel::bounded(64);
        let attachments = std::path::PathBuf::from("/nonexistent");
        (
            Performer::new(Some(Arc::new(target.unwrap())), attachments, tx),
            rx,
        )
    }

    /// Fetch `path` and read its whole answer: the status and the body.
    async fn fetch(
        p: &mut Performer,
        rx: &smol::channel::Receiver<Input>,
        id: u64,
        method: HttpMethod,
        path: &str,
        body: Value,
    ) -> (u16, Option<String>, String) {
        let id = IoId(id);
        p.perform(IoCall::Fetch {
            id,
            method,
            path: path.into(),
            body: body.to_string().into_bytes(),
        });
        let mut head = None;
        let mut bytes = Vec::new();
        loop {
            let Ok(Input::Io { id: got, reply }) = rx.recv().await else {
                panic!("no reply");
            };
            assert_eq!(got, id);
            assert!(p.accept(got, &reply));
            match reply {
                IoReply::Head {
                    status,
                    retry_after,
                } => head = Some((status, retry_after)),
                IoReply::Body(b) => bytes.extend(b),
                IoReply::End => break,
                other => panic!("{other:?}"),
            }
            p.perform(IoCall::Read { id, max: 1000 });
        }
        let (status, retry_after) = head.unwrap();
        (status, retry_after, String::from_utf8(bytes).unwrap())
    }

    fn chat_body(text: &str) -> Value {
        json!({"model": "test/chat-small", "stream": true,
               "messages": [{"role": "user", "content": text}]})
    }

    /// Scripted replies in order, then the echo; the token checked; every body recorded.
    #[test]
    fn the_chat_api_streams_scripted_replies_then_echoes() {
        smol::block_on(async {
            let instance = TestInstance::start(InstanceOptions {
                token: "tok".into(),
                chat: vec![
                    ChatReply::rate_limited(2),
                    ChatReply::Stream(ChatStream {
                        reasoning: vec!["hmm".into()],
                        text: vec!["Hel".into(), "lo".into()],
                        usage: Some((5, 2)),
                        ..ChatStream::default()
                    }),
                ],
                ..InstanceOptions::default()
            })
            .await
            .unwrap();
            let (mut p, rx) = performer(&instance, "tok");
            let post = HttpMethod::Post;
            let path = "/v1/chat/completions";
            let (status, retry, body) = fetch(&mut p, &rx, 1, post, path, chat_body("a")).await;
            assert_eq!((status, retry.as_deref()), (429, Some("2")));
            assert!(body.contains("rate limited"), "{body}");
            let (status, _, body) = fetch(&mut p, &rx, 2, post, path, chat_body("b")).await;
            assert_eq!(status, 200);
            let data: Vec<&str> = body
                .split("\n\n")
                .filter_map(|e| e.strip_prefix("data: "))
                .collect();
            assert_eq!(data.last(), Some(&"[DONE]"), "{body}");
            let chunks: Vec<Value> = data[..data.len() - 1]
                .iter()
                .map(|d| serde_json::from_str(d).unwrap())
                .collect();
            assert_eq!(chunks[0]["choices"][0]["delta"]["reasoning_content"], "hmm");
            assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "Hel");
            assert_eq!(chunks[3]["choices"][0]["finish_reason"], "stop");
            assert_eq!(chunks[4]["usage"]["completion_tokens"], 2);
            let (_, _, body) = fetch(&mut p, &rx, 3, post, path, chat_body("echo me")).await;
            let text: String = body
                .split("\n\n")
                .filter_map(|e| e.strip_prefix("data: "))
                .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                .filter_map(|c| {
                    c["choices"][0]["delta"]["content"]
                        .as_str()
                        .map(String::from)
                })
                .collect();
            assert_eq!(text, "echo me");
            let models = fetch(&mut p, &rx, 4, HttpMethod::Get, "/v1/models", json!(null)).await;
            assert_eq!(models.0, 200);
            assert!(models.2.contains("test/embed"), "{}", models.2);
            let (mut wrong, wrong_rx) = performer(&instance, "other");
            let refused = fetch(&mut wrong, &wrong_rx, 5, post, path, chat_body("c")).await;
            assert_eq!(refused.0, 401);
            let sent = instance.chat_requests();
            assert_eq!(sent.len(), 3, "{sent:?}");
            assert_eq!(sent[2]["messages"][0]["content"], "echo me");
            assert_eq!(instance.aborted_streams(), 0);
        });
    }

    /// A client that goes while the stream hangs is counted as an aborted stream.
    #[test]
    fn a_stream_closed_early_is_counted() {
        smol::block_on(async {
            let instance = TestInstance::start(InstanceOptions {
                token: "tok".into(),
                chat: vec![ChatReply::Hang],
                ..InstanceOptions::default()
            })
            .await
            .unwrap();
            let (mut p, rx) = performer(&instance, "tok");
            p.perform(IoCall::Fetch {
                id: IoId(1),
                method: HttpMethod::Post,
                path: "/v1/chat/completions".into(),
                body: chat_body("x").to_string().into_bytes(),
            });
            let Ok(Input::Io { reply, .. }) = rx.recv().await else {
                panic!("no head");
            };
            assert!(matches!(reply, IoReply::Head { status: 200, .. }));
            p.perform(IoCall::Abort { id: IoId(1) });
            let start = std::time::Instant::now();
            while instance.aborted_streams() == 0 {
                assert!(start.elapsed() < Duration::from_secs(2), "never seen");
                smol::Timer::after(Duration::from_millis(10)).await;
            }
        });
    }

    /// A scripted tool call streams as servers send one: its id and name, then its arguments
    /// in pieces that join to the JSON given, and `finish_reason: tool_calls`.
    #[test]
    fn a_scripted_tool_call_streams_its_arguments_in_pieces() {
        smol::block_on(async {
            let args = json!({ "path": "src/main.rs", "offset": 1 });
            let instance = TestInstance::start(InstanceOptions {
                token: "tok".into(),
                chat: vec![ChatReply::tools(&[("read", args.clone())])],
                ..InstanceOptions::default()
            })
            .await
            .unwrap();
            let (mut p, rx) = performer(&instance, "tok");
            let path = "/v1/chat/completions";
            let (status, _, body) =
                fetch(&mut p, &rx, 1, HttpMethod::Post, path, chat_body("a")).await;
            assert_eq!(status, 200);
            let chunks: Vec<Value> = body
                .split("\n\n")
                .filter_map(|e| e.strip_prefix("data: "))
                .filter_map(|d| serde_json::from_str(d).ok())
                .collect();
            let calls: Vec<&Value> = chunks
                .iter()
                .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
                .collect();
            assert!(calls.len() > 2, "the arguments come in pieces: {calls:?}");
            assert_eq!(calls[0]["id"], "call_1_0_read");
            assert_eq!(calls[0]["function"]["name"], "read");
            let joined: String = calls
                .iter()
                .filter_map(|c| c["function"]["arguments"].as_str())
                .collect();
            assert_eq!(serde_json::from_str::<Value>(&joined).unwrap(), args);
            let finish = chunks
                .iter()
                .find_map(|c| c["choices"][0]["finish_reason"].as_str());
            assert_eq!(finish, Some("tool_calls"));
        });
    }
}
