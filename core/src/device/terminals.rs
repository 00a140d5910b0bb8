//! Remote terminals (`_lembas/terminal/*`): the rules of `open` (terminals on, the size, the
//! roots, four a link), the bookkeeping of which link owns which terminal, and the batching of a
//! shell's output into frames of at most `max_output_frame_bytes`. The shell opens the PTY
//! (`Effect::OpenTerminal`) and reports back with the `handle_terminal_*` inputs.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use super::limits::check_roots;
use super::outbox::Outbox;
use super::{ConnId, ConnKind, Device, Effect};
use crate::config::{DeviceConfig, Remote, TerminalLimits};
use crate::jsonrpc::{self, code, Id, RpcError};
use crate::paths;
use crate::time::Time;
use crate::wire::terminal::{
    CloseParams, Exit, InputParams, OpenParams, OpenResult, Output, ResizeParams,
};
use base64::Engine as _;

/// What the shell found when it started a terminal's shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellInfo {
    /// `bash`, `zsh`, `fish` or `other`.
    pub shell: String,
    /// Whether the prompt marks (OSC 133, OSC 7) are in use.
    pub integration: bool,
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the shell to resolve `cwd` (symlinks followed).
    Resolving,
    /// Waiting for the shell to start (`Effect::OpenTerminal` issued).
    Opening,
    Open,
    /// Hung up; waiting for the shell's exit.
    Closing,
}

#[derive(Debug)]
pub(crate) struct Terminal {
    conn: ConnId,
    /// The `open` request, answered once the shell started.
    request: Id,
    phase: Phase,
    cwd: String,
    cols: u16,
    rows: u16,
    /// Raw output bytes that fit one output frame with this terminal's id.
    per_frame: usize,
    /// Output not yet sent, and when its first byte came.
    pending: Vec<u8>,
    since: Option<Time>,
}

/// The remote terminals, by id: each one's link, phase, size and output waiting to be sent.
#[derive(Debug, Default)]
pub(crate) struct Terminals {
    by_id: BTreeMap<String, Terminal>,
}

impl Terminals {
    /// `_lembas/terminal/open` from `conn` (a connection of `kind`), request `request`:
    /// checked against `config` (terminals on, over the link only, the size, the link's count,
    /// `cwd` absolute and inside the roots), then kept under the id `new_id` draws (only once
    /// every check passed) while the shell resolves its `cwd`. Returns the id and the `cwd` to
    /// resolve, or the refusal.
    pub fn open(
        &mut self,
        conn: ConnId,
        kind: ConnKind,
        request: &Id,
        params: OpenParams,
        config: &DeviceConfig,
        new_id: impl FnOnce() -> String,
    ) -> Result<(String, String), RpcError> {
        if !config.remote.terminal {
            return Err(RpcError::invalid_params(
                "terminals are off on this device (remote.terminal is false)",
            ));
        }
        if kind != ConnKind::Link {
            return Err(RpcError::invalid_params(
                "terminals open only over the instance link",
            ));
        }
        let limits = &config.terminals;
        let (cols, rows) = (
            params.cols.unwrap_or(limits.default_size.0),
            params.rows.unwrap_or(limits.default_size.1),
        );
        let in_range = |v: u16, (lo, hi): (u16, u16), what: &str| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(RpcError::invalid_params(format!(
                    "{what} {v} is outside {lo}-{hi}"
                )))
            }
        };
        in_range(cols, limits.cols, "cols")?;
        in_range(rows, limits.rows, "rows")?;
        let open_here = self.by_id.values().filter(|t| t.conn == conn).count();
        if open_here >= limits.max_per_link {
            return Err(RpcError::invalid_params(format!(
                "at most {} terminals a link (terminals.max_per_link); this link has \
                 {open_here} open",
                limits.max_per_link
            )));
        }
        let cwd = match params.cwd {
            Some(cwd) => paths::normalize(&cwd).ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "cwd `{}` is not an absolute path",
                    cwd.escape_debug()
                ))
            })?,
            None => config.remote.roots.first().cloned().ok_or_else(|| {
                RpcError::invalid_params("this device allows no folder yet (remote.roots is empty)")
            })?,
        };
        check_roots(&config.remote, &cwd)?;
        let terminal_id = new_id();
        let per_frame = output_bytes_per_frame(&terminal_id, limits.max_output_frame_bytes);
        self.by_id.insert(
            terminal_id.clone(),
            Terminal {
                conn,
                request: request.clone(),
                phase: Phase::Resolving,
                cwd: cwd.clone(),
                cols,
                rows,
                per_frame,
                pending: Vec::new(),
                since: None,
            },
        );
        Ok((terminal_id, cwd))
    }

    /// The terminal's `cwd` resolved (or did not): inside the roots still, the shell is asked
    /// to start it; otherwise its `open` is refused with the reason, and it is forgotten.
    pub fn path_resolved(
        &mut self,
        terminal_id: String,
        resolved: Result<String, String>,
        remote: &Remote,
        out: &mut Outbox,
    ) {
        let Entry::Occupied(mut entry) = self.by_id.entry(terminal_id) else {
            return;
        };
        let t = entry.get_mut();
        let outcome = resolved
            .map_err(|why| {
                RpcError::invalid_params(format!("cwd `{}` cannot be used: {why}", t.cwd))
            })
            .and_then(|real| {
                let real = paths::normalize(&real).ok_or_else(|| {
                    RpcError::invalid_params(format!("cwd `{}` did not resolve", t.cwd))
                })?;
                check_roots(remote, &real)?;
                Ok(real)
            });
        match outcome {
            Ok(real) => {
                t.phase = Phase::Opening;
                t.cwd = real.clone();
                let (cols, rows) = (t.cols, t.rows);
                out.effect(Effect::OpenTerminal {
                    terminal_id: entry.key().clone(),
                    cwd: real,
                    cols,
                    rows,
                });
            }
            Err(e) => {
                let t = entry.remove();
                out.send(t.conn, jsonrpc::encode_error(Some(&t.request), &e));
            }
        }
    }

    /// The shell started the terminal's shell, or could not: its `open` is answered. Returns
    /// whether the terminal is still wanted (`false`: unknown, or not waiting to start).
    pub fn opened(
        &mut self,
        terminal_id: &str,
        started: Result<ShellInfo, String>,
        out: &mut Outbox,
    ) -> bool {
        let Some(t) = self.by_id.get_mut(terminal_id) else {
            return false;
        };
        if !matches!(t.phase, Phase::Opening) {
            return false;
        }
        let (conn, request) = (t.conn, t.request.clone());
        match started {
            Ok(info) => {
                t.phase = Phase::Open;
                let result = OpenResult {
                    terminal_id,
                    cwd: &t.cwd,
                    cols: t.cols,
                    rows: t.rows,
                    shell: &info.shell,
                    integration: info.integration,
                };
                out.send(conn, jsonrpc::encode_result(&request, &result));
                true
            }
            Err(why) => {
                self.by_id.remove(terminal_id);
                let e = RpcError::new(
                    code::INTERNAL_ERROR,
                    format!("the device could not start a shell: {why}"),
                );
                out.send(conn, jsonrpc::encode_error(Some(&request), &e));
                false
            }
        }
    }

    /// Bytes the terminal's shell wrote: every whole frame's worth leaves now, the rest after
    /// `batch_ms` (at once when it is 0).
    pub fn output(
        &mut self,
        terminal_id: &str,
        bytes: &[u8],
        now: Time,
        batch_ms: u64,
        out: &mut Outbox,
    ) {
        let Some(t) = self.by_id.get_mut(terminal_id) else {
            return;
        };
        if bytes.is_empty() || !matches!(t.phase, Phase::Open | Phase::Closing) {
            return;
        }
        t.pending.extend_from_slice(bytes);
        t.since.get_or_insert(now);
        let full = t.pending.len() / t.per_frame * t.per_frame;
        if full > 0 {
            t.send_output(terminal_id, full, out);
        }
        if batch_ms == 0 {
            t.send_output(terminal_id, usize::MAX, out);
        }
    }

    /// The terminal's shell ended: what it wrote goes out, then `exit` (to a terminal that was
    /// answered open), and it is forgotten.
    pub fn exit(&mut self, terminal_id: &str, code: i32, out: &mut Outbox) {
        let Some(mut t) = self.by_id.remove(terminal_id) else {
            return;
        };
        t.send_output(terminal_id, usize::MAX, out);
        if matches!(t.phase, Phase::Open | Phase::Closing) {
            let exit = Exit { terminal_id, code };
            out.send(
                t.conn,
                jsonrpc::encode_notification("_lembas/terminal/exit", &exit),
            );
        }
    }

    /// Keystrokes from `conn` for a terminal it owns that is open. Data that is not base64
    /// says nothing a shell could take; no one to answer.
    pub fn input(&mut self, conn: ConnId, p: InputParams<'_>, out: &mut Outbox) {
        if self.open_of(conn, &p.terminal_id).is_none() {
            return;
        }
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(p.data.as_bytes()) else {
            return;
        };
        if !bytes.is_empty() {
            out.effect(Effect::TerminalInput {
                terminal_id: p.terminal_id.into_owned(),
                bytes,
            });
        }
    }

    /// A new size from `conn` for a terminal it owns that is open. A notification has no
    /// answer to refuse with: a size out of range is not applied, rather than clamped to one
    /// the client did not ask for.
    pub fn resize(
        &mut self,
        conn: ConnId,
        p: ResizeParams,
        limits: &TerminalLimits,
        out: &mut Outbox,
    ) {
        if !(limits.cols.0..=limits.cols.1).contains(&p.cols)
            || !(limits.rows.0..=limits.rows.1).contains(&p.rows)
        {
            return;
        }
        let Some(t) = self.open_of(conn, &p.terminal_id) else {
            return;
        };
        t.cols = p.cols;
        t.rows = p.rows;
        out.effect(Effect::ResizeTerminal {
            terminal_id: p.terminal_id,
            cols: p.cols,
            rows: p.rows,
        });
    }

    /// `conn` closes a terminal it owns that is open: hung up, its exit still to come.
    pub fn close(&mut self, conn: ConnId, p: CloseParams, out: &mut Outbox) {
        let Some(t) = self.open_of(conn, &p.terminal_id) else {
            return;
        };
        t.phase = Phase::Closing;
        out.effect(Effect::CloseTerminal {
            terminal_id: p.terminal_id,
        });
    }

    /// The link `conn` went away: every terminal it opened is hung up (one whose shell runs or
    /// is starting), and forgotten.
    pub fn close_of(&mut self, conn: ConnId, out: &mut Outbox) {
        self.by_id.retain(|id, t| {
            if t.conn != conn {
                return true;
            }
            if matches!(t.phase, Phase::Opening | Phase::Open) {
                out.effect(Effect::CloseTerminal {
                    terminal_id: id.clone(),
                });
            }
            false
        });
    }

    /// Output that has waited `batch_ms` goes out.
    pub fn flush(&mut self, now: Time, batch_ms: u64, out: &mut Outbox) {
        for (id, t) in &mut self.by_id {
            if t.since.is_some_and(|s| s.plus_ms(batch_ms) <= now) {
                t.send_output(id, usize::MAX, out);
            }
        }
    }

    /// When waiting output has waited `batch_ms`.
    pub fn deadline(&self, batch_ms: u64) -> Option<Time> {
        self.by_id
            .values()
            .filter_map(|t| t.since.map(|s| s.plus_ms(batch_ms)))
            .min()
    }

    /// The terminals (id, and the connection that owns it).
    pub fn iter(&self) -> impl Iterator<Item = (&str, ConnId)> + '_ {
        self.by_id.iter().map(|(id, t)| (id.as_str(), t.conn))
    }

    /// The terminal `terminal_id` if `conn` owns it and it is open.
    fn open_of(&mut self, conn: ConnId, terminal_id: &str) -> Option<&mut Terminal> {
        self.by_id
            .get_mut(terminal_id)
            .filter(|t| t.conn == conn && matches!(t.phase, Phase::Open))
    }
}

/// Raw bytes that fit one output frame of at most `max_frame_bytes`: the frame's envelope with
/// this id, then base64's four characters for every three bytes.
fn output_bytes_per_frame(terminal_id: &str, max_frame_bytes: usize) -> usize {
    let envelope = jsonrpc::encode_notification(
        "_lembas/terminal/output",
        &Output {
            terminal_id,
            data: "",
        },
    )
    .len();
    let room = max_frame_bytes.saturating_sub(envelope);
    (room / 4 * 3).max(3)
}

impl Device {
    /// `_lembas/terminal/open`: checked here; the shell resolves `cwd`, then starts the shell,
    /// and the answer goes out from [`Device::handle_terminal_opened`].
    pub(super) fn terminal_open(
        &mut self,
        conn: ConnId,
        id: &Id,
        params: OpenParams,
    ) -> Result<(), RpcError> {
        let kind = self.conns[&conn].kind;
        let rng = &mut self.rng;
        let new_id = || format!("term_{}", rng.token(16));
        let (terminal_id, cwd) =
            self.terminals
                .open(conn, kind, id, params, &self.config, new_id)?;
        let request = self
            .resolving
            .ask(super::resolving::Resolving::Terminal(terminal_id));
        self.out.resolve_path(request, cwd);
        Ok(())
    }

    /// The terminal's `cwd` resolved (or did not): inside the roots still, the shell starts it.
    pub(super) fn terminal_path_resolved(
        &mut self,
        terminal_id: String,
        resolved: Result<String, String>,
    ) {
        let remote = &self.config.remote;
        self.terminals
            .path_resolved(terminal_id, resolved, remote, &mut self.out);
    }

    /// The shell started the terminal's shell (`Effect::OpenTerminal`), or could not. Returns
    /// whether the device still wants it: `false` (its link is gone) means hang it up now.
    pub fn handle_terminal_opened(
        &mut self,
        terminal_id: &str,
        started: Result<ShellInfo, String>,
        now: Time,
    ) -> bool {
        self.clock.advance(now);
        let wanted = self.terminals.opened(terminal_id, started, &mut self.out);
        self.after_input();
        wanted
    }

    /// Bytes the terminal's shell wrote. They leave in order, in frames of at most
    /// `max_output_frame_bytes`, after at most `batch_ms`.
    pub fn handle_terminal_output(&mut self, terminal_id: &str, bytes: &[u8], now: Time) {
        let now = self.clock.advance(now);
        let batch_ms = self.config.terminals.batch_ms;
        self.terminals
            .output(terminal_id, bytes, now, batch_ms, &mut self.out);
        self.after_input();
    }

    /// The terminal's shell ended: what it wrote goes out, then `exit`.
    pub fn handle_terminal_exit(&mut self, terminal_id: &str, code: i32, now: Time) {
        self.clock.advance(now);
        self.terminals.exit(terminal_id, code, &mut self.out);
        self.after_input();
    }

    /// The terminals open now (id, and the connection that owns it).
    pub fn terminals(&self) -> impl Iterator<Item = (&str, ConnId)> + '_ {
        self.terminals.iter()
    }

    pub(super) fn terminal_input(&mut self, conn: ConnId, p: InputParams<'_>) {
        self.terminals.input(conn, p, &mut self.out);
    }

    pub(super) fn terminal_resize(&mut self, conn: ConnId, p: ResizeParams) {
        let limits = &self.config.terminals;
        self.terminals.resize(conn, p, limits, &mut self.out);
    }

    pub(super) fn terminal_close(&mut self, conn: ConnId, p: CloseParams) {
        self.terminals.close(conn, p, &mut self.out);
    }
}

impl Terminal {
    /// Send up to `limit` pending bytes of this terminal (`terminal_id`), in as many frames as
    /// they need.
    fn send_output(&mut self, terminal_id: &str, limit: usize, out: &mut Outbox) {
        let take = limit.min(self.pending.len());
        let bytes: Vec<u8> = self.pending.drain(..take).collect();
        if self.pending.is_empty() {
            self.since = None;
        }
        for chunk in bytes.chunks(self.per_frame) {
            let data = base64::engine::general_purpose::STANDARD.encode(chunk);
            let frame = jsonrpc::encode_notification(
                "_lembas/terminal/output",
                &Output {
                    terminal_id,
                    data: &data,
                },
            );
            out.send(self.conn, frame);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Output as Sent;

    fn open_terminal(per_frame: usize) -> Terminal {
        Terminal {
            conn: ConnId(3),
            request: Id::number(1),
            phase: Phase::Open,
            cwd: "/w".into(),
            cols: 80,
            rows: 24,
            per_frame,
            pending: Vec::new(),
            since: None,
        }
    }

    /// The raw bytes of every output frame the outbox holds, in order.
    fn sent(out: &mut Outbox) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| out.poll())
            .map(|o| {
                let Sent::Send { conn, frame } = o else {
                    panic!("only frames: {o:?}")
                };
                assert_eq!(conn, ConnId(3));
                let v: serde_json::Value = serde_json::from_slice(&frame).unwrap();
                assert_eq!(v["params"]["terminalId"], "term_1");
                let data = v["params"]["data"].as_str().unwrap();
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn output_leaves_in_frames_of_at_most_per_frame_bytes_and_in_order() {
        let mut t = open_terminal(3);
        t.pending = b"abcdefgh".to_vec();
        t.since = Some(Time(5));
        let mut out = Outbox::default();
        t.send_output("term_1", 6, &mut out);
        assert_eq!(sent(&mut out), vec![b"abc".to_vec(), b"def".to_vec()]);
        assert_eq!(t.since, Some(Time(5)), "two bytes still wait");
        t.send_output("term_1", usize::MAX, &mut out);
        assert_eq!(sent(&mut out), vec![b"gh".to_vec()]);
        assert_eq!(t.since, None, "nothing waits");
    }

    #[test]
    fn only_the_owner_of_an_open_terminal_reaches_it() {
        let mut terminals = Terminals::default();
        terminals.by_id.insert("term_1".into(), open_terminal(3));
        assert!(terminals.open_of(ConnId(3), "term_1").is_some());
        assert!(terminals.open_of(ConnId(4), "term_1").is_none());
        assert!(terminals.open_of(ConnId(3), "term_2").is_none());
        terminals.by_id.get_mut("term_1").unwrap().phase = Phase::Closing;
        assert!(terminals.open_of(ConnId(3), "term_1").is_none());
    }

    fn config() -> DeviceConfig {
        let mut c = DeviceConfig::default();
        c.remote.enabled = true;
        c.remote.terminal = true;
        c.remote.roots = vec!["/w".into()];
        c.terminals.max_per_link = 1;
        c
    }

    fn open_params(cwd: Option<&str>, cols: Option<u16>) -> OpenParams {
        OpenParams {
            cwd: cwd.map(str::to_owned),
            cols,
            rows: None,
        }
    }

    #[test]
    fn an_open_is_checked_before_an_id_is_drawn_then_resolved_started_and_answered() {
        let (link, mut terminals, mut out) = (ConnId(3), Terminals::default(), Outbox::default());
        let config = config();
        let request = Id::number(7);
        let refused = |t: &mut Terminals, kind, params, config: &DeviceConfig| {
            let drawn = std::cell::Cell::new(false);
            let e = t
                .open(link, kind, &request, params, config, || {
                    drawn.set(true);
                    "term_x".into()
                })
                .unwrap_err();
            assert!(!drawn.get(), "no id drawn for a refused open");
            e.message
        };
        let mut off = config.clone();
        off.remote.terminal = false;
        let m = refused(
            &mut terminals,
            ConnKind::Link,
            open_params(None, None),
            &off,
        );
        assert!(m.contains("remote.terminal"), "{m}");
        let m = refused(
            &mut terminals,
            ConnKind::Stdio,
            open_params(None, None),
            &config,
        );
        assert!(m.contains("only over the instance link"), "{m}");
        let m = refused(
            &mut terminals,
            ConnKind::Link,
            open_params(None, Some(9)),
            &config,
        );
        assert!(m.contains("cols 9 is outside 20-500"), "{m}");
        let m = refused(
            &mut terminals,
            ConnKind::Link,
            open_params(Some("w"), None),
            &config,
        );
        assert!(m.contains("not an absolute path"), "{m}");
        let m = refused(
            &mut terminals,
            ConnKind::Link,
            open_params(Some("/x"), None),
            &config,
        );
        assert!(m.contains("outside the device's roots"), "{m}");
        // No cwd: the first root.
        let (id, cwd) = terminals
            .open(
                link,
                ConnKind::Link,
                &request,
                open_params(None, None),
                &config,
                || "term_1".into(),
            )
            .unwrap();
        assert_eq!((id.as_str(), cwd.as_str()), ("term_1", "/w"));
        let m = refused(
            &mut terminals,
            ConnKind::Link,
            open_params(None, None),
            &config,
        );
        assert!(m.contains("at most 1 terminals a link"), "{m}");
        // Not started yet: not wanted, and no output or input reaches it.
        assert!(!terminals.opened("term_1", Ok(shell()), &mut out));
        terminals.path_resolved(
            "term_1".into(),
            Ok("/w/./p".into()),
            &config.remote,
            &mut out,
        );
        let asked: Vec<_> = std::iter::from_fn(|| out.poll()).collect();
        assert_eq!(
            asked,
            [Sent::Effect(Effect::OpenTerminal {
                terminal_id: "term_1".into(),
                cwd: "/w/p".into(),
                cols: 80,
                rows: 24
            })]
        );
        assert!(terminals.opened("term_1", Ok(shell()), &mut out));
        let answer: Vec<_> = std::iter::from_fn(|| out.poll()).collect();
        let [Sent::Send { conn, frame }] = &answer[..] else {
            panic!("{answer:?}")
        };
        assert_eq!(*conn, link);
        let v: serde_json::Value = serde_json::from_slice(frame).unwrap();
        assert_eq!(
            (v["id"].clone(), v["result"]["cwd"].clone()),
            (7.into(), "/w/p".into())
        );
        // A cwd that resolves outside the roots is refused, and the terminal forgotten.
        let mut two = config.clone();
        two.terminals.max_per_link = 2;
        terminals
            .open(
                link,
                ConnKind::Link,
                &request,
                open_params(None, None),
                &two,
                || "term_2".into(),
            )
            .unwrap();
        terminals.path_resolved("term_2".into(), Ok("/etc".into()), &two.remote, &mut out);
        let refusal: Vec<_> = std::iter::from_fn(|| out.poll()).collect();
        assert!(
            matches!(&refusal[..], [Sent::Send { frame, .. }]
                if String::from_utf8_lossy(frame).contains("outside the device's roots")),
            "{refusal:?}"
        );
        assert_eq!(terminals.iter().collect::<Vec<_>>(), [("term_1", link)]);
    }

    fn shell() -> ShellInfo {
        ShellInfo {
            shell: "bash".into(),
            integration: false,
        }
    }

    #[test]
    fn output_waits_its_batch_then_exit_follows_it_and_a_dropped_link_hangs_up() {
        let mut terminals = Terminals::default();
        terminals.by_id.insert("term_1".into(), open_terminal(3));
        let mut out = Outbox::default();
        terminals.output("term_1", b"ab", Time(10), 4, &mut out);
        assert!(sent(&mut out).is_empty(), "less than a frame waits");
        assert_eq!(terminals.deadline(4), Some(Time(14)));
        terminals.flush(Time(13), 4, &mut out);
        assert!(sent(&mut out).is_empty());
        terminals.flush(Time(14), 4, &mut out);
        assert_eq!(sent(&mut out), vec![b"ab".to_vec()]);
        assert_eq!(terminals.deadline(4), None);
        // A batch of 0: nothing waits.
        terminals.output("term_1", b"c", Time(20), 0, &mut out);
        assert_eq!(sent(&mut out), vec![b"c".to_vec()]);
        // Exit: what waits goes first, then `exit`, and it is forgotten.
        terminals.output("term_1", b"d", Time(30), 4, &mut out);
        terminals.exit("term_1", 0, &mut out);
        let last: Vec<_> = std::iter::from_fn(|| out.poll()).collect();
        assert_eq!(last.len(), 2, "{last:?}");
        assert!(matches!(&last[1], Sent::Send { frame, .. }
            if String::from_utf8_lossy(frame).contains("_lembas/terminal/exit")));
        assert_eq!(terminals.iter().count(), 0);
        // A link that drops hangs up its open terminals, not another link's.
        terminals.by_id.insert("term_1".into(), open_terminal(3));
        let mut other = open_terminal(3);
        other.conn = ConnId(4);
        terminals.by_id.insert("term_2".into(), other);
        terminals.close_of(ConnId(3), &mut out);
        let hung: Vec<_> = std::iter::from_fn(|| out.poll()).collect();
        assert_eq!(
            hung,
            [Sent::Effect(Effect::CloseTerminal {
                terminal_id: "term_1".into()
            })]
        );
        assert_eq!(
            terminals.iter().collect::<Vec<_>>(),
            [("term_2", ConnId(4))]
        );
    }
}
