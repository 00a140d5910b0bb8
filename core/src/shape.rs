//! Pieces of the serde shapes the core's types have for a shell that speaks plain objects (the
//! wasm bindings' JS API, `bindings/lembas.d.ts`): the types themselves derive their shape, and
//! these are what a derive cannot say on its own.
//!
//! Tagged shapes (`{"type": "text", "text": "hi"}`) are written by serde's derive, but read in
//! one pass ([`crate::wire`]'s `one_pass`): serde's internally tagged `Deserialize` buffers
//! what it reads into its `Content` tree first and builds a second decoder per variant (86 KB of
//! the wasm module). A tuple variant whose JS shape names its value (`Text(String)` is
//! `{"type": "text", "text": ...}`) is written through [`member`]'s functions.

use base64::Engine as _;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// Bytes as standard base64 (an attachment, terminal input).
pub(crate) fn base64<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A frame the core made as the text a socket sends (the core writes UTF-8 JSON; anything else
/// would be shown lossily rather than dropped).
pub(crate) fn text<S: Serializer>(frame: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(frame))
}

/// `{ <name>: value }`: the body of a tuple variant inside a tagged shape (the tag is added
/// around it).
pub(crate) fn member<S: Serializer, T: Serialize + ?Sized>(
    name: &'static str,
    value: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(1))?;
    m.serialize_entry(name, value)?;
    m.end()
}

/// A `fn(&T, S)` that writes `{ <name>: value }`, for `#[serde(serialize_with)]` on a tuple
/// variant.
macro_rules! member_fn {
    ($fn_name:ident, $name:literal, $t:ty) => {
        pub(crate) fn $fn_name<S: serde::Serializer>(v: &$t, s: S) -> Result<S::Ok, S::Error> {
            crate::shape::member($name, v, s)
        }
    };
}
pub(crate) use member_fn;
