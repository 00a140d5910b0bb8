//! A server-sent events parser: bytes in any split, events out, every bound named.
//!
//! It follows the WHATWG EventSource parsing rules (HTML, "Server-sent events", 9.2.6): lines
//! end with CRLF, LF or CR; a leading BOM is skipped; `:` lines are comments; `data` lines are
//! joined with "\n"; a blank line dispatches. Two departures, both for a peer we only read:
//! a line that is not UTF-8 is an error (the rules would replace it with U+FFFD), and `retry`
//! is ignored (reconnecting is the shell's business).

use serde::{Deserialize, Serialize};

/// The bounds on what one stream may make the parser hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct SseLimits {
    /// The longest line (without its line end), refused as soon as that many bytes came
    /// without one.
    pub max_line_bytes: usize,
    /// The most data one event may carry (its `data` lines joined).
    pub max_event_bytes: usize,
}

impl Default for SseLimits {
    fn default() -> Self {
        SseLimits {
            max_line_bytes: 1024 * 1024,
            max_event_bytes: 8 * 1024 * 1024,
        }
    }
}

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, if one was given and not empty (the rules' "message" otherwise).
    pub event: Option<String>,
    /// The `data` lines, joined with "\n".
    pub data: String,
    /// The last event id in effect (it carries over to later events, as the rules say, until
    /// an empty `id` resets it).
    pub id: Option<String>,
}

/// Why a stream was refused: the bound (by its setting name and value) or the rule it broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseError(pub String);

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SseError {}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Where the line ending at `end` (a CR or LF in `bytes`) is over: a CRLF is one line end.
fn past_line_end(bytes: &[u8], end: usize) -> usize {
    if bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n') {
        end + 2
    } else {
        end + 1
    }
}

#[derive(Debug)]
pub struct SseParser {
    limits: SseLimits,
    /// The start of a line whose end has not come yet (never more than `max_line_bytes`).
    line: Vec<u8>,
    /// The last byte fed ended a line with CR: an LF first in the next feed ends nothing.
    after_cr: bool,
    /// No line has been read yet: a BOM at its start is skipped.
    first_line: bool,
    /// Lines read, for errors.
    lines: u64,
    /// The event being read: its data (joined so far), whether any `data` line came, its type.
    data: String,
    has_data: bool,
    event: Option<String>,
    /// A field line came since the last dispatch (what `finish` reports as left unterminated).
    in_event: bool,
    last_id: Option<String>,
    /// Set by the first error; the parser is dead after it.
    failed: Option<SseError>,
}

impl SseParser {
    pub fn new(limits: SseLimits) -> Self {
        SseParser {
            limits,
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            lines: 0,
            data: String::new(),
            has_data: false,
            event: None,
            in_event: false,
            last_id: None,
            failed: None,
        }
    }

    /// Feed bytes as they arrive; complete events are pushed to `out` in order.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let result = self.feed_lines(bytes, out);
        if let Err(error) = &result {
            self.failed = Some(error.clone());
            // Dead: what it held is of no use any more.
            self.line = Vec::new();
            self.data = String::new();
        }
        result
    }

    fn feed_lines(&mut self, fed: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut bytes = fed;
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        // Finish the line an earlier feed began.
        if !self.line.is_empty() {
            let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) else {
                return self.hold(bytes);
            };
            self.check_line(self.line.len() + end)?;
            let mut line = std::mem::take(&mut self.line);
            line.extend_from_slice(&bytes[..end]);
            let read = self.take_line_bytes(&line, out);
            line.clear();
            // Keep the allocation for the next split line.
            self.line = line;
            read?;
            bytes = &bytes[past_line_end(bytes, end)..];
        }
        // The whole lines of this feed, checked as UTF-8 in one go (a line end never falls
        // inside a character), then read in place; a bad one is found line by line.
        let whole = memchr::memrchr2(b'\n', b'\r', bytes).map_or(0, |last| last + 1);
        let (lines, tail) = bytes.split_at(whole);
        match std::str::from_utf8(lines) {
            Ok(text) => {
                let mut at = 0;
                while let Some(end) = memchr::memchr2(b'\n', b'\r', &text.as_bytes()[at..]) {
                    self.check_line(end)?;
                    self.take_line(&text[at..at + end], out)?;
                    at = past_line_end(text.as_bytes(), at + end);
                }
            }
            Err(_) => {
                let mut at = 0;
                while let Some(end) = memchr::memchr2(b'\n', b'\r', &lines[at..]) {
                    self.check_line(end)?;
                    self.take_line_bytes(&lines[at..at + end], out)?;
                    at = past_line_end(lines, at + end);
                }
            }
        }
        // A CR last may be the first half of a CRLF: an LF first in the next feed is its end.
        if !fed.is_empty() {
            self.after_cr = fed.last() == Some(&b'\r');
        }
        self.hold(tail)
    }

    /// Keeps the start of a line whose end has not come, within the bound.
    fn hold(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if !bytes.is_empty() {
            self.check_line(self.line.len() + bytes.len())?;
            self.line.extend_from_slice(bytes);
        }
        Ok(())
    }

    fn check_line(&self, len: usize) -> Result<(), SseError> {
        if len > self.limits.max_line_bytes {
            return Err(SseError(format!(
                "sse: line {} is longer than engine.sse.max_line_bytes ({}) without a line end",
                self.lines + 1,
                self.limits.max_line_bytes
            )));
        }
        Ok(())
    }

    /// One whole line, not yet checked as UTF-8, without its line end.
    fn take_line_bytes(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let line = std::str::from_utf8(line).map_err(|e| {
            SseError(format!(
                "sse: line {} is not UTF-8 (invalid byte at {} of the line)",
                self.lines + 1,
                e.valid_up_to()
            ))
        })?;
        self.take_line(line, out)
    }

    /// One whole line, without its line end.
    fn take_line(&mut self, mut line: &str, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.lines += 1;
        if self.first_line {
            self.first_line = false;
            line = line.strip_prefix('\u{FEFF}').unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            // A comment (servers send them to keep the connection alive).
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        self.in_event = true;
        match field {
            "data" => {
                let joined = self.data.len() + usize::from(self.has_data) + value.len();
                if joined > self.limits.max_event_bytes {
                    return Err(SseError(format!(
                        "sse: an event's data (line {}) is over engine.sse.max_event_bytes ({})",
                        self.lines, self.limits.max_event_bytes
                    )));
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = (!value.is_empty()).then(|| value.to_string()),
            // An id with a NUL is ignored, as the rules say; an empty one resets.
            "id" if !value.contains('\0') => {
                self.last_id = (!value.is_empty()).then(|| value.to_string())
            }
            // `retry` and unknown fields: nothing to do.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        self.in_event = false;
        let event = self.event.take();
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        out.push(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
        });
    }

    /// The stream ended: drop any unterminated event (WHATWG). Returns whether bytes were left
    /// over unterminated (a line without its end, or an event without its blank line).
    pub fn finish(&mut self) -> bool {
        // A stream of just a BOM left nothing of its own.
        let bom_only = self.first_line && self.line == BOM;
        let left = (!self.line.is_empty() && !bom_only) || self.in_event;
        self.line = Vec::new();
        self.data = String::new();
        self.has_data = false;
        self.event = None;
        self.in_event = false;
        left
    }

    /// Bytes held waiting for a line end (bounded by max_line_bytes + max_event_bytes).
    pub fn buffered(&self) -> usize {
        self.line.len() + self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_with(limits: SseLimits, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut parser = SseParser::new(limits);
        let mut out = Vec::new();
        parser.feed(bytes, &mut out)?;
        Ok(out)
    }

    fn parse(bytes: &[u8]) -> Vec<SseEvent> {
        parse_with(SseLimits::default(), bytes).unwrap()
    }

    /// Every split of `bytes` in two, and one byte at a time, give what one feed gives.
    fn parse_split(bytes: &[u8]) -> Vec<SseEvent> {
        let whole = parse(bytes);
        for cut in 0..=bytes.len() {
            let mut parser = SseParser::new(SseLimits::default());
            let mut out = Vec::new();
            parser.feed(&bytes[..cut], &mut out).unwrap();
            parser.feed(&bytes[cut..], &mut out).unwrap();
            assert_eq!(out, whole, "split at {cut}");
        }
        let mut parser = SseParser::new(SseLimits::default());
        let mut out = Vec::new();
        for b in bytes {
            parser.feed(std::slice::from_ref(b), &mut out).unwrap();
        }
        assert_eq!(out, whole, "one byte at a time");
        whole
    }

    fn data(text: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: text.into(),
            id: None,
        }
    }

    #[test]
    fn each_line_end_ends_a_line() {
        assert_eq!(parse_split(b"data: a\n\n"), vec![data("a")]);
        assert_eq!(parse_split(b"data: a\r\n\r\n"), vec![data("a")]);
        assert_eq!(parse_split(b"data: a\r\r"), vec![data("a")]);
        assert_eq!(
            parse_split(b"data: a\r\ndata: b\rdata: c\n\r\n"),
            vec![data("a\nb\nc")]
        );
    }

    #[test]
    fn a_crlf_split_across_feeds_is_one_line_end() {
        let mut parser = SseParser::new(SseLimits::default());
        let mut out = Vec::new();
        parser.feed(b"data: a\r", &mut out).unwrap();
        parser.feed(b"\ndata: b\r", &mut out).unwrap();
        assert!(out.is_empty(), "no blank line yet");
        parser.feed(b"\n\r", &mut out).unwrap();
        assert_eq!(out, vec![data("a\nb")]);
        // A CR then CR is two line ends, the second a blank line.
        assert_eq!(
            parse_split(b"data: x\r\rdata: y\r\r"),
            vec![data("x"), data("y")]
        );
    }

    #[test]
    fn a_leading_bom_is_skipped_once() {
        assert_eq!(parse_split(b"\xEF\xBB\xBFdata: a\n\n"), vec![data("a")]);
        // Only at the start of the stream: later it is part of the field name (unknown).
        assert_eq!(
            parse_split(b"\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n"),
            vec![data("a")]
        );
        // A second BOM makes the first field name unknown.
        assert_eq!(parse_split(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"), vec![]);
    }

    #[test]
    fn comments_are_skipped() {
        assert_eq!(
            parse_split(b": keep-alive\n:\ndata: a\n: inside\ndata: b\n\n"),
            vec![data("a\nb")]
        );
        // A comment line is not a blank line: it dispatches nothing.
        assert_eq!(parse_split(b"data: a\n:\n"), vec![]);
    }

    #[test]
    fn data_lines_join_with_newlines() {
        assert_eq!(
            parse_split(b"data: a\ndata:\ndata: c\n\n"),
            vec![data("a\n\nc")]
        );
        assert_eq!(
            parse_split(b"data\n\n"),
            vec![data("")],
            "no colon: empty value"
        );
        assert_eq!(parse_split(b"data:\n\n"), vec![data("")]);
    }

    #[test]
    fn one_space_after_the_colon_is_stripped() {
        assert_eq!(parse_split(b"data:a\n\n"), vec![data("a")]);
        assert_eq!(parse_split(b"data:  a \n\n"), vec![data(" a ")]);
        assert_eq!(parse_split(b"data: a:b: c\n\n"), vec![data("a:b: c")]);
    }

    #[test]
    fn event_and_id_fields() {
        let events =
            parse_split(b"event: delta\nid: 7\ndata: a\n\ndata: b\n\nid\nevent:\ndata: c\n\n");
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: Some("delta".into()),
                    data: "a".into(),
                    id: Some("7".into()),
                },
                // The type is the event's own; the id carries over.
                SseEvent {
                    event: None,
                    data: "b".into(),
                    id: Some("7".into()),
                },
                // An empty id resets it; an empty event type is the default type.
                data("c"),
            ]
        );
        // An id with a NUL is ignored.
        assert_eq!(
            parse_split(b"id: 1\ndata: a\n\nid: 2\0\ndata: b\n\n")[1]
                .id
                .as_deref(),
            Some("1")
        );
    }

    #[test]
    fn retry_and_unknown_fields_are_ignored() {
        assert_eq!(
            parse_split(b"retry: 10\nfoo: bar\nDATA: no\ndata : no\ndata: a\n\n"),
            vec![data("a")]
        );
    }

    #[test]
    fn an_event_without_data_is_not_dispatched() {
        assert_eq!(parse_split(b"event: ping\n\ndata: a\n\n"), vec![data("a")]);
        assert_eq!(parse_split(b"id: 3\n\n\n\n"), vec![]);
    }

    #[test]
    fn the_event_type_does_not_leak_past_a_blank_line() {
        assert_eq!(parse_split(b"event: ping\n\ndata: a\n\n"), vec![data("a")]);
    }

    #[test]
    fn an_unterminated_event_is_dropped_at_the_end() {
        let mut parser = SseParser::new(SseLimits::default());
        let mut out = Vec::new();
        parser.feed(b"data: a\n\ndata: b\n", &mut out).unwrap();
        assert_eq!(out, vec![data("a")]);
        assert!(parser.finish(), "an event without its blank line");
        assert_eq!(parser.buffered(), 0);

        let mut parser = SseParser::new(SseLimits::default());
        parser.feed(b"data: a\n\ndata: b", &mut out).unwrap();
        assert!(parser.finish(), "a line without its end");

        let mut parser = SseParser::new(SseLimits::default());
        parser.feed(b"data: a\n\n: bye\n", &mut out).unwrap();
        assert!(!parser.finish(), "all ended");

        let mut parser = SseParser::new(SseLimits::default());
        parser.feed(BOM, &mut out).unwrap();
        assert!(!parser.finish(), "a BOM alone is not a line");
    }

    #[test]
    fn utf8_split_across_feeds_is_decoded_whole() {
        let text = "data: héllo ✓ 𝄞\n\n".as_bytes();
        assert_eq!(parse_split(text), vec![data("héllo ✓ 𝄞")]);
    }

    #[test]
    fn invalid_utf8_is_an_error_naming_the_line() {
        let error = parse_with(SseLimits::default(), b"data: a\n\ndata: \xC3(\n\n").unwrap_err();
        assert!(error.0.contains("line 3 is not UTF-8"), "{error}");
        // A split sequence that never completes is invalid too.
        let error = parse_with(SseLimits::default(), b"data: \xE2\x9C\n\n").unwrap_err();
        assert!(error.0.contains("not UTF-8"), "{error}");
    }

    #[test]
    fn a_long_line_is_refused_before_its_end() {
        let limits = SseLimits {
            max_line_bytes: 10,
            ..SseLimits::default()
        };
        let mut parser = SseParser::new(limits);
        let mut out = Vec::new();
        parser.feed(b"data: 1234", &mut out).unwrap(); // 10 bytes: at the bound
        assert_eq!(parser.buffered(), 10);
        let error = parser.feed(b"5", &mut out).unwrap_err();
        assert!(
            error.0.contains("engine.sse.max_line_bytes (10)"),
            "{error}"
        );
        // Dead from now on, with the same error.
        assert_eq!(parser.feed(b"\n\n", &mut out), Err(error));
        assert_eq!(parser.buffered(), 0);
        // A whole line in one feed is held to the same bound.
        assert!(parse_with(limits, b"data: 12345\n\n").is_err());
        assert_eq!(
            parse_with(limits, b"data: 1234\n\n").unwrap(),
            vec![data("1234")]
        );
    }

    #[test]
    fn an_event_over_its_bound_is_refused() {
        let limits = SseLimits {
            max_event_bytes: 5,
            ..SseLimits::default()
        };
        // "ab\ncd" is 5 bytes: at the bound.
        assert_eq!(
            parse_with(limits, b"data: ab\ndata: cd\n\n").unwrap(),
            vec![data("ab\ncd")]
        );
        let error = parse_with(limits, b"data: ab\ndata: cde\n\n").unwrap_err();
        assert!(
            error.0.contains("engine.sse.max_event_bytes (5)"),
            "{error}"
        );
    }

    #[test]
    fn limits_read_from_config_with_defaults() {
        let limits: SseLimits = serde_json::from_str(r#"{"max_line_bytes": 64}"#).unwrap();
        assert_eq!(limits.max_line_bytes, 64);
        assert_eq!(limits.max_event_bytes, 8 * 1024 * 1024);
        assert!(serde_json::from_str::<SseLimits>(r#"{"maxLines": 1}"#).is_err());
    }

    #[test]
    fn an_openai_stream_reads_as_its_events() {
        let stream = b"data: {\"choices\":[]}\n\n: ping\n\ndata: [DONE]\n\n";
        assert_eq!(
            parse_split(stream),
            vec![data("{\"choices\":[]}"), data("[DONE]")]
        );
    }
}
