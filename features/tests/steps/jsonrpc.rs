//! Raw frames on the link, and what the device answers them with (on the link or on stdio:
//! "the answer" is whatever the device wrote back to the last frame a step sent).

use cucumber::{then, when};
use lembas_core::testing::Dir;
use serde_json::Value;

use super::{json_arg, method_of, must_at, parse};
use crate::LinkWorld;

/// Inject `frame` on the link as the client; its answers are the frames the device sent back.
fn send_on_link(w: &mut LinkWorld, frame: &[u8]) {
    let pair = w.pair();
    assert!(
        pair.link().is_some(),
        "no link: the handshake must come first"
    );
    let before = pair.transcript.len();
    pair.inject(frame).expect("the link settles");
    w.answers = pair.transcript[before..]
        .iter()
        .filter(|t| t.dir == Dir::ToClient)
        .map(|t| t.frame.clone())
        .collect();
}

#[when(regex = r"^the client sends on the link: (.+)$")]
fn sends_raw(w: &mut LinkWorld, frame: String) {
    send_on_link(w, frame.as_bytes());
}

#[when("the client sends on the link a frame that is not valid UTF-8")]
fn sends_bad_utf8(w: &mut LinkWorld) {
    send_on_link(
        w,
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/n\xff\xfeew\"}",
    );
}

/// A well-formed request for an unknown method, padded to exactly `size` bytes.
#[when(regex = r"^the client sends on the link a frame of (\d+) bytes with id (\d+)$")]
fn sends_sized(w: &mut LinkWorld, size: usize, id: u64) {
    let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x/padded","params":{{"pad":""#);
    let tail = r#""}}"#;
    let pad = size
        .checked_sub(head.len() + tail.len())
        .expect("the frame is too small to pad");
    let frame = format!("{head}{}{tail}", "x".repeat(pad));
    assert_eq!(frame.len(), size);
    send_on_link(w, frame.as_bytes());
}

/// A request whose params nest `depth` arrays deep (the envelope adds one more level).
#[when(regex = r"^the client sends on the link a request nested (\d+) levels deep$")]
fn sends_deep(w: &mut LinkWorld, depth: usize) {
    let params = format!("{}{}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    let frame = format!(r#"{{"jsonrpc":"2.0","id":4,"method":"x/deep","params":{params}}}"#);
    send_on_link(w, frame.as_bytes());
}

#[when(regex = r#"^the client sends on the link a request for "([^"]*)" with id (.+)$"#)]
fn sends_with_id(w: &mut LinkWorld, method: String, id: String) {
    let frame = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{}}}}"#);
    send_on_link(w, frame.as_bytes());
}

/// The one response among what the device wrote back (a notification may follow it: a new
/// session's `available_commands_update`).
fn the_answer(w: &LinkWorld) -> (Value, String) {
    let responses: Vec<&String> = w
        .answers
        .iter()
        .filter(|a| parse(a).get("method").is_none())
        .collect();
    assert_eq!(
        responses.len(),
        1,
        "expected exactly one answer, got {:?}",
        w.answers
    );
    (parse(responses[0]), responses[0].clone())
}

#[then(regex = r"^the device answers with error (-?\d+) and id (.+)$")]
fn answers_error(w: &mut LinkWorld, code: i64, id: String) {
    let (answer, raw) = the_answer(w);
    assert_eq!(answer.get("jsonrpc"), Some(&Value::from("2.0")), "{raw}");
    assert_eq!(
        answer.get("id"),
        Some(&json_arg(&id)),
        "the answer's id: {raw}"
    );
    assert!(answer.get("result").is_none(), "{raw}");
    assert_eq!(must_at(&answer, "error.code"), &Value::from(code), "{raw}");
    assert!(
        must_at(&answer, "error.message").is_string(),
        "the error has no message: {raw}"
    );
}

#[then(regex = r"^the device answers with a result for id (.+)$")]
fn answers_result(w: &mut LinkWorld, id: String) {
    let (answer, raw) = the_answer(w);
    assert_eq!(answer.get("id"), Some(&json_arg(&id)), "{raw}");
    assert!(answer.get("error").is_none(), "{raw}");
    assert!(answer.get("result").is_some(), "{raw}");
}

#[then(regex = r#"^the error message says "(.*)"$"#)]
fn error_says(w: &mut LinkWorld, words: String) {
    let (answer, raw) = the_answer(w);
    let message = must_at(&answer, "error.message").as_str().unwrap_or("");
    assert!(
        message.contains(&words),
        "the message does not say `{words}`: {raw}"
    );
}

#[then(regex = r"^the answer's id is exactly (.+)$")]
fn id_exactly(w: &mut LinkWorld, id: String) {
    let (answer, raw) = the_answer(w);
    assert_eq!(answer.get("id"), Some(&json_arg(&id)), "{raw}");
    // Byte for byte, too: an integer id must not come back as a float or re-spelled.
    assert!(
        raw.contains(&format!(r#""id":{id}"#)),
        "the id is not echoed verbatim: {raw}"
    );
}

#[then("the device does not answer")]
fn no_answer(w: &mut LinkWorld) {
    assert!(w.answers.is_empty(), "the device answered: {:?}", w.answers);
}

#[then("the device is still linked and answers requests")]
fn still_linked(w: &mut LinkWorld) {
    sends_with_id(w, "x/still-there".into(), "99".into());
    let (answer, raw) = the_answer(w);
    assert_eq!(answer.get("id"), Some(&Value::from(99)), "{raw}");
    assert!(method_of(&answer).is_none(), "{raw}");
}
