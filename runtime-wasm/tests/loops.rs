//! The drivers' run loops without JS: a device loop and a client loop joined in memory, the way
//! the drivers join them to sockets. What a driver would do in JS is what the test does with
//! the actions; everything else (the engine, an in-memory store, paths) stays in the loop.

use serde_json::{json, Value};

use lembas_core::client::{Client, ClientEvent};
use lembas_core::config::Model;
use lembas_core::device::{ConnId, ConnKind, Device};
use lembas_core::engine_io::{HttpMethod, IoCall, IoReply};
use lembas_core::jsonrpc::Id;
use lembas_core::model::engine::ModelEngineConfig;
use lembas_core::store::MemStore;
use lembas_core::wire::card::PermissionAnswer;
use lembas_core::wire::event::card::PERMISSION;
use lembas_core::{ClientConfig, Time};
use lembas_runtime_wasm::client_loop::{ClientAction, ClientLoop};
use lembas_runtime_wasm::device_loop::{DeviceAction, DeviceLoop};
use lembas_runtime_wasm::engine::EngineChoice;
use lembas_runtime_wasm::json;

const ROOT: &str = "/home/dev/work";

struct Pair {
    device: DeviceLoop,
    client: ClientLoop,
    link: Option<ConnId>,
    now: Time,
    events: Vec<ClientEvent>,
    /// What reached the shell besides frames and dials.
    shell: Vec<DeviceAction>,
    /// Persists not yet acknowledged (a store in JS still writing).
    unacked: Vec<u64>,
    kept: Vec<Vec<(String, u32)>>,
    /// The JS store: what the persists carried.
    store: MemStore,
    /// What the link's socket still buffers (`bufferedAmount`): every frame sent adds to it,
    /// and only [`Pair::drain`] empties it.
    buffered: usize,
    /// The last pump held a session back.
    held_back: bool,
}

impl Pair {
    fn new(store_in_js: bool) -> Pair {
        Pair::with_sessions(store_in_js, json!({}))
    }

    /// A pair whose device config has this `sessions` block.
    fn with_sessions(store_in_js: bool, sessions: Value) -> Pair {
        Pair::with(store_in_js, sessions, EngineChoice::Scripted)
    }

    fn with(store_in_js: bool, sessions: Value, engine: EngineChoice) -> Pair {
        Pair::configured(store_in_js, json!({ "sessions": sessions }), engine)
    }

    /// A pair whose device config has these members beside its roots.
    fn configured(store_in_js: bool, more: Value, engine: EngineChoice) -> Pair {
        let mut config = json!({
            "seed": 4,
            "remote": { "enabled": true, "roots": [ROOT], "trusted": [ROOT] },
        });
        for (k, v) in more.as_object().unwrap() {
            config[k] = v.clone();
        }
        let config = json::device_config(config).unwrap();
        let device = Device::new(config, Time(0)).unwrap();
        let client = Client::new(ClientConfig::default(), Time(0)).unwrap();
        Pair {
            device: DeviceLoop::new(device, store_in_js, false, engine),
            client: ClientLoop::new(client, Vec::new()),
            link: None,
            now: Time(0),
            events: Vec::new(),
            shell: Vec::new(),
            unacked: Vec::new(),
            kept: Vec::new(),
            store: MemStore::default(),
            buffered: 0,
            held_back: false,
        }
    }

    /// Pump both loops and carry what they ask for until neither asks for anything.
    fn drive(&mut self) {
        for _ in 0..10_000 {
            let (mut d, mut c) = (Vec::new(), Vec::new());
            let (link, buffered) = (self.link, self.buffered);
            let backlog = |conn| if Some(conn) == link { buffered } else { 0 };
            self.held_back = self.device.pump(self.now, backlog, &mut d);
            self.client.pump(self.now, &mut c);
            if d.is_empty() && c.is_empty() {
                return;
            }
            for a in d {
                self.device_action(a);
            }
            for a in c {
                self.client_action(a);
            }
        }
        panic!("livelock");
    }

    fn device_action(&mut self, a: DeviceAction) {
        match a {
            DeviceAction::Dial => {
                let conn = self
                    .device
                    .device_mut()
                    .handle_open(ConnKind::Link, self.now);
                self.link = Some(conn.unwrap());
                self.client.client.handle_link_up(self.now);
            }
            DeviceAction::Send { conn, frame } if Some(conn) == self.link => {
                self.buffered += frame.len();
                self.client.client.handle_frame(frame.as_bytes(), self.now)
            }
            DeviceAction::Persist { seq, records } => {
                self.store.apply(&records);
                self.unacked.push(seq);
                self.shell.push(DeviceAction::Persist {
                    seq,
                    records: Vec::new(),
                });
            }
            other => self.shell.push(other),
        }
    }

    fn client_action(&mut self, a: ClientAction) {
        match a {
            ClientAction::Send(frame) => {
                let link = self.link.unwrap();
                self.device
                    .device_mut()
                    .handle_frame(link, frame.as_bytes(), self.now)
                    .unwrap();
            }
            ClientAction::Event(e) => self.events.push(e),
            ClientAction::Keep(list) => self.kept.push(list),
            ClientAction::Close { .. } => panic!("the client closed the link"),
        }
    }

    /// The link's socket wrote all it buffered.
    fn drain(&mut self) {
        self.buffered = 0;
        self.drive();
    }

    fn ack(&mut self) {
        if let Some(seq) = self.unacked.drain(..).max() {
            self.device.device_mut().handle_persisted(seq, self.now);
        }
        self.drive();
    }

    /// Let `ms` pass, firing the loops' deadlines on the way.
    fn advance(&mut self, ms: u64) {
        let end = self.now.plus_ms(ms);
        while let Some(at) = self.device.deadline().filter(|at| *at <= end) {
            self.now = at.max(self.now);
            self.device.tick(self.now);
            self.drive();
        }
        self.now = end;
        self.drive();
    }

    fn answer(&self, id: &Id) -> Option<&Value> {
        self.events.iter().find_map(|e| match e {
            ClientEvent::Answer {
                id: i,
                outcome: Ok(v),
                ..
            } if i == id => Some(v),
            _ => None,
        })
    }

    fn new_session(&mut self) -> String {
        let id = self
            .client
            .client
            .call("session/new", &json!({ "cwd": ROOT }), self.now)
            .unwrap();
        self.drive();
        self.ack();
        self.answer(&id).unwrap()["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn answered(&self, turn: &str) -> bool {
        self.events.iter().any(|e| {
            matches!(e, ClientEvent::PromptAnswered { turn_id, outcome: Ok(_), .. }
                if turn_id == turn)
        })
    }

    fn said(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Update(u) => u.update.message_text(),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("|")
    }
}

#[test]
fn the_engine_runs_a_turn_and_its_card_without_the_shell() {
    let mut p = Pair::new(false);
    p.device.device_mut().start_link(p.now);
    p.drive();
    assert!(p.client.client.is_ready());
    let session = p.new_session();

    p.client
        .client
        .prompt(
            &session,
            json!([{ "type": "text", "text": "permit deploy\nsay shipped" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive();
    let card = p.events.iter().find_map(|e| match e.card() {
        Some((id, card)) if card.method() == PERMISSION => Some(id.clone()),
        _ => None,
    });
    let card = card.expect("the engine's card reached the client");
    let decision = PermissionAnswer::select("once");
    assert!(p.client.client.answer(&card, &decision, p.now));
    p.advance(100);

    let answered = p.events.iter().any(|e| {
        matches!(e, ClientEvent::PromptAnswered { turn_id, outcome: Ok(v), .. }
            if turn_id == "t1" && v["stopReason"] == "end_turn")
    });
    assert!(answered, "{:?}", p.events);
    let said = p.said();
    assert!(
        said.contains("allowed") && said.contains("shipped"),
        "{said}"
    );
    // The turn's start, its card's decision and every persist stayed in the loop.
    assert_eq!(p.shell, []);
}

/// A link whose socket still buffers `outbound.pause_bytes` gets no engine event: the turn
/// waits where it is, nothing piles up past the bound (one event's frames), and it goes on as
/// the socket drains.
#[test]
fn a_link_behind_holds_its_turn_at_pause_bytes_until_its_socket_drains() {
    const PAUSE: usize = 4096;
    let outbound = json!({ "outbound": { "pauseBytes": PAUSE, "maxBytes": 1 << 20 } });
    let mut p = Pair::configured(false, outbound, EngineChoice::Scripted);
    p.device.device_mut().start_link(p.now);
    p.drive();
    let session = p.new_session();
    p.drain();
    let chunks = |p: &Pair| p.said().split('|').filter(|t| t.ends_with('x')).count();

    let text = "chunks 40 500";
    let prompt = json!([{ "type": "text", "text": text }]);
    p.client
        .client
        .prompt(&session, prompt, Some("t1"), p.now)
        .unwrap();
    p.drive();
    let first = chunks(&p);
    assert!(
        first > 0 && first < 40,
        "{first} of 40 chunks before a drain"
    );
    assert!(p.held_back, "the pump did not say it held the turn back");
    // A chunk is two frames (`session/update`, `_lembas/event`) of about 600 bytes each.
    assert!(
        p.buffered >= PAUSE && p.buffered < PAUSE + 2048,
        "{} bytes buffered at a pause of {PAUSE}",
        p.buffered
    );
    // Time passes and the loop looks again: nothing moves while the socket is full.
    p.advance(1000);
    assert_eq!(
        chunks(&p),
        first,
        "chunks were sent to a socket that is behind"
    );

    let mut drains = 0;
    while !p.answered("t1") {
        drains += 1;
        assert!(drains < 40, "the turn did not end after {drains} drains");
        p.drain();
        assert!(p.buffered < PAUSE + 2048, "{} bytes buffered", p.buffered);
    }
    assert!(drains > 1, "one drain let the whole turn through");
    assert!(!p.held_back);
    let said: Vec<String> = p.said().split('|').map(|t| t[..10].to_string()).collect();
    let want: Vec<String> = (0..40).map(|i| format!("{i:010}")).collect();
    assert_eq!(said, want, "every chunk, once, in order");
}

#[test]
fn with_a_store_in_js_a_frame_waits_for_its_persist() {
    let mut p = Pair::new(true);
    p.device.device_mut().start_link(p.now);
    p.drive();
    p.ack();
    assert!(p.client.client.is_ready());

    let id = p
        .client
        .client
        .call("session/new", &json!({ "cwd": ROOT }), p.now)
        .unwrap();
    p.drive();
    assert!(!p.unacked.is_empty(), "the new session was written");
    assert!(
        p.answer(&id).is_none(),
        "answered before the session was durable"
    );
    p.ack();
    assert!(p.answer(&id).is_some());
    assert!(p
        .shell
        .iter()
        .all(|a| matches!(a, DeviceAction::Persist { .. })));
}

#[test]
fn with_a_store_in_js_a_session_set_aside_is_read_back_through_the_shell() {
    let mut p = Pair::with_sessions(true, json!({ "maxLive": 1 }));
    p.device.device_mut().start_link(p.now);
    p.drive();
    p.ack();
    let a = p.new_session();
    let prompt = |p: &mut Pair| {
        p.client
            .client
            .prompt(
                &a,
                json!([{ "type": "text", "text": "say once" }]),
                Some("t1"),
                p.now,
            )
            .unwrap();
        p.drive();
        p.ack();
        p.ack();
    };
    prompt(&mut p);
    // A second session: `a`, idle, is set aside (one in memory).
    p.new_session();
    assert_eq!(p.device.device_mut().live_session_count(), 1);
    assert_eq!(p.device.device_mut().session_count(), 2);
    p.shell.clear();
    prompt(&mut p);
    let load = p.shell.iter().find_map(|x| match x {
        DeviceAction::LoadSession {
            request,
            session_id,
        } => Some((*request, session_id.clone())),
        _ => None,
    });
    let (request, session_id) = load.expect("the shell was asked to read the session back");
    assert_eq!(session_id, a);
    let entries = p.store.session_entries(&a);
    let bad = p
        .device
        .device_mut()
        .handle_session_loaded(request, entries, p.now);
    assert!(bad.is_empty(), "{bad:?}");
    p.drive();
    p.ack();
    p.ack();
    let answers: Vec<&Value> = p
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::PromptAnswered {
                turn_id,
                outcome: Ok(v),
                ..
            } if turn_id == "t1" => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 2, "{:?}", p.events);
    assert_eq!(answers[0], answers[1]);
    // The duplicate was answered from the ledger read back: the turn said its line once.
    assert_eq!(p.said(), "once");
}

#[test]
fn deletes_are_handed_out_to_keep_only_when_they_change() {
    let client = Client::new(ClientConfig::default(), Time(0)).unwrap();
    let mut run = ClientLoop::new(client, Vec::new());
    let mut out = Vec::new();
    run.client.delete_session("ses_gone", Time(0));
    run.pump(Time(0), &mut out);
    let kept = vec![("ses_gone".to_string(), 0)];
    assert_eq!(out, [ClientAction::Keep(kept.clone())]);
    out.clear();
    run.pump(Time(1), &mut out);
    assert_eq!(out, []);

    // After a reload, what was loaded is not written back unchanged.
    let mut client = Client::new(ClientConfig::default(), Time(0)).unwrap();
    client.restore_pending_deletes(&kept);
    let mut run = ClientLoop::new(client, kept);
    run.pump(Time(0), &mut out);
    assert_eq!(out, []);
}

/// The engine's calls that reached the shell since the last look.
fn io_calls(p: &mut Pair) -> Vec<IoCall> {
    let (io, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut p.shell)
        .into_iter()
        .partition(|a| matches!(a, DeviceAction::Io(_)));
    p.shell = rest;
    io.into_iter()
        .map(|a| match a {
            DeviceAction::Io(call) => call,
            _ => unreachable!(),
        })
        .collect()
}

/// With the model engine the loop hands its HTTP to the shell as `Io` actions and takes the
/// replies back; the instance's models reach the device and the engine through `set_models`.
#[test]
fn the_model_engine_asks_the_shell_for_its_http_and_streams_the_reply() {
    let mut p = Pair::with(
        false,
        json!({}),
        EngineChoice::Model(ModelEngineConfig::default()),
    );
    let served = vec![Model::served("qwen/coder")];
    assert!(p.device.set_models(served.clone(), p.now));
    assert!(!p.device.set_models(served, p.now), "the same list again");
    p.device.device_mut().start_link(p.now);
    p.drive();
    let id = p
        .client
        .client
        .call(
            "session/new",
            &json!({ "cwd": ROOT, "_meta": { "lembas_model": "qwen/coder" } }),
            p.now,
        )
        .unwrap();
    p.drive();
    let session = p.answer(&id).expect("session/new answered")["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    p.client
        .client
        .prompt(
            &session,
            json!([{ "type": "text", "text": "hi" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive();

    let calls = io_calls(&mut p);
    let [IoCall::Fetch {
        id: call,
        method: HttpMethod::Post,
        path,
        body,
    }] = &calls[..]
    else {
        panic!("one chat completion asked for: {calls:?}")
    };
    assert_eq!(path, "/v1/chat/completions");
    let body: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(body["model"], "qwen/coder");
    assert_eq!(body["stream"], true);
    let call = *call;

    let head = IoReply::Head {
        status: 200,
        retry_after: None,
    };
    let stream = [
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\ndata: [DONE]\n\n",
    ];
    let mut replies = vec![head];
    replies.extend(stream.iter().map(|s| IoReply::Body(s.as_bytes().to_vec())));
    replies.push(IoReply::End);
    for reply in replies {
        p.device.handle_io(call, reply, p.now);
        p.drive();
        // One read at a time: the next is asked for once this one's events are taken.
        let reads: Vec<_> = io_calls(&mut p)
            .into_iter()
            .filter(|c| matches!(c, IoCall::Read { .. }))
            .collect();
        assert!(reads.len() <= 1, "{reads:?}");
    }
    assert_eq!(p.said(), "Hel|lo");
    let answered = p.events.iter().any(|e| {
        matches!(e, ClientEvent::PromptAnswered { turn_id, outcome: Ok(v), .. }
            if turn_id == "t1" && v["stopReason"] == "end_turn")
    });
    assert!(answered, "{:?}", p.events);
}
