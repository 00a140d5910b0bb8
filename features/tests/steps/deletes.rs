//! Deletes: `_lembas/session/delete` from the client, kept and sent again until answered, and
//! deletes made on the device, which reach the client as `_lembas/session/deleted`.

use cucumber::{then, when};
use lembas_core::client::ClientEvent;
use lembas_core::store::Table;
use lembas_core::testing::{Dir, Faults};
use serde_json::{json, Value};

use super::turns::session;
use super::{method_of, parse};
use crate::LinkWorld;

/// The session a step names: the link's client's, or the editor's own.
fn named(w: &LinkWorld, which: &str) -> String {
    match which {
        "the session" => session(w),
        "the editor's session" => w
            .local_session
            .clone()
            .expect("a step before must open the editor's session"),
        other => panic!("no session is called `{other}`"),
    }
}

#[when(regex = r#"^the client deletes (the session|the editor's session)$"#)]
fn client_deletes(w: &mut LinkWorld, which: String) {
    let s = named(w, &which);
    let pair = w.pair();
    pair.client.delete_session(&s, pair.now);
    pair.drive().expect("the link settles");
}

#[when("the device deletes the session")]
fn device_deletes(w: &mut LinkWorld) {
    let s = session(w);
    let pair = w.pair();
    let now = pair.now;
    assert!(
        pair.device.delete_session(&s, now),
        "the device had no such session"
    );
    pair.drive().expect("the device settles");
}

/// The `_lembas/session/delete` requests the device received for `session`, with their index
/// in the transcript.
fn delete_requests(w: &LinkWorld, session: &str) -> Vec<(usize, Value)> {
    w.link_frames(Dir::ToDevice)
        .into_iter()
        .map(|(i, f)| (i, parse(&f)))
        .filter(|(_, f)| {
            method_of(f) == Some("_lembas/session/delete")
                && f["params"]["sessionId"] == json!(session)
        })
        .collect()
}

/// The device's answers on the link to the requests with these ids.
fn answers_to(w: &LinkWorld, ids: &[Value]) -> Vec<Value> {
    w.link_frames(Dir::ToClient)
        .into_iter()
        .map(|(_, f)| parse(&f))
        .filter(|f| method_of(f).is_none() && f.get("id").is_some_and(|id| ids.contains(id)))
        .collect()
}

#[when(regex = r"^frames on the link are delayed by up to (\d+) seconds?$")]
fn delayed(w: &mut LinkWorld, seconds: u64) {
    w.pair().faults = Faults {
        max_delay_ms: seconds * 1000,
        ..Faults::none()
    };
}

#[when("frames on the link are no longer delayed")]
fn not_delayed(w: &mut LinkWorld) {
    w.pair().faults = Faults::none();
}

/// With frames delayed (so some are in flight), each time the device has received the client's
/// delete, the link is cut before the answer reaches the client; then the device redials.
#[when(
    regex = r"^(\d+) links in turn drop after the device receives the delete and before its answer arrives$"
)]
fn links_drop_before_answer(w: &mut LinkWorld, rounds: usize) {
    let s = session(w);
    assert!(
        w.built().faults.max_delay_ms > 0,
        "frames must be delayed for an answer to be in flight"
    );
    for round in 1..=rounds {
        let before = delete_requests(w, &s).len();
        let mut waited = 0u64;
        while delete_requests(w, &s).len() == before {
            assert!(
                waited < 600_000,
                "round {round}: the delete was never sent again"
            );
            w.pair().advance(1).expect("time passes");
            waited += 1;
        }
        let ids: Vec<Value> = delete_requests(w, &s)
            .into_iter()
            .map(|(_, f)| f["id"].clone())
            .collect();
        assert!(
            answers_to(w, &ids).is_empty(),
            "round {round}: the answer arrived with the request"
        );
        assert!(
            !w.built()
                .client_events
                .iter()
                .any(|e| matches!(e, ClientEvent::Deleted { .. })),
            "round {round}: the client heard the delete answered"
        );
        w.pair().cut().expect("the cut settles");
    }
}

#[then(
    regex = r"^the device received the delete on (\d+) links, and only the last one's answer reached the client$"
)]
fn received_on_links(w: &mut LinkWorld, links: usize) {
    let s = session(w);
    let requests = delete_requests(w, &s);
    let hellos: Vec<usize> = w
        .link_frames(Dir::ToClient)
        .into_iter()
        .filter(|(_, f)| method_of(&parse(f)) == Some("_lembas/hello"))
        .map(|(i, _)| i)
        .collect();
    // Which link each request came on: the number of hellos before it.
    let mut on: Vec<usize> = requests
        .iter()
        .map(|(i, _)| hellos.iter().filter(|h| *h < i).count())
        .collect();
    on.dedup();
    assert_eq!(
        on.len(),
        links,
        "the delete reached the device on links {on:?}"
    );
    for (k, (_, request)) in requests.iter().enumerate() {
        let answers = answers_to(w, std::slice::from_ref(&request["id"]));
        let last = k + 1 == requests.len();
        assert_eq!(
            answers.len(),
            usize::from(last),
            "answers to {request}: {answers:?}"
        );
    }
}

#[then(
    regex = r#"^the device was sent the delete of (the session|the editor's session) (\d+) times in all$"#
)]
fn delete_sent_n(w: &mut LinkWorld, which: String, n: usize) {
    let s = named(w, &which);
    assert_eq!(delete_requests(w, &s).len(), n);
}

#[then(regex = r#"^the device refused the delete (\d+) times, saying "([^"]*)"$"#)]
fn refused_n(w: &mut LinkWorld, n: usize, words: String) {
    let s = named(w, "the editor's session");
    let ids: Vec<Value> = delete_requests(w, &s)
        .into_iter()
        .map(|(_, f)| f["id"].clone())
        .collect();
    let answers = answers_to(w, &ids);
    assert_eq!(answers.len(), n, "{answers:?}");
    for a in &answers {
        assert_eq!(a["error"]["code"], -32602, "{a}");
        let message = a["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(&words), "{a}");
    }
}

#[when(regex = r"^the link is cut and comes back (\d+) times?$")]
fn cut_and_back(w: &mut LinkWorld, times: usize) {
    for _ in 0..times {
        let pair = w.pair();
        pair.cut().expect("the cut settles");
        pair.advance(120_000).expect("time passes");
        assert!(pair.client.is_ready(), "the link did not come back");
    }
}

#[then(
    regex = r#"^the client gave the delete of the editor's session up once, with the device's reason "([^"]*)"$"#
)]
fn given_up(w: &mut LinkWorld, words: String) {
    let s = named(w, "the editor's session");
    let given_up: Vec<&String> = w
        .built()
        .client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::DeleteGivenUp { session_id, reason } if *session_id == s => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(given_up.len(), 1, "{given_up:?}");
    assert!(given_up[0].contains(&words), "{}", given_up[0]);
}

#[then("the client has no delete pending")]
fn none_pending(w: &mut LinkWorld) {
    assert_eq!(w.built().client.pending_deletes(), Vec::new());
}

#[then(regex = r#"^the client was told (the session) was deleted, once$"#)]
fn told_deleted(w: &mut LinkWorld, which: String) {
    let s = named(w, &which);
    let told = w
        .built()
        .client_events
        .iter()
        .filter(|e| matches!(e, ClientEvent::Deleted { session_id, .. } if *session_id == s))
        .count();
    assert_eq!(told, 1);
}

#[then("the device no longer has the session, in memory or in its store")]
fn session_gone(w: &mut LinkWorld) {
    let s = session(w);
    let pair = w.built();
    assert_eq!(pair.device.session_count(), 0);
    let kept: Vec<String> = pair
        .os
        .store
        .entries()
        .into_iter()
        .filter(|e| e.table != Table::Deletes && e.key.starts_with(&s))
        .map(|e| format!("{}:{}", e.table.name(), e.key))
        .collect();
    assert!(kept.is_empty(), "the store keeps {kept:?}");
}

#[then("the device still has the editor's session")]
fn editor_session_kept(w: &mut LinkWorld) {
    let s = named(w, "the editor's session");
    let kept = w
        .built()
        .os
        .store
        .entries()
        .into_iter()
        .any(|e| e.table == Table::Sessions && e.key == s);
    assert!(kept, "the editor's session is gone from the store");
}

/// Every `_lembas/session/deleted` for the session the link carried, with its index.
fn deleted_frames(w: &LinkWorld) -> Vec<usize> {
    let s = session(w);
    w.link_frames(Dir::ToClient)
        .into_iter()
        .filter(|(_, f)| {
            let f = parse(f);
            method_of(&f) == Some("_lembas/session/deleted") && f["params"]["sessionId"] == json!(s)
        })
        .map(|(i, _)| i)
        .collect()
}

#[then(
    regex = r#"^the link carried "_lembas/session/deleted" for the session once, right after a link's initialize answer$"#
)]
fn deleted_after_initialize(w: &mut LinkWorld) {
    let found = deleted_frames(w);
    assert_eq!(found.len(), 1, "sent at {found:?}");
    let frames = w.link_frames(Dir::ToClient);
    let before: Vec<Value> = frames
        .iter()
        .filter(|(i, _)| *i < found[0])
        .map(|(_, f)| parse(f))
        .collect();
    let last = before.last().expect("frames before it");
    assert!(
        last.get("result")
            .is_some_and(|r| r.get("agentInfo").is_some()),
        "the frame before it is not an initialize answer: {last}"
    );
}

#[then(regex = r#"^the link carried "_lembas/session/deleted" for the session once in all$"#)]
fn deleted_once(w: &mut LinkWorld) {
    let found = deleted_frames(w);
    assert_eq!(found.len(), 1, "sent at {found:?}");
}

#[then("the client's UI was told the session was deleted on the device")]
fn ui_told(w: &mut LinkWorld) {
    let s = session(w);
    let told = w
        .built()
        .client_events
        .iter()
        .filter(|e| {
            matches!(e, ClientEvent::Notification { method, params }
                if method == "_lembas/session/deleted" && params["sessionId"] == json!(s))
        })
        .count();
    assert_eq!(told, 1);
}

#[then("the engine runs no turn")]
fn engine_idle(w: &mut LinkWorld) {
    assert_eq!(w.built().engine.running(), 0);
}
