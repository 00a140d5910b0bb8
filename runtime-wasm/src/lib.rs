//! The wasm shell of the LLeMbas link core: the run loop of a device or a client in a browser
//! or node, over what JS hands in — a socket (a browser `WebSocket`, or npm `ws`, which can send
//! a device's `Authorization` header), `setTimeout`, and a store (IndexedDB through
//! `bindings/idb.mjs`, or none).
//!
//! - [`DeviceDriver`] owns a core `Device` and its engine, joined by the core's host loop
//!   ([`device_loop`]): a turn's start, cancel, steer and card decisions reach the engine and
//!   its reports reach the device with no JSON and no JS call in between. The engine is the
//!   scripted one, or the model engine ([`engine`]), whose HTTP to the instance goes through
//!   the global `fetch` ([`instance_http`]). Frames go to the socket as strings from Rust;
//!   what is left (the store's writes, `resolvePath`, terminals, attachments) goes to JS as
//!   the core types' own serde shapes (through [`json`]).
//! - [`ClientDriver`] owns a core `Client` ([`client_loop`]): events to `onEvent` and to the
//!   promises of `next`, calls made through its methods, undelivered deletes kept in a
//!   localStorage-like `storage` or an asynchronous `kept`.
//!
//! The device role is the default feature `device`; without it (the bindings' client-only
//! module) only the client's driver is built.
//!
//! Nothing here is exported to JS: `bindings` wraps both drivers in its exported classes. State
//! is in an `Rc<RefCell<…>>` that is never borrowed while JS runs (see [`queue`]), since a JS
//! callback may call back into the driver. Builds natively too, where the pure parts
//! ([`json`], the loops) are tested.

#[cfg(feature = "device")]
mod attachment_read;
mod client_driver;
pub mod client_loop;
mod clock;
#[cfg(feature = "device")]
mod device_driver;
#[cfg(feature = "device")]
pub mod device_loop;
#[cfg(feature = "device")]
pub mod engine;
#[cfg(feature = "device")]
mod fetch;
#[cfg(feature = "device")]
pub mod instance_http;
pub mod js;
pub mod json;
pub mod queue;
mod socket;
mod timer;

pub use client_driver::ClientDriver;
#[cfg(feature = "device")]
pub use device_driver::DeviceDriver;
