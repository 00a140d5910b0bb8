//! End-to-end over real loopback sockets: the built `lembas` binary links to an in-process test
//! instance (the core's client role behind a real WebSocket listener).

use std::time::{Duration, Instant};

use lembas::instance::{Event, InstanceOptions, TestInstance};
use lembas_core::client::{ClientEvent, Reattach};
use serde_json::{json, Value};

mod common;

use common::{assert_no_token, linked, new_session, ready, Home, T, TOKEN};

fn text(t: &str) -> Value {
    json!([{ "type": "text", "text": t }])
}

/// Text chunks in `session/update` notifications among `events`.
fn chunks(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Client(e) => e.update()?.update.message_text().map(str::to_string),
            _ => None,
        })
        .collect()
}

#[test]
fn hello_initialize_and_a_streamed_prompt() {
    smol::block_on(async {
        let instance = common::instance().await;
        let home = Home::new();
        let out = home.login(&instance.url());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let login = std::fs::metadata(home.path().join("config/lembas/token")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(login.permissions().mode() & 0o777, 0o600);
        let _device = home.link();
        let (hello, _) = instance
            .wait_for(T, |e| matches!(e, Event::Client(ClientEvent::Hello(_))))
            .await;
        match hello {
            Some(Event::Client(ClientEvent::Hello(h))) => {
                assert_eq!(h.protocol, 3);
            }
            other => panic!("no hello: {other:?}"),
        }
        let caps = ready(&instance).await;
        assert!(caps.iter().any(|c| c == "turns"), "{caps:?}");
        let session = new_session(&instance, &home.work.join("proj")).await;
        let turn = instance
            .prompt(&session, text("say hello\nsleep 20\nsay world"), None)
            .await
            .unwrap();
        let seen = ended(&instance, &turn).await;
        assert_eq!(chunks(&seen), vec!["hello", "world"]);
    });
}

#[test]
fn login_is_refused_by_a_protocol_1_and_2_server_with_the_spec_sentence() {
    smol::block_on(async {
        let instance = TestInstance::start(InstanceOptions::old()).await.unwrap();
        let home = Home::new();
        let out = home.login(&instance.url());
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(
                "127.0.0.1 runs LLeMbas 1.9.0, which speaks link protocol 1 and 2; this LLeMbas \
                 CLI needs a LLeMbas 2.0 server (protocol 3) — update the server, or use LLeMbas \
                 CLI 1.x with it"
            ),
            "{err}"
        );
        assert!(!home.path().join("config/lembas/token").exists());
    });
}

#[test]
fn a_link_cut_mid_turn_is_redialled_and_the_answer_arrives_exactly_once() {
    smol::block_on(async {
        let (instance, home, device, _) = linked(Home::new()).await;
        let session = new_session(&instance, &home.work.join("proj")).await;
        instance
            .prompt(
                &session,
                text("say before\nsleep 1500\nsay after"),
                Some("msg_cut"),
            )
            .await
            .unwrap();
        let mut all = Vec::new();
        let (first, seen) = instance
            .wait_for(T, |e| !chunks(std::slice::from_ref(e)).is_empty())
            .await;
        all.extend(seen);
        all.push(first.expect("the turn streams"));
        instance.cut().await;
        // The device notices, redials with backoff, and the client reattaches.
        let (re, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::Reattached { .. }))
            })
            .await;
        all.extend(seen);
        assert!(re.is_some(), "no reattach");
        all.extend(ended(&instance, "msg_cut").await);
        // Nothing more: the answer came once, and the turn ran once.
        let (more, rest) = instance
            .wait_for(Duration::from_millis(1500), |e| {
                matches!(e, Event::Client(ClientEvent::PromptAnswered { .. }))
            })
            .await;
        assert!(more.is_none(), "a second answer: {more:?}");
        all.extend(rest);
        let said = chunks(&all);
        assert_eq!(
            said.iter().filter(|c| *c == "before").count(),
            1,
            "{said:?}"
        );
        assert!(said.len() <= 2, "{said:?}");
        let log = device.stderr();
        assert_eq!(log.matches("linked to the instance").count(), 2, "{log}");
        assert_eq!(
            log.matches("turn msg_cut of").count(),
            1,
            "ran twice: {log}"
        );
    });
}

/// The link dropped while a turn streams, the device redialling after its backoff (half a
/// second or more of chunks made while down): the client fetches what it missed
/// (`_lembas/session/events`) before following live, so its transcript is whole, no chunk
/// missing or twice.
#[test]
fn a_link_cut_mid_stream_loses_no_chunk_the_client_fetches_what_it_missed() {
    smol::block_on(async {
        let (instance, home, _device, caps) = linked(Home::new()).await;
        assert!(caps.iter().any(|c| c == "events"), "{caps:?}");
        let session = new_session(&instance, &home.work.join("proj")).await;
        let words: Vec<String> = (0..80).map(|i| format!("w{i:02}")).collect();
        let script: Vec<String> = words.iter().map(|w| format!("say {w}\nsleep 50")).collect();
        instance
            .prompt(&session, text(&script.join("\n")), Some("msg_stream"))
            .await
            .unwrap();
        let (first, mut all) = instance
            .wait_for(T, |e| !chunks(std::slice::from_ref(e)).is_empty())
            .await;
        all.push(first.expect("the turn streams"));
        instance.cut().await;
        let cut = Instant::now();
        let (ready, seen) = instance
            .wait_for(T, |e| matches!(e, Event::Client(ClientEvent::Ready { .. })))
            .await;
        assert!(ready.is_some(), "no new link");
        let down = cut.elapsed();
        all.extend(seen);
        all.extend(ended(&instance, "msg_stream").await);
        assert_eq!(chunks(&all), words, "down for {down:?}");
        assert!(down >= Duration::from_millis(200), "down for {down:?} only");
    });
}

/// Issue 16's proof: the link is killed mid-stream and the instance refuses the device's dials
/// for 2 s while the turn streams on (some 100 chunks made while down); once it links again
/// the client fetches what it missed, and its transcript is whole: no chunk missing or twice.
#[test]
fn two_seconds_of_chunks_made_while_the_link_is_down_all_reach_the_client_once() {
    smol::block_on(async {
        let (instance, home, _device, _) = linked(Home::new()).await;
        let session = new_session(&instance, &home.work.join("proj")).await;
        // 8 s of stream at about 50 chunks a second.
        let words: Vec<String> = (0..400).map(|i| format!("w{i:03}")).collect();
        let script: Vec<String> = words.iter().map(|w| format!("say {w}\nsleep 20")).collect();
        instance
            .prompt(&session, text(&script.join("\n")), Some("msg_down"))
            .await
            .unwrap();
        let (first, mut all) = instance
            .wait_for(T, |e| !chunks(std::slice::from_ref(e)).is_empty())
            .await;
        all.push(first.expect("the turn streams"));
        instance.refuse_links(true);
        instance.cut().await;
        let cut = Instant::now();
        let before = chunks(&all).len();
        smol::Timer::after(Duration::from_secs(2)).await;
        instance.refuse_links(false);
        let (ready, seen) = instance
            .wait_for(T, |e| matches!(e, Event::Client(ClientEvent::Ready { .. })))
            .await;
        assert!(ready.is_some(), "no new link");
        let down = cut.elapsed();
        all.extend(seen);
        // Answered when the turn still ran on the new link, or imported from history when it
        // ended before (the redial's backoff on a loaded machine): either way after every
        // chunk it said.
        let (end, seen) = instance
            .wait_for(T, |e| {
                matches!(
                    e,
                    Event::Client(
                        ClientEvent::PromptAnswered { .. }
                            | ClientEvent::Reattached {
                                how: Reattach::Imported(_),
                                ..
                            }
                    )
                )
            })
            .await;
        all.extend(seen);
        assert!(end.is_some(), "the turn's end never came");
        assert_eq!(chunks(&all), words, "down for {down:?}");
        assert!(down >= Duration::from_secs(2), "down for {down:?} only");
        assert!(before < 50, "{before} chunks came before the cut");
    });
}

#[test]
fn close_4400_stops_the_device_without_redialling() {
    smol::block_on(async {
        let (instance, _home, mut device, _) = linked(Home::new()).await;
        instance.close(4400, "update LLeMbas CLI to 2.0").await;
        let code = device.wait(T);
        assert_eq!(code, Some(1), "{}", device.stderr());
        assert!(
            device.stderr().contains("needs updating"),
            "{}",
            device.stderr()
        );
        let (up, _) = instance
            .wait_for(Duration::from_millis(1500), |e| matches!(e, Event::LinkUp))
            .await;
        assert!(up.is_none(), "the device dialled again");
    });
}

#[test]
fn a_refused_token_stops_redial_and_says_to_log_in_again() {
    smol::block_on(async {
        let instance = TestInstance::start(InstanceOptions {
            token: "another-token".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let home = Home::new();
        // `lembas login` checks the token (the model list) and would refuse to save this one:
        // the token was good at login and is refused since.
        let out = home.login(&instance.url());
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("refused the device token"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        home.save_login(&instance.url());
        let mut device = home.link();
        let (refused, _) = instance
            .wait_for(T, |e| matches!(e, Event::Refused(401)))
            .await;
        assert!(refused.is_some());
        let code = device.wait(T);
        assert_eq!(code, Some(1), "{}", device.stderr());
        assert!(
            device.stderr().contains("run `lembas login` again"),
            "{}",
            device.stderr()
        );
        let (again, _) = instance
            .wait_for(Duration::from_millis(1500), |e| {
                matches!(e, Event::Refused(_))
            })
            .await;
        assert!(again.is_none(), "the device dialled again");
    });
}

#[test]
fn a_delete_made_while_unlinked_is_delivered_after_the_next_link() {
    smol::block_on(async {
        let (instance, home, device, _) = linked(Home::new()).await;
        let session = new_session(&instance, &home.work.join("proj")).await;
        let keep = new_session(&instance, &home.work).await;
        // (While `lembas link` runs, `sessions` goes through its hub: tests/hub.rs.) Killed,
        // it leaves its hub socket behind, which is taken for no service.
        drop(device);
        let (down, _) = instance.wait_for(T, |e| matches!(e, Event::LinkDown)).await;
        assert!(down.is_some());

        let (ok, out, err) = home.run(&["sessions", "list"]);
        assert!(ok, "{err}");
        assert!(out.starts_with("ID"), "{out}");
        assert!(out.contains(&session) && out.contains(&keep), "{out}");
        assert!(
            out.contains(home.work.join("proj").to_str().unwrap()),
            "{out}"
        );
        assert!(out.contains("UTC (just now)"), "{out}");
        let (ok, _, err) = home.run(&["sessions", "delete", "ses_nope"]);
        assert!(!ok && err.contains("no session `ses_nope`"), "{err}");
        let (ok, out, err) = home.run(&["sessions", "delete", &session]);
        assert!(ok, "{err}");
        assert!(out.contains(&format!("deleted {session}")), "{out}");
        let (_, out, _) = home.run(&["sessions", "list"]);
        assert!(!out.contains(&session) && out.contains(&keep), "{out}");
        // Nothing is untouched for a day yet.
        let (ok, out, _) = home.run(&["sessions", "prune", "--older-than", "1"]);
        assert!(ok && out.starts_with("deleted 0 sessions"), "{out}");

        let _device = home.link();
        let (deleted, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::Notification { method, .. })
                    if method == "_lembas/session/deleted")
            })
            .await;
        match deleted {
            Some(Event::Client(ClientEvent::Notification { params, .. })) => {
                assert_eq!(params["sessionId"], session.as_str());
            }
            other => panic!("no deleted: {other:?} after {seen:?}"),
        }
        assert!(
            seen.iter()
                .any(|e| matches!(e, Event::Client(ClientEvent::Ready { .. }))),
            "delivered before initialize: {seen:?}"
        );
        // Once: a later link does not hear it again.
        let (again, _) = instance
            .wait_for(Duration::from_millis(800), |e| {
                matches!(e, Event::Client(ClientEvent::Notification { method, .. })
                    if method == "_lembas/session/deleted")
            })
            .await;
        assert!(again.is_none(), "{again:?}");
    });
}

/// A `session/prompt` sent as a plain call (not kept by the client for reattach), and its
/// answer.
/// Wait for the answer to prompt `turn` and check it ended the turn; the events before it.
async fn ended(instance: &TestInstance, turn: &str) -> Vec<Event> {
    let (answer, seen) = instance
        .wait_for(T, |e| {
            matches!(e, Event::Client(ClientEvent::PromptAnswered { .. }))
        })
        .await;
    match answer {
        Some(Event::Client(ClientEvent::PromptAnswered {
            turn_id, outcome, ..
        })) => {
            assert_eq!(turn_id, turn);
            assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
        }
        other => panic!("no answer to {turn}: {other:?} after {seen:?}"),
    }
    seen
}

/// Prompt turn `turn` with a script that says "<turn> started" and then sleeps for a minute;
/// return once it has started.
async fn start_long_turn(instance: &TestInstance, session: &str, turn: &str) {
    let started = format!("{turn} started");
    let script = format!("say {started}\nsleep 60000\nsay {turn} never said");
    instance
        .prompt(session, text(&script), Some(turn))
        .await
        .unwrap();
    let (first, _) = instance
        .wait_for(T, |e| chunks(std::slice::from_ref(e)) == [started.as_str()])
        .await;
    assert!(first.is_some(), "turn {turn} did not start");
}

async fn prompt_once(
    instance: &TestInstance,
    session: &str,
    turn: &str,
    script: &str,
) -> (Result<Value, String>, Vec<Event>) {
    let params = json!({
        "sessionId": session,
        "prompt": text(script),
        "_meta": { "lembas": { "turnId": turn } },
    });
    let id = instance.call("session/prompt", params).await.unwrap();
    let (outcome, seen) = common::answer(instance, &id).await;
    (outcome.map_err(|e| e.message), seen)
}

#[test]
fn after_sigkill_a_running_turn_is_cancelled_never_rerun_and_a_finished_one_answered_from_the_store(
) {
    smol::block_on(async {
        let (instance, home, mut device, _) = linked(Home::new()).await;
        let session = new_session(&instance, &home.work.join("proj")).await;
        let (done, seen) = prompt_once(&instance, &session, "msg_done", "say finished once").await;
        assert_eq!(done.unwrap()["stopReason"], "end_turn");
        assert_eq!(chunks(&seen), vec!["finished once"]);
        start_long_turn(&instance, &session, "msg_long").await;

        let first_log = device.sigkill();
        assert_eq!(
            first_log.matches("turn msg_long of").count(),
            1,
            "{first_log}"
        );
        drop(device);

        let device = home.link();
        let (ready_again, mut all) = instance
            .wait_for(T, |e| matches!(e, Event::Client(ClientEvent::Ready { .. })))
            .await;
        assert!(ready_again.is_some(), "no second link");
        // The client picks msg_long up again; the device knows it finished (cut by the restart).
        let (re, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::Reattached { turn_id, .. }) if turn_id == "msg_long")
                    || matches!(e, Event::Client(ClientEvent::PromptAnswered { turn_id, .. }) if turn_id == "msg_long")
            })
            .await;
        all.extend(seen);
        assert!(re.is_some(), "msg_long was not picked up: {all:?}");
        all.push(re.unwrap());

        // Sent again, msg_long is answered `cancelled`, saying the device restarted; not run.
        let (long, seen) = prompt_once(&instance, &session, "msg_long", "say must not run").await;
        all.extend(seen);
        let long = long.unwrap();
        assert_eq!(long["stopReason"], "cancelled", "{long}");
        assert_eq!(
            long["_meta"]["lembas"]["message"],
            lembas_core::device::RESTARTED,
            "{long}"
        );
        // A duplicate of the turn that finished before the kill: its answer, from the store.
        let (dup, seen) = prompt_once(&instance, &session, "msg_done", "say must not run").await;
        all.extend(seen);
        assert_eq!(dup.unwrap()["stopReason"], "end_turn");
        let (_, rest) = instance
            .wait_for(Duration::from_millis(1000), |_| false)
            .await;
        all.extend(rest);
        let said = chunks(&all);
        assert!(
            !said
                .iter()
                .any(|c| c == "must not run" || c.starts_with("msg_long ")),
            "a turn ran again: {said:?}"
        );
        let log = device.stderr();
        assert!(
            !log.contains("turn msg_long of"),
            "msg_long ran again: {log}"
        );
        assert!(
            !log.contains("turn msg_done of"),
            "msg_done ran again: {log}"
        );
    });
}

#[test]
fn over_wss_with_an_rcgen_certificate_and_ca_file_login_link_and_a_prompt() {
    smol::block_on(async {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let tls = lembas::instance::tls_config(&cert.pem(), &key.serialize_pem()).unwrap();
        let instance = TestInstance::start(InstanceOptions {
            token: TOKEN.into(),
            tls: Some(tls),
            ..Default::default()
        })
        .await
        .unwrap();
        let url = instance.url();
        assert!(url.starts_with("https://127.0.0.1:"), "{url}");
        let home = Home::new();
        // Without the CA the certificate is not trusted.
        let out = home.login(&url);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.to_lowercase().contains("certificate"), "{err}");
        let ca = home.path().join("ca.pem");
        std::fs::write(&ca, cert.pem()).unwrap();
        let tf = home.path().join("token.txt");
        let out = home
            .cmd(&[
                "login",
                &url,
                "--token-file",
                tf.to_str().unwrap(),
                "--ca-file",
                ca.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_no_token(&out.stdout);
        assert_no_token(&out.stderr);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let device = home.link();
        let caps = ready(&instance).await;
        assert!(caps.iter().any(|c| c == "turns"), "{caps:?}");
        let session = new_session(&instance, &home.work.join("proj")).await;
        let turn = instance
            .prompt(
                &session,
                text("say over\nsleep 10\nsay tls"),
                Some("msg_tls"),
            )
            .await
            .unwrap();
        let seen = ended(&instance, &turn).await;
        assert_eq!(chunks(&seen), vec!["over", "tls"]);
        // The instance speaks only TLS: the link above was wss://, trusting the saved CA.
        let login = std::fs::read_to_string(home.path().join("config/lembas/login.json")).unwrap();
        assert!(
            login.contains("https://127.0.0.1:") && login.contains("ca.pem"),
            "{login}"
        );
        drop(device);
    });
}

/// `_lembas/session/status` of `session`, as the device answers it.
async fn status(instance: &TestInstance, session: &str) -> Value {
    let id = instance
        .call("_lembas/session/status", json!({ "sessionId": session }))
        .await
        .unwrap();
    let (e, seen) = instance
        .wait_for(
            T,
            |e| matches!(e, Event::Client(ClientEvent::Answer { id: i, .. }) if *i == id),
        )
        .await;
    match e {
        Some(Event::Client(ClientEvent::Answer { outcome: Ok(v), .. })) => v,
        other => panic!("no status: {other:?} after {seen:?}"),
    }
}

/// A turn queued behind a running one when the process is killed: it runs once in all, either
/// after the restart or through the client's resend (the core forgets queued turns at restore,
/// so it is the resend) — never twice, never not at all.
#[test]
fn after_sigkill_a_queued_turn_runs_exactly_once() {
    smol::block_on(async {
        let (instance, home, mut device, _) = linked(Home::new()).await;
        let session = new_session(&instance, &home.work.join("proj")).await;
        start_long_turn(&instance, &session, "msg_a").await;
        instance
            .prompt(&session, text("say b ran"), Some("msg_b"))
            .await
            .unwrap();
        // The status answer leaves after B's queued record is durable: B is in the store.
        let st = status(&instance, &session).await;
        assert_eq!(st["turnId"], "msg_a", "{st}");
        assert_eq!(st["queued"], json!(["msg_b"]), "{st}");

        let first_log = device.sigkill();
        assert_eq!(
            first_log.matches("turn msg_b of").count(),
            0,
            "B started before the kill: {first_log}"
        );
        drop(device);

        let device = home.link();
        let (answer, mut all) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::PromptAnswered { turn_id, .. }) if turn_id == "msg_b")
            })
            .await;
        match answer {
            Some(Event::Client(ClientEvent::PromptAnswered { outcome, .. })) => {
                assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
            }
            other => panic!("B was never answered: {other:?} after {all:?}"),
        }
        assert!(
            all.iter().any(|e| matches!(e,
                Event::Client(ClientEvent::Reattached { turn_id, .. }) if turn_id == "msg_b")),
            "B was not picked up by the client's reattach: {all:?}"
        );
        // No second answer, no second run.
        let (again, rest) = instance
            .wait_for(Duration::from_millis(1500), |e| {
                matches!(e, Event::Client(ClientEvent::PromptAnswered { turn_id, .. }) if turn_id == "msg_b")
            })
            .await;
        assert!(again.is_none(), "B answered twice: {again:?}");
        all.extend(rest);
        // The ledger says B is done: a duplicate gets the stored answer and does not run.
        let (dup, seen) = prompt_once(&instance, &session, "msg_b", "say must not run").await;
        all.extend(seen);
        assert_eq!(dup.unwrap()["stopReason"], "end_turn");
        let st = status(&instance, &session).await;
        assert_eq!(st["queued"], json!([]), "{st}");
        assert_eq!(st["lastTurnId"], "msg_b", "{st}");
        let said = chunks(&all);
        assert_eq!(
            said.iter().filter(|c| *c == "b ran").count(),
            1,
            "B's answer was not produced exactly once: {said:?}"
        );
        assert!(
            !said
                .iter()
                .any(|c| c == "must not run" || c == "msg_a never said"),
            "{said:?}"
        );
        let log = device.stderr();
        assert_eq!(log.matches("turn msg_b of").count(), 1, "{log}");
        assert!(!log.contains("turn msg_a of"), "A ran again: {log}");
    });
}

/// The limits of the next `_lembas/hello` (with every event seen before it).
async fn next_hello(
    instance: &TestInstance,
    timeout: Duration,
) -> (Option<lembas_core::wire::handshake::Limits>, Vec<Event>) {
    let (e, seen) = instance
        .wait_for(timeout, |e| {
            matches!(e, Event::Client(ClientEvent::Hello(_)))
        })
        .await;
    match e {
        Some(Event::Client(ClientEvent::Hello(h))) => (Some(h.limits), seen),
        _ => (None, seen),
    }
}

#[test]
fn an_edited_config_restarts_the_link_after_the_running_turn_and_the_new_hello_says_it() {
    smol::block_on(async {
        let instance = common::instance().await;
        let home = Home::new();
        assert!(home.login(&instance.url()).status.success());
        let device = home.link();
        let (limits, _) = next_hello(&instance, T).await;
        assert_eq!(limits.unwrap().max_mode, lembas_core::Mode::Edit);
        ready(&instance).await;
        let session = new_session(&instance, &home.work.join("proj")).await;
        let w = home.work.display().to_string();

        // A malformed edit is refused, named, and changes nothing: the link stays up.
        home.write_config(&format!(
            "remote:\n  enabled: true\n  max_mode: yolo\n  roots: [{w}]\ntrusted: [{w}]\n"
        ));
        let start = Instant::now();
        while !device.stderr().contains("remote.max_mode") && start.elapsed() < T {
            smol::Timer::after(Duration::from_millis(100)).await;
        }
        let log = device.stderr();
        assert!(
            log.contains("config.yaml:3:") && log.contains("remote.max_mode"),
            "{log}"
        );
        let (down, _) = instance
            .wait_for(Duration::from_millis(1500), |e| {
                matches!(e, Event::LinkDown)
            })
            .await;
        assert!(down.is_none(), "a malformed config restarted the link");

        // A good edit while a turn runs: the turn ends on this link, then the link restarts.
        instance
            .prompt(
                &session,
                text("say before\nsleep 4000\nsay after"),
                Some("msg_run"),
            )
            .await
            .unwrap();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  max_mode: plan\n  roots: [{w}]\ntrusted: [{w}]\n"
        ));
        let (answer, seen) = instance
            .wait_for(T, |e| {
                matches!(e, Event::Client(ClientEvent::PromptAnswered { .. }))
                    || matches!(e, Event::LinkDown)
            })
            .await;
        match answer {
            Some(Event::Client(ClientEvent::PromptAnswered {
                turn_id, outcome, ..
            })) => {
                assert_eq!(turn_id, "msg_run");
                assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
            }
            other => panic!("the link went down before the turn ended: {other:?} {seen:?}"),
        }
        assert_eq!(chunks(&seen), vec!["before", "after"]);
        // The change was taken while the turn ran, and waited for it.
        let log = device.stderr();
        assert!(log.contains("once no turn runs"), "{log}");
        let (down, _) = instance.wait_for(T, |e| matches!(e, Event::LinkDown)).await;
        assert!(down.is_some(), "the link was not restarted");
        let (limits, _) = next_hello(&instance, T).await;
        let limits = limits.expect("no hello after the restart");
        assert_eq!(limits.max_mode, lembas_core::Mode::Plan);
        assert_eq!(limits.roots, vec![w.clone()]);
        ready(&instance).await;
        let log = device.stderr();
        assert!(log.contains("1012"), "{log}");
        assert_eq!(log.matches("linked to the instance").count(), 2, "{log}");

        // Remote work switched off: the next hello lists no roots.
        home.write_config(&format!(
            "remote:\n  enabled: false\n  roots: [{w}]\ntrusted: [{w}]\n"
        ));
        let (limits, _) = next_hello(&instance, T).await;
        assert_eq!(limits.expect("no hello").roots, Vec::<String>::new());
    });
}

#[test]
fn sighup_reads_the_config_again_and_the_new_hello_carries_the_roots() {
    smol::block_on(async {
        let instance = common::instance().await;
        let home = Home::new();
        // The root is a symlink: the file never changes, only what it resolves to, which
        // only a SIGHUP makes the device look at again.
        let (a, b) = (home.work.join("a"), home.work.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let root = home.path().join("root");
        std::os::unix::fs::symlink(&a, &root).unwrap();
        home.write_config(&format!(
            "remote:\n  enabled: true\n  roots: [{}]\n  require_trust: false\n",
            root.display()
        ));
        assert!(home.login(&instance.url()).status.success());
        let device = home.link();
        let (limits, _) = next_hello(&instance, T).await;
        assert_eq!(limits.unwrap().roots, vec![a.display().to_string()]);
        ready(&instance).await;
        std::fs::remove_file(&root).unwrap();
        std::os::unix::fs::symlink(&b, &root).unwrap();
        // The watcher alone does not see it (the file is the same).
        let (down, _) = instance
            .wait_for(Duration::from_millis(2500), |e| {
                matches!(e, Event::LinkDown)
            })
            .await;
        assert!(down.is_none(), "restarted without a SIGHUP");
        let pid = rustix::process::Pid::from_raw(device.child.id().try_into().unwrap()).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
        let (limits, seen) = next_hello(&instance, T).await;
        let limits = limits.unwrap_or_else(|| panic!("no hello after SIGHUP: {seen:?}"));
        assert_eq!(limits.roots, vec![b.display().to_string()]);
        assert!(
            seen.iter().any(|e| matches!(e, Event::LinkDown)),
            "{seen:?}"
        );
        let log = device.stderr();
        assert!(log.contains("SIGHUP"), "{log}");
    });
}
