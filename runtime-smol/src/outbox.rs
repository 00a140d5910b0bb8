//! A connection's outbound queue, bounded in bytes. Frames wait here between the driver and the
//! connection's writer; the [`Gauge`] counts their bytes (and a terminal's output on its way to
//! the core). Past `pause_at` the sources stop until the writer catches up, so nothing is
//! dropped and the queue stays near `pause_at`: terminals stop reading their PTYs (their shells
//! block), and the driver stops taking the engine events of every session this connection
//! holds (the turn waits). What is left to grow the queue is the client's own requests, whose
//! answers it does not read: past `max` the driver closes a link rather than grow without bound
//! (a reattaching client finds its turns in the ledger). stdio has no `max`: there the driver
//! stops reading stdin instead, as a pipe would, and a slow editor is never disconnected.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use event_listener::Event;
use smol::channel::{Receiver, Sender};

use lembas_core::backlog::{self, Overflow};

use crate::channels::Outgoing;

#[derive(Debug)]
pub struct Gauge {
    queued: AtomicUsize,
    drained: Event,
    pause_at: usize,
}

impl Gauge {
    pub fn new(pause_at: usize) -> Arc<Gauge> {
        Arc::new(Gauge {
            queued: AtomicUsize::new(0),
            drained: Event::new(),
            pause_at,
        })
    }

    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Count `bytes` until the returned token is dropped.
    pub fn hold(self: &Arc<Self>, bytes: usize) -> Sent {
        self.queued.fetch_add(bytes, Ordering::AcqRel);
        Sent {
            gauge: self.clone(),
            bytes,
        }
    }

    /// Whether its sources should wait: `pause_at` bytes or more are queued (the core's
    /// rule, which the wasm driver applies to its socket too).
    pub fn paused(&self) -> bool {
        backlog::is_behind(self.queued(), self.pause_at)
    }

    /// Wait until the queue is no longer [`Gauge::paused`].
    pub async fn below_pause(&self) {
        self.until(|queued| !backlog::is_behind(queued, self.pause_at))
            .await
    }

    /// Wait until fewer than `limit` bytes are queued.
    pub async fn below(&self, limit: usize) {
        self.until(|queued| queued < limit).await
    }

    /// Wait until `done` says yes to what is queued.
    async fn until(&self, done: impl Fn(usize) -> bool) {
        loop {
            if done(self.queued()) {
                return;
            }
            let listener = self.drained.listen();
            // Drained between the check and the listen: the notification was missed.
            if done(self.queued()) {
                return;
            }
            listener.await;
        }
    }

    fn release(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::AcqRel);
        // Waiters wait for different marks (`pause_at`, stdio's `max`); each checks its own.
        self.drained.notify(usize::MAX);
    }
}

/// Bytes counted by a [`Gauge`] until this is dropped (the writer wrote them, or they reached
/// the core).
#[derive(Debug)]
pub struct Sent {
    gauge: Arc<Gauge>,
    bytes: usize,
}

impl Sent {
    /// Count `bytes` more with the same token.
    fn add(&mut self, bytes: usize) {
        self.gauge.queued.fetch_add(bytes, Ordering::AcqRel);
        self.bytes += bytes;
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        self.gauge.release(self.bytes);
    }
}

/// What the driver gathers before handing its frames to the writer: about one write's worth
/// (the writers write up to 64 KiB at once).
pub const HAND_OVER_BYTES: usize = 64 * 1024;

/// How many written batches may wait to go back to the driver ([`Returns`]); past it a writer
/// frees its frames itself.
const RETURNED_BATCHES: usize = 2;

/// The largest frame sent back ([`Returns`]): a large frame's free is one call whichever thread
/// makes it, and held back it would keep its bytes until the driver's next hand-over.
const RETURNED_FRAME_BYTES: usize = 16 * 1024;

/// The way written frames go back to the driver, to be freed on the thread that made them.
/// Freed by a writer on another thread, each frame took the allocator's lock of the driver's
/// arena while the driver was allocating the next ones: 100 sessions streaming at once over
/// stdio spent a tenth of the device's time waiting on that lock (`perf`), and sent back here
/// the frames go 5-10% faster, one session's as well (`cargo bench --bench link
/// interleaved-stdio`, with and without in turn). What waits here is bounded:
/// [`RETURNED_BATCHES`] batches of frames of at most [`RETURNED_FRAME_BYTES`] each.
#[derive(Clone)]
pub struct Returns(Sender<Vec<Vec<u8>>>);

impl Returns {
    /// Send `written` back; a frame over [`RETURNED_FRAME_BYTES`], or the lot when the driver
    /// has not taken the earlier batches, is freed here.
    pub fn give(&self, mut written: Vec<Vec<u8>>) {
        written.retain(|f| f.len() <= RETURNED_FRAME_BYTES);
        if !written.is_empty() {
            let _ = self.0.try_send(written);
        }
    }
}

/// A [`Returns`] whose frames are freed at once (a writer's tests).
#[cfg(test)]
pub fn returns_nowhere() -> Returns {
    Returns(smol::channel::bounded(1).0)
}

/// The sending half of a connection's queue. Frames are counted at once but handed to the
/// writer together, as one message ([`Outbox::hand_over`]: when the driver's step is done, or
/// every [`HAND_OVER_BYTES`]): handed one by one, a writer as quick as the driver woke for each
/// frame and wrote it alone (a write and two thread wake-ups a chunk, 100 sessions streaming
/// at once at a third of one session's rate), and sent one by one, each told the queue's
/// listeners anew.
pub struct Outbox {
    tx: Sender<Outgoing>,
    /// The writer's end too, to throw away what waits when the connection is abandoned.
    rx: Receiver<Outgoing>,
    pub gauge: Arc<Gauge>,
    /// `None`: never refused (stdio, whose reader waits instead).
    max: Option<usize>,
    /// Frames not yet handed to the writer, in order, and their count in the gauge (one
    /// token: the writer releases a hand-over's bytes together, once written).
    gathered: Vec<Vec<u8>>,
    gathered_sent: Sent,
    /// Frames the writer wrote, freed here ([`Returns`]).
    written: Receiver<Vec<Vec<u8>>>,
    returns: Returns,
}

impl Outbox {
    pub fn new(
        tx: Sender<Outgoing>,
        rx: Receiver<Outgoing>,
        pause_at: usize,
        max: Option<usize>,
    ) -> Outbox {
        let gauge = Gauge::new(pause_at);
        let (returned, written) = smol::channel::bounded(RETURNED_BATCHES);
        Outbox {
            tx,
            rx,
            gathered_sent: gauge.hold(0),
            gauge,
            max,
            gathered: Vec::new(),
            written,
            returns: Returns(returned),
        }
    }

    /// Where this queue's writer sends the frames it wrote.
    pub fn returns(&self) -> Returns {
        self.returns.clone()
    }

    /// Queue a frame, unless it would pass `max` ([`Overflow::check`]: one frame always fits
    /// an empty queue). It reaches the writer at the next [`Outbox::hand_over`].
    pub fn send(&mut self, frame: Vec<u8>) -> Result<(), Overflow> {
        if let Some(max) = self.max {
            Overflow::check(self.gauge.queued(), frame.len(), max)?;
        }
        self.gathered_sent.add(frame.len());
        self.gathered.push(frame);
        if self.gathered_sent.bytes >= HAND_OVER_BYTES {
            self.hand_over();
        }
        Ok(())
    }

    /// Hand the writer every frame gathered, in order, in one message (the driver does before
    /// it waits).
    pub fn hand_over(&mut self) {
        if self.gathered.is_empty() {
            return;
        }
        // About as many next time: the next step's frames are gathered without growing.
        let next = Vec::with_capacity(self.gathered.len());
        // Frames written since the last hand-over are freed here, on the thread that made them.
        while self.written.try_recv().is_ok() {}
        let frames = std::mem::replace(&mut self.gathered, next);
        let sent = std::mem::replace(&mut self.gathered_sent, self.gauge.hold(0));
        // A closed queue: the writer ended, and the connection's close is on its way.
        let _ = self.tx.try_send(Outgoing::Frames(frames, sent));
    }

    /// Queue a WebSocket ping (uncounted: it is a few bytes, and a pong answers it), after
    /// the frames before it.
    pub fn ping(&mut self) {
        self.hand_over();
        let _ = self.tx.try_send(Outgoing::Ping);
    }

    /// Close after the frames queued before.
    pub fn close_with(mut self, code: u16, reason: String) {
        self.hand_over();
        let _ = self.tx.try_send(Outgoing::Close { code, reason });
        self.tx.close();
    }

    /// Throw away what waits (the client is not reading it), then close with `code`.
    pub fn abandon(mut self, code: u16, reason: String) {
        self.gathered.clear();
        self.gathered_sent = self.gauge.hold(0);
        while self.rx.try_recv().is_ok() {}
        self.close_with(code, reason);
    }

    /// Close after the frames queued before: the writer writes them, then ends.
    pub fn close(mut self) {
        self.hand_over();
        self.tx.close();
    }
}

#[cfg(test)]
impl Outbox {
    /// The batches the writer sent back and the driver has not freed yet.
    pub fn written_back(&self) -> Vec<Vec<Vec<u8>>> {
        std::iter::from_fn(|| self.written.try_recv().ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written frames wait for the driver's next hand-over, which frees them; what waits is
    /// bounded: a frame over [`RETURNED_FRAME_BYTES`] and a batch past [`RETURNED_BATCHES`]
    /// are freed by the writer.
    #[test]
    fn written_frames_are_freed_at_the_next_hand_over_and_what_waits_is_bounded() {
        let (tx, rx) = smol::channel::unbounded();
        let mut out = Outbox::new(tx, rx.clone(), 100, None);
        let returns = out.returns();
        let big = vec![b'x'; RETURNED_FRAME_BYTES + 1];
        returns.give(vec![b"a".to_vec(), big.clone()]);
        returns.give(vec![big]);
        for _ in 0..RETURNED_BATCHES {
            returns.give(vec![b"b".to_vec()]);
        }
        let mut back = out.written_back();
        assert_eq!(back.len(), RETURNED_BATCHES, "{back:?}");
        assert_eq!(
            back.remove(0),
            [b"a".to_vec()],
            "the big frame was not sent back"
        );
        for _ in 0..RETURNED_BATCHES {
            returns.give(vec![b"c".to_vec()]);
        }
        out.send(b"d".to_vec()).unwrap();
        out.hand_over();
        assert!(out.written_back().is_empty(), "freed at the hand-over");
        let (frames, _sent) = frames_of(rx.try_recv().unwrap());
        assert_eq!(bytes_of(&frames), [b"d"]);
    }

    #[test]
    fn a_frame_is_counted_until_written_and_the_bound_refuses_the_next() {
        let (tx, rx) = smol::channel::unbounded();
        let mut out = Outbox::new(tx, rx.clone(), 10, Some(100));
        out.send(vec![b'x'; 60]).unwrap();
        assert_eq!(out.gauge.queued(), 60);
        let refused = out.send(vec![b'y'; 50]).unwrap_err();
        assert_eq!(
            refused,
            Overflow {
                queued: 110,
                max: 100
            }
        );
        // The close reason names the setting that bounds it.
        let reason = refused.to_string();
        assert!(
            reason.contains("over the bound of 100 (outbound.max_bytes)"),
            "{reason}"
        );
        out.hand_over();
        drop(rx.try_recv().unwrap());
        assert_eq!(out.gauge.queued(), 0);
        // Alone, a frame over the bound still goes: the bound is on a backlog, not a frame.
        out.send(vec![b'z'; 150]).unwrap();
        out.hand_over();
        drop(rx.try_recv().unwrap());
        out.send(vec![b'x'; 60]).unwrap();
        out.hand_over();
        out.send(vec![b'w'; 30]).unwrap();
        // Abandoned: the backlog is dropped (and uncounted), and only the close is left,
        // whether it was handed to the writer (`x`) or not yet (`w`).
        let gauge = out.gauge.clone();
        out.abandon(1008, "slow".into());
        assert_eq!(gauge.queued(), 0);
        assert!(matches!(
            rx.try_recv(),
            Ok(Outgoing::Close { code: 1008, .. })
        ));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn below_pause_waits_for_the_writer() {
        smol::block_on(async {
            let gauge = Gauge::new(10);
            let held = gauge.hold(20);
            let waiter = smol::spawn({
                let gauge = gauge.clone();
                async move { gauge.below_pause().await }
            });
            smol::Timer::after(std::time::Duration::from_millis(20)).await;
            assert!(!waiter.is_finished(), "paused while 20 bytes wait");
            drop(held);
            waiter.await;
            assert_eq!(gauge.queued(), 0);
        });
    }

    #[test]
    fn without_a_bound_nothing_is_refused() {
        let (tx, rx) = smol::channel::unbounded();
        let mut out = Outbox::new(tx, rx.clone(), 10, None);
        for _ in 0..100 {
            out.send(vec![b'x'; 60]).unwrap();
        }
        out.hand_over();
        assert_eq!(out.gauge.queued(), 6000);
        assert!(out.gauge.paused());
        let (frames, sent) = frames_of(rx.try_recv().unwrap());
        assert_eq!(frames.len(), 100, "one hand-over, one message");
        smol::block_on(async {
            let waiter = smol::spawn({
                let gauge = out.gauge.clone();
                async move { gauge.below(20).await }
            });
            // The frames are counted until their token is dropped (they were written), not
            // when the frames themselves go.
            drop(frames);
            smol::Timer::after(std::time::Duration::from_millis(20)).await;
            assert!(!waiter.is_finished(), "6000 bytes still counted");
            out.send(vec![b'y'; 40]).unwrap();
            drop(sent);
            smol::Timer::after(std::time::Duration::from_millis(20)).await;
            assert!(!waiter.is_finished(), "the 40 gathered since still count");
            assert_eq!(out.gauge.queued(), 40);
            out.hand_over();
            drop(frames_of(rx.try_recv().unwrap()));
            waiter.await;
        });
    }

    /// The frames of one hand-over's message, with their count.
    fn frames_of(out: Outgoing) -> (Vec<Vec<u8>>, Sent) {
        match out {
            Outgoing::Frames(frames, sent) => (frames, sent),
            _ => panic!("not a hand-over's frames"),
        }
    }

    fn bytes_of(frames: &[Vec<u8>]) -> Vec<&[u8]> {
        frames.iter().map(Vec::as_slice).collect()
    }

    /// Frames reach the writer together, in order, as one message: at a hand-over, once a
    /// write's worth is gathered, and before a ping or a close. Until then they are counted all
    /// the same, so the sources pause on them.
    #[test]
    fn frames_reach_the_writer_together_and_in_order() {
        let (tx, rx) = smol::channel::unbounded();
        let mut out = Outbox::new(tx, rx.clone(), 100, None);
        out.send(b"a".to_vec()).unwrap();
        out.send(b"b".to_vec()).unwrap();
        assert!(rx.is_empty(), "gathered, not yet the writer's");
        assert_eq!(out.gauge.queued(), 2);
        out.hand_over();
        assert_eq!(rx.len(), 1, "one message for the hand-over");
        let (got, sent) = frames_of(rx.try_recv().unwrap());
        assert_eq!(bytes_of(&got), [b"a", b"b"]);
        assert_eq!(sent.bytes, 2, "the hand-over's token counts its frames");
        out.hand_over();
        assert!(rx.is_empty(), "nothing gathered, nothing handed over");
        // A write's worth goes without waiting for the hand-over.
        let big = HAND_OVER_BYTES / 4;
        for i in 0..4u8 {
            out.send(vec![i; big]).unwrap();
        }
        assert_eq!(rx.len(), 1, "handed over at {HAND_OVER_BYTES} bytes");
        out.send(b"c".to_vec()).unwrap();
        out.ping();
        assert_eq!(rx.len(), 3, "the frame before the ping went first");
        out.send(b"d".to_vec()).unwrap();
        out.close_with(1000, "bye".into());
        let tail: Vec<Outgoing> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert!(matches!(
            &tail[..],
            [
                Outgoing::Frames(four, _),
                Outgoing::Frames(c, _),
                Outgoing::Ping,
                Outgoing::Frames(d, _),
                Outgoing::Close { code: 1000, .. },
            ] if four.len() == 4 && bytes_of(c) == [b"c"] && bytes_of(d) == [b"d"]
        ));
    }
}
