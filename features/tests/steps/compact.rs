//! `/compact` and `_lembas/session/compact`: what the engine was asked to fold, the summary a
//! later turn is given in place of the folded turns, and its bound.

use cucumber::{given, then, when};
use lembas_core::engine::TurnStart;
use lembas_core::testing::Dir;
use serde_json::json;

use super::sessions::call;
use super::turns::session;
use super::{method_of, parse};
use crate::LinkWorld;

#[given(regex = r"^the device keeps summaries of at most (\d+) bytes$")]
fn max_summary(w: &mut LinkWorld, bytes: usize) {
    w.config_mut().sessions.max_summary_bytes = bytes;
}

#[when("the client compacts the session")]
fn compacts(w: &mut LinkWorld) {
    let params = json!({ "sessionId": session(w) });
    call(w, "_lembas/session/compact", params);
}

/// The engine's compactions, oldest first.
fn compactions(w: &LinkWorld) -> Vec<TurnStart> {
    w.built()
        .started
        .iter()
        .filter(|t| t.compact)
        .cloned()
        .collect()
}

/// `"a" | "b"` as a step writes a list of prompts; `nothing` for none.
fn prompts_of(list: &str) -> Vec<String> {
    if list == "nothing" {
        return Vec::new();
    }
    list.split(" | ").map(str::to_string).collect()
}

fn summary_of(said: &str) -> Option<String> {
    (said != "none").then(|| said.to_string())
}

#[then(regex = r#"^the engine was asked (\d+) compactions?$"#)]
fn asked_n(w: &mut LinkWorld, n: usize) {
    let got = compactions(w);
    assert_eq!(got.len(), n, "{got:?}");
}

#[then(regex = r#"^the engine was last asked to fold "(.*)" after the summary "(.*)"$"#)]
fn asked_to_fold(w: &mut LinkWorld, list: String, summary: String) {
    let got = compactions(w);
    let last = got.last().expect("the engine was asked no compaction");
    let folded: Vec<String> = last.history.iter().map(|t| t.prompt.clone()).collect();
    assert_eq!(folded, prompts_of(&list), "{last:?}");
    assert_eq!(last.summary, summary_of(&summary), "{last:?}");
}

#[then(
    regex = r#"^the engine started turn "([^"]+)" with the summary "(.*)" and the earlier turns "(.*)"$"#
)]
fn started_with(w: &mut LinkWorld, turn: String, summary: String, list: String) {
    let pair = w.built();
    let start = pair
        .started
        .iter()
        .rfind(|t| t.turn_id == turn)
        .unwrap_or_else(|| panic!("turn {turn} never started"));
    let earlier: Vec<String> = start.history.iter().map(|t| t.prompt.clone()).collect();
    assert_eq!(start.summary, summary_of(&summary), "turn {turn}");
    assert_eq!(earlier, prompts_of(&list), "turn {turn}");
}

#[then(regex = r#"^no message chunk on the link says "(.*)"$"#)]
fn no_chunk_says(w: &mut LinkWorld, words: String) {
    let chunks: Vec<String> = w
        .link_frames(Dir::ToClient)
        .into_iter()
        .map(|(_, f)| parse(&f))
        .filter(|f| method_of(f) == Some("session/update"))
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| {
            f["params"]["update"]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .filter(|t| t.contains(&words))
        .collect();
    assert!(chunks.is_empty(), "{chunks:?}");
}
