//! `/undo` across a restart: the revert is stored before the shell is asked to put the files
//! back, so a device restarted before the shell answered asks it again and the `/undo` ends
//! with its real answer, never `cancelled` with the messages reverted and the files not.

use lembas_core::client::ClientEvent;
use lembas_core::device::FilesUndone;
use lembas_core::testing::Pair;
use serde_json::{json, Value};

fn pair() -> (Pair, String) {
    let mut p = Pair::default_with(&["/home/dev/work"], |_| {});
    p.start().unwrap();
    let s = p.new_session("/home/dev/work/app");
    (p, s)
}

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

/// Every answer the client was given for `turn`'s prompts.
fn answers(p: &Pair, turn: &str) -> Vec<Value> {
    p.client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::PromptAnswered {
                turn_id, outcome, ..
            } if turn_id == turn => Some(outcome.clone().expect("answered with a result")),
            _ => None,
        })
        .collect()
}

/// The turns the shell was asked to undo, in order.
fn asked(p: &Pair) -> Vec<&str> {
    p.os.undone.iter().map(|(_, t)| t.as_str()).collect()
}

fn history_texts(p: &mut Pair, session: &str) -> Vec<String> {
    let h = p
        .call("_lembas/session/history", json!({ "sessionId": session }))
        .unwrap();
    h["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_restart_before_the_shell_answers_carries_the_undo_out() {
    let (mut p, s) = pair();
    let restored = FilesUndone {
        restored: vec!["a.txt".into()],
        kept: Vec::new(),
    };
    p.os.undo_files.insert("t1".into(), Ok(restored));
    prompt(&mut p, &s, "say one", "t1");
    // The shell is still putting the files back when the process dies.
    p.os.hold_undos = true;
    prompt(&mut p, &s, "/undo", "t2");
    assert_eq!(asked(&p), ["t1"]);
    assert!(answers(&p, "t2").is_empty());

    p.os.hold_undos = false;
    p.restart_device().unwrap();
    p.settle().unwrap();
    // Asked again, and the client's reattach (it resends the prompt) gets the real answer.
    assert_eq!(asked(&p), ["t1", "t1"]);
    let expected = json!({ "prompt": "say one", "files": ["a.txt"] });
    let got = answers(&p, "t2");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["stopReason"], "end_turn", "{got:?}");
    assert_eq!(got[0]["_meta"]["lembas"]["undone"], expected, "{got:?}");
    assert_eq!(history_texts(&mut p, &s), Vec::<String>::new());

    // The same turn id sent again gets it too, and nothing is undone twice.
    prompt(&mut p, &s, "/undo", "t2");
    let got = answers(&p, "t2");
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1], got[0]);
    // The answer is stored with the end of the undo: a later restart asks the shell nothing.
    p.restart_device().unwrap();
    p.settle().unwrap();
    assert_eq!(asked(&p), ["t1", "t1"]);
    prompt(&mut p, &s, "/undo", "t2");
    assert_eq!(answers(&p, "t2").last(), Some(&got[0]));
}

#[test]
fn the_undo_goes_on_after_the_restart_before_the_turns_behind_it() {
    let (mut p, s) = pair();
    prompt(&mut p, &s, "say one", "t1");
    prompt(&mut p, &s, "say two", "t2");
    p.os.hold_undos = true;
    prompt(&mut p, &s, "/undo", "t3");
    p.os.hold_undos = false;
    p.restart_device().unwrap();
    p.settle().unwrap();
    assert_eq!(asked(&p), ["t2", "t2"]);
    let got = answers(&p, "t3");
    assert_eq!(
        got.last().unwrap()["_meta"]["lembas"]["undone"],
        json!({ "prompt": "say two", "files": [] })
    );
    // The next turn runs after it, given only what the undo left.
    prompt(&mut p, &s, "/undo", "t4");
    assert_eq!(asked(&p), ["t2", "t2", "t1"]);
    assert_eq!(history_texts(&mut p, &s), Vec::<String>::new());
}

fn last_turn_id(p: &mut Pair, session: &str) -> Option<String> {
    let st = p
        .call("_lembas/session/status", json!({ "sessionId": session }))
        .unwrap();
    st.get("lastTurnId")
        .map(|t| t.as_str().unwrap().to_string())
}

/// `lastTurnId` is what a reattaching client imports from the history: never a turn the
/// history no longer has (reverted by `/undo` or rewind) nor an action it never had.
#[test]
fn status_never_names_a_reverted_turn_or_an_action_as_the_last() {
    let (mut p, s) = pair();
    prompt(&mut p, &s, "say one", "t1");
    prompt(&mut p, &s, "say two", "t2");
    assert_eq!(last_turn_id(&mut p, &s).as_deref(), Some("t2"));
    prompt(&mut p, &s, "/undo", "t3");
    assert_eq!(last_turn_id(&mut p, &s).as_deref(), Some("t1"));
    prompt(&mut p, &s, "say three", "t4");
    assert_eq!(last_turn_id(&mut p, &s).as_deref(), Some("t4"));
    p.call(
        "_lembas/session/rewind",
        json!({ "sessionId": s, "turnId": "t4" }),
    )
    .unwrap();
    assert_eq!(last_turn_id(&mut p, &s).as_deref(), Some("t1"));
    // The store says the same to a restarted device.
    p.restart_device().unwrap();
    p.settle().unwrap();
    assert_eq!(last_turn_id(&mut p, &s).as_deref(), Some("t1"));
    p.call(
        "_lembas/session/rewind",
        json!({ "sessionId": s, "turnId": "t1" }),
    )
    .unwrap();
    assert_eq!(last_turn_id(&mut p, &s), None);
}
