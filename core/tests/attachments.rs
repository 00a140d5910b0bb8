//! A prompt's attachments on the Pair: the turn starts only once they are written, and a write
//! the OS refuses refuses the prompt with its reason.

use lembas_core::jsonrpc::code;
use lembas_core::store::Table;
use lembas_core::testing::Pair;
use lembas_core::wire::event::lembas::LembasEvent;
use serde_json::json;

fn linked() -> Pair {
    let mut p = Pair::default_with_roots(&["/home/dev/work"]);
    p.start().unwrap();
    p
}

fn prompt_with_image(p: &mut Pair, session: &str, turn: &str) {
    let blocks = json!([
        { "type": "text", "text": "what is this?" },
        { "type": "image", "mimeType": "image/png", "data": "aGk=", "uri": "file:///tmp/shot.png" },
    ]);
    p.client.prompt(session, blocks, Some(turn), p.now).unwrap();
    p.settle().unwrap();
}

fn prompt_events(p: &Pair) -> usize {
    p.client_events
        .iter()
        .filter(
            |e| matches!(e.lembas_event(), Some(e) if matches!(e.event, LembasEvent::Prompt(_))),
        )
        .count()
}

#[test]
fn a_failed_attachment_write_refuses_the_prompt_with_the_reason_and_starts_nothing() {
    let mut p = linked();
    let s = p.new_session("/home/dev/work/app");
    p.os.attachment_write_fails = Some("No space left on device (os error 28)".into());
    prompt_with_image(&mut p, &s, "t1");

    let a = p.answers("t1");
    assert_eq!(a.len(), 1, "{a:?}");
    let e = a[0].as_ref().unwrap_err();
    assert_eq!(e.code, code::INTERNAL_ERROR);
    assert!(
        e.message.contains("No space left on device"),
        "{}",
        e.message
    );
    assert!(e.message.contains("`shot.png`"), "{}", e.message);
    assert_eq!(p.starts("t1"), 0, "the turn started without its attachment");
    assert_eq!(prompt_events(&p), 0, "a refused prompt was announced");
    let status = p
        .call("_lembas/session/status", json!({ "sessionId": s }))
        .unwrap();
    assert_eq!(status["busy"], false, "{status}");
    assert_eq!(status["queued"], json!([]), "{status}");
    assert_eq!(
        p.call("_lembas/session/history", json!({ "sessionId": s }))
            .unwrap()["turns"],
        json!([])
    );
}

#[test]
fn a_prompt_refused_for_its_attachment_is_forgotten_and_runs_when_sent_again() {
    let mut p = linked();
    let s = p.new_session("/home/dev/work/app");
    p.os.attachment_write_fails = Some("No space left on device".into());
    prompt_with_image(&mut p, &s, "t1");
    assert!(p.answers("t1")[0].is_err());
    // The turn never ran, so its id is kept neither in memory nor in the store: the same
    // prompt sent again (the client's retry) is tried afresh.
    let kept: Vec<_> =
        p.os.store
            .session_entries(&s)
            .into_iter()
            .filter(|e| e.table == Table::Turns)
            .collect();
    assert!(
        kept.is_empty(),
        "the refused turn is still stored: {kept:?}"
    );

    p.os.attachment_write_fails = None;
    prompt_with_image(&mut p, &s, "t1");
    let a = p.answers("t1");
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(a[1].as_ref().unwrap()["stopReason"], "end_turn", "{a:?}");
    assert_eq!(p.starts("t1"), 1);
    assert_eq!(p.os.attachments.len(), 1);
    assert!(
        p.os.attachments[0].1.ends_with("-shot.png"),
        "{:?}",
        p.os.attachments
    );
}

#[test]
fn a_written_attachment_reaches_its_turn() {
    let mut p = linked();
    let s = p.new_session("/home/dev/work/app");
    prompt_with_image(&mut p, &s, "t1");
    assert_eq!(p.starts("t1"), 1);
    assert_eq!(
        p.answers("t1")[0].as_ref().unwrap()["stopReason"],
        "end_turn"
    );
    let started = &p.started[0];
    assert_eq!(started.attachments.len(), 1);
    assert_eq!(p.os.attachments[0].1, started.attachments[0].file_name);
    assert_eq!(prompt_events(&p), 1);
}
