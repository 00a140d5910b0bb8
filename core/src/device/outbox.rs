//! The device's persist-gated output queue: what the device asks of its shell, with a change
//! made durable before any frame that announces it leaves. Every concern queues into it;
//! [`super::Device::poll_output`] drains it.
//!
//! Most outputs are lane-less: each waits for every persist issued before it (but the quiet
//! ones: a session's event log, which no frame announces) and leaves only
//! after every output queued before it, as one ordered stream. The hot per-session paths (a
//! session's updates, chunks and events, its own turn-state persists, the engine commands of its
//! turns) go in that session's lane instead: such an output waits only for the lane-less
//! persists and its own lane's persists before it, and may pass queued outputs of other lanes,
//! never a lane-less one nor one of its own lane. So session A's chunk is not held behind
//! session B's turn-start commit, while within a session, and for everything lane-less, the
//! order is exactly that of the calls. Only frames of different sessions change order on a
//! connection, which JSON-RPC allows. Path resolutions (file-system reads that announce
//! nothing) wait for nothing and leave first.

use std::collections::{BTreeMap, VecDeque};

use super::{ConnId, Effect, Output};
use crate::engine::EngineCommand;
use crate::store::Record;

/// A session's lane: the session id hashed (FNV-1a), so tagging an output allocates nothing.
/// Two sessions whose ids collide share a lane, which only orders and gates them more strictly
/// than needed, never less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Lane(u64);

impl Lane {
    pub(crate) fn of(session: &str) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in session.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Lane(h)
    }
}

/// What an entry of the queue is.
#[derive(Debug)]
enum Queued {
    Out(Output),
    /// Records to persist once everything before them has left (lane-less).
    PersistAfter(Vec<Record>),
}

impl Queued {
    fn is_persist(&self) -> bool {
        matches!(self, Queued::Out(Output::Effect(Effect::Persist { .. })))
    }
}

/// An entry: the output, its lane (`None`: lane-less), and the persist number it waits for.
#[derive(Debug)]
struct Entry {
    gate: u64,
    lane: Option<Lane>,
    item: Queued,
}

/// Outputs, each with the number of the last persist it waits for: it may leave once that many
/// are acknowledged (the shell acknowledges in number order) and nothing queued before it that
/// must precede it is still queued. Persist effects themselves leave at once, in number order
/// (the shell must write them for the rest to move).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    queue: VecDeque<Entry>,
    /// Path resolutions asked ([`Outbox::resolve_path`]): they wait for nothing, and leave
    /// before everything queued, in the order asked.
    resolutions: VecDeque<Effect>,
    /// Persists asked of the shell so far (the last `Effect::Persist`'s `seq`).
    issued: u64,
    /// The last persist a lane-less output waits for: every one issued but the quiet ones.
    gating: u64,
    /// The highest `seq` the shell reported written.
    acked: u64,
    /// The last lane-less persist: every output waits for it.
    last_global: u64,
    /// Each lane's last persist above `last_global` and `acked`: only entries that still raise a
    /// gate are kept (a lane-less persist or an acknowledgement drops the rest), so it holds at
    /// most one entry per unacknowledged persist.
    last_in_lane: BTreeMap<Lane, u64>,
    /// Persist effects still in `queue`: a scan that can take nothing else stops early when
    /// there are none.
    queued_persists: usize,
    /// How many outputs at the front of `queue` the last scan found held, none of which may
    /// leave before an acknowledgement, their lanes in `blocked`: the next scan starts after
    /// them. With many sessions streaming while some wait for a commit, scanning from the
    /// front each time cost a pass over every held frame per output. Whatever may free or move
    /// them (an acknowledgement, a connection's outputs dropped, an output put in front)
    /// starts the scans from the front again.
    held: usize,
    /// The lanes a scan of `poll` found held (reused so a poll allocates nothing).
    blocked: Vec<Lane>,
}

impl Outbox {
    fn push(&mut self, lane: Option<Lane>, output: Output) {
        let gate = match lane {
            None => self.gating,
            Some(l) => self
                .last_global
                .max(self.last_in_lane.get(&l).copied().unwrap_or(0)),
        };
        let item = Queued::Out(output);
        self.queued_persists += usize::from(item.is_persist());
        self.queue.push_back(Entry { gate, lane, item });
    }

    /// How many lanes' last persists are kept: the fuzz target's check that it stays within
    /// the unacknowledged persists.
    #[cfg(feature = "testing")]
    pub(crate) fn lanes_tracked(&self) -> usize {
        self.last_in_lane.len()
    }

    /// Nothing is queued (a path resolution neither) and every persist asked for is
    /// acknowledged.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.resolutions.is_empty() && self.acked >= self.issued
    }

    /// The number of the last persist asked of the shell.
    pub(super) fn last_issued(&self) -> u64 {
        self.issued
    }

    /// Whether the shell wrote every persist up to `seq`.
    pub(super) fn written_through(&self, seq: u64) -> bool {
        self.acked >= seq
    }

    /// Send one frame on a connection, behind every persist issued so far.
    pub(crate) fn send(&mut self, conn: ConnId, frame: Vec<u8>) {
        self.push(None, Output::Send { conn, frame });
    }

    /// Send one frame of `lane`'s session on a connection: behind every lane-less persist and
    /// every persist of the lane issued so far, and behind every lane-less output and every
    /// output of the lane queued so far.
    pub(crate) fn send_in(&mut self, lane: Lane, conn: ConnId, frame: Vec<u8>) {
        self.push(Some(lane), Output::Send { conn, frame });
    }

    /// Send one frame to each of `to`: the last one gets the frame itself, the others a copy.
    /// (The device broadcasts only in a session's lane; this lane-less form is the tests'.)
    #[cfg(test)]
    pub(crate) fn send_to_all(&mut self, to: &[ConnId], frame: Vec<u8>) {
        self.send_to_all_lane(None, to, frame);
    }

    /// [`Self::send_to_all`] in `lane` (see [`Self::send_in`]).
    pub(crate) fn send_to_all_in(&mut self, lane: Lane, to: &[ConnId], frame: Vec<u8>) {
        self.send_to_all_lane(Some(lane), to, frame);
    }

    fn send_to_all_lane(&mut self, lane: Option<Lane>, to: &[ConnId], frame: Vec<u8>) {
        if let Some((last, rest)) = to.split_last() {
            for c in rest {
                self.push(
                    lane,
                    Output::Send {
                        conn: *c,
                        frame: frame.clone(),
                    },
                );
            }
            self.push(lane, Output::Send { conn: *last, frame });
        }
    }

    /// Ask the shell for work, behind every persist issued so far.
    pub(crate) fn effect(&mut self, effect: Effect) {
        self.push(None, Output::Effect(effect));
    }

    /// [`Self::effect`] for work about `lane`'s session (see [`Self::send_in`]): it waits for
    /// no other session's persists.
    pub(crate) fn effect_in(&mut self, lane: Lane, effect: Effect) {
        self.push(Some(lane), Output::Effect(effect));
    }

    /// Ask the shell to resolve `path` (`Effect::ResolvePath`), waiting for nothing: it reads
    /// the file system, not the store, and announces nothing, so no persist need be durable
    /// before it and no output need leave first. Queued lane-less instead, a prompt's
    /// directory check on the link waited for the commit of the turn before it, with every
    /// frame the link sent after it held behind that prompt and every session's stream held
    /// behind the check: prompts sent at once started one commit apart, and the streams
    /// already running stalled while they did.
    pub(crate) fn resolve_path(&mut self, request: u64, path: String) {
        self.resolutions
            .push_back(Effect::ResolvePath { request, path });
    }

    /// Give the engine a command (the host loop hands it over), behind every persist issued
    /// so far: a turn starts only once its state is durable.
    pub(crate) fn engine(&mut self, command: EngineCommand) {
        self.push(None, Output::Engine(command));
    }

    /// [`Self::engine`] for a command about a turn of `lane`'s session (see [`Self::send_in`]).
    pub(crate) fn engine_in(&mut self, lane: Lane, command: EngineCommand) {
        self.push(Some(lane), Output::Engine(command));
    }

    /// Ping a connection, behind every persist issued so far.
    pub(crate) fn ping(&mut self, conn: ConnId) {
        self.push(None, Output::Ping { conn });
    }

    /// Close a connection behind what is already queued for it (every answer sent before still
    /// leaves).
    pub(crate) fn close(&mut self, conn: ConnId, code: u16, reason: String) {
        self.push(None, Output::Close { conn, code, reason });
    }

    /// Close a connection that is gone for the device now (a dead link): what was queued for it
    /// is dropped, and the close leaves first, past any persist, since nothing it announces
    /// needs to be durable first.
    pub(crate) fn close_now(&mut self, conn: ConnId, code: u16, reason: String) {
        self.unqueue(conn);
        self.held = 0;
        self.queue.push_front(Entry {
            gate: 0,
            lane: None,
            item: Queued::Out(Output::Close { conn, code, reason }),
        });
    }

    /// Write `records` now; every output queued after this waits until the shell acknowledges
    /// them.
    pub(crate) fn persist(&mut self, records: Vec<Record>) {
        self.issued += 1;
        self.gating = self.issued;
        self.last_global = self.issued;
        // Every lane's last persist is below this one now: none raises a gate any more.
        self.last_in_lane.clear();
        let seq = self.issued;
        self.effect(Effect::Persist { seq, records });
    }

    /// Write `records`, all of `lane`'s session, now; only lane-less outputs and outputs of the
    /// lane queued after this wait until the shell acknowledges them.
    pub(crate) fn persist_in(&mut self, lane: Lane, records: Vec<Record>) {
        self.issued += 1;
        self.gating = self.issued;
        let seq = self.issued;
        self.last_in_lane.insert(lane, seq);
        self.effect(Effect::Persist { seq, records });
    }

    /// Write `records` now, gating nothing: no output waits for them (a session's event log,
    /// whose answers read memory).
    pub(crate) fn persist_quiet(&mut self, records: Vec<Record>) {
        self.issued += 1;
        let seq = self.issued;
        self.effect(Effect::Persist { seq, records });
    }

    /// Persist `records` only once every output queued before them has left.
    pub(crate) fn persist_after_send(&mut self, records: Vec<Record>) {
        self.queue.push_back(Entry {
            gate: self.gating,
            lane: None,
            item: Queued::PersistAfter(records),
        });
    }

    /// The shell wrote every record up to `Effect::Persist { seq }` durably (a `seq` never
    /// issued acknowledges no more than was issued).
    pub(crate) fn acked(&mut self, seq: u64) {
        self.acked = self.acked.max(seq.min(self.issued));
        self.held = 0;
        // An acknowledged lane persist gates nothing any more.
        let acked = self.acked;
        self.last_in_lane.retain(|_, s| *s > acked);
    }

    /// Drop every frame, ping and close still queued for a connection that is gone (behind a
    /// persist, say): none of them may reach the shell for a connection it no longer has.
    pub(crate) fn unqueue(&mut self, conn: ConnId) {
        self.held = 0;
        self.queue.retain(|e| {
            !matches!(
                &e.item,
                Queued::Out(
                    Output::Send { conn: c, .. }
                        | Output::Close { conn: c, .. }
                        | Output::Ping { conn: c }
                ) if *c == conn
            )
        });
    }

    /// The next output. Path resolutions leave first; persist effects leave at once, in number
    /// order. Any other output leaves once the persists it waits for are acknowledged and
    /// nothing queued before it must precede it: everything lane-less must precede what is
    /// queued after it, and is preceded by everything queued before it; outputs of one lane
    /// keep their order.
    ///
    /// Cost: O(1) when the front may leave (the common case). Otherwise a scan from the front
    /// past the outputs of held lanes to the first that may leave, or to the first held
    /// lane-less output (then on to the next queued persist, if any): O(n log k) for n outputs
    /// passed and k held lanes, and no allocation once `blocked` has grown to k.
    pub(crate) fn poll(&mut self) -> Option<Output> {
        if let Some(resolve) = self.resolutions.pop_front() {
            return Some(Output::Effect(resolve));
        }
        let front = self.queue.front()?;
        let ready = front.gate <= self.acked;
        let at = match (&front.item, ready) {
            (q, _) if q.is_persist() => 0,
            (Queued::PersistAfter(_), true) => {
                // A persist-after-send takes the next number when it leaves, so a persist
                // numbered while it waited leaves first: numbers leave in order, and an
                // acknowledgement of the later one cannot free frames that wait for the earlier
                // one.
                self.next_persist().unwrap_or(0)
            }
            (Queued::Out(_), true) => 0,
            (_, false) => self.scan()?,
        };
        // What leaves is never one of the held (the scan starts after them), so they stay
        // where they are.
        debug_assert!(at >= self.held, "a held output left");
        let entry = self.queue.remove(at)?;
        Some(match entry.item {
            Queued::Out(o) => {
                self.queued_persists -=
                    usize::from(matches!(o, Output::Effect(Effect::Persist { .. })));
                o
            }
            // Everything before it has left: these records may be written now.
            Queued::PersistAfter(records) => {
                self.issued += 1;
                self.gating = self.issued;
                self.last_global = self.issued;
                self.last_in_lane.clear();
                Output::Effect(Effect::Persist {
                    seq: self.issued,
                    records,
                })
            }
        })
    }

    /// Where the first persist already numbered waits in the queue, if one does.
    fn next_persist(&self) -> Option<usize> {
        if self.queued_persists == 0 {
            return None;
        }
        self.queue.iter().position(|e| e.item.is_persist())
    }

    /// The front is held: where the first output that may leave waits, if one does. Scanning
    /// from the front, a persist may always leave; a lane output may leave if it is ready and
    /// neither a lane-less output nor one of its lane waits before it.
    fn scan(&mut self) -> Option<usize> {
        if self.held == 0 {
            self.blocked.clear();
        }
        for (i, e) in self.queue.iter().enumerate().skip(self.held) {
            if e.item.is_persist() {
                self.held = i;
                return Some(i);
            }
            let Some(lane) = e.lane else {
                // Held lane-less (the front one held, or one behind a held output): nothing
                // after it but a persist may leave.
                self.held = i;
                return if self.queued_persists == 0 {
                    None
                } else {
                    self.queue
                        .iter()
                        .skip(i + 1)
                        .position(|e| e.item.is_persist())
                        .map(|j| i + 1 + j)
                };
            };
            match self.blocked.binary_search(&lane) {
                Ok(_) => {}
                Err(_) if e.gate <= self.acked => {
                    self.held = i;
                    return Some(i);
                }
                Err(at) => self.blocked.insert(at, lane),
            }
        }
        self.held = self.queue.len();
        None
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
    fn a_path_resolution_waits_for_no_persist_and_no_held_output() {
        let mut out = Outbox::default();
        out.persist(vec![record("s")]);
        out.send(A, frame("held"));
        out.send_in(lane(LA), A, frame("held too"));
        out.resolve_path(7, "/w/p".into());
        out.resolve_path(8, "/w/q".into());
        assert_eq!(
            drain(&mut out),
            vec![
                Output::Effect(Effect::ResolvePath {
                    request: 7,
                    path: "/w/p".into()
                }),
                Output::Effect(Effect::ResolvePath {
                    request: 8,
                    path: "/w/q".into()
                }),
                Output::Effect(Effect::Persist {
                    seq: 1,
                    records: vec![record("s")]
                }),
            ],
            "the resolutions leave first, in the order asked; the frames wait for the persist"
        );
        out.acked(1);
        assert_eq!(
            drain(&mut out),
            vec![sent(A, "held").unwrap(), sent(A, "held too").unwrap()]
        );
    }

    /// (Found by the `outbox` fuzz target: with only a path resolution queued, the outbox
    /// said it was empty.)
    #[test]
    fn a_queued_path_resolution_is_not_empty() {
        let mut out = Outbox::default();
        out.resolve_path(1, "/w".into());
        assert!(!out.is_empty());
        out.poll();
        assert!(out.is_empty());
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

    const LA: &str = "ses_a";
    const LB: &str = "ses_b";

    fn lane(session: &str) -> Lane {
        Lane::of(session)
    }

    #[test]
    fn a_sessions_chunk_leaves_while_another_sessions_turn_persist_is_unacknowledged() {
        let mut out = Outbox::default();
        out.persist_in(lane(LB), vec![record("b turn")]);
        out.send_in(lane(LB), B, frame("b prompt"));
        out.send_in(lane(LA), A, frame("a chunk"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), sent(A, "a chunk"), "not held by B's persist");
        assert_eq!(out.poll(), None, "B's own frame waits for B's persist");
        out.acked(1);
        assert_eq!(out.poll(), sent(B, "b prompt"));
    }

    #[test]
    fn a_sessions_frames_after_its_persist_wait_for_it_and_keep_their_order() {
        let mut out = Outbox::default();
        out.send_in(lane(LB), B, frame("b before"));
        out.persist_in(lane(LB), vec![record("b")]);
        out.send_in(lane(LB), B, frame("b 1"));
        out.persist_in(lane(LA), vec![record("a")]);
        out.send_in(lane(LB), B, frame("b 2"));
        assert_eq!(out.poll(), sent(B, "b before"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(2));
        assert_eq!(out.poll(), None);
        out.acked(1);
        // "b 2" was queued after A's persist 2, which B's lane does not wait for.
        assert_eq!(
            drain(&mut out),
            vec![sent(B, "b 1").unwrap(), sent(B, "b 2").unwrap()]
        );
    }

    #[test]
    fn a_lane_less_frame_waits_for_every_persist_and_every_output_before_it() {
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        out.send(B, frame("answer"));
        out.send_in(lane(LB), B, frame("b chunk"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        // The answer waits for A's persist; B's chunk may not pass the answer.
        assert_eq!(out.poll(), None);
        out.acked(1);
        assert_eq!(
            drain(&mut out),
            vec![sent(B, "answer").unwrap(), sent(B, "b chunk").unwrap()]
        );

        // Nor does a ready lane-less output pass a held lane output queued before it.
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        out.send_in(lane(LA), A, frame("a held"));
        out.acked(1);
        out.persist_in(lane(LB), vec![record("b")]);
        out.send_in(lane(LB), B, frame("b held"));
        out.send(A, frame("lane-less"));
        out.send_in(lane(LA), A, frame("a after"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), sent(A, "a held"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(2));
        assert_eq!(
            out.poll(),
            None,
            "the lane-less frame waits for B's persist 2"
        );
        out.acked(2);
        assert_eq!(
            drain(&mut out),
            vec![
                sent(B, "b held").unwrap(),
                sent(A, "lane-less").unwrap(),
                sent(A, "a after").unwrap()
            ]
        );
    }

    #[test]
    fn a_lane_frame_never_passes_an_earlier_lane_less_output_or_its_own_lane() {
        let mut out = Outbox::default();
        out.persist(vec![record("global")]);
        out.send(A, frame("response"));
        out.send_in(lane(LA), A, frame("a chunk"));
        out.send_in(lane(LB), B, frame("b chunk"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        // Every lane waits for a lane-less persist, and behind the lane-less response.
        assert_eq!(out.poll(), None);
        out.acked(1);
        assert_eq!(out.poll(), sent(A, "response"));

        // A ready frame of a lane stays behind its lane's held frame.
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        out.send_in(lane(LA), A, frame("a held"));
        out.send_in(lane(LB), B, frame("b free"));
        out.send_in(lane(LA), A, frame("a 2"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), sent(B, "b free"));
        assert_eq!(out.poll(), None, "a 2 stays behind a held");
        out.acked(1);
        assert_eq!(
            drain(&mut out),
            vec![sent(A, "a held").unwrap(), sent(A, "a 2").unwrap()]
        );
    }

    #[test]
    fn a_lane_waits_for_lane_less_persists_issued_after_its_own() {
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        out.persist(vec![record("global")]);
        out.send_in(lane(LB), B, frame("b"));
        drain(&mut out);
        out.acked(1);
        assert_eq!(out.poll(), None, "B waits for the lane-less persist 2");
        out.acked(2);
        assert_eq!(out.poll(), sent(B, "b"));
    }

    #[test]
    fn a_lane_waits_for_a_persist_after_send_and_cannot_pass_it() {
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        out.send_in(lane(LA), A, frame("a held"));
        out.persist_after_send(vec![record("after")]);
        out.send_in(lane(LB), B, frame("b"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(
            out.poll(),
            None,
            "B stays behind the lane-less persist-after-send"
        );
        out.acked(1);
        assert_eq!(out.poll(), sent(A, "a held"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(2));
        assert_eq!(out.poll(), sent(B, "b"));
    }

    #[test]
    fn last_in_lane_drops_what_is_acknowledged_or_below_a_lane_less_persist() {
        let mut out = Outbox::default();
        for i in 0..100 {
            out.persist_in(lane(&format!("ses_{i}")), vec![record("t")]);
        }
        assert_eq!(out.last_in_lane.len(), 100);
        out.acked(50);
        assert_eq!(
            out.last_in_lane.len(),
            50,
            "acknowledged entries gate nothing"
        );
        out.persist_in(lane("ses_99"), vec![record("t")]);
        assert_eq!(out.last_in_lane.len(), 50, "one entry per lane");
        out.persist(vec![record("global")]);
        assert!(
            out.last_in_lane.is_empty(),
            "all below the lane-less persist"
        );
        out.persist_in(lane(LA), vec![record("a")]);
        out.acked(u64::MAX);
        assert!(out.last_in_lane.is_empty());
    }

    #[test]
    fn a_quiet_persist_holds_nothing() {
        let mut out = Outbox::default();
        out.persist_quiet(vec![record("log")]);
        out.send_in(lane(LA), A, frame("a"));
        out.send(B, frame("answer"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), sent(A, "a"));
        assert_eq!(
            out.poll(),
            sent(B, "answer"),
            "not written yet, and nothing waits"
        );
        // A persist after it still waits for it to be acknowledged in order.
        out.persist(vec![record("after")]);
        out.send(B, frame("later"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(2));
        out.acked(1);
        assert_eq!(out.poll(), None);
        out.acked(2);
        assert_eq!(out.poll(), sent(B, "later"));
    }

    #[test]
    fn a_dead_link_close_still_jumps_held_lanes() {
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        out.send_in(lane(LA), A, frame("held"));
        out.send_in(lane(LB), B, frame("b"));
        out.close_now(B, 4001, "dead".into());
        assert_eq!(
            out.poll(),
            Some(Output::Close {
                conn: B,
                code: 4001,
                reason: "dead".into()
            })
        );
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), None, "B's frame was dropped, A's waits");
        out.acked(1);
        assert_eq!(out.poll(), sent(A, "held"));
    }

    /// Gates within a lane only grow, so a held frame's lane-mates are held anyway; the blocked
    /// lanes of `scan` keep the lane's order even for one that is ready (one queued directly
    /// here, with a lower gate).
    #[test]
    fn a_ready_frame_stays_behind_its_lanes_held_frame_even_with_a_lower_gate() {
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        out.send_in(lane(LA), A, frame("a held"));
        out.queue.push_back(Entry {
            gate: 0,
            lane: Some(lane(LA)),
            item: Queued::Out(Output::Send {
                conn: A,
                frame: frame("a ready"),
            }),
        });
        out.send_in(lane(LB), B, frame("b"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), sent(B, "b"));
        assert_eq!(out.poll(), None);
        out.acked(1);
        assert_eq!(
            drain(&mut out),
            vec![sent(A, "a held").unwrap(), sent(A, "a ready").unwrap()]
        );
    }

    /// The scan resumes after the frames it found held: what comes later still leaves in
    /// order, and whatever frees or moves the held ones starts it from the front again.
    #[test]
    fn a_scan_resumes_past_held_frames_until_they_may_move() {
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        for t in ["a 1", "a 2", "a 3"] {
            out.send_in(lane(LA), A, frame(t));
        }
        out.send_in(lane(LB), B, frame("b 1"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), sent(B, "b 1"));
        assert_eq!(out.held, 3, "the held frames are not scanned again");
        out.send_in(lane(LA), A, frame("a 4"));
        out.send_in(lane(LB), B, frame("b 2"));
        assert_eq!(out.poll(), sent(B, "b 2"));
        assert_eq!(out.poll(), None);
        assert_eq!(out.held, 4);
        // A lane-less persist queued behind them still leaves at once.
        out.persist(vec![record("global")]);
        out.send(B, frame("answer"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(2));
        assert_eq!(out.poll(), None);
        out.acked(1);
        assert_eq!(
            drain(&mut out),
            vec![
                sent(A, "a 1").unwrap(),
                sent(A, "a 2").unwrap(),
                sent(A, "a 3").unwrap(),
                sent(A, "a 4").unwrap()
            ],
            "the answer waits for persist 2"
        );
        out.acked(2);
        assert_eq!(drain(&mut out), vec![sent(B, "answer").unwrap()]);

        // A connection's frames dropped, or a close put in front: scanned from the front.
        let mut out = Outbox::default();
        out.persist_in(lane(LA), vec![record("a")]);
        out.send_in(lane(LA), A, frame("a held"));
        out.send_in(lane(LB), B, frame("b first"));
        out.send_in(lane(LB), B, frame("b second"));
        assert_eq!(out.poll().as_ref().and_then(persist_seq), Some(1));
        assert_eq!(out.poll(), sent(B, "b first"));
        out.close_now(A, 4001, "dead".into());
        assert_eq!(out.held, 0);
        assert!(matches!(out.poll(), Some(Output::Close { conn: A, .. })));
        assert_eq!(out.poll(), sent(B, "b second"));
        assert_eq!(out.poll(), None);
    }
}
