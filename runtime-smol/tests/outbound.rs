//! Backpressure on the link, end to end with the built `lembas link`: a client that stops
//! reading while a turn streams is not disconnected; the engine waits at `outbound.pause_bytes`
//! so the device's memory stays bounded, and once the client reads again every chunk arrives,
//! in order (runs of them merged into one frame while the writer is behind), then the answer.

use std::time::{Duration, Instant};

use lembas::instance::Event;
use lembas_core::client::ClientEvent;
use serde_json::json;

mod common;

use common::Home;

/// ~48 MB of text (twice that on the wire: a `session/update` and an `_lembas/event` a chunk):
/// far past the socket's buffers and the default 64 MiB `outbound.max_bytes`, which closed the
/// link with 1008 before the engine waited.
const CHUNKS: usize = 12_000;
const CHUNK_BYTES: usize = 4000;
/// What the device may grow by while the client stalls: the 1 MiB pause mark, the socket
/// writer's buffers and the allocator's slack; far under the turn.
const STALL_GROWTH_KIB: u64 = 32 * 1024;

/// A chunk's text, when `e` is an `agent_message_chunk`.
fn chunk(e: &Event) -> Option<&str> {
    let Event::Client(e) = e else { return None };
    e.update()?.update.message_text()
}

#[test]
fn a_client_that_stops_reading_is_waited_for_and_gets_every_chunk_in_order() {
    let mut home = Home::new();
    // Not a log line a frame: this turn is ~100 MB of them.
    home.log_level = "info";
    smol::block_on(async {
        let (instance, home, device, _) = common::linked(home).await;
        let session = common::new_session(&instance, &home.work).await;
        smol::Timer::after(Duration::from_millis(300)).await;
        let idle = device.rss_kib();
        instance
            .prompt(
                &session,
                json!([{ "type": "text",
                         "text": format!("chunks {CHUNKS} {CHUNK_BYTES}\nsay finished") }]),
                Some("t-flood"),
            )
            .await
            .unwrap();
        let (first, _) = instance.wait_for(common::T, |e| chunk(e).is_some()).await;
        let first = first.expect("the turn streams");
        assert!(chunk(&first).unwrap().starts_with("0000000000"));

        // The client reads nothing for four seconds.
        instance.stall(Duration::from_secs(4)).await;
        let stalled = Instant::now();
        let mut peak = idle;
        while stalled.elapsed() < Duration::from_secs(4) {
            peak = peak.max(device.rss_kib());
            smol::Timer::after(Duration::from_millis(25)).await;
        }
        eprintln!("idle {idle} KiB, peak while stalled {peak} KiB");
        assert!(
            peak <= idle + STALL_GROWTH_KIB,
            "the device grew from {idle} KiB to {peak} KiB while the client stalled \
             (bound: {STALL_GROWTH_KIB} KiB above idle)"
        );

        // It reads again: the same link carries every chunk, in order, then the answer. Behind
        // its pause mark the writer merges a session's run of chunks into one frame.
        let (mut next, mut frames) = (1usize, 0usize);
        let mut link_down = false;
        let (answer, _) = instance
            .wait_for(Duration::from_secs(120), |e| {
                link_down |= matches!(e, Event::LinkDown);
                if let Some(mut text) = chunk(e) {
                    frames += 1;
                    while !text.is_empty() {
                        if next < CHUNKS {
                            assert_eq!(&text[..10], format!("{next:010}"), "chunk out of order");
                            assert!(text.len() >= CHUNK_BYTES, "a chunk whole");
                            text = &text[CHUNK_BYTES..];
                        } else {
                            assert_eq!(text, "finished");
                            text = "";
                        }
                        next += 1;
                    }
                }
                matches!(e, Event::Client(ClientEvent::PromptAnswered { .. }))
            })
            .await;
        assert!(!link_down, "the link was closed");
        assert_eq!(next, CHUNKS + 1, "chunks and the closing line received");
        eprintln!("{} chunks after the stall came in {frames} frames", CHUNKS);
        assert!(frames < CHUNKS, "the writer behind its mark merged none");
        match answer {
            Some(Event::Client(ClientEvent::PromptAnswered {
                turn_id, outcome, ..
            })) => {
                assert_eq!(turn_id, "t-flood");
                assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
            }
            other => panic!("no answer: {other:?}"),
        }
        assert!(!device.stderr().contains("1008"), "{}", device.stderr());
    });
}
