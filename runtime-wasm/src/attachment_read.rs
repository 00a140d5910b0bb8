//! The model engine's `ReadAttachment`, asked of JS: a wasm device writes a prompt's
//! attachments through `onEffect` (`write_attachment`), so it reads them back through
//! `options.readAttachment(sessionId, fileName, max)`, which gives the file's bytes (a
//! `Uint8Array`, cut here to `max`) or `{ bytes, size }` (its first bytes and its whole size),
//! or a promise of either.

use wasm_bindgen::prelude::*;

use crate::js;

/// What `readAttachment` must give, for the sentence of a refusal.
const SHAPE: &str = "options.readAttachment must give a Uint8Array (the file), or { bytes, size } \
                     (its first bytes and its whole size), or a promise of one";

/// Whether `name` is a plain file name (the core's attachment names are; the shell refuses
/// anything that could reach outside the session's directory).
pub fn plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The file's first `max` bytes and its whole size, from what `readAttachment` gave.
pub fn read(given: &JsValue, max: u64) -> Result<(Vec<u8>, u64), String> {
    let whole = |v: &JsValue| {
        v.is_instance_of::<js_sys::Uint8Array>() || v.is_instance_of::<js_sys::ArrayBuffer>()
    };
    let (mut bytes, size) = if whole(given) {
        let bytes = js_sys::Uint8Array::new(given).to_vec();
        let size = bytes.len() as u64;
        (bytes, size)
    } else {
        let bytes = js::member(given, "bytes");
        let size = js::member(given, "size").as_f64();
        let (true, Some(size)) = (whole(&bytes), size) else {
            return Err(SHAPE.into());
        };
        let bytes = js_sys::Uint8Array::new(&bytes).to_vec();
        let size = js::whole("readAttachment's size", size).map_err(|_| SHAPE.to_string())?;
        if size < bytes.len() as u64 {
            return Err(format!(
                "options.readAttachment gave {} bytes of a file it said has {size}",
                bytes.len()
            ));
        }
        (bytes, size)
    };
    bytes.truncate(usize::try_from(max).unwrap_or(usize::MAX));
    Ok((bytes, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_file_name_is_read() {
        assert!(plain_file_name("1-a-notes.md"));
        for bad in ["", ".", "..", "a/b", "..\\x", "../up", "nul\0"] {
            assert!(!plain_file_name(bad), "{bad:?}");
        }
    }
}
