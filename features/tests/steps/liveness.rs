//! Link liveness: a quiet link pinged, a silent one given up and dialled again.

use cucumber::{then, when};

use crate::LinkWorld;

#[when("the link's network drops everything without closing it")]
fn black_hole(w: &mut LinkWorld) {
    w.dials_before = w.pair().dials;
    w.pair().black_hole();
}

#[then("the device has pinged the link")]
fn pinged(w: &mut LinkWorld) {
    let pings = w.pair().pings;
    assert!(pings.0 > 0, "no ping from the device: {pings:?}");
}

#[then("the device has not closed the link")]
fn not_closed(w: &mut LinkWorld) {
    let closes = &w.pair().device_closes;
    assert!(closes.is_empty(), "the device closed the link: {closes:?}");
}

#[then(regex = r#"^the device closes the link with (\d+), naming "([^"]*)"$"#)]
fn closes_naming(w: &mut LinkWorld, code: u16, words: String) {
    let closes = &w.pair().device_closes;
    assert!(
        closes.iter().any(|(c, r)| *c == code && r.contains(&words)),
        "no close {code} naming {words:?}: {closes:?}"
    );
}
