//! Commands on the Pair over the fake OS: a `/plan` action is a turn answered at once, so the
//! same turn id sent again gets the same answer and changes nothing more; a `/name` the files
//! do not hold is plain text once looked up; and a session under the limits never reads a
//! project's command file outside the roots.

use lembas_core::testing::Pair;
use serde_json::json;

const ROOT: &str = "/home/dev/work";

fn prompt(p: &mut Pair, session: &str, text: &str, turn: &str) {
    p.client
        .prompt(
            session,
            json!([{ "type": "text", "text": text }]),
            Some(turn),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
}

#[test]
fn a_plan_action_sent_twice_is_answered_once_and_alike() {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    p.start().unwrap();
    let s = p.new_session("/home/dev/work/app");
    prompt(&mut p, &s, "/plan", "t1");
    prompt(&mut p, &s, "/plan", "t1");
    let got = p.answers("t1");
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], got[1]);
    let answer = got[0].as_ref().unwrap();
    assert_eq!(answer["_meta"]["lembas"]["mode"], "plan", "{answer}");
    assert_eq!(p.starts("t1"), 0);
    // One mode change, not two.
    let modes = p
        .frames_to_client()
        .into_iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .count();
    assert_eq!(modes, 1);
}

#[test]
fn a_name_no_file_holds_is_sent_as_typed_and_nothing_outside_is_read() {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    p.os.files.insert(
        format!("{ROOT}/app/.agent/commands/fix.md"),
        b"say fixed".to_vec(),
    );
    p.os.files
        .insert("/etc/evil.md".into(), b"say leaked".to_vec());
    p.os.links.insert(
        format!("{ROOT}/app/.agent/commands/evil.md"),
        Some("/etc/evil.md".into()),
    );
    p.os.files.insert(
        format!("{ROOT}/app/.agent/commands/evil.md"),
        b"placeholder".to_vec(),
    );
    p.start().unwrap();
    let s = p.new_session("/home/dev/work/app");
    prompt(&mut p, &s, "/evil now", "t1");
    prompt(&mut p, &s, "/fix", "t2");
    let given: Vec<(&str, &str)> = p
        .started
        .iter()
        .map(|t| (t.turn_id.as_str(), t.text.as_str()))
        .collect();
    assert_eq!(given, [("t1", "/evil now"), ("t2", "say fixed")]);
    assert!(
        p.os.mention_reads.iter().all(|r| r.starts_with(ROOT)),
        "{:?}",
        p.os.mention_reads
    );
}
