//! The socket a driver is handed: anything with `send(string)`, `close(code, reason)` and
//! `addEventListener` for `open`, `message`, `close` and `error` — a browser `WebSocket`, or
//! npm `ws` in node (the one that can send a device's `Authorization` header).

use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::js;

#[wasm_bindgen]
extern "C" {
    pub type SocketLike;

    #[wasm_bindgen(method, catch, js_name = send)]
    fn js_send(this: &SocketLike, data: &str) -> Result<(), JsValue>;

    #[wasm_bindgen(method, catch, js_name = close)]
    fn js_close(this: &SocketLike, code: u16, reason: &str) -> Result<(), JsValue>;

    #[wasm_bindgen(method, catch, js_name = addEventListener)]
    fn add_event_listener(this: &SocketLike, kind: &str, listener: &JsValue)
        -> Result<(), JsValue>;
}

/// What a socket's listeners hear.
pub enum SocketEvent {
    Open,
    /// A message's `data`: a string, or bytes.
    Message(JsValue),
    /// Closed (with the close event's code) or failed (`error`, no code). Only the device's
    /// driver reads the code.
    Down(#[cfg_attr(not(feature = "device"), allow(dead_code))] Option<u16>),
}

pub struct Socket(SocketLike);

impl Socket {
    /// Take `value` as a socket and listen to it. Refused when it is not an object with
    /// `addEventListener`.
    pub fn listen(
        value: JsValue,
        on: impl Fn(SocketEvent) + 'static,
    ) -> Result<Rc<Socket>, JsValue> {
        if !js::member(&value, "addEventListener").is_function() {
            return Err(js::err("a socket must have addEventListener, send and close").into());
        }
        let socket = SocketLike::from(value);
        // Binary messages as ArrayBuffer, not a browser's default Blob, so they read at once.
        let _ = js_sys::Reflect::set(&socket, &"binaryType".into(), &"arraybuffer".into());
        let on: Rc<dyn Fn(SocketEvent)> = Rc::new(on);
        let listeners: [(&str, JsValue); 4] = [
            ("open", {
                let on = on.clone();
                js::callback(move |_| on(SocketEvent::Open))
            }),
            ("message", {
                let on = on.clone();
                js::callback(move |ev| on(SocketEvent::Message(js::member(&ev, "data"))))
            }),
            ("close", {
                let on = on.clone();
                js::callback(move |ev| on(SocketEvent::Down(close_code_of(&ev))))
            }),
            ("error", js::callback(move |_| on(SocketEvent::Down(None)))),
        ];
        for (kind, listener) in &listeners {
            socket.add_event_listener(kind, listener)?;
        }
        Ok(Rc::new(Socket(socket)))
    }

    /// Whether it is open already (`readyState` 1), as a server's accepted socket is.
    pub fn is_open(&self) -> bool {
        js::member(&self.0, "readyState").as_f64() == Some(1.0)
    }

    /// The bytes it has been given and not yet sent (`bufferedAmount`; 0 for a socket without
    /// one, which then never holds the engine back). Only the device's driver reads it.
    #[cfg_attr(not(feature = "device"), allow(dead_code))]
    pub fn buffered_amount(&self) -> usize {
        js::member(&self.0, "bufferedAmount")
            .as_f64()
            .filter(|b| b.is_finite() && *b > 0.0)
            .map_or(0, |b| b as usize)
    }

    /// Send one text message. A socket that throws (not open, gone) is closed, so the driver
    /// hears it is down instead of losing frames quietly.
    pub fn send(&self, frame: &str) {
        if let Err(e) = self.0.js_send(frame) {
            js::report(e);
            self.close(1000, "the socket refused a frame");
        }
    }

    pub fn close(&self, code: u16, reason: &str) {
        if let Err(e) = self.0.js_close(close_code(code), close_reason(reason)) {
            js::report(e);
        }
    }
}

fn close_code_of(ev: &JsValue) -> Option<u16> {
    js::member(ev, "code")
        .as_f64()
        .filter(|c| (0.0..=65_535.0).contains(c))
        .map(|c| c as u16)
}

/// The code to close with: a browser `WebSocket` accepts only 1000 and 3000–4999 (and throws
/// on any other), so the core's 1001, 1008, 1011 and 1012 go out as 1000; its 4xxx codes pass.
pub fn close_code(code: u16) -> u16 {
    if code == 1000 || (3000..=4999).contains(&code) {
        code
    } else {
        1000
    }
}

/// A close reason a browser takes: at most 123 bytes of UTF-8, cut at a character boundary.
pub fn close_reason(reason: &str) -> &str {
    lembas_core::text::floor_char(reason, 123)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_a_browser_refuses_become_1000() {
        assert_eq!(close_code(1000), 1000);
        assert_eq!(close_code(4400), 4400);
        assert_eq!(close_code(3000), 3000);
        assert_eq!(close_code(1008), 1000);
        assert_eq!(close_code(1012), 1000);
        assert_eq!(close_code(5000), 1000);
    }

    #[test]
    fn close_reasons_are_cut_to_123_bytes_on_a_character() {
        assert_eq!(close_reason("bye"), "bye");
        let long = "é".repeat(100);
        let cut = close_reason(&long);
        assert_eq!(cut.len(), 122);
        assert!(long.starts_with(cut));
    }
}
