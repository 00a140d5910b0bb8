//! `Lone`: a bare client driven frame by frame against a device the test plays, with no
//! liveness timer, at time zero. What it sends comes back as JSON; what it hands out is kept.

use lembas_core::client::{event_json, Client, ClientEvent, ClientOutput};
use lembas_core::jsonrpc::{Id, RpcError};
use lembas_core::testing::device_frames;
use lembas_core::{ClientConfig, Time};
use serde_json::Value;

pub struct Lone {
    pub c: Client,
    /// Every event the client handed out, in order.
    pub events: Vec<ClientEvent>,
}

impl Lone {
    pub fn new() -> Lone {
        Lone::with(|_| {})
    }

    /// A client with `tweak` applied to its config.
    pub fn with(tweak: impl FnOnce(&mut ClientConfig)) -> Lone {
        let mut config = ClientConfig::default();
        config.liveness = None;
        tweak(&mut config);
        Lone {
            c: Client::new(config, Time::ZERO).unwrap(),
            events: Vec::new(),
        }
    }

    /// The frames sent since last asked; events go to `self.events`.
    pub fn sent(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(o) = self.c.poll_output() {
            match o {
                ClientOutput::Send(f) => out.push(serde_json::from_slice(&f).unwrap()),
                ClientOutput::Event(e) => self.events.push(e),
                _ => {}
            }
        }
        out
    }

    pub fn hear(&mut self, frame: Value) -> Vec<Value> {
        self.c
            .handle_frame(frame.to_string().as_bytes(), Time::ZERO);
        self.sent()
    }

    /// A new link, its hello heard; the initialize request the client sent.
    pub fn hello(&mut self) -> Value {
        self.c.handle_link_up(Time::ZERO);
        self.hear(device_frames::hello(3, "2.0.0", "box"))
            .into_iter()
            .find(|f| f["method"] == "initialize")
            .expect("initialize is sent after the hello")
    }

    /// A new link to a device listing `capabilities`; what the client sent once ready.
    pub fn link(&mut self, capabilities: &[&str]) -> Vec<Value> {
        let init = self.hello();
        let sent = self.hear(device_frames::initialize_answer(&init["id"], capabilities));
        assert!(self.c.is_ready());
        sent
    }

    /// The link goes down.
    pub fn cut(&mut self) {
        self.c.handle_link_down(Time::ZERO);
        self.sent();
    }

    /// A call made by the UI; its id.
    pub fn call(&mut self, method: &str, params: Value) -> Id {
        let id = self.c.call(method, &params, Time::ZERO).unwrap();
        self.sent();
        id
    }

    /// The answers handed out since `from`: (id, method, outcome).
    pub fn answers(&self, from: usize) -> Vec<(Id, String, Result<Value, RpcError>)> {
        self.events[from..]
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Answer {
                    id,
                    method,
                    outcome,
                } => Some((id.clone(), method.clone(), outcome.clone())),
                _ => None,
            })
            .collect()
    }

    /// The text of the chunks handed out.
    pub fn text(&self) -> String {
        self.events
            .iter()
            .map(event_json)
            .filter_map(|e| {
                e["params"]["update"]["content"]["text"]
                    .as_str()
                    .map(String::from)
            })
            .collect()
    }

    /// The `since` of each gap handed out.
    pub fn gaps(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Gap { since, .. } => Some(*since),
                _ => None,
            })
            .collect()
    }
}
