//! The test instance's relay mode: a client's WebSocket (a browser page's, which cannot be a
//! server) is joined to the device's link, frame for frame, so the client in the page talks to
//! a native `lembas link` as the instance's own client would.
//!
//! One client socket is one device link: a client socket opens only while a device is linked
//! (the listener answers 503 otherwise), takes every frame the device sent before it came (its
//! `_lembas/hello`), and the two end together. When the device's link goes, the client's socket
//! is closed; when the client's socket goes, the device's link is closed too (1000), so the
//! device redials and greets the next client afresh.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_lite::future;
use lembas_core::client::CallError;
use smol::channel::{self, Receiver, Sender};
use smol::Task;

use crate::channels::Outgoing;
use crate::instance::{Cmd, Event, Internal, Socket};
use crate::outbox::Gauge;

/// Frames a device may send before a client is there to take them (its hello, a few
/// notifications); more is a device talking to nobody, and its link is closed.
const MAX_BUFFERED: usize = 1024;

struct End {
    gen: u64,
    out: Sender<Outgoing>,
    _tasks: (Task<()>, Task<()>),
}

impl End {
    fn close(self, code: u16, reason: &str) {
        let _ = self.out.try_send(Outgoing::Close {
            code,
            reason: reason.into(),
        });
        // The writer task sends the close frame; dropping `self` would cancel it first.
        smol::spawn(async move {
            smol::Timer::after(std::time::Duration::from_millis(200)).await;
            drop(self);
        })
        .detach();
    }
}

/// The two ends and what the device said before a client came.
struct Relay {
    device: Option<End>,
    client: Option<End>,
    buffered: Vec<Vec<u8>>,
    events: Sender<Event>,
    linked: Arc<AtomicBool>,
}

impl Relay {
    /// The device's link is gone (closed with `close`, or dropped): the client goes with it.
    async fn device_gone(&mut self, close: Option<(u16, &str)>) {
        let Some(d) = self.device.take() else { return };
        match close {
            Some((code, reason)) => d.close(code, reason),
            None => drop(d),
        }
        self.linked.store(false, Ordering::SeqCst);
        self.buffered.clear();
        let _ = self.events.send(Event::LinkDown).await;
        if let Some(c) = self.client.take() {
            c.close(1001, "the device's link went");
            let _ = self.events.send(Event::RelayDown).await;
        }
    }

    /// The client's socket is gone: the device's link is closed, so it greets the next client
    /// afresh.
    async fn client_gone(&mut self) {
        self.client = None;
        let _ = self.events.send(Event::RelayDown).await;
        self.device_gone(Some((1000, "the client left"))).await;
    }

    /// A frame from one end, logged and handed to the other.
    async fn frame(&mut self, to_device: bool, bytes: Vec<u8>) {
        let _ = self
            .events
            .send(Event::Frame {
                to_device,
                text: String::from_utf8_lossy(&bytes).into_owned(),
            })
            .await;
        let to = if to_device {
            &self.device
        } else {
            &self.client
        };
        match to {
            Some(end) => {
                let _ = end.out.try_send(Outgoing::Frame(bytes, None));
            }
            None if to_device => {}
            None if self.buffered.len() < MAX_BUFFERED => self.buffered.push(bytes),
            None => {
                self.device_gone(Some((1008, "no client is taking this link's frames")))
                    .await
            }
        }
    }
}

fn is(end: &Option<End>, gen: u64) -> bool {
    end.as_ref().is_some_and(|e| e.gen == gen)
}

pub(crate) async fn run(rx: Receiver<Internal>, events: Sender<Event>, linked: Arc<AtomicBool>) {
    let mut relay = Relay {
        device: None,
        client: None,
        buffered: Vec::new(),
        events,
        linked,
    };
    let mut gen = 0u64;
    let (frames_tx, frames_rx) = channel::unbounded::<Internal>();
    loop {
        let input = future::or(async { rx.recv().await.ok() }, async {
            frames_rx.recv().await.ok()
        })
        .await;
        let Some(input) = input else { return };
        match input {
            Internal::Accepted(ws) => {
                relay
                    .device_gone(Some((1000, "replaced by a new link")))
                    .await;
                gen += 1;
                let g = gen;
                relay.device = Some(carry(*ws, &frames_tx, g, Internal::Frame, Internal::Closed));
                relay.linked.store(true, Ordering::SeqCst);
                let _ = relay.events.send(Event::LinkUp).await;
            }
            Internal::RelayAccepted(ws) => {
                gen += 1;
                let g = gen;
                let end = carry(
                    *ws,
                    &frames_tx,
                    g,
                    Internal::RelayFrame,
                    Internal::RelayClosed,
                );
                if relay.device.is_none() || relay.client.is_some() {
                    end.close(1013, "no device linked, or a client has it");
                    continue;
                }
                for frame in relay.buffered.drain(..) {
                    let _ = end.out.try_send(Outgoing::Frame(frame, None));
                }
                relay.client = Some(end);
                let _ = relay.events.send(Event::RelayUp).await;
            }
            Internal::Frame(g, bytes) if is(&relay.device, g) => relay.frame(false, bytes).await,
            Internal::RelayFrame(g, bytes) if is(&relay.client, g) => {
                relay.frame(true, bytes).await
            }
            Internal::Frame(..) | Internal::RelayFrame(..) => {}
            Internal::Closed(g) if is(&relay.device, g) => relay.device_gone(None).await,
            Internal::RelayClosed(g) if is(&relay.client, g) => relay.client_gone().await,
            Internal::Closed(_) | Internal::RelayClosed(_) => {}
            // The relay keeps no heartbeat (its carry reports none).
            Internal::Heard(_) => {}
            Internal::Refused(status) => {
                let _ = relay.events.send(Event::Refused(status)).await;
            }
            // The instance's own client is not running: nothing to call with.
            Internal::Cmd(Cmd::Call { reply, .. }) => {
                let _ = reply.try_send(Err(CallError::NotReady));
            }
            Internal::Cmd(Cmd::Prompt { reply, .. }) => {
                let _ = reply.try_send(Err(CallError::NotReady));
            }
            Internal::Cmd(Cmd::Notify { reply, .. }) => {
                let _ = reply.try_send(Err(CallError::NotReady));
            }
            Internal::Cmd(Cmd::Respond(..)) => {}
            Internal::Cmd(Cmd::Stall(how_long)) => {
                smol::Timer::after(how_long).await;
            }
            Internal::Cmd(Cmd::Close(code, reason)) => {
                relay.device_gone(Some((code, &reason))).await
            }
            Internal::Cmd(Cmd::Cut) => relay.device_gone(None).await,
        }
    }
}

fn carry(
    ws: Socket,
    tx: &Sender<Internal>,
    gen: u64,
    frame: fn(u64, Vec<u8>) -> Internal,
    closed: fn(u64) -> Internal,
) -> End {
    let (out, out_rx) = channel::unbounded();
    let tasks = crate::link::carry(
        ws,
        tx.clone(),
        // The relay (a test fixture) keeps no inbound bound: each token is dropped at once.
        Gauge::new(usize::MAX),
        move |b, _| frame(gen, b),
        // The relay answers pings itself (tungstenite does); it keeps no heartbeat.
        || None,
        move |_| closed(gen),
        out_rx.into(),
    );
    End {
        gen,
        out,
        _tasks: tasks,
    }
}
