//! `@path` mentions in what a person typed, found on text alone (the reading is the shell's,
//! `Effect::ReadMentions`). The spec's forms: `@src/a.rs` a file, `@src/a.rs#10-20` (or
//! `#10`) its lines, `@docs/` a directory's listing; a space or a `#` in a name is escaped
//! with a backslash (`@my\ notes.md`, `@a\#b.md`), as the TUI's picker writes it.
//!
//! A mention starts with an `@` at the start of the text or after whitespace (so `a@b.com` is
//! no mention) and runs to the next unescaped whitespace; punctuation that ends a sentence
//! (`.,;:!?)` and quotes), unescaped, is not part of it. An unescaped `#` followed by digits at
//! the end is a line range; any other `#` is part of the name.

use serde::{Deserialize, Serialize};

/// One `@path` found in a text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mention {
    /// The mention as typed, `@` and escapes included (what the person sees).
    pub written: String,
    /// The path, escapes undone: relative to the session's directory, or absolute.
    pub path: String,
    /// Lines `first..=last` (from 1) for `#first-last`, `first..=first` for `#first`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<(u64, u64)>,
    /// Written with a trailing `/`: a directory, to be listed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dir: bool,
}

/// The mentions of a text, in order; a repeated one (same path and lines) once.
pub fn find(text: &str) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    let mut prev: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let at_start = prev.is_none_or(char::is_whitespace);
        prev = Some(c);
        if c != '@' || !at_start {
            continue;
        }
        let rest = &text[i + 1..];
        let end = token_end(rest);
        if let Some(m) = parse(&rest[..end]) {
            if !found
                .iter()
                .any(|f| f.path == m.path && f.lines == m.lines && f.dir == m.dir)
            {
                found.push(m);
            }
        }
        // Skip the token: an `@` inside it starts nothing.
        while chars.peek().is_some_and(|(j, _)| *j < i + 1 + end) {
            prev = chars.next().map(|(_, c)| c);
        }
    }
    found
}

/// Where the token after an `@` ends: the first unescaped whitespace.
fn token_end(rest: &str) -> usize {
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c.is_whitespace() {
            return i;
        }
    }
    rest.len()
}

/// A token (what followed the `@`) made a mention, or nothing when no path is left.
fn parse(token: &str) -> Option<Mention> {
    // Trailing sentence punctuation, unescaped, is not the path's.
    let mut token = token;
    while let Some(last) = token.chars().last() {
        let body = &token[..token.len() - last.len_utf8()];
        if matches!(last, '.' | ',' | ';' | ':' | '!' | '?' | ')' | '"' | '\'')
            && !body.ends_with('\\')
            && body != "."
            && !body.is_empty()
        {
            token = body;
        } else {
            break;
        }
    }
    let (name, lines) = split_range(token);
    let path = unescape(name);
    if path.is_empty() || path.contains('\0') {
        return None;
    }
    let dir = path.ends_with('/') && lines.is_none();
    Some(Mention {
        written: format!("@{token}"),
        path,
        lines,
        dir,
    })
}

/// `name#10-20` into its name and range, when the last unescaped `#` is followed by digits
/// (and `-digits`) to the end.
fn split_range(token: &str) -> (&str, Option<(u64, u64)>) {
    let Some(hash) = token.rfind('#') else {
        return (token, None);
    };
    let escaped = token[..hash].ends_with('\\') && !token[..hash].ends_with("\\\\");
    if escaped {
        return (token, None);
    }
    let spec = &token[hash + 1..];
    let (first, last) = match spec.split_once('-') {
        Some((a, b)) => (a, b),
        None => (spec, spec),
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(first) || !digits(last) {
        return (token, None);
    }
    let (Ok(first), Ok(last)) = (first.parse(), last.parse()) else {
        return (token, None);
    };
    (&token[..hash], Some((first, last)))
}

/// `\ ` is a space and `\#` a `#`; any other backslash stays as it is.
fn unescape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some(' ' | '#')) {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// What became of one mention, as the shell read it (`Input::MentionsRead`, one per mention
/// asked, in order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum MentionRead {
    /// A file: its real path (symlinks followed), its bytes (the lines asked for, or the
    /// whole file, at most the bound), and its whole size. `text`: UTF-8 without NUL bytes.
    File {
        real: String,
        #[serde(with = "base64_bytes")]
        bytes: Vec<u8>,
        size: u64,
        text: bool,
        /// For a range: how many lines the file has (a range past its end is said).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lines_total: Option<u64>,
    },
    /// A directory: its real path, its entries' names (a directory's with a trailing `/`),
    /// the first by name, and how many it has in all.
    Listing {
        real: String,
        entries: Vec<String>,
        total: u64,
    },
    /// Not read: why (outside the project or the roots, protected, missing, …).
    Refused { reason: String },
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

/// Whether bytes read of a file are text: UTF-8 with no NUL byte (a character cut at the end
/// by a bound is allowed).
pub fn is_text(bytes: &[u8]) -> bool {
    if bytes.contains(&0) {
        return false;
    }
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

/// A file's content in memory read as a mention asks: its lines `first..=last` when a range
/// is asked (and how many lines it has), at most `max` bytes of that.
pub fn read_content(
    real: String,
    content: &[u8],
    lines: Option<(u64, u64)>,
    max: u64,
) -> MentionRead {
    let (picked, lines_total) = match lines {
        None => (content, None),
        Some((first, last)) => {
            let mut start = content.len();
            let mut end = content.len();
            let mut n = 0u64;
            let mut at = 0usize;
            for line in content.split_inclusive(|b| *b == b'\n') {
                n += 1;
                if n == first {
                    start = at;
                }
                at += line.len();
                if n == last {
                    end = at;
                }
            }
            let start = start.min(end);
            (&content[start..end], Some(n))
        }
    };
    let size = picked.len() as u64;
    let kept = &picked[..picked.len().min(usize::try_from(max).unwrap_or(usize::MAX))];
    MentionRead::File {
        real,
        bytes: kept.to_vec(),
        size,
        text: is_text(kept),
        lines_total,
    }
}

/// The mime type of an image a mention may attach for vision, by the file's extension.
pub fn image_mime(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    match ext.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "webp" => Some("image/webp"),
        "gif" => Some("image/gif"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mention's path, lines and whether it is a listing.
    type Found = (String, Option<(u64, u64)>, bool);

    fn paths(text: &str) -> Vec<Found> {
        find(text)
            .into_iter()
            .map(|m| (m.path, m.lines, m.dir))
            .collect()
    }

    fn p(path: &str) -> Found {
        (path.into(), None, false)
    }

    #[test]
    fn a_mention_starts_after_whitespace_and_ends_at_whitespace() {
        assert_eq!(paths("see @src/a.rs now"), [p("src/a.rs")]);
        assert_eq!(paths("@a.md"), [p("a.md")]);
        assert!(paths("mail a@b.com").is_empty());
        assert!(paths("just @ alone").is_empty());
        assert_eq!(paths("two @a @b"), [p("a"), p("b")]);
        assert_eq!(
            paths("again @a and @a"),
            [p("a")],
            "a repeat is attached once"
        );
    }

    #[test]
    fn escapes_keep_a_space_and_a_hash_in_the_name() {
        assert_eq!(paths(r"@my\ notes.md please"), [p("my notes.md")]);
        assert_eq!(paths(r"@a\#b.md"), [p("a#b.md")]);
        assert_eq!(paths(r"@a\#10"), [p("a#10")], "an escaped # is no range");
        assert_eq!(paths(r"@a\b"), [p(r"a\b")], "another backslash stays");
        assert_eq!(find(r"@my\ notes.md")[0].written, r"@my\ notes.md");
    }

    #[test]
    fn a_hash_and_digits_at_the_end_is_a_line_range() {
        assert_eq!(
            paths("@c.md#10-20"),
            [("c.md".into(), Some((10, 20)), false)]
        );
        assert_eq!(paths("@c.md#7"), [("c.md".into(), Some((7, 7)), false)]);
        assert_eq!(
            paths("@c#d.md"),
            [p("c#d.md")],
            "a # before no digits is the name's"
        );
        assert_eq!(paths("@c.md#10-x"), [p("c.md#10-x")]);
    }

    #[test]
    fn a_trailing_slash_is_a_listing_and_punctuation_ends_a_sentence() {
        assert_eq!(paths("look at @docs/."), [("docs/".into(), None, true)]);
        assert_eq!(paths("(see @a.rs)"), [p("a.rs")]);
        assert_eq!(paths("(@a.rs)"), [], "an @ after ( starts nothing");
        assert_eq!(paths("see @a.rs, @b.rs!"), [p("a.rs"), p("b.rs")]);
        assert_eq!(paths("@./"), [("./".into(), None, true)]);
        assert_eq!(paths("@.."), [p("..")]);
        assert_eq!(paths("@/etc/passwd"), [p("/etc/passwd")]);
    }

    #[test]
    fn a_range_picks_its_lines_and_counts_them_all() {
        let text = b"one\ntwo\nthree\nfour";
        let read = |lines, max| match read_content("/w/a".into(), text, lines, max) {
            MentionRead::File {
                bytes,
                size,
                lines_total,
                ..
            } => (String::from_utf8(bytes).unwrap(), size, lines_total),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            read(Some((2, 3)), 100),
            ("two\nthree\n".into(), 10, Some(4))
        );
        assert_eq!(read(Some((4, 9)), 100), ("four".into(), 4, Some(4)));
        assert_eq!(read(Some((7, 9)), 100), ("".into(), 0, Some(4)));
        assert_eq!(read(None, 5), ("one\nt".into(), 18, None));
        assert!(!is_text(b"a\0b") && is_text(&"é".as_bytes()[..1]) && !is_text(b"\xff\xfe"));
    }

    #[test]
    fn a_read_round_trips_through_json() {
        let reads = vec![
            MentionRead::File {
                real: "/w/a".into(),
                bytes: vec![0, 1, 255],
                size: 3,
                text: false,
                lines_total: Some(2),
            },
            MentionRead::Listing {
                real: "/w".into(),
                entries: vec!["a".into(), "d/".into()],
                total: 2,
            },
            MentionRead::Refused {
                reason: "no".into(),
            },
        ];
        let text = serde_json::to_string(&reads).unwrap();
        assert!(text.contains(r#""bytes":"AAH/""#), "{text}");
        let back: Vec<MentionRead> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, reads);
    }
}
