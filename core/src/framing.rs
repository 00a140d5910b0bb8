//! Stdio framing: one JSON-RPC message a line. Bytes go in as they arrive, in pieces of any
//! size; whole lines come out, the same whatever the pieces were. A line over the limit is
//! reported once with its size and skipped to its end, never buffered whole.

use std::collections::VecDeque;

/// One item read from the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its `\n` (and without a `\r` before it).
    Frame(Vec<u8>),
    /// A line longer than the limit was dropped; `size` is its length up to the limit's
    /// crossing or, once its end was seen, its whole length.
    TooLong { size: usize, limit: usize },
}

#[derive(Debug)]
pub struct LineReader {
    limit: usize,
    buf: Vec<u8>,
    /// Inside an over-long line: skipping to its `\n`, having seen this many bytes of it.
    skipping: Option<usize>,
    ready: VecDeque<Line>,
}

impl LineReader {
    pub fn new(limit: usize) -> Self {
        LineReader {
            limit,
            buf: Vec::new(),
            skipping: None,
            ready: VecDeque::new(),
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = memchr::memchr(b'\n', bytes);
            let (chunk, rest) = match newline {
                Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
                None => (bytes, None),
            };
            if let Some(seen) = self.skipping.as_mut() {
                *seen += chunk.len();
                if rest.is_some() {
                    let size = *seen;
                    self.skipping = None;
                    self.ready.push_back(Line::TooLong {
                        size,
                        limit: self.limit,
                    });
                }
            } else if self.buf.len() + chunk.len() > self.limit {
                self.skipping = Some(self.buf.len() + chunk.len());
                self.buf.clear();
                if rest.is_some() {
                    let size = self.skipping.take().unwrap_or_default();
                    self.ready.push_back(Line::TooLong {
                        size,
                        limit: self.limit,
                    });
                }
            } else {
                self.buf.extend_from_slice(chunk);
                if rest.is_some() {
                    let mut line = std::mem::take(&mut self.buf);
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    // Blank lines between messages carry nothing.
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        self.ready.push_back(Line::Frame(line));
                    }
                }
            }
            bytes = rest.unwrap_or(&[]);
        }
    }

    #[must_use]
    pub fn next_line(&mut self) -> Option<Line> {
        self.ready.pop_front()
    }

    /// Bytes held of a line not yet ended (what EOF would cut off).
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Inside an over-long line, skipping to its end.
    pub fn skipping(&self) -> bool {
        self.skipping.is_some()
    }

    /// Hand the rest of the stream to someone else: the bytes of the line not yet ended, which
    /// this reader forgets. Whole lines still to be taken stay with it.
    pub fn take_pending(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(reader: &mut LineReader) -> Vec<Line> {
        std::iter::from_fn(|| reader.next_line()).collect()
    }

    #[test]
    fn whole_and_byte_at_a_time_give_the_same_lines() {
        let input = b"{\"a\":1}\r\n\n{\"b\":2}\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n{\"c\":3}\npartial";
        let mut whole = LineReader::new(16);
        whole.push(input);
        let mut bytewise = LineReader::new(16);
        for b in input.iter() {
            bytewise.push(std::slice::from_ref(b));
        }
        let a = read(&mut whole);
        assert_eq!(a, read(&mut bytewise));
        assert_eq!(
            a,
            vec![
                Line::Frame(b"{\"a\":1}".to_vec()),
                Line::Frame(b"{\"b\":2}".to_vec()),
                Line::TooLong {
                    size: 39,
                    limit: 16
                },
                Line::Frame(b"{\"c\":3}".to_vec()),
            ]
        );
        assert_eq!(whole.pending(), 7);
    }
}
