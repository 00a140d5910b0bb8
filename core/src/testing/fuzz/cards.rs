//! The `cards` driver: the device's open cards ([`Cards`]) alone, wired as the device wires
//! them: a card opened and put to its session's holders (closed at once when nobody may be
//! asked a question or plan), offered to a connection that comes to hold its session, answered
//! on the connection and id it was asked with (as `dispatch.rs` reads a response), decided
//! and settled, expired at a timeout, taken down when its turn ends, and connections let go;
//! against a model of the promise "a card answered anywhere is taken down everywhere; first
//! answer wins", written from the module's documented rules, not its code.
//!
//! The promises checked at every operation and after it:
//! - a card is put to exactly the holders that may be asked it (an approval to any ready
//!   client, a question or plan only to one that said `_meta.lembas` with protocol 2 or later
//!   and never refused one with -32601), once each, with the same seq on every copy, patient
//!   exactly when a person on the device (not a link) holds its session; a request id is
//!   never used twice;
//! - a card is decided at most once: the first answer decides it as the answer reads
//!   (the model reads it too), an error answer refuses it, and -32601 to a question or plan
//!   leaves it to the others asked (closed as nobody-to-ask when none is left); every later
//!   answer to it changes nothing and is not even matched to it;
//! - once a card is decided, expired or its turn ended, every connection still asked it is
//!   told once (`_lembas/permission/settled`, or an editor ACP's `$/cancel_request` with the
//!   id it was asked with), the one whose answer decided it is not, and no request for it is
//!   waited for any more; the settled notice `settle` returns names the card and its seq;
//! - a card expires, denied or dismissed as timed out, exactly when its deadline is reached,
//!   not before; `deadline()` is the earliest open deadline;
//! - a turn's end takes down all of that turn's cards, of that session, and no other;
//! - a connection let go is never asked again nor told, and its ids match nothing;
//! - the cards open are exactly the model's, and a connection waits for exactly the requests
//!   of the cards open it was asked and has not answered; no panic.

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::Arbitrary;
use serde_json::{json, Value};

use crate::config::Mode;
use crate::device::cards::{CardKey, Cards, Decided, OpenCard};
use crate::device::connection::{Connection, Connections, Phase, Reach, RequestIds};
use crate::device::outbox::Outbox;
use crate::device::{ConnId, ConnKind, Output};
use crate::engine::{
    Ask, Card, Decision, PermissionDecision, PlanDecision, Question, QuestionAnswer,
    QuestionDecision, QuestionOption,
};
use crate::jsonrpc::{code, Id, RpcError};
use crate::time::Time;
use crate::wire::event::card::{PERMISSION, PLAN, QUESTION};
use crate::wire::event::notice::{CANCEL_REQUEST as CANCEL, SETTLED};

/// At most this many operations are read from one input.
const MAX_CARDS_OPS: usize = 512;

/// Sessions, turns, tool calls and connection slots come from small sets, so cards share
/// sessions and turns, toolCallIds collide, and connections hold several cards.
const SESSIONS: u8 = 2;
const TURNS: u8 = 2;
const CALLS: u8 = 3;
const SLOTS: u8 = 3;

#[derive(Arbitrary, Debug)]
struct Setup {
    /// `remote.max_mode`: an index into [`Mode::ALL`].
    max_mode: u8,
    /// A bit per session: it keeps an event log, so its cards and notices carry a seq.
    logged: u8,
    /// A bit per session: its mode is capped, so an approved plan is lowered to `max_mode`.
    capped: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A ready connection opens in `slot` (the one there before, if any, is let go first),
    /// having said `_meta.lembas` or not, and the link protocol `1 + protocol % 3`.
    Connect {
        slot: u8,
        kind: Kind,
        lembas: bool,
        protocol: u8,
    },
    /// The connection in `slot` comes to hold a session: offered its open cards.
    Hold { slot: u8, session: u8 },
    /// It no longer holds the session (the copies it was asked stay its own).
    Unhold { slot: u8, session: u8 },
    /// The connection in `slot` goes away.
    LetGo { slot: u8 },
    /// The engine asks a person: a card opened, `ttl` ms to live, put to the holders.
    Ask {
        session: u8,
        turn: u8,
        call: u8,
        shape: Shape,
        ttl: u8,
    },
    /// The connection in `slot` answers the `pick`-th card request it is waited for on.
    Answer { slot: u8, pick: u8, reply: Reply },
    /// It answers the `pick`-th of its card requests no longer waited for.
    Late { slot: u8, pick: u8, reply: Reply },
    /// Time passes and the device's timeout runs: cards past their deadline expire.
    Advance { ms: u8 },
    /// A turn ended: its cards are taken down.
    EndTurn { session: u8, turn: u8 },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Kind {
    Link,
    Stdio,
    Terminal,
    Hub,
}

#[derive(Arbitrary, Debug)]
enum Shape {
    Permission {
        always: bool,
    },
    /// `questions` questions (0 to 5: 0 and 5 break the bounds) of `options` options each (0
    /// to 7: 7 breaks them), the `recommended`-th recommended.
    Question {
        questions: u8,
        options: u8,
        recommended: Option<u8>,
    },
    Plan,
    /// No toolCallId: refused.
    Nameless,
}

/// An answer as a client sends it; each reads as the card it answers says.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Reply {
    Once,
    Always,
    Deny,
    Cancelled,
    /// One answer per question: the first option as shown, or skipped where there is none.
    Answered,
    /// One answer fewer than the questions.
    AnsweredShort,
    Dismissed,
    /// `approve` in a mode (an index into [`Mode::ALL`]).
    Approve(u8),
    Revise,
    Garbage,
    /// -32601: the client cannot be asked this.
    NotFound,
    /// Another error.
    Failed,
}

/// What a card asks, as the model knows it.
#[derive(Debug, Clone)]
enum Asks {
    Permission {
        always: bool,
    },
    /// Per question, the label of its first option as shown (the recommended one first).
    Question {
        first_shown: Vec<Option<String>>,
    },
    Plan,
}

impl Asks {
    fn method(&self) -> &'static str {
        match self {
            Asks::Permission { .. } => PERMISSION,
            Asks::Question { .. } => QUESTION,
            Asks::Plan => PLAN,
        }
    }
}

#[derive(Debug)]
struct ModelCard {
    turn: u8,
    asks: Asks,
    deadline: Time,
    capped: bool,
    seq: Option<u64>,
    /// The connections waited for, each with the request id it was asked with.
    asked: BTreeMap<ConnId, Id>,
}

#[derive(Debug)]
struct ModelConn {
    kind: ConnKind,
    lembas: bool,
    protocol: u32,
    /// It answered a question or plan with -32601.
    downgraded: bool,
}

impl ModelConn {
    /// Whether it may be sent `method` (every connection here is ready).
    fn may_receive(&self, method: &str) -> bool {
        match method {
            QUESTION | PLAN => self.lembas && self.protocol >= 2 && !self.downgraded,
            SETTLED => self.lembas,
            _ => true,
        }
    }
}

/// What the model expects, keyed by (session, call).
#[derive(Debug, Default)]
struct Model {
    conns: BTreeMap<ConnId, ModelConn>,
    gone: BTreeSet<ConnId>,
    open: BTreeMap<(u8, u8), ModelCard>,
    /// Every card request sent: its connection and id, and its card.
    sent: Vec<(ConnId, Id, (u8, u8))>,
    decisions: usize,
}

/// A frame the driver saw leave, as the model predicts it (a card request's id is learnt).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Sent {
    Card {
        conn: ConnId,
        method: String,
        key: CardKey,
        seq: Option<u64>,
        patient: bool,
    },
    Settled {
        conn: ConnId,
        key: CardKey,
        seq: Option<u64>,
    },
    Cancel {
        conn: ConnId,
        id: String,
    },
}

struct Session {
    holders: BTreeSet<ConnId>,
    logged: bool,
    capped: bool,
    next_seq: u64,
}

struct Driver {
    cards: Cards,
    conns: Connections,
    ids: RequestIds,
    out: Outbox,
    now: Time,
    max_mode: Mode,
    sessions: Vec<Session>,
    slots: [Option<ConnId>; SLOTS as usize],
    next_conn: u64,
    m: Model,
}

/// Drive [`Cards`] through operations read from `data`; panics on a broken promise.
pub fn cards(data: &[u8]) {
    let Some((setup, ops)) = super::read_input::<Setup, Op>(data, MAX_CARDS_OPS) else {
        return;
    };
    let mut d = Driver {
        cards: Cards::default(),
        conns: Connections::default(),
        ids: RequestIds::default(),
        out: Outbox::default(),
        now: Time(0),
        max_mode: Mode::ALL[usize::from(setup.max_mode) % Mode::ALL.len()],
        sessions: (0..SESSIONS)
            .map(|s| Session {
                holders: BTreeSet::new(),
                logged: setup.logged & (1 << s) != 0,
                capped: setup.capped & (1 << s) != 0,
                next_seq: 1,
            })
            .collect(),
        slots: [None; SLOTS as usize],
        next_conn: 1,
        m: Model::default(),
    };
    for op in ops {
        d.step(op);
        d.check();
    }
}

/// The setup and operations [`cards`] reads from `data`, one a line: to read a failing input.
pub fn cards_script(data: &[u8]) -> String {
    super::script::<Setup, Op>(data, MAX_CARDS_OPS, "setup")
}

fn session_id(s: u8) -> String {
    format!("ses_{s}")
}

fn turn_id(t: u8) -> String {
    format!("turn_{t}")
}

fn call_id(c: u8) -> String {
    format!("call_{c}")
}

fn card_key((s, c): (u8, u8)) -> CardKey {
    (session_id(s), call_id(c))
}

/// The card the engine asks, and what the model knows of it (`None`: it breaks a bound).
fn build(call: u8, shape: &Shape) -> (Card, Option<Asks>) {
    let tool_call_id = call_id(call);
    match *shape {
        Shape::Permission { always } => (
            Card {
                tool_call_id,
                ask: Ask::Permission {
                    title: "npm test".into(),
                    kind: "execute".into(),
                    raw_input: json!({ "command": "npm test" }),
                    always_offered: always,
                    reason: "runs a command".into(),
                    purpose: None,
                },
            },
            Some(Asks::Permission { always }),
        ),
        Shape::Question {
            questions,
            options,
            recommended,
        } => {
            let (n, per) = (usize::from(questions % 6), usize::from(options % 8));
            let questions: Vec<Question> = (0..n)
                .map(|q| Question {
                    header: format!("Q{q}"),
                    question: "Which?".into(),
                    multiple: false,
                    options: (0..per)
                        .map(|o| QuestionOption {
                            label: format!("q{q}o{o}"),
                            description: None,
                            recommended: recommended.is_some_and(|r| usize::from(r) == o),
                        })
                        .collect(),
                })
                .collect();
            let within = (1..=4).contains(&n) && per <= 6;
            let first_shown = (0..n)
                .map(|q| {
                    let shown = recommended
                        .map(usize::from)
                        .filter(|r| *r < per)
                        .or((per > 0).then_some(0));
                    shown.map(|o| format!("q{q}o{o}"))
                })
                .collect();
            (
                Card {
                    tool_call_id,
                    ask: Ask::Question {
                        why: None,
                        questions,
                    },
                },
                within.then_some(Asks::Question { first_shown }),
            )
        }
        Shape::Plan => (
            Card {
                tool_call_id,
                ask: Ask::Plan {
                    path: "plan.md".into(),
                    text: "the plan".into(),
                    plan: None,
                },
            },
            Some(Asks::Plan),
        ),
        Shape::Nameless => (
            Card {
                tool_call_id: String::new(),
                ask: Ask::Plan {
                    path: "plan.md".into(),
                    text: "the plan".into(),
                    plan: None,
                },
            },
            None,
        ),
    }
}

/// The answer `reply` as the client sends it to a card asking `asks`.
fn outcome(reply: Reply, asks: &Asks) -> Result<Value, RpcError> {
    let selected =
        |option: &str| json!({ "outcome": { "outcome": "selected", "optionId": option } });
    let answers = |short: bool| {
        let shown = match asks {
            Asks::Question { first_shown } => first_shown.as_slice(),
            _ => &[],
        };
        let take = if short {
            shown.len().saturating_sub(1)
        } else {
            shown.len()
        };
        let answers: Vec<Value> = shown[..take]
            .iter()
            .map(|label| match label {
                Some(l) => json!({ "kind": "options", "labels": [l] }),
                None => json!({ "kind": "skipped" }),
            })
            .collect();
        json!({ "outcome": "answered", "answers": answers })
    };
    Ok(match reply {
        Reply::Once => selected("once"),
        Reply::Always => selected("session"),
        Reply::Deny => selected("deny"),
        Reply::Cancelled => json!({ "outcome": { "outcome": "cancelled" } }),
        Reply::Answered => answers(false),
        Reply::AnsweredShort => answers(true),
        Reply::Dismissed => json!({ "outcome": "dismissed" }),
        Reply::Approve(mode) => {
            json!({ "outcome": "approve", "mode": Mode::ALL[usize::from(mode) % 4].as_str() })
        }
        Reply::Revise => json!({ "outcome": "revise", "feedback": "again" }),
        Reply::Garbage => Value::Null,
        Reply::NotFound => return Err(RpcError::new(code::METHOD_NOT_FOUND, "no such method")),
        Reply::Failed => return Err(RpcError::new(code::INTERNAL_ERROR, "it broke")),
    })
}

/// What an answer decides, as the spec reads it: an approval allowed once, always (where
/// offered) or denied; a question answered one per question or dismissed; a plan approved into
/// a mode (lowered to `cap`; nothing below manual), sent back for revision, or dismissed.
/// Anything else, and any error, denies or dismisses.
fn decision_of(asks: &Asks, reply: Reply, cap: Option<Mode>) -> Decision {
    let error = matches!(reply, Reply::NotFound | Reply::Failed);
    match asks {
        Asks::Permission { always } => Decision::Permission(match reply {
            Reply::Once => PermissionDecision::AllowOnce { command: None },
            Reply::Always if *always => PermissionDecision::AllowAlways,
            _ => PermissionDecision::Deny {
                feedback: None,
                timed_out: false,
            },
        }),
        Asks::Question { first_shown } => Decision::Question(match reply {
            Reply::Answered if !error => QuestionDecision::Answered(
                first_shown
                    .iter()
                    .map(|label| match label {
                        Some(l) => QuestionAnswer::Options {
                            labels: vec![l.clone()],
                        },
                        None => QuestionAnswer::Skipped,
                    })
                    .collect(),
            ),
            _ => QuestionDecision::Dismissed { timed_out: false },
        }),
        Asks::Plan => Decision::Plan(match reply {
            Reply::Approve(mode) => {
                let asked = Mode::ALL[usize::from(mode) % 4];
                let mode = cap.map_or(asked, |max| asked.min(max));
                if asked == Mode::Plan || mode < Mode::Manual {
                    PlanDecision::Dismissed { timed_out: false }
                } else {
                    PlanDecision::Approve { mode }
                }
            }
            Reply::Revise => PlanDecision::Revise {
                feedback: "again".into(),
            },
            _ => PlanDecision::Dismissed { timed_out: false },
        }),
    }
}

/// What a card comes to when nobody answers it in time.
fn timed_out(asks: &Asks) -> Decision {
    match asks {
        Asks::Permission { .. } => Decision::Permission(PermissionDecision::Deny {
            feedback: None,
            timed_out: true,
        }),
        Asks::Question { .. } => {
            Decision::Question(QuestionDecision::Dismissed { timed_out: true })
        }
        Asks::Plan => Decision::Plan(PlanDecision::Dismissed { timed_out: true }),
    }
}

/// The card a request or notice names: from its params.
fn named_card(method: &str, params: &Value) -> CardKey {
    let call = if method == PERMISSION {
        &params["toolCall"]["toolCallId"]
    } else {
        &params["toolCallId"]
    };
    let text = |v: &Value| {
        v.as_str()
            .unwrap_or_else(|| panic!("{method} names its card: {params}"))
            .to_owned()
    };
    (text(&params["sessionId"]), text(call))
}

fn seq_in(params: &Value) -> Option<u64> {
    params["_meta"]["lembas"]["seq"].as_u64()
}

/// The driver's connections as the cards reach them, borrowed field by field beside `cards`.
macro_rules! reach {
    ($d:expr) => {
        Reach {
            conns: &mut $d.conns,
            ids: &mut $d.ids,
            out: &mut $d.out,
        }
    };
}

impl Driver {
    fn slot(&self, slot: u8) -> Option<ConnId> {
        self.slots[usize::from(slot % SLOTS)]
    }

    /// The session's next seq, when it keeps a log (the device's `next_seq`).
    fn next_seq(&mut self, s: u8) -> Option<u64> {
        let session = &mut self.sessions[usize::from(s)];
        session.logged.then(|| {
            session.next_seq += 1;
            session.next_seq - 1
        })
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::Connect {
                slot,
                kind,
                lembas,
                protocol,
            } => {
                if let Some(old) = self.slot(slot) {
                    self.let_go(old);
                }
                let conn = ConnId(self.next_conn);
                self.next_conn += 1;
                let kind = match kind {
                    Kind::Link => ConnKind::Link,
                    Kind::Stdio => ConnKind::Stdio,
                    Kind::Terminal => ConnKind::Terminal,
                    Kind::Hub => ConnKind::Hub,
                };
                let protocol = 1 + u32::from(protocol % 3);
                let mut c = Connection::new(kind);
                c.phase = Phase::Ready;
                c.said.lembas = lembas;
                c.said.protocol = protocol;
                self.conns.insert(conn, c);
                self.m.conns.insert(
                    conn,
                    ModelConn {
                        kind,
                        lembas,
                        protocol,
                        downgraded: false,
                    },
                );
                self.slots[usize::from(slot % SLOTS)] = Some(conn);
                self.expect(Vec::new());
            }
            Op::Hold { slot, session } => {
                let Some(conn) = self.slot(slot) else { return };
                let s = session % SESSIONS;
                self.sessions[usize::from(s)].holders.insert(conn);
                let expected = self.offers(s, &[conn]);
                let holders = self.sessions[usize::from(s)].holders.clone();
                self.cards
                    .offer_open(&session_id(s), conn, &holders, reach!(self));
                self.expect(expected);
            }
            Op::Unhold { slot, session } => {
                let Some(conn) = self.slot(slot) else { return };
                self.sessions[usize::from(session % SESSIONS)]
                    .holders
                    .remove(&conn);
            }
            Op::LetGo { slot } => {
                let Some(conn) = self.slot(slot) else { return };
                self.let_go(conn);
                self.slots[usize::from(slot % SLOTS)] = None;
                self.expect(Vec::new());
            }
            Op::Ask {
                session,
                turn,
                call,
                shape,
                ttl,
            } => self.ask(session % SESSIONS, turn % TURNS, call % CALLS, &shape, ttl),
            Op::Answer { slot, pick, reply } => {
                let Some(conn) = self.slot(slot) else { return };
                let owed: Vec<((u8, u8), Id)> = self
                    .m
                    .open
                    .iter()
                    .filter_map(|(k, c)| c.asked.get(&conn).map(|id| (*k, id.clone())))
                    .collect();
                if owed.is_empty() {
                    return;
                }
                let (k, id) = owed[usize::from(pick) % owed.len()].clone();
                self.answer(conn, k, &id, reply);
            }
            Op::Late { slot, pick, reply } => {
                let Some(conn) = self.slot(slot) else { return };
                let done: Vec<(Id, (u8, u8))> = self
                    .m
                    .sent
                    .iter()
                    .filter(|(c, id, k)| {
                        *c == conn && self.m.open.get(k).and_then(|o| o.asked.get(c)) != Some(id)
                    })
                    .map(|(_, id, k)| (id.clone(), *k))
                    .collect();
                if done.is_empty() {
                    return;
                }
                let (id, k) = done[usize::from(pick) % done.len()].clone();
                self.late(conn, k, &id, reply);
            }
            Op::Advance { ms } => {
                self.now = self.now.plus_ms(u64::from(ms));
                self.timeout();
            }
            Op::EndTurn { session, turn } => self.end_turn(session % SESSIONS, turn % TURNS),
        }
    }

    /// The device lets a connection go: it holds nothing, and the cards forget it.
    fn let_go(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        for s in &mut self.sessions {
            s.holders.remove(&conn);
        }
        self.cards.forget_connection(conn);
        self.m.conns.remove(&conn);
        self.m.gone.insert(conn);
        for card in self.m.open.values_mut() {
            card.asked.remove(&conn);
        }
    }

    /// Whether a person on the device (not a link) holds session `s`.
    fn patient(&self, s: u8) -> bool {
        self.sessions[usize::from(s)].holders.iter().any(|h| {
            self.m
                .conns
                .get(h)
                .is_some_and(|c| c.kind != ConnKind::Link)
        })
    }

    /// The requests putting session `s`'s open cards to `to` sends: each card to each
    /// connection alive that may be asked it and was not yet.
    fn offers(&self, s: u8, to: &[ConnId]) -> Vec<Sent> {
        let patient = self.patient(s);
        let mut sent = Vec::new();
        for (k, card) in self.m.open.range((s, 0)..(s + 1, 0)) {
            for conn in to {
                let Some(c) = self.m.conns.get(conn) else {
                    continue;
                };
                if !card.asked.contains_key(conn) && c.may_receive(card.asks.method()) {
                    sent.push(Sent::Card {
                        conn: *conn,
                        method: card.asks.method().into(),
                        key: card_key(*k),
                        seq: card.seq,
                        patient,
                    });
                }
            }
        }
        sent
    }

    fn ask(&mut self, s: u8, t: u8, c: u8, shape: &Shape, ttl: u8) {
        let k = (s, c);
        let (card, asks) = build(c, shape);
        let deadline = self.now.plus_ms(u64::from(ttl));
        let capped = self.sessions[usize::from(s)].capped;
        let opened = self
            .cards
            .open(&session_id(s), &turn_id(t), card, deadline, capped);
        let asks = match (opened, asks) {
            (Ok(key), Some(asks)) => {
                assert!(
                    !self.m.open.contains_key(&k),
                    "{key:?} opened while open already"
                );
                assert_eq!(key, card_key(k));
                asks
            }
            (Err(why), asks) => {
                assert!(
                    asks.is_none() || self.m.open.contains_key(&k),
                    "a card within bounds and not open is refused: {why}"
                );
                return self.expect(Vec::new());
            }
            (Ok(key), None) => panic!("{key:?}, out of bounds, was opened"),
        };
        let key = card_key(k);
        let seq = self.next_seq(s);
        let method = asks.method();
        self.m.open.insert(
            k,
            ModelCard {
                turn: t,
                asks,
                deadline,
                capped,
                seq,
                asked: BTreeMap::new(),
            },
        );
        let holders = self.sessions[usize::from(s)].holders.clone();
        let to: Vec<ConnId> = holders.iter().copied().collect();
        let expected = self.offers(s, &to);
        let put = self.cards.put(&key, seq, &holders, reach!(self));
        self.expect(expected);
        match (seq, &put.logged) {
            (None, None) => {}
            (Some(seq), Some((logged_method, params))) => {
                assert_eq!(
                    logged_method.name(),
                    method,
                    "the card is logged as it was sent"
                );
                let params: Value = serde_json::from_str(params).expect("logged params are JSON");
                assert_eq!(named_card(method, &params), key);
                assert_eq!(seq_in(&params), Some(seq), "logged with its seq");
            }
            (seq, logged) => panic!("a card with seq {seq:?} logged as {logged:?}"),
        }
        let card = &self.m.open[&k];
        let nobody = card.asks.method() != PERMISSION && card.asked.is_empty();
        assert_eq!(
            put.nobody_to_ask, nobody,
            "nobody to ask (asked {:?})",
            card.asked
        );
        if nobody {
            // The device closes it at once: a question or plan is not left waiting.
            self.close(&key, Decision::NobodyToAsk, None);
        }
    }

    /// A connection answers a request it is waited for on, as `dispatch.rs` reads it.
    fn answer(&mut self, conn: ConnId, k: (u8, u8), id: &Id, reply: Reply) {
        let key = card_key(k);
        let card = self.m.open.get_mut(&k).expect("owed, so open");
        let outcome = outcome(reply, &card.asks);
        let c = self.conns.get_mut(&conn).expect("alive");
        let method =
            c.pending.get(id).map(|p| p.method).unwrap_or_else(|| {
                panic!("{conn:?} is not waited for on {id:?}, asked for {key:?}")
            });
        assert_eq!(method, card.asks.method());
        assert_eq!(
            self.cards.asked_with(conn, id),
            Some(key.clone()),
            "the request {} on {conn:?} is {key:?}'s",
            id.as_json()
        );
        c.pending.remove(id);
        let refused_here = reply == Reply::NotFound && card.asks.method() != PERMISSION;
        if refused_here {
            c.downgraded = true;
            self.m.conns.get_mut(&conn).expect("alive").downgraded = true;
        }
        // The model: the first answer decides, but -32601 to a question or plan leaves it to
        // the others asked.
        card.asked.remove(&conn);
        let cap = card.capped.then_some(self.max_mode);
        let expected = if refused_here {
            card.asked.is_empty().then_some(Decided {
                decision: Decision::NobodyToAsk,
                by: None,
            })
        } else {
            Some(Decided {
                decision: decision_of(&card.asks, reply, cap),
                by: Some(conn),
            })
        };
        let decided = self.cards.answered(conn, &key, outcome, self.max_mode);
        assert_eq!(decided, expected, "{conn:?} answered {key:?} {reply:?}");
        match decided {
            Some(d) => self.close(&key, d.decision, d.by),
            None => self.expect(Vec::new()),
        }
    }

    /// A connection answers a request no longer waited for: nothing comes of it.
    fn late(&mut self, conn: ConnId, k: (u8, u8), id: &Id, reply: Reply) {
        let key = card_key(k);
        assert_eq!(
            self.cards.asked_with(conn, id),
            None,
            "{} on {conn:?} is no longer waited for, yet names a card",
            id.as_json()
        );
        let c = self.conns.get(&conn).expect("alive");
        assert!(
            !c.pending.contains_key(id),
            "{} on {conn:?} is still waited for",
            id.as_json()
        );
        // What `dispatch.rs` does stops there; the cards too refuse an answer to a card that
        // is no longer open (one opened again under the same toolCallId is another card, and
        // the request was never its).
        if !self.m.open.contains_key(&k) {
            let asks = Asks::Permission { always: true };
            let decided = self
                .cards
                .answered(conn, &key, outcome(reply, &asks), self.max_mode);
            assert_eq!(decided, None, "a late answer to {key:?} decided it");
        }
        self.expect(Vec::new());
    }

    /// The device's timeout: every card at or past its deadline is denied or dismissed.
    fn timeout(&mut self) {
        let expired = self.cards.expired(self.now);
        assert_eq!(expired, self.due(self.now), "expired at {:?}", self.now);
        for (key, decision) in expired {
            self.close(&key, decision, None);
        }
    }

    /// The open cards whose deadline `now` reached, with their decision, in key order.
    fn due(&self, now: Time) -> Vec<(CardKey, Decision)> {
        self.m
            .open
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(k, c)| (card_key(*k), timed_out(&c.asks)))
            .collect()
    }

    fn end_turn(&mut self, s: u8, t: u8) {
        let taken = self.cards.take_turn(&session_id(s), &turn_id(t));
        let keys: Vec<CardKey> = taken.iter().map(|(k, _)| k.clone()).collect();
        let expected: Vec<CardKey> = self
            .m
            .open
            .iter()
            .filter(|((session, _), c)| *session == s && c.turn == t)
            .map(|(k, _)| card_key(*k))
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, expected, "the cards of {s}/{t} taken at its end");
        for (key, open) in taken {
            let k = self.model_key(&key);
            let card = self.m.open.remove(&k).expect("checked above");
            self.settle(&key, open, None, card);
        }
        self.expect(Vec::new());
    }

    fn model_key(&self, key: &CardKey) -> (u8, u8) {
        *self
            .m
            .open
            .keys()
            .find(|k| card_key(**k) == *key)
            .unwrap_or_else(|| panic!("{key:?} is not open"))
    }

    /// The device's `close_card`: the card is taken out, the engine told (here: counted),
    /// and every other copy taken down.
    fn close(&mut self, key: &CardKey, decision: Decision, by: Option<ConnId>) {
        let open = self.cards.take(key);
        let k = (0..SESSIONS)
            .flat_map(|s| (0..CALLS).map(move |c| (s, c)))
            .find(|k| card_key(*k) == *key)
            .expect("a card of the driver's");
        let card = self.m.open.remove(&k).unwrap_or_else(|| {
            panic!("{key:?} decided as {decision:?}, but the model has it decided already")
        });
        let open = open.unwrap_or_else(|| panic!("{key:?}, decided as {decision:?}, is gone"));
        self.m.decisions += 1;
        assert!(
            self.cards.take(key).is_none(),
            "{key:?} taken twice: decided twice"
        );
        self.settle(key, open, by, card);
    }

    /// The device's `settle_card`: a settled notice with the session's next seq to everyone
    /// still asked, but the one whose answer decided it.
    fn settle(&mut self, key: &CardKey, open: OpenCard, by: Option<ConnId>, card: ModelCard) {
        let s = self.model_session(key);
        let seq = self.next_seq(s);
        let params = Cards::settle(key, open, by, seq, &mut self.conns, &mut self.out);
        let params: Value = serde_json::from_str(&params).expect("settled params are JSON");
        assert_eq!(named_card(SETTLED, &params), *key);
        assert_eq!(seq_in(&params), seq, "settled with its seq");
        assert!(
            by.is_none_or(|by| !card.asked.contains_key(&by)),
            "the model still waits for {by:?}"
        );
        let expected = card
            .asked
            .iter()
            .map(|(conn, id)| {
                if self.m.conns[conn].may_receive(SETTLED) {
                    Sent::Settled {
                        conn: *conn,
                        key: key.clone(),
                        seq,
                    }
                } else {
                    Sent::Cancel {
                        conn: *conn,
                        id: id.as_json().to_owned(),
                    }
                }
            })
            .collect();
        self.expect(expected);
    }

    fn model_session(&self, key: &CardKey) -> u8 {
        (0..SESSIONS)
            .find(|s| session_id(*s) == key.0)
            .expect("a session of the driver's")
    }

    /// What left the outbox must be exactly `expected` (in any order); the ids the card
    /// requests were sent with are learnt.
    fn expect(&mut self, mut expected: Vec<Sent>) {
        let mut got = Vec::new();
        while let Some(output) = self.out.poll() {
            let Output::Send { conn, frame } = output else {
                panic!("the cards asked for {output:?}");
            };
            super::check_out_frame(&frame);
            let v: Value = serde_json::from_slice(&frame).expect("checked above");
            let method = v["method"].as_str().expect("a request or notification");
            let params = &v["params"];
            got.push(match method {
                PERMISSION | QUESTION | PLAN => {
                    let id = Id::from_json(&v["id"].to_string()).expect("a card is a request");
                    let key = named_card(method, params);
                    let patient = params["_meta"]["lembas"]["patient"] == true;
                    let sent = Sent::Card {
                        conn,
                        method: method.into(),
                        key: key.clone(),
                        seq: seq_in(params),
                        patient,
                    };
                    (sent, Some((id, key)))
                }
                SETTLED => (
                    Sent::Settled {
                        conn,
                        key: named_card(method, params),
                        seq: seq_in(params),
                    },
                    None,
                ),
                CANCEL => (
                    Sent::Cancel {
                        conn,
                        id: params["requestId"].to_string(),
                    },
                    None,
                ),
                other => panic!("the cards sent {other}: {v}"),
            });
        }
        got.sort_by(|a, b| a.0.cmp(&b.0));
        expected.sort();
        let sent: Vec<Sent> = got.iter().map(|(s, _)| s.clone()).collect();
        assert_eq!(sent, expected, "what left");
        for (sent, asked) in got {
            let (Sent::Card { conn, .. }, Some((id, key))) = (sent, asked) else {
                continue;
            };
            assert!(
                self.m.sent.iter().all(|(_, used, _)| *used != id),
                "request id {} used twice",
                id.as_json()
            );
            let k = self.model_key(&key);
            self.m.sent.push((conn, id.clone(), k));
            self.m
                .open
                .get_mut(&k)
                .expect("asked, so open")
                .asked
                .insert(conn, id);
        }
    }

    fn check(&self) {
        let m = &self.m;
        assert_eq!(
            self.cards.deadline(),
            m.open.values().map(|c| c.deadline).min(),
            "the next deadline is the earliest open one"
        );
        assert_eq!(
            self.cards.expired(self.now),
            self.due(self.now),
            "due at {:?}",
            self.now
        );
        let open: Vec<CardKey> = self
            .cards
            .expired(Time(u64::MAX))
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let model: Vec<CardKey> = m.open.keys().map(|k| card_key(*k)).collect();
        assert_eq!(open, model, "the cards open");
        // Every request is matched to its card while it is waited for, and to nothing after.
        for (conn, id, k) in &m.sent {
            let waited = m.open.get(k).and_then(|c| c.asked.get(conn)) == Some(id);
            assert_eq!(
                self.cards.asked_with(*conn, id),
                waited.then(|| card_key(*k)),
                "{} on {conn:?} (gone: {})",
                id.as_json(),
                m.gone.contains(conn)
            );
        }
        for (conn, c) in self.conns.iter() {
            let pending: BTreeSet<&Id> = c.pending.keys().collect();
            let owed: BTreeSet<&Id> = m.open.values().filter_map(|o| o.asked.get(conn)).collect();
            assert_eq!(pending, owed, "what {conn:?} is waited for");
        }
        assert!(self.out.is_empty());
    }
}
