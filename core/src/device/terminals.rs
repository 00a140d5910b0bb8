//! Remote terminals (`_lembas/terminal/*`): the rules of `open` (terminals on, the size, the
//! roots, four a link), the bookkeeping of which link owns which terminal, and the batching of a
//! shell's output into frames of at most `max_output_frame_bytes`. The shell opens the PTY
//! (`Effect::OpenTerminal`) and reports back with the `handle_terminal_*` inputs.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::value::RawValue;

use super::limits::check_roots;
use super::outbox::Outbox;
use super::{ConnId, ConnKind, Device, Effect};
use crate::jsonrpc::{self, code, Id, RpcError};
use crate::paths;
use crate::time::Time;
use crate::wire::terminal::{
    CloseParams, Exit, InputParams, OpenParams, OpenResult, Output, ResizeParams,
};

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

pub(crate) type Terminals = BTreeMap<String, Terminal>;

impl Device {
    /// `_lembas/terminal/open`: checked here; the shell resolves `cwd`, then starts the shell,
    /// and the answer goes out from [`Device::handle_terminal_opened`].
    pub(super) fn terminal_open(
        &mut self,
        conn: ConnId,
        id: &Id,
        params: OpenParams,
    ) -> Result<(), RpcError> {
        if !self.config.remote.terminal {
            return Err(RpcError::invalid_params(
                "terminals are off on this device (remote.terminal is false)",
            ));
        }
        if self.conns[&conn].kind != ConnKind::Link {
            return Err(RpcError::invalid_params(
                "terminals open only over the instance link",
            ));
        }
        let limits = self.config.terminals;
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
        let open_here = self.terminals.values().filter(|t| t.conn == conn).count();
        if open_here >= limits.max_per_link {
            return Err(RpcError::invalid_params(format!(
                "at most {} terminals a link; this link has {open_here} open",
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
            None => self.config.remote.roots.first().cloned().ok_or_else(|| {
                RpcError::invalid_params("this device allows no folder yet (remote.roots is empty)")
            })?,
        };
        self.check_roots(&cwd)?;
        let terminal_id = format!("term_{}", self.rng.token(16));
        let per_frame = self.output_bytes_per_frame(&terminal_id);
        let request = self
            .resolving
            .ask(super::resolving::Resolving::Terminal(terminal_id.clone()));
        self.out.resolve_path(request, cwd.clone());
        self.terminals.insert(
            terminal_id,
            Terminal {
                conn,
                request: id.clone(),
                phase: Phase::Resolving,
                cwd,
                cols,
                rows,
                per_frame,
                pending: Vec::new(),
                since: None,
            },
        );
        Ok(())
    }

    /// The terminal's `cwd` resolved (or did not): inside the roots still, the shell starts it.
    pub(super) fn terminal_path_resolved(
        &mut self,
        terminal_id: String,
        resolved: Result<String, String>,
    ) {
        let remote = &self.config.remote;
        let Entry::Occupied(mut entry) = self.terminals.entry(terminal_id) else {
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
                self.out.effect(Effect::OpenTerminal {
                    terminal_id: entry.key().clone(),
                    cwd: real,
                    cols,
                    rows,
                });
            }
            Err(e) => {
                let t = entry.remove();
                self.reply_error(t.conn, &t.request, &e);
            }
        }
    }

    /// The shell started the terminal's shell (`Effect::OpenTerminal`), or could not. Returns
    /// whether the device still wants it: `false` (its link is gone) means hang it up now.
    pub fn handle_terminal_opened(
        &mut self,
        terminal_id: &str,
        started: Result<ShellInfo, String>,
        now: Time,
    ) -> bool {
        let wanted = self.terminal_opened(terminal_id, started, now);
        self.after_input();
        wanted
    }

    fn terminal_opened(
        &mut self,
        terminal_id: &str,
        started: Result<ShellInfo, String>,
        now: Time,
    ) -> bool {
        self.clock.advance(now);
        let Some(t) = self.terminals.get_mut(terminal_id) else {
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
                let frame = jsonrpc::encode_result(&request, &result);
                self.out.send(conn, frame);
                true
            }
            Err(why) => {
                self.terminals.remove(terminal_id);
                let e = RpcError::new(
                    code::INTERNAL_ERROR,
                    format!("the device could not start a shell: {why}"),
                );
                self.reply_error(conn, &request, &e);
                false
            }
        }
    }

    /// Bytes the terminal's shell wrote. They leave in order, in frames of at most
    /// `max_output_frame_bytes`, after at most `batch_ms`.
    pub fn handle_terminal_output(&mut self, terminal_id: &str, bytes: &[u8], now: Time) {
        self.terminal_output(terminal_id, bytes, now);
        self.after_input();
    }

    fn terminal_output(&mut self, terminal_id: &str, bytes: &[u8], now: Time) {
        let now = self.clock.advance(now);
        let batch_ms = self.config.terminals.batch_ms;
        let Some(t) = self.terminals.get_mut(terminal_id) else {
            return;
        };
        if bytes.is_empty() || !matches!(t.phase, Phase::Open | Phase::Closing) {
            return;
        }
        t.pending.extend_from_slice(bytes);
        t.since.get_or_insert(now);
        let full = t.pending.len() / t.per_frame * t.per_frame;
        if full > 0 {
            t.send_output(terminal_id, full, &mut self.out);
        }
        if batch_ms == 0 {
            t.send_output(terminal_id, usize::MAX, &mut self.out);
        }
    }

    /// The terminal's shell ended: what it wrote goes out, then `exit`.
    pub fn handle_terminal_exit(&mut self, terminal_id: &str, code: i32, now: Time) {
        self.terminal_exit(terminal_id, code, now);
        self.after_input();
    }

    fn terminal_exit(&mut self, terminal_id: &str, code: i32, now: Time) {
        self.clock.advance(now);
        let Some(mut t) = self.terminals.remove(terminal_id) else {
            return;
        };
        t.send_output(terminal_id, usize::MAX, &mut self.out);
        if matches!(t.phase, Phase::Open | Phase::Closing) {
            let exit = Exit { terminal_id, code };
            self.out.send(
                t.conn,
                jsonrpc::encode_notification("_lembas/terminal/exit", &exit),
            );
        }
    }

    /// The terminals open now (id, and the connection that owns it).
    pub fn terminals(&self) -> impl Iterator<Item = (&str, ConnId)> + '_ {
        self.terminals.iter().map(|(id, t)| (id.as_str(), t.conn))
    }

    pub(super) fn terminal_input(&mut self, conn: ConnId, params: Option<&RawValue>) {
        let Ok(p) = jsonrpc::parse_params::<InputParams>("_lembas/terminal/input", params) else {
            return;
        };
        if open_of(&mut self.terminals, conn, &p.terminal_id).is_none() {
            return;
        }
        // Keystrokes that are not base64 say nothing a shell could take; no one to answer.
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(p.data.as_bytes()) else {
            return;
        };
        if !bytes.is_empty() {
            self.out.effect(Effect::TerminalInput {
                terminal_id: p.terminal_id.into_owned(),
                bytes,
            });
        }
    }

    pub(super) fn terminal_resize(&mut self, conn: ConnId, params: Option<&RawValue>) {
        let Ok(p) = jsonrpc::parse_params::<ResizeParams>("_lembas/terminal/resize", params) else {
            return;
        };
        let limits = self.config.terminals;
        // A notification has no answer to refuse with: a size out of range is not applied,
        // rather than clamped to one the client did not ask for.
        if !(limits.cols.0..=limits.cols.1).contains(&p.cols)
            || !(limits.rows.0..=limits.rows.1).contains(&p.rows)
        {
            return;
        }
        let Some(t) = open_of(&mut self.terminals, conn, &p.terminal_id) else {
            return;
        };
        t.cols = p.cols;
        t.rows = p.rows;
        self.out.effect(Effect::ResizeTerminal {
            terminal_id: p.terminal_id,
            cols: p.cols,
            rows: p.rows,
        });
    }

    pub(super) fn terminal_close(&mut self, conn: ConnId, params: Option<&RawValue>) {
        let Ok(p) = jsonrpc::parse_params::<CloseParams>("_lembas/terminal/close", params) else {
            return;
        };
        let Some(t) = open_of(&mut self.terminals, conn, &p.terminal_id) else {
            return;
        };
        t.phase = Phase::Closing;
        self.out.effect(Effect::CloseTerminal {
            terminal_id: p.terminal_id,
        });
    }

    /// The link went away: every terminal it opened is hung up, and forgotten.
    pub(super) fn close_terminals_of(&mut self, conn: ConnId) {
        let out = &mut self.out;
        self.terminals.retain(|id, t| {
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
    pub(super) fn flush_terminals(&mut self, now: Time) {
        let batch_ms = self.config.terminals.batch_ms;
        for (id, t) in &mut self.terminals {
            if t.since.is_some_and(|s| s.plus_ms(batch_ms) <= now) {
                t.send_output(id, usize::MAX, &mut self.out);
            }
        }
    }

    pub(super) fn terminals_deadline(&self) -> Option<Time> {
        let batch_ms = self.config.terminals.batch_ms;
        self.terminals
            .values()
            .filter_map(|t| t.since.map(|s| s.plus_ms(batch_ms)))
            .min()
    }

    /// Raw bytes that fit one output frame: the frame's envelope with this id, then base64's
    /// four characters for every three bytes.
    fn output_bytes_per_frame(&self, terminal_id: &str) -> usize {
        let envelope = jsonrpc::encode_notification(
            "_lembas/terminal/output",
            &Output {
                terminal_id,
                data: "",
            },
        )
        .len();
        let room = self
            .config
            .terminals
            .max_output_frame_bytes
            .saturating_sub(envelope);
        (room / 4 * 3).max(3)
    }
}

/// The terminal `terminal_id` if `conn` owns it and it is open.
fn open_of<'a>(
    terminals: &'a mut Terminals,
    conn: ConnId,
    terminal_id: &str,
) -> Option<&'a mut Terminal> {
    terminals
        .get_mut(terminal_id)
        .filter(|t| t.conn == conn && matches!(t.phase, Phase::Open))
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
        let mut terminals = Terminals::new();
        terminals.insert("term_1".into(), open_terminal(3));
        assert!(open_of(&mut terminals, ConnId(3), "term_1").is_some());
        assert!(open_of(&mut terminals, ConnId(4), "term_1").is_none());
        assert!(open_of(&mut terminals, ConnId(3), "term_2").is_none());
        terminals.get_mut("term_1").unwrap().phase = Phase::Closing;
        assert!(open_of(&mut terminals, ConnId(3), "term_1").is_none());
    }
}
