//! The model engine against a fake instance played by the test: every HTTP request it asks
//! for, every body read, and what it reports back, at virtual times.

mod common;

use common::model::*;
use lembas_core::config::Model;
use lembas_core::engine::{Attachment, Engine, EngineCommand, EngineEvent, PriorTurn, StopReason};
use lembas_core::engine_io::{IoCall, IoId, IoReply};
use lembas_core::model::engine::{ModelEngine, ModelEngineConfig};
use lembas_core::Time;

#[test]
fn a_turn_streams_text_and_reasoning_and_ends_with_usage() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let asked = calls(&mut e);
    let (id, request) = fetched(&asked);
    assert_eq!(request["model"], "lembas/small");
    assert_eq!(request["stream"], true);
    assert_eq!(request["reasoning_effort"], "low");
    assert_eq!(
        request["messages"].as_array().unwrap().last().unwrap()["content"],
        "hello"
    );
    assert_eq!(events(&mut e), vec![EngineEvent::Step(1)]);
    head(&mut e, id, 200, None, 5);
    let body = sse(&[thought("hm"), text("Hel"), text("lo ☃"), finish("stop")]);
    // Any split, down to one byte, gives the same events.
    let seen = stream(&mut e, id, &body, 3, 6);
    assert_eq!(
        seen,
        vec![
            EngineEvent::Thought("hm".into()),
            EngineEvent::Text("Hel".into()),
            EngineEvent::Text("lo ☃".into()),
            EngineEvent::Usage {
                input_tokens: 11,
                output_tokens: 5
            },
            EngineEvent::Done(StopReason::EndTurn),
        ]
    );
    assert_eq!(e.running(), 0);
    // The body ended: the shell has let the request go, nothing is left to abort.
    assert_eq!(calls(&mut e), vec![]);
}

#[test]
fn a_finish_of_length_is_max_tokens() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    let seen = stream(&mut e, id, &sse(&[text("a"), finish("length")]), 1000, 2);
    assert_eq!(seen.last(), Some(&EngineEvent::Done(StopReason::MaxTokens)));
}

#[test]
fn a_model_it_does_not_serve_fails_the_turn_and_asks_nothing() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("other/model")), 0);
    assert!(calls(&mut e).is_empty());
    let seen = events(&mut e);
    assert!(
        matches!(&seen[..], [EngineEvent::Failed(m)] if m.contains("`other/model` is not served")),
        "{seen:?}"
    );
    start(&mut e, turn("t2", None), 0);
    let seen = events(&mut e);
    assert!(
        matches!(&seen[..], [EngineEvent::Failed(m)] if m.contains("lembas login")),
        "{seen:?}"
    );
    assert_eq!(e.running(), 0);
}

#[test]
fn a_429_waits_its_retry_after_then_the_step_is_asked_again() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 429, Some("2"), 10);
    // The error body is read for the instance's words.
    assert!(read_of(&calls(&mut e), id));
    body(&mut e, id, r#"{"error":{"message":"slow down"}}"#, 11);
    assert!(read_of(&calls(&mut e), id));
    e.handle_io(id, IoReply::End, Time(12));
    assert!(calls(&mut e).contains(&IoCall::Abort { id }));
    assert_eq!(e.poll_timeout(), Some(Time(2_012)));
    e.handle_timeout(Time(2_011));
    assert!(calls(&mut e).is_empty(), "not before its Retry-After");
    e.handle_timeout(Time(2_012));
    let (again, _) = fetched(&calls(&mut e));
    assert_ne!(again, id);
    head(&mut e, again, 200, None, 2_100);
    let seen = stream(
        &mut e,
        again,
        &sse(&[text("ok"), finish("stop")]),
        64,
        2_101,
    );
    assert_eq!(seen.last(), Some(&EngineEvent::Done(StopReason::EndTurn)));
    // One step, asked twice: no second step event.
    assert_eq!(events(&mut e), vec![]);
}

#[test]
fn rate_limits_past_the_bound_fail_the_turn_naming_it() {
    let mut config = ModelEngineConfig::default();
    config.max_rate_limited = 1;
    let mut e = ModelEngine::new(config, models());
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let mut now = 0;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (id, _) = fetched(&calls(&mut e));
        head(&mut e, id, 429, Some("1"), now);
        e.handle_io(id, IoReply::End, Time(now));
        now += 1_000;
        e.handle_timeout(Time(now));
        seen.extend(events(&mut e));
    }
    let last = seen.last().unwrap();
    assert!(
        matches!(last, EngineEvent::Failed(m) if m.contains("HTTP 429") && m.contains("engine.max_rate_limited")),
        "{seen:?}"
    );
    // A Retry-After longer than the bound fails at once, saying so.
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 429, Some("3600"), 0);
    e.handle_io(id, IoReply::End, Time(0));
    let seen = events(&mut e);
    assert!(
        matches!(seen.last(), Some(EngineEvent::Failed(m)) if m.contains("engine.max_retry_after_ms")),
        "{seen:?}"
    );
}

#[test]
fn a_refused_token_fails_the_turn_and_says_to_log_in_again() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 401, None, 1);
    body(&mut e, id, r#"{"detail":"token revoked"}"#, 2);
    e.handle_io(id, IoReply::End, Time(3));
    let seen = events(&mut e);
    assert!(
        matches!(seen.last(), Some(EngineEvent::Failed(m))
            if m.contains("HTTP 401: token revoked") && m.contains("log in again")),
        "{seen:?}"
    );
    assert_eq!(e.running(), 0);
    assert_eq!(e.poll_timeout(), None, "no retry of a refused token");
}

#[test]
fn a_5xx_or_a_reset_before_the_first_byte_is_retried_with_backoff_then_fails_with_its_words() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    e.handle_io(
        id,
        IoReply::Failed {
            reason: "connection reset".into(),
        },
        Time(0),
    );
    // 500 ms, then 1,000, then 2,000: each retry waits twice as long.
    let mut now = 0;
    let mut waits = Vec::new();
    for attempt in 0..3 {
        let at = e.poll_timeout().expect("a retry is due");
        waits.push(at.0 - now);
        now = at.0;
        e.handle_timeout(at);
        let (id, _) = fetched(&calls(&mut e));
        head(&mut e, id, 503, None, now);
        body(&mut e, id, &format!("overloaded {attempt}"), now);
        e.handle_io(id, IoReply::End, Time(now));
    }
    assert_eq!(waits, vec![500, 1_000, 2_000]);
    let seen = events(&mut e);
    assert!(
        matches!(seen.last(), Some(EngineEvent::Failed(m))
            if m.contains("HTTP 503: overloaded 2") && m.contains("gave up after 4 tries, engine.max_retries")),
        "{seen:?}"
    );
}

#[test]
fn cancel_aborts_the_stream_at_once_and_what_comes_after_is_moot() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    let mut seen = events(&mut e);
    assert!(read_of(&calls(&mut e), id));
    body(
        &mut e,
        id,
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        2,
    );
    e.handle_command(
        EngineCommand::Cancel {
            session_id: SESSION.into(),
            turn_id: "t1".into(),
        },
        Time(3),
    );
    assert_eq!(calls(&mut e), vec![IoCall::Abort { id }]);
    body(
        &mut e,
        id,
        "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n",
        4,
    );
    e.handle_io(id, IoReply::End, Time(5));
    seen.extend(events(&mut e));
    assert_eq!(
        seen,
        vec![
            EngineEvent::Step(1),
            EngineEvent::Text("a".into()),
            EngineEvent::Done(StopReason::Cancelled)
        ]
    );
    assert_eq!(e.running(), 0);
}

#[test]
fn a_paused_session_reads_no_more_of_its_stream_until_its_events_are_taken() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    assert_eq!(events(&mut e), vec![EngineEvent::Step(1)]);
    assert!(read_of(&calls(&mut e), id));
    body(&mut e, id, &sse(&[text("a"), text("b")]), 2);
    // Its reader is behind: nothing is taken, and nothing more is read.
    assert!(e.poll_event_unless(&mut |_| true).is_none());
    assert!(calls(&mut e).is_empty(), "read on while paused");
    assert_eq!(
        e.poll_timeout(),
        None,
        "no idle timer while the engine holds the stream"
    );
    // It reads again: the events go, then the next read is asked.
    assert_eq!(events(&mut e).len(), 2);
    assert!(read_of(&calls(&mut e), id));
}

#[test]
fn one_session_behind_holds_only_its_own_stream() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let mut other = turn("t1", Some("lembas/small"));
    other.session_id = "ses_2".into();
    start(&mut e, other, 0);
    let fetches: Vec<IoId> = calls(&mut e)
        .iter()
        .filter(|c| matches!(c, IoCall::Fetch { .. }))
        .map(IoCall::id)
        .collect();
    let [a, b] = fetches[..] else {
        panic!("two fetches, not {fetches:?}");
    };
    for id in [a, b] {
        head(&mut e, id, 200, None, 1);
    }
    let steps = std::iter::from_fn(|| e.poll_event_unless(&mut |_| false)).count();
    assert_eq!(steps, 2);
    let asked = calls(&mut e);
    assert!(read_of(&asked, a) && read_of(&asked, b), "{asked:?}");
    body(&mut e, a, &sse(&[text("a1"), text("a2")]), 2);
    body(&mut e, b, &sse(&[text("b1"), text("b2")]), 2);
    // ses_1's reader is behind: its events stay, ses_2's go, and only ses_2 reads on.
    let behind = |s: &str| s == SESSION;
    let taken: Vec<String> =
        std::iter::from_fn(|| e.poll_event_unless(&mut |s| behind(s)).map(|(s, _, _)| s)).collect();
    assert_eq!(taken, vec!["ses_2"; 2]);
    let asked = calls(&mut e);
    assert!(read_of(&asked, b) && !read_of(&asked, a), "{asked:?}");
    // Once ses_1's are taken, it reads on too.
    assert_eq!(events(&mut e).len(), 2);
    assert!(read_of(&calls(&mut e), a));
}

#[test]
fn a_steered_message_joins_at_the_next_step() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    e.handle_command(
        EngineCommand::Steer {
            session_id: SESSION.into(),
            turn_id: "t1".into(),
            id: 7,
            text: "and in French".into(),
        },
        Time(2),
    );
    let seen = stream(&mut e, id, &sse(&[text("Hello"), finish("stop")]), 1000, 3);
    assert_eq!(
        &seen[seen.len() - 2..],
        &[EngineEvent::Steered { ids: vec![7] }, EngineEvent::Step(2)]
    );
    let (id2, request) = fetched(&calls(&mut e));
    let messages = request["messages"].as_array().unwrap();
    let tail: Vec<(&str, &str)> = messages[messages.len() - 3..]
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tail,
        vec![
            ("user", "hello"),
            ("assistant", "Hello"),
            ("user", "and in French")
        ]
    );
    head(&mut e, id2, 200, None, 4);
    let seen = stream(
        &mut e,
        id2,
        &sse(&[text("Bonjour"), finish("stop")]),
        1000,
        5,
    );
    assert_eq!(seen.last(), Some(&EngineEvent::Done(StopReason::EndTurn)));
}

#[test]
fn a_silent_instance_is_given_up_after_the_idle_timeout_naming_it() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1_000);
    let _step = events(&mut e);
    assert!(read_of(&calls(&mut e), id));
    let idle = ModelEngineConfig::default().idle_timeout_ms;
    assert_eq!(e.poll_timeout(), Some(Time(1_000 + idle)));
    e.handle_timeout(Time(1_000 + idle));
    assert!(calls(&mut e).contains(&IoCall::Abort { id }));
    let seen = events(&mut e);
    assert!(
        matches!(seen.last(), Some(EngineEvent::Failed(m)) if m.contains("engine.idle_timeout_ms")),
        "{seen:?}"
    );
}

#[test]
fn a_stream_that_breaks_or_stops_short_fails_the_turn() {
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    let _ = calls(&mut e);
    body(&mut e, id, &format!("data: {}\n\n", text("a")), 2);
    let _ = calls(&mut e);
    e.handle_io(
        id,
        IoReply::Failed {
            reason: "connection reset by peer".into(),
        },
        Time(3),
    );
    let seen = events(&mut e);
    assert!(
        matches!(seen.last(), Some(EngineEvent::Failed(m)) if m.contains("stream broke: connection reset")),
        "{seen:?}"
    );
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    let seen = stream(&mut e, id, &format!("data: {}\n\n", text("a")), 1000, 2);
    assert!(
        matches!(seen.last(), Some(EngineEvent::Failed(m)) if m.contains("before the model finished")),
        "{seen:?}"
    );
    // A chunk that is not JSON.
    let mut e = engine();
    start(&mut e, turn("t1", Some("lembas/small")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    let _ = calls(&mut e);
    body(&mut e, id, "data: {oops\n\n", 2);
    let seen = events(&mut e);
    assert!(
        matches!(seen.last(), Some(EngineEvent::Failed(m)) if m.contains("not one")),
        "{seen:?}"
    );
    assert!(calls(&mut e).contains(&IoCall::Abort { id }));
}

#[test]
fn attachments_are_read_first_in_any_order_and_an_image_goes_to_a_vision_model() {
    let mut e = engine();
    let mut t = turn("t1", Some("lembas/vision"));
    t.attachments = vec![
        Attachment {
            file_name: "1-a-notes.txt".into(),
            name: "notes.txt".into(),
            mime_type: "text/plain".into(),
            size: 3,
            text: true,
            first_line: None,
        },
        Attachment {
            file_name: "1-b-a.png".into(),
            name: "a.png".into(),
            mime_type: "image/png".into(),
            size: 4,
            text: false,
            first_line: None,
        },
    ];
    t.history = vec![PriorTurn {
        prompt: "before".into(),
        answer: "then".into(),
    }];
    start(&mut e, t, 0);
    let reads: Vec<(IoId, String)> = calls(&mut e)
        .into_iter()
        .map(|c| match c {
            IoCall::ReadAttachment {
                id,
                session_id,
                file_name,
                ..
            } => {
                assert_eq!(session_id, SESSION);
                (id, file_name)
            }
            other => panic!("asked {other:?} before the attachments were read"),
        })
        .collect();
    assert_eq!(reads.len(), 2);
    // The second comes back first.
    e.handle_io(
        reads[1].0,
        IoReply::File {
            bytes: b"png!".to_vec(),
            size: 4,
        },
        Time(1),
    );
    assert!(
        calls(&mut e).is_empty(),
        "the model is not asked before every read is back"
    );
    e.handle_io(
        reads[0].0,
        IoReply::File {
            bytes: b"abc".to_vec(),
            size: 3,
        },
        Time(2),
    );
    let (_, request) = fetched(&calls(&mut e));
    let messages = request["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "user"]);
    let parts = messages[3]["content"].as_array().unwrap();
    assert_eq!(parts[0]["text"], "hello\n\nnotes.txt:\n   1| abc");
    assert_eq!(
        parts[1]["image_url"]["url"],
        "data:image/png;base64,cG5nIQ=="
    );
}

#[test]
fn the_answer_kept_for_the_next_step_is_bounded_by_the_models_context() {
    let tiny = Model {
        context_length: Some(8),
        ..Model::served("lembas/tiny")
    };
    let mut e = ModelEngine::new(ModelEngineConfig::default(), vec![tiny]);
    start(&mut e, turn("t1", Some("lembas/tiny")), 0);
    let (id, _) = fetched(&calls(&mut e));
    head(&mut e, id, 200, None, 1);
    e.handle_command(
        EngineCommand::Steer {
            session_id: SESSION.into(),
            turn_id: "t1".into(),
            id: 1,
            text: "more".into(),
        },
        Time(2),
    );
    let long = "é".repeat(100);
    let seen = stream(&mut e, id, &sse(&[text(&long), finish("stop")]), 1000, 3);
    // The stream itself is never cut.
    assert!(seen.contains(&EngineEvent::Text(long.clone())));
    let (_, request) = fetched(&calls(&mut e));
    let messages = request["messages"].as_array().unwrap();
    let kept = messages[messages.len() - 2]["content"].as_str().unwrap();
    // 8 tokens: 32 bytes, cut at a character.
    assert_eq!(kept, "é".repeat(16));
}
