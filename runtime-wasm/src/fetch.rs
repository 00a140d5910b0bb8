//! The Fetch API as the drivers use it: the global `fetch` (node ≥ 18 and browsers), an
//! `AbortController` per request, and a response body read one `reader.read()` at a time.
//! Declared here rather than taken from `web-sys`, whose `fetch` is a method of `Window` (node
//! has none) and which brings far more than these few members. Every call that can throw is
//! `catch` (see `js.rs`).

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::js;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = fetch, catch)]
    fn global_fetch(url: &str, init: &JsValue) -> Result<js_sys::Promise, JsValue>;

    pub type AbortController;

    #[wasm_bindgen(constructor, catch)]
    fn new() -> Result<AbortController, JsValue>;

    #[wasm_bindgen(method, getter)]
    fn signal(this: &AbortController) -> JsValue;

    #[wasm_bindgen(method, catch, js_name = abort)]
    fn abort_now(this: &AbortController) -> Result<(), JsValue>;

    /// A `Response`.
    pub type Response;

    #[wasm_bindgen(method, getter)]
    pub fn status(this: &Response) -> f64;

    #[wasm_bindgen(method, getter)]
    fn headers(this: &Response) -> Headers;

    #[wasm_bindgen(method, getter)]
    fn body(this: &Response) -> JsValue;

    type Headers;

    #[wasm_bindgen(method, catch, js_name = get)]
    fn get(this: &Headers, name: &str) -> Result<Option<String>, JsValue>;

    type ReadableStream;

    #[wasm_bindgen(method, catch, js_name = getReader)]
    fn get_reader(this: &ReadableStream) -> Result<Reader, JsValue>;

    /// A `ReadableStreamDefaultReader` of a response's body.
    pub type Reader;

    #[wasm_bindgen(method, catch, js_name = read)]
    fn read_next(this: &Reader) -> Result<js_sys::Promise, JsValue>;
}

/// What a request is sent with.
pub struct RequestInit<'a> {
    pub method: &'a str,
    /// Header names and values.
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Option<&'a [u8]>,
}

/// `fetch(url, init)` that `controller` can abort: a promise of the [`Response`].
pub fn fetch(
    url: &str,
    init: &RequestInit<'_>,
    controller: &AbortController,
) -> Result<js_sys::Promise, JsValue> {
    let o = js_sys::Object::new();
    let headers = js_sys::Object::new();
    for (name, value) in init.headers {
        js_sys::Reflect::set(&headers, &(*name).into(), &(*value).into())?;
    }
    js_sys::Reflect::set(&o, &"method".into(), &init.method.into())?;
    js_sys::Reflect::set(&o, &"headers".into(), &headers)?;
    if let Some(body) = init.body {
        js_sys::Reflect::set(&o, &"body".into(), &js_sys::Uint8Array::from(body))?;
    }
    js_sys::Reflect::set(&o, &"signal".into(), &controller.signal())?;
    global_fetch(url, &o)
}

impl AbortController {
    pub fn make() -> Result<AbortController, JsValue> {
        AbortController::new()
    }

    /// Abort its request: the fetch, or the body being read, rejects (and is let go).
    pub fn abort(&self) {
        if let Err(e) = self.abort_now() {
            js::report(e);
        }
    }
}

impl Response {
    /// A header's value, if the response has it.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers().get(name).ok().flatten()
    }

    /// A reader of its body; `None` for a response with none (it ends at once).
    pub fn reader(&self) -> Result<Option<Reader>, JsValue> {
        let body = self.body();
        if body.is_null() || body.is_undefined() {
            return Ok(None);
        }
        body.unchecked_into::<ReadableStream>()
            .get_reader()
            .map(Some)
    }
}

/// One `reader.read()`'s outcome.
pub enum Chunk {
    Bytes(Vec<u8>),
    Done,
}

impl Reader {
    /// One `read()`: a promise of `{ done, value }`, read with [`chunk`].
    pub fn read(&self) -> Result<js_sys::Promise, JsValue> {
        self.read_next()
    }
}

/// What a `read()` promise resolved to.
pub fn chunk(result: &JsValue) -> Chunk {
    if js::member(result, "done").as_bool() == Some(true) {
        return Chunk::Done;
    }
    let value = js::member(result, "value");
    if value.is_instance_of::<js_sys::Uint8Array>() || value.is_instance_of::<js_sys::ArrayBuffer>()
    {
        Chunk::Bytes(js_sys::Uint8Array::new(&value).to_vec())
    } else {
        Chunk::Bytes(Vec::new())
    }
}

/// Why a fetch or a read was rejected: its message and its cause's (node's `fetch failed`
/// says what failed only in `cause`: `connect ECONNREFUSED 127.0.0.1:9`).
pub fn why(error: &JsValue) -> String {
    let message = js::message_of(error);
    let cause = js::member(error, "cause");
    if cause.is_undefined() || cause.is_null() {
        return message;
    }
    let cause = js::message_of(&cause);
    if cause.is_empty() || message.contains(&cause) {
        message
    } else {
        format!("{message} ({cause})")
    }
}
