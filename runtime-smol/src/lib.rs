//! The native shell of the LLeMbas device link: the `lembas` binary's parts. One driver task
//! owns the core's `Device`; sockets, stdin, the engine and the disk feed it inputs over
//! channels, and it performs the effects the device asks for (see [`driver`]).
//!
//! The `dev` feature (on by default) adds the test instance, its relay, `lembas demo` and
//! `lembas test-instance`: for tests and the demo, left out of the installed binary.

pub mod channels;
pub mod clock;
pub mod command_files;
pub mod config;
pub mod config_edit;
pub mod config_set;
#[cfg(feature = "dev")]
pub mod demo;
pub mod device;
pub mod dirs;
pub mod driver;
pub mod embedding;
pub mod engine;
pub mod engine_io;
pub mod file_index;
pub mod git_changes;
pub mod handover;
pub mod hub;
pub mod hub_client;
pub mod hub_relay;
#[cfg(feature = "dev")]
pub mod instance;
#[cfg(feature = "dev")]
pub mod instance_api;
#[cfg(feature = "dev")]
pub mod instance_cli;
#[cfg(feature = "dev")]
pub mod instance_upstream;
pub mod lines;
pub mod link;
pub mod list_dir;
pub mod logger;
pub mod login;
pub mod mentions;
pub mod outbox;
pub mod personalization;
#[cfg(feature = "dev")]
pub mod relay;
pub mod reload;
pub mod sessions;
pub mod stdio;
pub mod store;
pub mod store_yield;
pub mod terminal;
pub mod terminal_host;
pub mod tools;
pub mod trust;
