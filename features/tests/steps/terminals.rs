//! Remote terminals on the Pair's fake shell (it echoes keystrokes, and ends with 129 when hung
//! up): `open`'s rules, output batching and bounds, close, and the link taking them down.

use base64::Engine as _;
use cucumber::{given, then, when};
use lembas_core::client::ClientEvent;
use lembas_core::testing::Dir;
use serde_json::{json, Value};

use super::{json_arg, parse};
use crate::LinkWorld;

fn b64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

#[given("the device allows terminals")]
fn allows(w: &mut LinkWorld) {
    w.config_mut().remote.terminal = true;
}

fn open(w: &mut LinkWorld, params: Value) {
    let r = w.pair().call("_lembas/terminal/open", params);
    if let Ok(v) = &r {
        w.terminals
            .push(v["terminalId"].as_str().expect("a terminalId").to_string());
    }
    w.opened = Some(r);
}

#[when(regex = r"^the client opens a terminal with (.+)$")]
fn opens(w: &mut LinkWorld, params: String) {
    open(w, json_arg(&params));
}

#[given(regex = r"^the client has (\d+) terminals? open$")]
#[then(regex = r"^the client can open (\d+) terminals$")]
fn has_open(w: &mut LinkWorld, n: usize) {
    for _ in 0..n {
        open(w, json!({}));
        assert!(
            matches!(w.opened, Some(Ok(_))),
            "an open was refused: {:?}",
            w.opened
        );
    }
}

#[then(regex = r#"^the device listed the capabilities "terminal" and "shell"$"#)]
fn listed(w: &mut LinkWorld) {
    let caps = w.built().client.capabilities();
    assert!(caps.iter().any(|c| c == "terminal"), "{caps:?}");
    assert!(caps.iter().any(|c| c == "shell"), "{caps:?}");
}

#[then(regex = r#"^the device did not list "terminal" or "shell"$"#)]
fn not_listed(w: &mut LinkWorld) {
    let caps = w.built().client.capabilities();
    assert!(
        !caps.iter().any(|c| c == "terminal" || c == "shell"),
        "{caps:?}"
    );
}

#[then(
    regex = r#"^the terminal opened in "([^"]*)" at (\d+) by (\d+), with shell "([^"]*)" and integration (true|false)$"#
)]
fn opened(w: &mut LinkWorld, cwd: String, cols: u64, rows: u64, shell: String, integration: bool) {
    let r = match &w.opened {
        Some(Ok(r)) => r,
        other => panic!("the terminal did not open: {other:?}"),
    };
    assert!(
        r["terminalId"]
            .as_str()
            .is_some_and(|id| id.starts_with("term_")),
        "{r}"
    );
    assert_eq!(r["cwd"], cwd.as_str(), "{r}");
    assert_eq!(
        (r["cols"].as_u64(), r["rows"].as_u64()),
        (Some(cols), Some(rows)),
        "{r}"
    );
    assert_eq!(r["shell"], shell.as_str(), "{r}");
    assert_eq!(r["integration"], integration, "{r}");
    let id = r["terminalId"].as_str().unwrap();
    assert_eq!(
        w.built().os.shells.get(id),
        Some(&(cols as u16, rows as u16)),
        "the shell was started at that size"
    );
}

#[then(regex = r#"^the open was refused with (-?\d+), saying "(.*)"$"#)]
fn refused(w: &mut LinkWorld, code: i64, words: String) {
    let (got_code, message) = match &w.opened {
        Some(Err(e)) => (e.code, e.message.clone()),
        Some(Ok(r)) => panic!("the terminal opened: {r}"),
        // A raw request sent with `the client sends on the link`.
        None => {
            let answer = parse(w.answers.last().expect("an answer"));
            (
                answer["error"]["code"].as_i64().expect("an error"),
                answer["error"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        }
    };
    assert_eq!(got_code, code, "{message}");
    assert!(
        message.contains(&words),
        "`{message}` does not say `{words}`"
    );
}

#[then("no shell was started")]
fn no_shell(w: &mut LinkWorld) {
    assert!(w.built().os.shells.is_empty(), "{:?}", w.built().os.shells);
}

#[then("every terminal was hung up")]
fn all_hung_up(w: &mut LinkWorld) {
    let p = w.built();
    for id in &w.terminals {
        assert!(
            p.os.hangups.contains(id),
            "{id} was not hung up: {:?}",
            p.os.hangups
        );
    }
    assert!(p.os.shells.is_empty() && p.device.terminals().count() == 0);
}

#[then("the terminal was hung up")]
fn hung_up(w: &mut LinkWorld) {
    let id = w.terminals.last().expect("a terminal");
    assert!(
        w.built().os.hangups.contains(id),
        "{:?}",
        w.built().os.hangups
    );
}

#[when(regex = r#"^the client types "(.*)" into the terminal$"#)]
fn types(w: &mut LinkWorld, keys: String) {
    let keys = keys.replace("\\r", "\r");
    let id = w.terminals.last().expect("a terminal").clone();
    let p = w.pair();
    p.client
        .notify(
            "_lembas/terminal/input",
            &json!({ "terminalId": id, "data": b64().encode(keys) }),
            p.now,
        )
        .expect("input is allowed");
    p.drive().expect("the pair drives");
}

#[when(regex = r"^(\d+) milliseconds pass$")]
fn ms_pass(w: &mut LinkWorld, ms: u64) {
    let p = w.pair();
    p.advance(ms).expect("time passes");
    p.settle().expect("the pair settles");
}

#[when(regex = r"^the terminal's shell writes (\d+) bytes at once$")]
fn shell_writes(w: &mut LinkWorld, n: usize) {
    let id = w.terminals.last().expect("a terminal").clone();
    let p = w.pair();
    let bytes: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let now = p.now;
    p.device.handle_terminal_output(&id, &bytes, now);
    p.drive().expect("the pair drives");
}

/// The output frames of the last terminal that reached the client: their size and bytes.
fn outputs(w: &LinkWorld) -> Vec<(usize, Vec<u8>)> {
    let id = w.terminals.last().expect("a terminal");
    w.built()
        .transcript
        .iter()
        .filter(|t| t.dir == Dir::ToClient)
        .filter_map(|t| {
            let v = parse(&t.frame);
            (v["method"] == "_lembas/terminal/output" && v["params"]["terminalId"] == id.as_str())
                .then(|| {
                    let data = v["params"]["data"].as_str().expect("data");
                    (t.frame.len(), b64().decode(data).expect("base64"))
                })
        })
        .collect()
}

#[then("the client has heard no output of the terminal")]
fn no_output(w: &mut LinkWorld) {
    assert!(outputs(w).is_empty());
}

#[then(regex = r#"^the client heard the output "(.*)" from the terminal$"#)]
fn heard_output(w: &mut LinkWorld, text: String) {
    let text = text.replace("\\r", "\r");
    let all: Vec<u8> = outputs(w).into_iter().flat_map(|(_, b)| b).collect();
    assert_eq!(String::from_utf8_lossy(&all), text);
}

#[then(regex = r"^the client heard all (\d+) bytes, in order, in frames of at most (\d+) bytes$")]
fn heard_all(w: &mut LinkWorld, n: usize, max: usize) {
    let frames = outputs(w);
    let sizes: Vec<usize> = frames.iter().map(|(s, _)| *s).collect();
    assert!(sizes.iter().all(|s| *s <= max), "{sizes:?}");
    let all: Vec<u8> = frames.into_iter().flat_map(|(_, b)| b).collect();
    let want: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    assert!(
        all == want,
        "{} bytes heard, not the {n} written in order",
        all.len()
    );
}

#[when("the client closes the terminal")]
fn closes(w: &mut LinkWorld) {
    let id = w.terminals.last().expect("a terminal").clone();
    let p = w.pair();
    p.client
        .notify(
            "_lembas/terminal/close",
            &json!({ "terminalId": id }),
            p.now,
        )
        .expect("close is allowed");
    p.settle().expect("the pair settles");
}

#[then(regex = r"^the client heard the terminal exit with code (-?\d+)$")]
fn heard_exit(w: &mut LinkWorld, code: i64) {
    let id = w.terminals.last().expect("a terminal");
    let exits: Vec<i64> = w
        .built()
        .client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Notification { method, params }
                if method == "_lembas/terminal/exit" && params["terminalId"] == id.as_str() =>
            {
                params["code"].as_i64()
            }
            _ => None,
        })
        .collect();
    assert_eq!(exits, [code]);
}
