//! Many seeded runs of cards and deletes over a faulty link (frames dropped, duplicated and
//! reordered, the link cut, the instance unreachable, the device restarted from its store):
//! prompts put approvals, questions and plans, which the web answers (at once, late, twice, with
//! an error, or never) and a terminal sharing the session answers too, sometimes at the same
//! instant; sessions are deleted by the client and on the device, with the link up or down.
//! Then the run ends cleanly (no faults, every card answered) and:
//!
//! - every card is decided exactly once: no toolCallId is decided twice, every decision is one
//!   an answer to *that* card (or its timeout, or "nobody to ask") could give, no turn is left
//!   waiting on a card, and every card of a turn that was not cut short (by a restart or its
//!   session's delete) is decided;
//! - every delete is delivered at least once and applied once: the session is gone from the
//!   device and its store, its attachments were removed once, the client's deletes were
//!   answered (none given up), and no delete made on the device is still kept unsent;
//! - no session reappears once its delete was acknowledged: no frame sent after it names it as
//!   existing, and asked at the end, the device does not know it.
//!
//! Two promises failed on the core once, and keep their own properties and cut-down tests:
//! - a late answer the web gives to a card asked on a link that has since dropped decided
//!   another card (the device's request ids started again on each connection);
//! - a delete made on the device did not always reach the client (it was forgotten once its
//!   frame was queued, even when the frame never left or was lost with the link).
//!
//! Card ids are unique across a run (a turn's script starts with as many `tool` steps as cards
//! came before it), because the Pair records decisions by toolCallId alone.
//!
//! `LEMBAS_PROPERTY_SEEDS=n` runs n seeds (default 150 here; the two regression properties run
//! more) from a random offset, printed, that `LEMBAS_PROPERTY_SEED_OFFSET` fixes (see
//! `property/mod.rs`); `LEMBAS_PROPERTY_SEED=s` runs seed s alone and prints what happened in
//! it (`LEMBAS_PROPERTY_TRACE=1`: every frame too).

use std::collections::{BTreeMap, BTreeSet};

use lembas_core::client::ClientEvent;
use lembas_core::device::{ConnId, ConnKind, Effect, TurnPhase};
use lembas_core::engine::{
    Decision, PermissionDecision, PlanDecision, QuestionAnswer, QuestionDecision,
};
use lembas_core::jsonrpc::{code, Id, RpcError};
use lembas_core::rng::Rng;
use lembas_core::store::Table;
use lembas_core::testing::{Dir, Faults, Pair};
use lembas_core::{ClientConfig, DeviceConfig, Time};
use serde_json::{json, Value};

mod property;

const APPROVAL_TIMEOUT_MS: u64 = 10_000;
const STEPS: usize = 40;
const SESSIONS: usize = 4;
/// Sessions a run deletes at most, so that cards keep coming in the others.
const MAX_DELETED: usize = 2;
const FAULTS: Faults = Faults {
    drop_permille: 20,
    duplicate_permille: 50,
    max_delay_ms: 40,
    cut_permille: 10,
    drop_only_to_device: false,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Permit,
    Ask,
    Plan,
}

impl Kind {
    fn of(method: &str) -> Option<Kind> {
        match method {
            "session/request_permission" => Some(Kind::Permit),
            "_lembas/question" => Some(Kind::Ask),
            "_lembas/plan" => Some(Kind::Plan),
            _ => None,
        }
    }
}

fn tool_call_id(params: &Value) -> String {
    params["toolCall"]["toolCallId"]
        .as_str()
        .or_else(|| params["toolCallId"].as_str())
        .expect("a card names its toolCallId")
        .to_string()
}

/// A person's answer to card `id`, which carries the id so the decision shows which card's
/// answer it was; when `named`, also in `_meta.lembas.toolCallId`, as a client may name the
/// card it answers.
fn answer(kind: Kind, id: &str, rng: &mut Rng, named: bool) -> Value {
    let mut a = match kind {
        Kind::Permit if rng.below(2) == 0 => json!({
            "outcome": { "outcome": "selected", "optionId": "once" },
            "_meta": { "lembas": { "command": id } },
        }),
        Kind::Permit => json!({
            "outcome": { "outcome": "selected", "optionId": "deny" },
            "_meta": { "lembas": { "feedback": id } },
        }),
        Kind::Ask => {
            json!({ "outcome": "answered", "answers": [{ "kind": "custom", "text": id }] })
        }
        Kind::Plan => json!({ "outcome": "revise", "feedback": id }),
    };
    if named {
        a["_meta"]["lembas"]["toolCallId"] = json!(id);
    }
    a
}

/// Whether `d` is a decision an answer to card `id` of this kind, its timeout, or nobody to ask
/// could make.
fn fits(kind: Kind, id: &str, d: &Decision) -> bool {
    match (kind, d) {
        (Kind::Permit, Decision::Permission(PermissionDecision::AllowOnce { command })) => {
            command.as_deref() == Some(id)
        }
        (
            Kind::Permit,
            Decision::Permission(PermissionDecision::Deny {
                feedback,
                timed_out,
            }),
        ) => match feedback {
            Some(f) => f == id && !timed_out,
            None => true,
        },
        (Kind::Ask, Decision::Question(QuestionDecision::Answered(a))) => {
            a.as_slice() == [QuestionAnswer::Custom { text: id.into() }]
        }
        (Kind::Plan, Decision::Plan(PlanDecision::Revise { feedback })) => feedback == id,
        (Kind::Ask, Decision::Question(QuestionDecision::Dismissed { .. }))
        | (Kind::Plan, Decision::Plan(PlanDecision::Dismissed { .. }))
        | (Kind::Ask | Kind::Plan, Decision::NobodyToAsk) => true,
        _ => false,
    }
}

struct Turn {
    session: String,
    text: String,
    cards: Vec<String>,
}

struct Run {
    seed: u64,
    p: Pair,
    rng: Rng,
    sessions: Vec<String>,
    turns: BTreeMap<String, Turn>,
    /// toolCallId → (turn, kind), for every card a script will ask.
    cards: BTreeMap<String, (String, Kind)>,
    next_card: usize,
    /// Turns cut short: running when the device restarted, or in a deleted session.
    killed: BTreeSet<String>,
    client_deleted: BTreeSet<String>,
    device_deleted: BTreeMap<String, Time>,
    terminal: Option<ConnId>,
    terminal_seen: usize,
    terminal_next: u64,
    events_seen: usize,
    /// Links the web has been ready on (`Ready` events), so an answer knows its link.
    web_link: usize,
    /// Whether the web, late, answers cards asked on a link that has since dropped (a person
    /// clicking a card the UI did not take down).
    stale_answers: bool,
    late_web: Vec<(usize, Id, Value)>,
    late_terminal: Vec<Value>,
    /// Whether an answer names its card in `_meta.lembas.toolCallId`: drawn apart from `rng`,
    /// so the seeds that once failed still make the runs they made then.
    naming: Rng,
    log: Vec<String>,
}

impl Run {
    fn new(seed: u64) -> Run {
        let mut d = DeviceConfig::default();
        d.remote.enabled = true;
        d.remote.roots = vec!["/home/dev/work".into()];
        d.remote.trusted = d.remote.roots.clone();
        d.remote.approval_timeout_ms = APPROVAL_TIMEOUT_MS;
        d.seed = seed;
        let mut c = ClientConfig::default();
        c.seed = seed.wrapping_add(1);
        let mut p = Pair::new(d, c, Faults::none(), seed);
        p.start().unwrap();
        let mut run = Run {
            seed,
            p,
            rng: Rng::new(seed.wrapping_mul(0x9e37_79b9).wrapping_add(7)),
            sessions: Vec::new(),
            turns: BTreeMap::new(),
            cards: BTreeMap::new(),
            next_card: 0,
            killed: BTreeSet::new(),
            client_deleted: BTreeSet::new(),
            device_deleted: BTreeMap::new(),
            terminal: None,
            terminal_seen: 0,
            terminal_next: 0,
            events_seen: 0,
            web_link: 0,
            stale_answers: false,
            late_web: Vec::new(),
            late_terminal: Vec::new(),
            naming: Rng::new(seed ^ 0x6e61_6d65),
            log: Vec::new(),
        };
        for _ in 0..SESSIONS {
            let s = run.new_session();
            run.sessions.push(s);
        }
        run
    }

    /// Half the answers name their card.
    fn names_card(&mut self) -> bool {
        self.naming.below(2) == 0
    }

    fn note(&mut self, what: String) {
        let line = format!("{:?} {what}", self.p.now);
        self.log.push(line);
    }

    fn new_session(&mut self) -> String {
        let id = self
            .p
            .client
            .call(
                "session/new",
                &json!({ "cwd": "/home/dev/work" }),
                self.p.now,
            )
            .unwrap();
        self.p.settle().unwrap();
        self.p
            .client_events
            .iter()
            .find_map(|e| match e {
                ClientEvent::Answer {
                    id: i,
                    outcome: Ok(v),
                    ..
                } if *i == id => Some(v["sessionId"].as_str().unwrap().to_string()),
                _ => None,
            })
            .expect("session/new answered")
    }

    fn pick<T: Clone>(&mut self, from: &[T]) -> Option<T> {
        (!from.is_empty()).then(|| from[self.rng.below(from.len() as u64) as usize].clone())
    }

    fn live_sessions(&self) -> Vec<String> {
        self.sessions
            .iter()
            .filter(|s| !self.client_deleted.contains(*s))
            .cloned()
            .collect()
    }

    /// A new turn: cards (numbered after every card before them) or plain words.
    fn prompt(&mut self, step: usize) {
        let Some(session) = self.pick(&self.live_sessions()) else {
            return;
        };
        let turn = format!("t{step}");
        let mut lines: Vec<String> = Vec::new();
        let mut cards = Vec::new();
        if self.rng.below(10) < 7 {
            lines.extend((0..self.next_card).map(|_| "tool warm up".to_string()));
            for _ in 0..1 + self.rng.below(2) {
                self.next_card += 1;
                let id = format!("call_{}", self.next_card);
                let kind = [Kind::Permit, Kind::Ask, Kind::Plan][self.rng.below(3) as usize];
                lines.push(match kind {
                    Kind::Permit => format!("permit deploy {id}"),
                    Kind::Ask => format!("ask Which for {id}? | this | that"),
                    Kind::Plan => format!("plan Ship {id}"),
                });
                self.cards.insert(id.clone(), (turn.clone(), kind));
                cards.push(id);
            }
        } else {
            lines.push(format!("sleep {}", self.rng.below(300)));
        }
        lines.push(format!("say end of {turn}"));
        let text = lines.join("\n");
        self.log
            .push(format!("prompt {turn} in {session}: {cards:?}"));
        if self.send_prompt(&session, &turn, &text) {
            self.turns.insert(
                turn,
                Turn {
                    session,
                    text,
                    cards,
                },
            );
        } else {
            for c in &cards {
                self.cards.remove(c);
            }
        }
    }

    fn send_prompt(&mut self, session: &str, turn: &str, text: &str) -> bool {
        self.p
            .client
            .prompt(
                session,
                json!([{ "type": "text", "text": text }]),
                Some(turn),
                self.p.now,
            )
            .is_ok()
    }

    fn duplicate(&mut self) {
        let turns: Vec<String> = self.turns.keys().cloned().collect();
        if let Some(t) = self.pick(&turns) {
            let (s, text) = (self.turns[&t].session.clone(), self.turns[&t].text.clone());
            self.note(format!("duplicate {t}"));
            self.send_prompt(&s, &t, &text);
        }
    }

    fn deleted_count(&self) -> usize {
        let mut all: BTreeSet<&String> = self.client_deleted.iter().collect();
        all.extend(self.device_deleted.keys());
        all.len()
    }

    fn may_delete(&self, s: &str) -> bool {
        self.deleted_count() < MAX_DELETED
            || self.client_deleted.contains(s)
            || self.device_deleted.contains_key(s)
    }

    fn kill_session_turns(&mut self, s: &str) {
        for (t, turn) in &self.turns {
            if turn.session == s {
                self.killed.insert(t.clone());
            }
        }
    }

    fn client_delete(&mut self) {
        let candidates: Vec<String> = self
            .live_sessions()
            .into_iter()
            .filter(|s| self.may_delete(s))
            .collect();
        let Some(s) = self.pick(&candidates) else {
            return;
        };
        self.note(format!(
            "client deletes {s} (link {})",
            if self.p.client.is_ready() {
                "ready"
            } else {
                "down"
            }
        ));
        self.kill_session_turns(&s);
        self.client_deleted.insert(s.clone());
        self.p.client.delete_session(&s, self.p.now);
    }

    fn device_delete(&mut self) {
        let candidates: Vec<String> = self
            .sessions
            .iter()
            .filter(|s| !self.device_deleted.contains_key(*s) && self.may_delete(s))
            .cloned()
            .collect();
        let Some(s) = self.pick(&candidates) else {
            return;
        };
        self.kill_session_turns(&s);
        let now = self.p.now;
        let had = self.p.device.delete_session(&s, now);
        self.note(format!(
            "device deletes {s}: {had} (link {})",
            if self.p.link().is_some() {
                "up"
            } else {
                "down"
            }
        ));
        if had {
            self.device_deleted.insert(s, now);
        }
    }

    fn restart(&mut self) {
        for (t, turn) in &self.turns {
            if self.p.device.turn_state(&turn.session, t) == Some(TurnPhase::Running) {
                self.killed.insert(t.clone());
            }
        }
        self.note("restart".into());
        self.terminal = None;
        self.late_terminal.clear();
        self.p.restart_device().unwrap();
    }

    fn terminal_frame(&mut self, frame: Value) {
        let t = self.terminal.expect("a terminal");
        self.p.stdio(t, frame.to_string().as_bytes()).unwrap();
    }

    /// A terminal opens (if none is open) and comes to share a session.
    fn terminal_shares(&mut self) {
        if self.terminal.is_none() {
            let t = self.p.open_local(ConnKind::Terminal);
            self.terminal = Some(t);
            self.terminal_seen = 0;
            self.terminal_frame(
                json!({ "jsonrpc": "2.0", "id": "init", "method": "initialize",
                "params": { "protocolVersion": 1,
                            "clientCapabilities": { "_meta": { "lembas": { "protocol": 3 } } } } }),
            );
        }
        let sessions = self.sessions.clone();
        if let Some(s) = self.pick(&sessions) {
            self.terminal_next += 1;
            let id = format!("status-{}", self.terminal_next);
            self.note(format!("terminal shares {s}"));
            self.terminal_frame(json!({ "jsonrpc": "2.0", "id": id,
                "method": "_lembas/session/status", "params": { "sessionId": s } }));
        }
    }

    /// The web and the terminal take up the cards they were just asked: at once, later,
    /// twice, with an error, or never. At once on both sides is the same virtual instant.
    fn take_up_cards(&mut self, all_at_once: bool) {
        let mut asked: Vec<(usize, Id, &'static str, String)> = Vec::new();
        for e in &self.p.client_events[self.events_seen..] {
            match e {
                ClientEvent::Ready { .. } => self.web_link += 1,
                ClientEvent::Card { id, card } => asked.push((
                    self.web_link,
                    id.clone(),
                    card.method(),
                    card.tool_call_id().to_string(),
                )),
                ClientEvent::Request { method, .. } => {
                    panic!("the device asks only cards, as the vocabulary reads them: {method}")
                }
                _ => {}
            }
        }
        self.events_seen = self.p.client_events.len();
        for (link, id, method, tc) in asked {
            let kind = Kind::of(method).expect("a card's method");
            let named = self.names_card();
            let a = answer(kind, &tc, &mut self.rng, named);
            match if all_at_once { 0 } else { self.rng.below(10) } {
                0..=4 => {
                    self.p.client.respond(&id, Ok(a), self.p.now);
                }
                5 | 6 => self.late_web.push((link, id, a)),
                7 => {
                    let named = self.names_card();
                    let again = answer(kind, &tc, &mut self.rng, named);
                    self.p.client.respond(&id, Ok(a), self.p.now);
                    self.p.client.respond(&id, Ok(again), self.p.now);
                }
                8 => {}
                _ => {
                    let e = match kind {
                        Kind::Permit => RpcError::new(code::INTERNAL_ERROR, "the card broke"),
                        _ => RpcError::method_not_found(method),
                    };
                    self.p.client.respond(&id, Err(e), self.p.now);
                }
            }
        }
        let Some(t) = self.terminal else { return };
        let frames: Vec<Value> = self.p.stdio_out[&t][self.terminal_seen..]
            .iter()
            .map(|f| serde_json::from_slice(f).unwrap())
            .collect();
        self.terminal_seen = self.p.stdio_out[&t].len();
        for f in frames {
            let Some(kind) = f["method"].as_str().and_then(Kind::of) else {
                continue;
            };
            let tc = tool_call_id(&f["params"]);
            let named = self.names_card();
            let reply = json!({ "jsonrpc": "2.0", "id": f["id"],
                                "result": answer(kind, &tc, &mut self.rng, named) });
            match self.rng.below(10) {
                0..=4 => self.terminal_frame(reply),
                5 | 6 => self.late_terminal.push(reply),
                _ => {}
            }
        }
    }

    fn late_answers(&mut self) {
        let n = self.rng.below(self.late_web.len() as u64 + 1) as usize;
        for (link, id, a) in self.late_web.drain(..n).collect::<Vec<_>>() {
            if link != self.web_link && !self.stale_answers {
                // The UI took the card down with its link; it is asked again on the new one.
                continue;
            }
            self.note(format!(
                "late web answer to {} (asked on link {link})",
                id.as_json()
            ));
            self.p.client.respond(&id, Ok(a), self.p.now);
        }
        if self.terminal.is_some() {
            for reply in std::mem::take(&mut self.late_terminal) {
                self.terminal_frame(reply);
            }
        }
    }

    fn faulty_phase(&mut self) {
        self.p.faults = FAULTS;
        for step in 0..STEPS {
            match self.rng.below(20) {
                0..=6 if self.p.client.is_ready() => self.prompt(step),
                7 if self.p.client.is_ready() => self.duplicate(),
                8 | 9 => self.late_answers(),
                10 => {
                    self.note("cut".into());
                    self.p.cut().unwrap();
                }
                11 if self.rng.below(3) == 0 => self.restart(),
                12 => self.client_delete(),
                13 => self.device_delete(),
                14 => self.terminal_shares(),
                15 => {
                    self.p.reachable = !self.p.reachable;
                    self.note(format!("reachable: {}", self.p.reachable));
                }
                _ => {}
            }
            self.p.drive().unwrap();
            self.take_up_cards(false);
            let ms = self.rng.below(300);
            self.p.advance(ms).unwrap();
            self.take_up_cards(false);
        }
    }

    /// A clean link from here on; every card is answered at once, and late answers go out.
    fn clean_end(&mut self) {
        self.p.faults = Faults::none();
        self.p.reachable = true;
        self.late_answers();
        self.late_answers();
        self.p.cut().unwrap();
        self.p.advance(120_000).unwrap();
        assert!(self.p.client.is_ready(), "seed {}: linked again", self.seed);
        for _ in 0..500 {
            self.take_up_cards(true);
            self.p.advance(2_000).unwrap();
            self.take_up_cards(true);
            if self.p.engine.running() == 0
                && self.p.client.incomplete().is_empty()
                && self.p.client.pending_deletes().is_empty()
            {
                break;
            }
        }
        self.p.settle().unwrap();
    }

    fn fail(&self, what: String) -> ! {
        panic!(
            "seed {}: {what}\n(LEMBAS_PROPERTY_SEED={} prints the run)",
            self.seed, self.seed
        );
    }

    fn check_cards(&self) {
        let mut decided: BTreeMap<&str, usize> = BTreeMap::new();
        for (tc, d) in &self.p.decisions {
            *decided.entry(tc.as_str()).or_default() += 1;
            let Some((_, kind)) = self.cards.get(tc) else {
                self.fail(format!("a decision for {tc}, which no script asked: {d:?}"));
            };
            if !fits(*kind, tc, d) {
                self.fail(format!(
                    "{tc} ({kind:?}) was decided {d:?}, which no answer to it gives"
                ));
            }
        }
        for (tc, n) in &decided {
            if *n > 1 {
                self.fail(format!("{tc} was decided {n} times"));
            }
        }
        if self.p.engine.running() > 0 {
            self.fail(format!(
                "{} turns still wait on the engine after a clean end",
                self.p.engine.running()
            ));
        }
        let started: BTreeSet<&str> = self.p.started.iter().map(|t| t.turn_id.as_str()).collect();
        for (t, turn) in &self.turns {
            if !started.contains(t.as_str()) || self.killed.contains(t) {
                continue;
            }
            for tc in &turn.cards {
                if !decided.contains_key(tc.as_str()) {
                    self.fail(format!("card {tc} of turn {t} was never decided"));
                }
            }
        }
    }

    /// The time each session's delete was acknowledged: the device deleted it on its own, or
    /// answered the client's delete (the first answer that reached the client).
    fn acks(&self) -> BTreeMap<String, Time> {
        let mut asked: BTreeMap<String, String> = BTreeMap::new();
        let mut acks: BTreeMap<String, Time> = self.device_deleted.clone();
        for t in &self.p.transcript {
            let Ok(f) = serde_json::from_str::<Value>(&t.frame) else {
                continue;
            };
            match t.dir {
                Dir::ToDevice if f["method"] == "_lembas/session/delete" => {
                    let s = f["params"]["sessionId"].as_str().unwrap_or("").to_string();
                    asked.insert(f["id"].to_string(), s);
                }
                Dir::ToClient if f.get("result").is_some() => {
                    if let Some(s) = f.get("id").and_then(|id| asked.get(&id.to_string())) {
                        let at = acks.entry(s.clone()).or_insert(t.at);
                        *at = (*at).min(t.at);
                    }
                }
                _ => {}
            }
        }
        acks
    }

    fn check_deletes(&mut self) {
        let deleted: BTreeSet<String> = self
            .client_deleted
            .iter()
            .chain(self.device_deleted.keys())
            .cloned()
            .collect();
        let mut removed: BTreeMap<&str, usize> = BTreeMap::new();
        for e in &self.p.device_effects {
            if let Effect::RemoveAttachments { session_id } = e {
                *removed.entry(session_id.as_str()).or_default() += 1;
            }
        }
        for s in &self.sessions {
            let applied = removed.get(s.as_str()).copied().unwrap_or(0);
            if !deleted.contains(s) {
                if applied > 0 {
                    self.fail(format!(
                        "{s} was never deleted, yet removed {applied} times"
                    ));
                }
                continue;
            }
            if applied != 1 {
                self.fail(format!("the delete of {s} was applied {applied} times"));
            }
            let kept: Vec<String> = self
                .p
                .os
                .store
                .entries()
                .into_iter()
                .filter(|e| {
                    (e.table == Table::Sessions && e.key == *s)
                        || (e.table != Table::Deletes && e.key.starts_with(&format!("{s}/")))
                })
                .map(|e| format!("{}:{}", e.table.name(), e.key))
                .collect();
            if !kept.is_empty() {
                self.fail(format!("deleted {s} is still in the store: {kept:?}"));
            }
            let told =
                self.p.client_events.iter().any(
                    |e| matches!(e, ClientEvent::Deleted { session_id, .. } if session_id == s),
                );
            if self.client_deleted.contains(s) && !told {
                self.fail(format!("the client's delete of {s} was never answered"));
            }
        }
        let given_up: Vec<&ClientEvent> = self
            .p
            .client_events
            .iter()
            .filter(|e| matches!(e, ClientEvent::DeleteGivenUp { .. }))
            .collect();
        if !given_up.is_empty() {
            self.fail(format!("deletes were given up: {given_up:?}"));
        }
        let kept: Vec<String> = self
            .p
            .os
            .store
            .entries()
            .into_iter()
            .filter(|e| e.table == Table::Deletes)
            .map(|e| e.key)
            .collect();
        if !kept.is_empty() {
            self.fail(format!(
                "deletes made on the device were never sent: {kept:?}"
            ));
        }
        // The device, asked now, does not know them.
        for s in &self.sessions {
            let id = self
                .p
                .client
                .call(
                    "_lembas/session/status",
                    &json!({ "sessionId": s }),
                    self.p.now,
                )
                .unwrap();
            self.p.settle().unwrap();
            let exists = self.p.client_events.iter().rev().find_map(|e| match e {
                ClientEvent::Answer {
                    id: i,
                    outcome: Ok(v),
                    ..
                } if *i == id => Some(v["exists"] == json!(true)),
                _ => None,
            });
            if exists != Some(!deleted.contains(s)) {
                self.fail(format!(
                    "status of {s}: exists {exists:?}, deleted {}",
                    deleted.contains(s)
                ));
            }
        }
    }

    /// Every delete made on the device reached the client, or the client had deleted it itself.
    fn check_device_deletes_heard(&self) {
        let heard: BTreeSet<String> = self
            .p
            .frames_to_client()
            .iter()
            .filter(|f| f["method"] == "_lembas/session/deleted")
            .filter_map(|f| f["params"]["sessionId"].as_str().map(String::from))
            .collect();
        for s in self.device_deleted.keys() {
            let told =
                self.p.client_events.iter().any(
                    |e| matches!(e, ClientEvent::Deleted { session_id, .. } if session_id == s),
                );
            if !told && !heard.contains(s) {
                self.fail(format!(
                    "the device deleted {s}, and the client never heard of it"
                ));
            }
        }
    }

    fn check_no_reappearance(&self) {
        let acks = self.acks();
        for t in &self.p.transcript {
            if t.dir != Dir::ToClient {
                continue;
            }
            let Ok(f) = serde_json::from_str::<Value>(&t.frame) else {
                continue;
            };
            let (named, existing) = match f["method"].as_str() {
                Some(
                    "session/update"
                    | "_lembas/event"
                    | "session/request_permission"
                    | "_lembas/question"
                    | "_lembas/plan",
                ) => (f["params"]["sessionId"].as_str(), true),
                Some(_) => continue,
                None => {
                    let r = &f["result"];
                    let existing = r["exists"] == json!(true) || r["turns"].is_array();
                    (r["sessionId"].as_str(), existing)
                }
            };
            let Some(s) = named else { continue };
            let Some(ack) = acks.get(s) else { continue };
            if existing && t.at > ack.plus_ms(FAULTS.max_delay_ms) {
                self.fail(format!(
                    "{s} was deleted at {ack:?}, and at {:?} the device said it exists: {}",
                    t.at, t.frame
                ));
            }
        }
    }
}

/// Which promises a test holds the runs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Promise {
    /// Cards decided once; deletes applied once, kept ones sent, none undone.
    CardsAndDeletes,
    /// The same, with the web also answering, late, cards asked on a link that has dropped.
    CardsDespiteStaleAnswers,
    /// Every delete made on the device reaches the client.
    DeviceDeletesHeard,
}
fn run(seed: u64, promise: Promise, verbose: bool) {
    let mut r = Run::new(seed);
    r.stale_answers = promise == Promise::CardsDespiteStaleAnswers;
    r.faulty_phase();
    r.clean_end();
    if verbose {
        for line in &r.log {
            eprintln!("{line}");
        }
        eprintln!("decisions: {:?}", r.p.decisions);
        if std::env::var("LEMBAS_PROPERTY_TRACE").is_ok() {
            for t in &r.p.transcript {
                let short: String = t.frame.chars().take(160).collect();
                eprintln!("{:?} {:?} {short}", t.at, t.dir);
            }
        }
    }
    match promise {
        Promise::CardsAndDeletes | Promise::CardsDespiteStaleAnswers => {
            r.check_cards();
            r.check_no_reappearance();
            r.check_deletes();
        }
        Promise::DeviceDeletesHeard => r.check_device_deletes_heard(),
    }
}

/// The seeds `property::seeds` picks, after `known` (seeds that broke the promise once); or the
/// one seed `LEMBAS_PROPERTY_SEED`, told step by step.
fn seeds(promise: Promise, known: &[u64], default: u64) {
    if let Some(seed) = property::seeds(known, default, |seed| run(seed, promise, false)) {
        run(seed, promise, true);
    }
}

#[test]
fn cards_are_decided_once_and_deletes_are_applied_once_and_never_undone() {
    seeds(Promise::CardsAndDeletes, &[], 150);
}

#[test]
fn a_late_answer_from_a_dropped_link_decides_no_other_card() {
    seeds(Promise::CardsDespiteStaleAnswers, &[104, 420], 400);
}

#[test]
fn every_delete_made_on_the_device_reaches_the_client() {
    seeds(Promise::DeviceDeletesHeard, &[82, 131, 132, 186, 296], 400);
}

// The two failures above, each cut down to its few steps.

fn linked_session() -> (Pair, String) {
    let mut p = Pair::default_with_roots(&["/home/dev/work"]);
    p.start().unwrap();
    let id = p
        .client
        .call("session/new", &json!({ "cwd": "/home/dev/work" }), p.now)
        .unwrap();
    p.settle().unwrap();
    let s = p
        .client_events
        .iter()
        .find_map(|e| match e {
            ClientEvent::Answer {
                id: i,
                outcome: Ok(v),
                ..
            } if *i == id => Some(v["sessionId"].as_str().unwrap().to_string()),
            _ => None,
        })
        .unwrap();
    (p, s)
}

fn card_requests(p: &Pair) -> Vec<(Id, String)> {
    p.client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Card { id, card } => Some((id.clone(), card.tool_call_id().to_string())),
            _ => None,
        })
        .collect()
}

/// A card asked on a link that dropped, and timed out while no link was up; on the next link
/// another card is asked. The person's late click on the first card must decide nothing: the
/// client does not send an answer to a request of an earlier link, and the device's request
/// ids are unique across its connections anyway (they once started again on each one).
#[test]
fn an_answer_to_a_card_of_a_dropped_link_decides_no_other_card() {
    let (mut p, s) = linked_session();
    let text = json!([{ "type": "text", "text": "permit rm -rf build" }]);
    p.client.prompt(&s, text, Some("t1"), p.now).unwrap();
    p.drive().unwrap();
    let (old, first) = card_requests(&p)[0].clone();
    p.reachable = false;
    p.cut().unwrap();
    p.advance(300_000).unwrap();
    p.reachable = true;
    p.advance(120_000).unwrap();
    assert!(p.client.is_ready());
    let text = json!([{ "type": "text", "text": "tool look\npermit deploy to production" }]);
    p.client.prompt(&s, text, Some("t2"), p.now).unwrap();
    p.drive().unwrap();
    let (new, second) = card_requests(&p)[1].clone();
    assert_ne!(first, second);
    assert_ne!(old, new, "request ids are unique across connections");
    // The web answers the card of the dropped link, late.
    let allow = json!({ "outcome": { "outcome": "selected", "optionId": "once" },
                        "_meta": { "lembas": { "command": "rm -rf build" } } });
    assert!(
        !p.client.respond(&old, Ok(allow), p.now),
        "an answer to a request of a dropped link is not sent"
    );
    p.settle().unwrap();
    let decided: Vec<&(String, Decision)> = p.decisions.iter().collect();
    assert_eq!(
        decided.len(),
        1,
        "{second} (deploy to production) was decided by the answer to {first}: {decided:?}"
    );
}

/// A delete made on the device while no link was up is sent right after the next link's
/// `initialize`; here that link closes as the answer to `initialize` is written, before the
/// `deleted` frame behind it leaves. The frame is dropped from the device's queue with the
/// connection, but the record that forgets the delete, queued behind it, is still written.
#[test]
fn a_kept_delete_whose_frame_never_left_is_kept() {
    use lembas_core::device::{Device, Output};
    use lembas_core::store::MemStore;

    let now = Time(1);
    let mut d = DeviceConfig::default();
    d.remote.enabled = true;
    d.remote.roots = vec!["/home/dev/work".into()];
    let mut dev = Device::new(d, Time::ZERO).unwrap();
    let mut store = MemStore::default();
    // Everything the device asks for now, persists written at once; the frames it sends.
    let drain = |dev: &mut Device, store: &mut MemStore| {
        let mut sent = Vec::new();
        while let Some(out) = dev.poll_output() {
            match out {
                Output::Effect(Effect::Persist { seq, records }) => {
                    store.apply(&records);
                    dev.handle_persisted(seq, now);
                }
                Output::Send { frame, .. } => {
                    sent.push(serde_json::from_slice::<Value>(&frame).unwrap())
                }
                _ => {}
            }
        }
        sent
    };
    let editor = dev.handle_open(ConnKind::Stdio, now).unwrap();
    let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    dev.handle_frame(editor, init, now).unwrap();
    let new = br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/srv/x"}}"#;
    dev.handle_frame(editor, new, now).unwrap();
    let sent = drain(&mut dev, &mut store);
    let s = sent[1]["result"]["sessionId"].as_str().unwrap().to_string();
    assert!(dev.delete_session(&s, now));
    drain(&mut dev, &mut store);
    let kept = |store: &MemStore| {
        store
            .entries()
            .iter()
            .any(|e| e.table == Table::Deletes && e.key == s)
    };
    assert!(kept(&store), "kept while no link is up");
    dev.start_link(now);
    drain(&mut dev, &mut store);
    let link = dev.handle_open(ConnKind::Link, now).unwrap();
    drain(&mut dev, &mut store);
    let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}}}"#;
    dev.handle_frame(link, init, now).unwrap();
    // The shell writes the initialize answer; the connection dies before the next frame.
    loop {
        match dev.poll_output().expect("the answer to initialize") {
            Output::Effect(Effect::Persist { seq, records }) => {
                store.apply(&records);
                dev.handle_persisted(seq, now);
            }
            Output::Send { frame, .. } => {
                let f: Value = serde_json::from_slice(&frame).unwrap();
                assert_eq!(f["id"], 0, "{f}");
                break;
            }
            _ => {}
        }
    }
    dev.handle_closed(link, None, now).unwrap();
    drain(&mut dev, &mut store);
    assert!(
        kept(&store),
        "the delete of {s} was forgotten, though its frame never left the device"
    );
}
