//! Reading a file line by line in bounded memory: a line longer than the caller's cap is kept
//! in part and its full length counted, so a minified file of one huge line costs the cap,
//! not its size.

use std::io::{self, BufRead};

/// How much of a file's start is looked at for a NUL byte, the sign of a binary file (what
/// git and grep look for).
pub const BINARY_PROBE: usize = 8 * 1024;

/// Whether the reader's next bytes (up to [`BINARY_PROBE`] of them, as its buffer holds)
/// hold a NUL. Nothing is consumed.
pub fn looks_binary(reader: &mut impl BufRead) -> io::Result<bool> {
    let head = reader.fill_buf()?;
    Ok(head[..head.len().min(BINARY_PROBE)].contains(&0))
}

/// The next line into `line` (without its `\n`), at most `cap` bytes of it; its whole length,
/// or `None` at the end of the file.
pub fn next_line(
    reader: &mut impl BufRead,
    cap: usize,
    line: &mut Vec<u8>,
) -> io::Result<Option<usize>> {
    line.clear();
    let mut total = 0;
    let mut seen = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(seen.then_some(total));
        }
        seen = true;
        let (taken, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        let room = cap.saturating_sub(line.len());
        line.extend_from_slice(&buf[..taken.min(room)]);
        total += taken;
        reader.consume(taken + usize::from(ended));
        if ended {
            return Ok(Some(total));
        }
    }
}

/// `bytes` as text for the model (invalid UTF-8 replaced), at most `max` bytes of it, never
/// splitting a character.
pub fn shown(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    lembas_core::text::floor_char(&text, max).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8], cap: usize) -> Vec<(Vec<u8>, usize)> {
        let mut reader = io::BufReader::with_capacity(4, text);
        let mut line = Vec::new();
        let mut out = Vec::new();
        while let Some(len) = next_line(&mut reader, cap, &mut line).unwrap() {
            out.push((line.clone(), len));
        }
        out
    }

    #[test]
    fn lines_are_cut_at_the_cap_and_counted_whole() {
        assert_eq!(
            all(b"abcdefghij\nxy\n\nlast", 3),
            vec![
                (b"abc".to_vec(), 10),
                (b"xy".to_vec(), 2),
                (b"".to_vec(), 0),
                (b"las".to_vec(), 4)
            ]
        );
        assert_eq!(all(b"", 3), vec![]);
        assert_eq!(all(b"a\n", 3), vec![(b"a".to_vec(), 1)]);
    }

    #[test]
    fn a_nul_in_the_start_means_binary() {
        assert!(looks_binary(&mut io::BufReader::new(&b"ab\0c"[..])).unwrap());
        assert!(!looks_binary(&mut io::BufReader::new(&b"abc\n"[..])).unwrap());
    }
}
