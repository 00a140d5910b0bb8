//! The client's run loop without JS: a core `Client`, its outputs as [`ClientAction`]s, and its
//! undelivered deletes handed out to be kept whenever they change. Pure, so it is tested
//! natively.

use lembas_core::client::{Client, ClientEvent, ClientOutput};
use lembas_core::Time;

use crate::json;

#[derive(Debug, PartialEq)]
pub enum ClientAction {
    Send(String),
    /// Close the link; the client already took it as gone.
    Close {
        code: u16,
        reason: String,
    },
    Event(ClientEvent),
    /// The undelivered deletes changed: keep these (storage, IndexedDB).
    Keep(Vec<(String, u32)>),
}

pub struct ClientLoop {
    pub client: Client,
    /// The deletes last handed out to keep (or loaded), so an unchanged list is not written
    /// again: with IndexedDB a write a frame would be wasted work.
    kept: Vec<(String, u32)>,
}

impl ClientLoop {
    /// A loop over `client`, whose deletes were restored from `kept`.
    pub fn new(client: Client, kept: Vec<(String, u32)>) -> ClientLoop {
        ClientLoop { client, kept }
    }

    pub fn pump(&mut self, now: Time, out: &mut Vec<ClientAction>) {
        while let Some(o) = self.client.poll_output() {
            match o {
                ClientOutput::Send(frame) => {
                    out.push(ClientAction::Send(json::frame_string(frame)))
                }
                ClientOutput::Close { code, reason } => {
                    out.push(ClientAction::Close { code, reason });
                    self.client.handle_link_down(now);
                }
                ClientOutput::Event(e) => out.push(ClientAction::Event(e)),
                // Never asked for: the wasm client runs without liveness
                // (`json::client_config`), since a JS socket cannot ping.
                ClientOutput::Ping => {}
                // Outputs are non-exhaustive; this build routes every kind there is.
                _ => {}
            }
        }
        let pending = self.client.pending_deletes();
        if pending != self.kept {
            self.kept = pending.clone();
            out.push(ClientAction::Keep(pending));
        }
    }
}
