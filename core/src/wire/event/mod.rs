//! What the device sends of its own accord, typed: one file per family. The device encodes
//! these; a client can decode them.
//!
//! The bytes are those the device wrote when it built these messages as `serde_json::Value`s,
//! whose maps sort their keys: every struct here declares its fields in that sorted order, and a
//! tag sits where it sorts (see [`lembas::LembasEvent`]'s `Serialize`).

pub mod card;
pub mod lembas;
pub mod notice;
pub mod seq;
pub mod update;
