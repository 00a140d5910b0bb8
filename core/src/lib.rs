//! The sans-IO core of the LLeMbas device link: the Agent Client Protocol plus the `_lembas`
//! extension, protocol 3, as pure state machines. It reads no clock, opens no socket, spawns
//! nothing and draws no global randomness; a shell (the `lembas` binary on smol, the wasm
//! build, the test harness) does that and drives it like this:
//!
//! ```
//! use lembas_core::device::{ConnKind, Device, Effect, Output};
//! use lembas_core::{DeviceConfig, Time};
//!
//! let mut device = Device::new(DeviceConfig::default(), Time(0)).unwrap();
//! device.start_link(Time(0));
//! let mut link = None;
//! // The loop every shell writes: feed an input, drain outputs, sleep until poll_timeout.
//! while let Some(out) = device.poll_output() {
//!     match out {
//!         Output::Effect(Effect::Dial) => {
//!             // ...dial wss://<instance>/api/devices/link, then:
//!             link = Some(device.handle_open(ConnKind::Link, Time(5)).unwrap());
//!         }
//!         Output::Send { conn, frame } => { /* write `frame` as one text message on `conn` */ }
//!         Output::Close { .. } | Output::Effect(_) => { /* close, stop, ... */ }
//!         _ => {}
//!     }
//! }
//! // Bytes from the socket go in with the time they arrived:
//! let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
//! device.handle_frame(link.unwrap(), init, Time(9)).unwrap();
//! assert!(matches!(device.poll_output(), Some(Output::Send { .. })));
//! let _next_deadline = device.poll_timeout(); // then handle_timeout(now) when it passes
//! ```
//!
//! A shell that runs turns does not route `Output::Engine` itself: [`host::Host`] joins the
//! device to an [`engine::Engine`] and hands the shell only what it must perform.

pub mod backlog;
pub mod client;
pub mod commands;
pub mod config;
pub mod confine;
pub mod device;
pub mod discovery;
pub mod engine;
pub mod engine_choice;
pub mod engine_io;
mod error_path;
pub mod framing;
pub mod host;
pub mod jsonrpc;
pub mod liveness;
pub mod mentions;
pub mod methods;
pub mod model;
pub mod paths;
mod prefetch;
pub mod review;
pub mod rng;
pub mod scripted;
mod shape;
pub mod store;
pub mod text;
pub mod time;
pub mod turn;
pub mod wire;

#[cfg(feature = "testing")]
pub mod testing;

pub use config::{
    ClientConfig, DeviceConfig, InboundLimits, Liveness, Mode, OutboundLimits, Remote,
    TerminalLimits,
};
pub use time::Time;

/// This build's version, as the device reports it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
