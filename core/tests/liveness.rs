//! A link that goes silent without closing (a NAT that forgot it, a laptop waking from sleep)
//! is noticed from time alone: quiet → ping, anything heard → quiet again, silent past the
//! bound → closed with 1001 and dialled again, and the client's prompts are recovered.

use lembas_core::client::{Client, ClientEvent, ClientOutput, Reattach};
use lembas_core::device::{ConnId, ConnKind, Device, Effect, Output, CLOSE_DEAD_LINK};
use lembas_core::testing::Pair;
use lembas_core::{ClientConfig, DeviceConfig, Liveness, Time};
use serde_json::json;

/// A device linked at t=0 (its hello drained), pinging after 15 s, dead after 45 s.
fn linked_device() -> (Device, ConnId) {
    let mut d = Device::new(DeviceConfig::default(), Time(0)).unwrap();
    d.start_link(Time(0));
    assert_eq!(d.poll_output(), Some(Output::Effect(Effect::Dial)));
    let conn = d.handle_open(ConnKind::Link, Time(0)).unwrap();
    assert!(matches!(d.poll_output(), Some(Output::Send { .. })));
    assert_eq!(d.poll_output(), None);
    // The first prune of stale ledgers is due at once; after it, a day away.
    d.handle_timeout(Time(0));
    (d, conn)
}

fn drain(d: &mut Device) -> Vec<Output> {
    std::iter::from_fn(|| d.poll_output()).collect()
}

#[test]
fn a_quiet_link_is_pinged_at_ping_after_and_again_while_it_stays_quiet() {
    let (mut d, conn) = linked_device();
    assert_eq!(d.poll_timeout(), Some(Time(15_000)));
    // Early: nothing.
    d.handle_timeout(Time(14_999));
    assert_eq!(drain(&mut d), vec![]);
    d.handle_timeout(Time(15_000));
    assert_eq!(drain(&mut d), vec![Output::Ping { conn }]);
    // Repeated at the same instant: harmless, no second ping.
    d.handle_timeout(Time(15_000));
    assert_eq!(drain(&mut d), vec![]);
    assert_eq!(d.poll_timeout(), Some(Time(30_000)));
    d.handle_timeout(Time(30_000));
    assert_eq!(drain(&mut d), vec![Output::Ping { conn }]);
}

#[test]
fn any_inbound_frame_or_pong_resets_the_quiet_spell() {
    let (mut d, conn) = linked_device();
    d.handle_timeout(Time(15_000));
    assert_eq!(drain(&mut d), vec![Output::Ping { conn }]);
    let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    d.handle_frame(conn, init, Time(20_000)).unwrap();
    drain(&mut d);
    assert_eq!(d.poll_timeout(), Some(Time(35_000)));
    d.handle_timeout(Time(35_000));
    assert_eq!(drain(&mut d), vec![Output::Ping { conn }]);
    // The pong: the link is alive, the next ping is ping_after from it.
    d.handle_activity(conn, Time(35_010)).unwrap();
    assert_eq!(d.poll_timeout(), Some(Time(50_010)));
    // Past the first bound (20 s + 45 s would be 65 s) nothing is dead: it heard at 35 s.
    d.handle_timeout(Time(65_000));
    assert_eq!(drain(&mut d), vec![Output::Ping { conn }]);
    // Activity on a connection the device does not know is the shell's mistake, not a panic.
    assert!(d.handle_activity(ConnId(99), Time(65_001)).is_err());
}

#[test]
fn silence_past_the_bound_closes_with_1001_and_schedules_a_redial_with_backoff() {
    let (mut d, conn) = linked_device();
    d.handle_timeout(Time(15_000));
    d.handle_timeout(Time(30_000));
    assert_eq!(
        drain(&mut d),
        vec![Output::Ping { conn }, Output::Ping { conn }]
    );
    assert_eq!(d.poll_timeout(), Some(Time(45_000)));
    d.handle_timeout(Time(45_000));
    let out = drain(&mut d);
    assert_eq!(
        out,
        vec![Output::Close {
            conn,
            code: CLOSE_DEAD_LINK,
            reason: "nothing arrived for 45000 ms (link.dead_after_ms)".into()
        }]
    );
    assert_eq!(CLOSE_DEAD_LINK, 1001);
    // Let go: the device asks no close report, and a late frame is the shell's misuse.
    assert_eq!(d.connections().count(), 0);
    assert!(d.handle_frame(conn, b"{}", Time(45_001)).is_err());
    // The redial waits the usual backoff (attempt 0: half to all of 1 s), then dials.
    let at = d.poll_timeout().unwrap();
    assert!(
        (Time(45_500)..=Time(46_000)).contains(&at),
        "redial at {at:?}"
    );
    // An early or repeated timeout closes nothing twice and dials nothing early.
    d.handle_timeout(Time(45_000));
    d.handle_timeout(Time(at.0 - 1));
    assert_eq!(drain(&mut d), vec![]);
    d.handle_timeout(at);
    assert_eq!(drain(&mut d), vec![Output::Effect(Effect::Dial)]);
    assert!(!d.link_stopped());
}

#[test]
fn without_liveness_a_link_is_never_pinged_nor_given_up() {
    let mut config = DeviceConfig::default();
    config.liveness = None;
    let mut d = Device::new(config, Time(0)).unwrap();
    d.start_link(Time(0));
    drain(&mut d);
    let conn = d.handle_open(ConnKind::Link, Time(0)).unwrap();
    drain(&mut d);
    d.handle_timeout(Time(3_600_000));
    assert_eq!(drain(&mut d), vec![]);
    assert_eq!(
        d.connections().collect::<Vec<_>>(),
        vec![(conn, ConnKind::Link)]
    );
}

#[test]
fn the_client_role_pings_a_quiet_link_and_closes_a_silent_one() {
    let mut c = Client::new(ClientConfig::default(), Time(0)).unwrap();
    assert_eq!(c.poll_timeout(), None, "no link, no heartbeat");
    c.handle_link_up(Time(1_000));
    assert_eq!(c.poll_timeout(), Some(Time(16_000)));
    c.handle_timeout(Time(16_000));
    c.handle_timeout(Time(16_000));
    assert_eq!(c.poll_output(), Some(ClientOutput::Ping));
    assert_eq!(c.poll_output(), None);
    // A frame (even one it cannot use) is life.
    c.handle_frame(b"{}", Time(20_000));
    while c.poll_output().is_some() {}
    assert_eq!(c.poll_timeout(), Some(Time(35_000)));
    c.handle_activity(Time(30_000));
    assert_eq!(c.poll_timeout(), Some(Time(45_000)));
    c.handle_timeout(Time(45_000));
    c.handle_timeout(Time(60_000));
    assert_eq!(c.poll_output(), Some(ClientOutput::Ping));
    assert_eq!(c.poll_output(), Some(ClientOutput::Ping));
    c.handle_timeout(Time(75_000));
    assert_eq!(
        c.poll_output(),
        Some(ClientOutput::Close {
            code: CLOSE_DEAD_LINK,
            reason: "nothing arrived for 45000 ms (link.dead_after_ms)".into()
        })
    );
    // Given up once: no more pings or closes however often the timer is polled.
    c.handle_timeout(Time(75_000));
    c.handle_timeout(Time(200_000));
    assert_eq!(c.poll_output(), None);
    assert_eq!(c.poll_timeout(), None);
}

/// The Pair with a prompt running when the network turns into a black hole: the device
/// notices within the bound, links again, and the client recovers the prompt's answer once.
#[test]
fn a_black_holed_link_is_noticed_redialled_and_the_prompt_in_flight_recovered() {
    let mut p = Pair::default_with_roots(&["/work"]);
    p.start().unwrap();
    let s = p.new_session("/work");
    p.client
        .prompt(
            &s,
            json!([{ "type": "text", "text": "say before\nsleep 90000\nsay after" }]),
            Some("t1"),
            p.now,
        )
        .unwrap();
    p.drive().unwrap();
    let dials = p.dials;
    let went = p.now;
    p.black_hole();
    let limits = Liveness::default();
    let mut noticed = None;
    for _ in 0..200 {
        p.advance(500).unwrap();
        if !p.device_closes.is_empty() {
            noticed = Some(p.now.since(went));
            break;
        }
    }
    let noticed = noticed.expect("the device noticed the dead link");
    assert!(
        noticed >= limits.dead_after_ms && noticed <= limits.dead_after_ms + 500,
        "noticed after {noticed} ms"
    );
    assert_eq!(
        p.device_closes,
        vec![(
            CLOSE_DEAD_LINK,
            "nothing arrived for 45000 ms (link.dead_after_ms)".to_string()
        )]
    );
    assert!(p.pings.0 >= 2, "the device pinged first: {:?}", p.pings);
    p.advance(2_000).unwrap();
    assert_eq!(p.dials, dials + 1, "one redial after the backoff");
    assert!(p.client.is_ready(), "linked again");
    p.advance(60_000).unwrap();
    let answers: Vec<_> = p
        .client_events
        .iter()
        .filter(|e| matches!(e, ClientEvent::PromptAnswered { turn_id, .. } if turn_id == "t1"))
        .collect();
    assert_eq!(answers.len(), 1, "answered exactly once: {answers:?}");
    assert!(p.client_events.iter().any(|e| matches!(
        e,
        ClientEvent::Reattached { turn_id, how: Reattach::Following, .. } if turn_id == "t1"
    )));
}

#[test]
fn a_healthy_quiet_link_stays_up_for_an_hour() {
    let mut p = Pair::default_with_roots(&["/work"]);
    p.start().unwrap();
    let dials = p.dials;
    p.advance(3_600_000).unwrap();
    assert_eq!(p.dials, dials);
    assert!(p.device_closes.is_empty() && p.client_closes.is_empty());
    assert!(p.client.is_ready());
    // One ping per quiet spell: the device's ping wakes the client's side too.
    assert!(p.pings.0 >= 3_600_000 / 15_000 - 1, "{:?}", p.pings);
}
