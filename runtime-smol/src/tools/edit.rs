//! `edit`: replace the one occurrence of `old` in a file with `new`. No occurrence, or more
//! than one, is refused saying how many, and nothing is changed: the model must name the
//! place it means without doubt.

use lembas_core::engine_io::IoReply;

use super::write::changed;
use super::{text_file, Confined};

pub fn edit(
    place: &Confined,
    given: &str,
    old: &str,
    new: &str,
    max_bytes: u64,
) -> Result<IoReply, String> {
    if old.is_empty() {
        return Err(format!(
            "the text to replace in `{given}` is empty: give the text to replace"
        ));
    }
    let text = text_file::read_text(&place.path, given, max_bytes)?;
    let count = occurrences(&text, old);
    if count != 1 {
        let times = if count == 0 {
            "does not occur".to_string()
        } else {
            format!("occurs {count} times")
        };
        return Err(format!(
            "the text to replace {times} in `{given}` (it must occur exactly once: give more \
             of the text around it); nothing was changed"
        ));
    }
    let edited = text.replacen(old, new, 1);
    text_file::write_text(&place.path, given, &edited)?;
    let said = format!("edited `{given}`: one occurrence replaced");
    Ok(changed(place, said, Some(text), edited))
}

/// How many times `old` occurs in `text`, overlapping ones counted (`aa` is twice in `aaa`:
/// which one is meant is in doubt).
fn occurrences(text: &str, old: &str) -> usize {
    let step = old.chars().next().map_or(1, char::len_utf8);
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = text[from..].find(old) {
        count += 1;
        from += at + step;
    }
    count
}

#[cfg(test)]
mod tests {
    #[test]
    fn overlapping_occurrences_count() {
        assert_eq!(super::occurrences("aaa", "aa"), 2);
        assert_eq!(super::occurrences("éaéa", "éa"), 2);
        assert_eq!(super::occurrences("abc", "x"), 0);
    }
}
