//! `@path` mentions on the Pair over the fake OS: a file attached line-numbered, a range, a
//! listing, an image, the escapes; nothing read outside the session's project and roots, nor
//! protected, nor from a resource's text; every bound that cuts something named in a notice,
//! and a mention not attached said in one too.

use lembas_core::confine::Protected;
use lembas_core::device::Effect;
use lembas_core::engine::{Attachment, LISTING_MIME};
use lembas_core::testing::Pair;
use serde_json::json;

const ROOT: &str = "/home/dev/work";
const PROJECT: &str = "/home/dev/work/app";

/// A device over `ROOT` with a session in `PROJECT`, whose disk holds a few files.
fn disk(tweak: impl FnOnce(&mut lembas_core::config::DeviceConfig)) -> (Pair, String) {
    let mut p = Pair::default_with(&[ROOT], tweak);
    let files: [(&str, &[u8]); 8] = [
        ("app/src/a.rs", b"one\ntwo\nthree\nfour\n"),
        ("app/my notes.md", b"notes"),
        ("app/a#b.md", b"hash"),
        ("app/img.png", b"\x89PNG\r\n\x1a\n\0\0"),
        ("app/blob.bin", b"\0\x01\x02"),
        ("app/.git/config", b"[core]"),
        ("other/secret.txt", b"other project"),
        ("app/docs/guide.md", b"guide"),
    ];
    for (path, bytes) in files {
        p.os.files.insert(format!("{ROOT}/{path}"), bytes.to_vec());
    }
    p.os.files.insert("/etc/passwd".into(), b"root".to_vec());
    p.os.links
        .insert(format!("{PROJECT}/out"), Some("/etc/passwd".into()));
    p.os.links
        .insert(format!("{PROJECT}/sibling"), Some(format!("{ROOT}/other")));
    p.os.links.insert(format!("{PROJECT}/gone"), None);
    p.os.protected = vec![Protected::Name(".git".into())];
    p.start().unwrap();
    let session = p.new_session(PROJECT);
    (p, session)
}

/// Prompt `text` as turn `turn` and settle: the turn's attachments, with their bytes.
fn prompt(p: &mut Pair, session: &str, turn: &str, text: &str) -> Vec<(Attachment, Vec<u8>)> {
    p.prompt_text(session, turn, text);
    p.settle().unwrap();
    assert_eq!(p.starts(turn), 1, "the turn ran");
    let start = p.started.iter().find(|s| s.turn_id == turn).unwrap();
    assert_eq!(start.text, text, "the text stays as typed");
    start
        .attachments
        .iter()
        .map(|a| (a.clone(), p.os.attachment_bytes[&a.file_name].clone()))
        .collect()
}

fn notices(p: &Pair) -> Vec<String> {
    p.frames_to_client()
        .iter()
        .filter(|f| f["method"] == "_lembas/event" && f["params"]["event"]["type"] == "notice")
        .map(|f| f["params"]["event"]["text"].as_str().unwrap().to_string())
        .collect()
}

fn named<'a>(attached: &'a [(Attachment, Vec<u8>)], name: &str) -> &'a (Attachment, Vec<u8>) {
    attached
        .iter()
        .find(|(a, _)| a.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not attached: {attached:?}"))
}

#[test]
fn a_file_is_attached_as_text_and_a_range_from_its_first_line() {
    let (mut p, s) = disk(|_| {});
    let attached = prompt(&mut p, &s, "t1", "look at @src/a.rs and @src/a.rs#2-3.");
    assert_eq!(attached.len(), 2, "{attached:?}");
    let (whole, bytes) = named(&attached, "src/a.rs");
    assert!(whole.text && whole.first_line.is_none());
    assert_eq!(bytes, b"one\ntwo\nthree\nfour\n");
    let (range, bytes) = named(&attached, "src/a.rs#2-3");
    assert_eq!(range.first_line, Some(2));
    assert_eq!(bytes, b"two\nthree\n");
    assert!(notices(&p).is_empty(), "{:?}", notices(&p));
    // The prompt event names what was attached.
    let prompt_event = p
        .frames_to_client()
        .into_iter()
        .find(|f| f["params"]["event"]["type"] == "prompt")
        .unwrap();
    assert_eq!(
        prompt_event["params"]["event"]["attachments"][1]["name"],
        "src/a.rs#2-3"
    );
}

#[test]
fn escapes_name_a_space_and_a_hash() {
    let (mut p, s) = disk(|_| {});
    let attached = prompt(&mut p, &s, "t1", r"@my\ notes.md @a\#b.md");
    assert_eq!(named(&attached, "my notes.md").1, b"notes");
    assert_eq!(named(&attached, "a#b.md").1, b"hash");
}

#[test]
fn a_directory_is_listed_and_an_image_attached_for_vision() {
    let (mut p, s) = disk(|_| {});
    let attached = prompt(&mut p, &s, "t1", "@docs/ @./ and @img.png");
    let (listing, bytes) = named(&attached, "docs/");
    assert_eq!(listing.mime_type, LISTING_MIME);
    assert_eq!(bytes, b"guide.md");
    let (_, root) = named(&attached, "./");
    let root = String::from_utf8(root.clone()).unwrap();
    assert!(root.contains("src/") && root.contains("img.png"), "{root}");
    assert!(
        !root.contains(".git"),
        "a protected entry is not named: {root}"
    );
    let (image, bytes) = named(&attached, "img.png");
    assert_eq!((image.mime_type.as_str(), image.text), ("image/png", false));
    assert_eq!(bytes.len(), 10);
}

#[test]
fn nothing_outside_the_project_or_protected_is_read_and_each_is_said() {
    let (mut p, s) = disk(|_| {});
    let text = "@../other/secret.txt @/etc/passwd @out @sibling/secret.txt @.git/config \
                @gone @missing.rs @blob.bin";
    let attached = prompt(&mut p, &s, "t1", text);
    assert!(attached.is_empty(), "{attached:?}");
    // Only the binary file inside the project was read (and not attached).
    assert_eq!(p.os.mention_reads, [format!("{PROJECT}/blob.bin")]);
    let said = notices(&p);
    assert_eq!(said.len(), 8, "{said:?}");
    for (n, word) in text.split_whitespace().enumerate() {
        assert!(
            said[n].starts_with(&format!("{word} stayed text, not attached")),
            "{said:?}"
        );
    }
    assert!(said[4].contains("tools.protected"), "{said:?}");
    assert!(
        !said.iter().any(|n| n.contains("root")),
        "no content shown: {said:?}"
    );
}

#[test]
fn a_resource_block_and_an_email_are_not_mentions() {
    let (mut p, s) = disk(|_| {});
    p.client
        .prompt(
            &s,
            json!([
                { "type": "resource", "resource": { "uri": "file:///x.md", "text": "@src/a.rs" } },
                { "type": "text", "text": "mail dev@src/a.rs" },
            ]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    assert_eq!(p.starts("t1"), 1);
    let reads = p
        .device_effects
        .iter()
        .filter(|e| matches!(e, Effect::ReadMentions { .. }))
        .count();
    assert_eq!(reads, 0, "nothing was asked of the shell");
    assert!(p.os.mention_reads.is_empty());
}

#[test]
fn every_limit_that_cuts_is_named() {
    let (mut p, s) = disk(|d| {
        d.mentions.max_file_bytes = 6;
        d.mentions.max_listing_entries = 1;
        d.mentions.max_per_prompt = 3;
    });
    p.os.files
        .insert(format!("{PROJECT}/docs/z.md"), b"z".to_vec());
    let attached = prompt(&mut p, &s, "t1", "@src/a.rs @docs/ @img.png @my\\ notes.md");
    assert_eq!(named(&attached, "src/a.rs").1, b"one\ntw");
    assert!(String::from_utf8_lossy(&named(&attached, "docs/").1)
        .contains("1 more entries not shown: mentions.max_listing_entries is 1"));
    let said = notices(&p);
    let has = |words: &[&str]| said.iter().any(|n| words.iter().all(|w| n.contains(w)));
    assert!(
        has(&["@my\\ notes.md", "mentions.max_per_prompt is 3"]),
        "{said:?}"
    );
    assert!(
        has(&[
            "@src/a.rs",
            "first 6 of 19 bytes",
            "mentions.max_file_bytes"
        ]),
        "{said:?}"
    );
    assert!(
        has(&["@docs/", "first 1 of its 2", "max_listing_entries"]),
        "{said:?}"
    );
    assert!(
        has(&["@img.png", "not attached", "mentions.max_file_bytes (6)"]),
        "{said:?}"
    );
    assert!(attached.iter().all(|(a, _)| a.name != "img.png"));
}

#[test]
fn a_range_past_the_end_is_said_and_one_before_it_stays_text() {
    let (mut p, s) = disk(|_| {});
    let attached = prompt(&mut p, &s, "t1", "@src/a.rs#3-9 @src/a.rs#7-9 @src/a.rs#0");
    assert_eq!(attached.len(), 1, "{attached:?}");
    assert_eq!(named(&attached, "src/a.rs#3-9").1, b"three\nfour\n");
    let said = notices(&p);
    assert!(
        said.iter().any(|n| n.contains("has 4 lines: lines 3-4")),
        "{said:?}"
    );
    assert!(
        said.iter().any(|n| n.contains("@src/a.rs#7-9 stayed text")),
        "{said:?}"
    );
    assert!(
        said.iter().any(|n| n.contains("@src/a.rs#0 stayed text")),
        "{said:?}"
    );
}

#[test]
fn with_remote_work_off_nothing_is_read() {
    let (mut p, s) = disk(|_| {});
    // Remote work turned off after the session was made: its prompt reads nothing.
    let mut remote = p.device.config().remote.clone();
    remote.enabled = false;
    let now = p.now;
    let _ = p.device.reconfigure(remote, now);
    p.settle().unwrap();
    p.prompt_text(&s, "t1", "@src/a.rs");
    p.settle().unwrap();
    assert!(p.os.mention_reads.is_empty());
    let reads = p
        .device_effects
        .iter()
        .filter(|e| matches!(e, Effect::ReadMentions { .. }))
        .count();
    assert_eq!(reads, 0);
}
