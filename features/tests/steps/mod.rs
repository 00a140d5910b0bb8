//! Step definitions, one file per concern. Helpers shared by them live here.
//!
//! - `handshake`: device set-up, `_lembas/hello`, `initialize`, and the generic
//!   `in <frame>, "<path>" is <json>` assertions.
//! - `versions`: protocol refusals (4400) on both sides, and redialling.
//! - `stdio`: an editor's plain-ACP connection.
//! - `jsonrpc`: raw frames on the link and the errors they are answered with.
//! - `capabilities`: the client's gating of its own calls.
//! - `sessions`: a client with a session, `session/new`'s refusals, a prompt's bounds, and the
//!   answers to calls made through the client.
//! - `turns`: prompts and their answers, the engine's starts, queue, cancel, steer, reattach.
//! - `session_calls`: title, set_mode, history, `steered` ids and attachments, in exact shapes.
//! - `cards`: approvals, questions and plans on the web, a terminal and an editor.
//! - `deletes`: deletes from the client and on the device.
//! - `terminals`: remote terminals on a fake echoing shell.
//! - `limits`: the `remote:` limits of the moment (restarts, reloads, symlinks, max_mode).
//! - `models`: the instance's models, `_lembas/configure`, and the model a turn runs on.
//! - `tools`: the model engine's tool calls, what each mode lets them do, and their cards.
//! - `directories`: the folder chooser (`_lembas/directories`) over a fake disk.
//! - `mentions`: `@path` mentions in a prompt over a fake disk: attachments, refusals, notices.
//! - `files_search`: the `@` picker (`_lembas/files/search`) over a fake disk.
//! - `commands`: the session's command set (`_lembas/commands`, `available_commands_update`)
//!   and `/name` prompts, over command files on a fake disk.
//! - `events`: the session event log (our extension): seqs, and `_lembas/session/events`.
//! - `editor_sessions`: ACP's session surface for an editor: list, load, resume, close, delete.
//! - `history`: `_lembas/session/history` read from the store, `before`, `limit`, the budget.

mod capabilities;
mod cards;
mod commands;
mod compact;
mod deletes;
mod directories;
mod editor_sessions;
mod events;
mod files_search;
mod handshake;
mod history;
mod jsonrpc;
mod limits;
mod live;
mod liveness;
mod mentions;
mod models;
mod rewind;
mod session_calls;
mod sessions;
mod stdio;
mod terminals;
mod tools;
mod turns;
mod undo;
mod versions;

use serde_json::Value;

/// Parse a frame the core wrote, or fail the step saying which.
pub fn parse(frame: &str) -> Value {
    serde_json::from_str(frame)
        .unwrap_or_else(|e| panic!("a frame that is not JSON ({e}): {frame}"))
}

/// Parse a JSON value written in a step (an expectation or a frame's params).
pub fn json_arg(text: &str) -> Value {
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("the step's `{text}` is not JSON: {e}"))
}

/// The value at a dotted path (`result._meta.lembas.limits`, `params.roots.0`), or `None`
/// when a member is missing. A `null` member is `Some(Value::Null)`.
pub fn at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |v, key| match v {
        Value::Object(m) => m.get(key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// `at`, failing the step with the whole frame when the path is missing.
pub fn must_at<'a>(value: &'a Value, path: &str) -> &'a Value {
    at(value, path).unwrap_or_else(|| panic!("no `{path}` in {value}"))
}

/// The method of a frame, if it is a request or a notification.
pub fn method_of(frame: &Value) -> Option<&str> {
    frame.get("method").and_then(Value::as_str)
}

/// The roots of a step, written `"/a, /b"`, or none for `""`.
pub fn roots(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(String::from)
        .collect()
}
