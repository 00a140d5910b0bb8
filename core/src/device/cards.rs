//! Cards: approvals (`session/request_permission`), questions (`_lembas/question`) and plans
//! (`_lembas/plan`) put to every connection that holds the session and may be asked. The first
//! answer decides; every other copy is taken down with `_lembas/permission/settled` (an
//! editor, which hears no `_lembas` notice, gets ACP's `$/cancel_request` for it); a later
//! answer changes nothing. No answer by `remote.approval_timeout` denies or dismisses. A card
//! still open when its link drops is offered again, same `toolCallId`, to the next connection
//! that holds the session. An answer counts only on the connection its request went to, under
//! an id never used before (see `Device::request_id`), and not when it names another card
//! (`wire::card`). What a card says and how its answer is read is card_shape.rs.

use std::collections::{BTreeMap, BTreeSet};

use super::card_shape::{card_params, check_card, is_permission, read_answer, refusal};

use serde_json::Value;

use super::connection::{Connection, Connections, Reach, RequestIds};
use super::event_log::{notification_frame, Logged};
use super::outbox::Outbox;
use super::{ConnId, Device};
use crate::config::Mode;
use crate::engine::{Ask, Card, Decision, EngineCommand, PlanDecision};
use crate::jsonrpc::{self, code, Id, RpcError};
use crate::time::Time;
use crate::wire::event::notice::{CancelRequestParams, SettledParams, CANCEL_REQUEST, SETTLED};
use crate::wire::event::seq::SeqMeta;

/// (session id, tool call id): cards are keyed by tool call, several open at once.
pub(crate) type CardKey = (String, String);

#[derive(Debug)]
pub(crate) struct OpenCard {
    pub turn_id: String,
    pub card: Card,
    pub deadline: Time,
    /// The request each connection was sent for it.
    pub asked: BTreeMap<ConnId, Id>,
    /// Whether the session's mode is capped (a plan's approved mode is lowered).
    pub capped: bool,
    /// Its seq in the session's events (event_log.rs): the same on every copy, offered again
    /// to a later connection too.
    pub seq: Option<u64>,
}

impl OpenCard {
    /// The request that asks it, as its session's log names it.
    fn method(&self) -> Logged {
        match self.card.ask {
            Ask::Permission { .. } => Logged::Permission,
            Ask::Question { .. } => Logged::Question,
            Ask::Plan { .. } => Logged::Plan,
        }
    }
}

/// The open cards, each with who was asked it (the one index of that: a connection's pending
/// request for a card is dropped when the card is settled).
#[derive(Debug, Default)]
pub(crate) struct Cards {
    open: BTreeMap<CardKey, OpenCard>,
}

/// What putting a card to a session's holders leaves to the device.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Put {
    /// The card as the session's log keeps it (method, params), when it has a seq.
    pub logged: Option<(Logged, String)>,
    /// A question or a plan that nobody here could be asked: it is not left waiting, it is
    /// closed with [`Decision::NobodyToAsk`].
    pub nobody_to_ask: bool,
}

/// An answer that decides a card.
#[derive(Debug, PartialEq)]
pub(crate) struct Decided {
    pub decision: Decision,
    /// The connection whose answer it is (its copy needs no taking down); `None` when the
    /// card is closed because nobody can answer it.
    pub by: Option<ConnId>,
}

/// Whether a person on the device (a terminal, or an editor on stdio or the hub: the spec's
/// "terminal" of a shared session) holds the session (of `holders`): a card's web copy is
/// then not timed out, since that person may answer.
fn holds_terminal(holders: &BTreeSet<ConnId>, conns: &Connections) -> bool {
    conns.any_of(holders, Connection::is_local)
}

/// Send the card to `conn` if it may be asked and has not been yet.
fn offer_one(
    key: &CardKey,
    open: &mut OpenCard,
    conn: ConnId,
    c: &mut Connection,
    patient: bool,
    ids: &mut RequestIds,
    out: &mut Outbox,
) {
    let method = open.method().name();
    if open.asked.contains_key(&conn) || !c.may_receive(method) {
        return;
    }
    let params = card_params(&key.0, &open.card, patient, open.seq);
    let id = ids.next();
    c.expect_answer(id.clone(), method);
    open.asked.insert(conn, id.clone());
    out.send(conn, jsonrpc::encode_request(&id, method, &params));
}

impl Cards {
    /// Open a card for `turn` of `session` until `deadline` (not yet put to anyone): its key,
    /// or why it cannot be (over the spec's bounds, or its `toolCallId` already open).
    pub fn open(
        &mut self,
        session: &str,
        turn: &str,
        mut card: Card,
        deadline: Time,
        capped: bool,
    ) -> Result<CardKey, String> {
        check_card(&mut card)?;
        let key = (session.to_string(), card.tool_call_id.clone());
        if self.open.contains_key(&key) {
            return Err(format!(
                "a card with toolCallId `{}` is already open",
                card.tool_call_id
            ));
        }
        self.open.insert(
            key.clone(),
            OpenCard {
                turn_id: turn.to_string(),
                card,
                deadline,
                asked: BTreeMap::new(),
                capped,
                seq: None,
            },
        );
        Ok(key)
    }

    /// Put the card just opened to every connection of `holders` (the session's) that may be
    /// asked, with its seq in the session's events (`None`: the session keeps no log here).
    /// A terminal among them makes it patient: that person may answer, so no web copy times
    /// out on them.
    pub fn put(
        &mut self,
        key: &CardKey,
        seq: Option<u64>,
        holders: &BTreeSet<ConnId>,
        to: Reach<'_>,
    ) -> Put {
        let Some(open) = self.open.get_mut(key) else {
            return Put::default();
        };
        let patient = holds_terminal(holders, to.conns);
        open.seq = seq;
        let logged = seq.map(|_| {
            let params = card_params(&key.0, &open.card, patient, open.seq);
            (
                open.method(),
                serde_json::to_string(&params).expect("cards serialize"),
            )
        });
        for conn in holders {
            if let Some(c) = to.conns.get_mut(conn) {
                offer_one(key, open, *conn, c, patient, to.ids, to.out);
            }
        }
        Put {
            logged,
            nobody_to_ask: !is_permission(&open.card) && open.asked.is_empty(),
        }
    }

    /// Put every open card of `session` to `conn`, which just came to hold it (one of
    /// `holders`), where it may be asked and was not yet.
    pub fn offer_open(
        &mut self,
        session: &str,
        conn: ConnId,
        holders: &BTreeSet<ConnId>,
        to: Reach<'_>,
    ) {
        let patient = holds_terminal(holders, to.conns);
        let Some(c) = to.conns.get_mut(&conn) else {
            return;
        };
        for (key, open) in self.open.iter_mut().filter(|((s, _), _)| s == session) {
            offer_one(key, open, conn, c, patient, to.ids, to.out);
        }
    }

    /// The card the device put to `conn` with the request `id`, if it did (and it is still
    /// open).
    pub fn asked_with(&self, conn: ConnId, id: &Id) -> Option<CardKey> {
        self.open
            .iter()
            .find(|(_, open)| open.asked.get(&conn) == Some(id))
            .map(|(key, _)| key.clone())
    }

    /// `conn` answered the card: the decision, when this answer decides it (the first one
    /// does; `None` for a late answer, or a client that cannot be asked while others may).
    /// `max_mode`: the mode an approved plan is lowered to in a capped session.
    pub fn answered(
        &mut self,
        conn: ConnId,
        key: &CardKey,
        outcome: Result<Value, RpcError>,
        max_mode: Mode,
    ) -> Option<Decided> {
        // Decided already, or taken down: a late answer changes nothing. Nor does an answer
        // from a connection the card was not put to (or that answered it already): only those
        // asked may decide, whoever calls.
        let open = self.open.get_mut(key)?;
        open.asked.remove(&conn)?;
        let decision = match outcome {
            Err(e) if e.code == code::METHOD_NOT_FOUND && !is_permission(&open.card) => {
                // That client cannot be asked (it is protocol 1 now); the others still may.
                if !open.asked.is_empty() {
                    return None;
                }
                // Nobody answered it: every copy comes down, that client's too.
                return Some(Decided {
                    decision: Decision::NobodyToAsk,
                    by: None,
                });
            }
            Err(_) => refusal(&open.card, false),
            Ok(value) => read_answer(&open.card, &value, open.capped.then_some(max_mode)),
        };
        Some(Decided {
            decision,
            by: Some(conn),
        })
    }

    /// Take a card out, decided or no longer waited for (then [`Cards::settle`] it).
    pub fn take(&mut self, key: &CardKey) -> Option<OpenCard> {
        self.open.remove(key)
    }

    /// Take the card's other copies down (not on `answered_by`) with a settled notice of
    /// `seq`, and drop the requests still out for it: their answers, should they come, change
    /// nothing. Returns the notice's params, for the session's log.
    pub fn settle(
        key: &CardKey,
        open: OpenCard,
        answered_by: Option<ConnId>,
        seq: Option<u64>,
        conns: &mut Connections,
        out: &mut Outbox,
    ) -> String {
        let params = serde_json::to_string(&SettledParams {
            meta: seq.map(SeqMeta::new),
            session_id: key.0.clone(),
            tool_call_id: key.1.clone(),
        })
        .expect("notices serialize");
        let frame = notification_frame(SETTLED, &params);
        for (conn, id) in open.asked {
            let Some(c) = conns.get_mut(&conn) else {
                continue;
            };
            c.pending.remove(&id);
            if Some(conn) == answered_by {
                continue;
            }
            if c.may_receive(SETTLED) {
                out.send(conn, frame.clone());
            } else if c.may_receive(CANCEL_REQUEST) {
                // An editor takes its dialog down on ACP's own notice (its answer, should it
                // come, changes nothing).
                let id = serde_json::value::RawValue::from_string(id.as_json().to_owned())
                    .expect("an id is JSON");
                let params = CancelRequestParams { request_id: &id };
                out.send(conn, jsonrpc::encode_notification(CANCEL_REQUEST, &params));
            }
        }
        params
    }

    /// Cards past their time, each with its decision: denied or dismissed.
    pub fn expired(&self, now: Time) -> Vec<(CardKey, Decision)> {
        self.open
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(key, c)| (key.clone(), refusal(&c.card, true)))
            .collect()
    }

    /// A turn ended: its cards, taken out (to be settled).
    pub fn take_turn(&mut self, session: &str, turn: &str) -> Vec<(CardKey, OpenCard)> {
        let keys: Vec<CardKey> = self
            .open
            .iter()
            .filter(|((s, _), c)| s == session && c.turn_id == turn)
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|key| self.open.remove(&key).map(|open| (key, open)))
            .collect()
    }

    /// When the next card times out.
    pub fn deadline(&self) -> Option<Time> {
        self.open.values().map(|c| c.deadline).min()
    }

    /// A connection went away: the cards it was asked stay open for the others and the next.
    pub fn forget_connection(&mut self, conn: ConnId) {
        for open in self.open.values_mut() {
            open.asked.remove(&conn);
        }
    }
}

impl Device {
    /// The engine asks a person: every holder of the session that may be asked is.
    pub(super) fn ask(&mut self, session: &str, turn: &str, card: Card) {
        let tool_call_id = card.tool_call_id.clone();
        let capped = self.sessions.get(session).is_some_and(|s| s.capped);
        let deadline = self
            .clock
            .now()
            .plus_ms(self.config.remote.approval_timeout_ms);
        let key = match self.cards.open(session, turn, card, deadline, capped) {
            Ok(key) => key,
            Err(why) => {
                return self.decide_engine(session, turn, &tool_call_id, Decision::Refused(why))
            }
        };
        // A card is an event of the session: a seq, and kept in its log.
        let seq = self.next_seq(session);
        let nobody = BTreeSet::new();
        let holders = self.sessions.get(session).map_or(&nobody, |s| &s.holders);
        let put = self.cards.put(&key, seq, holders, reach!(self));
        if let (Some(seq), Some((method, params))) = (seq, put.logged) {
            self.log_event(session, seq, method, &params);
        }
        if put.nobody_to_ask {
            self.close_card(&key, Decision::NobodyToAsk, None);
        }
    }

    /// A connection answered a card's request.
    pub(super) fn card_answered(
        &mut self,
        conn: ConnId,
        key: CardKey,
        outcome: Result<Value, RpcError>,
    ) {
        let max_mode = self.config.remote.max_mode;
        if let Some(d) = self.cards.answered(conn, &key, outcome, max_mode) {
            self.close_card(&key, d.decision, d.by);
        }
    }

    /// Decide a card: the engine is told, every other copy is taken down.
    fn close_card(&mut self, key: &CardKey, decision: Decision, answered_by: Option<ConnId>) {
        let Some(open) = self.cards.take(key) else {
            return;
        };
        // An approved plan sets the session's mode (lowered already when the session is
        // capped), not only what the engine is told.
        if let Decision::Plan(PlanDecision::Approve { mode }) = decision {
            self.change_mode(&key.0, mode);
        }
        self.decide_engine(&key.0, &open.turn_id, &key.1, decision);
        self.settle_card(key, open, answered_by);
    }

    /// Take a card down everywhere but on `answered_by`: a settled notice, an event of the
    /// session with its seq, kept in its log.
    fn settle_card(&mut self, key: &CardKey, open: OpenCard, answered_by: Option<ConnId>) {
        let seq = self.next_seq(&key.0);
        let params = Cards::settle(key, open, answered_by, seq, &mut self.conns, &mut self.out);
        if let Some(seq) = seq {
            self.log_event(&key.0, seq, Logged::Settled, &params);
        }
    }

    fn decide_engine(&mut self, session: &str, turn: &str, tool_call_id: &str, decision: Decision) {
        self.out.engine(EngineCommand::Decide {
            session_id: session.to_string(),
            turn_id: turn.to_string(),
            tool_call_id: tool_call_id.to_string(),
            decision,
        });
    }

    /// Cards past their time: denied or dismissed, and taken down everywhere.
    pub(super) fn expire_cards(&mut self, now: Time) {
        for (key, decision) in self.cards.expired(now) {
            self.close_card(&key, decision, None);
        }
    }

    /// A turn ended: its cards are no longer waited for.
    pub(super) fn drop_turn_cards(&mut self, session: &str, turn: &str) {
        for (key, open) in self.cards.take_turn(session, turn) {
            self.settle_card(&key, open, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::card_shape::tests::{permission, question};
    use crate::device::ConnKind;
    use crate::device::Output;
    use crate::engine::PermissionDecision;
    use crate::wire::event::card::{PERMISSION, QUESTION};
    use serde_json::json;

    #[test]
    fn a_card_is_answered_only_by_the_connection_and_id_it_was_asked_with() {
        let (web, terminal) = (ConnId(1), ConnId(2));
        let open = |asked: &[(ConnId, &str)]| OpenCard {
            turn_id: "t".into(),
            card: question(&["a"]),
            deadline: Time(0),
            asked: asked.iter().map(|(c, id)| (*c, Id::string(id))).collect(),
            capped: false,
            seq: None,
        };
        let mut cards = Cards::default();
        cards.open.insert(
            ("s".into(), "call_1".into()),
            open(&[(web, "0-1"), (terminal, "0-2")]),
        );
        cards
            .open
            .insert(("s".into(), "call_2".into()), open(&[(web, "0-3")]));
        let key = |call: &str| Some(("s".to_string(), call.to_string()));
        assert_eq!(cards.asked_with(web, &Id::string("0-1")), key("call_1"));
        assert_eq!(
            cards.asked_with(terminal, &Id::string("0-2")),
            key("call_1")
        );
        assert_eq!(cards.asked_with(web, &Id::string("0-3")), key("call_2"));
        // The id another connection was asked with, or none at all, answers nothing.
        assert_eq!(cards.asked_with(terminal, &Id::string("0-1")), None);
        assert_eq!(cards.asked_with(web, &Id::string("0-9")), None);
    }

    #[test]
    fn only_a_connection_the_card_was_put_to_decides_it() {
        let (web, terminal, stranger) = (ConnId(1), ConnId(2), ConnId(3));
        let mut cards = Cards::default();
        let key: CardKey = ("s".into(), "call_1".into());
        cards.open.insert(
            key.clone(),
            OpenCard {
                turn_id: "t".into(),
                card: question(&["a"]),
                deadline: Time(0),
                asked: [(web, Id::string("0-1")), (terminal, Id::string("0-2"))].into(),
                capped: false,
                seq: None,
            },
        );
        let answer = || Ok(json!({ "outcome": { "outcome": "cancelled" } }));
        assert!(cards
            .answered(stranger, &key, answer(), Mode::Auto)
            .is_none());
        assert_eq!(
            cards.open[&key].asked.len(),
            2,
            "the asked are still waited for"
        );
        let decided = cards.answered(terminal, &key, answer(), Mode::Auto);
        assert_eq!(decided.map(|d| d.by), Some(Some(terminal)));
        // The terminal's answer is in; a second one from it is not another decision.
        assert!(cards
            .answered(terminal, &key, answer(), Mode::Auto)
            .is_none());
    }

    /// A connection that has said it takes cards (protocol 3, `_meta.lembas`).
    fn ready() -> Connection {
        let mut c = Connection::new(ConnKind::Link);
        c.phase = super::super::connection::Phase::Ready;
        c.said.lembas = true;
        c.said.protocol = 3;
        c
    }

    /// A connection of `kind` that has said it takes cards (protocol 3, `_meta.lembas`).
    fn ready_as(kind: ConnKind) -> Connection {
        let mut c = ready();
        c.kind = kind;
        c
    }

    fn reach<'a>(
        conns: &'a mut Connections,
        ids: &'a mut RequestIds,
        out: &'a mut Outbox,
    ) -> Reach<'a> {
        Reach { conns, ids, out }
    }

    /// The connections each frame in `out` went to, and its method.
    fn sent_to(out: &mut Outbox) -> Vec<(ConnId, String)> {
        std::iter::from_fn(|| out.poll())
            .map(|o| {
                let Output::Send { conn, frame } = o else {
                    panic!("only frames: {o:?}")
                };
                let v: Value = serde_json::from_slice(&frame).unwrap();
                (conn, v["method"].as_str().unwrap().to_owned())
            })
            .collect()
    }

    /// Two connections asked the same card, and what was sent.
    fn asked_twice(deadline: Time) -> (Cards, CardKey, Connections, Outbox) {
        let (mut cards, mut ids, mut out) =
            (Cards::default(), RequestIds::default(), Outbox::default());
        let mut conns: Connections = [(ConnId(1), ready()), (ConnId(2), ready())]
            .into_iter()
            .collect();
        let holders = conns.iter().map(|(id, _)| *id).collect();
        let key = cards
            .open("s", "t", permission(false), deadline, false)
            .unwrap();
        let put = cards.put(&key, None, &holders, reach(&mut conns, &mut ids, &mut out));
        assert_eq!(
            put,
            Put::default(),
            "no seq, nothing to log; an approval waits"
        );
        // Put again, it is not sent twice.
        cards.put(&key, None, &holders, reach(&mut conns, &mut ids, &mut out));
        let sent: Vec<_> = std::iter::from_fn(|| out.poll()).collect();
        assert!(
            matches!(
                sent.as_slice(),
                [
                    Output::Send {
                        conn: ConnId(1),
                        ..
                    },
                    Output::Send {
                        conn: ConnId(2),
                        ..
                    }
                ]
            ),
            "{sent:?}"
        );
        (cards, key, conns, out)
    }

    #[test]
    fn the_first_answer_wins_and_a_late_one_is_settled_not_applied() {
        let (mut cards, key, mut conns, mut out) = asked_twice(Time(1_000));
        let once = json!({ "outcome": { "outcome": "selected", "optionId": "once" } });
        let deny = json!({ "outcome": { "outcome": "selected", "optionId": "deny" } });
        let decided = cards.answered(ConnId(2), &key, Ok(once), Mode::Auto);
        assert!(matches!(
            decided,
            Some(Decided {
                decision: Decision::Permission(PermissionDecision::AllowOnce { command: None }),
                by: Some(ConnId(2)),
            })
        ));
        let open = cards.take(&key).unwrap();
        Cards::settle(&key, open, Some(ConnId(2)), Some(4), &mut conns, &mut out);
        // The other copy is taken down; the one that answered is told nothing more.
        let sent: Vec<_> = std::iter::from_fn(|| out.poll()).collect();
        assert!(
            matches!(sent.as_slice(), [Output::Send { conn: ConnId(1), frame }]
                if String::from_utf8_lossy(frame).contains("_lembas/permission/settled")),
            "{sent:?}"
        );
        // Its request is no longer waited for, and a late answer decides nothing.
        assert!(conns[&ConnId(1)].pending.is_empty());
        assert_eq!(cards.asked_with(ConnId(1), &Id::string("0-1")), None);
        assert!(cards
            .answered(ConnId(1), &key, Ok(deny), Mode::Auto)
            .is_none());
        assert_eq!(cards.deadline(), None);
    }

    #[test]
    fn a_card_nobody_answers_in_time_is_denied() {
        let (cards, key, _, _) = asked_twice(Time(1_000));
        assert_eq!(cards.deadline(), Some(Time(1_000)));
        assert!(cards.expired(Time(999)).is_empty());
        let expired = cards.expired(Time(1_000));
        assert!(
            matches!(expired.as_slice(), [(k, Decision::Permission(PermissionDecision::Deny { feedback: None, timed_out: true }))] if *k == key),
            "{expired:?}"
        );
    }

    #[test]
    fn an_error_answer_denies_the_card_and_says_nobody_ran_out_of_time() {
        let (mut cards, key, _, _) = asked_twice(Time(1_000));
        let error = RpcError::invalid_params("no");
        let decided = cards.answered(ConnId(2), &key, Err(error), Mode::Manual);
        assert!(
            matches!(
                decided,
                Some(Decided {
                    decision: Decision::Permission(PermissionDecision::Deny {
                        feedback: None,
                        timed_out: false
                    }),
                    by: Some(ConnId(2))
                })
            ),
            "{decided:?}"
        );
    }

    #[test]
    fn a_client_that_cannot_be_asked_leaves_the_card_to_the_others() {
        let mut cards = Cards::default();
        let key = cards
            .open("s", "t", question(&["a"]), Time(1), false)
            .unwrap();
        let (mut ids, mut out) = (RequestIds::default(), Outbox::default());
        let mut conns: Connections = [(ConnId(1), ready()), (ConnId(2), ready())]
            .into_iter()
            .collect();
        let holders = conns.iter().map(|(id, _)| *id).collect();
        cards.put(&key, None, &holders, reach(&mut conns, &mut ids, &mut out));
        let not_found = || Err(RpcError::new(code::METHOD_NOT_FOUND, "no"));
        assert!(cards
            .answered(ConnId(1), &key, not_found(), Mode::Auto)
            .is_none());
        assert!(matches!(
            cards.answered(ConnId(2), &key, not_found(), Mode::Auto),
            Some(Decided {
                decision: Decision::NobodyToAsk,
                by: None
            })
        ));
        // The same toolCallId cannot be opened twice.
        assert!(cards
            .open("s", "t", question(&["a"]), Time(1), false)
            .unwrap_err()
            .contains("already open"));
    }

    #[test]
    fn a_card_is_put_to_the_holders_that_may_be_asked_with_its_seq_and_logged() {
        let (mut ids, mut out) = (RequestIds::default(), Outbox::default());
        let mut waiting = ready();
        waiting.phase = super::super::connection::Phase::AwaitingInitialize;
        let mut conns: Connections = [
            (ConnId(1), ready()),
            (ConnId(2), waiting),
            (ConnId(3), ready_as(ConnKind::Terminal)),
        ]
        .into_iter()
        .collect();
        // ConnId(4) holds the session but is gone: skipped.
        let holders = BTreeSet::from([ConnId(1), ConnId(2), ConnId(3), ConnId(4)]);
        let mut cards = Cards::default();
        let key = cards
            .open("s", "t", question(&["a"]), Time(9), false)
            .unwrap();
        let put = cards.put(
            &key,
            Some(7),
            &holders,
            reach(&mut conns, &mut ids, &mut out),
        );
        assert!(!put.nobody_to_ask);
        let (method, params) = put.logged.expect("a seq: logged");
        assert_eq!(method.name(), QUESTION);
        let params: Value = serde_json::from_str(&params).unwrap();
        // A terminal holds it: patient, on every copy.
        assert_eq!(
            params["_meta"]["lembas"],
            json!({ "patient": true, "seq": 7 })
        );
        assert_eq!(
            sent_to(&mut out),
            [(ConnId(1), QUESTION.into()), (ConnId(3), QUESTION.into())]
        );
        assert!(conns[&ConnId(1)].pending.contains_key(&Id::string("0-1")));
        assert!(conns[&ConnId(2)].pending.is_empty());
        assert_eq!(cards.asked_with(ConnId(3), &Id::string("0-2")), Some(key));
    }

    #[test]
    fn a_question_nobody_may_be_asked_is_closed_but_an_approval_waits_for_an_editor() {
        let (mut ids, mut out) = (RequestIds::default(), Outbox::default());
        // An editor: plain ACP, no `_meta.lembas`.
        let mut editor = Connection::new(ConnKind::Stdio);
        editor.phase = super::super::connection::Phase::Ready;
        let mut conns: Connections = [(ConnId(1), editor)].into_iter().collect();
        let holders = BTreeSet::from([ConnId(1)]);
        let mut cards = Cards::default();
        let asked = cards
            .open("s", "t", question(&["a"]), Time(9), false)
            .unwrap();
        let put = cards.put(
            &asked,
            None,
            &holders,
            reach(&mut conns, &mut ids, &mut out),
        );
        assert!(put.nobody_to_ask);
        let mut card = permission(false);
        card.tool_call_id = "call_2".into();
        let approval = cards.open("s", "t", card, Time(9), false).unwrap();
        let put = cards.put(
            &approval,
            None,
            &holders,
            reach(&mut conns, &mut ids, &mut out),
        );
        assert!(!put.nobody_to_ask);
        assert_eq!(
            sent_to(&mut out),
            [(ConnId(1), PERMISSION.into())],
            "only the approval reaches the editor"
        );
        // Nobody holds it at all: a question is closed, an approval still waits for its time.
        let none = BTreeSet::new();
        let lonely = cards
            .open("lonely", "t", question(&["a"]), Time(9), false)
            .unwrap();
        let put = cards.put(&lonely, None, &none, reach(&mut conns, &mut ids, &mut out));
        assert!(put.nobody_to_ask);
    }

    #[test]
    fn a_new_holder_is_offered_its_sessions_open_cards_once() {
        let (mut ids, mut out) = (RequestIds::default(), Outbox::default());
        let mut conns: Connections = [
            (ConnId(1), ready()),
            (ConnId(2), ready_as(ConnKind::Terminal)),
        ]
        .into_iter()
        .collect();
        let mut cards = Cards::default();
        for (session, call) in [("s", "call_1"), ("s", "call_2"), ("other", "call_3")] {
            let mut card = permission(false);
            card.tool_call_id = call.into();
            cards.open(session, "t", card, Time(9), false).unwrap();
        }
        let holders = BTreeSet::from([ConnId(1), ConnId(2)]);
        cards.offer_open(
            "s",
            ConnId(1),
            &holders,
            reach(&mut conns, &mut ids, &mut out),
        );
        let frames: Vec<Value> = std::iter::from_fn(|| out.poll())
            .map(|o| {
                let Output::Send { conn, frame } = o else {
                    panic!("{o:?}")
                };
                assert_eq!(conn, ConnId(1));
                serde_json::from_slice(&frame).unwrap()
            })
            .collect();
        let calls: Vec<_> = frames
            .iter()
            .map(|f| f["params"]["toolCall"]["toolCallId"].as_str().unwrap())
            .collect();
        assert_eq!(calls, ["call_1", "call_2"], "only its session's cards");
        // A terminal holds it too: patient.
        assert!(frames
            .iter()
            .all(|f| f["params"]["_meta"]["lembas"]["patient"] == true));
        cards.offer_open(
            "s",
            ConnId(1),
            &holders,
            reach(&mut conns, &mut ids, &mut out),
        );
        assert!(sent_to(&mut out).is_empty(), "offered once");
        // A connection that is gone is offered nothing.
        cards.offer_open(
            "s",
            ConnId(5),
            &holders,
            reach(&mut conns, &mut ids, &mut out),
        );
        assert!(sent_to(&mut out).is_empty());
    }
}
