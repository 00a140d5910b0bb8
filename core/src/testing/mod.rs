//! Test machinery, behind the `testing` feature: the in-memory `Pair` and the fuzz drivers.

pub mod device_frames;
pub mod fuzz;
mod pair;

pub use pair::{Dir, Faults, Livelock, Pair, Trace};
