//! Sessions in memory are bounded (`sessions.max_live`): set aside, read back, or refused.

use cucumber::{given, then, when};
use serde_json::json;

use super::handshake::DEFAULT_ROOT;
use super::sessions::{answer, call};
use super::turns::session;
use crate::LinkWorld;

#[given(regex = r"^the device keeps at most (\d+) sessions? in memory$")]
fn max_live(w: &mut LinkWorld, n: usize) {
    w.config_mut().sessions.max_live = n;
}

#[when(regex = r"^the client opens (\d+) more sessions?$")]
fn opens_more(w: &mut LinkWorld, n: usize) {
    for i in 0..n {
        let cwd = format!("{DEFAULT_ROOT}/more-{i}");
        call(w, "session/new", json!({ "cwd": cwd, "mcpServers": [] }));
        if let Err(e) = answer(w) {
            panic!("session/new in {cwd} was refused: {}", e.message);
        }
    }
}

#[then(regex = r"^the device has (\d+) sessions?, (\d+) of them in memory$")]
fn counts(w: &mut LinkWorld, all: usize, live: usize) {
    let device = &w.built().device;
    assert_eq!(device.session_count(), all, "sessions in all");
    assert_eq!(device.live_session_count(), live, "sessions in memory");
}

#[then("the device read the session back from its store")]
fn read_back(w: &mut LinkWorld) {
    let s = session(w);
    assert_eq!(w.built().os.loads, vec![s]);
}

#[then("the device read the session's event log alone, and did not read the session back")]
fn read_log_alone(w: &mut LinkWorld) {
    let s = session(w);
    let os = &w.built().os;
    assert_eq!(os.event_reads, vec![s], "the log read");
    assert!(os.loads.is_empty(), "read back: {:?}", os.loads);
}
