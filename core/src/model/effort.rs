//! A session's reasoning effort: a level, or `"off"`, sent as the chat request's reasoning
//! effort. The spec says only "a level or `off`" and names no levels; these are the
//! reasoning-effort levels OpenAI-compatible servers take, lowest first.

/// Every value `effort` may take, as a refusal lists them.
pub const EFFORTS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/// `effort` if it is one of [`EFFORTS`], else the reason, naming them.
pub fn check(effort: &str) -> Result<(), String> {
    if EFFORTS.contains(&effort) {
        Ok(())
    } else {
        Err(format!(
            "effort `{}` is not one of {}",
            effort.escape_debug(),
            EFFORTS.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_off_are_taken_anything_else_is_refused_naming_them() {
        for e in EFFORTS {
            assert_eq!(check(e), Ok(()));
        }
        for bad in ["", "HIGH", "max", "off "] {
            let why = check(bad).unwrap_err();
            assert!(
                why.contains("is not one of off, minimal, low, medium, high, xhigh"),
                "{why}"
            );
        }
    }
}
