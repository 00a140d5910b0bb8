//! Commands on the Pair over the fake OS: a `/plan` action is a turn answered at once, so the
//! same turn id sent again gets the same answer and changes nothing more; a `/name` the files
//! do not hold is plain text once looked up; and a session under the limits never reads a
//! project's command file outside the roots.

use lembas_core::testing::FakeRepo;
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

fn notices(p: &Pair) -> Vec<String> {
    p.frames_to_client()
        .into_iter()
        .filter(|f| f["method"] == "_lembas/event" && f["params"]["event"]["type"] == "notice")
        .map(|f| {
            f["params"]["event"]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// A `/review` prompt's answer: its `_meta.lembas.message`, if it had nothing to review.
fn review_message(p: &Pair, turn: &str) -> Option<String> {
    let got = p.answers(turn);
    let answer = got.last().unwrap().as_ref().unwrap();
    answer["_meta"]["lembas"]["message"]
        .as_str()
        .map(str::to_string)
}

const APP: &str = "/home/dev/work/app";

#[test]
fn a_review_with_nothing_to_review_says_so_and_sends_nothing_to_the_model() {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    let mut repo = FakeRepo::default();
    repo.branches.insert("main".into(), false);
    p.os.repos.insert(ROOT.into(), repo);
    p.start().unwrap();
    let s = p.new_session(APP);
    prompt(&mut p, &s, "/review", "t1");
    prompt(&mut p, &s, "/review", "t1");
    prompt(&mut p, &s, "/review main", "t2");
    prompt(&mut p, &s, "/review gone", "t3");
    let said = review_message(&p, "t1").expect("nothing to review");
    assert!(said.contains("no changes since the last commit"), "{said}");
    let got = p.answers("t1");
    assert_eq!(got[0], got[1], "the same turn id gets the same answer");
    assert_eq!(
        got[0].as_ref().unwrap()["_meta"]["lembas"]["command"],
        "review"
    );
    let said = review_message(&p, "t2").expect("nothing against main");
    assert!(said.contains("against `main`"), "{said}");
    let said = review_message(&p, "t3").expect("no such branch");
    assert!(said.contains("`gone` names no branch"), "{said}");
    assert!(p.started.is_empty(), "{:?}", p.started);
    // Looked at once a turn, in the session's project and nowhere else.
    assert_eq!(
        p.os.change_checks,
        [
            (APP.to_string(), None),
            (APP.to_string(), Some("main".to_string())),
            (APP.to_string(), Some("gone".to_string())),
        ]
    );
}

#[test]
fn a_review_with_changes_runs_and_one_git_cannot_check_runs_with_a_notice() {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    let mut repo = FakeRepo {
        uncommitted: true,
        ..FakeRepo::default()
    };
    repo.branches.insert("main".into(), true);
    p.os.repos.insert(ROOT.into(), repo);
    p.start().unwrap();
    let s = p.new_session(APP);
    prompt(&mut p, &s, "/review", "t1");
    prompt(&mut p, &s, "/review main", "t2");
    // Not one name git is handed: sent as typed, nothing looked at.
    prompt(&mut p, &s, "/review --output=/tmp/x", "t3");
    p.os.git_fails = Some("git could not be run: not found".into());
    prompt(&mut p, &s, "/review", "t4");
    for t in ["t1", "t2", "t3", "t4"] {
        assert_eq!(p.starts(t), 1, "{t}");
        assert_eq!(review_message(&p, t), None, "{t}");
    }
    let texts: Vec<&str> = p.started.iter().map(|t| t.text.as_str()).collect();
    assert!(texts[0].contains("not committed yet"), "{texts:?}");
    assert!(texts[1].contains("git diff main...HEAD"), "{texts:?}");
    assert_eq!(p.os.change_checks.len(), 2, "{:?}", p.os.change_checks);
    let said = notices(&p);
    assert!(
        said.iter()
            .any(|n| n.contains("could not look for changes") && n.contains("not found")),
        "{said:?}"
    );
}

#[test]
fn a_review_outside_any_repository_has_nothing_to_review() {
    let mut p = Pair::default_with(&[ROOT], |_| {});
    p.start().unwrap();
    let s = p.new_session(APP);
    prompt(&mut p, &s, "/review", "t1");
    let said = review_message(&p, "t1").expect("no repository");
    assert!(said.contains("is not in a git repository"), "{said}");
    assert_eq!(p.starts("t1"), 0);
}
