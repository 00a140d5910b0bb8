//! Typed params and results, one file per method family. Field names follow the wire
//! (camelCase for ACP's, snake_case where the `_lembas` extension uses it).

pub mod handshake;
pub mod session;
pub mod terminal;

/// A variant's field, for the one-pass decoders of tagged enums (every variant's fields read as
/// options, then the tag's checked): serde's own "missing field" error when it is absent.
pub(crate) fn need<T, E: serde::de::Error>(v: Option<T>, field: &'static str) -> Result<T, E> {
    v.ok_or_else(|| E::missing_field(field))
}
