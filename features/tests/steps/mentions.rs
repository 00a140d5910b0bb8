//! `@path` mentions over the fake OS: a project's files, the prompt, what the turn was given
//! (its attachments and their bytes), what was read, and the notices said.

use cucumber::{given, then, when};
use lembas_core::confine::Protected;
use lembas_core::engine::Attachment;

use super::handshake::DEFAULT_ROOT;
use super::turns::script;
use crate::LinkWorld;

/// The session's project, where "a client with a session on the device" opens it.
fn project() -> String {
    format!("{DEFAULT_ROOT}/app")
}

/// A step's text with `\n` written for a line break.
fn unescape(text: &str) -> String {
    text.replace("\\n", "\n")
}

#[given(regex = r#"^the project holds "([^"]+)" with the lines "([^"]*)"$"#)]
fn project_holds(w: &mut LinkWorld, path: String, lines: String) {
    let content: String = lines.split(", ").map(|l| format!("{l}\n")).collect();
    let at = format!("{}/{path}", project());
    w.pair().os.files.insert(at, content.into_bytes());
}

#[given(regex = r#"^the device's disk holds "([^"]+)" and "([^"]+)" and "([^"]+)"$"#)]
fn disk_holds(w: &mut LinkWorld, a: String, b: String, c: String) {
    for path in [a, b, c] {
        w.pair().os.files.insert(path, b"secret\n".to_vec());
    }
}

#[given(regex = r#"^the device protects "([^"]+)"$"#)]
fn protects(w: &mut LinkWorld, name: String) {
    let entry = Protected::parse(&name).expect("a protected entry");
    w.pair().os.protected.push(entry);
}

#[given(regex = r"^the device reads at most (\d+) bytes of a mentioned file$")]
fn max_file_bytes(w: &mut LinkWorld, max: u64) {
    w.config_mut().mentions.max_file_bytes = max;
}

#[given(regex = r"^the device lists at most (\d+) entry of a mentioned directory$")]
fn max_listing(w: &mut LinkWorld, max: usize) {
    w.config_mut().mentions.max_listing_entries = max;
}

#[given(regex = r"^the device attaches at most (\d+) mention a prompt$")]
fn max_per_prompt(w: &mut LinkWorld, max: usize) {
    w.config_mut().mentions.max_per_prompt = max;
}

/// Turn `turn`'s attachments as the engine was given them, with the bytes written for each.
fn attachments(w: &LinkWorld, turn: &str) -> Vec<(Attachment, Vec<u8>)> {
    let pair = w.built();
    let start = pair
        .started
        .iter()
        .rev()
        .find(|s| s.turn_id == turn)
        .unwrap_or_else(|| panic!("turn {turn} did not start"));
    start
        .attachments
        .iter()
        .map(|a| (a.clone(), pair.os.attachment_bytes[&a.file_name].clone()))
        .collect()
}

fn attachment(w: &LinkWorld, turn: &str, name: &str) -> (Attachment, Vec<u8>) {
    let all = attachments(w, turn);
    all.iter()
        .find(|(a, _)| a.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("turn {turn} has no attachment `{name}`: {all:?}"))
}

#[then(regex = r#"^turn "([^"]+)" has the attachment "([^"]+)" holding "(.*)"$"#)]
fn has_attachment(w: &mut LinkWorld, turn: String, name: String, text: String) {
    let (a, bytes) = attachment(w, &turn, &name);
    assert!(a.text, "{a:?}");
    assert_eq!(String::from_utf8_lossy(&bytes), unescape(&text));
}

#[then(regex = r#"^turn "([^"]+)" has the attachment "([^"]+)" holding "(.*)" from line (\d+)$"#)]
fn has_range(w: &mut LinkWorld, turn: String, name: String, text: String, first: u64) {
    let (a, bytes) = attachment(w, &turn, &name);
    assert_eq!(a.first_line, Some(first), "{a:?}");
    assert_eq!(String::from_utf8_lossy(&bytes), unescape(&text));
}

#[then(regex = r#"^turn "([^"]+)" has the image attachment "([^"]+)" of type "([^"]+)"$"#)]
fn has_image(w: &mut LinkWorld, turn: String, name: String, mime: String) {
    let (a, _) = attachment(w, &turn, &name);
    assert_eq!(
        (a.mime_type.as_str(), a.text),
        (mime.as_str(), false),
        "{a:?}"
    );
}

#[then(regex = r#"^turn "([^"]+)" has no attachment$"#)]
fn no_attachment(w: &mut LinkWorld, turn: String) {
    let all = attachments(w, &turn);
    assert!(all.is_empty(), "{all:?}");
}

#[then(regex = r#"^turn "([^"]+)" has (\d+) attachments?$"#)]
fn n_attachments(w: &mut LinkWorld, turn: String, n: usize) {
    assert_eq!(attachments(w, &turn).len(), n);
}

/// The web prompts the session a terminal (or an editor) opened and shares (announced to it).
#[when(
    regex = r#"^the client prompts "(.*)" in the (?:terminal|editor)'s session as turn "([^"]+)"$"#
)]
fn prompts_shared(w: &mut LinkWorld, text: String, turn: String) {
    let session = w
        .local_session
        .clone()
        .expect("a step before must have the terminal open a session of its own");
    let pair = w.pair();
    pair.client
        .prompt(
            &session,
            serde_json::json!([{ "type": "text", "text": script(&text) }]),
            Some(&turn),
            pair.now,
        )
        .expect("the client may prompt");
    pair.drive().expect("the link settles");
}

#[then(regex = r#"^nothing outside "([^"]+)" was read for a mention$"#)]
fn read_only_inside(w: &mut LinkWorld, dir: String) {
    let read = &w.built().os.mention_reads;
    assert!(!read.is_empty(), "nothing was read at all");
    assert!(
        read.iter().all(|r| lembas_core::paths::inside(r, &dir)),
        "read outside `{dir}`: {read:?}"
    );
}

#[then("nothing was read for a mention")]
fn nothing_read(w: &mut LinkWorld) {
    let read = &w.built().os.mention_reads;
    assert!(read.is_empty(), "read: {read:?}");
}

fn notices(w: &LinkWorld) -> Vec<String> {
    w.built()
        .frames_to_client()
        .iter()
        .filter(|f| f["method"] == "_lembas/event" && f["params"]["event"]["type"] == "notice")
        .map(|f| {
            f["params"]["event"]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[then(regex = r#"^a notice said "(.*)"$"#)]
fn notice_said(w: &mut LinkWorld, words: String) {
    let said = notices(w);
    assert!(
        said.iter().any(|n| n.contains(&words)),
        "no notice says `{words}`: {said:?}"
    );
}

#[then("no notice was said")]
fn no_notice(w: &mut LinkWorld) {
    let said = notices(w);
    assert!(said.is_empty(), "{said:?}");
}
