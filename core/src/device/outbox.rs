//! The device's persist-gated output queue: what the device asks of its shell, in order, with a
//! change made durable before any frame that announces it leaves. Every concern queues into it;
//! [`super::Device::poll_output`] drains it.

use std::collections::VecDeque;

use super::{ConnId, Effect, Output};
use crate::engine::EngineCommand;
use crate::store::Record;

/// An entry of the queue.
#[derive(Debug)]
enum Queued {
    Out(Output),
    /// Records to persist once everything before them has left.
    PersistAfter(Vec<Record>),
}

/// Outputs, each with the number of persists issued before it: it may leave once that many are
/// acknowledged. Persist effects themselves leave at once (the shell must write them for the
/// rest to move).
#[derive(Debug, Default)]
pub(super) struct Outbox {
    queue: VecDeque<(u64, Queued)>,
    /// Persists asked of the shell so far (the last `Effect::Persist`'s `seq`).
    issued: u64,
    /// The highest `seq` the shell reported written.
    acked: u64,
}

impl Outbox {
    fn push(&mut self, output: Output) {
        self.queue.push_back((self.issued, Queued::Out(output)));
    }

    /// Send one frame on a connection, behind every persist issued so far.
    pub(super) fn send(&mut self, conn: ConnId, frame: Vec<u8>) {
        self.push(Output::Send { conn, frame });
    }

    /// Send one frame to each of `to`: the last one gets the frame itself, the others a copy.
    pub(super) fn send_to_all(&mut self, to: &[ConnId], frame: Vec<u8>) {
        if let Some((last, rest)) = to.split_last() {
            for c in rest {
                self.send(*c, frame.clone());
            }
            self.send(*last, frame);
        }
    }

    /// Ask the shell for work, behind every persist issued so far.
    pub(super) fn effect(&mut self, effect: Effect) {
        self.push(Output::Effect(effect));
    }

    /// Give the engine a command (the host loop hands it over), behind every persist issued
    /// so far: a turn starts only once its state is durable.
    pub(super) fn engine(&mut self, command: EngineCommand) {
        self.push(Output::Engine(command));
    }

    /// Ping a connection, behind every persist issued so far.
    pub(super) fn ping(&mut self, conn: ConnId) {
        self.push(Output::Ping { conn });
    }

    /// Close a connection behind what is already queued for it (every answer sent before still
    /// leaves).
    pub(super) fn close(&mut self, conn: ConnId, code: u16, reason: String) {
        self.push(Output::Close { conn, code, reason });
    }

    /// Close a connection that is gone for the device now (a dead link): what was queued for it
    /// is dropped, and the close leaves first, past any persist, since nothing it announces
    /// needs to be durable first.
    pub(super) fn close_now(&mut self, conn: ConnId, code: u16, reason: String) {
        self.unqueue(conn);
        self.queue
            .push_front((0, Queued::Out(Output::Close { conn, code, reason })));
    }

    /// Write `records` now; every output queued after this waits until the shell acknowledges
    /// them.
    pub(super) fn persist(&mut self, records: Vec<Record>) {
        self.issued += 1;
        let seq = self.issued;
        self.effect(Effect::Persist { seq, records });
    }

    /// Persist `records` only once every output queued before them has left.
    pub(super) fn persist_after_send(&mut self, records: Vec<Record>) {
        self.queue
            .push_back((self.issued, Queued::PersistAfter(records)));
    }

    /// Where the first persist already numbered waits in the queue, if one does.
    fn next_persist(&self) -> Option<usize> {
        self.queue
            .iter()
            .position(|(_, q)| matches!(q, Queued::Out(Output::Effect(Effect::Persist { .. }))))
    }

    /// The shell wrote every record up to `Effect::Persist { seq }` durably (a `seq` never
    /// issued acknowledges no more than was issued).
    pub(super) fn acked(&mut self, seq: u64) {
        self.acked = self.acked.max(seq.min(self.issued));
    }

    /// Drop every frame, ping and close still queued for a connection that is gone (behind a
    /// persist, say): none of them may reach the shell for a connection it no longer has.
    pub(super) fn unqueue(&mut self, conn: ConnId) {
        self.queue.retain(|(_, q)| {
            !matches!(
                q,
                Queued::Out(
                    Output::Send { conn: c, .. }
                        | Output::Close { conn: c, .. }
                        | Output::Ping { conn: c }
                ) if *c == conn
            )
        });
    }

    /// The next output. Persist effects leave at once; everything else leaves in order, once
    /// the persists issued before it are acknowledged.
    pub(super) fn poll(&mut self) -> Option<Output> {
        let (gate, front) = self.queue.front()?;
        let ready = *gate <= self.acked;
        let item = match (ready, front, self.next_persist()) {
            // A persist-after-send takes the next number when it leaves, so a persist numbered
            // while it waited leaves first: numbers leave in order, and an acknowledgement of
            // the later one cannot free frames that wait for the earlier one.
            (true, Queued::PersistAfter(_), Some(i)) | (false, _, Some(i)) => {
                self.queue.remove(i)?.1
            }
            (true, _, _) => self.queue.pop_front()?.1,
            (false, _, None) => return None,
        };
        Some(match item {
            Queued::Out(o) => o,
            // Everything before it has left: these records may be written now.
            Queued::PersistAfter(records) => {
                self.issued += 1;
                Output::Effect(Effect::Persist {
                    seq: self.issued,
                    records,
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Table;

    const A: ConnId = ConnId(0);
    const B: ConnId = ConnId(1);

    fn record(key: &str) -> Record {
        Record::Put {
            table: Table::Sessions,
            key: key.into(),
            value: String::new(),
        }
    }

    fn frame(text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    /// What `poll` gives for a frame `text` sent on `conn`.
    fn sent(conn: ConnId, text: &str) -> Option<Output> {
        Some(Output::Send {
            conn,
            frame: frame(text),
        })
    }

    fn drain(out: &mut Outbox) -> Vec<Output> {
        std::iter::from_fn(|| out.poll()).collect()
    }

    fn persist_seq(o: &Output) -> Option<u64> {
        match o {
            Output::Effect(Effect::Persist { seq, .. }) => Some(*seq),
            _ => None,
        }
    }

    #[test]
    fn a_frame_waits_for_the_persist_before_it_and_the_persist_leaves_at_once() {
        let mut out = Outbox::default();
        out.send(A, frame("before"));
        out.persist(vec![record("s")]);
        out.send(A, frame("after"));
        assert_eq!(out.poll(), sent(A, "before"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        // Not written yet: the frame announcing it stays.
        assert_eq!(out.poll(), None);
        out.acked(1);
        assert_eq!(out.poll(), sent(A, "after"));
        assert_eq!(out.poll(), None);
    }

    #[test]
    fn a_later_persist_passes_frames_still_waiting_for_an_earlier_one() {
        let mut out = Outbox::default();
        out.persist(vec![record("1")]);
        out.send(A, frame("x"));
        out.persist(vec![record("2")]);
        let seqs: Vec<_> = drain(&mut out).iter().filter_map(persist_seq).collect();
        assert_eq!(seqs, vec![1, 2]);
        out.acked(1);
        assert_eq!(out.poll(), sent(A, "x"));
    }

    #[test]
    fn an_acknowledgement_beyond_what_was_issued_frees_nothing_issued_later() {
        let mut out = Outbox::default();
        out.acked(5);
        out.persist(vec![record("s")]);
        out.send(A, frame("after"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), None);
    }

    #[test]
    fn a_persist_after_send_is_issued_only_once_everything_before_it_left() {
        let mut out = Outbox::default();
        out.persist(vec![record("1")]);
        out.send(A, frame("x"));
        out.persist_after_send(vec![record("2")]);
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), None, "waits behind the frame");
        out.acked(1);
        assert_eq!(out.poll(), sent(A, "x"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(2));
    }

    /// (Found by the `device` fuzz target: a kept delete forgotten (persisted after its frame
    /// left) while a session was being made came out as seq 6 before seq 5.)
    #[test]
    fn a_persist_issued_while_a_persist_after_send_waited_leaves_first() {
        let mut out = Outbox::default();
        out.persist_after_send(vec![record("after")]);
        out.persist(vec![record("now")]);
        let persists: Vec<(u64, Vec<Record>)> = drain(&mut out)
            .into_iter()
            .filter_map(|o| match o {
                Output::Effect(Effect::Persist { seq, records }) => Some((seq, records)),
                _ => None,
            })
            .collect();
        assert_eq!(
            persists,
            vec![(1, vec![record("now")]), (2, vec![record("after")])]
        );
    }

    #[test]
    fn unqueue_drops_only_the_gone_connections_frames_pings_and_closes() {
        let mut out = Outbox::default();
        out.persist(vec![record("s")]);
        out.send(A, frame("a"));
        out.ping(A);
        out.close(A, 4000, "bye".into());
        out.send(B, frame("b"));
        out.effect(Effect::Dial);
        out.unqueue(A);
        out.acked(1);
        let left: Vec<_> = drain(&mut out)
            .into_iter()
            .filter(|o| persist_seq(o).is_none())
            .collect();
        assert_eq!(
            left,
            vec![
                Output::Send {
                    conn: B,
                    frame: frame("b")
                },
                Output::Effect(Effect::Dial)
            ]
        );
    }

    #[test]
    fn a_dead_link_close_jumps_the_queue_and_its_frames_are_dropped() {
        let mut out = Outbox::default();
        out.send(B, frame("first"));
        out.persist(vec![record("s")]);
        out.send(A, frame("held"));
        out.send(B, frame("held too"));
        out.close_now(A, 4001, "dead".into());
        // Ahead of everything, and not held by the unacknowledged persist.
        assert_eq!(
            out.poll(),
            Some(Output::Close {
                conn: A,
                code: 4001,
                reason: "dead".into()
            })
        );
        assert_eq!(out.poll(), sent(B, "first"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        out.acked(1);
        assert_eq!(
            drain(&mut out),
            vec![Output::Send {
                conn: B,
                frame: frame("held too")
            }]
        );
    }

    #[test]
    fn send_to_all_gives_each_the_frame_in_order() {
        let mut out = Outbox::default();
        out.send_to_all(&[A, B], frame("x"));
        out.send_to_all(&[], frame("nobody"));
        assert_eq!(
            drain(&mut out),
            vec![
                Output::Send {
                    conn: A,
                    frame: frame("x")
                },
                Output::Send {
                    conn: B,
                    frame: frame("x")
                }
            ]
        );
    }

    #[test]
    fn a_close_behind_waits_its_turn() {
        let mut out = Outbox::default();
        out.send(A, frame("answer"));
        out.close(A, 4000, "bye".into());
        assert_eq!(
            drain(&mut out),
            vec![
                Output::Send {
                    conn: A,
                    frame: frame("answer")
                },
                Output::Close {
                    conn: A,
                    code: 4000,
                    reason: "bye".into()
                }
            ]
        );
    }
}
