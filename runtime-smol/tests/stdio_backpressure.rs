//! `lembas serve --stdio` behind a slow editor, over real pipes: the engine waits while the
//! editor does not read (the device's memory stays near `outbound.pause_bytes`), the editor is
//! never disconnected for it, every chunk then arrives whole and in order, and a process that
//! could not write its output does not exit 0.

use std::time::{Duration, Instant};

#[path = "common/editor.rs"]
mod editor;
#[path = "common/scripted.rs"]
mod scripted;

use editor::{chunk, Editor};

/// A turn far past every buffer on the way: ~100 MB of chunks.
const CHUNKS: usize = 25_000;
const CHUNK_BYTES: usize = 4096;
/// What the device may grow by while the editor stalls: the pause mark (1 MiB by default), the
/// writer's buffers and the allocator's slack; far under the turn.
const STALL_GROWTH_KIB: u64 = 48 * 1024;

/// A process's resident memory now, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// An editor with a session in `cwd`; the session's id.
fn session(e: &mut Editor, cwd: &tempfile::TempDir) -> String {
    e.initialize();
    e.new_session(cwd.path())
}

#[test]
fn a_stalled_editor_holds_the_turn_and_then_gets_every_chunk_in_order() {
    let cwd = tempfile::tempdir().unwrap();
    let mut e = Editor::start(&[]);
    let session = session(&mut e, &cwd);
    std::thread::sleep(Duration::from_millis(200));
    let idle = rss_kib(e.child.id());
    e.send_prompt(
        2,
        &session,
        &format!("chunks {CHUNKS} {CHUNK_BYTES}\nsay finished"),
    );
    let first = loop {
        let v = e.recv();
        if let Some(text) = chunk(&v) {
            break text.to_string();
        }
    };
    assert!(first.starts_with("0000000000"), "{first:.20}");

    // The editor reads nothing for three seconds.
    let stalled = Instant::now();
    let mut peak = idle;
    while stalled.elapsed() < Duration::from_secs(3) {
        peak = peak.max(rss_kib(e.child.id()));
        std::thread::sleep(Duration::from_millis(25));
    }
    eprintln!("idle {idle} KiB, peak while stalled {peak} KiB");
    assert_eq!(e.child.try_wait().unwrap(), None, "the process ended");
    assert!(
        peak <= idle + STALL_GROWTH_KIB,
        "the device grew from {idle} KiB to {peak} KiB while the editor stalled \
         (bound: {STALL_GROWTH_KIB} KiB above idle)"
    );

    // It reads again: every chunk comes, whole and in order, then the answer.
    let mut next = 1usize;
    let answer = loop {
        let v = e.recv();
        if let Some(mut text) = chunk(&v) {
            // Behind the pause mark a burst of chunks comes merged: a frame holds several,
            // whole and in order.
            while !text.is_empty() {
                if next == CHUNKS {
                    assert_eq!(text, "finished");
                    next += 1;
                    break;
                }
                assert!(text.len() >= CHUNK_BYTES, "chunk {next} cut");
                let (one, rest) = text.split_at(CHUNK_BYTES);
                assert_eq!(
                    &one[..10],
                    format!("{next:010}"),
                    "chunk {next} out of order"
                );
                next += 1;
                text = rest;
            }
        } else if v["id"] == 2 {
            break v;
        }
    };
    assert_eq!(next, CHUNKS + 1, "chunks and the closing line received");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    drop(e.stdin.take());
    assert_eq!(e.wait(Duration::from_secs(10)), Some(0), "{}", e.stderr());
}

#[test]
fn an_editor_that_closes_stdout_makes_the_process_fail_not_exit_0() {
    let cwd = tempfile::tempdir().unwrap();
    let mut e = Editor::start(&[]);
    let session = session(&mut e, &cwd);
    e.send_prompt(2, &session, &format!("chunks {CHUNKS} {CHUNK_BYTES}"));
    while chunk(&e.recv()).is_none() {}
    // The editor goes away from stdout while the turn streams; stdin stays open.
    drop(e.stdout.take());
    let code = e.wait(Duration::from_secs(10));
    assert_eq!(code, Some(1), "output was lost; stderr:\n{}", e.stderr());
    assert!(
        e.stderr().contains("could not write stdout"),
        "{}",
        e.stderr()
    );
}
