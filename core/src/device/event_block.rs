//! An event log's blocks as the store holds them: a text chunk's element keeps its text once
//! with the seq and kind of the update, the event or both that carried it, and is written
//! again as sent when read; anything else is kept whole. Reading a block back checks what it
//! reads, and `as_chunk` says when params read back are a chunk's, so that a log read back
//! keeps their text once as the log that sent them did.

use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::chunk_params::{push_u64, Text};
use super::event_log::{Logged, LoggedEvent};

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

/// An entry as the store holds it: an event with its params, or a text chunk's text with the
/// update, the event or both that carried it ([`write_chunk_json`]).
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
            } => read_chunk(c, session, &mut events)?,
            _ => return Err("an entry is neither an event nor a chunk".into()),
        }
    }
    Ok(events)
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
        assert!(read_block(
            r#"[{"chunk":{"text":"a","event":[1,"text"]},"seq":1}]"#,
            "s"
        )
        .unwrap_err()
        .contains("neither an event nor a chunk"));
    }
}
