//! An editor on `lembas serve --stdio`: plain ACP, one message a line.

use cucumber::{then, when};

use super::{method_of, parse};
use crate::LinkWorld;

#[when("an editor opens stdio")]
fn open_stdio(w: &mut LinkWorld) {
    let conn = w.pair().open_stdio();
    w.editor = Some(conn);
}

/// One line from the editor; the device's lines in return become "the answer".
#[when(regex = r"^the editor sends: (.+)$")]
fn editor_sends(w: &mut LinkWorld, line: String) {
    let conn = w.editor.expect("a step before must open stdio");
    let lines = w
        .pair()
        .stdio(conn, line.as_bytes())
        .expect("stdio settles");
    w.answers = lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
}

fn stdio_lines(w: &LinkWorld) -> Vec<String> {
    let conn = w.editor.expect("a step before must open stdio");
    w.built().stdio_out[&conn]
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}

#[then(regex = r"^the device has written (\d+) lines? on stdio$")]
fn lines_written(w: &mut LinkWorld, n: usize) {
    let lines = stdio_lines(w);
    assert_eq!(lines.len(), n, "{lines:?}");
}

#[then(regex = r#"^no frame the device wrote on stdio has a method starting with "([^"]*)"$"#)]
fn no_method_prefix(w: &mut LinkWorld, prefix: String) {
    let all: Vec<String> = w
        .built()
        .stdio_out
        .values()
        .flatten()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    assert!(!all.is_empty(), "the device wrote nothing on stdio at all");
    for line in &all {
        let frame = parse(line);
        let method = method_of(&frame).unwrap_or("");
        assert!(
            !method.starts_with(&prefix),
            "the device wrote {method} on stdio: {line}"
        );
    }
}
