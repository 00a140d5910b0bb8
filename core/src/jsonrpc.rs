//! JSON-RPC 2.0 as ACP uses it: the message model, decoding one message from one frame (a
//! WebSocket text message or a stdio line), and compact encoding.
//!
//! Decoding borrows from the frame: `params` and `result` stay `&RawValue` until the method's
//! handler parses them into its own types, so a 1 MiB attachment is scanned, never copied, on
//! its way through the envelope.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The error codes of JSON-RPC 2.0 that ACP uses.
pub mod code {
    /// Invalid JSON or invalid UTF-8.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON that is not a JSON-RPC 2.0 message, or a request the connection's state refuses.
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Params that do not fit the method, or that a rule (roots, limits, ...) refuses.
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Not from a peer: the client's own answer to a call whose link went down before the
    /// device answered it (JSON-RPC's implementation-defined range). The device answers on the
    /// link that asked, so that answer can never come; call again once a link is ready.
    pub const LINK_LOST: i64 = -32000;
}

/// A request id, kept as the exact JSON text it arrived as (an integer from the TS SDK, a UUID
/// string from the Rust SDK, anything else a peer picked) and echoed back byte for byte.
#[derive(Clone)]
pub struct Id(Box<RawValue>);

impl Id {
    pub fn number(n: u64) -> Id {
        Id(RawValue::from_string(n.to_string()).expect("an integer is JSON"))
    }

    pub fn string(s: &str) -> Id {
        let json = serde_json::to_string(s).expect("a string is JSON");
        Id(RawValue::from_string(json).expect("a quoted string is JSON"))
    }

    /// An id from its JSON text (a string or a number), as a shell that carried it elsewhere
    /// (a JS harness, a log) hands it back; `None` for anything else.
    pub fn from_json(json: &str) -> Option<Id> {
        let raw: Box<RawValue> = serde_json::from_str(json).ok()?;
        Id::from_raw(&raw)
    }

    /// The id as it stands in JSON, quotes and escapes included.
    pub fn as_json(&self) -> &str {
        self.0.get()
    }

    /// An id is a string or a number; anything else (null, bool, object) is not one.
    fn from_raw(raw: &RawValue) -> Option<Id> {
        match raw.get().as_bytes().first() {
            Some(b'"' | b'-' | b'0'..=b'9') => Some(Id(raw.to_owned())),
            _ => None,
        }
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}
impl Eq for Id {}
impl std::hash::Hash for Id {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_json().hash(state)
    }
}
impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Id {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_json().cmp(other.as_json())
    }
}
impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}
impl Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// The `error` member of an error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_REQUEST, message)
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    /// -32602 for a count past one of the device's bounds: `message` names the bound and its
    /// setting, and `data.limit` is the bound, as in every refusal of a size or count (what was
    /// asked is in the sentence).
    pub fn over_limit(message: impl Into<String>, limit: usize) -> Self {
        Self::invalid_params(message).with_data(serde_json::json!({ "limit": limit }))
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("method `{method}` is not known to this peer"),
        )
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// One decoded message, borrowing from the frame it came in.
#[derive(Debug)]
pub enum Message<'a> {
    Request(Request<'a>),
    Notification(Notification<'a>),
    Response(Response<'a>),
}

#[derive(Debug)]
pub struct Request<'a> {
    pub id: Id,
    pub method: Cow<'a, str>,
    pub params: Option<&'a RawValue>,
}

#[derive(Debug)]
pub struct Notification<'a> {
    pub method: Cow<'a, str>,
    pub params: Option<&'a RawValue>,
}

#[derive(Debug)]
pub struct Response<'a> {
    /// `None` for the `id: null` of an error about a frame that could not be read.
    pub id: Option<Id>,
    pub outcome: Result<&'a RawValue, RpcError>,
}

/// The bounds a frame is checked against before anything else is done with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct FrameLimits {
    pub max_frame_bytes: usize,
    pub max_depth: usize,
}

impl FrameLimits {
    /// serde_json stops at 128 levels on its own; our bound must sit below that to be the one
    /// that speaks (and names itself) first.
    pub const DEPTH_CEILING: usize = 120;
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits {
            // A prompt may carry 25 MB of decoded attachments; base64 makes that ~33.4 MB, and
            // the envelope and text need room beside it.
            max_frame_bytes: 48 * 1024 * 1024,
            // ACP's deepest shapes (a tool's rawInput, a plan) sit well inside 64.
            max_depth: 64,
        }
    }
}

/// A frame that is not a usable message, with what to answer it: an error response whose id is
/// the frame's when one could be read, `null` otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeError {
    pub id: Option<Id>,
    pub error: RpcError,
}

impl DecodeError {
    fn new(id: Option<Id>, code: i64, message: String) -> Self {
        DecodeError {
            id,
            error: RpcError::new(code, message),
        }
    }

    /// A frame (or a stdio line) of `size` bytes over the `limit`: the refusal names both.
    pub fn too_large(size: usize, limit: usize) -> Self {
        DecodeError {
            id: None,
            error: RpcError::invalid_request(format!(
                "frame of {size} bytes is over the limit of {limit} bytes (max_frame_bytes)"
            ))
            .with_data(serde_json::json!({ "limit": limit, "size": size })),
        }
    }

    /// The error response this frame gets.
    pub fn response(&self) -> Vec<u8> {
        encode_error(self.id.as_ref(), &self.error)
    }
}

/// Deserialize a member as raw JSON even when it is `null` (serde's `Option` would fold a
/// `null` into "absent", and `"result": null` is a real result).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// Decode one message from one frame.
pub fn decode<'a>(frame: &'a [u8], limits: &FrameLimits) -> Result<Message<'a>, DecodeError> {
    if frame.len() > limits.max_frame_bytes {
        let mut refused = DecodeError::too_large(frame.len(), limits.max_frame_bytes);
        refused.id = id_of_refused(frame, limits);
        return Err(refused);
    }
    let text = std::str::from_utf8(frame).map_err(|e| {
        DecodeError::new(
            None,
            code::PARSE_ERROR,
            format!("frame is not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })?;
    let first = text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .as_bytes()
        .first();
    if first != Some(&b'{') {
        // Not an object: tell invalid JSON (-32700) from valid JSON of the wrong shape (-32600).
        serde_json::from_str::<IgnoredAny>(text).map_err(|e| parse_error(&e))?;
        let why = if first == Some(&b'[') {
            "batch arrays are not accepted (ACP sends one message a frame)"
        } else {
            "a JSON-RPC 2.0 message is a JSON object"
        };
        return Err(DecodeError::new(None, code::INVALID_REQUEST, why.into()));
    }
    if let Some(depth) = nesting_over(text.as_bytes(), limits.max_depth) {
        return Err(DecodeError::new(
            None,
            code::INVALID_REQUEST,
            format!(
                "JSON nesting deeper than {depth} levels is over the limit of {} (max_depth)",
                limits.max_depth
            ),
        ));
    }
    let env: Envelope<'a> = serde_json::from_str(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => DecodeError::new(
            None,
            code::INVALID_REQUEST,
            format!("not a JSON-RPC 2.0 message: {}", without_position(&e)),
        ),
        _ => parse_error(&e),
    })?;
    classify(env)
}

/// The `id` of a frame refused for its size, when it is a well-formed request: answered with
/// its id, the request is answered (a prompt with a large image is told why, where an error
/// of id `null` left it waiting for good). Reading it costs a pass over bytes already
/// received.
fn id_of_refused(frame: &[u8], limits: &FrameLimits) -> Option<Id> {
    let text = std::str::from_utf8(frame).ok()?;
    if nesting_over(text.as_bytes(), limits.max_depth).is_some() {
        return None;
    }
    // The envelope borrows its members, so this builds nothing of the payload.
    let env: Envelope<'_> = serde_json::from_str(text).ok()?;
    // A response has an id too, and is never answered.
    env.method?;
    Id::from_raw(env.id?)
}

fn parse_error(e: &serde_json::Error) -> DecodeError {
    DecodeError::new(None, code::PARSE_ERROR, format!("invalid JSON: {e}"))
}

fn classify(env: Envelope<'_>) -> Result<Message<'_>, DecodeError> {
    let id = match env.id {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => Some(Id::from_raw(raw).ok_or_else(|| {
            DecodeError::new(
                None,
                code::INVALID_REQUEST,
                "`id` must be a string or a number".into(),
            )
        })?),
    };
    let invalid = |why: &str| DecodeError::new(id.clone(), code::INVALID_REQUEST, why.into());
    if env.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return Err(invalid("`jsonrpc` must be the string \"2.0\""));
    }
    if let Some(params) = env.params {
        if !matches!(params.get().as_bytes().first(), Some(b'{' | b'[')) {
            return Err(invalid("`params` must be an object or an array"));
        }
    }
    match (env.method, env.result, env.error) {
        (Some(method), None, None) => {
            let method = raw_string(method).ok_or_else(|| invalid("`method` must be a string"))?;
            let params = env.params;
            if env.id.is_some() && id.is_none() {
                return Err(invalid("a request's `id` must not be null"));
            }
            Ok(match id {
                None => Message::Notification(Notification { method, params }),
                Some(id) => Message::Request(Request { id, method, params }),
            })
        }
        (None, Some(result), None) => {
            if id.is_none() {
                return Err(invalid("a result must carry the `id` of its request"));
            }
            Ok(Message::Response(Response {
                id,
                outcome: Ok(result),
            }))
        }
        (None, None, Some(error)) => {
            let error: RpcError = serde_json::from_str(error.get()).map_err(|e| {
                invalid(&format!(
                    "`error` must be {{ code: integer, message: string, data? }}: {}",
                    without_position(&e)
                ))
            })?;
            Ok(Message::Response(Response {
                id,
                outcome: Err(error),
            }))
        }
        (None, None, None) => Err(invalid(
            "a message needs `method` (request or notification) or `result`/`error` (response)",
        )),
        _ => Err(invalid(
            "a message has exactly one of `method`, `result` and `error`",
        )),
    }
}

/// A JSON string borrowed from the frame when it has no escapes, owned when it has.
fn raw_string(raw: &RawValue) -> Option<Cow<'_, str>> {
    if !raw.get().starts_with('"') {
        return None;
    }
    match serde_json::from_str::<&str>(raw.get()) {
        Ok(s) => Some(Cow::Borrowed(s)),
        Err(_) => serde_json::from_str::<String>(raw.get())
            .ok()
            .map(Cow::Owned),
    }
}

/// The depth reached when it goes past `max`, else `None`. Strings are skipped with memchr, so
/// a large base64 attachment costs a fast scan, not a byte-by-byte walk.
fn nesting_over(bytes: &[u8], max: usize) -> Option<usize> {
    // The depth never exceeds the count of opening brackets (those in strings included), so a
    // frame with at most `max` of them needs no exact walk. That is nearly every frame, and the
    // walk costs a memchr call per escape in a string: 2.3 µs against 0.2 µs for this count on
    // a 4 KiB message chunk.
    memchr::memchr2_iter(b'{', b'[', bytes).nth(max)?;
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                loop {
                    // An escape at the very end leaves `i` past the end: unterminated.
                    let rest = bytes.get(i..)?;
                    match memchr::memchr2(b'"', b'\\', rest) {
                        None => return None, // unterminated: the parser will say so
                        Some(k) if bytes[i + k] == b'\\' => i += k + 2,
                        Some(k) => {
                            i += k;
                            break;
                        }
                    }
                }
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return Some(depth);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// serde_json's message without its " at line L column C" tail, which means nothing to a peer
/// that sent one line.
fn without_position(e: &impl fmt::Display) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(cut) => s[..cut].to_string(),
        None => s,
    }
}

/// Parse a method's params into its type. Params that do not fit get -32602 with a sentence that
/// names the field (its path, from where serde_json stopped) and what was wrong. Absent params
/// read as `{}`.
pub fn parse_params<'a, T: Deserialize<'a>>(
    method: &str,
    params: Option<&'a RawValue>,
) -> Result<T, RpcError> {
    let text = params.map_or("{}", RawValue::get);
    parse_at_path(text)
        .map_err(|why| RpcError::invalid_params(format!("invalid params for `{method}`: {why}")))
}

/// Read `text` as a `T`, or say why not: the path of the member at fault (from where
/// serde_json stopped) and what was wrong with it (`` `remote.maxMode`: unknown variant ... ``).
pub fn parse_at_path<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| {
        let path = crate::error_path::path_at(text, e.line(), e.column());
        let inner = without_position(&e);
        if path == "." {
            inner
        } else {
            format!("`{path}`: {inner}")
        }
    })
}

/// Parse a response's result into the type its request expects.
pub fn parse_result<T: DeserializeOwned>(method: &str, result: &RawValue) -> Result<T, RpcError> {
    parse_params::<T>(method, Some(result))
}

#[derive(Serialize)]
struct OutRequest<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: &'a Id,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct OutNotification<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct OutResult<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a Id,
    result: &'a R,
}

#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: Option<&'a Id>,
    error: &'a RpcError,
}

// Encoding our own types cannot fail: they hold no maps with non-string keys and no
// serializers that refuse. serde_json writes compact JSON and escapes every control
// character, so a frame never holds a raw newline (stdio's framing relies on it).
fn to_frame<T: Serialize>(msg: &T) -> Vec<u8> {
    // Most frames (a streamed chunk's update: ~250 bytes) fit without growing the buffer.
    let mut frame = Vec::with_capacity(512);
    serde_json::to_writer(&mut frame, msg).expect("the core's messages always serialize");
    frame
}

pub fn encode_request<P: Serialize>(id: &Id, method: &str, params: &P) -> Vec<u8> {
    to_frame(&OutRequest {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

pub fn encode_notification<P: Serialize>(method: &str, params: &P) -> Vec<u8> {
    to_frame(&OutNotification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

pub fn encode_result<R: Serialize>(id: &Id, result: &R) -> Vec<u8> {
    to_frame(&OutResult {
        jsonrpc: "2.0",
        id,
        result,
    })
}

pub fn encode_error(id: Option<&Id>, error: &RpcError) -> Vec<u8> {
    to_frame(&OutError {
        jsonrpc: "2.0",
        id,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Result<Message<'_>, DecodeError> {
        decode(s.as_bytes(), &FrameLimits::default())
    }

    fn err_code(s: &str) -> (i64, Option<String>) {
        let e = dec(s).expect_err("should not decode");
        (e.error.code, e.id.map(|i| i.as_json().to_string()))
    }

    #[test]
    fn requests_keep_their_ids_exactly() {
        for id in [
            "0",
            "7",
            "\"6f1c2b9e-1d7a-4f7e-9c1a-2b3c4d5e6f70\"",
            "\"a\\u0041\"",
            "1.50",
        ] {
            let frame = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m","params":{{}}}}"#);
            match dec(&frame).unwrap() {
                Message::Request(r) => {
                    assert_eq!(r.id.as_json(), id);
                    let out = encode_result(&r.id, &serde_json::json!({}));
                    let echoed = String::from_utf8(out).unwrap();
                    assert!(echoed.contains(&format!("\"id\":{id}")), "{echoed}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn ids_come_back_from_their_json() {
        assert_eq!(Id::from_json("\"a-b\"").unwrap(), Id::string("a-b"));
        assert_eq!(Id::from_json("7").unwrap(), Id::number(7));
        assert!(Id::from_json("null").is_none());
        assert!(Id::from_json("{}").is_none());
    }

    #[test]
    fn notifications_responses_and_null_results() {
        assert!(matches!(
            dec(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#),
            Ok(Message::Notification(_))
        ));
        match dec(r#"{"jsonrpc":"2.0","id":3,"result":null}"#).unwrap() {
            Message::Response(r) => assert_eq!(r.outcome.unwrap().get(), "null"),
            other => panic!("{other:?}"),
        }
        match dec(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#).unwrap() {
            Message::Response(r) => {
                assert!(r.id.is_none());
                assert_eq!(r.outcome.unwrap_err().code, code::PARSE_ERROR);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn escaped_method_names_are_decoded() {
        match dec(r#"{"jsonrpc":"2.0","method":"session\/cancel"}"#).unwrap() {
            Message::Notification(n) => assert_eq!(n.method, "session/cancel"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn invalid_json_and_utf8_are_parse_errors_with_null_id() {
        assert_eq!(err_code("{"), (code::PARSE_ERROR, None));
        assert_eq!(err_code("nope"), (code::PARSE_ERROR, None));
        assert_eq!(
            err_code(r#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#),
            (code::PARSE_ERROR, None)
        );
        let bad = decode(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
            &FrameLimits::default(),
        );
        assert_eq!(bad.unwrap_err().error.code, code::PARSE_ERROR);
    }

    #[test]
    fn wrong_shapes_are_invalid_requests_with_the_id_when_readable() {
        assert_eq!(err_code("[]"), (code::INVALID_REQUEST, None));
        assert_eq!(
            err_code(r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#),
            (code::INVALID_REQUEST, None)
        );
        assert_eq!(err_code("42"), (code::INVALID_REQUEST, None));
        assert_eq!(
            err_code(r#"{"id":5,"method":"m"}"#),
            (code::INVALID_REQUEST, Some("5".into()))
        );
        assert_eq!(
            err_code(r#"{"jsonrpc":"1.0","id":"x","method":"m"}"#),
            (code::INVALID_REQUEST, Some("\"x\"".into()))
        );
        assert_eq!(
            err_code(r#"{"jsonrpc":"2.0","id":5,"method":7}"#),
            (code::INVALID_REQUEST, Some("5".into()))
        );
        assert_eq!(
            err_code(r#"{"jsonrpc":"2.0","id":5,"method":"m","params":3}"#),
            (code::INVALID_REQUEST, Some("5".into()))
        );
        assert_eq!(
            err_code(r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#).0,
            code::INVALID_REQUEST
        );
        assert_eq!(
            err_code(r#"{"jsonrpc":"2.0","id":1,"method":"m","result":1}"#),
            (code::INVALID_REQUEST, Some("1".into()))
        );
        assert_eq!(
            err_code(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#).0,
            code::INVALID_REQUEST
        );
        assert_eq!(
            err_code(r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}"#),
            (code::INVALID_REQUEST, Some("1".into()))
        );
    }

    #[test]
    fn oversized_frames_name_the_limit_and_the_size() {
        let limits = FrameLimits {
            max_frame_bytes: 10,
            max_depth: 64,
        };
        let e = decode(br#"{"jsonrpc":"2.0","method":"m"}"#, &limits).unwrap_err();
        assert_eq!(e.error.code, code::INVALID_REQUEST);
        assert!(e.error.message.contains("30 bytes"), "{}", e.error.message);
        assert!(
            e.error.message.contains("limit of 10 bytes"),
            "{}",
            e.error.message
        );
        assert_eq!(e.id, None, "a notification has no id to answer");
    }

    #[test]
    fn an_oversized_request_is_refused_with_its_id_and_nothing_else_is() {
        let limits = FrameLimits {
            max_frame_bytes: 10,
            max_depth: 3,
        };
        let id = |frame: &str| decode(frame.as_bytes(), &limits).unwrap_err().id;
        // The id after the payload, as a client may write it.
        let request = r#"{"jsonrpc":"2.0","method":"session/prompt","params":{"a":[1]},"id":7}"#;
        assert_eq!(id(request), Some(Id::number(7)));
        assert_eq!(
            id(r#"{"id":"p-1","method":"m"}"#).map(|i| i.as_json().to_string()),
            Some(r#""p-1""#.to_string())
        );
        // A response is never answered; nor is what cannot be read whole.
        assert_eq!(id(r#"{"jsonrpc":"2.0","result":{},"id":7}"#), None);
        assert_eq!(id(r#"{"method":"m","id":7,"params":{"a":{"b":{}}}}"#), None);
        assert_eq!(id(r#"{"method":"m","id":7"#), None);
        assert_eq!(id(r#"{"method":"m","id":null}"#), None);
        assert_eq!(id(r#"{"method":"m","id":[7]}"#), None);
    }

    #[test]
    fn nesting_is_bounded_but_brackets_in_strings_do_not_count() {
        let limits = FrameLimits {
            max_frame_bytes: 1 << 20,
            max_depth: 4,
        };
        let deep = r#"{"jsonrpc":"2.0","method":"m","params":{"a":{"b":{"c":{}}}}}"#;
        let e = decode(deep.as_bytes(), &limits).unwrap_err();
        assert!(
            e.error.message.contains("limit of 4"),
            "{}",
            e.error.message
        );
        let flat = r#"{"jsonrpc":"2.0","method":"m","params":{"a":"[[[[[[\"{{{{{{"}}"#;
        assert!(decode(flat.as_bytes(), &limits).is_ok());
        let very_deep = "[".repeat(100_000);
        let e = decode(very_deep.as_bytes(), &FrameLimits::default()).unwrap_err();
        assert!(matches!(
            e.error.code,
            code::PARSE_ERROR | code::INVALID_REQUEST
        ));
    }

    #[test]
    fn params_errors_name_the_field() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct P {
            cwd: String,
            inner: Inner,
        }
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Inner {
            n: u32,
        }
        let raw = RawValue::from_string(r#"{"cwd":"/x","inner":{"n":"five"}}"#.into()).unwrap();
        let e = parse_params::<P>("session/new", Some(&raw)).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        assert!(e.message.contains("`inner.n`"), "{}", e.message);
        assert!(e.message.contains("session/new"), "{}", e.message);
        let e = parse_params::<P>("session/new", None).unwrap_err();
        assert!(e.message.contains("missing field `cwd`"), "{}", e.message);
    }

    #[test]
    fn encoded_frames_never_hold_a_raw_newline() {
        let f = encode_notification("m", &serde_json::json!({"t": "a\nb\r\u{2028}"}));
        assert!(!f.contains(&b'\n') && !f.contains(&b'\r'));
    }
}
