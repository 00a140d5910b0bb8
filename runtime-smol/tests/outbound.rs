//! The outbound queue's hard bound, end to end: a client that stops reading while a turn streams
//! is disconnected with 1008 once more than `outbound.max_bytes` wait, instead of the device
//! growing; the device redials and the reattaching client gets the turn's answer once.

use std::sync::Arc;
use std::time::Duration;

use lembas::driver::{Disk, Driver};
use lembas::instance::Event;
use lembas::link::{Instance, LinkDialer};
use lembas_core::client::{ClientEvent, Reattach};
use lembas_core::device::Device;
use lembas_core::store::MemStore;
use lembas_core::{DeviceConfig, Time};
use serde_json::json;

mod common;

use common::TOKEN;

const T: Duration = Duration::from_secs(30);

#[test]
fn a_client_that_stops_reading_is_closed_at_the_bound_and_reattaches() {
    let work = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(work.path()).unwrap();
    smol::block_on(async {
        let instance = common::instance().await;
        let url = instance.url();
        let root_s = root.to_str().unwrap().to_string();
        // The device runs on a thread of its own (it is not `Send`), as in `lembas link`.
        let attachments = work.path().join("attachments");
        std::thread::spawn(move || {
            let mut config = DeviceConfig::default();
            config.remote.enabled = true;
            config.remote.roots = vec![root_s.clone()];
            config.remote.trusted = vec![root_s];
            config.outbound.pause_bytes = 64 * 1024;
            config.outbound.max_bytes = 1024 * 1024;
            config.backoff.initial_ms = 50;
            config.backoff.max_ms = 200;
            let device = Device::new(config, Time(0)).unwrap();
            let mut driver = Driver::new(device, Disk::Mem(MemStore::default()), attachments);
            let dialer = LinkDialer::new(Instance::parse(&url).unwrap(), TOKEN.into(), None);
            driver.start_link(Arc::new(dialer));
            smol::block_on(driver.run());
        });
        common::ready(&instance).await;
        let session = common::new_session(&instance, &root).await;
        // ~40 MB of updates: far past the socket's buffers and the 1 MiB bound.
        instance
            .prompt(
                &session,
                json!([{ "type": "text", "text": "chunks 20000 2000\nsay finished" }]),
                Some("t-flood"),
            )
            .await
            .unwrap();
        instance.stall(Duration::from_secs(4)).await;
        let (down, seen) = instance.wait_for(T, |e| matches!(e, Event::LinkDown)).await;
        assert!(
            down.is_some(),
            "the link was not closed: {} events",
            seen.len()
        );
        // The client reattaches and finds the turn exactly once: answered on the new link if
        // it was still running, or imported from history if it finished meanwhile.
        let is_flood = |e: &Event| match e {
            Event::Client(ClientEvent::PromptAnswered { turn_id, .. }) => turn_id == "t-flood",
            Event::Client(ClientEvent::Reattached { turn_id, how, .. }) => {
                turn_id == "t-flood" && matches!(how, Reattach::Imported(_))
            }
            _ => false,
        };
        let (found, seen) = instance.wait_for(Duration::from_secs(120), is_flood).await;
        match found {
            Some(Event::Client(ClientEvent::PromptAnswered { outcome, .. })) => {
                assert_eq!(outcome.unwrap()["stopReason"], "end_turn");
            }
            Some(Event::Client(ClientEvent::Reattached {
                how: Reattach::Imported(turns),
                ..
            })) => {
                let answer = turns.last().unwrap()["text"].as_str().unwrap_or("");
                assert!(
                    answer.ends_with("finished"),
                    "{}",
                    &answer[answer.len() - 40..]
                );
            }
            other => panic!(
                "the turn was not found after the reattach: {other:?} ({} events)",
                seen.len()
            ),
        }
        let again = instance.wait_for(Duration::from_secs(2), is_flood).await.0;
        assert!(again.is_none(), "the turn came back twice: {again:?}");
    });
}
