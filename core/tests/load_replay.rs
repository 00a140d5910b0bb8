//! `session/load` replays a session's history, then the editor follows it live: the replay
//! ends exactly where the live updates begin. A turn that ends (or begins) while the shell
//! reads the history is replayed rather than missed, and a turn running at the load is
//! replayed as far as it has gone, the rest following live.

use lembas_core::device::{ConnId, TurnPhase};
use lembas_core::testing::Pair;
use serde_json::{json, Value};

fn linked() -> Pair {
    let mut p = Pair::default_with_roots(&["/home/dev/work"]);
    p.start().unwrap();
    assert!(p.client.is_ready());
    p
}

fn editor(p: &mut Pair) -> ConnId {
    let e = p.open_stdio();
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": { "protocolVersion": 1 } });
    p.stdio_answer(e, init.to_string().as_bytes())
        .expect("initialize answered");
    e
}

fn load(p: &mut Pair, e: ConnId, session: &str) {
    let line = json!({ "jsonrpc": "2.0", "id": 1, "method": "session/load",
        "params": { "sessionId": session, "cwd": "/home/dev/work/a", "mcpServers": [] } });
    p.stdio(e, line.to_string().as_bytes()).unwrap();
}

/// What the editor heard of the session as (kind, text): `user` and `agent` chunks, `answer`
/// for the load's answer.
fn heard(p: &Pair, e: ConnId) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for f in &p.stdio_out[&e] {
        let v: Value = serde_json::from_slice(f).unwrap();
        if v["id"] == 1 {
            assert!(v.get("result").is_some(), "the load failed: {v}");
            out.push(("answer", String::new()));
        }
        let update = &v["params"]["update"];
        let text = update["content"]["text"].as_str().unwrap_or("").to_string();
        match update["sessionUpdate"].as_str() {
            Some("user_message_chunk") => out.push(("user", text)),
            Some("agent_message_chunk") => out.push(("agent", text)),
            _ => {}
        }
    }
    out
}

/// The texts of `heard`, the agent's chunks of one answer joined, the answer marked.
fn transcript(heard: &[(&'static str, String)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last = "";
    for (kind, text) in heard {
        match (*kind, last) {
            ("agent", "agent") => out.last_mut().unwrap().push_str(text),
            ("answer", _) => out.push("<answered>".into()),
            (_, _) => out.push(format!("{kind}: {text}")),
        }
        last = kind;
    }
    out
}

#[test]
fn a_turn_that_ends_while_the_history_is_read_is_replayed_not_missed() {
    let mut p = linked();
    let s = p.new_session("/home/dev/work/a");
    p.prompt_text(&s, "t1", "first");
    p.settle().unwrap();
    let e = editor(&mut p);
    p.os.hold_history_reads = true;
    load(&mut p, e, &s);
    assert_eq!(p.os.held_history_reads.len(), 1, "the read is out");
    // The web's next turn runs and ends before the shell's read comes back.
    p.prompt_text(&s, "t2", "second");
    p.settle().unwrap();
    p.os.hold_history_reads = false;
    let Pair {
        os, device, now, ..
    } = &mut p;
    os.release_history_reads(device, *now);
    p.settle().unwrap();
    assert_eq!(
        transcript(&heard(&p, e)),
        [
            "user: first",
            "agent: echo: first",
            "user: second",
            "agent: echo: second",
            "<answered>"
        ]
    );
}

#[test]
fn a_turn_running_at_the_load_is_replayed_so_far_and_followed_live() {
    let mut p = linked();
    let s = p.new_session("/home/dev/work/a");
    let script = "say one\nsleep 1000\nsay two";
    p.prompt_text(&s, "t1", script);
    p.drive().unwrap();
    assert!(
        p.device.turn_state(&s, "t1") == Some(TurnPhase::Running),
        "the turn is still running"
    );
    let e = editor(&mut p);
    load(&mut p, e, &s);
    p.advance(1_500).unwrap();
    p.settle().unwrap();
    assert_eq!(p.device.turn_state(&s, "t1"), Some(TurnPhase::Done));
    let editor = transcript(&heard(&p, e));
    assert_eq!(editor[0], format!("user: {script}"));
    assert_eq!(editor[1], "agent: one", "what it said so far, replayed");
    assert_eq!(editor[2], "<answered>");
    assert_eq!(editor[3], "agent: two", "the rest, live");

    // Another editor loading it now, the turn over, hears the same answer.
    let later = self::editor(&mut p);
    load(&mut p, later, &s);
    let replayed = transcript(&heard(&p, later));
    let joined = |t: &[String]| {
        t.iter()
            .filter(|l| l.starts_with("agent: "))
            .map(|l| &l[7..])
            .collect::<String>()
    };
    assert_eq!(joined(&editor), joined(&replayed));
}

/// A session so busy that a turn ends during every read: after the last read it will make,
/// the turns stored since come from what the session keeps for its context, not lost.
#[test]
fn a_session_busier_than_every_read_still_replays_every_turn() {
    let mut p = linked();
    let s = p.new_session("/home/dev/work/a");
    let e = editor(&mut p);
    p.os.hold_history_reads = true;
    load(&mut p, e, &s);
    let mut reads = 0;
    for turn in 1..=5 {
        let Some(_) = p.os.held_history_reads.front() else {
            break;
        };
        p.prompt_text(&s, &format!("t{turn}"), &format!("turn {turn}"));
        p.settle().unwrap();
        let Pair {
            os, device, now, ..
        } = &mut p;
        os.release_history_reads(device, *now);
        reads += 1;
        p.settle().unwrap();
    }
    assert_eq!(reads, 3, "a read, then two more, then no more");
    let mut expected: Vec<String> = (1..=3)
        .flat_map(|t| [format!("user: turn {t}"), format!("agent: echo: turn {t}")])
        .collect();
    expected.push("<answered>".into());
    assert_eq!(transcript(&heard(&p, e)), expected);
}
