//! `session/new`: its params read and checked lexically, its `cwd` resolved by the shell
//! (symlinks followed) and checked again, then the session made (named by a draw, held by who
//! asked, capped and given when that is the link) and stored before its answer leaves.

use serde_json::Value;

use super::given_context::bounded;
use super::sessions::{max_mode, parse_mode, Session};
use super::{ConnId, ConnKind, Device};
use crate::config::Mode;
use crate::engine::Context;
use crate::jsonrpc::{self, Id, RpcError};
use crate::paths;
use crate::rng::Rng;
use crate::store::{Record, SessionRecord};
use crate::wire::session::NewSessionParams;
use crate::DeviceConfig;

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

impl PendingNew {
    /// A `session/new`'s params, checked lexically: its `cwd` absolute (and its root, until
    /// the roots say otherwise), its mode one of the four (lowered to `max_mode`), its model
    /// as `pick_model` finds it, its effort one the device knows. The first rule broken is
    /// the refusal.
    pub fn read(
        conn: ConnId,
        id: &Id,
        params: NewSessionParams,
        max_mode: Mode,
        pick_model: impl FnOnce(Option<&str>, Option<&str>) -> Result<Option<(String, bool)>, RpcError>,
    ) -> Result<PendingNew, RpcError> {
        let cwd = paths::normalize(&params.cwd).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "cwd `{}` is not an absolute path",
                params.cwd.escape_debug()
            ))
        })?;
        let meta = params.meta.unwrap_or_default();
        let mode = match meta.mode.as_deref() {
            None => Mode::Edit,
            Some(m) => parse_mode(m)?,
        }
        .capped(max_mode);
        let model = pick_model(meta.lembas_model.as_deref(), meta.model.as_deref())?;
        super::models::check_effort(meta.effort.as_deref())?;
        Ok(PendingNew {
            conn,
            id: id.clone(),
            root: cwd.clone(),
            cwd,
            mode,
            model,
            effort: meta.effort,
            context: meta.lembas.map(Context::from).unwrap_or_default(),
        })
    }

    /// Its `cwd` as the shell `resolved` it (symlinks followed), made canonical; the refusal
    /// naming the `cwd` asked for when the shell could not resolve it (`Err`: why) or gave
    /// back something that is not an absolute path.
    pub fn resolved(&self, resolved: Result<String, String>) -> Result<String, RpcError> {
        let real = resolved.map_err(|why| {
            RpcError::invalid_params(format!("cwd `{}` cannot be used: {why}", self.cwd))
        })?;
        paths::normalize(&real)
            .ok_or_else(|| RpcError::invalid_params(format!("cwd `{}` did not resolve", self.cwd)))
    }
}

impl Session {
    /// A session `session/new` made (`p`), named `id`, at `now`: open, held by the connection
    /// that asked, capped and given when that is on the link; its event log sealed and empty
    /// (`seq_base`, the first seq of this start).
    pub fn created(
        p: PendingNew,
        id: String,
        on_link: bool,
        now: u64,
        seq_base: u64,
        ledger_turns: usize,
    ) -> Session {
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
                touched: now,
                plan: None,
                given: on_link,
                context: p.context,
                seq_next: seq_base,
                compaction: None,
                undoing: None,
                events_floor: None,
            },
            ledger_turns,
        );
        session.events = super::event_log::EventLog::new(&session.durable.id, seq_base);
        session.open = true;
        session.holders.insert(p.conn);
        session.capped = on_link;
        session
    }

    /// [`Session::created`] for a connection of `kind`, named by a draw of `rng`, as `config`
    /// holds sessions: the session, the record that stores it and the `session/new` answer
    /// (the modes `kind` may use).
    pub fn made(
        p: PendingNew,
        kind: ConnKind,
        rng: &mut Rng,
        now: u64,
        seq_base: u64,
        config: &DeviceConfig,
    ) -> (Session, Record, Value) {
        let id = format!("ses_{}", rng.token(20));
        let ledger_turns = config.sessions.ledger_turns;
        let on_link = kind == ConnKind::Link;
        let session = Session::created(p, id, on_link, now, seq_base, ledger_turns);
        let answer = session.result(max_mode(&config.remote, kind));
        let record = session.record();
        (session, record, answer)
    }
}

impl Device {
    /// `session/new`: checked lexically here; on the link the shell then resolves symlinks
    /// (`Effect::ResolvePath`) and [`Device::handle_path_resolved`] finishes it.
    pub(super) fn session_new(
        &mut self,
        conn: ConnId,
        id: &Id,
        params: NewSessionParams,
    ) -> Result<Option<Value>, RpcError> {
        let kind = self.conns[&conn].kind;
        let mut pending = PendingNew::read(conn, id, params, self.max_mode(kind), |l, m| {
            self.pick_model(l, m)
        })?;
        pending.context = bounded(std::mem::take(&mut pending.context), &self.config.sessions)?;
        // Only a request whose params pass sets another session aside for it.
        self.make_room()?;
        if matches!(kind, ConnKind::Stdio | ConnKind::Hub) {
            // An editor works where it is: no roots, no trust, nothing to resolve.
            return self.create_session(pending).map(Some);
        }
        pending.root = super::limits::check_roots(&self.config.remote, &pending.cwd)?.to_string();
        let path = pending.cwd.clone();
        let request = self
            .resolving
            .ask(super::resolving::Resolving::Session(Box::new(pending)));
        self.out.resolve_path(request, path);
        Ok(None)
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
        let (conn, id) = (pending.conn, pending.id.clone());
        let made = pending.resolved(resolved).and_then(|real| {
            let root = self.check_directory(&real)?;
            self.create_session(PendingNew {
                cwd: real,
                root,
                ..pending
            })
        });
        match made {
            Ok(result) => self.out.send(conn, jsonrpc::encode_result(&id, &result)),
            Err(e) => self.reply_error(conn, &id, &e),
        }
    }

    /// A new session in memory (room made for it first, see live.rs).
    fn create_session(&mut self, p: PendingNew) -> Result<Value, RpcError> {
        self.make_room()?;
        let (conn, kind) = (p.conn, self.conns[&p.conn].kind);
        let (now, seq_base) = (self.clock.now().0, self.seq_base());
        let made = Session::made(p, kind, &mut self.rng, now, seq_base, &self.config);
        let (session, record, result) = made;
        let id = session.durable.id.clone();
        self.sessions.insert_live(session);
        self.out.persist(vec![record]);
        self.shared_gained(conn, &id);
        // Spec: with capability `commands`, an `available_commands_update` follows the answer
        // (it is sent once the shell has read the set, after the answer on this connection).
        self.tell_commands(&id, conn);
        Ok(result)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn pending(conn: u64, model: Option<(String, bool)>) -> PendingNew {
        PendingNew {
            conn: ConnId(conn),
            id: Id::number(1),
            cwd: "/w/p".into(),
            root: "/w".into(),
            mode: Mode::Plan,
            model,
            effort: Some("low".into()),
            context: Context::default(),
        }
    }

    #[test]
    fn a_resolved_cwd_is_made_canonical_and_a_failed_or_relative_one_refused_naming_the_cwd() {
        let p = pending(1, None);
        assert_eq!(
            p.resolved(Ok("/real/./x//y/../p".into())).unwrap(),
            "/real/x/p"
        );
        let err = p
            .resolved(Err("no such directory".into()))
            .expect_err("refused");
        assert_eq!(err.code, crate::jsonrpc::code::INVALID_PARAMS);
        assert_eq!(err.message, "cwd `/w/p` cannot be used: no such directory");
        let err = p.resolved(Ok("real/p".into())).expect_err("not absolute");
        assert_eq!(err.code, crate::jsonrpc::code::INVALID_PARAMS);
        assert_eq!(err.message, "cwd `/w/p` did not resolve");
    }

    fn new_params(v: Value) -> NewSessionParams {
        serde_json::from_value(v).expect("session/new params")
    }

    #[test]
    fn a_new_sessions_params_are_read_and_the_first_rule_broken_refuses_it() {
        let picked = |_: Option<&str>, _: Option<&str>| Ok(Some(("m".to_owned(), false)));
        let read =
            |v: Value, max| PendingNew::read(ConnId(1), &Id::number(1), new_params(v), max, picked);
        let p = read(json!({ "cwd": "/w/./p/", "mcpServers": [] }), Mode::Auto).unwrap();
        assert_eq!(
            (p.cwd.as_str(), p.root.as_str(), p.mode),
            ("/w/p", "/w/p", Mode::Edit)
        );
        assert_eq!(p.model, Some(("m".to_owned(), false)));
        // Asked for auto on a connection capped at plan: plan.
        let p = read(
            json!({ "cwd": "/w", "mcpServers": [], "_meta": { "mode": "auto" } }),
            Mode::Plan,
        )
        .unwrap();
        assert_eq!(p.mode, Mode::Plan);
        let e = read(
            json!({ "cwd": "w", "mcpServers": [], "_meta": { "mode": "loud" } }),
            Mode::Auto,
        )
        .unwrap_err();
        assert!(
            e.message.contains("cwd `w` is not an absolute path"),
            "{e:?}"
        );
        let e = read(
            json!({ "cwd": "/w", "mcpServers": [], "_meta": { "mode": "loud" } }),
            Mode::Auto,
        )
        .unwrap_err();
        assert!(e.message.contains("mode `loud` is not one of"), "{e:?}");
        let refused = |_: Option<&str>, _: Option<&str>| Err(RpcError::invalid_params("no model"));
        let e = PendingNew::read(
            ConnId(1),
            &Id::number(1),
            new_params(json!({ "cwd": "/w", "mcpServers": [] })),
            Mode::Auto,
            refused,
        )
        .unwrap_err();
        assert_eq!(e.message, "no model");
    }

    #[test]
    fn a_session_made_on_the_link_is_given_capped_and_held_by_who_asked() {
        let s = Session::created(
            pending(3, Some(("m".into(), true))),
            "ses_a".into(),
            true,
            9,
            65,
            10,
        );
        let d = &s.durable;
        assert_eq!(
            (d.id.as_str(), d.cwd.as_str(), d.root.as_str()),
            ("ses_a", "/w/p", "/w")
        );
        assert_eq!(
            (d.mode, d.model.as_deref(), d.instance),
            (Mode::Plan, Some("m"), true)
        );
        assert_eq!((d.touched, d.seq_next, d.given), (9, 65, true));
        assert!(s.open && s.capped);
        assert_eq!(s.holders.iter().copied().collect::<Vec<_>>(), [ConnId(3)]);
        assert_eq!(
            s.events.next_seq(),
            65,
            "its log begins at this start's first seq"
        );
        let editor = Session::created(pending(3, None), "ses_b".into(), false, 9, 65, 10);
        assert!(!editor.durable.given && !editor.capped);
        assert_eq!(
            (editor.durable.model.as_deref(), editor.durable.instance),
            (None, false)
        );
    }

    #[test]
    fn a_session_is_named_by_a_draw_and_answered_with_the_modes_its_connection_may_use() {
        let mut config = DeviceConfig::default();
        config.remote.max_mode = Mode::Manual;
        let mut rng = Rng::new(5);
        let drawn = format!("ses_{}", Rng::new(5).token(20));
        let (s, record, answer) =
            Session::made(pending(2, None), ConnKind::Link, &mut rng, 9, 65, &config);
        assert_eq!(s.durable.id, drawn);
        assert!(s.capped && s.durable.given, "made on the link");
        assert_eq!(record, s.record());
        assert_eq!(answer, s.result(Mode::Manual));
        let (editor, _, answer) =
            Session::made(pending(2, None), ConnKind::Stdio, &mut rng, 9, 65, &config);
        assert_ne!(editor.durable.id, drawn, "the next draw");
        assert!(!editor.capped && !editor.durable.given);
        assert_eq!(answer, editor.result(Mode::Auto));
        assert_eq!(max_mode(&config.remote, ConnKind::Link), Mode::Manual);
        for kind in [ConnKind::Stdio, ConnKind::Terminal, ConnKind::Hub] {
            assert_eq!(max_mode(&config.remote, kind), Mode::Auto, "{kind:?}");
        }
    }
}
