//! `/undo`: what the fake shell says it did with a turn's files, and which turns it was asked
//! to undo.

use cucumber::{given, then, when};
use lembas_core::device::{FileKept, FilesUndone};

use crate::LinkWorld;

/// `"a, b"` as a step writes a list; `""` for none.
fn list(text: &str) -> Vec<String> {
    text.split(", ")
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

#[given(regex = r#"^the shell puts back "([^"]*)" for turn "([^"]+)"$"#)]
fn puts_back(w: &mut LinkWorld, files: String, turn: String) {
    let undone = FilesUndone {
        restored: list(&files),
        kept: Vec::new(),
    };
    w.pair().os.undo_files.insert(turn, Ok(undone));
}

#[given(
    regex = r#"^the shell puts back "([^"]*)" for turn "([^"]+)" and leaves "([^"]+)" as "([^"]+)"$"#
)]
fn puts_back_leaving(w: &mut LinkWorld, files: String, turn: String, left: String, why: String) {
    let undone = FilesUndone {
        restored: list(&files),
        kept: vec![FileKept { path: left, why }],
    };
    w.pair().os.undo_files.insert(turn, Ok(undone));
}

#[given(regex = r#"^the shell cannot put back the files of turn "([^"]+)": "([^"]+)"$"#)]
fn cannot_put_back(w: &mut LinkWorld, turn: String, why: String) {
    w.pair().os.undo_files.insert(turn, Err(why));
}

#[then(regex = r#"^the shell was asked to undo the turns "([^"]*)"$"#)]
fn asked_to_undo(w: &mut LinkWorld, turns: String) {
    let asked: Vec<String> = w.built().os.undone.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(asked, list(&turns));
}

#[when("the shell takes its time putting files back")]
fn holds_undos(w: &mut LinkWorld) {
    w.pair().os.hold_undos = true;
}

/// The process dies while the shell puts a turn's files back (it was asked, it has not
/// answered), and starts again from its store with a shell that answers.
#[when("the device restarts from its store before the shell answers")]
fn restarts_mid_undo(w: &mut LinkWorld) {
    let pair = w.pair();
    assert!(
        !pair.os.held_undos.is_empty(),
        "the shell was not asked to put files back"
    );
    pair.os.hold_undos = false;
    pair.restart_device().expect("the restart settles");
}
