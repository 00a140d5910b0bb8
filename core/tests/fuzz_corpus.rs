//! Replays the committed fuzz corpus (`fuzz/corpus/<target>`) through the same functions
//! the cargo-fuzz targets call, so every `cargo test` exercises it on stable. An empty or
//! missing corpus directory fails the test.

use std::path::{Path, PathBuf};

use lembas_core::testing::fuzz;

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus {} is missing: {e}", dir.display()))
        .map(|entry| entry.expect("a readable corpus entry").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "the corpus {} is empty: the replay would test nothing",
        dir.display()
    );
    files
}

/// `describe` says what a failing file does, so the failure can be read without a fuzzer.
fn replay(target: &str, run: fn(&[u8]), describe: fn(&[u8]) -> String) {
    let files = corpus(target);
    let mut failures = Vec::new();
    for path in &files {
        let data = std::fs::read(path).expect("a readable corpus file");
        if let Err(panic) = std::panic::catch_unwind(|| run(&data)) {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            failures.push(format!("{}: {why}\n{}", path.display(), describe(&data)));
        }
    }
    println!("{target}: replayed {} corpus files", files.len());
    assert!(
        failures.is_empty(),
        "{target}: {} of {} corpus files fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn frame_corpus_replays() {
    replay("frame", fuzz::frame, |data| {
        String::from_utf8_lossy(data).into_owned()
    });
}

#[test]
fn model_engine_corpus_replays() {
    replay("model_engine", fuzz::model_engine, |data| {
        format!("{data:?}")
    });
}

#[test]
fn turn_table_corpus_replays() {
    replay("turn_table", fuzz::turn_table, |data| format!("{data:?}"));
}

#[test]
fn session_corpus_replays() {
    replay("session", fuzz::session, fuzz::session_script);
}

#[test]
fn outbox_corpus_replays() {
    replay("outbox", fuzz::outbox, fuzz::outbox_script);
}

#[test]
fn event_log_corpus_replays() {
    replay("event_log", fuzz::event_log, fuzz::event_log_script);
}

#[test]
fn link_corpus_replays() {
    replay("link", fuzz::link, fuzz::link_script);
}

#[test]
fn cards_corpus_replays() {
    replay("cards", fuzz::cards, fuzz::cards_script);
}

#[test]
fn device_corpus_replays() {
    replay("device", fuzz::device, fuzz::device_script);
}

// Failures the fuzzers found, kept as tests of their own so a regression names its bug.

/// `jsonrpc::decode` on a frame that ends in a backslash inside an unterminated string must
/// refuse it (-32700), not panic. `nesting_over` stepped over an escape with `i += k + 2`, past
/// the end of the frame when the backslash was its last byte, and the next `&bytes[i..]`
/// sliced out of range: any peer could panic the device in `handle_frame`. The exact walk only
/// runs on frames with more opening brackets than `max_depth` (brackets inside strings count),
/// hence the 70 of them. (Found by the `frame` target on
/// `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\`, before 097ce1e.)
#[test]
fn frame_ending_in_an_escape_inside_a_string_is_refused_not_a_panic() {
    use lembas_core::device::{ConnKind, Device};
    use lembas_core::jsonrpc::{self, code, FrameLimits};
    use lembas_core::{DeviceConfig, Time};

    let brackets = "[".repeat(70);
    let frames = [
        "{\"\\".to_string(),
        format!("{{\"a\":\"{brackets}\",\"b\":\"\\"),
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{{\"a\":\"{brackets}\\"
        ),
    ];
    for frame in &frames {
        let frame = frame.as_bytes();
        let e = jsonrpc::decode(frame, &FrameLimits::default()).expect_err("invalid JSON");
        assert_eq!(e.error.code, code::PARSE_ERROR);
        fuzz::frame(frame);

        let mut device = Device::new(DeviceConfig::default(), Time(0)).unwrap();
        let conn = device.handle_open(ConnKind::Stdio, Time(0)).unwrap();
        device.handle_frame(conn, frame, Time(1)).unwrap();
        assert!(
            device.poll_output().is_some(),
            "the frame gets a -32700 answer"
        );
    }
}

/// A frame queued behind an unacknowledged `Effect::Persist` must not be sent once its
/// connection closed. The device answered a `session/new` (its record held in a persist), the
/// connection closed (`handle_closed`), the shell then acknowledged the persist, and
/// `poll_output` handed back the `session/new` result for the closed connection. (Found by the
/// `device` target; minimized: initialize and `session/new` on a link, persists held, close
/// 4400, `Persisted`.)
#[test]
fn nothing_is_sent_on_a_connection_after_it_closed_even_behind_a_persist() {
    use lembas_core::config::Model;
    use lembas_core::device::{ConnKind, Device, Effect, Output};
    use lembas_core::{DeviceConfig, Time};

    let mut config = DeviceConfig::default();
    config.remote.enabled = true;
    config.remote.roots = vec!["/tmp".into()];
    config.remote.trusted = vec!["/tmp".into()];
    config.models = vec![Model::served("lembas/default")];
    let mut device = Device::new(config, Time(0)).unwrap();
    let conn = device.handle_open(ConnKind::Stdio, Time(0)).unwrap();
    let mut held = Vec::new();
    let drain = |device: &mut Device, held: &mut Vec<u64>| {
        let mut sent = Vec::new();
        while let Some(out) = device.poll_output() {
            match out {
                Output::Effect(Effect::Persist { seq, .. }) => held.push(seq),
                Output::Effect(Effect::ResolvePath { request, path }) => {
                    device.handle_path_resolved(request, Ok(path), Time(1))
                }
                Output::Send { conn, frame } => sent.push((conn, frame)),
                _ => {}
            }
        }
        sent
    };
    device
        .handle_frame(
            conn,
            br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#,
            Time(1),
        )
        .unwrap();
    drain(&mut device, &mut held);
    device
        .handle_frame(
            conn,
            br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}"#,
            Time(1),
        )
        .unwrap();
    drain(&mut device, &mut held);
    assert!(!held.is_empty(), "session/new persists its session");
    device.handle_closed(conn, None, Time(2)).unwrap();
    for seq in held.clone() {
        device.handle_persisted(seq, Time(3));
    }
    let after = drain(&mut device, &mut held);
    let stale: Vec<String> = after
        .iter()
        .filter(|(c, _)| *c == conn)
        .map(|(_, f)| String::from_utf8_lossy(f).into_owned())
        .collect();
    assert!(
        stale.is_empty(),
        "frames sent on {conn:?} after it closed: {stale:?}"
    );
}
