//! The session's command set over the fake OS: command files in the project and the person's
//! configuration, `_lembas/commands`, the `available_commands_update`s the client is sent,
//! and what a `/name` prompt gave the engine.

use cucumber::{given, then, when};
use lembas_core::testing::USER_CONFIG;
use serde_json::{json, Value};

use super::handshake::DEFAULT_ROOT;
use super::roots;
use super::sessions::{answer, call};
use super::turns::session;
use crate::LinkWorld;

/// A file's text as a step writes it: lines separated by `|`, `\e` an escape character and
/// `\rlo` a right-to-left override.
fn lines(text: &str) -> Vec<u8> {
    let text = text.replace("\\e", "\u{1b}").replace("\\rlo", "\u{202e}");
    text.split('|')
        .map(|l| format!("{}\n", l.trim()))
        .collect::<String>()
        .into_bytes()
}

#[given(regex = r#"^the project has the command file "([^"]+)" reading "(.*)"$"#)]
fn project_command(w: &mut LinkWorld, path: String, text: String) {
    let at = format!("{DEFAULT_ROOT}/app/.agent/{path}");
    w.pair().os.files.insert(at, lines(&text));
}

#[given(regex = r#"^the person has the command file "([^"]+)" reading "(.*)"$"#)]
fn person_command(w: &mut LinkWorld, path: String, text: String) {
    let at = format!("{USER_CONFIG}/{path}");
    w.pair().os.files.insert(at, lines(&text));
}

#[given(regex = r#"^"([^"]+)" on the device is a symlink to "([^"]+)"$"#)]
fn symlink(w: &mut LinkWorld, from: String, to: String) {
    w.pair().os.links.insert(from, Some(to));
}

#[given(regex = r"^the device reads at most (\d+) command files?$")]
fn max_files(w: &mut LinkWorld, max: usize) {
    w.config_mut().commands.max_files = max;
}

#[given(regex = r"^the device reads command files of at most (\d+) bytes$")]
fn max_file_bytes(w: &mut LinkWorld, max: u64) {
    w.config_mut().commands.max_file_bytes = max;
}

#[when(regex = r#"^a command file "([^"]+)" appears in the project reading "(.*)"$"#)]
fn appears(w: &mut LinkWorld, path: String, text: String) {
    project_command(w, path, text);
}

#[when("the client asks for the session's commands")]
fn ask_session(w: &mut LinkWorld) {
    let params = json!({ "sessionId": session(w) });
    call(w, "_lembas/commands", params);
}

#[when(regex = r#"^the client asks for the commands of "([^"]+)"$"#)]
fn ask_cwd(w: &mut LinkWorld, cwd: String) {
    call(w, "_lembas/commands", json!({ "cwd": cwd }));
}

fn listed(w: &LinkWorld) -> Vec<Value> {
    let v = answer(w).unwrap_or_else(|e| panic!("_lembas/commands failed: {}", e.message));
    v["commands"]
        .as_array()
        .unwrap_or_else(|| panic!("no commands: {v}"))
        .clone()
}

fn names(commands: &[Value]) -> Vec<String> {
    commands
        .iter()
        .map(|c| c["name"].as_str().expect("a name").to_string())
        .collect()
}

#[then(regex = r#"^the commands answered are "([^"]*)"$"#)]
fn answered(w: &mut LinkWorld, list: String) {
    assert_eq!(names(&listed(w)), roots(&list));
}

#[then(regex = r#"^the command "([^"]+)" is answered as "([^"]+)" described "(.*)"$"#)]
fn described(w: &mut LinkWorld, name: String, kind: String, description: String) {
    let all = listed(w);
    let c = all
        .iter()
        .find(|c| c["name"] == name.as_str())
        .unwrap_or_else(|| panic!("no `{name}` in {all:?}"));
    assert_eq!(c["_meta"]["lembas"]["kind"], json!(kind), "{c}");
    assert_eq!(c["description"], json!(description), "{c}");
}

#[then(
    regex = r#"^the command "([^"]+)" is described in one line of (\d+) characters starting "(.*)"$"#
)]
fn described_capped(w: &mut LinkWorld, name: String, chars: usize, start: String) {
    let all = listed(w);
    let c = all
        .iter()
        .find(|c| c["name"] == name.as_str())
        .unwrap_or_else(|| panic!("no `{name}` in {all:?}"));
    let d = c["description"].as_str().expect("a description");
    assert_eq!(d.chars().count(), chars, "{d}");
    assert!(d.starts_with(&start) && d.ends_with('…'), "{d}");
    assert!(!d.chars().any(char::is_control), "{d:?}");
}

#[given(regex = r#"^the device can also speak to the instance's model "([^"]*)"$"#)]
fn speaks_also(w: &mut LinkWorld, model: String) {
    let models = &mut w.config_mut().models;
    if models.is_empty() {
        models.push(lembas_core::config::Model::served(
            super::sessions::DEFAULT_MODEL,
        ));
    }
    models.push(lembas_core::config::Model::served(model));
}

#[then(regex = r#"^the answer says what was left out: "(.*)"$"#)]
fn left_out(w: &mut LinkWorld, words: String) {
    let v = answer(w).unwrap_or_else(|e| panic!("_lembas/commands failed: {}", e.message));
    let said: Vec<&str> = v["leftOut"]
        .as_array()
        .unwrap_or_else(|| panic!("nothing left out: {v}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(said.iter().any(|s| s.contains(&words)), "{said:?}");
}

/// Every `available_commands_update` the link's client was sent about `session`.
fn command_updates(w: &LinkWorld, session: &str) -> Vec<Value> {
    w.built()
        .frames_to_client()
        .into_iter()
        .filter(|f| {
            f["params"]["sessionId"] == session
                && f["params"]["update"]["sessionUpdate"] == "available_commands_update"
        })
        .collect()
}

/// The command names of every `available_commands_update` the link's client was sent about
/// the session.
fn updates(w: &LinkWorld) -> Vec<Vec<String>> {
    command_updates(w, &session(w))
        .iter()
        .map(|f| {
            names(
                f["params"]["update"]["availableCommands"]
                    .as_array()
                    .unwrap(),
            )
        })
        .collect()
}

/// "once" or "<n> times".
fn count(times: &str) -> usize {
    match times {
        "once" => 1,
        t => t.trim_end_matches(" times").parse().expect("a count"),
    }
}

#[then(regex = r"^the client was sent the session's commands (once|\d+ times)$")]
fn sent_n(w: &mut LinkWorld, times: String) {
    let got = updates(w);
    assert_eq!(got.len(), count(&times), "{got:?}");
}

/// Every `available_commands_update` the link's client was sent about the editor's session.
fn editor_session_sets(w: &LinkWorld) -> Vec<Value> {
    let s = w
        .local_session
        .clone()
        .expect("a step before must open the editor's session");
    command_updates(w, &s)
}

/// Each set's seq of the session; a set without one fails.
fn seqs(sets: &[Value]) -> Vec<u64> {
    sets.iter()
        .map(|f| f["params"]["_meta"]["lembas"]["seq"].as_u64())
        .collect::<Option<_>>()
        .unwrap_or_else(|| panic!("a set without a seq: {sets:?}"))
}

/// Each set carries a seq of the session, each above the one before.
fn assert_sequenced(sets: &[Value]) {
    let seqs = seqs(sets);
    assert!(seqs.windows(2).all(|p| p[0] < p[1]), "{seqs:?}");
}

#[then(
    regex = r#"^the link carried the command set of the editor's session (once|\d+ times), with the session's seqs: "([^"]*)"$"#
)]
fn editor_set_sent(w: &mut LinkWorld, times: String, list: String) {
    let sets = editor_session_sets(w);
    assert_eq!(sets.len(), count(&times), "{sets:?}");
    assert_sequenced(&sets);
    for f in &sets {
        let listed = f["params"]["update"]["availableCommands"]
            .as_array()
            .unwrap();
        assert_eq!(names(listed), roots(&list), "{f}");
    }
}

#[then(
    regex = r#"^the link carried the command set of the editor's session (once|\d+ times), with the session's seqs, the last "([^"]*)"$"#
)]
fn editor_set_last(w: &mut LinkWorld, times: String, list: String) {
    let sets = editor_session_sets(w);
    assert_eq!(sets.len(), count(&times), "{sets:?}");
    assert_sequenced(&sets);
    let last = sets.last().unwrap()["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap();
    assert_eq!(names(last), roots(&list), "{sets:?}");
}

#[then(
    regex = r#"^the link carried the command set of the editor's session (once|\d+ times), the last (\d+) the same event: "([^"]*)"$"#
)]
fn editor_set_again(w: &mut LinkWorld, times: String, again: usize, list: String) {
    let sets = editor_session_sets(w);
    assert_eq!(sets.len(), count(&times), "{sets:?}");
    for f in &sets {
        let listed = f["params"]["update"]["availableCommands"]
            .as_array()
            .unwrap();
        assert_eq!(names(listed), roots(&list), "{f}");
    }
    let last = &sets[sets.len() - again..];
    assert!(last.iter().all(|f| *f == last[0]), "{sets:?}");
    let seqs = seqs(&sets);
    assert!(seqs.windows(2).all(|p| p[0] <= p[1]), "{seqs:?}");
}

#[then("the link carried no command set of the editor's session")]
fn editor_set_not_sent(w: &mut LinkWorld) {
    let sets = editor_session_sets(w);
    assert!(sets.is_empty(), "{sets:?}");
}

#[then(regex = r#"^the last commands sent are "([^"]*)"$"#)]
fn last_sent(w: &mut LinkWorld, list: String) {
    let got = updates(w);
    assert_eq!(got.last(), Some(&roots(&list)), "{got:?}");
}

#[then(regex = r#"^the prompt event of turn "([^"]+)" says "(.*)"$"#)]
fn prompt_event(w: &mut LinkWorld, turn: String, text: String) {
    let events: Vec<Value> = w
        .built()
        .frames_to_client()
        .into_iter()
        .filter(|f| {
            f["params"]["event"]["type"] == "prompt" && f["params"]["event"]["turnId"] == turn
        })
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["params"]["event"]["text"], json!(text));
}

#[then(regex = r#"^the engine started turn "([^"]+)" on the model "([^"]+)"$"#)]
fn on_model(w: &mut LinkWorld, turn: String, model: String) {
    let models: Vec<Option<String>> = w
        .built()
        .started
        .iter()
        .filter(|t| t.turn_id == turn)
        .map(|t| t.model.clone())
        .collect();
    assert_eq!(models, vec![Some(model)], "turn {turn}");
}

#[then(regex = r#"^the session's mode is "([^"]+)"$"#)]
fn mode_is(w: &mut LinkWorld, mode: String) {
    let s = session(w);
    let modes: Vec<Value> = w
        .built()
        .frames_to_client()
        .into_iter()
        .filter(|f| {
            f["params"]["sessionId"] == s.as_str()
                && f["params"]["update"]["sessionUpdate"] == "current_mode_update"
        })
        .map(|f| f["params"]["update"]["currentModeId"].clone())
        .collect();
    assert_eq!(modes.last(), Some(&json!(mode)), "{modes:?}");
}

#[given(regex = r"^the project is in a git work tree (with|without) changes not committed yet$")]
fn work_tree(w: &mut LinkWorld, with: String) {
    let repo = w.pair().os.repos.entry(DEFAULT_ROOT.into()).or_default();
    repo.uncommitted = with == "with";
}

#[given(regex = r#"^its branch (differs from|has no changes against) "([^"]+)"$"#)]
fn branch(w: &mut LinkWorld, how: String, name: String) {
    let repo = w.pair().os.repos.entry(DEFAULT_ROOT.into()).or_default();
    repo.branches.insert(name, how == "differs from");
}

#[given(regex = r#"^git cannot be run on the device: "(.*)"$"#)]
fn git_fails(w: &mut LinkWorld, why: String) {
    w.pair().os.git_fails = Some(why);
}

#[then(regex = r#"^git was asked about "([^"]+)" (\d+) times?$"#)]
fn git_asked(w: &mut LinkWorld, project: String, times: usize) {
    let checks = &w.pair().os.change_checks;
    assert_eq!(checks.len(), times, "{checks:?}");
    assert!(checks.iter().all(|(p, _)| *p == project), "{checks:?}");
}
