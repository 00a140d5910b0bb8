//! An event log's blocks as the store holds them: a text chunk's element keeps its text once
//! with the seq and kind of the update, the event or both that carried it, and is written
//! again as sent when read; a run of such chunks one after another, of the same kinds, is one
//! element with their texts alone; anything else is kept whole. Reading a block back checks
//! what it reads, and `as_chunk` says when params read back are a chunk's, so that a log read
//! back keeps their text once as the log that sent them did.

use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::chunk_params::{push_u64, Text};
use super::event_log::{Logged, LoggedEvent, SEQ_MAX};

/// A text chunk as a block stores it: `{"chunk":{"event":[seq,type],"text":..,"update":[seq,
/// sessionUpdate]}}`, with the update, the event or both. Its params are written again from
/// it when read: 100 sessions ending their turns at once wrote 25 MB of blocks, mostly the
/// params' envelopes, and that writing cost the device more than streaming the chunks did.
pub(super) fn write_chunk_json(
    out: &mut String,
    quoted: &str,
    update: Option<(u64, &str)>,
    event: Option<(u64, &str)>,
) {
    let pair = |out: &mut String, (seq, kind): (u64, &str)| {
        out.push('[');
        push_u64(out, seq);
        out.push_str(",\"");
        out.push_str(kind);
        out.push_str("\"]");
    };
    out.push_str(r#"{"chunk":{"#);
    if let Some(event) = event {
        out.push_str(r#""event":"#);
        pair(out, event);
        out.push(',');
    }
    out.push_str(r#""text":"#);
    out.push_str(quoted);
    if let Some(update) = update {
        out.push_str(r#","update":"#);
        pair(out, update);
    }
    out.push_str("}}");
}

/// A run of text chunks, each sent right after the one before with the same kinds (`update`,
/// `event` or both): `{"run":{"event":type,"seq":first,"texts":[..],"update":sessionUpdate}}`,
/// the first chunk's update (else its event) at `seq` and each next chunk's seqs right after
/// the last one's. 100 sessions streaming 1,000 chunks of 64 B each, twice, wrote 14.9 MB of
/// blocks, more than half of it each chunk's seqs and kinds, where a run writes 3 bytes a chunk
/// beside its text (6.9 MB).
pub(super) fn write_run_json<'t>(
    out: &mut String,
    seq: u64,
    update: Option<&str>,
    event: Option<&str>,
    quoted: impl Iterator<Item = &'t str>,
) {
    out.push_str(r#"{"run":{"#);
    if let Some(event) = event {
        out.push_str(r#""event":""#);
        out.push_str(event);
        out.push_str(r#"","#);
    }
    out.push_str(r#""seq":"#);
    push_u64(out, seq);
    out.push_str(r#","texts":["#);
    for (i, text) in quoted.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(text);
    }
    out.push(']');
    if let Some(update) = update {
        out.push_str(r#","update":""#);
        out.push_str(update);
        out.push('"');
    }
    out.push_str("}}");
}

/// `params` as a text chunk's writer writes them for `seq` of `session`: the index of its kind
/// in [`Logged::chunk_kinds`] and where its quoted text lies, if writing that text again gives
/// the same bytes (so keeping the text alone loses nothing).
pub(super) fn as_chunk(
    session: &str,
    seq: u64,
    method: Logged,
    params: &str,
) -> Option<(u8, Range<usize>)> {
    let write = method.chunk_writer()?;
    let mut written = String::new();
    for (i, kind) in method.chunk_kinds().iter().enumerate() {
        // Around an empty text: what comes before and after any chunk's of this kind.
        let empty = write(&mut written, session, seq, kind, Text::Quoted(r#""""#));
        let (before, after) = (empty.start, written.len() - empty.end);
        if params.len() < before + after
            || params.as_bytes()[..before] != written.as_bytes()[..before]
            || params.as_bytes()[params.len() - after..] != written.as_bytes()[empty.end..]
        {
            continue;
        }
        let quoted = before..params.len() - after;
        let text = params.get(quoted.clone())?;
        write(&mut written, session, seq, kind, Text::Quoted(text));
        if written == params {
            return Some((u8::try_from(i).ok()?, quoted));
        }
    }
    None
}

/// An entry as the store holds it: an event with its params, a text chunk's text with the
/// update, the event or both that carried it ([`write_chunk_json`]), or a run of them
/// ([`write_run_json`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredEvent<'a> {
    #[serde(borrow, default)]
    method: Option<&'a str>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(borrow, default)]
    chunk: Option<StoredChunk<'a>>,
    #[serde(borrow, default)]
    run: Option<StoredRun<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredChunk<'a> {
    #[serde(borrow)]
    text: &'a RawValue,
    #[serde(borrow, default)]
    update: Option<(u64, &'a str)>,
    #[serde(borrow, default)]
    event: Option<(u64, &'a str)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredRun<'a> {
    seq: u64,
    #[serde(borrow, default)]
    update: Option<&'a str>,
    #[serde(borrow, default)]
    event: Option<&'a str>,
    #[serde(borrow)]
    texts: Vec<&'a RawValue>,
}

/// A block of `session`'s log read back from the store: its events, or why not.
pub(crate) fn read_block(value: &str, session: &str) -> Result<Vec<LoggedEvent>, String> {
    let stored: Vec<StoredEvent<'_>> = serde_json::from_str(value).map_err(|e| e.to_string())?;
    let mut events = Vec::with_capacity(stored.len());
    for e in stored {
        match e {
            StoredEvent {
                method: Some(method),
                params: Some(params),
                seq: Some(seq),
                chunk: None,
                run: None,
            } => {
                let method = Logged::named(method)
                    .ok_or_else(|| format!("`{method}` is not a method the log keeps"))?;
                events.push(LoggedEvent {
                    seq,
                    method,
                    params: params.get().to_string(),
                });
            }
            StoredEvent {
                method: None,
                params: None,
                seq: None,
                chunk: Some(c),
                run: None,
            } => read_chunk(c, session, &mut events)?,
            StoredEvent {
                method: None,
                params: None,
                seq: None,
                chunk: None,
                run: Some(run),
            } => read_run(run, session, &mut events)?,
            _ => return Err("an entry is neither an event, a chunk nor a run".into()),
        }
    }
    // Seqs start at 1 (`seq_base`) and stay within `SEQ_MAX`: one outside is damage, and
    // counting on from it (or back from it) would overflow or hand out a seq twice.
    if let Some(e) = events.iter().find(|e| !(1..=SEQ_MAX).contains(&e.seq)) {
        return Err(format!("seq {} is not one a device sends", e.seq));
    }
    Ok(events)
}

/// A stored run's events: each text's, as a chunk's ([`read_chunk`]), its seqs right after the
/// text's before it.
fn read_run(run: StoredRun<'_>, session: &str, out: &mut Vec<LoggedEvent>) -> Result<(), String> {
    let step = u64::from(run.update.is_some()) + u64::from(run.event.is_some());
    if step == 0 {
        return Err("a run names neither its updates nor its events".into());
    }
    if run.texts.is_empty() {
        return Err("a run has no text".into());
    }
    let last = (run.texts.len() as u64)
        .checked_mul(step)
        .and_then(|seqs| run.seq.checked_add(seqs - 1));
    if last.is_none() {
        return Err("a run's seqs pass the greatest seq".into());
    }
    for (i, text) in run.texts.into_iter().enumerate() {
        // Within `last`, checked above.
        let seq = run.seq + i as u64 * step;
        let update = run.update.map(|kind| (seq, kind));
        let event = run
            .event
            .map(|kind| (seq + u64::from(update.is_some()), kind));
        read_chunk(
            StoredChunk {
                text,
                update,
                event,
            },
            session,
            out,
        )?;
    }
    Ok(())
}

/// A stored chunk's events, their params written again as they were sent.
fn read_chunk(c: StoredChunk<'_>, session: &str, out: &mut Vec<LoggedEvent>) -> Result<(), String> {
    let quoted = c.text.get();
    if !quoted.starts_with('"') {
        return Err("a chunk's text is not a string".into());
    }
    let known = |kinds: &[&'static str], kind: &str| {
        kinds
            .iter()
            .copied()
            .find(|k| *k == kind)
            .ok_or_else(|| format!("`{kind}` is not a chunk the log keeps"))
    };
    if c.update.is_none() && c.event.is_none() {
        return Err("a chunk names neither its update nor its event".into());
    }
    for (half, method) in [(c.update, Logged::Update), (c.event, Logged::Event)] {
        let (Some((seq, kind)), Some(write)) = (half, method.chunk_writer()) else {
            continue;
        };
        let kind = known(method.chunk_kinds(), kind)?;
        let mut params = String::new();
        write(&mut params, session, seq, kind, Text::Quoted(quoted));
        out.push(LoggedEvent {
            seq,
            method,
            params,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;
    use crate::device::Unreadable;
    use crate::store::{Entry, SessionRecord, Table};
    use crate::time::Time;

    #[test]
    fn a_block_that_is_not_the_logs_is_unreadable() {
        assert!(read_block(
            "[{\"method\":\"session/new\",\"params\":{},\"seq\":1}]",
            "s"
        )
        .unwrap_err()
        .contains("session/new"));
        assert!(read_block("{}", "s").is_err());
        let chunk = |c: &str| read_block(&format!("[{{\"chunk\":{c}}}]"), "s");
        assert!(chunk(r#"{"text":"a","update":[1,"agent_message_chunk"]}"#).is_ok());
        assert!(chunk(r#"{"text":"a","update":[1,"text"]}"#)
            .unwrap_err()
            .contains("`text` is not a chunk"));
        assert!(chunk(r#"{"text":"a"}"#).unwrap_err().contains("neither"));
        assert!(chunk(r#"{"text":1,"event":[1,"text"]}"#)
            .unwrap_err()
            .contains("not a string"));
        let run = |r: &str| read_block(&format!("[{{\"run\":{r}}}]"), "s");
        let read = run(r#"{"seq":7,"texts":["a","b"],"update":"agent_message_chunk"}"#).unwrap();
        assert_eq!(read.iter().map(|e| e.seq).collect::<Vec<_>>(), [7, 8]);
        let read =
            run(r#"{"event":"text","seq":7,"texts":["a","b"],"update":"agent_message_chunk"}"#);
        let read = read.unwrap();
        assert_eq!(
            read.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [7, 8, 9, 10]
        );
        assert!(read[3].params.contains(r#""b""#) && read[3].method == Logged::Event);
        assert!(run(r#"{"seq":7,"texts":["a"]}"#)
            .unwrap_err()
            .contains("neither its updates nor its events"));
        assert!(run(r#"{"seq":7,"texts":[],"event":"text"}"#)
            .unwrap_err()
            .contains("no text"));
        let last = format!(r#"{{"seq":{},"texts":["a","b"],"event":"text"}}"#, u64::MAX);
        assert!(run(&last).unwrap_err().contains("greatest seq"));
        let at_the_end = format!(
            r#"{{"seq":{},"texts":["a","b"],"event":"text"}}"#,
            SEQ_MAX - 1
        );
        assert_eq!(run(&at_the_end).unwrap().last().unwrap().seq, SEQ_MAX);
        let past_it = format!(
            r#"{{"seq":{},"texts":["a","b"],"event":"text"}}"#,
            u64::MAX - 1
        );
        assert!(run(&past_it)
            .unwrap_err()
            .contains("not one a device sends"));
        assert!(run(r#"{"seq":7,"texts":["a",2],"event":"text"}"#)
            .unwrap_err()
            .contains("not a string"));
        assert!(run(r#"{"seq":7,"texts":["a"],"event":"thought"}"#)
            .unwrap_err()
            .contains("`thought` is not a chunk"));
        assert!(read_block(
            r#"[{"chunk":{"text":"a","event":[1,"text"]},"seq":1}]"#,
            "s"
        )
        .unwrap_err()
        .contains("neither an event, a chunk nor a run"));
    }

    /// A store holding one session (sealed at seq 5) and one block of it.
    fn restore_with_block(key: &str, block: String) -> (crate::device::Device, Vec<Unreadable>) {
        let mut record = SessionRecord::testing("s");
        record.seq_next = 5;
        let entries = vec![
            Entry {
                table: Table::Sessions,
                key: "s".into(),
                value: serde_json::to_string(&record).unwrap(),
            },
            Entry {
                table: Table::Events,
                key: key.into(),
                value: block,
            },
        ];
        crate::device::Device::restore(DeviceConfig::default(), entries, Time(0)).unwrap()
    }

    #[test]
    fn a_stored_block_with_a_seq_at_u64_max_is_unreadable_and_not_counted_on_from() {
        let block = format!(
            r#"[{{"method":"_lembas/plan","params":{{}},"seq":{}}}]"#,
            u64::MAX
        );
        assert!(read_block(&block, "s")
            .unwrap_err()
            .contains("not one a device sends"));
        let (mut device, bad) = restore_with_block("s/1", block);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!((bad[0].table, bad[0].key.as_str()), (Table::Events, "s/1"));
        // The session is back, its next seq the record's (this start's base above it), not
        // one past the damaged block's.
        let next = device.next_seq("s").expect("the session is restored");
        assert_eq!(next, device.seq_base());
    }

    #[test]
    fn a_stored_block_with_a_seq_of_zero_is_unreadable() {
        let block = r#"[{"method":"_lembas/plan","params":{},"seq":0}]"#.to_string();
        assert!(read_block(&block, "s")
            .unwrap_err()
            .contains("seq 0 is not one a device sends"));
        let (mut device, bad) = restore_with_block("s/0", block);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!((bad[0].table, bad[0].key.as_str()), (Table::Events, "s/0"));
        assert_eq!(device.next_seq("s"), Some(device.seq_base()));
    }
}
