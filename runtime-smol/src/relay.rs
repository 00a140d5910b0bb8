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

use crate::driver::Outgoing;
use crate::instance::{Cmd, Event, Internal, Socket};

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

pub(crate) async fn run(rx: Receiver<Internal>, events: Sender<Event>, linked: Arc<AtomicBool>) {
    let mut device: Option<End> = None;
    let mut client: Option<End> = None;
    // What the device said while no client was there.
    let mut buffered: Vec<Vec<u8>> = Vec::new();
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
                if let Some(old) = device.take() {
                    old.close(1000, "replaced by a new link");
                    let _ = events.send(Event::LinkDown).await;
                }
                if let Some(c) = client.take() {
                    c.close(1001, "the device's link went");
                    let _ = events.send(Event::RelayDown).await;
                }
                buffered.clear();
                gen += 1;
                let g = gen;
                device = Some(carry(*ws, &frames_tx, g, Internal::Frame, Internal::Closed));
                linked.store(true, Ordering::SeqCst);
                let _ = events.send(Event::LinkUp).await;
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
                if device.is_none() || client.is_some() {
                    end.close(1013, "no device linked, or a client has it");
                    continue;
                }
                for frame in buffered.drain(..) {
                    let _ = end.out.try_send(Outgoing::Frame(frame, None));
                }
                client = Some(end);
                let _ = events.send(Event::RelayUp).await;
            }
            Internal::Frame(g, bytes) => {
                if device.as_ref().is_none_or(|d| d.gen != g) {
                    continue;
                }
                let _ = events
                    .send(Event::Frame {
                        to_device: false,
                        text: String::from_utf8_lossy(&bytes).into_owned(),
                    })
                    .await;
                match &client {
                    Some(c) => {
                        let _ = c.out.try_send(Outgoing::Frame(bytes, None));
                    }
                    None if buffered.len() < MAX_BUFFERED => buffered.push(bytes),
                    None => {
                        if let Some(d) = device.take() {
                            d.close(1008, "no client is taking this link's frames");
                            linked.store(false, Ordering::SeqCst);
                            let _ = events.send(Event::LinkDown).await;
                        }
                    }
                }
            }
            Internal::RelayFrame(g, bytes) => {
                if client.as_ref().is_none_or(|c| c.gen != g) {
                    continue;
                }
                let _ = events
                    .send(Event::Frame {
                        to_device: true,
                        text: String::from_utf8_lossy(&bytes).into_owned(),
                    })
                    .await;
                if let Some(d) = &device {
                    let _ = d.out.try_send(Outgoing::Frame(bytes, None));
                }
            }
            Internal::Closed(g) => {
                if device.as_ref().is_some_and(|d| d.gen == g) {
                    device = None;
                    linked.store(false, Ordering::SeqCst);
                    buffered.clear();
                    let _ = events.send(Event::LinkDown).await;
                    if let Some(c) = client.take() {
                        c.close(1001, "the device's link went");
                        let _ = events.send(Event::RelayDown).await;
                    }
                }
            }
            Internal::RelayClosed(g) => {
                if client.as_ref().is_some_and(|c| c.gen == g) {
                    client = None;
                    let _ = events.send(Event::RelayDown).await;
                    if let Some(d) = device.take() {
                        d.close(1000, "the client left");
                        linked.store(false, Ordering::SeqCst);
                        buffered.clear();
                        let _ = events.send(Event::LinkDown).await;
                    }
                }
            }
            Internal::Refused(status) => {
                let _ = events.send(Event::Refused(status)).await;
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
            Internal::Cmd(cmd @ (Cmd::Cut | Cmd::Close(..))) => {
                let Some(d) = device.take() else { continue };
                match cmd {
                    Cmd::Close(code, reason) => d.close(code, &reason),
                    _ => drop(d),
                }
                linked.store(false, Ordering::SeqCst);
                buffered.clear();
                let _ = events.send(Event::LinkDown).await;
                if let Some(c) = client.take() {
                    c.close(1001, "the device's link went");
                    let _ = events.send(Event::RelayDown).await;
                }
            }
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
        move |b| frame(gen, b),
        move |_| closed(gen),
        out_rx,
    );
    End {
        gen,
        out,
        _tasks: tasks,
    }
}
