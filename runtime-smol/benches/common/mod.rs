//! What the benches share, `mod common;` in each (benches without the `dev` feature cannot
//! use `tests/common`): a process's figures from `/proc/<pid>/status`.

// Each bench uses its own part of these.
#![allow(dead_code)]

/// A number field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:` in KiB, `Threads:`); `None` once
/// the process is gone or when it has no such field.
pub fn status_field(pid: u32, name: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// A process's resident memory now, in KiB; `None` once it is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmRSS:")
}

/// A process's resident memory now and its peak, in KiB (0 for a field it lacks).
pub fn rss_of(pid: u32) -> (u64, u64) {
    let field = |name| status_field(pid, name).unwrap_or(0);
    (field("VmRSS:"), field("VmHWM:"))
}

/// A process's threads now (0 once it is gone).
pub fn threads_of(pid: u32) -> u64 {
    status_field(pid, "Threads:").unwrap_or(0)
}
