//! Remote terminals on the Pair (a fake shell that echoes its input): the rules of `open`, the
//! output's batching and bounds, resize, close, and terminals closing with their link.

use base64::Engine as _;
use lembas_core::client::ClientEvent;
use lembas_core::jsonrpc::{code, RpcError};
use lembas_core::testing::Pair;
use serde_json::{json, Value};

const ROOT: &str = "/home/dev/work";

fn linked(terminal: bool) -> Pair {
    let mut p = Pair::default_with(&[ROOT], |d| d.remote.terminal = terminal);
    p.start().unwrap();
    assert!(p.client.is_ready());
    p
}

fn open(p: &mut Pair, params: Value) -> Result<Value, RpcError> {
    p.call("_lembas/terminal/open", params)
}

fn open_id(p: &mut Pair) -> String {
    let r = open(p, json!({})).expect("the terminal opens");
    r["terminalId"].as_str().unwrap().to_string()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The client's notifications of `method` for `terminal`, in order.
fn heard(p: &Pair, method: &str, terminal: &str) -> Vec<Value> {
    p.client_events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Notification { method: m, params }
                if m == method && params["terminalId"] == terminal =>
            {
                Some(params.clone())
            }
            _ => None,
        })
        .collect()
}

/// Everything the terminal's output frames carried, decoded and joined.
fn output(p: &Pair, terminal: &str) -> Vec<u8> {
    heard(p, "_lembas/terminal/output", terminal)
        .iter()
        .flat_map(|o| {
            base64::engine::general_purpose::STANDARD
                .decode(o["data"].as_str().unwrap())
                .unwrap()
        })
        .collect()
}

fn refused(r: Result<Value, RpcError>) -> RpcError {
    let e = r.expect_err("refused");
    assert_eq!(e.code, code::INVALID_PARAMS, "{e:?}");
    e
}

#[test]
fn capabilities_list_terminal_and_shell_only_when_terminals_are_on() {
    let on = linked(true);
    let caps = on.client.capabilities();
    assert!(caps.iter().any(|c| c == "terminal"), "{caps:?}");
    assert!(caps.iter().any(|c| c == "shell"), "{caps:?}");
    let off = linked(false);
    let caps = off.client.capabilities();
    assert!(
        !caps.iter().any(|c| c == "terminal" || c == "shell"),
        "{caps:?}"
    );
}

#[test]
fn open_answers_with_the_terminal_its_cwd_size_and_shell() {
    let mut p = linked(true);
    let r = open(&mut p, json!({ "cols": 120, "rows": 40 })).unwrap();
    let id = r["terminalId"].as_str().unwrap();
    assert!(id.starts_with("term_"), "{r}");
    assert_eq!(r["cwd"], ROOT, "cwd defaults to the first root");
    assert_eq!(
        (r["cols"].as_u64(), r["rows"].as_u64()),
        (Some(120), Some(40))
    );
    assert_eq!(r["shell"], "bash");
    assert_eq!(r["integration"], true);
    assert_eq!(p.os.shells.get(id), Some(&(120, 40)));
    let r = open(&mut p, json!({ "cwd": format!("{ROOT}/app") })).unwrap();
    assert_eq!(r["cwd"], format!("{ROOT}/app"));
    assert_eq!(
        (r["cols"].as_u64(), r["rows"].as_u64()),
        (Some(80), Some(24))
    );
}

#[test]
fn keystrokes_reach_the_shell_and_its_output_comes_back_after_the_batch_delay() {
    let mut p = linked(true);
    let id = open_id(&mut p);
    p.client
        .notify(
            "_lembas/terminal/input",
            &json!({ "terminalId": id, "data": b64(b"ls\r") }),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    assert!(
        output(&p, &id).is_empty(),
        "output waits up to batch_ms for more"
    );
    p.advance(4).unwrap();
    p.settle().unwrap();
    assert_eq!(output(&p, &id), b"ls\r");
}

#[test]
fn a_flood_leaves_in_order_in_frames_of_at_most_64_kib() {
    let mut p = linked(true);
    let id = open_id(&mut p);
    let flood: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let before = p.transcript.len();
    p.device.handle_terminal_output(&id, &flood, p.now);
    p.advance(4).unwrap();
    p.settle().unwrap();
    assert_eq!(output(&p, &id), flood, "every byte, in order");
    let frames: Vec<usize> = p.transcript[before..]
        .iter()
        .filter(|t| t.frame.contains("terminal/output"))
        .map(|t| t.frame.len())
        .collect();
    assert!(frames.len() >= 5, "{frames:?}");
    assert!(frames.iter().all(|&n| n <= 64 * 1024), "{frames:?}");
    // Full frames, not many small ones: all but the last fill at least 60 KiB.
    assert!(
        frames[..frames.len() - 1].iter().all(|&n| n > 60 * 1024),
        "{frames:?}"
    );
}

#[test]
fn resize_changes_the_pty_and_an_out_of_range_size_is_not_applied() {
    let mut p = linked(true);
    let id = open_id(&mut p);
    for (cols, rows) in [(132, 50), (19, 50), (132, 301)] {
        p.client
            .notify(
                "_lembas/terminal/resize",
                &json!({ "terminalId": id, "cols": cols, "rows": rows }),
                p.now,
            )
            .unwrap();
        p.settle().unwrap();
    }
    assert_eq!(p.os.shells.get(&id), Some(&(132, 50)));
}

#[test]
fn close_hangs_up_and_the_shell_s_exit_is_reported() {
    let mut p = linked(true);
    let id = open_id(&mut p);
    p.client
        .notify(
            "_lembas/terminal/close",
            &json!({ "terminalId": id }),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    assert_eq!(p.os.hangups, std::slice::from_ref(&id));
    let exits = heard(&p, "_lembas/terminal/exit", &id);
    assert_eq!(exits.len(), 1);
    assert_eq!(exits[0]["code"], 129);
    assert_eq!(p.device.terminals().count(), 0);
}

#[test]
fn output_written_before_the_exit_is_sent_before_it() {
    let mut p = linked(true);
    let id = open_id(&mut p);
    p.device.handle_terminal_output(&id, b"bye\r\n", p.now);
    p.device.handle_terminal_exit(&id, 3, p.now);
    p.settle().unwrap();
    assert_eq!(output(&p, &id), b"bye\r\n");
    let methods: Vec<String> = p
        .frames_to_client()
        .iter()
        .filter(|f| f["params"]["terminalId"] == id.as_str())
        .map(|f| f["method"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        methods,
        ["_lembas/terminal/output", "_lembas/terminal/exit"]
    );
    assert_eq!(heard(&p, "_lembas/terminal/exit", &id)[0]["code"], 3);
}

#[test]
fn a_fifth_terminal_is_refused_with_the_rule() {
    let mut p = linked(true);
    for _ in 0..4 {
        open_id(&mut p);
    }
    let e = refused(open(&mut p, json!({})));
    assert!(e.message.contains("at most 4 terminals a link"), "{e:?}");
    assert_eq!(p.os.shells.len(), 4);
}

#[test]
fn sizes_out_of_range_are_refused_with_the_rule_and_the_value() {
    let mut p = linked(true);
    for (params, words) in [
        (json!({ "cols": 19 }), "cols 19 is outside 20-500"),
        (json!({ "cols": 501 }), "cols 501 is outside 20-500"),
        (json!({ "rows": 4 }), "rows 4 is outside 5-300"),
        (json!({ "rows": 301 }), "rows 301 is outside 5-300"),
    ] {
        let e = refused(open(&mut p, params));
        assert!(e.message.contains(words), "{e:?}");
    }
    let e = refused(open(&mut p, json!({ "cols": 70000 })));
    assert!(e.message.contains("cols"), "{e:?}");
    assert!(p.os.shells.is_empty());
}

#[test]
fn a_cwd_outside_the_roots_is_refused_lexically_and_after_symlinks() {
    let mut p = linked(true);
    let e = refused(open(&mut p, json!({ "cwd": "/etc" })));
    assert!(e.message.contains("outside the device's roots"), "{e:?}");
    let e = refused(open(&mut p, json!({ "cwd": format!("{ROOT}/../../etc") })));
    assert!(e.message.contains("outside the device's roots"), "{e:?}");
    p.os.links
        .insert(format!("{ROOT}/escape"), Some("/var/secret".into()));
    let e = refused(open(&mut p, json!({ "cwd": format!("{ROOT}/escape") })));
    assert!(e.message.contains("/var/secret"), "{e:?}");
    p.os.links.insert(format!("{ROOT}/gone"), None);
    let e = refused(open(&mut p, json!({ "cwd": format!("{ROOT}/gone") })));
    assert!(e.message.contains("cannot be used"), "{e:?}");
    assert!(p.os.shells.is_empty());
    // Refused opens hold no slot: four still open.
    for _ in 0..4 {
        open_id(&mut p);
    }
}

#[test]
fn a_device_with_terminals_off_refuses_open_with_the_rule() {
    let mut p = linked(false);
    let id = p
        .client
        .call("_lembas/terminal/open", &json!({}), p.now)
        .expect_err("the client does not call a method the device does not list");
    let _ = id;
    // A client that calls it anyway hears the rule.
    p.inject(br#"{"jsonrpc":"2.0","id":"t","method":"_lembas/terminal/open","params":{}}"#)
        .unwrap();
    p.settle().unwrap();
    let answer = p
        .frames_to_client()
        .into_iter()
        .find(|f| f["id"] == "t")
        .expect("answered");
    assert_eq!(answer["error"]["code"], code::INVALID_PARAMS);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("remote.terminal is false"),
        "{answer}"
    );
    assert!(p.os.shells.is_empty());
}

#[test]
fn remote_work_off_refuses_open_like_a_folder_outside_the_roots() {
    let mut p = Pair::default_with(&[ROOT], |d| {
        d.remote.terminal = true;
        d.remote.enabled = false;
    });
    p.start().unwrap();
    let e = refused(open(&mut p, json!({})));
    assert!(e.message.contains("remote.enabled is false"), "{e:?}");
}

#[test]
fn a_shell_that_cannot_start_is_an_internal_error_with_the_reason() {
    let mut p = linked(true);
    p.os.shell_fails = Some("no such file: /bin/zsh".into());
    let e = open(&mut p, json!({})).expect_err("refused");
    assert_eq!(e.code, code::INTERNAL_ERROR);
    assert!(e.message.contains("/bin/zsh"), "{e:?}");
    assert_eq!(p.device.terminals().count(), 0);
}

#[test]
fn every_terminal_closes_with_its_link_and_the_next_link_starts_afresh() {
    let mut p = linked(true);
    let ids: Vec<String> = (0..4).map(|_| open_id(&mut p)).collect();
    p.cut().unwrap();
    p.settle().unwrap();
    let mut hung: Vec<String> = p.os.hangups.clone();
    hung.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(hung, want);
    assert!(p.os.shells.is_empty());
    assert_eq!(p.device.terminals().count(), 0);
    // Redialled: the new link has its own four, and the old ids mean nothing on it.
    p.advance(120_000).unwrap();
    assert!(p.client.is_ready());
    p.client
        .notify(
            "_lembas/terminal/input",
            &json!({ "terminalId": ids[0], "data": b64(b"x") }),
            p.now,
        )
        .unwrap();
    p.settle().unwrap();
    for _ in 0..4 {
        open_id(&mut p);
    }
}

#[test]
fn keystrokes_for_an_unknown_terminal_or_not_base64_do_nothing() {
    let mut p = linked(true);
    let id = open_id(&mut p);
    for params in [
        json!({ "terminalId": "term_nope", "data": b64(b"rm -rf /\r") }),
        json!({ "terminalId": id, "data": "%%% not base64" }),
        json!({ "terminalId": id }),
        json!("garbage"),
    ] {
        p.client
            .notify("_lembas/terminal/input", &params, p.now)
            .unwrap();
    }
    p.advance(10).unwrap();
    p.settle().unwrap();
    assert!(output(&p, &id).is_empty());
    assert_eq!(p.os.shells.len(), 1);
}
