//! Where in a JSON text a serde_json error is: the path of the member it is about
//! (`prompt[1].text`), found from the error's line and column by one scan of the text.
//!
//! Decoding a second time under a path-tracking deserializer (serde_path_to_error) would say
//! the same, but builds every params type's decoder twice: 74 KB of the wasm module, and a
//! second pass over a bad frame natively. The scan needs no decoder at all. It is given text
//! serde_json read up to the error, and the frame's depth was bounded before decoding.

enum Level<'a> {
    /// `key` is the member being read; `None` between members.
    Object {
        key: Option<&'a str>,
    },
    Array {
        index: usize,
    },
}

/// The path at serde_json's `line` and `column` (both 1-based) in `text`, written as
/// serde_path_to_error writes it: `a.b[2].c`, or `.` for the whole value.
pub(crate) fn path_at(text: &str, line: usize, column: usize) -> String {
    let end = offset(text, line, column);
    let b = text.as_bytes();
    let mut levels: Vec<Level<'_>> = Vec::new();
    let mut i = 0;
    while i < end {
        match b[i] {
            b'{' => levels.push(Level::Object { key: None }),
            b'[' => levels.push(Level::Array { index: 0 }),
            b'}' | b']' => {
                levels.pop();
            }
            b',' => match levels.last_mut() {
                Some(Level::Array { index }) => *index += 1,
                Some(Level::Object { key }) => *key = None,
                None => {}
            },
            b'"' => {
                let start = i + 1;
                i = start;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                // `i` is at a quote or past the end: a char boundary either way.
                if let Some(Level::Object { key: key @ None }) = levels.last_mut() {
                    *key = text.get(start..i.min(b.len()));
                }
            }
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for level in &levels {
        match level {
            Level::Object { key: Some(k) } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Level::Object { key: None } => {}
            Level::Array { index } => {
                path.push('[');
                path.push_str(&index.to_string());
                path.push(']');
            }
        }
    }
    if path.is_empty() {
        path.push('.');
    }
    path
}

/// The byte offset just past serde_json's `line`:`column`.
fn offset(text: &str, line: usize, column: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match text[start..].find('\n') {
            Some(k) => start += k + 1,
            None => break,
        }
    }
    (start + column).min(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_end(text: &str) -> String {
        path_at(text, 1, text.len())
    }

    #[test]
    fn members_and_indices_nest() {
        assert_eq!(at_end(r#"{"a":{"b":[1,{"c":5"#), "a.b[1].c");
        assert_eq!(at_end(r#"{"a":{"b":[1,2]}"#), "a");
        assert_eq!(at_end(r#"{"a":1}"#), ".");
        assert_eq!(at_end(r#"[1,[2,3"#), "[1][1]");
    }

    #[test]
    fn strings_with_brackets_quotes_and_escapes_are_skipped() {
        assert_eq!(at_end(r#"{"a":"{[\"],","b":"x"#), "b");
        assert_eq!(at_end(r#"{"k\"ey":1"#), r#"k\"ey"#);
        // Unterminated, and an escape at the very end: no panic, the key so far.
        assert_eq!(at_end(r#"{"ab"#), "ab");
        assert_eq!(at_end("{\"a\\"), "a\\");
    }

    #[test]
    fn lines_count_from_one_and_columns_clamp() {
        let text = "{\n \"a\": {\n  \"b\": true";
        assert_eq!(path_at(text, 3, 10), "a.b");
        assert_eq!(path_at(text, 9, 99), "a.b");
        assert_eq!(path_at("é", 1, 1), ".");
    }
}
