//! Cutting text to a byte bound without splitting a character: history answers, error words,
//! close reasons and log lines all need it.

/// The longest start of `text` within `max` bytes, ending on a character boundary.
pub fn floor_char(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::floor_char;

    #[test]
    fn a_cut_never_splits_a_character() {
        let s = "aé☃";
        assert_eq!(floor_char(s, 10), s);
        assert_eq!(floor_char(s, 3), "aé");
        assert_eq!(floor_char(s, 2), "a");
        assert_eq!(floor_char(s, 5), "aé");
        assert_eq!(floor_char(s, 0), "");
    }
}
