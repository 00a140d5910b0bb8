//! The client (the LLeMbas role): one web UI's side of a device's link. It checks the device's
//! protocol on `_lembas/hello`, initializes, keeps the device's capability list, and refuses to
//! call a method the device did not list. It outlives the links it is given, one at a time.
//! Inputs are its `handle_*` and call methods, or one [`Input`] value given to
//! [`Client::handle`] (input.rs).

mod deletes;
mod event_json;
mod heard;
mod input;
mod resume;
mod timers;
mod turns;

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use serde_json::Value;

use crate::config::{ClientConfig, ConfigError};
use crate::device::CLOSE_PROTOCOL;
use crate::jsonrpc::{self, Id, Message, RpcError};
use crate::liveness::{Beat, Heartbeat, CLOSE_DEAD_LINK};
use crate::methods::{self, Direction, Kind};
use crate::rng::Rng;
use crate::time::{Clock, Time};
use crate::wire::event::notice;
#[cfg(feature = "typed-events")]
use crate::wire::event::{card::CardParams, lembas::EventParams, update::UpdateParams};
use crate::wire::handshake::{Hello, InitializeRequest, Initialized, PROTOCOL};
pub use event_json::event_json;
pub use input::{Handled, Input};
pub use timers::ClientTimer;
pub use turns::Reattach;
use turns::{Purpose, Rows};

/// What the client asks of its shell, and what it tells its UI. Serde: the JS API's
/// `ClientOutput` (`{"type": "send", "frame": "..."}`, `{"type": "event", "event": {...}}`).
#[derive(Debug, PartialEq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ClientOutput {
    /// Send one message on the link.
    #[serde(serialize_with = "frame_member")]
    Send(Vec<u8>),
    /// Close the link with this code and reason; then report [`Client::handle_link_down`].
    Close { code: u16, reason: String },
    /// Send a WebSocket ping: nothing has arrived on the link for `liveness.ping_after_ms`.
    /// Report the pong (and any ping) with [`Client::handle_activity`]. Only asked for with
    /// `ClientConfig::liveness` set; a browser's socket cannot ping, so its shell sets `None`.
    Ping,
    #[serde(serialize_with = "event_member")]
    Event(ClientEvent),
}

crate::shape::member_fn!(event_member, "event", ClientEvent);

/// `{ frame: <text> }`.
fn frame_member<S: serde::Serializer>(frame: &[u8], s: S) -> Result<S::Ok, S::Error> {
    struct Text<'a>(&'a [u8]);
    impl serde::Serialize for Text<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            crate::shape::text(self.0, s)
        }
    }
    crate::shape::member("frame", &Text(frame), s)
}

/// What the client tells its UI. Serde: the JS API's `ClientEvent`, tagged by `kind`, an
/// answer's `result` or `error` beside its other members (see [`event_json`]).
#[derive(Debug, PartialEq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum ClientEvent {
    /// The device greeted us (`_lembas/hello`).
    #[serde(serialize_with = "event_json::hello_member")]
    Hello(Hello),
    /// `initialize` was answered: the link is ready, with these capabilities.
    Ready { capabilities: Vec<String> },
    /// The link was refused and closed by us (4400 for an old device), with the reason.
    Refused { code: u16, reason: String },
    /// The answer to a call made with [`Client::call`]; or, when its link went down first, an
    /// error with code [`crate::jsonrpc::code::LINK_LOST`] (its answer can never come).
    Answer {
        id: Id,
        method: String,
        #[serde(flatten, serialize_with = "event_json::outcome")]
        outcome: Result<Value, RpcError>,
    },
    /// A prompt sent with [`Client::prompt`] was answered (on this link or, after a reattach,
    /// a later one).
    PromptAnswered {
        session_id: String,
        turn_id: String,
        #[serde(flatten, serialize_with = "event_json::outcome")]
        outcome: Result<Value, RpcError>,
    },
    /// An incomplete prompt was picked up on a new link.
    Reattached {
        session_id: String,
        turn_id: String,
        #[serde(flatten, serialize_with = "event_json::reattach")]
        how: Reattach,
    },
    /// The device answered a delete (`existed`: it had the session).
    Deleted { session_id: String, existed: bool },
    /// A delete was refused five times and given up.
    DeleteGivenUp { session_id: String, reason: String },
    /// A card is no longer waited for (answered elsewhere, or timed out): take it down.
    CardSettled {
        session_id: String,
        tool_call_id: String,
    },
    /// What `session_id` sent after seq `since` (the lower of its streams' last seqs handed
    /// out: client/resume.rs) could not all be had on this link (the device's log no longer
    /// reaches back, or it has none): import its `history`. Events after the gap follow as
    /// usual.
    Gap { session_id: String, since: u64 },
    /// A `session/update`, typed (with the `typed-events` feature). Its JS shape is still the notification's
    /// (`{"kind": "notification", "method": "session/update", "params": {...}}`).
    #[cfg(feature = "typed-events")]
    #[serde(
        rename = "notification",
        serialize_with = "event_json::update_notification"
    )]
    Update(UpdateParams),
    /// An `_lembas/event`, typed; its JS shape as [`ClientEvent::Update`]'s.
    #[cfg(feature = "typed-events")]
    #[serde(
        rename = "notification",
        serialize_with = "event_json::event_notification"
    )]
    Event(EventParams),
    /// Any other notification from the device (`_lembas/session/announce`, terminal output,
    /// ...), or an update or event the vocabulary does not know (or, without `typed-events`,
    /// any).
    Notification { method: String, params: Value },
    /// A card the device put to us (`session/request_permission`, `_lembas/question`,
    /// `_lembas/plan`), typed (with `typed-events`), to be answered with [`Client::answer`] or
    /// [`Client::respond`]. Its JS shape is still the request's (`{"kind": "request", "id",
    /// "method", "params"}`).
    #[cfg(feature = "typed-events")]
    #[serde(rename = "request", serialize_with = "event_json::card_request")]
    Card { id: Id, card: Box<CardParams> },
    /// Any other request from the device, or a card the vocabulary does not read as it came
    /// (or, without `typed-events`, any), to be answered with [`Client::respond`].
    Request {
        id: Id,
        method: String,
        params: Value,
    },
}

/// Why a call was refused before anything was sent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// No link, or its handshake has not finished.
    NotReady,
    /// The protocol has no such client-to-device request.
    UnknownMethod(String),
    /// The device did not list the capability that gates the method.
    NotListed { method: String, capability: String },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NotReady => {
                f.write_str("the link is not ready (no link, or no initialize yet)")
            }
            CallError::UnknownMethod(m) => write!(f, "`{m}` is not a request a client sends"),
            CallError::NotListed { method, capability } => write!(
                f,
                "`{method}` needs capability `{capability}`, which the device did not list"
            ),
        }
    }
}

impl std::error::Error for CallError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No link.
    Down,
    /// Linked, waiting for `_lembas/hello`.
    AwaitingHello,
    /// `initialize` sent with this id.
    Initializing,
    Ready,
    /// We refused the device and closed the link.
    Refused,
}

pub struct Client {
    config: ClientConfig,
    clock: Clock,
    phase: Phase,
    capabilities: Vec<String>,
    /// Calls sent on the current link and not yet answered: id → method.
    pending: BTreeMap<Id, String>,
    /// What some of those calls were for (prompts, reattach questions).
    purposes: BTreeMap<Id, Purpose>,
    rows: Rows,
    deletes: deletes::Deletes,
    resume: resume::Resume,
    /// Cards the device put to us and we have not answered: (sessionId, toolCallId) → request
    /// id. Keyed by session too, since two sessions' tool call ids may repeat.
    cards: BTreeMap<(String, String), Id>,
    /// Requests the device sent on the current link and we have not answered.
    incoming: std::collections::BTreeSet<Id>,
    rng: Rng,
    next_id: u64,
    out: VecDeque<ClientOutput>,
    /// The current link's heartbeat (with liveness on), until it is down or given up.
    beat: Option<Heartbeat>,
}

impl Client {
    pub fn new(config: ClientConfig, now: Time) -> Result<Client, ConfigError> {
        config.validate()?;
        Ok(Client {
            purposes: BTreeMap::new(),
            rows: Rows::new(),
            deletes: deletes::Deletes::default(),
            resume: resume::Resume::default(),
            cards: BTreeMap::new(),
            incoming: Default::default(),
            rng: Rng::new(config.seed),
            config,
            clock: Clock::new(now),
            phase: Phase::Down,
            capabilities: Vec::new(),
            pending: BTreeMap::new(),
            next_id: 0,
            out: VecDeque::new(),
            beat: None,
        })
    }

    /// A device's link reached us.
    pub fn handle_link_up(&mut self, now: Time) {
        self.clock.advance(now);
        self.phase = Phase::AwaitingHello;
        self.capabilities.clear();
        self.answer_lost_calls();
        self.beat = self.config.liveness.map(|l| Heartbeat::new(l, now));
    }

    /// The link is gone (closed by either side, or cut).
    pub fn handle_link_down(&mut self, now: Time) {
        self.clock.advance(now);
        self.phase = Phase::Down;
        self.beat = None;
        self.answer_lost_calls();
        self.cards.clear();
        self.incoming.clear();
        self.rows_link_down();
        self.deletes_link_down();
    }

    pub fn handle_frame(&mut self, frame: &[u8], now: Time) {
        let now = self.clock.advance(now);
        if matches!(self.phase, Phase::Down | Phase::Refused) {
            return;
        }
        if let Some(beat) = &mut self.beat {
            beat.heard(now);
        }
        match jsonrpc::decode(frame, &self.config.frames) {
            Err(e) => self.send(e.response()),
            Ok(Message::Notification(n)) => {
                let params = n
                    .params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or(Value::Null);
                if n.method == "_lembas/hello" {
                    self.on_hello(n.params);
                } else if self.phase != Phase::Ready {
                } else if let Some((session, seq)) = resume::sequenced(&params) {
                    let session = session.to_string();
                    self.on_sequenced(session, seq, n.method.into_owned(), params);
                } else {
                    self.hand_out(n.method.into_owned(), params);
                }
            }
            Ok(Message::Request(r)) => {
                if self.phase != Phase::Ready {
                    self.send(jsonrpc::encode_error(
                        Some(&r.id),
                        &RpcError::invalid_request("the link is not initialized yet"),
                    ));
                    return;
                }
                let params: Value = r
                    .params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or(Value::Null);
                let tool_call_id = params["toolCallId"]
                    .as_str()
                    .or_else(|| params["toolCall"]["toolCallId"].as_str());
                if let Some(t) = tool_call_id {
                    let session = params["sessionId"].as_str().unwrap_or("").to_string();
                    self.cards.insert((session, t.to_string()), r.id.clone());
                }
                self.incoming.insert(r.id.clone());
                self.emit(ClientEvent::asked(r.id, r.method.into_owned(), params));
            }
            Ok(Message::Response(r)) => {
                let Some(id) = r.id else { return };
                let Some(method) = self.pending.remove(&id) else {
                    return;
                };
                let purpose = self.purposes.remove(&id).unwrap_or(Purpose::Plain);
                if method == "initialize" {
                    return self.on_initialized(r.outcome.and_then(|raw| {
                        serde_json::from_str::<Initialized>(raw.get())
                            .map_err(|e| RpcError::invalid_params(e.to_string()))
                    }));
                }
                let outcome = r.outcome.and_then(|raw| {
                    serde_json::from_str::<Value>(raw.get())
                        .map_err(|e| RpcError::new(jsonrpc::code::PARSE_ERROR, e.to_string()))
                });
                if let Err(outcome) = self.on_turn_answer(purpose, outcome) {
                    self.emit(ClientEvent::Answer {
                        id,
                        method,
                        outcome,
                    });
                }
            }
        }
    }

    /// Something that is not a message arrived on the link (a WebSocket pong or ping): it is
    /// alive.
    pub fn handle_activity(&mut self, now: Time) {
        let now = self.clock.advance(now);
        if let Some(beat) = &mut self.beat {
            beat.heard(now);
        }
    }

    pub fn handle_timeout(&mut self, now: Time) {
        let now = self.clock.advance(now);
        self.check_link_alive(now);
        self.expire_deletes(now);
    }

    /// Ping a quiet link; close a silent one (the device dials again; its prompts are
    /// reattached on the next link).
    fn check_link_alive(&mut self, now: Time) {
        let Some(beat) = &mut self.beat else { return };
        match beat.poll(now) {
            Beat::Nothing => {}
            Beat::Ping => self.out.push_back(ClientOutput::Ping),
            Beat::Dead => {
                let silent_ms = beat.silent_ms(now);
                // Given up: no more pings, and the shell reports the link down.
                self.beat = None;
                self.out.push_back(ClientOutput::Close {
                    code: CLOSE_DEAD_LINK,
                    reason: format!("nothing arrived for {silent_ms} ms (link.dead_after_ms)"),
                });
            }
        }
    }

    /// Send a request to the device. Refused, with nothing sent, when the link is not ready or
    /// the device did not list the method's capability.
    pub fn call<P: Serialize>(
        &mut self,
        method: &str,
        params: &P,
        now: Time,
    ) -> Result<Id, CallError> {
        self.clock.advance(now);
        let spec = methods::find(method)
            .filter(|m| m.direction == Direction::ClientToAgent && m.kind == Kind::Request)
            .ok_or_else(|| CallError::UnknownMethod(method.to_string()))?;
        if self.phase != Phase::Ready || spec.name == "initialize" {
            return Err(CallError::NotReady);
        }
        if let Some(cap) = spec.capability {
            if !self.capabilities.iter().any(|c| c == cap) {
                return Err(CallError::NotListed {
                    method: method.to_string(),
                    capability: cap.to_string(),
                });
            }
        }
        let id = self.request(spec.name, params);
        if spec.name == "session/new" {
            self.purposes.insert(id.clone(), Purpose::NewSession);
        }
        Ok(id)
    }

    /// Send a notification to the device, gated like [`Client::call`].
    pub fn notify<P: Serialize>(
        &mut self,
        method: &str,
        params: &P,
        now: Time,
    ) -> Result<(), CallError> {
        self.clock.advance(now);
        let spec = methods::find(method)
            .filter(|m| m.direction == Direction::ClientToAgent && m.kind == Kind::Notification)
            .ok_or_else(|| CallError::UnknownMethod(method.to_string()))?;
        if self.phase != Phase::Ready {
            return Err(CallError::NotReady);
        }
        if let Some(cap) = spec.capability {
            if !self.capabilities.iter().any(|c| c == cap) {
                return Err(CallError::NotListed {
                    method: method.to_string(),
                    capability: cap.to_string(),
                });
            }
        }
        self.send(jsonrpc::encode_notification(spec.name, params));
        Ok(())
    }

    /// Answer a request the device sent on the current link. An answer to a request of an
    /// earlier link (or one already answered) is not sent: it would reach a device that never
    /// asked it on this link. Nor is a card's answer that names, in `_meta.lembas.toolCallId`,
    /// another card than the one this request asked (the request stays open). Returns whether
    /// it was sent.
    pub fn respond(&mut self, id: &Id, outcome: Result<Value, RpcError>, now: Time) -> bool {
        self.clock.advance(now);
        if !self.incoming.contains(id) {
            return false;
        }
        if let Ok(answer) = &outcome {
            let asked = self
                .cards
                .iter()
                .find(|(_, card)| *card == id)
                .map(|((_, tool_call_id), _)| tool_call_id);
            if asked.is_some_and(|t| crate::wire::card::names_another_card(answer, t)) {
                return false;
            }
        }
        self.incoming.remove(id);
        self.cards.retain(|_, card| card != id);
        let frame = match outcome {
            Ok(result) => jsonrpc::encode_result(id, &result),
            Err(error) => jsonrpc::encode_error(Some(id), &error),
        };
        self.send(frame);
        true
    }

    /// Answer a card with one of `wire::card`'s answers (an approval's, a question's, a
    /// plan's): [`Client::respond`] with it as the result.
    pub fn answer<A: crate::wire::card::Answer>(&mut self, id: &Id, answer: &A, now: Time) -> bool {
        self.respond(id, Ok(answer.to_value()), now)
    }

    #[must_use]
    pub fn poll_output(&mut self) -> Option<ClientOutput> {
        self.out.pop_front()
    }

    /// Cards open now: toolCallId and the request to answer.
    pub fn open_cards(&self) -> impl Iterator<Item = (&str, &Id)> {
        self.cards.iter().map(|((_, t), id)| (t.as_str(), id))
    }

    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// The capabilities the device listed on the current link.
    pub fn capabilities(&self) -> &[String] {
        &self.capabilities
    }

    fn on_hello(&mut self, params: Option<&serde_json::value::RawValue>) {
        if self.phase != Phase::AwaitingHello {
            return;
        }
        let hello: Hello = match jsonrpc::parse_params("_lembas/hello", params) {
            Ok(h) => h,
            Err(e) => {
                return self.refuse(CLOSE_PROTOCOL, format!("unreadable hello: {}", e.message))
            }
        };
        let protocol = hello.protocol;
        self.emit(ClientEvent::Hello(hello));
        match protocol {
            PROTOCOL => {
                self.phase = Phase::Initializing;
                self.request("initialize", &InitializeRequest::lembas(self.config.show));
            }
            p if p < PROTOCOL => self.refuse(CLOSE_PROTOCOL, "update LLeMbas CLI to 2.0".into()),
            p => self.refuse(
                CLOSE_PROTOCOL,
                format!("the device speaks link protocol {p}; this LLeMbas speaks {PROTOCOL}: update LLeMbas"),
            ),
        }
    }

    fn on_initialized(&mut self, answer: Result<Initialized, RpcError>) {
        match answer.map(Initialized::capabilities) {
            Ok(Some(capabilities)) => {
                self.capabilities = capabilities;
                self.phase = Phase::Ready;
                self.emit(ClientEvent::Ready {
                    capabilities: self.capabilities.clone(),
                });
                self.catch_up_all();
                self.reattach_all();
                self.send_deletes();
            }
            Ok(None) => self.refuse(
                CLOSE_PROTOCOL,
                "the device did not answer initialize with link protocol 3: update LLeMbas CLI to 2.0"
                    .into(),
            ),
            Err(e) => self.refuse(1002, format!("initialize failed: {}", e.message)),
        }
    }

    /// A notification from the device, live or fetched, to the UI.
    fn hand_out(&mut self, method: String, params: Value) {
        if method == notice::SETTLED {
            let key = (
                params["sessionId"].as_str().unwrap_or("").to_string(),
                params["toolCallId"].as_str().unwrap_or("").to_string(),
            );
            if self.cards.remove(&key).is_some() {
                self.emit(ClientEvent::CardSettled {
                    session_id: key.0,
                    tool_call_id: key.1,
                });
            }
        } else if self.passes_delete_rules(&method, &params) {
            self.emit(ClientEvent::heard(method, params));
        }
    }

    /// Forget the calls of the link that went down. The device answers on the link that asked,
    /// so their answers can never come: each call the UI made is answered now with a
    /// [`jsonrpc::code::LINK_LOST`] error, and nothing that waits on one hangs in any shell.
    /// The client's own calls (initialize, reattach, catch-up, deletes) are made again on the
    /// next link; a prompt's row is reattached there.
    fn answer_lost_calls(&mut self) {
        let mut purposes = std::mem::take(&mut self.purposes);
        for (id, method) in std::mem::take(&mut self.pending) {
            let purpose = purposes.remove(&id).unwrap_or(Purpose::Plain);
            let the_uis = matches!(purpose, Purpose::Plain | Purpose::NewSession);
            if the_uis && method != "initialize" {
                let lost = RpcError::new(
                    jsonrpc::code::LINK_LOST,
                    "the link went down before the device answered: call again once a link is ready",
                );
                self.emit(ClientEvent::Answer {
                    id,
                    method,
                    outcome: Err(lost),
                });
            }
        }
    }

    fn refuse(&mut self, code: u16, reason: String) {
        self.phase = Phase::Refused;
        self.beat = None;
        self.out.push_back(ClientOutput::Close {
            code,
            reason: reason.clone(),
        });
        self.emit(ClientEvent::Refused { code, reason });
    }

    fn request<P: Serialize>(&mut self, method: &str, params: &P) -> Id {
        let id = Id::number(self.next_id);
        self.next_id += 1;
        self.pending.insert(id.clone(), method.to_string());
        self.send(jsonrpc::encode_request(&id, method, params));
        id
    }

    fn send(&mut self, frame: Vec<u8>) {
        self.out.push_back(ClientOutput::Send(frame));
    }

    fn emit(&mut self, event: ClientEvent) {
        self.out.push_back(ClientOutput::Event(event));
    }
}
