//! The `outbox` driver: the device's persist-gated output queue ([`Outbox`]) alone, driven by
//! frames, pings, closes, effects and engine commands (lane-less and in sessions' lanes),
//! persists of every kind, path resolutions, acknowledgements, dropped connections and polls,
//! against a model written from the queue's documented rules, not its code. The shell it plays
//! puts each frame that leaves on its connection's wire under the backlog's rules
//! ([`crate::backlog`]), closing a connection that overflows as the drivers do.
//!
//! The promises checked at every output and after every operation:
//! - nothing leaves before every persist it waits for is acknowledged: a lane-less output
//!   waits for every persist issued before it but the quiet ones, a lane's output for the
//!   lane-less ones and its own lane's;
//! - a lane-less output leaves after everything queued before it, an output of a lane after
//!   the lane-less outputs and its lane's outputs queued before it: so a connection's frames
//!   leave in order but where two sessions' frames pass each other;
//! - persists leave in number order, each numbered once, a persist-after-send only once
//!   everything queued before it has left; path resolutions before anything else, in order;
//! - nothing is lost or duplicated and a frame leaves whole: every output queued leaves
//!   exactly once, as queued, unless its connection's outputs were dropped;
//! - when `poll` says nothing may leave, the model agrees, and no persist is left queued (the
//!   shell must see it to acknowledge it); `is_empty` says what the model says;
//! - the queue's bookkeeping stays bounded: at most one tracked lane per unacknowledged
//!   persist;
//! - a connection's wire never holds more than `max_bytes` but for one frame alone;
//! - no panic.

use std::collections::{BTreeMap, VecDeque};

use arbitrary::Arbitrary;

use crate::backlog::{self, Overflow};
use crate::device::outbox::{Lane, Outbox};
use crate::device::{ConnId, Effect, Output};
use crate::engine::EngineCommand;
use crate::store::{Record, Table};

/// At most this many operations are read from one input.
const MAX_OUTBOX_OPS: usize = 512;

/// Sessions (lanes) and connections come from small sets, so lanes and connections meet.
const LANES: u8 = 3;
const CONNS: u8 = 3;

#[derive(Arbitrary, Debug)]
enum Op {
    /// A frame of `len` bytes past its id on a connection, lane-less or in a lane.
    Send {
        conn: u8,
        lane: Option<u8>,
        len: u8,
    },
    /// A session's frame to each connection of `to` (a bit each).
    SendToAll {
        lane: u8,
        to: u8,
        len: u8,
    },
    /// Work for the shell (`Effect::Stop` stands for any), lane-less or in a lane.
    Effect {
        lane: Option<u8>,
    },
    /// A command for the engine, lane-less or in a lane.
    Engine {
        lane: Option<u8>,
    },
    Ping {
        conn: u8,
    },
    Close {
        conn: u8,
    },
    /// A dead link's close: what is queued for it is dropped and the close leaves first.
    CloseNow {
        conn: u8,
    },
    /// A persist, lane-less (`None`) or of a lane.
    Persist {
        lane: Option<u8>,
    },
    PersistQuiet,
    PersistAfterSend,
    ResolvePath,
    /// The shell acknowledges up to the `pick`-th persist it was handed and has not
    /// acknowledged.
    Ack {
        pick: u8,
    },
    /// An acknowledgement at or below one already made.
    AckAgain {
        back: u8,
    },
    /// An acknowledgement of a number never issued, once every persist issued was handed over.
    AckBeyond,
    /// A connection went away: its frames, pings and closes are dropped.
    Unqueue {
        conn: u8,
    },
    /// The shell takes up to `n` outputs.
    Poll {
        n: u8,
    },
    /// The connection's writer writes `n` of the frames waiting on its wire.
    Write {
        conn: u8,
        n: u8,
    },
}

/// The first bytes of every frame: its id, so an output is known for what it was.
const ID_DIGITS: usize = 12;

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Send {
        conn: u64,
        frame: Vec<u8>,
    },
    Ping {
        conn: u64,
    },
    Close {
        conn: u64,
    },
    Effect,
    Engine,
    /// A persist numbered when asked.
    Persist {
        seq: u64,
    },
    /// A persist numbered when it leaves.
    PersistAfter,
}

/// An output queued and not yet left, as the model sees it.
#[derive(Debug)]
struct Pending {
    id: u64,
    lane: Option<u8>,
    /// The persist number it waits for (acknowledgements are cumulative).
    waits_for: u64,
    kind: Kind,
}

impl Pending {
    fn is_persist(&self) -> bool {
        matches!(self.kind, Kind::Persist { .. })
    }
}

#[derive(Debug, Default)]
struct Model {
    /// In the order the outputs must be considered: calls' order, a dead link's close first.
    queue: VecDeque<Pending>,
    resolutions: VecDeque<u64>,
    /// Persists numbered so far.
    issued: u64,
    /// The last persist numbered that is not quiet: a lane-less output waits for it.
    last_gating: u64,
    /// The last lane-less persist: every output waits for it.
    last_lane_less: u64,
    /// Each lane's last persist.
    last_in_lane: BTreeMap<u8, u64>,
    /// The highest persist handed to the shell.
    handed: u64,
    acked: u64,
    next_id: u64,
}

/// The shell's side of each connection: what waits on its wire, in bytes a frame.
#[derive(Debug, Default)]
struct Wire {
    frames: VecDeque<usize>,
    bytes: usize,
}

struct Driver {
    out: Outbox,
    m: Model,
    wires: BTreeMap<u64, Wire>,
    max_bytes: usize,
    pause_bytes: usize,
}

/// Drive an [`Outbox`] through operations read from `data`; panics on a broken promise.
pub fn outbox(data: &[u8]) {
    let Some(((max, pause), ops)) = super::read_input::<(u8, u8), Op>(data, MAX_OUTBOX_OPS) else {
        return;
    };
    // Small bounds, so overflows are reached: frames are 12 to 267 bytes.
    let max_bytes = 64 + 4 * usize::from(max);
    let mut d = Driver {
        out: Outbox::default(),
        m: Model::default(),
        wires: BTreeMap::new(),
        max_bytes,
        pause_bytes: 1 + usize::from(pause) % max_bytes,
    };
    for op in ops {
        d.step(op);
        d.check();
    }
    d.finish();
}

/// The bounds and operations [`outbox`] reads from `data`, one a line: to read a failing input.
pub fn outbox_script(data: &[u8]) -> String {
    super::script::<(u8, u8), Op>(data, MAX_OUTBOX_OPS, "bounds")
}

fn lane_name(lane: u8) -> String {
    format!("ses_{}", lane % LANES)
}

fn lane_of(lane: u8) -> Lane {
    Lane::of(&lane_name(lane))
}

fn record(id: u64) -> Vec<Record> {
    vec![Record::Put {
        table: Table::Sessions,
        key: id.to_string(),
        value: String::new(),
    }]
}

/// The id a record or frame names.
fn id_of_records(records: &[Record]) -> u64 {
    match records {
        [Record::Put { key, .. }] => key.parse().expect("the driver's records name an id"),
        other => panic!("records the driver never asked for: {other:?}"),
    }
}

fn id_of_frame(frame: &[u8]) -> u64 {
    assert!(
        frame.len() >= ID_DIGITS,
        "a frame was cut: {} bytes",
        frame.len()
    );
    std::str::from_utf8(&frame[..ID_DIGITS])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a frame the driver never sent: {frame:?}"))
}

impl Model {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// What an output queued now waits for.
    fn waits_for(&self, lane: Option<u8>) -> u64 {
        match lane {
            None => self.last_gating,
            Some(l) => self
                .last_lane_less
                .max(self.last_in_lane.get(&l).copied().unwrap_or(0)),
        }
    }

    fn queue(&mut self, id: u64, lane: Option<u8>, kind: Kind) {
        let waits_for = match kind {
            // A persist waits for nothing (the shell must write it for anything to move).
            Kind::Persist { .. } => 0,
            _ => self.waits_for(lane),
        };
        self.queue.push_back(Pending {
            id,
            lane,
            waits_for,
            kind,
        });
    }

    /// A persist numbered now: `lane` `None` is lane-less, `quiet` gates nothing.
    fn number(&mut self, lane: Option<u8>, quiet: bool) -> u64 {
        self.issued += 1;
        let seq = self.issued;
        if !quiet {
            self.last_gating = seq;
            match lane {
                None => self.last_lane_less = seq,
                Some(l) => {
                    self.last_in_lane.insert(l, seq);
                }
            }
        }
        seq
    }

    /// Whether the output at `at` may leave now.
    fn may_leave(&self, at: usize) -> bool {
        let p = &self.queue[at];
        if p.is_persist() {
            return true;
        }
        if p.waits_for > self.acked {
            return false;
        }
        if matches!(p.kind, Kind::PersistAfter) && self.queue.iter().any(Pending::is_persist) {
            // It takes the next number: the ones already numbered go first.
            return false;
        }
        self.queue.range(..at).all(|before| {
            before.is_persist()
                || !(before.lane.is_none() || p.lane.is_none() || before.lane == p.lane)
        })
    }

    /// Drop what is queued for `conn` (its frames, pings and closes).
    fn drop_conn(&mut self, conn: u64) {
        self.queue.retain(|p| {
            !matches!(p.kind,
                Kind::Send { conn: c, .. } | Kind::Ping { conn: c } | Kind::Close { conn: c }
                if c == conn)
        });
    }
}

impl Driver {
    fn step(&mut self, op: Op) {
        let m = &mut self.m;
        match op {
            Op::Send { conn, lane, len } => {
                let conn = u64::from(conn % CONNS);
                let id = m.id();
                let frame = frame(id, len);
                let lane = lane.map(|l| l % LANES);
                m.queue(
                    id,
                    lane,
                    Kind::Send {
                        conn,
                        frame: frame.clone(),
                    },
                );
                match lane {
                    None => self.out.send(ConnId(conn), frame),
                    Some(l) => self.out.send_in(lane_of(l), ConnId(conn), frame),
                }
            }
            Op::SendToAll { lane, to, len } => {
                let lane = lane % LANES;
                let to: Vec<u64> = (0..u64::from(CONNS))
                    .filter(|c| to & (1 << c) != 0)
                    .collect();
                let id = m.id();
                let frame = frame(id, len);
                for &conn in &to {
                    m.queue(
                        id,
                        Some(lane),
                        Kind::Send {
                            conn,
                            frame: frame.clone(),
                        },
                    );
                }
                let to: Vec<ConnId> = to.into_iter().map(ConnId).collect();
                self.out.send_to_all_in(lane_of(lane), &to, frame);
            }
            Op::Effect { lane } => {
                let id = m.id();
                let lane = lane.map(|l| l % LANES);
                m.queue(id, lane, Kind::Effect);
                let effect = Effect::Stop {
                    message: id.to_string(),
                };
                match lane {
                    None => self.out.effect(effect),
                    Some(l) => self.out.effect_in(lane_of(l), effect),
                }
            }
            Op::Engine { lane } => {
                let id = m.id();
                let lane = lane.map(|l| l % LANES);
                m.queue(id, lane, Kind::Engine);
                let command = EngineCommand::Cancel {
                    session_id: lane.map(lane_name).unwrap_or_default(),
                    turn_id: id.to_string(),
                };
                match lane {
                    None => self.out.engine(command),
                    Some(l) => self.out.engine_in(lane_of(l), command),
                }
            }
            Op::Ping { conn } => {
                let conn = u64::from(conn % CONNS);
                let id = m.id();
                m.queue(id, None, Kind::Ping { conn });
                self.out.ping(ConnId(conn));
            }
            Op::Close { conn } => {
                let conn = u64::from(conn % CONNS);
                let id = m.id();
                m.queue(id, None, Kind::Close { conn });
                self.out.close(ConnId(conn), 4000, id.to_string());
            }
            Op::CloseNow { conn } => self.close_now(u64::from(conn % CONNS)),
            Op::Persist { lane } => {
                let id = m.id();
                let lane = lane.map(|l| l % LANES);
                let seq = m.number(lane, false);
                m.queue(id, lane, Kind::Persist { seq });
                match lane {
                    None => self.out.persist(record(id)),
                    Some(l) => self.out.persist_in(lane_of(l), record(id)),
                }
            }
            Op::PersistQuiet => {
                let id = m.id();
                let seq = m.number(None, true);
                m.queue(id, None, Kind::Persist { seq });
                self.out.persist_quiet(record(id));
            }
            Op::PersistAfterSend => {
                let id = m.id();
                m.queue(id, None, Kind::PersistAfter);
                self.out.persist_after_send(record(id));
            }
            Op::ResolvePath => {
                let id = m.id();
                m.resolutions.push_back(id);
                self.out.resolve_path(id, format!("/w/{id}"));
            }
            Op::Ack { pick } => {
                let open = m.handed - m.acked;
                if open == 0 {
                    return;
                }
                let seq = m.acked + 1 + u64::from(pick) % open;
                m.acked = seq;
                self.out.acked(seq);
            }
            Op::AckAgain { back } => {
                self.out.acked(m.acked.saturating_sub(u64::from(back)));
            }
            Op::AckBeyond => {
                if m.handed == m.issued {
                    m.acked = m.issued;
                    self.out.acked(u64::MAX);
                }
            }
            Op::Unqueue { conn } => {
                let conn = u64::from(conn % CONNS);
                m.drop_conn(conn);
                self.out.unqueue(ConnId(conn));
            }
            Op::Poll { n } => {
                for _ in 0..=n {
                    if !self.poll_one() {
                        break;
                    }
                }
            }
            Op::Write { conn, n } => {
                let wire = self.wires.entry(u64::from(conn % CONNS)).or_default();
                for _ in 0..n {
                    let Some(len) = wire.frames.pop_front() else {
                        break;
                    };
                    wire.bytes -= len;
                }
            }
        }
    }

    fn close_now(&mut self, conn: u64) {
        let m = &mut self.m;
        let id = m.id();
        m.drop_conn(conn);
        m.queue.push_front(Pending {
            id,
            lane: None,
            waits_for: 0,
            kind: Kind::Close { conn },
        });
        self.out.close_now(ConnId(conn), 4001, id.to_string());
    }

    /// Take one output and check it; whether there was one.
    fn poll_one(&mut self) -> bool {
        let Some(output) = self.out.poll() else {
            self.check_nothing_may_leave();
            return false;
        };
        let m = &mut self.m;
        if let Some(first) = m.resolutions.pop_front() {
            assert_eq!(
                output,
                Output::Effect(Effect::ResolvePath {
                    request: first,
                    path: format!("/w/{first}")
                }),
                "path resolutions leave first, in the order asked"
            );
            return true;
        }
        let (at, seq) = match &output {
            Output::Send { conn, frame } => {
                let id = id_of_frame(frame);
                let at = find(m, |p| {
                    p.id == id && matches!(&p.kind, Kind::Send { conn: c, .. } if *c == conn.0)
                });
                let Kind::Send { frame: sent, .. } = &m.queue[at].kind else {
                    unreachable!()
                };
                assert!(sent == frame, "frame {id} left changed or cut");
                (at, None)
            }
            Output::Ping { conn } => (find(m, |p| p.kind == Kind::Ping { conn: conn.0 }), None),
            Output::Close { conn, reason, .. } => {
                let id: u64 = reason.parse().expect("the driver's closes name an id");
                (
                    find(m, |p| p.id == id && p.kind == Kind::Close { conn: conn.0 }),
                    None,
                )
            }
            Output::Effect(Effect::Stop { message }) => {
                let id: u64 = message.parse().expect("the driver's effects name an id");
                (find(m, |p| p.id == id && p.kind == Kind::Effect), None)
            }
            Output::Engine(EngineCommand::Cancel { turn_id, .. }) => {
                let id: u64 = turn_id.parse().expect("the driver's commands name an id");
                (find(m, |p| p.id == id && p.kind == Kind::Engine), None)
            }
            Output::Effect(Effect::Persist { seq, records }) => {
                let id = id_of_records(records);
                (find(m, |p| p.id == id), Some(*seq))
            }
            other => panic!("an output the driver never queued: {other:?}"),
        };
        assert!(
            m.may_leave(at),
            "{output:?} left while it may not: {:?} (acknowledged up to {}), queued before it: {:?}",
            m.queue[at],
            m.acked,
            m.queue.range(..at).collect::<Vec<_>>()
        );
        let left = m.queue.remove(at).expect("found above");
        if let Some(seq) = seq {
            assert_eq!(
                seq,
                m.handed + 1,
                "persists leave in number order, each numbered once"
            );
            match left.kind {
                Kind::Persist { seq: numbered } => assert_eq!(seq, numbered),
                Kind::PersistAfter => {
                    // Numbered now: a lane-less persist, which everything queued from here
                    // waits for.
                    assert_eq!(m.number(None, false), seq);
                }
                other => panic!("records left as a persist but were queued as {other:?}"),
            }
            m.handed = seq;
        }
        if let Output::Send { conn, frame } = output {
            self.onto_wire(conn.0, frame.len());
        }
        true
    }

    /// A frame on its connection's wire, under the backlog's bound: over it, the connection
    /// closes as a dead link does (its queued outputs dropped).
    fn onto_wire(&mut self, conn: u64, len: usize) {
        let wire = self.wires.entry(conn).or_default();
        match Overflow::check(wire.bytes, len, self.max_bytes) {
            Ok(()) => {
                wire.frames.push_back(len);
                wire.bytes += len;
            }
            Err(over) => {
                assert!(over.queued > over.max && wire.bytes > 0);
                *wire = Wire::default();
                self.close_now(conn);
            }
        }
    }

    fn check_nothing_may_leave(&self) {
        let m = &self.m;
        assert!(m.resolutions.is_empty(), "a path resolution was kept back");
        for at in 0..m.queue.len() {
            assert!(
                !m.may_leave(at),
                "poll gave nothing, but {:?} may leave (acknowledged up to {}); queued: {:?}",
                m.queue[at],
                m.acked,
                m.queue
            );
        }
    }

    fn check(&self) {
        let m = &self.m;
        let empty = m.queue.is_empty() && m.resolutions.is_empty() && m.acked >= m.issued;
        assert_eq!(
            self.out.is_empty(),
            empty,
            "is_empty: queued {:?}, resolutions {:?}, {} of {} persists acknowledged",
            m.queue,
            m.resolutions,
            m.acked,
            m.issued
        );
        let open = (m.issued - m.acked) as usize;
        assert!(
            self.out.lanes_tracked() <= open,
            "{} lanes tracked for {open} unacknowledged persists",
            self.out.lanes_tracked()
        );
        for (conn, wire) in &self.wires {
            assert!(
                wire.bytes <= self.max_bytes || wire.frames.len() == 1,
                "connection {conn}'s wire holds {} bytes in {} frames, over {}",
                wire.bytes,
                wire.frames.len(),
                self.max_bytes
            );
            // What the drivers' sources go by; here only its agreement with the bytes held.
            assert_eq!(
                backlog::is_behind(wire.bytes, self.pause_bytes),
                wire.bytes >= self.pause_bytes
            );
        }
    }

    /// Hand over and acknowledge everything: every output queued leaves.
    fn finish(mut self) {
        for _ in 0..=self.m.next_id {
            while self.poll_one() {}
            self.check();
            if self.m.acked == self.m.issued && self.m.queue.is_empty() {
                break;
            }
            self.m.acked = self.m.handed;
            self.out.acked(self.m.handed);
        }
        assert!(
            self.m.queue.is_empty() && self.m.resolutions.is_empty(),
            "with every persist acknowledged, outputs never left: {:?}",
            self.m.queue
        );
        assert!(self.out.is_empty(), "drained, yet the outbox is not empty");
    }
}

/// A frame: its id, then `len` bytes.
fn frame(id: u64, len: u8) -> Vec<u8> {
    let mut f = format!("{id:0ID_DIGITS$}").into_bytes();
    f.extend(std::iter::repeat_n(b'x', usize::from(len)));
    f
}

/// Where the pending output `matches` is: it must be queued (not lost, not left before).
fn find(m: &Model, matches: impl Fn(&Pending) -> bool) -> usize {
    m.queue
        .iter()
        .position(matches)
        .unwrap_or_else(|| panic!("an output left that was not queued (twice, or dropped)"))
}
