//! The conformance transcripts in `spec/conformance/`: replayed against a fresh device and a
//! fresh client (each role on its own), and every output must match the transcript exactly.
//! `LEMBAS_WRITE_CONFORMANCE=1 cargo test -p lembas-bindings --test conformance` records them
//! again from the scenarios below (a device, a client and the scripted engine joined in memory
//! with virtual time and fixed seeds) after a deliberate change of the protocol's frames.
//! The node test `bindings/test/conformance.test.mjs` replays the same files through the wasm
//! bindings.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

use lembas_bindings::json;
use lembas_bindings::transcript::{replay, ClientRunner, DeviceRunner, Role, Step, Transcript};
use lembas_core::engine::Engine;
use lembas_core::scripted::ScriptedEngine;
use lembas_core::Time;
use serde_json::{json, Value};

const ROOT: &str = "/home/dev/work";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spec/conformance")
}

fn device_config() -> Value {
    json!({
        "seed": 42,
        "version": "0.1.0",
        "host": "devbox",
        "platform": "linux",
        "remote": { "enabled": true, "roots": [ROOT], "trusted": [ROOT] },
        "models": [{ "id": "lembas/default", "instance": true }],
    })
}

fn client_config() -> Value {
    json!({ "seed": 7 })
}

/// A device, a client and the scripted engine joined in memory, routing every effect as a
/// shell does (as `lembas_core::testing::Pair` does, without faults), and writing down every
/// input each role was given and every output it drained.
struct Recorder {
    t: Transcript,
    device: DeviceRunner,
    client: ClientRunner,
    engine: ScriptedEngine,
    now: u64,
    link: Option<u64>,
    queue: VecDeque<(Role, Value)>,
    /// Frames the device wrote on local connections (an editor, a terminal).
    local: BTreeMap<u64, Vec<Value>>,
    client_events: Vec<Value>,
    reachable: bool,
}

impl Recorder {
    fn new(name: &str, description: &str) -> Recorder {
        Recorder {
            t: Transcript {
                name: name.into(),
                description: description.into(),
                device: device_config(),
                client: client_config(),
                steps: Vec::new(),
            },
            device: DeviceRunner::new(device_config()).unwrap(),
            client: ClientRunner::new(client_config()).unwrap(),
            engine: ScriptedEngine::new(),
            now: 0,
            link: None,
            queue: VecDeque::new(),
            local: BTreeMap::new(),
            client_events: Vec::new(),
            reachable: true,
        }
    }

    /// Give one role one input now, record it, route its outputs, and run everything that
    /// follows from them until quiet. Returns what the input returned.
    fn input(&mut self, role: Role, input: Value) -> Option<Value> {
        let r = self.apply(role, input);
        self.run();
        r
    }

    fn apply(&mut self, role: Role, input: Value) -> Option<Value> {
        let (returns, outputs) = match role {
            Role::Device => self.device.step(&input, self.now),
            Role::Client => self.client.step(&input, self.now),
        }
        .unwrap_or_else(|e| panic!("{role:?} refused {input}: {e}"));
        self.t.steps.push(Step {
            at: self.now,
            role,
            input: input.clone(),
            returns: returns.clone(),
            outputs: outputs.clone(),
        });
        if role == Role::Device && input["type"] == "open" && input["kind"] == "link" {
            self.link = returns.as_ref().and_then(Value::as_u64);
            self.queue
                .push_back((Role::Client, json!({ "type": "link_up" })));
        }
        for o in outputs {
            match role {
                Role::Device => self.route_device(o),
                Role::Client => self.route_client(o),
            }
        }
        returns
    }

    fn run(&mut self) {
        let mut steps = 0;
        while let Some((role, input)) = self.queue.pop_front() {
            steps += 1;
            assert!(steps < 100_000, "livelock");
            self.apply(role, input);
        }
    }

    fn engine_reports(&mut self) {
        while let Some((s, t, e)) = self.engine.poll_event() {
            self.queue.push_back((
                Role::Device,
                json!({ "type": "engine", "sessionId": s, "turnId": t, "event": json::out(&e) }),
            ));
        }
    }

    fn route_device(&mut self, o: Value) {
        let now = Time(self.now);
        match o["type"].as_str().unwrap() {
            "send" => {
                let conn = o["conn"].as_u64().unwrap();
                if Some(conn) == self.link {
                    self.queue.push_back((
                        Role::Client,
                        json!({ "type": "frame", "frame": o["frame"] }),
                    ));
                } else {
                    let frame = serde_json::from_str(o["frame"].as_str().unwrap()).unwrap();
                    self.local.entry(conn).or_default().push(frame);
                }
            }
            "close" => {
                if o["conn"].as_u64() == self.link {
                    self.link = None;
                    self.queue
                        .push_back((Role::Client, json!({ "type": "link_down" })));
                }
            }
            "effect" => {
                let e = &o["effect"];
                match e["kind"].as_str().unwrap() {
                    "dial" => {
                        if self.reachable {
                            self.queue
                                .push_back((Role::Device, json!({ "type": "open", "kind": "link" })));
                        } else {
                            self.queue.push_back((
                                Role::Device,
                                json!({ "type": "dial_failed", "failure": { "type": "transient" } }),
                            ));
                        }
                    }
                    "persist" => self
                        .queue
                        .push_back((Role::Device, json!({ "type": "persisted", "seq": e["seq"] }))),
                    "resolve_path" => self.queue.push_back((
                        Role::Device,
                        json!({ "type": "path_resolved", "request": e["request"], "path": e["path"] }),
                    )),
                    // The engine's own (`start_turn`, `cancel_turn`, `steer`, `card_decided`).
                    _ => {
                        if let Some(command) = json::engine_command_from(e).unwrap() {
                            self.engine.handle_command(command, now);
                            self.engine_reports();
                        }
                    }
                }
            }
            other => panic!("unknown device output {other}"),
        }
    }

    fn route_client(&mut self, o: Value) {
        match o["type"].as_str().unwrap() {
            "send" => {
                if let Some(conn) = self.link {
                    self.queue.push_back((
                        Role::Device,
                        json!({ "type": "frame", "conn": conn, "frame": o["frame"] }),
                    ));
                }
            }
            "close" => {
                if let Some(conn) = self.link.take() {
                    self.queue.push_back((
                        Role::Device,
                        json!({ "type": "closed", "conn": conn, "code": o["code"] }),
                    ));
                    self.queue
                        .push_back((Role::Client, json!({ "type": "link_down" })));
                }
            }
            "event" => self.client_events.push(o["event"].clone()),
            other => panic!("unknown client output {other}"),
        }
    }

    /// Move virtual time forward, ticking each machine when its deadline comes.
    fn advance(&mut self, ms: u64) {
        let target = self.now + ms;
        loop {
            let next = [
                self.device.device.poll_timeout(),
                self.client.client.poll_timeout(),
                self.engine.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .map(|t| t.0)
            .filter(|&t| t <= target)
            .min();
            let Some(at) = next else { break };
            self.now = self.now.max(at);
            self.tick_due();
        }
        self.now = target;
    }

    fn tick_due(&mut self) {
        let due = |t: Option<Time>, now: u64| t.is_some_and(|t| t.0 <= now);
        if due(self.device.device.poll_timeout(), self.now) {
            self.input(Role::Device, json!({ "type": "tick" }));
        }
        if due(self.client.client.poll_timeout(), self.now) {
            self.input(Role::Client, json!({ "type": "tick" }));
        }
        if due(self.engine.poll_timeout(), self.now) {
            self.engine.handle_timeout(Time(self.now));
            self.engine_reports();
            self.run();
        }
    }

    fn start(&mut self) {
        self.input(Role::Device, json!({ "type": "start_link" }));
        assert!(
            self.client.client.is_ready(),
            "the handshake did not finish"
        );
    }

    fn new_session(&mut self) -> String {
        let id = self
            .input(
                Role::Client,
                json!({ "type": "call", "method": "session/new", "params": { "cwd": ROOT } }),
            )
            .unwrap();
        self.client_events
            .iter()
            .find(|e| e["kind"] == "answer" && e["id"] == id)
            .and_then(|e| e["result"]["sessionId"].as_str())
            .expect("session/new answered")
            .to_string()
    }

    fn prompt(&mut self, session: &str, text: &str, turn: &str) {
        self.input(
            Role::Client,
            json!({ "type": "prompt", "sessionId": session,
                    "blocks": [{ "type": "text", "text": text }], "turnId": turn }),
        );
    }

    /// The link drops under both ends (a cut network).
    fn cut(&mut self) {
        let conn = self.link.take().expect("a link to cut");
        self.input(
            Role::Device,
            json!({ "type": "closed", "conn": conn, "code": null }),
        );
        self.input(Role::Client, json!({ "type": "link_down" }));
    }

    fn answered(&self, turn: &str) -> Vec<&Value> {
        self.client_events
            .iter()
            .filter(|e| e["kind"] == "prompt_answered" && e["turnId"] == turn)
            .collect()
    }

    fn finish(self) -> Transcript {
        self.t
    }
}

fn handshake() -> Transcript {
    let mut r = Recorder::new(
        "handshake",
        "The device dials, says _lembas/hello (protocol 3, its limits); the client initializes \
         with _meta.lembas; the device answers with its capabilities and the link is ready.",
    );
    r.start();
    r.finish()
}

fn prompt() -> Transcript {
    let mut r = Recorder::new(
        "prompt",
        "A session is made under a root (the cwd resolved by the shell), then a prompt runs on \
         the scripted engine (a thought, a tool call, text, after a 50 ms sleep) and is answered \
         end_turn with its turnId; the turn is durable before the frames that announce it.",
    );
    r.start();
    let s = r.new_session();
    r.prompt(&s, "think planning\nsleep 50\ntool ls\nsay hello", "t1");
    r.advance(100);
    assert_eq!(r.answered("t1").len(), 1);
    r.finish()
}

fn duplicate_prompt() -> Transcript {
    let mut r = Recorder::new(
        "duplicate-prompt",
        "A prompt with a turnId the device has already run is not run again: the device answers \
         it with the finished turn's very answer, and the engine is asked to start it only once.",
    );
    r.start();
    let s = r.new_session();
    r.prompt(&s, "say once", "t1");
    r.advance(10);
    r.prompt(&s, "say once", "t1");
    r.advance(10);
    assert_eq!(r.answered("t1").len(), 2);
    let starts =
        r.t.steps
            .iter()
            .flat_map(|s| &s.outputs)
            .filter(|o| o["effect"]["kind"] == "start_turn")
            .count();
    assert_eq!(starts, 1, "the duplicate ran again");
    r.finish()
}

fn reattach() -> Transcript {
    let mut r = Recorder::new(
        "reattach",
        "The link drops while a turn runs; the device redials after its backoff; on the new \
         link the client asks _lembas/session/status, finds the turn running, re-sends the same \
         turnId (never run twice) and hears its answer when it ends.",
    );
    r.start();
    let s = r.new_session();
    r.prompt(&s, "say working\nsleep 5000\nsay done", "t1");
    r.advance(100);
    r.cut();
    r.advance(10_000);
    let re: Vec<&Value> = r
        .client_events
        .iter()
        .filter(|e| e["kind"] == "reattached")
        .collect();
    assert_eq!(re.len(), 1, "{:?}", r.client_events);
    assert_eq!(re[0]["how"], "following");
    assert_eq!(r.answered("t1").len(), 1);
    r.finish()
}

fn card_first_answer() -> Transcript {
    let mut r = Recorder::new(
        "card-first-answer",
        "A turn asks for permission; the card goes to the web client and to a terminal on the \
         device. The web answers first: the engine is told once, the terminal's card is settled \
         (_lembas/permission/settled), and the terminal's late answer changes nothing.",
    );
    r.start();
    let s = r.new_session();
    let term = r
        .input(Role::Device, json!({ "type": "open", "kind": "terminal" }))
        .and_then(|v| v.as_u64())
        .unwrap();
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": { "_meta": { "lembas": { "protocol": 3 } } } } });
    let status = json!({ "jsonrpc": "2.0", "id": 1, "method": "_lembas/session/status",
                         "params": { "sessionId": s } });
    for f in [init, status] {
        r.input(
            Role::Device,
            json!({ "type": "frame", "conn": term, "frame": f.to_string() }),
        );
    }
    r.prompt(&s, "permit deploy", "t1");
    let ask = r
        .client_events
        .iter()
        .find(|e| e["kind"] == "request" && e["method"] == "session/request_permission")
        .cloned()
        .expect("the web got the card");
    let term_ask = r.local[&term]
        .iter()
        .find(|f| f["method"] == "session/request_permission")
        .cloned()
        .expect("the terminal got the card");
    r.advance(1_000);
    r.input(
        Role::Client,
        json!({ "type": "respond", "id": ask["id"],
                "result": { "outcome": { "outcome": "selected", "optionId": "once" } } }),
    );
    let late = json!({ "jsonrpc": "2.0", "id": term_ask["id"],
        "result": { "outcome": { "outcome": "selected", "optionId": "deny" } } });
    r.input(
        Role::Device,
        json!({ "type": "frame", "conn": term, "frame": late.to_string() }),
    );
    r.advance(10);
    assert!(r.local[&term]
        .iter()
        .any(|f| f["method"] == "_lembas/permission/settled"));
    assert_eq!(r.answered("t1").len(), 1);
    let decided =
        r.t.steps
            .iter()
            .flat_map(|s| &s.outputs)
            .filter(|o| o["effect"]["kind"] == "card_decided")
            .count();
    assert_eq!(decided, 1);
    r.finish()
}

fn offline_delete() -> Transcript {
    let mut r = Recorder::new(
        "offline-delete",
        "The client deletes a session while the link is down: the delete is kept, and sent on \
         the next link right after initialize; the device deletes it and answers deleted: true. \
         Then the device deletes another session while offline (lembas sessions delete): it is \
         persisted as pending and the client hears _lembas/session/deleted after the next \
         initialize.",
    );
    r.start();
    let a = r.new_session();
    let b = r.new_session();
    r.reachable = false;
    r.cut();
    r.input(
        Role::Client,
        json!({ "type": "delete_session", "sessionId": a }),
    );
    assert!(r.client.client.pending_deletes().len() == 1);
    r.input(
        Role::Device,
        json!({ "type": "delete_session", "sessionId": b }),
    );
    r.advance(3_000);
    r.reachable = true;
    r.advance(60_000);
    assert!(r.client.client.is_ready());
    assert!(r
        .client_events
        .iter()
        .any(|e| e["kind"] == "deleted" && e["sessionId"] == a.as_str()));
    assert!(r.client_events.iter().any(|e| e["kind"] == "notification"
        && e["method"] == "_lembas/session/deleted"
        && e["params"]["sessionId"] == b.as_str()));
    assert!(r.client.client.pending_deletes().is_empty());
    r.finish()
}

fn scenarios() -> Vec<Transcript> {
    vec![
        handshake(),
        prompt(),
        duplicate_prompt(),
        reattach(),
        card_first_answer(),
        offline_delete(),
    ]
}

#[test]
fn transcripts_replay_frame_for_frame() {
    let write = std::env::var("LEMBAS_WRITE_CONFORMANCE").is_ok_and(|v| v == "1");
    let recorded = scenarios();
    if write {
        std::fs::create_dir_all(dir()).unwrap();
        for t in &recorded {
            let mut text = serde_json::to_string_pretty(t).unwrap();
            text.push('\n');
            std::fs::write(dir().join(format!("{}.json", t.name)), text).unwrap();
        }
    }
    for t in &recorded {
        let path = dir().join(format!("{}.json", t.name));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; record it with LEMBAS_WRITE_CONFORMANCE=1",
                path.display()
            )
        });
        let stored: Transcript = serde_json::from_str(&text).unwrap();
        for role in [Role::Device, Role::Client] {
            let n = replay(&stored, role).unwrap_or_else(|m| {
                panic!(
                    "{}: {m}\n(a deliberate change of the protocol's frames? record again with \
                     LEMBAS_WRITE_CONFORMANCE=1)",
                    path.display()
                )
            });
            assert!(n > 0, "{}: no {role:?} steps", t.name);
        }
        // The scenario today still says what the file says (nothing drifted unnoticed).
        assert!(
            stored == *t,
            "{}: the scenario no longer records this transcript; record again with \
             LEMBAS_WRITE_CONFORMANCE=1 if the change is deliberate",
            path.display()
        );
    }
}

#[test]
fn a_replay_notices_a_changed_frame() {
    let mut t = handshake();
    let step = t
        .steps
        .iter_mut()
        .find(|s| s.role == Role::Device && s.outputs.iter().any(|o| o["type"] == "send"))
        .unwrap();
    let o = step
        .outputs
        .iter_mut()
        .find(|o| o["type"] == "send")
        .unwrap();
    o["frame"] = json!(o["frame"].as_str().unwrap().replace("devbox", "otherbox"));
    let m = replay(&t, Role::Device).unwrap_err();
    assert!(m.what.contains("outputs differ"), "{m}");
}
