//! Typed params and results, one file per method family. Field names follow the wire
//! (camelCase for ACP's, snake_case where the `_lembas` extension uses it).

pub mod handshake;
pub mod session;
pub mod terminal;
