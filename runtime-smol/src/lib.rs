//! The native shell of the LLeMbas device link: the `lembas` binary's parts. One driver task
//! owns the core's `Device`; sockets, stdin, the engine and the disk feed it inputs over
//! channels, and it performs the effects the device asks for (see [`driver`]).

pub mod channels;
pub mod clock;
pub mod config;
pub mod demo;
pub mod device;
pub mod dirs;
pub mod driver;
pub mod instance;
pub mod instance_cli;
pub mod link;
pub mod logger;
pub mod login;
pub mod outbox;
pub mod relay;
pub mod reload;
pub mod sessions;
pub mod stdio;
pub mod store;
pub mod terminal;
pub mod terminal_host;
pub mod trust;
