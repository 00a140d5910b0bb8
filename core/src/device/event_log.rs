//! Each session's event log (our extension, issue 16; capability `events`). Every event the
//! device sends about a session (`session/update`, `_lembas/event`, a card, a settled notice)
//! carries the session's next sequence number in `_meta.lembas.seq`, and the session keeps its
//! recent events, the params as sent with their seq, bounded by `sessions.event_log_bytes` and
//! `sessions.event_log_events`: the oldest give way. A client that missed some (its link was
//! cut) asks `_lembas/session/events` (session_events.rs) for those after the last seq it saw;
//! `truncated` says the log no longer reaches back that far (the client imports `history`
//! instead).
//!
//! The log is held within its bounds in memory (so its cost does not grow with the session's
//! age: its params share one byte buffer, at most twice the bound, so an event costs no
//! allocation of its own; a text chunk's two events keep its quoted text once, their params
//! written again from it by chunk_params.rs when a page or a block asks, byte for byte as
//! sent) and written to the store (`Table::Events`) in one block when the session goes idle
//! (its turn ended; in a commit after the one its answer waits for) and when it is set aside:
//! never a write per chunk, and no frame waits for a block (an answer reads memory). A session
//! read back, or a restarted device, reads the blocks again (a chunk's text kept once again,
//! its params checked to be what its writer writes): event_block.rs is their form.
//!
//! Seqs are never reused, and nothing mid-turn waits for a write to make sure of it: a start
//! of the device counts its session's seqs from its own base, [`SEQ_EPOCH_BITS`] bits above the
//! last start's (the device's start number, durable before anything it sends). A written log
//! is *sealed* (log_seal.rs: when, and the record that says so): the session's record says its
//! exact next seq (`seq_next`); the first event after that unseals it (`seq_next: 0`, written
//! before that event leaves: at a turn's start, with the turn's own record). A restarted device
//! vouches for a sealed log, and for nothing before its restart of an unsealed one (its turn
//! was cut: what it sent may not have been written): a client asking from there is told
//! `truncated`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::ops::Range;

use super::chunk_params::{event_params, push_u64, update_params, LoggedChunk, Text};
use super::coalesce::{MERGED_EVENTS, MERGED_UPDATES};
use super::event_block::{as_chunk, write_chunk_json, write_run_json};
use crate::config::SessionLimits;
use crate::store::{self, Record, Table};
use crate::wire::event::card::{PERMISSION, PLAN, QUESTION};
use crate::wire::event::notice;

/// A start's seqs begin at its start number shifted by this: a session may send 2^32 events
/// in one run of the device, and 2^21 starts keep every seq within JSON's exact integers.
pub(crate) const SEQ_EPOCH_BITS: u32 = 32;

/// The first seq of a start numbered `epoch`.
pub(crate) fn seq_base(epoch: u64) -> u64 {
    (epoch << SEQ_EPOCH_BITS) | 1
}

/// The greatest seq the store may say (a block's event, a record's `seq_next`); one past it
/// is damage and is not read (event_block.rs, restore.rs). A device that sent it would have
/// started 2^31 times: and a log counting on from it has 2^63 seqs to go before u64 ends, so
/// no seq is ever handed out twice.
pub(crate) const SEQ_MAX: u64 = u64::MAX / 2;

/// What an entry costs besides its params (its seq, method and framing), so a flood of tiny
/// events is bounded by bytes too.
pub(crate) const ENTRY_OVERHEAD: usize = 48;

/// A method a log entry may name (read back from the store as these): a byte in an entry,
/// where a `&str` took 16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Logged {
    Update,
    Event,
    Permission,
    Question,
    Plan,
    Settled,
}

impl Logged {
    const ALL: [Logged; 6] = [
        Logged::Update,
        Logged::Event,
        Logged::Permission,
        Logged::Question,
        Logged::Plan,
        Logged::Settled,
    ];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            Logged::Update => "session/update",
            Logged::Event => "_lembas/event",
            Logged::Permission => PERMISSION,
            Logged::Question => QUESTION,
            Logged::Plan => PLAN,
            Logged::Settled => notice::SETTLED,
        }
    }

    pub(super) fn named(method: &str) -> Option<Logged> {
        Logged::ALL.into_iter().find(|m| m.name() == method)
    }

    /// The writer of a text chunk's params sent with this method (none for a method that
    /// carries no chunks): what sent them, and what writes them again from their text.
    pub(super) fn chunk_writer(self) -> Option<ChunkWriter> {
        match self {
            Logged::Update => Some(update_params),
            Logged::Event => Some(event_params),
            _ => None,
        }
    }

    /// The kinds of text chunk an event of this method may carry (an entry names its kind by
    /// its index here).
    pub(super) fn chunk_kinds(self) -> &'static [&'static str] {
        match self {
            Logged::Update => &MERGED_UPDATES,
            Logged::Event => &MERGED_EVENTS,
            _ => &[],
        }
    }
}

/// Writes a chunk's params (session, seq, kind, text) into a cleared buffer; where the quoted
/// text lies in them.
pub(super) type ChunkWriter = fn(&mut String, &str, u64, &str, Text<'_>) -> Range<usize>;

/// One event as it was sent, owned: as the store's blocks hold it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LoggedEvent {
    pub seq: u64,
    pub method: Logged,
    /// The params, JSON, exactly as sent.
    pub params: String,
}

/// One event of the log, borrowed from it (a chunk's params written again from its text).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EventView<'a> {
    pub seq: u64,
    pub method: &'static str,
    pub params: Cow<'a, str>,
}

impl EventView<'_> {
    fn cost(&self) -> usize {
        cost(self.method, self.params.len())
    }

    /// `{"method":..,"params":..,"seq":..}`, keys sorted like a `Value`'s.
    fn write_json(&self, out: &mut String) {
        // Methods are literals with nothing to escape; params are JSON already.
        out.push_str(r#"{"method":""#);
        out.push_str(self.method);
        out.push_str(r#"","params":"#);
        out.push_str(&self.params);
        out.push_str(r#","seq":"#);
        push_u64(out, self.seq);
        out.push('}');
    }
}

/// About what an entry takes in a stored block, so a block's buffer is sized once: a chunk as
/// most are written, one of a run (its text and a comma; a run's header and a lone chunk's
/// seqs and kinds are left to the buffer's growth, where 48 bytes an event reserved over twice
/// what 100 sessions' runs took).
fn stored_len(e: &Entry) -> usize {
    let len = e.len as usize;
    match e.chunk {
        Some(_) => len + 1,
        None => len + e.method.name().len() + 40,
    }
}

fn cost(method: &str, params: usize) -> usize {
    params + method.len() + ENTRY_OVERHEAD
}

/// One answer of `_lembas/session/events`.
#[derive(Debug, PartialEq)]
pub(crate) struct Page<'a> {
    pub events: Vec<EventView<'a>>,
    pub next: u64,
    pub truncated: bool,
}

impl Page<'_> {
    /// `{"events":[...],"next":..,"truncated":..}`.
    pub(super) fn to_json(&self) -> String {
        let bytes: usize = self.events.iter().map(EventView::cost).sum();
        let mut out = String::with_capacity(bytes + 64);
        out.push_str(r#"{"events":["#);
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            e.write_json(&mut out);
        }
        out.push_str(r#"],"next":"#);
        push_u64(&mut out, self.next);
        out.push_str(if self.truncated {
            r#","truncated":true}"#
        } else {
            r#","truncated":false}"#
        });
        out
    }
}

/// An entry: its seq and method, and where its bytes lie in the log's: its params, or a text
/// chunk's quoted text alone (`chunk`: its `sessionUpdate` or event `type`, by its index in
/// [`Logged::chunk_kinds`]). A text chunk's update and its event (the next seq) are one entry
/// (`paired`), as they share its text. 100 sessions streaming at once kept 100 logs of both
/// params whole, and their chunks cost half as much again as one session's in cache misses;
/// then the entries, at 64 bytes, took more of a log than the text did, so they are 32
/// (lengths within u32: a longer event is never kept, see [`EventLog::append`]); then, at two
/// a chunk, they still wrote as much a chunk as its text did, so a chunk is one.
#[derive(Debug)]
struct Entry {
    seq: u64,
    /// Offset since the log began (the buffer's front moves as old bytes give way).
    at: u64,
    len: u32,
    /// Its params' length as sent: what the bounds count.
    params_len: u32,
    method: Logged,
    chunk: Option<u8>,
    /// The chunk's event, sent with the next seq: its params' length as sent (never 0: they
    /// are an object) and its `type` (by its index in [`Logged::Event`]'s kinds). Two fields,
    /// not an `Option` of both, to stay within 32 bytes.
    paired: Option<NonZeroU32>,
    paired_kind: u8,
}

/// One event of an entry (a paired entry holds two).
#[derive(Clone, Copy)]
struct Held {
    seq: u64,
    method: Logged,
    chunk: Option<u8>,
    params_len: u32,
}

impl Held {
    fn chunk(&self) -> Option<&'static str> {
        self.chunk
            .map(|k| self.method.chunk_kinds()[usize::from(k)])
    }

    fn cost(&self) -> usize {
        cost(self.method.name(), self.params_len as usize)
    }
}

impl Entry {
    /// Its events, in the order sent.
    fn held(&self) -> impl DoubleEndedIterator<Item = Held> + '_ {
        let first = Held {
            seq: self.seq,
            method: self.method,
            chunk: self.chunk,
            params_len: self.params_len,
        };
        let second = self.paired.map(|params_len| Held {
            seq: self.seq + 1,
            method: Logged::Event,
            chunk: Some(self.paired_kind),
            params_len: params_len.get(),
        });
        std::iter::once(first).chain(second)
    }

    fn events(&self) -> usize {
        1 + usize::from(self.paired.is_some())
    }

    /// The seq of its last event.
    fn last_seq(&self) -> u64 {
        self.seq + u64::from(self.paired.is_some())
    }

    /// What its events cost the bounds.
    fn cost(&self) -> usize {
        self.held().map(|h| h.cost()).sum()
    }

    /// A text chunk's kinds: its update's `sessionUpdate` and its event's `type`, each if it
    /// holds it (none for an entry that is not a chunk).
    fn chunk_kinds(&self) -> Option<(Option<&'static str>, Option<&'static str>)> {
        let mut held = self.held();
        let first = held.next().expect("an entry holds an event");
        let kind = first.chunk()?;
        Some(match first.method {
            Logged::Update => (Some(kind), held.next().and_then(|h| h.chunk())),
            _ => (None, Some(kind)),
        })
    }
}

/// The params of the log's entries, back to back: appended at the end, given up at the front.
/// The given-up front is dropped once it is as large as what is live, so the buffer holds at
/// most twice its live bytes and a move costs, spread over the appends, a copy of each byte.
#[derive(Debug, Default)]
struct ParamBytes {
    buf: String,
    /// The offset of `buf`'s first byte.
    base: u64,
    /// The offset of the first live byte.
    live: u64,
}

impl ParamBytes {
    fn push(&mut self, params: &str) -> u64 {
        let at = self.base + self.buf.len() as u64;
        self.buf.push_str(params);
        crate::prefetch::next_append(&self.buf);
        at
    }

    /// The offset the next byte gets.
    fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    fn get(&self, at: u64, len: u32) -> &str {
        let start = (at - self.base) as usize;
        &self.buf[start..start + len as usize]
    }

    /// Everything before `to` is no longer needed.
    fn give_up_to(&mut self, to: u64) {
        self.live = self.live.max(to);
        let dead = (self.live - self.base) as usize;
        if dead > 0 && dead >= self.buf.len() - dead {
            self.buf.drain(..dead);
            self.base = self.live;
        }
    }
}

/// A session's recent events, oldest first, and what of them the store has.
#[derive(Debug)]
pub(crate) struct EventLog {
    entries: VecDeque<Entry>,
    /// The events `entries` hold (a paired entry holds two): what the count bound counts.
    events: usize,
    params: ParamBytes,
    /// What `entries` cost (their params, methods and [`ENTRY_OVERHEAD`] each).
    bytes: usize,
    /// The seq the next event gets.
    next_seq: u64,
    /// Every event sent with a seq above this is in `entries`: the log reaches back to here.
    floor: u64,
    /// How many of the last entries the store does not have yet, and their params' bytes.
    unflushed: usize,
    unflushed_bytes: usize,
    /// The blocks in the store, oldest first: (first seq, last seq).
    blocks: VecDeque<(u64, u64)>,
    /// The store has every event sent (the record's `seq_next` says where the next begins).
    sealed: bool,
    /// The session its chunks' params name.
    session: String,
    /// Idle with events the store lacks: the persist its seal waits to be written after (its
    /// turn's end), taken when it was first found idle (log_seal.rs).
    pub(super) seal_after: Option<u64>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            entries: VecDeque::new(),
            events: 0,
            params: ParamBytes::default(),
            bytes: 0,
            next_seq: 1,
            floor: 0,
            unflushed: 0,
            unflushed_bytes: 0,
            blocks: VecDeque::new(),
            sealed: true,
            seal_after: None,
            session: String::new(),
        }
    }
}

impl EventLog {
    /// An empty, sealed log of `session` whose first event gets `base`.
    pub fn new(session: &str, base: u64) -> EventLog {
        EventLog {
            next_seq: base,
            floor: base - 1,
            session: session.to_owned(),
            ..EventLog::default()
        }
    }

    /// A log read back from the store: `blocks` (first seq, events), `seq_next` and `floor` the
    /// record's (`seq_next` 0: unsealed), `base` this start's first seq; trimmed to `limits`.
    /// Blocks left wholly outside are deleted (`records`).
    pub fn restore(
        session: &str,
        mut blocks: Vec<(u64, Vec<LoggedEvent>)>,
        (seq_next, floor): (u64, Option<u64>),
        base: u64,
        limits: &SessionLimits,
        records: &mut Vec<Record>,
    ) -> EventLog {
        blocks.sort_by_key(|(first, _)| *first);
        let mut log = EventLog::new(session, 1);
        for (first, events) in blocks {
            let last = events.last().map_or(first, |e| e.seq);
            log.blocks.push_back((first, last));
            for e in events {
                // Only ever increasing: a block that overlaps an earlier one adds nothing twice.
                if log.entries.back().is_none_or(|b| e.seq > b.last_seq()) {
                    log.append_read(e.seq, e.method, &e.params);
                }
            }
        }
        let logged = log.entries.back().map_or(0, Entry::last_seq);
        log.next_seq = seq_next.max(logged + 1).max(base);
        log.sealed = seq_next != 0;
        // Sealed, it reaches back to where the record says (never past its first event): the
        // seqs between were never sent, so a client there missed nothing.
        let reach = |below: u64| floor.map_or(below, |f| f.min(below));
        log.floor = match (log.sealed, log.entries.front()) {
            (true, Some(first)) => reach(first.seq - 1),
            (true, None) => reach(seq_next - 1),
            // Unsealed: a turn was cut, and what it sent may not have been written. Nothing
            // before this start can be vouched for.
            (false, _) => log.next_seq - 1,
        };
        log.trim(limits);
        records.extend(log.forget_evicted_blocks());
        log
    }

    /// The log of a set-aside session, whose page `at_rest` says, from the store's `blocks`
    /// (first seq, events) alone: what it held when it was set aside, so a page of it is the
    /// page the log in memory answered. The store's blocks may still hold events evicted
    /// since (a block is deleted only once all of it is); kept within `limits` as in memory,
    /// they give way again. Nothing past the last seq it sent is taken (a block written after
    /// it came back to memory is not this log's).
    pub fn read_back(
        session: &str,
        mut blocks: Vec<(u64, Vec<LoggedEvent>)>,
        at_rest: AtRest,
        limits: &SessionLimits,
    ) -> EventLog {
        blocks.sort_by_key(|(first, _)| *first);
        let mut log = EventLog {
            next_seq: at_rest.latest + 1,
            floor: at_rest.floor,
            session: session.to_owned(),
            ..EventLog::default()
        };
        for e in blocks.into_iter().flat_map(|(_, events)| events) {
            let newer = log.entries.back().is_none_or(|b| e.seq > b.last_seq());
            if newer && e.seq <= at_rest.latest {
                log.append_read(e.seq, e.method, &e.params);
            }
        }
        log.trim(limits);
        log
    }

    /// The seq the next event gets (a plain count; unsealing is [`EventLog::take_unsealing`]'s).
    fn take(&mut self) -> u64 {
        // Counting on from at most `SEQ_MAX` (what a store may say), never past u64::MAX.
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// The seq the next event gets, and whether that unsealed the log: it was sealed, so the
    /// session's record must say it no longer is before the event leaves (log_seal.rs).
    pub fn take_unsealing(&mut self) -> (u64, bool) {
        let seq = self.take();
        (seq, std::mem::replace(&mut self.sealed, false))
    }

    /// The log sealed: what the store lacks of it, and how far back it reaches (written beside
    /// its next seq, log_seal.rs).
    pub fn seal(&mut self) -> (Vec<Record>, u64) {
        let records = self.flush();
        self.sealed = true;
        (records, self.floor)
    }

    /// The params' bytes of the entries the store lacks.
    pub fn unflushed_bytes(&self) -> usize {
        self.unflushed_bytes
    }

    /// The seq the next event would get: what a seal writes.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// How far back the log reaches, when the store has all of it (sealed): what a seal
    /// writes beside the next seq.
    pub fn sealed_floor(&self) -> Option<u64> {
        self.sealed.then_some(self.floor)
    }

    /// Keep an event (its params copied into the buffer), unless its params are too long for
    /// an entry to say (over 4 GiB): then the log no longer reaches back past it. Whether it
    /// was kept.
    fn append(&mut self, seq: u64, method: Logged, params: &str) -> bool {
        let Ok(len) = u32::try_from(params.len()) else {
            self.forget_through(seq);
            return false;
        };
        let at = self.params.push(params);
        self.keep(Entry {
            seq,
            at,
            len,
            params_len: len,
            method,
            chunk: None,
            paired: None,
            paired_kind: 0,
        });
        true
    }

    /// Keep an event read back from the store: a text chunk's as [`EventLog::push_chunk`]
    /// keeps it (its text alone, once for its update and its event), when its params are
    /// exactly what the chunk's writer writes; any other whole. A restarted device's logs took
    /// each chunk's params whole again, over twice the memory of the log that sent them.
    fn append_read(&mut self, seq: u64, method: Logged, params: &str) -> bool {
        let Some((kind, quoted)) = as_chunk(&self.session, seq, method, params) else {
            return self.append(seq, method, params);
        };
        let text = &params[quoted];
        let (Ok(len), Ok(params_len)) = (u32::try_from(text.len()), u32::try_from(params.len()))
        else {
            return self.append(seq, method, params);
        };
        // The update just kept carried the same text: this is its event, one entry with it.
        let pair = |b: &Entry| {
            method == Logged::Event
                && b.method == Logged::Update
                && b.chunk.is_some()
                && b.paired.is_none()
                && b.seq + 1 == seq
                && self.params.get(b.at, b.len) == text
        };
        let paired = NonZeroU32::new(params_len);
        if paired.is_some() && self.entries.back().is_some_and(pair) {
            let update = self.entries.back_mut().expect("the entry just looked at");
            (update.paired, update.paired_kind) = (paired, kind);
            self.bytes += cost(method.name(), params_len as usize);
            self.events += 1;
            return true;
        }
        let at = self.params.push(text);
        self.keep(Entry {
            seq,
            at,
            len,
            params_len,
            method,
            chunk: Some(kind),
            paired: None,
            paired_kind: 0,
        });
        true
    }

    /// Keep `entry`, its bytes already in the buffer; the bounds count its params as sent.
    fn keep(&mut self, entry: Entry) {
        self.bytes += entry.cost();
        self.events += entry.events();
        self.entries.push_back(entry);
    }

    /// `count` entries just kept were sent (`bytes` of params), so the store lacks them; the
    /// oldest give way to stay within `limits`. Whether the log now has entries the store has
    /// not and had none before.
    fn sent(&mut self, count: usize, bytes: usize, limits: &SessionLimits) -> bool {
        let was_clean = self.unflushed == 0;
        self.unflushed += count;
        self.unflushed_bytes += bytes;
        self.trim(limits);
        was_clean && self.unflushed > 0
    }

    /// One of `e`'s events (`h`), as sent.
    fn view(&self, e: &Entry, h: Held) -> EventView<'_> {
        let kept = self.params.get(e.at, e.len);
        let params = match h.chunk().zip(h.method.chunk_writer()) {
            None => Cow::Borrowed(kept),
            Some((kind, write)) => {
                let mut params = String::with_capacity(h.params_len as usize);
                write(&mut params, &self.session, h.seq, kind, Text::Quoted(kept));
                Cow::Owned(params)
            }
        };
        EventView {
            seq: h.seq,
            method: h.method.name(),
            params,
        }
    }

    /// Every event of the entries from the `start`th on, oldest first.
    fn views_from(&self, start: usize) -> impl Iterator<Item = EventView<'_>> + '_ {
        self.entries
            .range(start..)
            .flat_map(move |e| e.held().map(move |h| self.view(e, h)))
    }

    /// Keep a text chunk's two events as [`EventLog::push`] keeps each, in one entry with
    /// their text once.
    pub fn push_chunk(&mut self, chunk: LoggedChunk<'_>, limits: &SessionLimits) -> bool {
        debug_assert_eq!(self.session, chunk.session, "a log is one session's");
        let kind = |method: Logged, kind: &str| {
            let i = method.chunk_kinds().iter().position(|k| *k == kind)?;
            u8::try_from(i).ok()
        };
        let entry = || {
            Some(Entry {
                seq: chunk.update.seq,
                at: 0,
                len: u32::try_from(chunk.quoted.len()).ok()?,
                params_len: u32::try_from(chunk.update.params.len()).ok()?,
                method: Logged::Update,
                chunk: Some(kind(Logged::Update, chunk.update.kind)?),
                paired: Some(NonZeroU32::new(
                    u32::try_from(chunk.event.params.len()).ok()?,
                )?),
                paired_kind: kind(Logged::Event, chunk.event.kind)?,
            })
        };
        let Some(mut entry) = entry() else {
            // Not a chunk an entry can name (a kind no table has, or over 4 GiB): kept as two
            // plain events.
            let mut unflushed = false;
            for (method, e) in chunk.events() {
                unflushed |= self.push(e.seq, method, e.params, limits);
            }
            return unflushed;
        };
        entry.at = self.params.push(chunk.quoted);
        self.keep(entry);
        let bytes = chunk.update.params.len() + chunk.event.params.len();
        self.sent(1, bytes, limits)
    }

    /// Keep an event sent with `seq` (its params as sent); the oldest give way to stay within
    /// `limits`. Returns whether the log now has entries the store has not and had none
    /// before.
    pub fn push(&mut self, seq: u64, method: Logged, params: &str, limits: &SessionLimits) -> bool {
        if self.append(seq, method, params) {
            self.sent(1, params.len(), limits)
        } else {
            false
        }
    }

    /// Give up every entry, and the events up to `seq` with them (one that cannot be kept).
    fn forget_through(&mut self, seq: u64) {
        while self.evict_oldest() {}
        self.floor = self.floor.max(seq);
    }

    /// The oldest event gives way (and its text, once no event has it); whether there was one.
    fn evict_oldest(&mut self) -> bool {
        // The oldest entry is one the store lacks.
        let unwritten = self.unflushed == self.entries.len();
        let Some(front) = self.entries.front_mut() else {
            return false;
        };
        let gone = front.held().next().expect("an entry holds an event");
        self.bytes -= gone.cost();
        self.events -= 1;
        self.floor = self.floor.max(gone.seq);
        if unwritten {
            self.unflushed_bytes = self
                .unflushed_bytes
                .saturating_sub(gone.params_len as usize);
        }
        if let Some(params_len) = front.paired.take() {
            // A chunk's update goes before its event: the entry keeps the event, and the text.
            *front = Entry {
                seq: gone.seq + 1,
                method: Logged::Event,
                chunk: Some(front.paired_kind),
                params_len: params_len.get(),
                ..*front
            };
            return true;
        }
        self.entries.pop_front();
        // An entry never written leaves before the store has it.
        if unwritten {
            self.unflushed -= 1;
        }
        let live = self.entries.front().map_or(self.params.end(), |e| e.at);
        self.params.give_up_to(live);
        true
    }

    fn trim(&mut self, limits: &SessionLimits) {
        while (self.events > limits.event_log_events || self.bytes > limits.event_log_bytes)
            && self.evict_oldest()
        {}
    }

    /// Nothing of the log is to be written (the device has no lasting store): none of it is
    /// owed to the store.
    pub fn kept_in_memory(&mut self) {
        self.unflushed = 0;
        self.unflushed_bytes = 0;
    }

    pub fn has_unflushed(&self) -> bool {
        self.unflushed > 0
    }

    /// The records that bring the store up to the log: a block of what it lacks, and the
    /// deletes of blocks wholly evicted since.
    pub fn flush(&mut self) -> Vec<Record> {
        let mut records = Vec::new();
        if self.unflushed > 0 {
            let start = self.entries.len() - self.unflushed;
            let first = self.entries[start].seq;
            let last = self.entries.back().map_or(first, Entry::last_seq);
            let unflushed = self.entries.range(start..);
            let mut value =
                String::with_capacity(unflushed.clone().map(stored_len).sum::<usize>() + 2);
            value.push('[');
            let mut at = start;
            while at < self.entries.len() {
                if value.len() > 1 {
                    value.push(',');
                }
                let e = &self.entries[at];
                let Some(kinds) = e.chunk_kinds() else {
                    self.view(e, e.held().next().expect("an entry holds an event"))
                        .write_json(&mut value);
                    at += 1;
                    continue;
                };
                // The chunks right after it, of its kinds, are one run with it.
                let mut end = at + 1;
                while self.entries.get(end).is_some_and(|next| {
                    next.chunk_kinds() == Some(kinds)
                        && next.seq == self.entries[end - 1].last_seq() + 1
                }) {
                    end += 1;
                }
                let (update, event) = kinds;
                if end - at > 1 {
                    let texts = self.entries.range(at..end);
                    let texts = texts.map(|e| self.params.get(e.at, e.len));
                    write_run_json(&mut value, e.seq, update, event, texts);
                } else {
                    let update = update.map(|kind| (e.seq, kind));
                    let event = event.map(|kind| (e.last_seq(), kind));
                    write_chunk_json(&mut value, self.params.get(e.at, e.len), update, event);
                }
                at = end;
            }
            value.push(']');
            records.push(Record::Put {
                table: Table::Events,
                key: store::events_key(&self.session, first),
                value,
            });
            self.blocks.push_back((first, last));
            self.unflushed = 0;
            self.unflushed_bytes = 0;
        }
        records.extend(self.forget_evicted_blocks());
        records
    }

    /// Deletes of the stored blocks every event of which was evicted.
    fn forget_evicted_blocks(&mut self) -> Vec<Record> {
        let mut records = Vec::new();
        while let Some(&(first, last)) = self.blocks.front() {
            if last > self.floor {
                break;
            }
            self.blocks.pop_front();
            records.push(Record::Delete {
                table: Table::Events,
                key: store::events_key(&self.session, first),
            });
        }
        records
    }

    /// The events after `since`, oldest first, at most `limit` and (past the first) at most
    /// `max_bytes` of them, so an answer stays within a frame.
    pub fn page(&self, since: u64, limit: usize, max_bytes: usize) -> Page<'_> {
        self.page_of(since, limit, max_bytes, |_| true)
    }

    /// [`EventLog::page`] of the events `heard` keeps alone: what a connection that was sent
    /// only those missed. `limit` and `max_bytes` count only them; `next` and `truncated` are
    /// the whole log's, as no event it skips was for that connection.
    pub fn page_of(
        &self,
        since: u64,
        limit: usize,
        max_bytes: usize,
        heard: impl Fn(&EventView<'_>) -> bool,
    ) -> Page<'_> {
        let latest = self.next_seq - 1;
        if since > latest {
            // A seq this device never sent (its store was reset, say): the client's view
            // cannot be continued from here.
            return Page {
                events: Vec::new(),
                next: latest,
                truncated: true,
            };
        }
        let start = self.entries.partition_point(|e| e.last_seq() <= since);
        let mut bytes = 0;
        let mut events: Vec<EventView<'_>> = Vec::new();
        let mut cut = false;
        // The first entry may hold `since` itself (a chunk's update, before its event).
        for e in self.views_from(start).filter(|e| e.seq > since) {
            if !heard(&e) {
                continue;
            }
            bytes += e.cost();
            // Past the first, an event that would go over the bytes ends the page.
            if events.len() == limit || (bytes > max_bytes && !events.is_empty()) {
                cut = true;
                break;
            }
            events.push(e);
        }
        // Not cut short: every event up to the log's last was looked at (the skipped ones
        // too), so the next page begins after it.
        let scanned = self
            .entries
            .back()
            .map(Entry::last_seq)
            .filter(|&s| s > since);
        let next = match (cut, events.last(), scanned) {
            (true, Some(e), _) => e.seq,
            (_, _, Some(last)) => last,
            (_, Some(e), None) => e.seq,
            (_, None, None) => latest,
        };
        Page {
            next,
            truncated: since < self.floor,
            events,
        }
    }

    /// The event sent with `seq`, while the log holds it and vouches for it: a client that
    /// follows from it is not told `truncated`.
    pub fn vouched(&self, seq: u64) -> Option<EventView<'_>> {
        if seq <= self.floor {
            return None;
        }
        let i = self.entries.partition_point(|e| e.last_seq() < seq);
        let e = self.entries.get(i)?;
        e.held().find(|h| h.seq == seq).map(|h| self.view(e, h))
    }

    /// The newest event `which` keeps among those the log vouches for.
    pub fn last_vouched(&self, which: impl Fn(&EventView<'_>) -> bool) -> Option<EventView<'_>> {
        self.entries
            .iter()
            .rev()
            .flat_map(|e| e.held().rev().map(move |h| (e, h)))
            .take_while(|(_, h)| h.seq > self.floor)
            .map(|(e, h)| self.view(e, h))
            .find(|e| which(e))
    }

    /// What a page of this log says without its events, kept for the session while it is
    /// set aside (its log then changes no more).
    pub fn at_rest(&self) -> AtRest {
        let last_logged = self.entries.back().map_or(0, Entry::last_seq);
        AtRest {
            quiet_from: self.floor.max(last_logged),
            latest: self.next_seq - 1,
            floor: self.floor,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.events
    }
}

/// A set-aside session's log as far as a client that missed nothing asks it: two numbers, so
/// a catch-up on it is answered without reading it back (see [`Device::session_events`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtRest {
    /// From this seq on nothing is logged and nothing is lost: a page from here has no events
    /// and is not truncated.
    quiet_from: u64,
    /// The last seq sent (or the one before this start's first, read back after a restart).
    latest: u64,
    /// How far back the log reaches: a page from before it is truncated.
    floor: u64,
}

impl AtRest {
    /// The page [`EventLog::page`] answers from `since`, when it has no events; `None` when it
    /// has (the log must be read).
    pub(crate) fn page(&self, since: u64) -> Option<Page<'static>> {
        if since < self.quiet_from {
            return None;
        }
        Some(Page {
            events: Vec::new(),
            next: self.latest,
            // A seq this device never sent, as `page` says.
            truncated: since > self.latest,
        })
    }

    /// Whether a page from `since` is answered from this alone (tests and the fuzzer's model).
    #[cfg(any(test, feature = "testing"))]
    pub fn answers(&self, since: u64) -> bool {
        since >= self.quiet_from
    }
}

/// A notification's frame around params already encoded: what
/// `jsonrpc::encode_notification` writes for the same params, byte for byte.
pub(super) fn notification_frame(method: &str, params: &str) -> Vec<u8> {
    let mut f = Vec::with_capacity(40 + method.len() + params.len());
    f.extend_from_slice(br#"{"jsonrpc":"2.0","method":""#);
    f.extend_from_slice(method.as_bytes());
    f.extend_from_slice(br#"","params":"#);
    f.extend_from_slice(params.as_bytes());
    f.push(b'}');
    f
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::device::event_block::read_block;
    use serde_json::{json, Value};

    fn seq_of(v: &Value) -> Option<u64> {
        v["_meta"]["lembas"]["seq"].as_u64()
    }

    pub(crate) fn limits(events: usize, bytes: usize) -> SessionLimits {
        SessionLimits {
            event_log_events: events,
            event_log_bytes: bytes,
            ..SessionLimits::default()
        }
    }

    fn event(log: &mut EventLog, text: &str) -> LoggedEvent {
        let seq = log.take();
        LoggedEvent {
            seq,
            method: Logged::Event,
            params: json!({ "_meta": { "lembas": { "seq": seq } }, "event": { "text": text } })
                .to_string(),
        }
    }

    fn push(log: &mut EventLog, e: LoggedEvent, limits: &SessionLimits) -> bool {
        log.push(e.seq, e.method, &e.params, limits)
    }

    fn fill(log: &mut EventLog, n: usize, limits: &SessionLimits) {
        for i in 0..n {
            let e = event(log, &format!("e{i}"));
            push(log, e, limits);
        }
    }

    fn seqs(page: &Page<'_>) -> Vec<u64> {
        page.events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn a_page_of_some_events_counts_only_them_and_goes_on_past_the_rest() {
        let l = limits(100, 1 << 20);
        let mut log = EventLog::default();
        fill(&mut log, 6, &l);
        // Seqs 2, 4 and 6 are the ones heard.
        let even = |e: &EventView<'_>| e.seq.is_multiple_of(2);
        let page = log.page_of(0, 2, usize::MAX, even);
        assert_eq!(
            (seqs(&page), page.next),
            (vec![2, 4], 4),
            "cut at the limit"
        );
        let page = log.page_of(4, 2, usize::MAX, even);
        assert_eq!((seqs(&page), page.next), (vec![6], 6));
        let page = log.page_of(0, 10, usize::MAX, |e| e.seq == 3);
        assert_eq!(
            (seqs(&page), page.next, page.truncated),
            (vec![3], 6, false),
            "not cut: the next page begins after the log's last, skipped or not"
        );
        let page = log.page_of(3, 10, usize::MAX, |e| e.seq == 3);
        assert_eq!((seqs(&page), page.next), (vec![], 6));
        // The bytes bound too counts only the events kept.
        let one = log.page(0, 1, usize::MAX).events[0].cost();
        let page = log.page_of(0, 10, one, even);
        assert_eq!((seqs(&page), page.next), (vec![2], 2));
    }

    #[test]
    fn the_count_bound_keeps_the_newest_and_says_truncated_below_them() {
        let l = limits(3, 1 << 20);
        let mut log = EventLog::default();
        fill(&mut log, 5, &l);
        assert_eq!(log.len(), 3);
        let page = log.page(0, 100, usize::MAX);
        assert_eq!(seqs(&page), [3, 4, 5], "oldest first, the oldest gave way");
        assert!(page.truncated, "seqs 1 and 2 are gone");
        assert_eq!(page.next, 5);
        let page = log.page(2, 100, usize::MAX);
        assert_eq!((seqs(&page), page.truncated), (vec![3, 4, 5], false));
        let page = log.page(3, 1, usize::MAX);
        assert_eq!(
            (seqs(&page), page.next, page.truncated),
            (vec![4], 4, false)
        );
        let page = log.page(5, 10, usize::MAX);
        assert_eq!((seqs(&page), page.next, page.truncated), (vec![], 5, false));
        let page = log.page(99, 10, usize::MAX);
        assert_eq!((page.next, page.truncated), (5, true), "a seq never sent");
        // A page is bounded by bytes too (past its first event), and says where to go on.
        let page = log.page(2, 100, 1);
        assert_eq!((seqs(&page), page.next), (vec![3], 3));
    }

    #[test]
    fn the_byte_bound_evicts_the_oldest_first_and_an_event_over_it_is_not_kept() {
        let x = event(&mut EventLog::default(), "x");
        let one = cost(x.method.name(), x.params.len());
        let l = limits(1000, 2 * one);
        let mut log = EventLog::default();
        for _ in 0..3 {
            let e = event(&mut log, "x");
            push(&mut log, e, &l);
        }
        assert_eq!(seqs(&log.page(0, 10, usize::MAX)), [2, 3]);
        assert!(log.bytes <= l.event_log_bytes);
        let big = LoggedEvent {
            seq: log.take(),
            method: Logged::Update,
            params: format!("\"{}\"", "y".repeat(3 * one)),
        };
        push(&mut log, big, &l);
        let page = log.page(0, 10, usize::MAX);
        assert!(page.events.is_empty() && page.truncated, "{page:?}");
        assert_eq!((log.bytes, page.next), (0, 4));
        assert!(
            !log.page(4, 10, usize::MAX).truncated,
            "nothing after 4 was lost"
        );
    }

    #[test]
    fn the_params_buffer_stays_within_twice_what_is_live() {
        let l = limits(8, 1 << 20);
        let mut log = EventLog::default();
        let mut live_max = 0;
        for i in 0..10_000 {
            let e = event(&mut log, &"p".repeat(i % 300));
            push(&mut log, e, &l);
            let live: usize = log.entries.iter().map(|e| e.len as usize).sum();
            live_max = live_max.max(live);
            assert!(
                log.params.buf.len() <= 2 * live + 400,
                "{} bytes held for {live} live",
                log.params.buf.len()
            );
        }
        // What is read back is what was pushed.
        let page = log.page(0, 100, usize::MAX);
        assert_eq!(page.events.len(), 8);
        for v in &page.events {
            assert_eq!(
                seq_of(&serde_json::from_str(&v.params).unwrap()),
                Some(v.seq)
            );
        }
        assert!(live_max > 0);
    }

    /// Pushes a chunk of `text` as the hot path does; returns its two events as sent.
    fn push_chunk(log: &mut EventLog, text: &str, limits: &SessionLimits) -> [LoggedEvent; 2] {
        let seq = log.take();
        log.take();
        let (mut update, mut event) = (String::new(), String::new());
        let bufs = (&mut update, &mut event);
        let kinds = ("agent_thought_chunk", "reasoning");
        let chunk = super::super::chunk_params::written(bufs, "ses_c", seq, kinds, text);
        let sent = chunk.events().map(|(method, e)| LoggedEvent {
            seq: e.seq,
            method,
            params: e.params.to_owned(),
        });
        log.push_chunk(chunk, limits);
        sent
    }

    #[test]
    fn a_chunk_keeps_its_text_once_and_pages_both_its_params_as_sent() {
        // An odd count: the log often keeps a chunk's event without its update.
        let l = limits(5, 1 << 20);
        let mut log = EventLog::new("ses_c", 1);
        let mut sent = Vec::new();
        let mut quoted = Vec::new();
        for i in 0..300 {
            let text = format!(
                "chunk {i} with a \"quote\", a \\ and a\nnewline {}",
                "t".repeat(i % 50)
            );
            sent.extend(push_chunk(&mut log, &text, &l));
            quoted.push(serde_json::to_string(&text).unwrap().len());
            let kept: Vec<LoggedEvent> = sent[sent.len().saturating_sub(5)..].to_vec();
            let page = log.page(0, 100, usize::MAX);
            let paged: Vec<LoggedEvent> = page
                .events
                .iter()
                .map(|e| LoggedEvent {
                    seq: e.seq,
                    method: Logged::named(e.method).expect("a method the log keeps"),
                    params: e.params.to_string(),
                })
                .collect();
            assert_eq!(paged, kept, "after chunk {i}");
            // The bounds count the params as sent; the buffer holds the kept chunks' texts
            // alone (5 events: the last 3 chunks'), and at most as much again given up.
            let cost: usize = kept
                .iter()
                .map(|e| cost(e.method.name(), e.params.len()))
                .sum();
            assert_eq!(log.bytes, cost);
            // One entry a chunk: the last 3 chunks' (the oldest holding its event alone once
            // 3 are sent), nothing of them written yet.
            assert_eq!(log.entries.len(), (i + 1).min(3), "after chunk {i}");
            let params: usize = kept.iter().map(|e| e.params.len()).sum();
            assert_eq!(log.unflushed_bytes, params, "after chunk {i}");
            let texts: usize = quoted.iter().rev().take(3).sum();
            assert!(
                log.params.buf.len() <= 2 * texts,
                "{} bytes held for {} events of texts of {texts} bytes",
                log.params.buf.len(),
                kept.len(),
            );
        }
    }

    /// A chunk's update and its event are one entry; a client that saw the update and not
    /// the event (its link was cut between the two) is sent the event first, and each is
    /// found by its own seq.
    #[test]
    fn a_page_or_a_lookup_may_begin_between_a_chunks_update_and_its_event() {
        let l = limits(100, 1 << 20);
        let mut log = EventLog::new("ses_c", 1);
        let sent: Vec<LoggedEvent> = (0..3)
            .flat_map(|i| push_chunk(&mut log, &format!("chunk {i}"), &l))
            .collect();
        assert_eq!((log.entries.len(), log.len()), (3, 6));
        let as_sent = |e: &EventView<'_>| LoggedEvent {
            seq: e.seq,
            method: Logged::named(e.method).expect("a method the log keeps"),
            params: e.params.to_string(),
        };
        for (i, after) in sent.iter().enumerate() {
            let page = log.page(after.seq, 100, usize::MAX);
            let paged: Vec<LoggedEvent> = page.events.iter().map(as_sent).collect();
            assert_eq!(paged, sent[i + 1..], "after seq {}", after.seq);
            assert_eq!(page.next, sent[5].seq);
            // The page cut after one event, mid-chunk or not, goes on from there.
            let one = log.page(after.seq.saturating_sub(1), 1, usize::MAX);
            assert_eq!(
                one.events.iter().map(as_sent).collect::<Vec<_>>(),
                std::slice::from_ref(after)
            );
            assert_eq!(one.next, after.seq);
            let found = log.vouched(after.seq).map(|e| as_sent(&e));
            assert_eq!(found.as_ref(), Some(after));
        }
        // Newest first: the last chunk's event comes before its update.
        let newest = log.last_vouched(|_| true).map(|e| as_sent(&e));
        assert_eq!(newest.as_ref(), Some(&sent[5]));
        let update = log.last_vouched(|e| e.method == Logged::Update.name());
        assert_eq!(update.map(|e| as_sent(&e)).as_ref(), Some(&sent[4]));
        // The log given up to a chunk's update alone keeps its event, found as before.
        log.trim(&limits(5, 1 << 20));
        assert_eq!(
            (log.entries.len(), log.len(), log.floor),
            (3, 5, sent[0].seq)
        );
        assert_eq!(log.vouched(sent[0].seq), None);
        assert_eq!(
            log.vouched(sent[1].seq).map(|e| as_sent(&e)).as_ref(),
            Some(&sent[1])
        );
        let page = log.page(0, 100, usize::MAX);
        assert!(page.truncated);
        assert_eq!(
            page.events.iter().map(as_sent).collect::<Vec<_>>(),
            sent[1..]
        );
    }

    /// 100 sessions streaming at once keep 100 logs of entries: at 64 bytes, two a chunk, they
    /// took more of a log than the chunks' text did; now 32, one a chunk.
    #[test]
    fn an_entry_is_32_bytes_and_what_no_entry_can_name_is_kept_whole_or_given_up() {
        assert_eq!(std::mem::size_of::<Entry>(), 32);
        let l = limits(100, 1 << 20);
        let mut log = EventLog::new("ses_c", 1);
        let seq = log.take();
        log.take();
        let (mut update, mut event) = (String::new(), String::new());
        let bufs = (&mut update, &mut event);
        let kinds = ("agent_message_chunk", "no_kind");
        let chunk = super::super::chunk_params::written(bufs, "ses_c", seq, kinds, "hi");
        let sent = chunk
            .events()
            .map(|(method, e)| (e.seq, method.name(), e.params.to_owned()));
        // A kind no table names: both events kept as sent, as plain events.
        assert!(log.push_chunk(chunk, &l), "the store lacks them now");
        assert!(log.entries.iter().all(|e| e.chunk.is_none()));
        let page = log.page(0, 10, usize::MAX);
        let paged: Vec<_> = page
            .events
            .iter()
            .map(|e| (e.seq, e.method, e.params.to_string()))
            .collect();
        assert_eq!(paged, sent);
        // An event no entry can hold (over 4 GiB) gives up the log up to it.
        let big = log.take();
        log.forget_through(big);
        assert_eq!(log.len(), 0);
        assert!(!log.has_unflushed(), "nothing is owed of what was given up");
        assert!(log.page(big - 1, 10, usize::MAX).truncated);
        assert!(!log.page(big, 10, usize::MAX).truncated);
    }

    #[test]
    fn a_block_keeps_a_chunks_text_once_and_reads_back_its_events_as_sent() {
        // 8 events kept of the 11 sent between flushes: the block begins with a chunk's event
        // whose update was given up, and holds a plain event between chunks.
        let l = limits(8, 1 << 20);
        let mut log = EventLog::new("ses_c", 1);
        let mut sent = Vec::new();
        for round in 0..4 {
            let mut texts = 0;
            for i in 0..5 {
                let text = format!("round {round} chunk {i}: a \"quote\", a \\ and a\nnewline");
                sent.extend(push_chunk(&mut log, &text, &l));
                texts += serde_json::to_string(&text).unwrap().len();
                if i == 2 {
                    let e = event(&mut log, "between");
                    push(&mut log, e.clone(), &l);
                    sent.push(e);
                }
            }
            let records = log.flush();
            let Some(Record::Put { value, .. }) = records.first() else {
                panic!("no block written: {records:?}");
            };
            let read = read_block(value, "ses_c").unwrap();
            assert_eq!(read, sent[sent.len() - 8..], "round {round}");
            // A block written before chunks were stored apart (each event whole) reads the same.
            let whole: Vec<String> = read
                .iter()
                .map(|e| {
                    let params = Cow::Borrowed(e.params.as_str());
                    let mut out = String::new();
                    EventView {
                        seq: e.seq,
                        method: e.method.name(),
                        params,
                    }
                    .write_json(&mut out);
                    out
                })
                .collect();
            let old = format!("[{}]", whole.join(","));
            assert_eq!(
                read_block(&old, "ses_c").unwrap(),
                read,
                "round {round}, old form"
            );
            assert_eq!(read[0].method, Logged::Event, "a chunk's event alone first");
            // The texts of the 4 chunks kept (one of them half) once each, at most 80 bytes
            // more a chunk, and the plain event's params with 60 (stored apart, a chunk's two
            // events took 810 bytes here, where they take 597).
            let kept_texts = texts * 4 / 5;
            let plain = sent
                .iter()
                .rev()
                .find(|e| e.params.contains("between"))
                .unwrap();
            assert!(
                value.len() <= kept_texts + 4 * 80 + plain.params.len() + 60,
                "{} bytes stored for {kept_texts} bytes of text: {value}",
                value.len()
            );
        }
    }

    #[test]
    fn a_run_of_chunks_is_stored_as_its_texts_and_reads_back_as_sent() {
        let l = limits(1_000, 1 << 20);
        let mut log = EventLog::new("ses_c", 1);
        let mut sent = Vec::new();
        let mut texts = 0;
        for i in 0..100 {
            let text = format!("{i:0>64}");
            texts += text.len() + 2;
            sent.extend(push_chunk(&mut log, &text, &l));
        }
        // A plain event ends the run; a seq never sent breaks the next one in two.
        let e = event(&mut log, "between");
        push(&mut log, e.clone(), &l);
        sent.push(e);
        for i in 0..4 {
            if i == 2 {
                log.take();
            }
            sent.extend(push_chunk(&mut log, &format!("after {i}"), &l));
        }
        let records = log.flush();
        let Some(Record::Put { value, .. }) = records.first() else {
            panic!("no block written: {records:?}");
        };
        assert_eq!(read_block(value, "ses_c").unwrap(), sent);
        assert_eq!(value.matches(r#"{"run":"#).count(), 3, "{value}");
        // The first run: its texts, a comma each, and one header (a chunk apart took 62 bytes
        // beside its text).
        let first_run = &value[..value.find(r#"],"update""#).unwrap()];
        assert!(
            first_run.len() <= texts + 100 + 80,
            "{} bytes for {texts} of text: {first_run}",
            first_run.len()
        );
    }

    /// A log read back (a restarted device's, a set-aside session's) keeps each chunk's text
    /// once, as the log that sent it did, whichever form its block was written in; and pages
    /// every event as sent.
    #[test]
    fn a_log_read_back_keeps_its_chunks_text_once_and_pages_them_as_sent() {
        // 12 of the 20 events sent: the block begins with a chunk's event whose update was
        // given up.
        let l = limits(12, 1 << 20);
        let mut log = EventLog::new("ses_c", 1);
        for i in 0..9 {
            push_chunk(
                &mut log,
                &format!("chunk {i}: a \"quote\", é and a\nnewline"),
                &l,
            );
            if i % 4 == 1 {
                let e = event(&mut log, "between");
                push(&mut log, e, &l);
            }
        }
        let records = log.flush();
        let Some(Record::Put { value, .. }) = records.first() else {
            panic!("no block written: {records:?}");
        };
        let read = read_block(value, "ses_c").unwrap();
        let whole: Vec<String> = read
            .iter()
            .map(|e| {
                let mut out = String::new();
                let params = Cow::Borrowed(e.params.as_str());
                let view = EventView {
                    seq: e.seq,
                    method: e.method.name(),
                    params,
                };
                view.write_json(&mut out);
                out
            })
            .collect();
        let old = read_block(&format!("[{}]", whole.join(",")), "ses_c").unwrap();
        let events = |log: &EventLog| -> Vec<(u64, &str, String)> {
            let page = log.page(0, 100, usize::MAX);
            page.events
                .iter()
                .map(|e| (e.seq, e.method, e.params.to_string()))
                .collect()
        };
        let chunks = |log: &EventLog| -> usize {
            let chunk_entries = log.entries.iter().filter(|e| e.chunk.is_some());
            chunk_entries.map(Entry::events).sum()
        };
        for (form, read) in [("chunk form", read), ("old form", old)] {
            let first = read[0].seq;
            let back = EventLog::read_back("ses_c", vec![(first, read)], log.at_rest(), &l);
            assert_eq!(events(&back), events(&log), "{form}");
            assert_eq!(back.bytes, log.bytes, "{form}: the bounds count the same");
            assert_eq!(chunks(&back), chunks(&log), "{form}");
            assert_eq!(chunks(&back), 11, "{form}: 5 chunks and a half");
            assert_eq!(
                back.entries.len(),
                log.entries.len(),
                "{form}: one entry a chunk"
            );
            let live = |log: &EventLog| log.params.end() - log.params.live;
            assert_eq!(live(&back), live(&log), "{form}: each text once");
        }
        // Another session's params are not this one's chunks: kept whole.
        let first = log.entries[0].seq;
        let read = read_block(value, "ses_c").unwrap();
        let other = EventLog::read_back("ses_d", vec![(first, read)], log.at_rest(), &l);
        assert_eq!(chunks(&other), 0);
        assert_eq!(events(&other), events(&log));
    }

    #[test]
    fn blocks_are_written_in_batches_and_deleted_once_wholly_evicted() {
        let l = limits(100, 1 << 20);
        let mut log = EventLog::new("s", 1);
        fill(&mut log, 10, &l);
        assert!(log.has_unflushed());
        let records = log.flush();
        assert!(
            matches!(&records[..], [Record::Put { key, .. }] if key == &store::events_key("s", 1))
        );
        assert!(!log.has_unflushed());
        assert!(log.flush().is_empty(), "nothing new, nothing written");
        fill(&mut log, 64, &l);
        log.flush();
        // 74 events in blocks [1..10] and [11..74]; keep 60: the first block goes.
        log.trim(&limits(60, 1 << 20));
        let records = log.flush();
        assert_eq!(
            records,
            vec![Record::Delete {
                table: Table::Events,
                key: store::events_key("s", 1)
            }]
        );
    }

    /// A stored block of events `first..=last`.
    fn block(first: u64, last: u64) -> (u64, Vec<LoggedEvent>) {
        let events = (first..=last)
            .map(|seq| LoggedEvent {
                seq,
                method: Logged::Event,
                params: json!({ "_meta": { "lembas": { "seq": seq } } }).to_string(),
            })
            .collect();
        (first, events)
    }

    #[test]
    fn a_log_read_back_reaches_as_far_as_its_record_says_across_starts_that_sent_nothing() {
        let l = limits(100, 1 << 20);
        let mut records = Vec::new();
        // Sealed in start 0 having sent nothing, then three events in start 1: a client that
        // last saw start 0 missed nothing.
        let (first, before) = (seq_base(1), seq_base(0) - 1);
        let blocks = || vec![block(first, first + 2)];
        let back = EventLog::restore(
            "s",
            blocks(),
            (first + 3, Some(before)),
            seq_base(2),
            &l,
            &mut records,
        );
        let page = back.page(before, 10, usize::MAX);
        assert_eq!((page.events.len(), page.truncated), (3, false));
        assert_eq!(back.sealed_floor(), Some(before));
        // A record from before the floor was kept vouches from its first event on.
        let old = EventLog::restore(
            "s",
            blocks(),
            (first + 3, None),
            seq_base(2),
            &l,
            &mut records,
        );
        assert!(old.page(before, 10, usize::MAX).truncated);
        assert!(!old.page(first - 1, 10, usize::MAX).truncated);
    }

    #[test]
    fn a_log_trimmed_as_it_is_read_back_has_its_record_say_how_far_it_reaches_now() {
        let mut s = crate::device::live::tests::session("s");
        s.durable.seq_next = 11;
        s.durable.events_floor = Some(0);
        let mut records = Vec::new();
        // Read back under smaller bounds: the oldest six give way.
        s.restore_events(
            vec![block(1, 10)],
            seq_base(0),
            &limits(4, 1 << 20),
            &mut records,
        );
        assert_eq!(s.events.sealed_floor(), Some(6));
        assert_eq!(s.durable.events_floor, Some(6));
        assert_eq!(
            records,
            [s.record()],
            "the record, so a later read does not vouch for 1-6"
        );
        // Read back again as it was left: nothing to say.
        let mut records = Vec::new();
        s.restore_events(
            vec![block(1, 10)],
            seq_base(0),
            &limits(4, 1 << 20),
            &mut records,
        );
        assert!(records.is_empty(), "{records:?}");
        assert!(s.events.page(5, 10, usize::MAX).truncated);
    }

    #[test]
    fn a_sealed_log_read_back_reaches_as_far_and_goes_on_from_this_starts_base() {
        let l = limits(100, 1 << 20);
        let mut records = Vec::new();
        // Set aside and read back in the same start: it goes on where it was.
        let back = EventLog::restore(
            "s",
            vec![block(1, 3)],
            (4, None),
            seq_base(0),
            &l,
            &mut records,
        );
        assert_eq!(back.next_seq(), 4);
        let page = back.page(0, 10, usize::MAX);
        assert_eq!((seqs(&page), page.truncated), (vec![1, 2, 3], false));
        // After a restart: above every seq of the last start, and still vouched for.
        let back = EventLog::restore(
            "s",
            vec![block(1, 3)],
            (4, None),
            seq_base(1),
            &l,
            &mut records,
        );
        assert_eq!(back.next_seq(), seq_base(1));
        assert!(seq_base(1) > seq_base(0) + u64::from(u32::MAX));
        let page = back.page(1, 10, usize::MAX);
        assert_eq!((seqs(&page), page.truncated), (vec![2, 3], false));
        assert!(
            !back.page(3, 10, usize::MAX).truncated,
            "nothing was missed after 3"
        );
        assert!(records.is_empty(), "{records:?}");
    }

    #[test]
    fn an_unsealed_log_read_back_after_a_restart_vouches_for_nothing_before_it() {
        let l = limits(100, 1 << 20);
        let mut records = Vec::new();
        let back = EventLog::restore(
            "s",
            vec![block(1, 3)],
            (0, None),
            seq_base(1),
            &l,
            &mut records,
        );
        assert_eq!(back.next_seq(), seq_base(1));
        let page = back.page(3, 10, usize::MAX);
        assert!(page.truncated && page.events.is_empty(), "{page:?}");
        assert!(!back.page(seq_base(1) - 1, 10, usize::MAX).truncated);
        // Its blocks are of no use now: they go.
        assert_eq!(
            records,
            vec![Record::Delete {
                table: Table::Events,
                key: store::events_key("s", 1)
            }]
        );
    }

    #[test]
    fn what_is_kept_at_rest_answers_as_the_log_does_wherever_it_has_no_events() {
        let l = limits(4, 1 << 20);
        let mut records = Vec::new();
        let mut logs = vec![EventLog::default(), EventLog::new("s", seq_base(3))];
        let mut trimmed = EventLog::default();
        fill(&mut trimmed, 9, &l);
        logs.push(trimmed);
        logs.push(EventLog::restore(
            "s",
            vec![block(1, 3)],
            (4, None),
            seq_base(2),
            &l,
            &mut records,
        ));
        logs.push(EventLog::restore(
            "s",
            vec![block(1, 3)],
            (0, None),
            seq_base(2),
            &l,
            &mut records,
        ));
        for log in &logs {
            let rest = log.at_rest();
            let mut answered = 0;
            let latest = log.next_seq() - 1;
            let probes = (0..12).chain([latest.saturating_sub(1), latest, latest + 1, u64::MAX]);
            for since in probes {
                let page = log.page(since, 100, usize::MAX);
                match rest.page(since) {
                    Some(kept) => {
                        answered += 1;
                        assert_eq!(kept, page, "since {since}, {log:?}");
                    }
                    None => assert!(!page.events.is_empty() || page.truncated, "since {since}"),
                }
            }
            assert!(answered > 0 && rest.answers(latest), "{log:?}");
        }
    }

    #[test]
    fn the_page_is_json_with_the_params_as_sent() {
        let l = limits(10, 1 << 20);
        let mut log = EventLog::default();
        fill(&mut log, 2, &l);
        let v: Value = serde_json::from_str(&log.page(0, 10, usize::MAX).to_json()).unwrap();
        assert_eq!(v["next"], 2);
        assert_eq!(v["truncated"], false);
        assert_eq!(v["events"][1]["method"], "_lembas/event");
        assert_eq!(seq_of(&v["events"][1]["params"]), Some(2));
        assert_eq!(v["events"][1]["seq"], 2);
    }

    /// The page written by hand is what the wire's `EventsPage` writes (the type a client
    /// decodes), byte for byte: chunks with text to escape, plain events, a truncated page.
    #[test]
    fn a_page_is_what_the_wire_type_writes_byte_for_byte() {
        use crate::wire::events::EventsPage;
        let l = limits(7, 1 << 20);
        let mut log = EventLog::new("ses_c", 1);
        for i in 0..6 {
            push_chunk(&mut log, &format!("a \"chunk\" {i},\ttabbed, é \u{1}"), &l);
            let e = event(&mut log, &format!("plain\n{i}"));
            push(&mut log, e, &l);
        }
        for (since, limit) in [(0, 100), (12, 3), (17, 100), (18, 100)] {
            let written = log.page(since, limit, usize::MAX).to_json();
            let page: EventsPage = serde_json::from_str(&written).unwrap();
            assert_eq!(serde_json::to_string(&page).unwrap(), written);
            assert_eq!(page.truncated, since < log.floor, "from {since}");
        }
    }

    #[test]
    fn the_frame_around_params_is_the_encoders() {
        let params = json!({ "_meta": { "lembas": { "seq": 1 } }, "sessionId": "s" });
        assert_eq!(
            notification_frame("session/update", &params.to_string()),
            crate::jsonrpc::encode_notification("session/update", &params)
        );
    }
}
