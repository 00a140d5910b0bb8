//! The chat completions request body and its streamed chunks (OpenAI-compatible).
//!
//! The body is written through serde from borrowing wire types; a chunk is read in one serde
//! pass that borrows its strings from the event's data, so a text delta costs one allocation
//! (the `String` it is handed out as) and the fields servers add are skipped, not kept.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

// ---- the request ----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool's result (`tool_call_id` names the call).
    Tool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Text(String),
    /// a data: URL or https URL
    Image {
        url: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    /// No parts: `content: null` (an assistant message of calls alone).
    pub parts: Vec<Part>,
    /// An assistant message's tool calls (`tool_calls`), as the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// A tool message's call.
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: Role, parts: Vec<Part>) -> Message {
        Message {
            role,
            parts,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A tool's result for the call `id`.
    pub fn tool_result(id: &str, text: String) -> Message {
        Message {
            tool_call_id: Some(id.to_string()),
            ..Message::new(Role::Tool, vec![Part::Text(text)])
        }
    }
}

/// A call the model made: its id, the function's name and its arguments (JSON, as text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub effort: Option<String>,
    /// The function tools offered (an array), when the turn has tools.
    pub tools: Option<serde_json::Value>,
}

/// The JSON body of `POST /v1/chat/completions`: model, messages, stream: true,
/// stream_options {include_usage: true}, and `reasoning_effort` from `effort` ("off" is sent
/// as "none"; None leaves it out).
pub fn request_body(req: &ChatRequest) -> Vec<u8> {
    body_of(
        &req.model,
        &req.messages,
        req.effort.as_deref(),
        req.tools.as_ref(),
    )
}

/// [`request_body`] from borrowed pieces, so a turn's messages are not copied for each step.
pub fn body_of(
    model: &str,
    messages: &[Message],
    effort: Option<&str>,
    tools: Option<&serde_json::Value>,
) -> Vec<u8> {
    let body = Body {
        model,
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        reasoning_effort: effort.map(|effort| match effort {
            // The device's "off" is the API's "none".
            "off" => "none",
            other => other,
        }),
        tools,
    };
    // Strings, bools and sequences only: writing them to a Vec cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: &'a [Message],
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a serde_json::Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        })
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut message = s.serialize_struct("Message", 4)?;
        message.serialize_field("role", &self.role)?;
        match self.parts.as_slice() {
            // The plain form every server takes, the only one some take for assistant turns.
            [Part::Text(text)] => message.serialize_field("content", text)?,
            [] => message.serialize_field("content", &())?,
            parts => message.serialize_field("content", &WireParts(parts))?,
        }
        if !self.tool_calls.is_empty() {
            message.serialize_field("tool_calls", &WireCalls(&self.tool_calls))?;
        }
        if let Some(id) = &self.tool_call_id {
            message.serialize_field("tool_call_id", id)?;
        }
        message.end()
    }
}

struct WireParts<'a>(&'a [Part]);

struct WireCalls<'a>(&'a [ToolCall]);

impl Serialize for WireCalls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|call| WireCall {
            id: &call.id,
            kind: "function",
            function: WireFunction {
                name: &call.name,
                arguments: &call.arguments,
            },
        }))
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl Serialize for WireParts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|part| match part {
            Part::Text(text) => WirePart::Text { text },
            Part::Image { url } => WirePart::ImageUrl {
                image_url: ImageUrl { url },
            },
        }))
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl<'a> },
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: &'a str,
}

// ---- the streamed chunks ----

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta {
    Text(String),
    Thought(String),
    /// A piece of the `index`th tool call: its id and name when they come (usually in the
    /// first piece), and the next piece of its arguments (JSON text, cut anywhere).
    ToolCall {
        index: u64,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    Finish(Finish),
    Usage(Usage),
    /// An error the server reported inside the stream (its message, type and code).
    Error(String),
    /// The `[DONE]` event that ends the stream.
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    Stop,
    Length,
    /// The model made tool calls and waits for their results.
    ToolCalls,
    /// content_filter, or anything else, as given
    Other(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A chunk that is not one: not JSON, or a known field of the wrong type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkError(pub String);

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ChunkError {}

/// Reads one SSE event's data: `[DONE]`, a chunk, or an in-stream error object. Its deltas are
/// pushed to `out` in the order they mean: thought, text, tool calls, finish, usage, error.
pub fn parse_chunk(data: &str, out: &mut Vec<Delta>) -> Result<(), ChunkError> {
    if data.trim_ascii() == "[DONE]" {
        out.push(Delta::Done);
        return Ok(());
    }
    // serde would take an array for a struct too (its fields in order): a chunk is an object.
    if !data.trim_ascii_start().starts_with('{') {
        return Err(ChunkError(format!(
            "not a chat completion chunk: not a JSON object (data starts {:?}, {} bytes)",
            prefix(data, 40),
            data.len()
        )));
    }
    let chunk: Chunk = serde_json::from_str(data).map_err(|e| chunk_error(data, &e))?;
    if let Some(FirstChoice(Some(choice))) = chunk.choices {
        if let Some(delta) = choice.delta {
            // Servers moving from `reasoning_content` to `reasoning` send both with the same
            // text: one of them is the thought.
            let thought = non_empty(delta.reasoning_content).or(non_empty(delta.reasoning));
            if let Some(thought) = thought {
                out.push(Delta::Thought(thought.into_owned()));
            }
            if let Some(text) = non_empty(delta.content) {
                out.push(Delta::Text(text.into_owned()));
            }
            for call in delta.tool_calls.into_iter().flatten() {
                let (name, arguments) = match call.function {
                    Some(f) => (non_empty(f.name), non_empty(f.arguments)),
                    None => (None, None),
                };
                out.push(Delta::ToolCall {
                    index: call.index,
                    id: non_empty(call.id).map(Cow::into_owned),
                    name: name.map(Cow::into_owned),
                    arguments: arguments.map(Cow::into_owned).unwrap_or_default(),
                });
            }
        }
        if let Some(reason) = non_empty(choice.finish_reason) {
            out.push(Delta::Finish(match &*reason {
                "stop" => Finish::Stop,
                "length" => Finish::Length,
                "tool_calls" => Finish::ToolCalls,
                _ => Finish::Other(reason.into_owned()),
            }));
        }
    }
    if let Some(usage) = chunk.usage {
        out.push(Delta::Usage(Usage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
        }));
    }
    match chunk.error {
        Some(ErrorField::Object(error)) => out.push(Delta::Error(error.describe())),
        Some(ErrorField::Message(message)) if !message.is_empty() => {
            out.push(Delta::Error(message))
        }
        Some(ErrorField::Message(_)) => {
            out.push(Delta::Error("the server reported an error".into()))
        }
        None => {}
    }
    Ok(())
}

fn non_empty(text: Option<Str<'_>>) -> Option<Cow<'_, str>> {
    text.map(|t| t.0).filter(|t| !t.is_empty())
}

/// A string borrowed from the chunk when it has no escapes. (A bare `Option<Cow<str>>` field
/// never borrows, even with `#[serde(borrow)]`: serde reads it through `Cow`'s own impl, which
/// always copies. The newtype makes it go through the borrowing path.)
#[derive(Deserialize)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

/// What was wrong, briefly: serde's reason (which can quote a value) and the data's start,
/// each cut short, so a huge or hostile chunk is not echoed into logs.
fn chunk_error(data: &str, error: &serde_json::Error) -> ChunkError {
    let reason = error.to_string();
    ChunkError(format!(
        "not a chat completion chunk: {} (data starts {:?}, {} bytes)",
        prefix(&reason, 80),
        prefix(data, 40),
        data.len()
    ))
}

/// At most `max` bytes of `text`, cut at a character boundary, marked when cut.
fn prefix(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    Cow::Owned(format!("{}…", crate::text::floor_char(text, max)))
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Option<FirstChoice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(borrow, default)]
    error: Option<ErrorField<'a>>,
}

/// The choice of index 0 (the only one asked for), read out of `choices` without keeping a
/// vector of the others.
struct FirstChoice<'a>(Option<Choice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct First<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for First<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut first = None;
                while let Some(choice) = seq.next_element::<Choice<'de>>()? {
                    if choice.index == 0 && first.is_none() {
                        first = Some(choice);
                    }
                }
                Ok(FirstChoice(first))
            }
        }
        d.deserialize_seq(First(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Choice<'a> {
    /// Absent in a few servers' single-choice streams: that one is the first.
    #[serde(default)]
    index: u64,
    #[serde(borrow, default)]
    delta: Option<WireDelta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Str<'a>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Str<'a>>,
    #[serde(borrow, default)]
    reasoning: Option<Str<'a>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<WireToolCall<'a>>>,
}

#[derive(Deserialize)]
struct WireToolCall<'a> {
    /// Absent from a few servers that send each call whole: then there is one per chunk.
    #[serde(default)]
    index: u64,
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    function: Option<WireFunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct WireFunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    arguments: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct WireError<'a> {
    #[serde(borrow, default)]
    message: Option<Str<'a>>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<Str<'a>>,
    /// A string for OpenAI, a number (an HTTP status) for llama.cpp and others.
    #[serde(default)]
    code: Option<ErrorCode<'a>>,
}

/// The error member: the object servers send, or (a few proxies) just its message. Lenient,
/// as an error the server meant to tell is worth more than a complaint about its shape.
#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorField<'a> {
    #[serde(borrow)]
    Object(WireError<'a>),
    Message(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorCode<'a> {
    Number(i64),
    #[serde(borrow)]
    Text(Cow<'a, str>),
    /// Any other shape says nothing we would show.
    Other(serde::de::IgnoredAny),
}

impl WireError<'_> {
    fn describe(self) -> String {
        let mut text = match non_empty(self.message) {
            Some(message) => message.into_owned(),
            None => "the server reported an error".to_string(),
        };
        let kind = non_empty(self.kind);
        let code = match self.code {
            Some(ErrorCode::Number(n)) => Some(n.to_string()),
            Some(ErrorCode::Text(t)) if !t.is_empty() => Some(t.into_owned()),
            _ => None,
        };
        match (kind, code) {
            (Some(kind), Some(code)) => text.push_str(&format!(" ({kind}, {code})")),
            (Some(kind), None) => text.push_str(&format!(" ({kind})")),
            (None, Some(code)) => text.push_str(&format!(" ({code})")),
            (None, None) => {}
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parse(data: &str) -> Vec<Delta> {
        let mut out = Vec::new();
        parse_chunk(data, &mut out).unwrap();
        out
    }

    fn body(req: &ChatRequest) -> Value {
        serde_json::from_slice(&request_body(req)).unwrap()
    }

    fn text(t: &str) -> Part {
        Part::Text(t.into())
    }

    #[test]
    fn the_body_streams_with_usage_and_plain_text_content() {
        let req = ChatRequest {
            model: "qwen3".into(),
            messages: vec![
                Message::new(Role::System, vec![text("be brief")]),
                Message::new(Role::User, vec![text("hi")]),
                Message::new(Role::Assistant, vec![text("hello")]),
            ],
            effort: None,
            tools: None,
        };
        assert_eq!(
            body(&req),
            json!({
                "model": "qwen3",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
    }

    #[test]
    fn parts_other_than_one_text_are_an_array() {
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![
                Message::new(
                    Role::User,
                    vec![
                        text("what is this?"),
                        Part::Image {
                            url: "data:image/png;base64,iVBO".into(),
                        },
                    ],
                ),
                Message::new(
                    Role::User,
                    vec![Part::Image {
                        url: "https://example.com/a.png".into(),
                    }],
                ),
                Message::new(Role::User, vec![text("a"), text("b")]),
            ],
            effort: None,
            tools: None,
        };
        assert_eq!(
            body(&req)["messages"],
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                ]},
                {"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ]},
                {"role": "user", "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b"},
                ]},
            ])
        );
    }

    #[test]
    fn effort_is_sent_as_reasoning_effort_and_off_as_none() {
        let mut req = ChatRequest {
            model: "m".into(),
            messages: vec![],
            effort: Some("high".into()),
            tools: None,
        };
        assert_eq!(body(&req)["reasoning_effort"], "high");
        req.effort = Some("off".into());
        assert_eq!(body(&req)["reasoning_effort"], "none");
        req.effort = None;
        assert!(body(&req).get("reasoning_effort").is_none());
    }

    #[test]
    fn text_needing_escapes_round_trips() {
        let tricky = "quote \" backslash \\ newline \n tab \t nul \u{0} é 𝄞";
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![Message::new(Role::User, vec![text(tricky)])],
            effort: None,
            tools: None,
        };
        assert_eq!(body(&req)["messages"][0]["content"], tricky);
    }

    #[test]
    fn a_text_delta() {
        assert_eq!(
            parse(
                r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}"#
            ),
            vec![Delta::Text("Hel".into())]
        );
    }

    #[test]
    fn reasoning_content_and_reasoning_are_thoughts() {
        assert_eq!(
            parse(r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#),
            vec![Delta::Thought("hmm".into())]
        );
        assert_eq!(
            parse(r#"{"choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}"#),
            vec![Delta::Thought("hmm".into())]
        );
        // Both (the same text under two names): one thought.
        assert_eq!(
            parse(
                r#"{"choices":[{"index":0,"delta":{"reasoning":"hmm","reasoning_content":"hmm"}}]}"#
            ),
            vec![Delta::Thought("hmm".into())]
        );
        // One of them empty or null: the other.
        assert_eq!(
            parse(r#"{"choices":[{"index":0,"delta":{"reasoning_content":"","reasoning":"x"}}]}"#),
            vec![Delta::Thought("x".into())]
        );
    }

    #[test]
    fn a_thought_and_text_in_one_chunk_come_thought_first() {
        assert_eq!(
            parse(
                r#"{"choices":[{"index":0,"delta":{"content":"so","reasoning_content":"ok"},"finish_reason":"stop"}]}"#
            ),
            vec![
                Delta::Thought("ok".into()),
                Delta::Text("so".into()),
                Delta::Finish(Finish::Stop)
            ]
        );
    }

    #[test]
    fn empty_and_null_fields_make_no_delta() {
        assert_eq!(
            parse(
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#
            ),
            vec![]
        );
        assert_eq!(
            parse(
                r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":null}}],"usage":null}"#
            ),
            vec![]
        );
        assert_eq!(parse(r#"{"choices":[{"index":0,"delta":{}}]}"#), vec![]);
        assert_eq!(parse(r#"{"choices":null}"#), vec![]);
        assert_eq!(parse(r#"{}"#), vec![]);
    }

    #[test]
    fn a_usage_only_final_chunk() {
        assert_eq!(
            parse(
                r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46,"prompt_tokens_details":{"cached_tokens":0}}}"#
            ),
            vec![Delta::Usage(Usage {
                input_tokens: 12,
                output_tokens: 34
            })]
        );
        assert_eq!(
            serde_json::to_value(Usage {
                input_tokens: 1,
                output_tokens: 2
            })
            .unwrap(),
            json!({"inputTokens": 1, "outputTokens": 2})
        );
    }

    #[test]
    fn finish_reasons() {
        let finish = |reason: &str| {
            parse(&format!(
                r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{reason}"}}]}}"#
            ))
        };
        assert_eq!(finish("stop"), vec![Delta::Finish(Finish::Stop)]);
        assert_eq!(finish("length"), vec![Delta::Finish(Finish::Length)]);
        assert_eq!(finish("tool_calls"), vec![Delta::Finish(Finish::ToolCalls)]);
        assert_eq!(
            finish("content_filter"),
            vec![Delta::Finish(Finish::Other("content_filter".into()))]
        );
        assert_eq!(finish(""), vec![]);
    }

    #[test]
    fn done() {
        assert_eq!(parse("[DONE]"), vec![Delta::Done]);
        assert_eq!(parse(" [DONE]\n"), vec![Delta::Done]);
    }

    #[test]
    fn an_error_object() {
        assert_eq!(
            parse(
                r#"{"error":{"message":"context too long","type":"invalid_request_error","code":"context_length_exceeded"}}"#
            ),
            vec![Delta::Error(
                "context too long (invalid_request_error, context_length_exceeded)".into()
            )]
        );
        // llama.cpp's: a numeric code.
        assert_eq!(
            parse(r#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#),
            vec![Delta::Error("boom (server_error, 500)".into())]
        );
        assert_eq!(
            parse(r#"{"error":{"message":"plain"}}"#),
            vec![Delta::Error("plain".into())]
        );
        assert_eq!(
            parse(r#"{"error":{}}"#),
            vec![Delta::Error("the server reported an error".into())]
        );
        // Shapes some proxies send: a bare message, an odd code.
        assert_eq!(
            parse(r#"{"error":"upstream timed out"}"#),
            vec![Delta::Error("upstream timed out".into())]
        );
        assert_eq!(
            parse(r#"{"error":{"message":"m","code":{"http":502}}}"#),
            vec![Delta::Error("m".into())]
        );
    }

    #[test]
    fn garbage_is_an_error_that_says_what_and_echoes_little() {
        let mut out = Vec::new();
        let error = parse_chunk("<html>502 Bad Gateway</html>", &mut out).unwrap_err();
        assert!(error.0.contains("not a chat completion chunk"), "{error}");
        assert!(error.0.contains("<html>502"), "{error}");

        let huge = format!(
            r#"{{"choices":[{{"index":0,"delta":{{"content":5}}}}],"x":"{}"}}"#,
            "y".repeat(10_000)
        );
        let error = parse_chunk(&huge, &mut out).unwrap_err();
        assert!(error.0.contains("invalid type"), "{error}");
        assert!(error.0.len() < 250, "{} bytes: {error}", error.0.len());

        // serde quotes a string of the wrong type: it is cut short too.
        let long_string = format!(r#"{{"usage":"{}"}}"#, "z".repeat(10_000));
        let error = parse_chunk(&long_string, &mut out).unwrap_err();
        assert!(error.0.len() < 250, "{} bytes: {error}", error.0.len());

        for bad in [
            "",
            "5",
            "[]",
            r#"{"choices":{}}"#,
            r#"{"choices":[{"index":"0"}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":["a"]}}]}"#,
            r#"{"choices":[{"index":0,"finish_reason":1}]}"#,
            r#"{"usage":{"prompt_tokens":-1}}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a"}}]"#,
        ] {
            assert!(
                parse_chunk(bad, &mut out).is_err(),
                "{bad:?} read as a chunk"
            );
        }
        assert!(out.is_empty(), "a refused chunk gives no deltas");
    }

    #[test]
    fn every_cut_of_a_chunk_is_read_or_refused_briefly() {
        // Multi-byte text everywhere, so the error's cut-short quotes land inside characters.
        let chunk = format!(
            r#"{{"choices":[{{"index":0,"delta":{{"content":"{}","reasoning":"é✓𝄞"}},"finish_reason":"ß"}}],"usage":{{"prompt_tokens":1}}}}"#,
            "é✓𝄞中".repeat(30)
        );
        let mut out = Vec::new();
        for cut in (0..chunk.len()).filter(|&i| chunk.is_char_boundary(i)) {
            let error = parse_chunk(&chunk[..cut], &mut out).unwrap_err();
            assert!(error.0.len() < 250, "cut {cut}: {} bytes", error.0.len());
        }
        assert!(out.is_empty());
        parse_chunk(&chunk, &mut out).unwrap();
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn a_llama_cpp_chunk_with_extra_fields() {
        let chunk = r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" world","tool_calls":[{"index":0,"id":"t1","type":"function","function":{"name":"f","arguments":"{"}}]}}],"created":1760000000,"id":"chatcmpl-x","model":"qwen","system_fingerprint":"b6000-abc","object":"chat.completion.chunk","timings":{"prompt_n":10,"prompt_ms":12.5,"predicted_n":3,"predicted_per_second":40.1}}"#;
        assert_eq!(
            parse(chunk),
            vec![
                Delta::Text(" world".into()),
                Delta::ToolCall {
                    index: 0,
                    id: Some("t1".into()),
                    name: Some("f".into()),
                    arguments: "{".into()
                }
            ]
        );
    }

    #[test]
    fn only_the_choice_of_index_0_counts() {
        assert_eq!(
            parse(
                r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}"#
            ),
            vec![Delta::Text("mine".into())]
        );
        assert_eq!(
            parse(
                r#"{"choices":[{"index":1,"delta":{"content":"other"},"finish_reason":"stop"}]}"#
            ),
            vec![]
        );
        // No index: a single-choice stream's one choice.
        assert_eq!(
            parse(r#"{"choices":[{"delta":{"content":"a"}}]}"#),
            vec![Delta::Text("a".into())]
        );
    }

    #[test]
    fn escaped_unicode_is_decoded() {
        assert_eq!(
            parse(
                r#"{"choices":[{"index":0,"delta":{"content":"caf\u00e9 \ud834\udd1e \"q\"\n"}}]}"#
            ),
            vec![Delta::Text("café 𝄞 \"q\"\n".into())]
        );
        let mut out = Vec::new();
        assert!(
            parse_chunk(
                r#"{"choices":[{"index":0,"delta":{"content":"\ud834"}}]}"#,
                &mut out
            )
            .is_err(),
            "a lone surrogate is not text"
        );
    }

    #[test]
    fn tool_call_pieces_come_with_their_index_and_what_they_carry() {
        assert_eq!(
            parse(
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"pa"}},{"index":2,"id":"c2","type":"function","function":{"name":"run","arguments":""}}]}}]}"#
            ),
            vec![
                Delta::ToolCall {
                    index: 1,
                    id: None,
                    name: None,
                    arguments: "\"pa".into()
                },
                Delta::ToolCall {
                    index: 2,
                    id: Some("c2".into()),
                    name: Some("run".into()),
                    arguments: String::new()
                },
            ]
        );
        let mut out = Vec::new();
        assert!(parse_chunk(
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":"x"}]}}]}"#,
            &mut out
        )
        .is_err());
    }

    #[test]
    fn assistant_calls_and_tool_results_are_written_as_openai_reads_them() {
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![
                Message {
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "read".into(),
                        arguments: r#"{"path":"a"}"#.into(),
                    }],
                    ..Message::new(Role::Assistant, vec![])
                },
                Message::tool_result("c1", "1| x".into()),
            ],
            effort: None,
            tools: Some(json!([{"type": "function", "function": {"name": "read"}}])),
        };
        let b = body(&req);
        assert_eq!(
            b["messages"],
            json!([
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]},
                {"role": "tool", "content": "1| x", "tool_call_id": "c1"},
            ])
        );
        assert_eq!(b["tools"][0]["function"]["name"], "read");
    }
}
