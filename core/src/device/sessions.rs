//! Sessions: a session's state and record, `session/set_mode`, the title, status and history,
//! and a session opened again from the store. How one is made is session_new.rs; who hears a
//! session's updates, broadcast.rs.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Value};

use super::broadcast::update_params;
use super::event_log::{notification_frame, Logged};
use super::limits::admit_over_link;
use super::outbox::{Lane, Outbox};
use super::turn_table::TurnTable;
use super::{ConnId, ConnKind, Device};
use crate::config::{Mode, Remote, SessionLimits};
use crate::jsonrpc::RpcError;
use crate::rng::Rng;
use crate::store::{Record, SessionRecord, Table};
use crate::wire::event::lembas::{LembasEvent, ModeEvent, PlanEvent, TitleEvent};
use crate::wire::event::update::{
    CurrentModeUpdate, PlanEntry, PlanEntryStatus, PlanMeta, PlanUpdate, SessionUpdate,
};
use crate::wire::session::{
    ModeInfo, Modes, SessionIdParams, SessionResult, SessionResultLembas, SessionResultMeta,
    SetModeParams, StatusResult, TitleParams,
};

/// A session in memory: what of it is stored (its record, written as it is) and what lives only
/// while the device runs.
#[derive(Debug)]
pub(crate) struct Session {
    /// The part that persists, field for field (`Table::Sessions`).
    pub durable: SessionRecord,
    /// Its turns: the ledger, the queue, the running one and the prompts waiting for answers.
    pub turns: TurnTable,
    /// Held here (by the service) since it was made or opened from the store.
    pub open: bool,
    /// Connections that hear this session's updates.
    pub holders: BTreeSet<ConnId>,
    /// Its last turns, as the next turn's context needs them; the rest of its history is in
    /// the store only (history.rs).
    pub recent: super::history::Recent,
    /// Whether the session is on a link (so its mode is capped).
    pub capped: bool,
    /// When it was last named (the device's use counter), for setting the least recently used
    /// idle session aside (live.rs).
    pub used: u64,
    /// Its recent events with their seqs (event_log.rs).
    pub events: super::event_log::EventLog,
    /// The fingerprint of the command set its holders were last told of (command_set.rs).
    pub commands_told: Option<u64>,
    /// The seq of the command set it last logged (command_set.rs), so an unchanged one is sent
    /// again as that event; looked up in its log when this run has logged none.
    pub commands_logged: Option<u64>,
}

impl Session {
    /// A session from its record, with no turns, history or holders yet (`ledger_turns` is
    /// the capacity of its turn ledger).
    pub fn new(durable: SessionRecord, ledger_turns: usize) -> Session {
        let events = super::event_log::EventLog::new(&durable.id, 1);
        Session {
            durable,
            turns: TurnTable::new(ledger_turns),
            open: false,
            holders: BTreeSet::new(),
            recent: Default::default(),
            capped: true,
            used: 0,
            events,
            commands_told: None,
            commands_logged: None,
        }
    }

    /// The change that stores it as it is now.
    pub fn record(&self) -> Record {
        Record::Put {
            table: Table::Sessions,
            key: self.durable.id.clone(),
            value: serde_json::to_string(&self.durable).expect("records serialize"),
        }
    }

    pub fn busy(&self) -> bool {
        self.turns.running().is_some()
    }

    /// The answer to a `session/new` (and a load's, less its id): its modes (those up to
    /// `max_mode`, what the connection may use), model and effort.
    pub fn result(&self, max_mode: Mode) -> Value {
        self.result_with(max_mode, true, None)
    }

    /// [`Session::result`], with the session's id or not, and what a load left out (`cut`:
    /// truncated, dropped).
    pub(super) fn result_with(
        &self,
        max_mode: Mode,
        with_id: bool,
        cut: Option<(bool, u64)>,
    ) -> Value {
        let modes = Modes {
            current_mode_id: self.durable.mode.as_str(),
            available_modes: Mode::ALL
                .into_iter()
                .filter(|m| *m <= max_mode)
                .map(|m| ModeInfo {
                    id: m.as_str(),
                    name: m.as_str(),
                })
                .collect(),
        };
        let d = &self.durable;
        let result = SessionResult {
            session_id: with_id.then_some(d.id.as_str()),
            modes,
            meta: SessionResultMeta {
                lembas: SessionResultLembas {
                    model: d.model.as_deref(),
                    mode: d.mode,
                    effort: d.effort.as_deref(),
                    instance: d.instance,
                    truncated: cut.map(|(truncated, _)| truncated),
                    dropped: cut.map(|(_, dropped)| dropped),
                },
            },
        };
        serde_json::to_value(result).expect("a session's answer serializes")
    }

    /// Taken up for `conn`: open (it was only in the store when `from_store`), and `conn`
    /// hears its updates (`newly` when it did not before).
    pub fn take_up(&mut self, conn: ConnId) -> TakenUp {
        let from_store = !self.open;
        self.open = true;
        let newly = self.holders.insert(conn);
        TakenUp { from_store, newly }
    }

    /// Taken up for `conn` ([`Session::take_up`]; `on_link`: a client on the link): its plan
    /// sent again when it was only in the store ([`Session::reopened_plan`]), and used from
    /// the link ([`Session::used_from_link`]).
    pub fn attached(
        &mut self,
        conn: ConnId,
        on_link: bool,
        out: &mut Outbox,
        limits: &SessionLimits,
    ) -> Attached {
        let taken = self.take_up(conn);
        let plan = match taken.from_store {
            true => self.reopened_plan(out, limits),
            false => None,
        };
        let given = on_link.then(|| self.used_from_link()).flatten();
        Attached { taken, plan, given }
    }

    /// [`Session::attached`] once the rules of this moment admit it: from the link
    /// (`on_link`) its directory must be inside `remote`'s roots. Refused, nothing of it
    /// changes.
    pub fn attach_admitted(
        &mut self,
        conn: ConnId,
        on_link: bool,
        remote: &Remote,
        out: &mut Outbox,
        limits: &SessionLimits,
    ) -> Result<Attached, RpcError> {
        if on_link {
            admit_over_link(remote, &self.durable.id, &self.durable.cwd)?;
        }
        Ok(self.attached(conn, on_link, out, limits))
    }

    /// Used from the link: remote work, its modes lowered from now on, and given (a client on
    /// the link may delete it later; the mark lasts). The record to store when it was not
    /// given before.
    pub fn used_from_link(&mut self) -> Option<Record> {
        self.capped = true;
        if self.durable.given {
            return None;
        }
        self.durable.given = true;
        Some(self.record())
    }

    /// Spec, `plan`: sent "after a session is opened from the store when it has a plan", to
    /// the connection that opened it, so its plan card is drawn without waiting for a change.
    /// It is an event of the session like any other: the frame takes its next seq and is kept
    /// in its log (`true` beside it: the log has entries the store lacks, and had none).
    pub fn reopened_plan(
        &mut self,
        out: &mut Outbox,
        limits: &SessionLimits,
    ) -> Option<(Vec<u8>, bool)> {
        let plan = self.durable.plan.clone()?;
        let seq = self.take_seq(out, Lane::of(&self.durable.id));
        let params = update_params(&self.durable.id, seq, plan_update(Some(&plan)));
        let frame = notification_frame("session/update", &params);
        let unflushed = self.events.push(seq, Logged::Update, &params, limits);
        Some((frame, unflushed))
    }

    /// The mode a client asks for (`requested`), lowered to `max` when the session is remote
    /// work or the client is on the link.
    pub fn mode_asked(&self, requested: Mode, on_link: bool, max: Mode) -> Mode {
        if self.capped || on_link {
            requested.capped(max)
        } else {
            requested
        }
    }

    /// `session/set_mode`'s `requested` mode at `now` ([`Session::mode_asked`]): the mode it
    /// has now and the record that stores it.
    pub fn mode_set(
        &mut self,
        requested: Mode,
        on_link: bool,
        max: Mode,
        now: u64,
    ) -> (Mode, Record) {
        let mode = self.mode_asked(requested, on_link, max);
        self.durable.touched = now;
        (mode, self.switch_mode(mode))
    }

    /// Its mode is now `mode`: the record that stores it.
    pub fn switch_mode(&mut self, mode: Mode) -> Record {
        self.durable.mode = mode;
        self.record()
    }

    /// `_lembas/session/title`'s change, `title` (checked with [`check_title`] before the
    /// session is taken up) at `now`: what the device persists, announces and answers.
    pub(super) fn titled(&mut self, title: String, now: u64) -> Retitled {
        let event = LembasEvent::Title(TitleEvent {
            id: self.durable.id.clone(),
            title: title.clone(),
        });
        // Spec: the result is `{ title }`.
        let answer = json!({ "title": title });
        self.durable.title = Some(title);
        self.durable.touched = now;
        Retitled {
            record: self.record(),
            event,
            answer,
        }
    }

    /// `conn` hears it from now on if it is open (held here); whether it did not before.
    pub fn hold_if_open(&mut self, conn: ConnId) -> bool {
        self.open && self.holders.insert(conn)
    }

    /// Asked for its status by `conn`: whether `conn` hears it newly ([`Session::hold_if_open`]),
    /// or `None` when the rules of this moment do not admit it (`admitted` false: its directory
    /// failed them after symlinks; `on_link`: held to `remote`'s), and nothing of it is read.
    pub fn hold_for_status(
        &mut self,
        conn: ConnId,
        admitted: bool,
        on_link: bool,
        remote: &Remote,
    ) -> Option<bool> {
        let over_link = |s: &Session| admit_over_link(remote, &s.durable.id, &s.durable.cwd);
        if !admitted || (on_link && over_link(self).is_err()) {
            return None;
        }
        Some(self.hold_if_open(conn))
    }

    /// Its `_lembas/session/status` (`editor_holds`: an editor or a terminal on the device
    /// has it open).
    pub fn status(&self, editor_holds: bool) -> StatusResult<'_> {
        // Spec: "terminal" while an editor or a terminal on the device has it open (shared.rs).
        let held = if editor_holds {
            "terminal"
        } else if self.open {
            "here"
        } else {
            "none"
        };
        StatusResult {
            session_id: self.durable.id.as_str().into(),
            exists: true,
            held: held.into(),
            busy: self.busy(),
            title: self.durable.title.as_deref().map(Into::into),
            turn_id: self.turns.running().map(|r| r.turn_id.as_str().into()),
            queued: self.turns.queued_ids().map(Into::into).collect(),
            last_turn_id: self.turns.ledger().last_done().map(Into::into),
            plan: self.durable.plan.as_ref().map(Cow::Borrowed),
        }
    }
}

/// What taking a session up for a connection changed ([`Session::take_up`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TakenUp {
    /// It was in the store only, not held here.
    pub from_store: bool,
    /// The connection did not hear it before.
    pub newly: bool,
}

/// A session taken up for a connection ([`Session::attached`]), for Device to persist and send.
pub(crate) struct Attached {
    pub taken: TakenUp,
    /// Its plan's frame for the connection that opened it from the store, and whether its log
    /// has entries the store lacks now (and had none).
    pub plan: Option<(Vec<u8>, bool)>,
    /// Its record, given from the link for the first time.
    pub given: Option<Record>,
}

/// One thing taking a session up tells, for the device to do in order.
#[derive(Debug, PartialEq)]
pub(crate) enum AttachTell {
    /// Its log has entries the store lacks: it is flushed with the others.
    UnflushedLog,
    /// Its record, persisted.
    Persist(Record),
    /// Its plan's frame, to the connection.
    Plan(Vec<u8>),
    /// The connection hears it now: what sharing it changes.
    SharedGained,
    /// Its command set, to the connection.
    Commands,
    /// Its open cards, offered to the connection.
    OfferCards,
}

impl Attached {
    /// Whether the connection is told the session's command set. Spec: the set is sent after
    /// a session is opened from the store or taken up by a new connection.
    pub fn tells_commands(&self) -> bool {
        self.taken.newly || self.taken.from_store
    }

    /// What it tells, in order: its log kept to flush, its record given from the link
    /// (durable before anything about it goes out), its plan, then for a new holder what
    /// sharing it changes, its command set (also when opened from the store) and its cards.
    pub fn tells(self) -> Vec<AttachTell> {
        let commands = self.tells_commands();
        let Attached { taken, plan, given } = self;
        let mut tells = Vec::new();
        if let Some((_, true)) = plan {
            tells.push(AttachTell::UnflushedLog);
        }
        tells.extend(given.map(AttachTell::Persist));
        tells.extend(plan.map(|(frame, _)| AttachTell::Plan(frame)));
        if taken.newly {
            tells.push(AttachTell::SharedGained);
        }
        if commands {
            tells.push(AttachTell::Commands);
        }
        if taken.newly {
            tells.push(AttachTell::OfferCards);
        }
        tells
    }
}

/// The refusal of a request naming a session the device does not have.
pub(super) fn unknown_session(session: &str) -> RpcError {
    RpcError::invalid_params(format!("no session `{session}` on this device"))
}

/// The status of a session this device does not have (`exists` false) or may not show now:
/// nothing of its content.
fn thin_status(session: &str, exists: bool) -> StatusResult<'_> {
    StatusResult {
        session_id: session.into(),
        exists,
        held: "none".into(),
        busy: false,
        title: None,
        turn_id: None,
        queued: Vec::new(),
        last_turn_id: None,
        plan: None,
    }
}

/// The highest mode a connection of `kind` may use: on the link, what `remote` allows; an
/// editor or a terminal on the device, any.
pub(super) fn max_mode(remote: &Remote, kind: ConnKind) -> Mode {
    match kind {
        ConnKind::Link => remote.max_mode,
        ConnKind::Stdio | ConnKind::Terminal | ConnKind::Hub => Mode::Auto,
    }
}

/// A mode a client names, or `-32602` naming the four.
pub(super) fn parse_mode(m: &str) -> Result<Mode, RpcError> {
    Mode::parse(m).ok_or_else(|| {
        RpcError::invalid_params(format!("mode `{m}` is not one of plan, manual, edit, auto"))
    })
}

/// A session's title changed ([`Session::titled`]).
pub(super) struct Retitled {
    /// The session's record, storing it.
    pub record: Record,
    /// The `title` event its holders hear.
    pub event: LembasEvent,
    /// The answer to the request that changed it.
    pub answer: Value,
}

/// A title within `max` characters (`sessions.max_title_chars`), or the refusal naming it.
pub(super) fn check_title(title: &str, max: usize) -> Result<(), RpcError> {
    let chars = title.chars().count();
    if chars > max {
        return Err(RpcError::invalid_params(format!(
            "title is {chars} characters, over the limit of {max} (max_title_chars)"
        )));
    }
    Ok(())
}

/// Keyed by session id; hashed with a fixed key so the dedup check is O(1) and deterministic.
pub(crate) type Sessions = HashMap<String, Session, super::ledger::Fixed>;

impl Device {
    pub(super) fn max_mode(&self, kind: ConnKind) -> Mode {
        max_mode(&self.config.remote, kind)
    }

    pub(super) fn on_link(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| c.kind == ConnKind::Link)
    }

    /// The session a client names, opened again if it is only in the store, once the limits of
    /// this moment admit it ([`Device::admit`]); the connection becomes one that hears its
    /// updates. `-32602` naming an unknown id, or the rule the session fails now.
    pub(super) fn attach(&mut self, conn: ConnId, session: &str) -> Result<&mut Session, RpcError> {
        self.attach_drawing(conn, session).map(|(s, _)| s)
    }

    /// [`Device::attach`], with the device's random source beside the session: a prompt names
    /// its attachments while it holds the session it queues them on.
    pub(super) fn attach_drawing(
        &mut self,
        conn: ConnId,
        session: &str,
    ) -> Result<(&mut Session, &mut Rng), RpcError> {
        let on_link = self.on_link(conn);
        let Some(s) = self.sessions.touch(session) else {
            return Err(unknown_session(session));
        };
        let (remote, limits) = (&self.config.remote, &self.config.sessions);
        let attached = s.attach_admitted(conn, on_link, remote, &mut self.out, limits)?;
        for tell in attached.tells() {
            match tell {
                AttachTell::UnflushedLog => self.unflushed_logs.push(session.to_owned()),
                AttachTell::Persist(record) => self.out.persist(vec![record]),
                AttachTell::Plan(frame) => self.out.send(conn, frame),
                AttachTell::SharedGained => self.shared_gained(conn, session),
                AttachTell::Commands => self.tell_commands(session, conn),
                AttachTell::OfferCards => {
                    if let Some(s) = self.sessions.get(session) {
                        self.cards
                            .offer_open(session, conn, &s.holders, reach!(self));
                    }
                }
            }
        }
        let Some(s) = self.sessions.get_mut(session) else {
            unreachable!("attached just now");
        };
        Ok((s, &mut self.rng))
    }

    pub(super) fn set_mode(&mut self, conn: ConnId, p: SetModeParams) -> Result<Value, RpcError> {
        let requested = parse_mode(&p.mode_id)?;
        let on_link = self.conns[&conn].kind == ConnKind::Link;
        let max = self.config.remote.max_mode;
        let now = self.clock.now().0;
        let s = self.attach(conn, &p.session_id)?;
        let (mode, record) = s.mode_set(requested, on_link, max, now);
        self.announce_mode(&p.session_id, mode, record);
        Ok(json!({}))
    }

    /// The session's mode is now `mode`: durable, then announced to its holders.
    pub(super) fn change_mode(&mut self, session: &str, mode: Mode) {
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let record = s.switch_mode(mode);
        self.announce_mode(session, mode, record);
    }

    /// The session's mode changed to `mode`: durable first (`record` says it), then announced
    /// to its holders, like every change of the record. Written in the session's lane: what
    /// announces it (the session's frames, and every lane-less answer) waits for it; another
    /// session's stream does not.
    pub(super) fn announce_mode(&mut self, session: &str, mode: Mode, record: Record) {
        self.out.persist_in(Lane::of(session), vec![record]);
        self.broadcast_update(
            session,
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate {
                current_mode_id: mode,
            }),
        );
        self.broadcast_event(session, LembasEvent::Mode(ModeEvent { mode }));
    }

    pub(super) fn set_title(&mut self, conn: ConnId, p: TitleParams) -> Result<Value, RpcError> {
        check_title(&p.title, self.config.sessions.max_title_chars)?;
        let now = self.clock.now().0;
        let s = self.attach(conn, &p.session_id)?;
        let retitled = s.titled(p.title, now);
        self.out.persist(vec![retitled.record]);
        self.broadcast_event(&p.session_id, retitled.event);
        self.tell_editors_title(&p.session_id);
        Ok(retitled.answer)
    }

    /// `_lembas/session/status`. An unknown id is an answer here (`exists: false`), not an
    /// error: a reattaching client needs to tell "gone" from "failed". A session the limits of
    /// this moment do not admit ([`Device::admit`]; `admitted` false when its directory failed
    /// them after symlinks) is said to exist, and nothing of its content is read.
    pub(super) fn status(
        &mut self,
        conn: ConnId,
        p: SessionIdParams,
        admitted: bool,
    ) -> Result<Value, RpcError> {
        let thin =
            |exists| {
                Ok(serde_json::to_value(thin_status(&p.session_id, exists))
                    .expect("status serializes"))
            };
        let on_link = self.on_link(conn);
        let Some((s, recency)) = self.sessions.get_mut_with_recency(&p.session_id) else {
            return thin(false);
        };
        let Some(newly) = s.hold_for_status(conn, admitted, on_link, &self.config.remote) else {
            return thin(true);
        };
        recency.mark(s);
        if newly {
            self.cards
                .offer_open(&p.session_id, conn, &s.holders, reach!(self));
            self.shared_gained(conn, &p.session_id);
            self.tell_commands(&p.session_id, conn);
        }
        let Some(s) = self.sessions.get(&p.session_id) else {
            return thin(false);
        };
        Ok(serde_json::to_value(s.status(self.editor_holds(s))).expect("status serializes"))
    }
}

/// The `plan` session update: ACP's flat `entries` and the structure in `_meta.lembas.plan`
/// (`null`: cleared).
pub(super) fn plan_update(plan: Option<&Value>) -> SessionUpdate {
    SessionUpdate::Plan(PlanUpdate {
        entries: plan.map(plan_entries).unwrap_or_default(),
        meta: PlanMeta {
            lembas: PlanEvent {
                plan: plan.cloned(),
            },
        },
    })
}

/// ACP's flat list of a structured plan, for an editor: every task of every phase.
fn plan_entries(plan: &Value) -> Vec<PlanEntry> {
    let mut entries = Vec::new();
    for phase in plan["phases"].as_array().into_iter().flatten() {
        for task in phase["tasks"].as_array().into_iter().flatten() {
            let content = task["title"]
                .as_str()
                .or_else(|| task["content"].as_str())
                .unwrap_or("");
            // ACP has no word for a dropped task: it is completed there.
            let status = match task["status"].as_str() {
                Some("in_progress") => PlanEntryStatus::InProgress,
                Some("completed" | "done" | "dropped") => PlanEntryStatus::Completed,
                _ => PlanEntryStatus::Pending,
            };
            entries.push(PlanEntry {
                content: content.to_owned(),
                priority: "medium".to_owned(),
                status,
            });
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::session_new::tests::pending;
    use crate::engine::Context;

    #[test]
    fn a_session_stores_back_the_very_record_it_was_made_from() {
        let context = Context {
            system_prompt: Some(json!("be brief")),
            ..Context::default()
        };
        let rec = SessionRecord {
            id: "ses_1".into(),
            cwd: "/w/p".into(),
            root: "/w".into(),
            title: Some("t".into()),
            mode: Mode::Plan,
            model: Some("m".into()),
            effort: Some("high".into()),
            instance: true,
            touched: 42,
            plan: Some(json!({ "phases": [] })),
            given: true,
            context,
            seq_next: 7,
            compaction: None,
            undoing: None,
            events_floor: None,
        };
        let s = Session::new(rec.clone(), 10);
        let Record::Put { table, key, value } = s.record() else {
            panic!("a session is stored with a put");
        };
        assert_eq!((table, key.as_str()), (Table::Sessions, "ses_1"));
        assert_eq!(serde_json::from_str::<SessionRecord>(&value).unwrap(), rec);
    }

    #[test]
    fn a_sessions_answer_lists_the_modes_up_to_the_connections_max() {
        let s = Session::created(pending(1, None), "ses_a".into(), false, 0, 1, 10);
        let modes = |max| {
            s.result(max)["modes"]["availableModes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(modes(Mode::Auto), ["plan", "manual", "edit", "auto"]);
        assert_eq!(modes(Mode::Manual), ["plan", "manual"]);
        let r = s.result(Mode::Auto);
        assert_eq!(
            (r["sessionId"].clone(), r["modes"]["currentModeId"].clone()),
            (json!("ses_a"), json!("plan"))
        );
        assert_eq!(r["_meta"]["lembas"]["effort"], json!("low"));
    }

    #[test]
    fn taken_up_it_is_open_and_heard_and_given_once_by_the_link() {
        let mut s = crate::device::live::tests::session("a");
        let first = s.take_up(ConnId(1));
        assert_eq!(
            first,
            TakenUp {
                from_store: true,
                newly: true
            }
        );
        assert_eq!(
            s.take_up(ConnId(1)),
            TakenUp {
                from_store: false,
                newly: false
            }
        );
        assert_eq!(
            s.take_up(ConnId(2)),
            TakenUp {
                from_store: false,
                newly: true
            }
        );
        s.capped = false;
        let Some(Record::Put { value, .. }) = s.used_from_link() else {
            panic!("given: stored");
        };
        assert!(value.contains("\"given\":true"), "{value}");
        assert!(s.capped && s.durable.given);
        assert_eq!(
            s.used_from_link(),
            None,
            "the mark lasts; nothing to store again"
        );
    }

    #[test]
    fn attached_from_the_store_its_plan_goes_out_and_from_the_link_it_is_given_once() {
        let limits = SessionLimits::default();
        let mut out = Outbox::default();
        let mut s = crate::device::live::tests::session("a");
        s.durable.plan = Some(json!({ "phases": [] }));
        s.capped = false;
        let first = s.attached(ConnId(1), false, &mut out, &limits);
        let both = TakenUp {
            from_store: true,
            newly: true,
        };
        assert_eq!(first.taken, both);
        assert!(first.plan.is_some(), "opened from the store: its plan");
        assert!(first.given.is_none() && !s.capped, "not from the link");
        let linked = s.attached(ConnId(2), true, &mut out, &limits);
        assert!(linked.taken.newly && !linked.taken.from_store);
        assert!(linked.plan.is_none(), "open already");
        assert!(linked.given.is_some() && s.capped, "given from the link");
        let again = s.attached(ConnId(2), true, &mut out, &limits);
        assert!(again.given.is_none() && !again.taken.newly, "given once");
    }

    #[test]
    fn taken_up_it_tells_its_log_record_plan_then_to_a_new_holder_sharing_commands_cards() {
        let attached = |from_store, newly, plan: Option<(Vec<u8>, bool)>, given| Attached {
            taken: TakenUp { from_store, newly },
            plan,
            given,
        };
        let record = || crate::device::live::tests::session("a").record();
        let all = attached(true, true, Some((b"plan".to_vec(), true)), Some(record()));
        assert_eq!(
            all.tells(),
            [
                AttachTell::UnflushedLog,
                AttachTell::Persist(record()),
                AttachTell::Plan(b"plan".to_vec()),
                AttachTell::SharedGained,
                AttachTell::Commands,
                AttachTell::OfferCards,
            ]
        );
        let reopened = attached(true, false, Some((b"plan".to_vec(), false)), None);
        assert_eq!(
            reopened.tells(),
            [AttachTell::Plan(b"plan".to_vec()), AttachTell::Commands],
            "a holder already: no sharing, no cards; its log has nothing the store lacks"
        );
        let joined = attached(false, true, None, None);
        assert_eq!(
            joined.tells(),
            [
                AttachTell::SharedGained,
                AttachTell::Commands,
                AttachTell::OfferCards
            ]
        );
        assert_eq!(attached(false, false, None, None).tells(), []);
    }

    #[test]
    fn attached_from_the_link_only_inside_the_roots_and_refused_it_is_left_as_it_was() {
        let limits = SessionLimits::default();
        let mut out = Outbox::default();
        let mut s = crate::device::live::tests::session("a");
        s.durable.cwd = "/w/p".into();
        s.capped = false;
        let (inside, outside) = (Remote::open(&["/w"]), Remote::open(&["/elsewhere"]));
        let e = s
            .attach_admitted(ConnId(1), true, &outside, &mut out, &limits)
            .err()
            .expect("outside the roots, from the link: refused");
        assert_eq!(e.code, crate::jsonrpc::code::INVALID_PARAMS);
        assert!(
            !s.open && s.holders.is_empty() && !s.capped && !s.durable.given,
            "refused: untouched"
        );
        let editor = s
            .attach_admitted(ConnId(1), false, &outside, &mut out, &limits)
            .expect("off the link the roots do not hold it");
        assert!(editor.tells_commands(), "opened from the store");
        let linked = s
            .attach_admitted(ConnId(2), true, &inside, &mut out, &limits)
            .expect("inside the roots");
        assert!(
            linked.tells_commands() && linked.given.is_some(),
            "a new holder"
        );
        let again = s
            .attach_admitted(ConnId(2), true, &inside, &mut out, &limits)
            .expect("inside the roots");
        assert!(!again.tells_commands(), "open and heard already");
        s.open = false;
        let reopened = s
            .attach_admitted(ConnId(2), true, &inside, &mut out, &limits)
            .expect("inside the roots");
        assert!(reopened.tells_commands(), "opened from the store again");
        assert_eq!(
            unknown_session("b").message,
            "no session `b` on this device"
        );
    }

    #[test]
    fn a_mode_set_is_lowered_as_asked_and_touches_the_session() {
        let mut s = crate::device::live::tests::session("a");
        s.capped = false;
        let (mode, record) = s.mode_set(Mode::Auto, true, Mode::Edit, 7);
        assert_eq!((mode, s.durable.mode), (Mode::Edit, Mode::Edit));
        assert_eq!(s.durable.touched, 7);
        assert_eq!(record, s.record());
        let (mode, _) = s.mode_set(Mode::Auto, false, Mode::Edit, 8);
        assert_eq!(
            (mode, s.durable.mode, s.durable.touched),
            (Mode::Auto, Mode::Auto, 8)
        );
    }

    #[test]
    fn a_plan_reopened_goes_out_with_the_sessions_next_seq_and_is_logged() {
        let limits = SessionLimits::default();
        let mut out = Outbox::default();
        let mut s = crate::device::live::tests::session("a");
        assert!(
            s.reopened_plan(&mut out, &limits).is_none(),
            "no plan, no event"
        );
        s.durable.plan = Some(json!({ "phases": [{ "tasks": [{ "title": "x" }] }] }));
        let (frame, unflushed) = s.reopened_plan(&mut out, &limits).expect("a plan event");
        let v: Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(v["method"], "session/update");
        assert_eq!(v["params"]["update"]["sessionUpdate"], "plan");
        assert_eq!(v["params"]["update"]["entries"][0]["content"], "x");
        assert_eq!(v["params"]["_meta"]["lembas"]["seq"], 1);
        assert!(unflushed, "the log has an entry the store lacks");
        assert_eq!(s.events.next_seq(), 2);
    }

    #[test]
    fn a_mode_asked_is_lowered_for_remote_work_and_a_link_only() {
        let mut s = crate::device::live::tests::session("a");
        s.capped = false;
        assert_eq!(s.mode_asked(Mode::Auto, false, Mode::Edit), Mode::Auto);
        assert_eq!(s.mode_asked(Mode::Auto, true, Mode::Edit), Mode::Edit);
        s.capped = true;
        assert_eq!(s.mode_asked(Mode::Auto, false, Mode::Edit), Mode::Edit);
        assert_eq!(s.mode_asked(Mode::Plan, false, Mode::Edit), Mode::Plan);
        assert_eq!(s.switch_mode(Mode::Manual), s.record());
        assert_eq!(s.durable.mode, Mode::Manual);
    }

    #[test]
    fn a_title_is_held_to_its_limit_in_characters() {
        assert!(check_title("héllo", 5).is_ok());
        let e = check_title("héllo!", 5).unwrap_err();
        assert!(
            e.message
                .contains("6 characters, over the limit of 5 (max_title_chars)"),
            "{e:?}"
        );
    }

    #[test]
    fn a_title_set_is_stored_announced_by_the_session_and_answered() {
        let mut s = crate::device::live::tests::session("a");
        let retitled = s.titled("t".into(), 7);
        assert_eq!(
            (s.durable.title.as_deref(), s.durable.touched),
            (Some("t"), 7)
        );
        assert_eq!(retitled.record, s.record());
        let event = serde_json::to_value(&retitled.event).unwrap();
        assert_eq!(event, json!({ "type": "title", "id": "a", "title": "t" }));
        assert_eq!(retitled.answer, json!({ "title": "t" }));
    }

    #[test]
    fn a_status_holds_it_only_where_the_rules_of_the_moment_admit_it() {
        let mut s = crate::device::live::tests::session("a");
        s.open = true;
        s.durable.cwd = "/w/p".into();
        let (inside, outside) = (Remote::open(&["/w"]), Remote::open(&["/elsewhere"]));
        assert_eq!(s.hold_for_status(ConnId(1), false, false, &inside), None);
        assert_eq!(s.hold_for_status(ConnId(1), true, true, &outside), None);
        assert!(s.holders.is_empty(), "refused: not held");
        assert_eq!(
            s.hold_for_status(ConnId(1), true, false, &outside),
            Some(true),
            "off the link the roots do not hold it"
        );
        assert_eq!(
            s.hold_for_status(ConnId(2), true, true, &inside),
            Some(true)
        );
        assert_eq!(
            s.hold_for_status(ConnId(2), true, true, &inside),
            Some(false)
        );
        s.open = false;
        assert_eq!(
            s.hold_for_status(ConnId(3), true, true, &inside),
            Some(false)
        );
    }

    #[test]
    fn status_says_who_holds_it_and_a_thin_one_says_nothing_of_it() {
        let mut s = crate::device::live::tests::session("a");
        assert!(!s.hold_if_open(ConnId(1)), "not open: no holder");
        assert_eq!(s.status(false).held, "none");
        s.open = true;
        assert!(s.hold_if_open(ConnId(1)));
        assert!(!s.hold_if_open(ConnId(1)));
        assert_eq!(s.status(false).held, "here");
        assert_eq!(s.status(true).held, "terminal");
        s.durable.title = Some("t".into());
        let st = s.status(false);
        assert_eq!(
            (st.session_id, st.exists, st.busy, st.title),
            ("a".into(), true, false, Some("t".into()))
        );
        let thin = serde_json::to_value(thin_status("b", true)).unwrap();
        assert_eq!(
            thin,
            json!({ "sessionId": "b", "exists": true, "held": "none", "busy": false, "title": null,
                    "queued": [], "plan": null })
        );
    }
}
