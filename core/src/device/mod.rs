//! The device (ACP's agent): the long-lived state of one LLeMbas CLI, and the connections that
//! come and go on it. Inputs are the `handle_*` methods; outputs are drained with
//! [`Device::poll_output`] until `None`, then [`Device::poll_timeout`] says when to call
//! [`Device::handle_timeout`].

mod connection;
mod dispatch;
mod handshake;
mod link;

use std::collections::{BTreeMap, VecDeque};

pub use connection::{ConnId, ConnKind};
pub use link::CLOSE_PROTOCOL;

use crate::config::{ConfigError, DeviceConfig};
use crate::jsonrpc::{self, Id, RpcError};
use crate::rng::Rng;
use crate::time::{Clock, Time};
use connection::Connection;
use link::{Link, LinkState};

/// The capability strings this build implements: exactly these are listed in `initialize`,
/// and a method gated by any other is answered -32601. A capability joins this list in the
/// same change that makes its feature work.
pub const CAPABILITIES: &[&str] = &[];

/// What the device asks of its shell.
#[derive(Debug, PartialEq)]
#[non_exhaustive]
pub enum Output {
    /// Send one message (a WebSocket text message, or a stdio line) on a connection.
    Send {
        conn: ConnId,
        frame: Vec<u8>,
    },
    /// Close a connection (a WebSocket close code and reason; stdio just ends).
    Close {
        conn: ConnId,
        code: u16,
        reason: String,
    },
    Effect(Effect),
}

/// Work for the shell beyond sending frames; each one's outcome comes back as an input.
#[derive(Debug, PartialEq)]
#[non_exhaustive]
pub enum Effect {
    /// Dial the instance link now; report `handle_open(ConnKind::Link)` or
    /// `handle_dial_failed`.
    Dial,
    /// Stop linking for good and tell the person why (never dial again in this process).
    Stop { message: String },
}

/// Why a dial did not give a link.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DialFailure {
    /// Unreachable, timed out, TLS failed, the server errored: try again later.
    Transient,
    /// 401 or 403 at the handshake: the token is no good.
    TokenRefused,
    /// Discovery says the server does not speak protocol 3 (the sentence to show).
    Unsupported(String),
}

/// A call the shell should not have made (never caused by a peer's bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misuse {
    UnknownConnection(ConnId),
    /// `handle_open(ConnKind::Link)` when no dial was asked for.
    NotDialing,
}

impl std::fmt::Display for Misuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misuse::UnknownConnection(c) => write!(f, "no open connection {}", c.0),
            Misuse::NotDialing => f.write_str("a link opened but no dial was asked for"),
        }
    }
}

impl std::error::Error for Misuse {}

pub struct Device {
    config: DeviceConfig,
    clock: Clock,
    rng: Rng,
    conns: BTreeMap<ConnId, Connection>,
    next_conn: u64,
    link: Link,
    out: VecDeque<Output>,
}

impl Device {
    pub fn new(config: DeviceConfig, now: Time) -> Result<Device, ConfigError> {
        config.validate()?;
        Ok(Device {
            rng: Rng::new(config.seed),
            link: Link::new(config.backoff),
            config,
            clock: Clock::new(now),
            conns: BTreeMap::new(),
            next_conn: 0,
            out: VecDeque::new(),
        })
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// Start keeping a link to the instance up: asks for a dial now.
    pub fn start_link(&mut self, now: Time) {
        self.clock.advance(now);
        if matches!(self.link.state, LinkState::Off) {
            self.link.state = LinkState::Dialing { attempt: 0 };
            self.out.push_back(Output::Effect(Effect::Dial));
        }
    }

    /// A connection opened: the dialled link, or an editor on stdio. The link is greeted with
    /// `_lembas/hello` at once.
    pub fn handle_open(&mut self, kind: ConnKind, now: Time) -> Result<ConnId, Misuse> {
        self.clock.advance(now);
        if kind == ConnKind::Link {
            let LinkState::Dialing { attempt } = self.link.state else {
                return Err(Misuse::NotDialing);
            };
            self.link.state = LinkState::Up { attempt };
        }
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.conns.insert(conn, Connection::new(kind));
        if kind == ConnKind::Link {
            self.send_hello(conn);
        }
        Ok(conn)
    }

    /// The dial asked for by `Effect::Dial` failed.
    pub fn handle_dial_failed(&mut self, failure: DialFailure, now: Time) {
        let now = self.clock.advance(now);
        let LinkState::Dialing { attempt } = self.link.state else {
            return;
        };
        match failure {
            DialFailure::Transient => {
                self.link.schedule_redial(attempt, now, &mut self.rng);
            }
            DialFailure::TokenRefused => self.stop_link(
                "the instance refused this device's token; run `lembas login` again".into(),
            ),
            DialFailure::Unsupported(sentence) => self.stop_link(sentence),
        }
    }

    /// A connection closed: by the peer (with its close code, when it sent one) or because the
    /// transport failed.
    pub fn handle_closed(
        &mut self,
        conn: ConnId,
        close_code: Option<u16>,
        now: Time,
    ) -> Result<(), Misuse> {
        let now = self.clock.advance(now);
        let c = self
            .conns
            .remove(&conn)
            .ok_or(Misuse::UnknownConnection(conn))?;
        if c.kind == ConnKind::Link {
            if close_code == Some(CLOSE_PROTOCOL) {
                self.stop_link(
                    "the LLeMbas server refused link protocol 3 (close 4400): it needs updating \
                     to LLeMbas 2.0"
                        .into(),
                );
            } else if let LinkState::Up { attempt } = self.link.state {
                self.link.schedule_redial(attempt, now, &mut self.rng);
            }
        }
        Ok(())
    }

    /// One message arrived on a connection.
    pub fn handle_frame(&mut self, conn: ConnId, frame: &[u8], now: Time) -> Result<(), Misuse> {
        self.clock.advance(now);
        if !self.conns.contains_key(&conn) {
            return Err(Misuse::UnknownConnection(conn));
        }
        self.on_frame(conn, frame);
        Ok(())
    }

    pub fn handle_timeout(&mut self, now: Time) {
        let now = self.clock.advance(now);
        if let LinkState::Waiting { attempt, at } = self.link.state {
            if at <= now {
                self.link.state = LinkState::Dialing { attempt };
                self.out.push_back(Output::Effect(Effect::Dial));
            }
        }
    }

    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    #[must_use]
    pub fn poll_timeout(&self) -> Option<Time> {
        self.link.deadline()
    }

    /// The connections open now, and their kinds.
    pub fn connections(&self) -> impl Iterator<Item = (ConnId, ConnKind)> + '_ {
        self.conns.iter().map(|(id, c)| (*id, c.kind))
    }

    /// Whether the device has given up linking (4400, a refused token, an unsupported server).
    pub fn link_stopped(&self) -> bool {
        self.link.stopped()
    }

    /// Send a request of `method` to a connection if its client may receive it (test hook for
    /// the gating rules until the features that send them exist). Returns whether it was sent.
    #[cfg(any(test, feature = "testing"))]
    pub fn test_request(
        &mut self,
        conn: ConnId,
        method: &'static str,
        params: serde_json::Value,
    ) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return false;
        };
        if !c.may_receive(method) {
            return false;
        }
        let id = c.next_request(method);
        self.send(conn, jsonrpc::encode_request(&id, method, &params));
        true
    }

    fn stop_link(&mut self, message: String) {
        self.link.state = LinkState::Stopped {
            message: message.clone(),
        };
        self.out.push_back(Output::Effect(Effect::Stop { message }));
    }

    fn send(&mut self, conn: ConnId, frame: Vec<u8>) {
        self.out.push_back(Output::Send { conn, frame });
    }

    fn reply_error(&mut self, conn: ConnId, id: &Id, error: &RpcError) {
        self.send(conn, jsonrpc::encode_error(Some(id), error));
    }
}
