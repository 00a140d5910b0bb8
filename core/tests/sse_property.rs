//! Many seeded random server-sent event streams (mixed CR, LF and CRLF line ends, comments,
//! multi-line data, a BOM, multi-byte UTF-8, fields the parser ignores, an unterminated tail):
//! fed whole, a byte at a time, or cut anywhere (inside a CRLF, inside a UTF-8 sequence), the
//! parser gives exactly the events the generator meant, and the same whatever the cuts.
//! And random bytes under small bounds (over-long lines and events, invalid UTF-8): the same
//! events and the same error whatever the cuts, never more held than the bounds allow.

use lembas_core::model::sse::{SseEvent, SseLimits, SseParser};
use lembas_core::rng::Rng;

mod property;

/// A stream and what it means: its events, and whether it ends inside an event or a line.
struct Stream {
    bytes: Vec<u8>,
    events: Vec<SseEvent>,
    unterminated: bool,
}

struct Writer {
    rng: Rng,
    bytes: Vec<u8>,
    /// The last line ended with a lone CR: a blank line next must not end with LF, which
    /// would join that CR into one CRLF line end.
    after_cr: bool,
}

impl Writer {
    fn line(&mut self, text: &str) {
        self.bytes.extend_from_slice(text.as_bytes());
        let mut end = self.rng.below(3);
        if self.after_cr && text.is_empty() && end == 0 {
            end = 1 + self.rng.below(2);
        }
        self.bytes
            .extend_from_slice([&b"\n"[..], b"\r", b"\r\n"][end as usize]);
        self.after_cr = end == 1;
    }

    fn text(&mut self, max: u64) -> String {
        const PIECES: &[&str] = &[
            "a",
            "Z",
            "7",
            " ",
            ":",
            "{\"k\":1}",
            "é",
            "✓",
            "中",
            "𝄞",
            "\u{FEFF}",
            "data",
            "\t",
        ];
        (0..self.rng.below(max + 1))
            .map(|_| PIECES[self.rng.below(PIECES.len() as u64) as usize])
            .collect()
    }

    /// `field: value` in one of the ways that mean `value` (the space after the colon is
    /// optional unless the value starts with a space).
    fn field(&mut self, name: &str, value: &str) {
        if value.is_empty() && self.rng.below(3) == 0 {
            return self.line(name);
        }
        let space = if value.starts_with(' ') || self.rng.below(2) == 0 {
            " "
        } else {
            ""
        };
        self.line(&format!("{name}:{space}{value}"));
    }

    fn maybe_noise(&mut self) {
        match self.rng.below(8) {
            0 => {
                let text = self.text(6);
                self.line(&format!(":{text}"));
            }
            1 => self.line("retry: 3000"),
            2 => {
                let text = self.text(4);
                self.field("x-unknown", &text);
            }
            _ => {}
        }
    }
}

fn generate(seed: u64) -> Stream {
    let mut w = Writer {
        rng: Rng::new(seed),
        bytes: Vec::new(),
        after_cr: false,
    };
    if w.rng.below(3) == 0 {
        w.bytes.extend_from_slice("\u{FEFF}".as_bytes());
    }
    let mut events = Vec::new();
    let mut last_id: Option<String> = None;
    for _ in 0..w.rng.below(12) {
        // Blank lines and comments between events dispatch nothing.
        for _ in 0..w.rng.below(3) {
            match w.rng.below(2) {
                0 => w.line(""),
                _ => {
                    let text = w.text(5);
                    w.line(&format!(": {text}"));
                }
            }
        }
        let mut event = None;
        if w.rng.below(3) == 0 {
            let name = w.text(3);
            w.field("event", &name);
            event = (!name.is_empty()).then_some(name);
        }
        if w.rng.below(4) == 0 {
            let id = w.text(3);
            w.field("id", &id);
            last_id = (!id.is_empty()).then_some(id);
        }
        // Some events carry no data and so dispatch nothing (their id still counts).
        let lines = w.rng.below(5);
        let mut data = Vec::new();
        for _ in 0..lines {
            w.maybe_noise();
            let text = w.text(12);
            w.field("data", &text);
            data.push(text);
        }
        w.maybe_noise();
        w.line("");
        if lines > 0 {
            events.push(SseEvent {
                event,
                data: data.join("\n"),
                id: last_id.clone(),
            });
        }
    }
    let unterminated = match w.rng.below(4) {
        0 => {
            let text = w.text(8);
            w.field("data", &text);
            true
        }
        1 => {
            let text = w.text(8);
            w.bytes
                .extend_from_slice(format!("data: {text}").as_bytes());
            true
        }
        _ => false,
    };
    Stream {
        bytes: w.bytes,
        events,
        unterminated,
    }
}

/// Feeds `bytes` in pieces ending at `cuts`, checking the parser stays within its bound.
fn feed(bytes: &[u8], cuts: &[usize]) -> (Vec<SseEvent>, bool) {
    let limits = SseLimits::default();
    let mut parser = SseParser::new(limits);
    let mut out = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&bytes.len())) {
        parser
            .feed(&bytes[start..end], &mut out)
            .unwrap_or_else(|e| panic!("feeding {start}..{end}: {e}"));
        assert!(parser.buffered() <= limits.max_line_bytes + limits.max_event_bytes);
        start = end;
    }
    let unterminated = parser.finish();
    (out, unterminated)
}

fn run(seed: u64) {
    let stream = generate(seed);
    let bytes = &stream.bytes;
    let whole = feed(bytes, &[]);
    assert_eq!(
        whole.0,
        stream.events,
        "fed whole: {:?}",
        String::from_utf8_lossy(bytes)
    );
    assert_eq!(whole.1, stream.unterminated, "finish() after a whole feed");

    let every_byte: Vec<usize> = (1..bytes.len()).collect();
    assert_eq!(feed(bytes, &every_byte), whole, "one byte at a time");

    let mut rng = Rng::new(seed ^ 0x5EED_C075);
    for _ in 0..8 {
        let mut cuts: Vec<usize> = (0..rng.below(12))
            .map(|_| rng.below(bytes.len() as u64 + 1) as usize)
            .collect();
        cuts.sort_unstable();
        assert_eq!(feed(bytes, &cuts), whole, "cut at {cuts:?}");
    }
}

/// 300 seeds, or as `property::seeds` says (`LEMBAS_PROPERTY_SEEDS`,
/// `LEMBAS_PROPERTY_SEED_OFFSET`, `LEMBAS_PROPERTY_SEED`).
#[test]
fn any_split_gives_the_events_the_stream_means() {
    if let Some(seed) = property::seeds(&[], 300, run) {
        let stream = generate(seed);
        eprintln!("seed {seed}: {:?}", String::from_utf8_lossy(&stream.bytes));
        eprintln!("meant: {:#?}", stream.events);
        run(seed);
    }
}

/// Bytes a hostile or broken server might send: pieces of fields and line ends, split and
/// invalid UTF-8, long runs.
fn garbage(rng: &mut Rng) -> Vec<u8> {
    const PIECES: &[&[u8]] = &[
        b"data:",
        b"data: ",
        b"event:",
        b"id:",
        b":",
        b" ",
        b"\r",
        b"\n",
        b"\r\n",
        b"\n\n",
        b"a",
        b"\xC3\xA9",
        b"\xEF\xBB\xBF",
        b"\0",
        b"xxxxxxxxxxxxxxxx",
    ];
    // Rarer, so that most streams get some way before they break.
    const BROKEN: &[&[u8]] = &[b"\xC3", b"\xA9", b"\xFF", b"\xE2\x9C"];
    let mut bytes = Vec::new();
    for _ in 0..rng.below(300) {
        let piece = if rng.below(100) == 0 {
            BROKEN[rng.below(BROKEN.len() as u64) as usize]
        } else {
            PIECES[rng.below(PIECES.len() as u64) as usize]
        };
        let repeat = if rng.below(20) == 0 {
            1 + rng.below(8)
        } else {
            1
        };
        for _ in 0..repeat {
            bytes.extend_from_slice(piece);
        }
    }
    bytes
}

fn feed_garbage(
    limits: SseLimits,
    bytes: &[u8],
    cuts: &[usize],
) -> (Vec<SseEvent>, Result<(), String>) {
    let mut parser = SseParser::new(limits);
    let mut out = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let fed = parser.feed(&bytes[start..end], &mut out);
        assert!(parser.buffered() <= limits.max_line_bytes + limits.max_event_bytes);
        if let Err(error) = fed {
            // Dead from now on, with the same error.
            assert_eq!(parser.feed(b"data: more\n\n", &mut out), Err(error.clone()));
            return (out, Err(error.0));
        }
        start = end;
    }
    parser.finish();
    (out, Ok(()))
}

fn run_garbage(seed: u64) {
    let mut rng = Rng::new(seed);
    let limits = SseLimits {
        max_line_bytes: 1 + rng.below(160) as usize,
        max_event_bytes: rng.below(200) as usize,
    };
    let bytes = garbage(&mut rng);
    let whole = feed_garbage(limits, &bytes, &[]);
    let every_byte: Vec<usize> = (1..bytes.len()).collect();
    assert_eq!(
        feed_garbage(limits, &bytes, &every_byte),
        whole,
        "one byte at a time, {limits:?}: {:?}",
        String::from_utf8_lossy(&bytes)
    );
    for _ in 0..8 {
        let mut cuts: Vec<usize> = (0..rng.below(12))
            .map(|_| rng.below(bytes.len() as u64 + 1) as usize)
            .collect();
        cuts.sort_unstable();
        assert_eq!(
            feed_garbage(limits, &bytes, &cuts),
            whole,
            "cut at {cuts:?}, {limits:?}: {:?}",
            String::from_utf8_lossy(&bytes)
        );
    }
}

/// 300 seeds, as above.
#[test]
fn garbage_gives_the_same_events_and_error_whatever_the_cuts() {
    if let Some(seed) = property::seeds(&[], 300, run_garbage) {
        run_garbage(seed);
    }
}
