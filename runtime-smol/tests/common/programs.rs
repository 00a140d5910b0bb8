//! Programs a test needs from the machine (shells, node): a test whose program is missing says
//! in one line what it skipped and how to install it, and passes, so `cargo test --workspace`
//! passes on a fresh machine. With [`REQUIRED`] set (`.ci/run` sets it) the skip is a failure
//! instead, so CI runs every one of them.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Set (to anything) to make a missing program fail the test instead of skipping it.
pub const REQUIRED: &str = "LEMBAS_TEST_PROGRAMS_REQUIRED";

/// The first executable `name` on `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|path| {
            path.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `name` on `PATH`, else `None` after the skip line naming the running test, what is missing
/// and `install` (how to get it); a panic saying the same when [`REQUIRED`] is set.
pub fn require(name: &str, install: &str) -> Option<PathBuf> {
    let found = on_path(name);
    if found.is_none() {
        missing(&format!("{name} is not installed"), install);
    }
    found
}

/// The skip (or, with [`REQUIRED`] set, the failure) for something missing other than a program
/// on `PATH`, such as an npm package: `what` says what is missing, `install` how to get it.
pub fn missing(what: &str, install: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    if std::env::var_os(REQUIRED).is_some_and(|v| !v.is_empty() && v != OsStr::new("0")) {
        panic!("{test} cannot run: {what} ({install}); {REQUIRED} is set, so this fails instead of skipping");
    }
    // Straight to the process's stderr: libtest captures `eprintln!` in a passing test, and a
    // skip nobody sees would pass for a run.
    let _ = writeln!(std::io::stderr(), "skipped {test}: {what} ({install})");
}
