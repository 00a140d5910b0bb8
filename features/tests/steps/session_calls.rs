//! A session's own calls and events in their exact shapes: `_lembas/session/title`,
//! `session/set_mode`, `_lembas/session/history`, the `steered` event's message ids, and a
//! prompt's attachments (written under the session, listed on the `prompt` event).

use cucumber::gherkin::Step;
use cucumber::{then, when};
use lembas_core::testing::Dir;
use serde_json::{json, Value};

use super::sessions::{answer, call};
use super::turns::session;
use super::{json_arg, method_of, parse};
use crate::LinkWorld;

/// A JSON expectation of a step, with `<session>` standing for the session's id.
fn expected(w: &LinkWorld, text: &str) -> Value {
    json_arg(&text.replace("<session>", &session(w)))
}

#[when(regex = r#"^the client sets the session's title to "(.*)"$"#)]
fn sets_title(w: &mut LinkWorld, title: String) {
    let s = session(w);
    call(
        w,
        "_lembas/session/title",
        json!({ "sessionId": s, "title": title }),
    );
}

#[when(regex = r"^the client sets the session's title to one of (\d+) characters$")]
fn sets_long_title(w: &mut LinkWorld, chars: usize) {
    sets_title(w, "é".repeat(chars));
}

#[when(regex = r#"^the client sets the session's mode to "(.*)"$"#)]
fn sets_mode(w: &mut LinkWorld, mode: String) {
    let s = session(w);
    call(
        w,
        "session/set_mode",
        json!({ "sessionId": s, "modeId": mode }),
    );
}

#[when("the client asks the session's history")]
fn asks_history(w: &mut LinkWorld) {
    let s = session(w);
    call(w, "_lembas/session/history", json!({ "sessionId": s }));
}

#[when(regex = r#"^the client steers the session with the message "([^"]+)": "(.*)"$"#)]
fn steers_with_id(w: &mut LinkWorld, message_id: String, text: String) {
    let s = session(w);
    call(
        w,
        "_lembas/steer",
        json!({ "sessionId": s, "text": text, "messageId": message_id }),
    );
    let queued = answer(w).unwrap_or_else(|e| panic!("the steer was refused: {}", e.message));
    assert!(queued["queued"].is_u64(), "{queued}");
}

#[when(regex = r#"^the client prompts as turn "([^"]+)" with the blocks (.+)$"#)]
fn prompts_blocks(w: &mut LinkWorld, turn: String, blocks: String) {
    let s = session(w);
    let blocks = json_arg(&blocks);
    let pair = w.pair();
    pair.client
        .prompt(&s, blocks, Some(&turn), pair.now)
        .expect("the client may prompt");
    pair.settle().expect("the link settles");
}

#[then(regex = r"^the call is answered with exactly (.+)$")]
fn answered_exactly(w: &mut LinkWorld, json: String) {
    let want = expected(w, &json);
    match answer(w) {
        Ok(got) => assert_eq!(got, want),
        Err(e) => panic!("the call failed: {} {}", e.code, e.message),
    }
}

/// The params of every `method` notification the device sent on the link for the session.
fn notifications(w: &LinkWorld, method: &str) -> Vec<Value> {
    let s = session(w);
    w.link_frames(Dir::ToClient)
        .into_iter()
        .map(|(_, f)| parse(&f))
        .filter(|f| method_of(f) == Some(method) && f["params"]["sessionId"] == json!(s))
        .map(|f| f["params"].clone())
        .collect()
}

#[then(regex = r"^the link carried the event (\{.+\})$")]
fn carried_event(w: &mut LinkWorld, json: String) {
    let want = expected(w, &json);
    let events: Vec<Value> = notifications(w, "_lembas/event")
        .into_iter()
        .map(|p| p["event"].clone())
        .filter(|e| e["type"] == want["type"])
        .collect();
    assert!(
        events.contains(&want),
        "no `_lembas/event` is exactly {want}; of its type there were {events:?}"
    );
}

#[then(regex = r#"^the link carried no "([^"]+)" event$"#)]
fn carried_no_event(w: &mut LinkWorld, kind: String) {
    let events: Vec<Value> = notifications(w, "_lembas/event")
        .into_iter()
        .map(|p| p["event"].clone())
        .filter(|e| e["type"] == json!(kind))
        .collect();
    assert!(events.is_empty(), "the link carried {events:?}");
}

#[then(regex = r"^the link carried the update (\{.+\})$")]
fn carried_update(w: &mut LinkWorld, json: String) {
    let want = expected(w, &json);
    let updates: Vec<Value> = notifications(w, "session/update")
        .into_iter()
        .map(|p| p["update"].clone())
        .filter(|u| u["sessionUpdate"] == want["sessionUpdate"])
        .collect();
    assert!(
        updates.contains(&want),
        "no `session/update` is exactly {want}; of its kind there were {updates:?}"
    );
}

/// `<time>-<random>-<name>`: milliseconds, 8 of `[0-9a-z]`, then the name the client gave.
fn name_of_its_own(file_name: &str) -> Option<&str> {
    let mut parts = file_name.splitn(3, '-');
    let (time, random, name) = (parts.next()?, parts.next()?, parts.next()?);
    let time_ok = !time.is_empty() && time.bytes().all(|b| b.is_ascii_digit());
    let random_ok = random.len() == 8
        && random
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
    (time_ok && random_ok).then_some(name)
}

#[then(
    regex = r#"^the device wrote these attachments of the session, each under a name of its own "<time>-<random>-<name>":$"#
)]
fn wrote_attachments(w: &mut LinkWorld, step: &Step) {
    let table = step.table.as_ref().expect("the step has a table");
    let want: Vec<(String, usize)> = table
        .rows
        .iter()
        .skip(1)
        .map(|r| (r[0].clone(), r[1].parse().expect("bytes is a number")))
        .collect();
    let s = session(w);
    let written = &w.built().os.attachments;
    assert!(
        written.iter().all(|(session, _, _)| *session == s),
        "an attachment went elsewhere: {written:?}"
    );
    let got: Vec<(String, usize)> = written
        .iter()
        .map(|(_, file, size)| {
            let name = name_of_its_own(file)
                .unwrap_or_else(|| panic!("`{file}` is not <time>-<random>-<name>"));
            (name.to_string(), *size)
        })
        .collect();
    assert_eq!(got, want, "written: {written:?}");
    let mut files: Vec<&str> = written.iter().map(|(_, f, _)| f.as_str()).collect();
    files.sort_unstable();
    files.dedup();
    assert_eq!(
        files.len(),
        written.len(),
        "two uploads share a file: {written:?}"
    );
}
