//! Test machinery, behind the `testing` feature: the in-memory `Pair`, the fuzz drivers, and the
//! oracle of what a device says on its connections that both run.

pub mod device_frames;
pub mod fuzz;
mod oracle;
mod pair;

pub use pair::{Dir, Faults, Livelock, Pair, Trace};
