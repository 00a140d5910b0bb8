//! A text chunk's params, written directly: the fixed parts are literals, and only the session
//! id and the text are escaped (serde_json spent most of a chunk on the keys). The bytes are
//! the generic path's (keys in the order a `Value` map sorts them); chunks.rs's test holds the
//! two to it. The event log keeps a chunk's text alone and writes its params again from it
//! when they are asked for, with these same functions: the same bytes as were sent.

use std::ops::Range;

use super::event_log::Logged;

/// A number in decimal, without the formatting machinery (the hot path writes two a chunk).
pub(super) fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for d in &digits[i..] {
        out.push(char::from(*d));
    }
}

/// A JSON string: as serde_json writes it (the same escaping), with a plain copy when nothing
/// in it needs escaping (the usual chunk).
pub(super) fn push_json_str(out: &mut String, s: &str) {
    if !needs_escape(s.as_bytes()) {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).expect("a string always serializes"));
    }
}

/// Whether any byte of `bytes` is one JSON escapes in a string: a control character, `"` or
/// `\\`. Eight bytes at a time (the byte loop was the chunk path's largest cost in a profile):
/// a byte below 0x20 borrows in `w - 0x20..`, and a byte equal to `c` is a zero in `w ^ c..`.
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_in = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_ne_bytes(word.try_into().expect("eight bytes"));
        let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
        if below_space
            | zero_in(w ^ (ONES * u64::from(b'"')))
            | zero_in(w ^ (ONES * u64::from(b'\\')))
            != 0
        {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// `{"_meta":{"lembas":{"seq":N}},`: how a chunk's params open.
fn push_seq(out: &mut String, seq: u64) {
    out.push_str(r#"{"_meta":{"lembas":{"seq":"#);
    push_u64(out, seq);
    out.push_str("}},");
}

/// A chunk's text as a JSON string, quotes included: raw (escaped here) or as escaped before.
#[derive(Clone, Copy)]
pub(crate) enum Text<'a> {
    Raw(&'a str),
    Quoted(&'a str),
}

impl Text<'_> {
    /// Writes it; returns where it lies in `out`.
    fn push(self, out: &mut String) -> Range<usize> {
        let start = out.len();
        match self {
            Text::Raw(text) => push_json_str(out, text),
            Text::Quoted(quoted) => out.push_str(quoted),
        }
        start..out.len()
    }
}

/// `session/update` params for a chunk (`update`: its `sessionUpdate`) into `f`, which is
/// cleared first. Returns where the quoted text lies in them.
pub(crate) fn update_params(
    f: &mut String,
    session: &str,
    seq: u64,
    update: &str,
    text: Text<'_>,
) -> Range<usize> {
    f.clear();
    push_seq(f, seq);
    f.push_str(r#""sessionId":"#);
    push_json_str(f, session);
    f.push_str(r#","update":{"content":{"text":"#);
    let quoted = text.push(f);
    f.push_str(r#","type":"text"},"sessionUpdate":""#);
    f.push_str(update);
    f.push_str(r#""}}"#);
    quoted
}

/// `_lembas/event` params for a chunk (`event`: its `type`), written as [`update_params`] are.
pub(crate) fn event_params(
    f: &mut String,
    session: &str,
    seq: u64,
    event: &str,
    text: Text<'_>,
) -> Range<usize> {
    f.clear();
    push_seq(f, seq);
    f.push_str(r#""event":{"text":"#);
    let quoted = text.push(f);
    f.push_str(r#","type":""#);
    f.push_str(event);
    f.push_str(r#""},"sessionId":"#);
    push_json_str(f, session);
    f.push('}');
    quoted
}

/// One of a text chunk's two events as sent: its seq, its `sessionUpdate` or event `type`, and
/// its params.
#[derive(Clone, Copy)]
pub(crate) struct ChunkEvent<'a> {
    pub seq: u64,
    pub kind: &'static str,
    pub params: &'a str,
}

/// A text chunk's two events as sent (its `session/update`, then its `_lembas/event`), and
/// their text, quoted as both params have it: what the event log keeps.
pub(crate) struct LoggedChunk<'a> {
    pub session: &'a str,
    pub update: ChunkEvent<'a>,
    pub event: ChunkEvent<'a>,
    pub quoted: &'a str,
}

impl<'a> LoggedChunk<'a> {
    /// Its two events in the order sent, each with its method.
    pub(crate) fn events(&self) -> [(Logged, ChunkEvent<'a>); 2] {
        [(Logged::Update, self.update), (Logged::Event, self.event)]
    }
}

/// A chunk of `text` of `session`, its update (`seq`, with `kinds.0` its `sessionUpdate`) and
/// its event (the next seq, with `kinds.1` its `type`), written into `bufs` (each cleared
/// first; the event's from the update's escaped text). The caller has taken both seqs: the
/// event log keeps the two as one entry, so the event's is the update's next by construction.
pub(crate) fn written<'a>(
    bufs: (&'a mut String, &'a mut String),
    session: &'a str,
    seq: u64,
    kinds: (&'static str, &'static str),
    text: &str,
) -> LoggedChunk<'a> {
    let (update, event) = ((seq, kinds.0), (seq + 1, kinds.1));
    let (update_buf, event_buf) = bufs;
    let quoted = update_params(update_buf, session, update.0, update.1, Text::Raw(text));
    let update_params: &'a str = update_buf;
    let quoted = &update_params[quoted];
    event_params(event_buf, session, event.0, event.1, Text::Quoted(quoted));
    LoggedChunk {
        session,
        update: ChunkEvent {
            seq: update.0,
            kind: update.1,
            params: update_params,
        },
        event: ChunkEvent {
            seq: event.0,
            kind: event.1,
            params: event_buf,
        },
        quoted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value at every place of a word and of the tail, among bytes that need no
    /// escape (ASCII and UTF-8's high bytes alike): found exactly when JSON escapes it, and
    /// the string written is serde_json's.
    #[test]
    fn a_byte_that_needs_escaping_is_found_wherever_it_is() {
        let plain: Vec<u8> = (0..19u8)
            .map(|i| [b'a', 0xc3, b'~', 0x7f, b' '][usize::from(i % 5)])
            .collect();
        for at in 0..plain.len() {
            for b in 0..=255u8 {
                let mut bytes = plain.clone();
                bytes[at] = b;
                let naive = bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
                assert_eq!(needs_escape(&bytes), naive, "byte {b:#x} at {at}");
            }
        }
        for text in [
            "",
            "plain text of a chunk",
            "a \"quote\"",
            "tab\there",
            "é\u{1}",
            "x\\",
        ] {
            let mut out = String::new();
            push_json_str(&mut out, text);
            assert_eq!(out, serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn params_from_the_quoted_text_are_those_from_the_raw_and_say_where_it_lies() {
        for text in [
            "plain",
            "a \"quote\" and a \\ and a\nnewline",
            "",
            "ü \u{1}",
        ] {
            for (write, name) in [
                (
                    update_params as fn(&mut String, &str, u64, &str, Text<'_>) -> Range<usize>,
                    "agent_message_chunk",
                ),
                (event_params, "text"),
            ] {
                let mut raw = String::from("stale");
                let at = write(&mut raw, "ses_\"x", 4_294_967_297, name, Text::Raw(text));
                assert_eq!(raw[at.clone()], serde_json::to_string(text).unwrap());
                let mut again = String::new();
                let at_again = write(
                    &mut again,
                    "ses_\"x",
                    4_294_967_297,
                    name,
                    Text::Quoted(&raw[at.clone()]),
                );
                assert_eq!(again, raw);
                assert_eq!(at_again, at);
            }
        }
    }

    #[test]
    fn a_number_is_its_decimal() {
        for n in [0, 7, 10, 4_294_967_297, u64::MAX] {
            let mut s = String::new();
            push_u64(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }
}
