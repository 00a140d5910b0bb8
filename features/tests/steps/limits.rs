//! The limits of the moment: the device restarted or reconfigured with other `remote:`
//! settings, a session's directory re-pointed, and the mode a turn ran at.

use cucumber::{given, then, when};
use lembas_core::config::Mode;

use super::roots;
use crate::LinkWorld;

fn mode(name: &str) -> Mode {
    Mode::parse(name).unwrap_or_else(|| panic!("`{name}` is not a mode"))
}

#[given(regex = r#"^a device whose remote work is on over "([^"]*)" with the max_mode "([^"]*)"$"#)]
fn remote_with_max_mode(w: &mut LinkWorld, list: String, max: String) {
    let c = w.config_mut();
    c.remote.enabled = true;
    c.remote.roots = roots(&list);
    c.remote.max_mode = mode(&max);
}

#[when("the device restarts from its store with remote work off")]
fn restarts_off(w: &mut LinkWorld) {
    w.pair()
        .restart_device_with(|c| c.remote.enabled = false)
        .expect("the restart settles");
}

#[when(regex = r#"^the device restarts from its store with the roots "([^"]*)"$"#)]
fn restarts_with_roots(w: &mut LinkWorld, list: String) {
    w.pair()
        .restart_device_with(|c| {
            c.remote.roots = roots(&list);
            c.remote.trusted = c.remote.roots.clone();
        })
        .expect("the restart settles");
}

#[when("the device restarts from its store trusting no project")]
fn restarts_trusting_nothing(w: &mut LinkWorld) {
    w.pair()
        .restart_device_with(|c| {
            c.remote.require_trust = true;
            c.remote.trusted.clear();
        })
        .expect("the restart settles");
}

#[when(regex = r#"^the session's directory becomes a symlink to "([^"]*)"$"#)]
fn directory_re_pointed(w: &mut LinkWorld, to: String) {
    let session = w
        .session
        .clone()
        .expect("a step before must open a session");
    let pair = w.pair();
    let status = pair
        .call(
            "_lembas/session/history",
            serde_json::json!({ "sessionId": session }),
        )
        .expect("the session's history");
    let root = status["root"].as_str().expect("a root").to_string();
    pair.os.links.insert(root, Some(to));
}

#[when(regex = r#"^the device's max_mode becomes "([^"]*)" while it runs$"#)]
fn max_mode_lowered(w: &mut LinkWorld, max: String) {
    let pair = w.pair();
    let mut remote = pair.device.config().remote.clone();
    remote.max_mode = mode(&max);
    assert_eq!(pair.device.reconfigure(remote, pair.now), Ok(true));
    pair.settle().expect("the link settles");
}

#[then(regex = r#"^the engine started turn "([^"]+)" in the mode "([^"]*)"$"#)]
fn started_in_mode(w: &mut LinkWorld, turn: String, expected: String) {
    let modes: Vec<Mode> = w
        .built()
        .started
        .iter()
        .filter(|t| t.turn_id == turn)
        .map(|t| t.mode)
        .collect();
    assert_eq!(modes, vec![mode(&expected)], "turn {turn}");
}
