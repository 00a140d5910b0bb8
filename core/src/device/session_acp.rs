//! ACP v1's session surface, for an editor's connection (`serve --stdio`, the hub; methods
//! `On::Local` in the table): `session/list` (every session the device has, the web's too,
//! newest first, a page at a time, `cwd` filtered), `session/load` (the session's history
//! replayed as `session/update`s before the answer), `session/resume` (the same without the
//! replay), `session/close` (its turn cancelled, the connection stops hearing it) and
//! `session/delete` (a delete made on the device: the link's client hears
//! `_lembas/session/deleted`). A title change reaches an editor that holds the session as
//! `session_info_update`.
//!
//! A listing reads no store: a session set aside keeps its summary in memory
//! (session_set.rs). Replayed updates carry no seq and are not logged: they are the history,
//! not new events.

use serde_json::{json, Value};

use super::broadcast::hearers;
use super::connection::{Connection, Phase};
use super::history::{Purpose, Selected};
use super::session_set::Listed;
use super::sessions::{unknown_session, Session};
use super::{ConnId, ConnKind, Device};
use crate::config::Mode;
use crate::engine::ToolStatus;
use crate::jsonrpc::{self, Id, RpcError};
use crate::paths;
use crate::time::iso8601;
use crate::wire::event::update::{
    ContentChunk, SessionInfo, SessionUpdate, TextContent, ToolCall, ToolCallContent,
    ToolCallUpdate, UpdateParams,
};
use crate::wire::session::{
    HistoryTurn, ListSessionsParams, ListedSession, LoadSessionParams, SessionIdParams,
    SessionListResult, ToolRecord,
};

/// Sessions a `session/list` answers at most; `nextCursor` asks for the next page. A page, not
/// a refusal: enough for an editor's picker, one frame far under the frame limit.
pub const LIST_PAGE: usize = 100;

/// Where a page ended: the last session listed, in the listing's order (newest first, then
/// by id). Opaque to the editor: `"<touched>:<id>"`.
struct Cursor {
    touched: u64,
    id: String,
}

impl Cursor {
    fn of(r: &Listed<'_>) -> String {
        format!("{}:{}", r.touched, r.id)
    }

    fn parse(s: &str) -> Result<Cursor, RpcError> {
        s.split_once(':')
            .and_then(|(t, id)| {
                Some(Cursor {
                    touched: t.parse().ok()?,
                    id: id.to_string(),
                })
            })
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "cursor `{}` is not one this device gave (a `nextCursor`)",
                    s.escape_debug()
                ))
            })
    }

    /// Whether `r` comes after the cursor in the listing's order.
    fn before(&self, r: &Listed<'_>) -> bool {
        r.touched < self.touched || (r.touched == self.touched && r.id > self.id.as_str())
    }
}

fn absolute(cwd: &str) -> Result<String, RpcError> {
    paths::normalize(cwd).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "cwd `{}` is not an absolute path",
            cwd.escape_debug()
        ))
    })
}

/// How many times a `session/load` reads a busy session's history again when turns were
/// stored while it read; after that, those turns come from the session's context.
const REPLAY_READS: u8 = 3;

/// A `session/load`'s history read as it was asked (see `history::Purpose::Replay`).
pub(super) struct ReplayRead {
    pub upto: u64,
    pub reads: u8,
    pub limit: usize,
}

impl ReplayRead {
    /// The read to ask for again when the session's history moved on (to `next`, none when
    /// it is not in memory) while the shell read this one, at most [`REPLAY_READS`] in all:
    /// where it ends and what it is for. `None`: replay what was read.
    fn again(&self, next: Option<u64>) -> Option<(u64, Purpose)> {
        let next = next.filter(|n| *n != self.upto && self.reads < REPLAY_READS)?;
        let purpose = Purpose::Replay {
            upto: next,
            reads: self.reads + 1,
        };
        Some((next, purpose))
    }
}

/// `session/list`'s page of `rows` (every session the device has) as `p` asks: those in its
/// `cwd`, after its cursor, newest first (then by id), at most [`LIST_PAGE`], with a
/// `nextCursor` when more follow: `{ sessions: [{ sessionId, cwd, title?, updatedAt }],
/// nextCursor? }`.
fn list_page<'a>(
    rows: impl Iterator<Item = Listed<'a>>,
    p: ListSessionsParams,
) -> Result<Value, RpcError> {
    let cwd = p.cwd.as_deref().map(absolute).transpose()?;
    let after = p.cursor.as_deref().map(Cursor::parse).transpose()?;
    let mut rows: Vec<Listed<'_>> = rows
        .filter(|r| cwd.as_deref().is_none_or(|c| r.cwd == c))
        .filter(|r| after.as_ref().is_none_or(|a| a.before(r)))
        .collect();
    let order =
        |a: &Listed<'_>, b: &Listed<'_>| b.touched.cmp(&a.touched).then_with(|| a.id.cmp(b.id));
    // The page and the one after it, without sorting every session.
    if rows.len() > LIST_PAGE + 1 {
        rows.select_nth_unstable_by(LIST_PAGE, order);
        rows.truncate(LIST_PAGE + 1);
    }
    rows.sort_unstable_by(order);
    let next = (rows.len() > LIST_PAGE).then(|| {
        rows.truncate(LIST_PAGE);
        Cursor::of(&rows[LIST_PAGE - 1])
    });
    let sessions = rows
        .iter()
        .map(|r| ListedSession {
            session_id: r.id,
            cwd: r.cwd,
            title: r.title,
            updated_at: iso8601(r.touched),
        })
        .collect();
    let page = SessionListResult {
        sessions,
        next_cursor: next,
    };
    Ok(serde_json::to_value(page).expect("a page of sessions serializes"))
}

impl Session {
    /// What a `session/load` replays before its answer: `read` (the turns the shell read,
    /// stored before `upto`), the turns stored since as its context keeps them (without
    /// reasoning or tools), then what its running turn said so far (within `max_answer`).
    fn load_replay(&self, read: Vec<HistoryTurn>, upto: u64, max_answer: usize) -> Vec<Vec<u8>> {
        let session = self.durable.id.as_str();
        let mut turns = read;
        // Still moving after every read: the turns stored since, as the session's context
        // keeps them, rather than none.
        turns.extend(self.recent.since(upto).unwrap_or_default().iter().cloned());
        let mut frames = replay_frames(session, &turns);
        if let Some(r) = self.turns.running() {
            let (text, reasoning) = (r.text.so_far(max_answer), r.reasoning.so_far(max_answer));
            assistant_frames(session, &text, &reasoning, &r.tools, true, &mut frames);
        }
        frames
    }

    /// The answer to a load or resume: as `session/new`'s ([`Session::result`], modes up to
    /// `max_mode`) less the session's id, saying in `_meta.lembas` when turns were left out
    /// (`cut`: truncated, dropped).
    fn load_result(&self, max_mode: Mode, cut: Option<(bool, u64)>) -> Value {
        // ACP's answer to a load names no session: the request did.
        self.result_with(max_mode, false, cut)
    }

    /// The `session_info_update` an editor hears when its title changes.
    fn info_frame(&self) -> Vec<u8> {
        update_frame(
            &self.durable.id,
            SessionUpdate::SessionInfoUpdate(SessionInfo {
                title: self.durable.title.clone(),
                updated_at: Some(iso8601(self.durable.touched)),
            }),
        )
    }
}

impl Device {
    /// `session/list` ([`list_page`]).
    pub(super) fn list_sessions(&self, p: ListSessionsParams) -> Result<Value, RpcError> {
        list_page(self.sessions.listed(), p)
    }

    /// `session/load` (`replay`: its history first, as `session/update`s, once the shell has
    /// read it from the store) and `session/resume`: the connection holds the session from
    /// then on (opened from the store if it was set aside), and is answered its modes and
    /// model as `session/new` is.
    pub(super) fn load_session(
        &mut self,
        conn: ConnId,
        id: &Id,
        p: LoadSessionParams,
        replay: bool,
    ) -> Result<Option<Value>, RpcError> {
        absolute(&p.cwd)?;
        if !replay {
            self.attach(conn, &p.session_id)?;
            return Ok(Some(self.load_result(conn, &p.session_id, None)));
        }
        let Some(s) = self.sessions.get(&p.session_id) else {
            return Err(unknown_session(&p.session_id));
        };
        // The connection holds it only once its history is replayed, so nothing live of the
        // session reaches it before: the replay ends where the live updates begin.
        let upto = s.recent.next();
        let limit = self.config.sessions.max_history_turns;
        let purpose = Purpose::Replay { upto, reads: 1 };
        self.read_history(conn, id, &p.session_id, Some(upto), limit, purpose);
        Ok(None)
    }

    /// A `session/load`'s history read: its turns replayed, then what the running turn said
    /// so far, then the answer (saying in `_meta.lembas` when turns were left out:
    /// `truncated`, `dropped`). The connection holds the session from then on, so the live
    /// updates take up exactly where the replay ends: a turn stored while the shell read (one
    /// ended, or began) is read again rather than missed.
    pub(super) fn replay_loaded(
        &mut self,
        conn: ConnId,
        id: &Id,
        session: &str,
        read: Selected,
        asked: ReplayRead,
    ) {
        let next = self.sessions.get(session).map(|s| s.recent.next());
        if let Some((next, purpose)) = asked.again(next) {
            return self.read_history(conn, id, session, Some(next), asked.limit, purpose);
        }
        let max_answer = self.config.sessions.max_answer_bytes;
        let frames = match self.attach(conn, session) {
            Err(e) => return self.reply_error(conn, id, &e),
            Ok(s) => s.load_replay(read.turns, asked.upto, max_answer),
        };
        for frame in frames {
            self.out.send(conn, frame);
        }
        let cut = read.truncated.then_some((read.truncated, read.dropped));
        let result = self.load_result(conn, session, cut);
        self.out.send(conn, jsonrpc::encode_result(id, &result));
    }

    /// The answer to a load or resume of `session` (attached just now).
    fn load_result(&self, conn: ConnId, session: &str, cut: Option<(bool, u64)>) -> Value {
        let kind = self.conns[&conn].kind;
        let s = self.sessions.get(session).expect("attached just now");
        s.load_result(self.max_mode(kind), cut)
    }

    /// `session/close`: its running turn is cancelled (ACP: as `session/cancel`), and this
    /// connection no longer hears it. The session stays, for the web and a later load.
    pub(super) fn close_session(
        &mut self,
        conn: ConnId,
        p: SessionIdParams,
    ) -> Result<Value, RpcError> {
        let Some(s) = self.sessions.get_mut(&p.session_id) else {
            if self.sessions.has(&p.session_id) {
                // Set aside: nothing runs and no one holds it.
                return Ok(json!({}));
            }
            return Err(unknown_session(&p.session_id));
        };
        s.holders.remove(&conn);
        let session = p.session_id.clone();
        self.cancel(p);
        self.shared_lost(&session);
        Ok(json!({}))
    }

    /// `session/delete`: the session is deleted as `lembas sessions delete` deletes it, and
    /// the link's client hears it now or after its next `initialize`.
    pub(super) fn delete_from_editor(&mut self, p: SessionIdParams) -> Result<Value, RpcError> {
        if !self.delete_on_device(&p.session_id) {
            return Err(unknown_session(&p.session_id));
        }
        Ok(json!({}))
    }

    /// A session's title changed: each editor that holds it hears `session_info_update`
    /// (the link's client has the `title` event).
    pub(super) fn tell_editors_title(&mut self, session: &str) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let frame = s.info_frame();
        for conn in hearers(&s.holders, &self.conns, hears_info) {
            self.out.send(conn, frame.clone());
        }
    }
}

/// Whether a connection hears a session's `session_info_update`: an editor's (stdio, the
/// hub) that answered `initialize`; the link's client has the `title` event instead.
fn hears_info(c: &Connection) -> bool {
    matches!(c.kind, ConnKind::Stdio | ConnKind::Hub) && c.phase == Phase::Ready
}

fn update_frame(session: &str, update: SessionUpdate) -> Vec<u8> {
    jsonrpc::encode_notification(
        "session/update",
        &UpdateParams {
            meta: None,
            session_id: session.to_owned(),
            update,
        },
    )
}

fn chunk(text: &str) -> ContentChunk {
    ContentChunk {
        content: TextContent::new(text),
    }
}

/// A session's history as the `session/update`s an editor would have seen: what the person
/// said, then each answer's reasoning, tool calls (with their output) and text.
fn replay_frames(session: &str, history: &[HistoryTurn]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for turn in history {
        match turn {
            HistoryTurn::User { text, .. } => frames.push(update_frame(
                session,
                SessionUpdate::UserMessageChunk(chunk(text)),
            )),
            HistoryTurn::Assistant {
                text,
                reasoning,
                tools,
            } => assistant_frames(session, text, reasoning, tools, false, &mut frames),
        }
    }
    frames
}

/// An answer's updates: its reasoning, its tools, its text. `running`: the turn is still
/// going, and a tool with no output yet is in progress.
fn assistant_frames(
    session: &str,
    text: &str,
    reasoning: &str,
    tools: &[ToolRecord],
    running: bool,
    frames: &mut Vec<Vec<u8>>,
) {
    if !reasoning.is_empty() {
        frames.push(update_frame(
            session,
            SessionUpdate::AgentThoughtChunk(chunk(reasoning)),
        ));
    }
    for t in tools {
        let status = match (t.is_error, &t.output) {
            (Some(true), _) => ToolStatus::Failed,
            (_, None) if running => ToolStatus::InProgress,
            _ => ToolStatus::Completed,
        };
        frames.push(update_frame(
            session,
            SessionUpdate::ToolCall(ToolCall {
                kind: "other".into(),
                raw_input: t.args.clone(),
                status,
                title: t.name.clone(),
                tool_call_id: t.id.clone(),
            }),
        ));
        if let Some(output) = &t.output {
            frames.push(update_frame(
                session,
                SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    content: vec![ToolCallContent::text(output)],
                    status,
                    tool_call_id: t.id.clone(),
                }),
            ));
        }
    }
    if !text.is_empty() {
        frames.push(update_frame(
            session,
            SessionUpdate::AgentMessageChunk(chunk(text)),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    use serde_json::{json, Value};

    use crate::config::DeviceConfig;
    use crate::device::{ConnKind, Device, Effect, Output};
    use crate::time::Time;

    /// A device with one hub connection, initialized; every persist acknowledged at once.
    struct Hub {
        d: Device,
        conn: crate::device::ConnId,
        sent: Vec<Value>,
        now: u64,
    }

    impl Hub {
        fn new(max_live: usize) -> Hub {
            let mut c = DeviceConfig::default();
            c.sessions.max_live = max_live;
            let mut d = Device::new(c, Time(0)).unwrap();
            let conn = d.handle_open(ConnKind::Hub, Time(0)).unwrap();
            let mut h = Hub {
                d,
                conn,
                sent: Vec::new(),
                now: 0,
            };
            h.call(json!({ "id": "i", "method": "initialize",
                           "params": { "protocolVersion": 1 } }));
            h
        }

        fn call(&mut self, mut v: Value) -> Value {
            v["jsonrpc"] = json!("2.0");
            self.now += 1;
            let bytes = serde_json::to_vec(&v).unwrap();
            self.d
                .handle_frame(self.conn, &bytes, Time(self.now))
                .unwrap();
            while let Some(o) = self.d.poll_output() {
                match o {
                    Output::Send { frame, .. } => {
                        self.sent.push(serde_json::from_slice(&frame).unwrap())
                    }
                    Output::Effect(Effect::Persist { seq, .. }) => {
                        self.d.handle_persisted(seq, Time(self.now))
                    }
                    _ => {}
                }
            }
            self.sent
                .iter()
                .rev()
                .find(|f| f["id"] == v["id"] && f.get("method").is_none())
                .cloned()
                .expect("answered")
        }
    }

    /// Sessions in memory and set aside are listed alike, newest first, each once across the
    /// pages, however the pages fall.
    #[test]
    fn pages_list_every_session_once_newest_first_set_aside_ones_too() {
        // 250 sessions, 40 in memory: most are set aside and listed from their summaries.
        // Each is closed once made: one an editor holds stays in memory.
        let mut h = Hub::new(40);
        let mut made = Vec::new();
        for i in 0..250 {
            let cwd = if i % 2 == 0 { "/a" } else { "/b" };
            let r = h.call(json!({ "id": i, "method": "session/new", "params": { "cwd": cwd } }));
            let id = r["result"]["sessionId"].as_str().unwrap().to_string();
            let closed = h.call(json!({ "id": format!("c{i}"), "method": "session/close",
                                        "params": { "sessionId": id } }));
            assert_eq!(closed["result"], json!({}), "{closed}");
            made.push(id);
        }
        assert_eq!(h.d.session_count(), 250);
        let mut listed = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut params = json!({});
            if let Some(c) = &cursor {
                params["cursor"] = json!(c);
            }
            let r = h.call(
                json!({ "id": format!("l{pages}"), "method": "session/list", "params": params }),
            );
            let page = r["result"]["sessions"].as_array().unwrap().clone();
            assert!(page.len() <= super::LIST_PAGE, "{}", page.len());
            listed.extend(
                page.iter()
                    .map(|s| s["sessionId"].as_str().unwrap().to_string()),
            );
            pages += 1;
            match r["result"]["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        assert_eq!(pages, 3);
        made.reverse();
        assert_eq!(listed, made, "newest first, each once");
        let unique: BTreeSet<_> = listed.iter().collect();
        assert_eq!(unique.len(), 250);
        // The filter holds set-aside sessions too.
        let r = h.call(json!({ "id": "f", "method": "session/list", "params": { "cwd": "/b" } }));
        let page = r["result"]["sessions"].as_array().unwrap();
        assert_eq!(page.len(), 100);
        assert!(page.iter().all(|s| s["cwd"] == "/b"));
        assert!(r["result"]["nextCursor"].as_str().is_some());
    }

    fn row(id: &str, cwd: &str, touched: u64) -> (String, String, u64) {
        (id.to_owned(), cwd.to_owned(), touched)
    }

    fn page(
        rows: &[(String, String, u64)],
        cwd: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<Value, RpcError> {
        let listed = rows.iter().map(|(id, cwd, touched)| Listed {
            id,
            cwd,
            title: (id == "t").then_some("a title"),
            touched: *touched,
        });
        let p = ListSessionsParams {
            cwd: cwd.map(Into::into),
            cursor: cursor.map(Into::into),
        };
        list_page(listed, p)
    }

    fn ids(v: &Value) -> Vec<&str> {
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn a_page_is_newest_first_in_its_cwd_after_its_cursor() {
        let rows = [
            row("a", "/x", 1),
            row("b", "/y", 3),
            row("c", "/x", 3),
            row("t", "/x", 2),
        ];
        let all = page(&rows, None, None).unwrap();
        assert_eq!(ids(&all), ["b", "c", "t", "a"], "newest first, then by id");
        assert!(all.get("nextCursor").is_none(), "one page");
        assert_eq!(all["sessions"][2]["title"], "a title");
        assert!(all["sessions"][0].get("title").is_none());
        assert_eq!(all["sessions"][3]["updatedAt"], iso8601(1));
        assert_eq!(
            ids(&page(&rows, Some("/x/"), None).unwrap()),
            ["c", "t", "a"]
        );
        assert_eq!(
            ids(&page(&rows, None, Some("3:b")).unwrap()),
            ["c", "t", "a"]
        );
        let e = page(&rows, None, Some("b")).unwrap_err();
        assert!(
            e.message.contains("cursor `b` is not one this device gave"),
            "{e:?}"
        );
        let e = page(&rows, Some("x"), None).unwrap_err();
        assert!(
            e.message.contains("cwd `x` is not an absolute path"),
            "{e:?}"
        );
        // One more than a page: the next cursor names the last one listed.
        let many: Vec<_> = (0..=LIST_PAGE as u64)
            .map(|i| row(&format!("s{i:03}"), "/x", i))
            .collect();
        let first = page(&many, None, None).unwrap();
        assert_eq!(ids(&first).len(), LIST_PAGE);
        assert_eq!(first["nextCursor"], "1:s001");
        assert_eq!(ids(&page(&many, None, Some("1:s001")).unwrap()), ["s000"]);
    }

    #[test]
    fn a_replay_is_read_again_while_the_history_moves_at_most_three_times() {
        let read = |reads| ReplayRead {
            upto: 4,
            reads,
            limit: 10,
        };
        assert!(read(1).again(Some(4)).is_none(), "nothing moved");
        assert!(read(1).again(None).is_none(), "not in memory");
        let Some((5, Purpose::Replay { upto: 5, reads: 2 })) = read(1).again(Some(5)) else {
            panic!("read again up to the new end");
        };
        assert!(read(REPLAY_READS).again(Some(5)).is_none(), "enough reads");
    }

    #[test]
    fn a_load_replays_what_was_read_what_was_stored_since_and_the_running_turn() {
        use crate::device::turn_table::Admission;
        use crate::jsonrpc::Id;
        let limits = crate::config::SessionLimits::default();
        let mut s = crate::device::live::tests::session("s");
        let user = |text: &str| HistoryTurn::User {
            text: text.into(),
            turn_id: None,
            attachments: Vec::new(),
        };
        let upto = s.recent.next();
        s.recent.push(&user("since"), false, &limits);
        let start = s.turn_start("t".into(), "hi".into(), Vec::new());
        s.turns
            .admit(start, Admission::default(), (ConnId(1), Id::number(1)));
        s.turns.start_next();
        s.turns.running_mut("t").unwrap().text.push("so far", 100);
        let frames = s.load_replay(vec![user("read")], upto, 100);
        let said: Vec<(String, String)> = frames
            .iter()
            .map(|f| {
                let v: Value = serde_json::from_slice(f).unwrap();
                let u = &v["params"]["update"];
                (
                    u["sessionUpdate"].as_str().unwrap().to_owned(),
                    u["content"]["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let said: Vec<(&str, &str)> = said.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(
            said,
            [
                ("user_message_chunk", "read"),
                ("user_message_chunk", "since"),
                ("agent_message_chunk", "so far")
            ]
        );
    }

    #[test]
    fn a_loads_answer_names_no_session_and_says_what_was_cut() {
        let s = crate::device::live::tests::session("s");
        let r = s.load_result(Mode::Edit, None);
        assert!(r.get("sessionId").is_none(), "{r}");
        assert!(r["_meta"]["lembas"].get("truncated").is_none(), "{r}");
        assert_eq!(r["modes"], s.result(Mode::Edit)["modes"]);
        let r = s.load_result(Mode::Edit, Some((true, 3)));
        assert_eq!(
            (
                r["_meta"]["lembas"]["truncated"].clone(),
                r["_meta"]["lembas"]["dropped"].clone()
            ),
            (json!(true), json!(3))
        );
        let info: Value = serde_json::from_slice(&s.info_frame()).unwrap();
        assert_eq!(
            info["params"]["update"]["sessionUpdate"],
            "session_info_update"
        );
        assert_eq!(info["params"]["sessionId"], "s");
    }

    #[test]
    fn a_title_change_reaches_the_editors_that_answered_initialize() {
        let ready = |kind| {
            let mut c = Connection::new(kind);
            c.initialized(crate::wire::handshake::ClientSaid {
                lembas: true,
                protocol: 3,
                show: false,
            });
            c
        };
        assert!(hears_info(&ready(ConnKind::Stdio)));
        assert!(hears_info(&ready(ConnKind::Hub)));
        assert!(!hears_info(&ready(ConnKind::Link)), "it has the event");
        assert!(!hears_info(&ready(ConnKind::Terminal)));
        assert!(!hears_info(&Connection::new(ConnKind::Stdio)), "not ready");
    }
}
