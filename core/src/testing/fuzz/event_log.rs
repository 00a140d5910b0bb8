//! The `event_log` driver: one session's event log ([`EventLog`], with the seq-taking and
//! sealing of its [`Session`]) alone, driven by events sent, the shell writing persists (or
//! not yet), seals at a turn's end, the session set aside and read back, restarts with some
//! writes lost, and clients asking for pages, against a model of what a client may be told.
//! The shell it plays keeps a store of the records written and reads the log back from it as
//! the device's restore does.
//!
//! The promises checked after every operation:
//! - seqs strictly increase, across seals, settings aside and restarts (whatever reached the
//!   store);
//! - a page from a `since` a client can hold (0, a seq sent, a page's `next`) returns exactly
//!   the events the model keeps after `since`, oldest first, within the page's count and byte
//!   bounds, with their params as sent; `truncated` iff the log no longer reaches back (an
//!   event after `since` was given up, or a restart cut a turn whose events were never
//!   written); a truncated page's events are still genuine; a `since` never sent is truncated;
//! - what is kept of a log set aside (`at_rest`) answers a page as the log did when it was
//!   set aside (the log read back may say `truncated` where it did not: below);
//! - the log stays within `event_log_events` and `event_log_bytes`, and the store within
//!   twice the count (blocks wholly given up are deleted);
//! - no panic.
//!
//! One imprecision the model allows, since the store does not say it: a log read back vouches
//! from its first event on (or, with none, from its seal's next seq), so a `since` from before
//! a gap between two starts, or before a start that sent nothing, is told `truncated` though
//! nothing after it was lost.

use std::collections::{BTreeMap, VecDeque};

use arbitrary::Arbitrary;

use crate::config::SessionLimits;
use crate::device::chunk_params::written;
use crate::device::event_block::read_block;
use crate::device::event_log::{seq_base, EventLog, Logged, Page, ENTRY_OVERHEAD};
use crate::device::outbox::{Lane, Outbox};
use crate::device::sessions::Session;
use crate::device::{Effect, Output};
use crate::store::{events_key, session_prefix, Record, SessionRecord, Table};

/// At most this many operations are read from one input.
const MAX_LOG_OPS: usize = 512;

const SESSION: &str = "ses_log";

/// The methods an event is sent with (those the log keeps).
const METHODS: [Logged; 3] = [Logged::Update, Logged::Event, Logged::Plan];

#[derive(Arbitrary, Debug)]
enum Op {
    /// An event about the session is sent, its params `len` bytes past the seq.
    Event { method: u8, len: u8 },
    /// A text chunk is streamed: its update and its event, `len` bytes of text (with a quote
    /// to escape, if `quote`), kept as one text.
    Chunk { len: u8, quote: bool },
    /// The shell writes the next `n` persists durably.
    Write { n: u8 },
    /// The session's turn ended: its log is sealed in the store (a quiet persist).
    Seal,
    /// The session leaves memory (sealed, written) and is read back in the same start.
    SetAside,
    /// The device restarts: `durable` more of the persists asked for reached the store.
    Restart { durable: u8 },
    /// A client asks for the events after `since`.
    Page {
        since: Since,
        limit: u8,
        max_bytes: u16,
    },
}

/// The `since` a client asks from.
#[derive(Arbitrary, Debug)]
enum Since {
    Zero,
    /// A seq sent (the `pick`-th of those the model knows).
    Sent(u8),
    /// The `next` of a page at the end of a start: the seq before its base.
    StartOf(u8),
    /// The last seq sent.
    Latest,
    /// A seq never sent.
    Beyond(u8),
}

/// What the store had of the log at a seal: it is what a read back finds.
#[derive(Clone, Debug)]
struct Sealed {
    kept: VecDeque<Event>,
    /// The seq the next event gets.
    next: u64,
    /// Every event sent with a seq above this is in `kept`.
    floor: u64,
}

#[derive(Clone, Debug, PartialEq)]
struct Event {
    seq: u64,
    method: &'static str,
    params: String,
}

impl Event {
    fn cost(&self) -> usize {
        self.params.len() + self.method.len() + ENTRY_OVERHEAD
    }
}

/// What a persist asked of the shell does to the log in the store.
#[derive(Debug)]
enum Mark {
    /// The record says the log is unsealed: events after it may be sent.
    Unseal,
    Seal(Sealed),
    /// Deletes of blocks given up.
    Other,
}

/// What the model expects.
#[derive(Debug)]
struct Model {
    /// The events the log must give, oldest first: the newest within the bounds.
    kept: VecDeque<Event>,
    /// Every event sent with a seq above this is in `kept`.
    floor: u64,
    /// The last seq taken (or the one before this start's first).
    latest: u64,
    /// The highest seq ever taken, across restarts.
    highest: u64,
    /// Every event ever taken, by seq: a truncated page's events must be among them.
    taken: BTreeMap<u64, Event>,
    /// Seqs sent (or a start's last), which clients may ask from.
    sinces: Vec<u64>,
    /// Persists asked of the shell and not written yet, in number order, with what they do.
    unwritten: VecDeque<(u64, Vec<Record>, Mark)>,
    /// What the store says of the log: sealed (with what it holds) or not.
    stored: Option<Sealed>,
    /// Whether the log in memory is sealed: every event taken is written, and the store says
    /// which seq comes next.
    sealed: bool,
    epoch: u64,
}

struct Driver {
    session: Session,
    out: Outbox,
    limits: SessionLimits,
    /// The store's blocks of the log, by key, and the session's record.
    blocks: BTreeMap<String, String>,
    record: SessionRecord,
    m: Model,
}

/// Drive one session's [`EventLog`] through operations read from `data`; panics on a broken
/// promise.
pub fn event_log(data: &[u8]) {
    let Some(((events, bytes), ops)) = super::read_input::<(u8, u16), Op>(data, MAX_LOG_OPS) else {
        return;
    };
    // Small bounds, so giving up is common: an event costs 70 to 350 bytes.
    let limits = SessionLimits {
        event_log_events: 1 + usize::from(events % 16),
        event_log_bytes: 64 + usize::from(bytes % 4096),
        ..SessionLimits::default()
    };
    let mut record = SessionRecord::testing(SESSION);
    record.seq_next = seq_base(0);
    let mut session = Session::new(record.clone(), 10);
    session.durable.seq_next = seq_base(0);
    let mut d = Driver {
        session,
        out: Outbox::default(),
        limits,
        blocks: BTreeMap::new(),
        record,
        m: Model {
            kept: VecDeque::new(),
            floor: 0,
            latest: 0,
            highest: 0,
            taken: BTreeMap::new(),
            sinces: vec![0],
            unwritten: VecDeque::new(),
            stored: Some(Sealed {
                kept: VecDeque::new(),
                next: seq_base(0),
                floor: 0,
            }),
            epoch: 0,
            sealed: true,
        },
    };
    for op in ops {
        d.step(op);
        d.check();
    }
}

/// The bounds and operations [`event_log`] reads from `data`, one a line: to read a failing
/// input.
pub fn event_log_script(data: &[u8]) -> String {
    super::script::<(u8, u16), Op>(data, MAX_LOG_OPS, "bounds")
}

impl Driver {
    fn step(&mut self, op: Op) {
        match op {
            Op::Event { method, len } => self.event(method, len),
            Op::Chunk { len, quote } => self.chunk(len, quote),
            Op::Write { n } => {
                for _ in 0..n {
                    if !self.write_one() {
                        break;
                    }
                }
            }
            Op::Seal => {
                self.m.sealed = true;
                let records = self.session.seal_records();
                if !records.is_empty() {
                    self.out.persist_quiet(records);
                    self.take_persists(Mark::Seal(self.m.sealed()));
                }
            }
            Op::SetAside => {
                // What is kept of it while it is out, and what the log answered as it left.
                let rest = self.session.events.at_rest();
                let answered: Vec<(u64, Option<Flat>)> = self
                    .probes()
                    .into_iter()
                    .chain([self.m.latest + 1])
                    .map(|since| {
                        let page = self.session.events.page(since, usize::MAX, usize::MAX);
                        (since, rest.answers(since).then(|| flat(&page)))
                    })
                    .collect();
                for (since, page) in &answered {
                    assert_eq!(
                        rest.page(*since).map(|p| flat(&p)),
                        page.clone(),
                        "what is kept at rest answers from {since} as the log does"
                    );
                }
                let records = self.session.seal_records();
                if !records.is_empty() {
                    self.out.persist(records);
                    self.take_persists(Mark::Seal(self.m.sealed()));
                }
                // The read back comes after every write asked before it.
                while self.write_one() {}
                // Its log alone, read from the store's blocks (events_read.rs), pages as the
                // session read back from the store does (what answered such a page before).
                let blocks = self
                    .blocks
                    .iter()
                    .map(|(key, b)| {
                        let first = crate::store::event_block_first(key).expect("a block's key");
                        (
                            first,
                            read_block(b, SESSION).expect("a block the log wrote"),
                        )
                    })
                    .collect();
                let alone = EventLog::read_back(SESSION, blocks, rest, &self.limits);
                self.read_back(self.m.epoch);
                for since in self.probes().into_iter().chain([self.m.latest + 1]) {
                    for limit in [1, 2, usize::MAX] {
                        assert_eq!(
                            flat(&alone.page(since, limit, usize::MAX)),
                            flat(&self.session.events.page(since, limit, usize::MAX)),
                            "the log read alone pages from {since}, {limit} at most, as read back"
                        );
                    }
                }
                let stored: usize = self
                    .blocks
                    .values()
                    .map(|b| read_block(b, SESSION).expect("a block the log wrote").len())
                    .sum();
                assert!(
                    stored <= 2 * self.limits.event_log_events,
                    "{stored} events in the store for a log of at most {}",
                    self.limits.event_log_events
                );
            }
            Op::Restart { durable } => {
                for _ in 0..durable {
                    if !self.write_one() {
                        break;
                    }
                }
                // The rest never reached the store.
                self.m.unwritten.clear();
                self.out = Outbox::default();
                self.m.epoch += 1;
                self.read_back(self.m.epoch);
            }
            Op::Page {
                since,
                limit,
                max_bytes,
            } => {
                let since = self.since(since);
                let limit = 1 + usize::from(limit % 20);
                self.check_page(since, limit, usize::from(max_bytes));
            }
        }
    }

    /// The seq the next event is sent with.
    fn take(&mut self) -> u64 {
        let asked = self.m.unwritten.len();
        let seq = self.session.take_seq(&mut self.out, Lane::of(SESSION));
        self.take_persists(Mark::Unseal);
        let m = &mut self.m;
        // The first event after a seal unseals the log in the store (the event's frame waits
        // for that write); after it nothing is written per event.
        assert_eq!(
            m.unwritten.len() > asked,
            m.sealed,
            "event {seq}: the log is unsealed in the store exactly when it was sealed"
        );
        m.sealed = false;
        assert!(
            seq > m.highest,
            "seq {seq} taken after {}: seqs strictly increase",
            m.highest
        );
        m.highest = seq;
        m.latest = seq;
        seq
    }

    /// What the model keeps of an event sent.
    fn sent(&mut self, event: Event) {
        let m = &mut self.m;
        m.taken.insert(event.seq, event.clone());
        m.sinces.push(event.seq);
        m.kept.push_back(event);
        // The newest events within both bounds; the oldest give way.
        while m.kept.len() > self.limits.event_log_events
            || m.kept.iter().map(Event::cost).sum::<usize>() > self.limits.event_log_bytes
        {
            let old = m.kept.pop_front().expect("over a bound, so not empty");
            m.floor = m.floor.max(old.seq);
        }
    }

    fn event(&mut self, method: u8, len: u8) {
        let seq = self.take();
        let method = METHODS[usize::from(method) % METHODS.len()];
        let params = format!(r#"{{"seq":{seq},"p":"{}"}}"#, "x".repeat(usize::from(len)));
        let event = Event {
            seq,
            method: method.name(),
            params,
        };
        self.session
            .events
            .push(seq, method, &event.params, &self.limits);
        self.sent(event);
    }

    /// A chunk's two events, as the device's hot path sends and keeps them.
    fn chunk(&mut self, len: u8, quote: bool) {
        let seq = self.take();
        self.take();
        let mut text = "x".repeat(usize::from(len));
        if quote {
            text.push('"');
        }
        let (mut update, mut event) = (String::new(), String::new());
        let bufs = (&mut update, &mut event);
        let chunk = written(bufs, SESSION, seq, ("agent_message_chunk", "text"), &text);
        let sent = chunk.events().map(|(method, e)| Event {
            seq: e.seq,
            method: method.name(),
            params: e.params.to_owned(),
        });
        self.session.events.push_chunk(chunk, &self.limits);
        for event in sent {
            self.sent(event);
        }
    }

    /// The persists the last call asked for, each with what it does.
    fn take_persists(&mut self, mut mark: Mark) {
        while let Some(output) = self.out.poll() {
            match output {
                Output::Effect(Effect::Persist { seq, records }) => {
                    let this = std::mem::replace(&mut mark, Mark::Other);
                    self.m.unwritten.push_back((seq, records, this));
                }
                other => panic!("the log asked for {other:?}"),
            }
        }
    }

    /// The shell writes the next persist; whether there was one.
    fn write_one(&mut self) -> bool {
        let Some((seq, records, mark)) = self.m.unwritten.pop_front() else {
            return false;
        };
        for r in records {
            match r {
                Record::Put {
                    table: Table::Events,
                    key,
                    value,
                } => {
                    self.blocks.insert(key, value);
                }
                Record::Delete {
                    table: Table::Events,
                    key,
                } => {
                    self.blocks.remove(&key);
                }
                Record::Put {
                    table: Table::Sessions,
                    key,
                    value,
                } => {
                    assert_eq!(key, SESSION);
                    self.record = serde_json::from_str(&value).expect("a session record");
                }
                other => panic!("the log wrote {other:?}"),
            }
        }
        match mark {
            Mark::Unseal => self.m.stored = None,
            Mark::Seal(sealed) => self.m.stored = Some(sealed),
            Mark::Other => {}
        }
        self.out.acked(seq);
        true
    }

    /// The session read back from the store in start `epoch`, as the device's restore does.
    fn read_back(&mut self, epoch: u64) {
        let prefix = session_prefix(SESSION);
        let blocks: Vec<(u64, _)> = self
            .blocks
            .iter()
            .map(|(key, value)| {
                let first = key
                    .strip_prefix(&prefix)
                    .and_then(|f| f.parse().ok())
                    .expect("a block's key is `<session>/<first seq>`");
                assert_eq!(key, &events_key(SESSION, first));
                (
                    first,
                    read_block(value, SESSION).expect("a block the log wrote"),
                )
            })
            .collect();
        let base = seq_base(epoch);
        let mut records = Vec::new();
        let mut session = Session::new(self.record.clone(), 10);
        session.restore_events(blocks, base, &self.limits, &mut records);
        self.session = session;
        if !records.is_empty() {
            self.out.persist(records);
            self.take_persists(Mark::Other);
        }
        let m = &mut self.m;
        m.sealed = m.stored.is_some();
        match m.stored.clone() {
            Some(sealed) => {
                // What was taken after the seal was never sent (its unsealing never reached
                // the store, and every frame of the session waited for it).
                m.kept = sealed.kept;
                m.latest = sealed.next.max(base) - 1;
                // The store says how far back the log reached: a `since` in a gap between two
                // starts (or before a start that sent nothing) missed nothing.
                m.floor = sealed.floor;
                m.sinces.retain(|s| *s < sealed.next);
            }
            None => {
                // A turn was cut: what it sent may never have been written.
                m.kept.clear();
                m.latest = base - 1;
                m.floor = base - 1;
            }
        }
        m.sinces.push(base - 1);
    }

    fn since(&self, since: Since) -> u64 {
        let m = &self.m;
        let pick = |i: u8| m.sinces[usize::from(i) % m.sinces.len()];
        match since {
            Since::Zero => 0,
            Since::Sent(i) => pick(i),
            Since::StartOf(e) => seq_base(u64::from(e) % (m.epoch + 1)) - 1,
            Since::Latest => m.latest,
            Since::Beyond(n) => m.latest + 1 + u64::from(n),
        }
    }

    /// The `since`s checked after every operation: 0, this start's, every tenth seq sent, the
    /// latest.
    fn probes(&self) -> Vec<u64> {
        let m = &self.m;
        let mut probes: Vec<u64> = m.sinces.iter().step_by(10).copied().collect();
        probes.extend([0, m.latest, seq_base(m.epoch) - 1]);
        probes.extend(m.kept.front().map(|e| e.seq));
        probes
    }

    fn check_page(&self, since: u64, limit: usize, max_bytes: usize) {
        let m = &self.m;
        let page = self.session.events.page(since, limit, max_bytes);
        assert!(page.events.len() <= limit, "a page of more than {limit}");
        if since > m.latest {
            assert!(
                page.events.is_empty() && page.truncated && page.next == m.latest,
                "from {since}, never sent: {page:?}"
            );
            return;
        }
        let truncated = since < m.floor;
        assert_eq!(
            page.truncated,
            truncated,
            "from {since}: the log reaches back to {} (model), kept {:?}",
            m.floor,
            m.kept.iter().map(|e| e.seq).collect::<Vec<_>>()
        );
        let (got, _, _) = flat(&page);
        if truncated {
            let mut last = since;
            for e in &got {
                assert!(e.seq > last, "a truncated page's events go upwards");
                last = e.seq;
                assert_eq!(Some(e), m.taken.get(&e.seq), "an event the log never had");
            }
            return;
        }
        let mut bytes = 0;
        let expected: Vec<Event> = m
            .kept
            .iter()
            .filter(|e| e.seq > since)
            .take(limit)
            .take_while(|e| {
                bytes += e.cost();
                bytes <= max_bytes || bytes == e.cost()
            })
            .cloned()
            .collect();
        assert_eq!(got, expected, "the page from {since}");
        assert_eq!(
            page.next,
            expected.last().map_or(m.latest, |e| e.seq),
            "the page's next"
        );
    }

    fn check(&self) {
        let all = self.session.events.page(0, usize::MAX, usize::MAX);
        assert!(all.events.len() <= self.limits.event_log_events);
        let bytes: usize = all
            .events
            .iter()
            .map(|e| e.params.len() + e.method.len() + ENTRY_OVERHEAD)
            .sum();
        assert!(
            bytes <= self.limits.event_log_bytes,
            "the log holds {bytes} bytes, over {}",
            self.limits.event_log_bytes
        );
        for since in self.probes() {
            self.check_page(since, usize::MAX, usize::MAX);
        }
    }
}

impl Model {
    /// What a seal asked for now writes.
    fn sealed(&self) -> Sealed {
        Sealed {
            kept: self.kept.clone(),
            next: self.latest + 1,
            floor: self.floor,
        }
    }
}

/// A page as plain values: its events, `next` and `truncated`.
type Flat = (Vec<Event>, u64, bool);

fn flat(page: &Page<'_>) -> Flat {
    let events = page
        .events
        .iter()
        .map(|e| Event {
            seq: e.seq,
            method: e.method,
            params: e.params.to_string(),
        })
        .collect();
    (events, page.next, page.truncated)
}
