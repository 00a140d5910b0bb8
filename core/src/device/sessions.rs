//! Sessions: `session/new` (roots, trust, models, modes), `session/set_mode`, the title, status
//! and history, a session opened again from the store, and who hears a session's updates.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Value};

use super::connection::Phase;
use super::event_log::notification_frame;
use super::limits::admit_over_link;
use super::outbox::Lane;
use super::turn_table::TurnTable;
use super::{ConnId, ConnKind, Device};
use crate::config::Mode;
use crate::engine::Context;
use crate::jsonrpc::{self, Id, RpcError};
use crate::paths;
use crate::rng::Rng;
use crate::store::{Record, SessionRecord, Table};
use crate::wire::event::lembas::{EventParams, LembasEvent, ModeEvent, PlanEvent, TitleEvent};
use crate::wire::event::seq::SeqMeta;
use crate::wire::event::update::{
    CurrentModeUpdate, PlanEntry, PlanEntryStatus, PlanMeta, PlanUpdate, SessionUpdate,
    UpdateParams,
};
use crate::wire::session::{
    ModeInfo, Modes, NewSessionParams, SessionIdParams, SetModeParams, StatusResult, TitleParams,
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
}

impl Session {
    /// A session from its record, with no turns, history or holders yet (`ledger_turns` is
    /// the capacity of its turn ledger).
    pub fn new(durable: SessionRecord, ledger_turns: usize) -> Session {
        Session {
            durable,
            turns: TurnTable::new(ledger_turns),
            open: false,
            holders: BTreeSet::new(),
            recent: Default::default(),
            capped: true,
            used: 0,
            events: Default::default(),
            commands_told: None,
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
}

/// A `session/new` waiting for the shell to resolve its `cwd`.
#[derive(Debug)]
pub(crate) struct PendingNew {
    pub conn: ConnId,
    pub id: Id,
    pub cwd: String,
    pub root: String,
    pub mode: Mode,
    pub model: Option<(String, bool)>,
    pub effort: Option<String>,
    pub context: Context,
}

/// Keyed by session id; hashed with a fixed key so the dedup check is O(1) and deterministic.
pub(crate) type Sessions = HashMap<String, Session, super::ledger::Fixed>;

impl Device {
    fn modes_for(&self, kind: ConnKind) -> Vec<Mode> {
        let max = self.max_mode(kind);
        Mode::ALL.into_iter().filter(|m| *m <= max).collect()
    }

    pub(super) fn max_mode(&self, kind: ConnKind) -> Mode {
        match kind {
            ConnKind::Link => self.config.remote.max_mode,
            ConnKind::Stdio | ConnKind::Terminal | ConnKind::Hub => Mode::Auto,
        }
    }

    /// `session/new`: checked lexically here; on the link the shell then resolves symlinks
    /// (`Effect::ResolvePath`) and [`Device::handle_path_resolved`] finishes it.
    pub(super) fn session_new(
        &mut self,
        conn: ConnId,
        id: &Id,
        params: NewSessionParams,
    ) -> Result<Option<Value>, RpcError> {
        let kind = self.conns[&conn].kind;
        self.make_room()?;
        let cwd = paths::normalize(&params.cwd).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "cwd `{}` is not an absolute path",
                params.cwd.escape_debug()
            ))
        })?;
        let meta = params.meta.unwrap_or_default();
        let mode = match meta.mode.as_deref() {
            None => Mode::Edit,
            Some(m) => Mode::parse(m).ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "mode `{m}` is not one of plan, manual, edit, auto"
                ))
            })?,
        }
        .capped(self.max_mode(kind));
        let model = self.pick_model(meta.lembas_model.as_deref(), meta.model.as_deref())?;
        super::models::check_effort(meta.effort.as_deref())?;
        let context = meta.lembas.map(Context::from).unwrap_or_default();
        let mut pending = PendingNew {
            conn,
            id: id.clone(),
            root: cwd.clone(),
            cwd,
            mode,
            model,
            effort: meta.effort,
            context,
        };
        if matches!(kind, ConnKind::Stdio | ConnKind::Hub) {
            // An editor works where it is: no roots, no trust, nothing to resolve.
            return self.create_session(pending).map(Some);
        }
        pending.root = self.check_roots(&pending.cwd)?.to_string();
        let path = pending.cwd.clone();
        let request = self
            .resolving
            .ask(super::resolving::Resolving::Session(Box::new(pending)));
        self.out.resolve_path(request, path);
        Ok(None)
    }

    /// Remote work on, some roots, and `path` inside one of them: the root, or the reason.
    pub(super) fn check_roots(&self, path: &str) -> Result<&str, RpcError> {
        super::limits::check_roots(&self.config.remote, path)
    }

    /// A `session/new`'s `cwd` resolved (resolving.rs): the session is made there, or the
    /// request refused with the reason.
    pub(super) fn session_path_resolved(
        &mut self,
        pending: PendingNew,
        resolved: Result<String, String>,
    ) {
        if !self.conns.contains_key(&pending.conn) {
            return;
        }
        let outcome = resolved
            .map_err(|why| {
                RpcError::invalid_params(format!("cwd `{}` cannot be used: {why}", pending.cwd))
            })
            .and_then(|real| {
                let real = paths::normalize(&real).ok_or_else(|| {
                    RpcError::invalid_params(format!("cwd `{}` did not resolve", pending.cwd))
                })?;
                let root = self.check_directory(&real)?;
                Ok((real, root))
            });
        match outcome {
            Ok((real, root)) => {
                let (conn, id) = (pending.conn, pending.id.clone());
                match self.create_session(PendingNew {
                    cwd: real,
                    root,
                    ..pending
                }) {
                    Ok(result) => self.out.send(conn, jsonrpc::encode_result(&id, &result)),
                    Err(e) => self.reply_error(conn, &id, &e),
                }
            }
            Err(e) => self.reply_error(pending.conn, &pending.id, &e),
        }
    }

    /// A new session in memory (room made for it first, see live.rs).
    fn create_session(&mut self, p: PendingNew) -> Result<Value, RpcError> {
        self.make_room()?;
        let id = format!("ses_{}", self.rng.token(20));
        let kind = self.conns[&p.conn].kind;
        let (model, instance) = p.model.map_or((None, false), |(m, i)| (Some(m), i));
        let mut session = Session::new(
            SessionRecord {
                id,
                cwd: p.cwd,
                root: p.root,
                title: None,
                mode: p.mode,
                model,
                effort: p.effort,
                instance,
                touched: self.clock.now().0,
                plan: None,
                given: kind == ConnKind::Link,
                context: p.context,
                // Its log is sealed, empty: the first seq of this start.
                seq_next: self.seq_base(),
                compaction: None,
            },
            self.config.sessions.ledger_turns,
        );
        session.events = super::event_log::EventLog::new(self.seq_base());
        session.open = true;
        session.holders.insert(p.conn);
        session.capped = kind == ConnKind::Link;
        let record = session.record();
        let result = self.session_result(&session, kind);
        let id = session.durable.id.clone();
        self.sessions.insert_live(session);
        self.out.persist(vec![record]);
        self.shared_gained(p.conn, &id);
        // Spec: with capability `commands`, an `available_commands_update` follows the answer
        // (it is sent once the shell has read the set, after the answer on this connection).
        self.tell_commands(&id, p.conn);
        Ok(result)
    }

    pub(super) fn session_result(&self, s: &Session, kind: ConnKind) -> Value {
        let modes = Modes {
            current_mode_id: s.durable.mode.as_str(),
            available_modes: self
                .modes_for(kind)
                .into_iter()
                .map(|m| ModeInfo {
                    id: m.as_str(),
                    name: m.as_str(),
                })
                .collect(),
        };
        json!({
            "sessionId": s.durable.id,
            "modes": modes,
            "_meta": { "lembas": {
                "model": s.durable.model, "mode": s.durable.mode, "effort": s.durable.effort, "instance": s.durable.instance,
            } },
        })
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
        let on_link = self
            .conns
            .get(&conn)
            .is_some_and(|c| c.kind == ConnKind::Link);
        let Some(s) = self.sessions.touch(session) else {
            return Err(RpcError::invalid_params(format!(
                "no session `{session}` on this device"
            )));
        };
        if on_link {
            admit_over_link(&self.config.remote, session, &s.durable.cwd)?;
        }
        let from_store = !s.open;
        s.open = true;
        let newly = s.holders.insert(conn);
        // Spec, `plan`: sent "after a session is opened from the store when it has a plan", to
        // the connection that opened it, so its plan card is drawn without waiting for a change.
        // It is an event of the session like any other: a seq, and kept in its log.
        let plan = match s.durable.plan.clone().filter(|_| from_store) {
            Some(p) => {
                let seq = s.take_seq(&mut self.out, Lane::of(session));
                let params = serde_json::to_string(&UpdateParams {
                    meta: SeqMeta::some(seq),
                    session_id: session.to_owned(),
                    update: plan_update(Some(&p)),
                })
                .expect("updates serialize");
                let frame = notification_frame("session/update", &params);
                let limits = &self.config.sessions;
                if s.events.push(seq, "session/update", &params, limits) {
                    self.unflushed_logs.push(session.to_owned());
                }
                Some(frame)
            }
            None => None,
        };
        // Used from the link, the session is remote work: its modes are lowered from now on.
        s.capped |= on_link;
        // A session a client on the link was given may be deleted by it later (the mark lasts).
        if on_link && !s.durable.given {
            s.durable.given = true;
            self.out.persist(vec![s.record()]);
        }
        if let Some(frame) = plan {
            self.out.send(conn, frame);
        }
        if newly {
            self.shared_gained(conn, session);
        }
        // Spec: the set is sent after a session is opened from the store or taken up by a new
        // connection.
        if newly || from_store {
            self.tell_commands(session, conn);
        }
        let Some(s) = self.sessions.get_mut(session) else {
            unreachable!("attached just now");
        };
        if newly {
            self.cards
                .offer_open(session, conn, &s.holders, reach!(self));
        }
        Ok((s, &mut self.rng))
    }

    pub(super) fn set_mode(&mut self, conn: ConnId, p: SetModeParams) -> Result<Value, RpcError> {
        let requested = Mode::parse(&p.mode_id).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "mode `{}` is not one of plan, manual, edit, auto",
                p.mode_id
            ))
        })?;
        let on_link = self.conns[&conn].kind == ConnKind::Link;
        let max = self.config.remote.max_mode;
        let now = self.clock.now().0;
        let s = self.attach(conn, &p.session_id)?;
        let mode = if s.capped || on_link {
            requested.capped(max)
        } else {
            requested
        };
        s.durable.touched = now;
        self.change_mode(&p.session_id, mode);
        Ok(json!({}))
    }

    /// The session's mode is now `mode`: durable, then announced to its holders.
    pub(super) fn change_mode(&mut self, session: &str, mode: Mode) {
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        s.durable.mode = mode;
        let record = s.record();
        self.announce_mode(session, mode, record);
    }

    /// The session's mode changed to `mode`: durable first (`record` says it), then announced
    /// to its holders, like every change of the record.
    pub(super) fn announce_mode(&mut self, session: &str, mode: Mode, record: Record) {
        self.out.persist(vec![record]);
        self.broadcast_update(
            session,
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate {
                current_mode_id: mode,
            }),
        );
        self.broadcast_event(session, LembasEvent::Mode(ModeEvent { mode }));
    }

    pub(super) fn set_title(&mut self, conn: ConnId, p: TitleParams) -> Result<Value, RpcError> {
        let max = self.config.sessions.max_title_chars;
        let chars = p.title.chars().count();
        if chars > max {
            return Err(RpcError::invalid_params(format!(
                "title is {chars} characters, over the limit of {max} (max_title_chars)"
            )));
        }
        let now = self.clock.now().0;
        let s = self.attach(conn, &p.session_id)?;
        s.durable.title = Some(p.title.clone());
        s.durable.touched = now;
        let record = s.record();
        self.out.persist(vec![record]);
        self.broadcast_event(
            &p.session_id,
            LembasEvent::Title(TitleEvent {
                id: p.session_id.clone(),
                title: p.title.clone(),
            }),
        );
        self.tell_editors_title(&p.session_id);
        Ok(json!({ "title": p.title }))
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
        let thin = |exists: bool| {
            Ok(serde_json::to_value(StatusResult {
                session_id: &p.session_id,
                exists,
                held: "none",
                busy: false,
                title: None,
                turn_id: None,
                queued: Vec::new(),
                last_turn_id: None,
                plan: None,
            })
            .expect("status serializes"))
        };
        let on_link = self
            .conns
            .get(&conn)
            .is_some_and(|c| c.kind == ConnKind::Link);
        let Some((s, recency)) = self.sessions.get_mut_with_recency(&p.session_id) else {
            return thin(false);
        };
        let remote = &self.config.remote;
        if !admitted || (on_link && admit_over_link(remote, &p.session_id, &s.durable.cwd).is_err())
        {
            return thin(true);
        }
        let newly = s.open && s.holders.insert(conn);
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
        // Spec: "terminal" while an editor or a terminal on the device has it open (shared.rs).
        let held = if self.editor_holds(s) {
            "terminal"
        } else if s.open {
            "here"
        } else {
            "none"
        };
        Ok(serde_json::to_value(StatusResult {
            session_id: &s.durable.id,
            exists: true,
            held,
            busy: s.busy(),
            title: s.durable.title.as_deref(),
            turn_id: s.turns.running().map(|r| r.turn_id.as_str()),
            queued: s.turns.queued_ids().collect(),
            last_turn_id: s.turns.ledger().last_done(),
            plan: s.durable.plan.as_ref(),
        })
        .expect("status serializes"))
    }

    /// A `session/update` to every connection that holds the session, with the session's
    /// next seq, kept in its event log.
    pub(super) fn broadcast_update(&mut self, session: &str, update: SessionUpdate) {
        let Some(seq) = self.next_seq(session) else {
            return;
        };
        let params = serde_json::to_string(&UpdateParams {
            meta: SeqMeta::some(seq),
            session_id: session.to_owned(),
            update,
        })
        .expect("updates serialize");
        self.broadcast_logged(session, seq, "session/update", params, |c| {
            c.phase == Phase::Ready
        });
    }

    /// An `_lembas/event` to every holder whose client said `_meta.lembas`, with the
    /// session's next seq, kept in its event log (whoever hears it now: a client cut off asks
    /// for it later).
    pub(super) fn broadcast_event(&mut self, session: &str, event: LembasEvent) {
        let Some(seq) = self.next_seq(session) else {
            return;
        };
        let params = serde_json::to_string(&EventParams {
            meta: SeqMeta::some(seq),
            event,
            session_id: session.to_owned(),
        })
        .expect("events serialize");
        self.broadcast_logged(session, seq, "_lembas/event", params, |c| {
            c.may_receive("_lembas/event")
        });
    }

    /// Send a notification of the session, its params encoded with `seq`, to every holder
    /// `hears`, in the session's lane (its frames wait only for its own and lane-less
    /// persists); then keep it in the session's log.
    pub(super) fn broadcast_logged(
        &mut self,
        session: &str,
        seq: u64,
        method: &'static str,
        params: String,
        hears: impl Fn(&super::connection::Connection) -> bool,
    ) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let lane = Lane::of(session);
        let mut frame = None;
        for conn in &s.holders {
            if self.conns.get(conn).is_some_and(&hears) {
                let frame = frame.get_or_insert_with(|| notification_frame(method, &params));
                self.out.send_in(lane, *conn, frame.clone());
            }
        }
        self.log_event(session, seq, method, &params);
    }

    /// A connection went away: it hears nothing more, and waits for nothing.
    pub(super) fn forget_connection(&mut self, conn: ConnId) {
        self.resolving.forget_connection(conn);
        for s in self.sessions.values_mut() {
            s.holders.remove(&conn);
            s.turns.forget_connection(conn);
        }
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
        };
        let s = Session::new(rec.clone(), 10);
        let Record::Put { table, key, value } = s.record() else {
            panic!("a session is stored with a put");
        };
        assert_eq!((table, key.as_str()), (Table::Sessions, "ses_1"));
        assert_eq!(serde_json::from_str::<SessionRecord>(&value).unwrap(), rec);
    }
}
