//! Path confinement, lexically (before anything is read) and again on the resolved path the
//! shell reports after following symlinks. Paths are `/`-separated and absolute.

/// `path` made canonical without touching a disk: `.` and empty segments dropped, `..` taken
/// back (never above `/`). `None` for a path that is not absolute or holds a NUL.
pub fn normalize(path: &str) -> Option<String> {
    if !path.starts_with('/') || path.contains('\0') {
        return None;
    }
    Some(join_root(&fold(path).0))
}

/// `path`'s segments with `.` and empty ones dropped and each `..` taking one back, and whether
/// a `..` had nothing to take back (it went above the start).
pub(crate) fn fold(path: &str) -> (Vec<&str>, bool) {
    let mut parts: Vec<&str> = Vec::new();
    let mut above = false;
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => above |= parts.pop().is_none(),
            s => parts.push(s),
        }
    }
    (parts, above)
}

/// `/` and the segments.
pub(crate) fn join_root(parts: &[&str]) -> String {
    format!("/{}", parts.join("/"))
}

/// Whether `path` is `dir` or below it (both normalized).
pub fn inside(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir
        || dir.is_empty()
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The first of `dirs` that holds `path`.
pub fn within<'a>(path: &str, dirs: &'a [String]) -> Option<&'a str> {
    dirs.iter().map(String::as_str).find(|d| inside(path, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize("/a/./b//c/../d").as_deref(), Some("/a/b/d"));
        assert_eq!(normalize("/../../etc").as_deref(), Some("/etc"));
        assert_eq!(normalize("relative/x"), None);
        assert_eq!(normalize("/a\0b"), None);
    }

    #[test]
    fn inside_means_below_a_separator() {
        assert!(inside("/home/dev/work/x", "/home/dev/work"));
        assert!(inside("/home/dev/work", "/home/dev/work/"));
        assert!(!inside("/home/dev/workshop", "/home/dev/work"));
        assert!(inside("/anything", "/"));
    }
}
