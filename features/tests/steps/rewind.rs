//! `_lembas/session/rewind`: the call.

use cucumber::when;
use serde_json::json;

use super::sessions::call;
use super::turns::session;
use crate::LinkWorld;

#[when(regex = r#"^the client rewinds the session to turn "([^"]*)"$"#)]
fn rewinds(w: &mut LinkWorld, turn: String) {
    let params = json!({ "sessionId": session(w), "turnId": turn });
    call(w, "_lembas/session/rewind", params);
}
