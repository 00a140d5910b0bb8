//! The JS side of the boundary: values in and out (through JSON, in the shapes of [`crate::json`]),
//! calls to JS functions that come back as `Err` when they throw, closures handed to JS, and
//! promises. Every import that can throw is declared `catch`: a JS exception must never unwind
//! through Rust frames, which would leave a `RefCell` borrowed.

use std::fmt::Display;

use js_sys::Reflect;
use serde_json::Value;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use lembas_core::Time;

#[wasm_bindgen]
extern "C" {
    /// Any JS function, called through `Function.prototype.call`.
    #[wasm_bindgen(typescript_type = "Function")]
    pub type Func;

    #[wasm_bindgen(method, catch, js_name = call)]
    fn call_with0(this: &Func, this_arg: &JsValue) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(method, catch, js_name = call)]
    fn call_with1(this: &Func, this_arg: &JsValue, a: &JsValue) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(method, catch, js_name = call)]
    fn call_with2(
        this: &Func,
        this_arg: &JsValue,
        a: &JsValue,
        b: &JsValue,
    ) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(method, catch, js_name = call)]
    fn call_with3(
        this: &Func,
        this_arg: &JsValue,
        a: &JsValue,
        b: &JsValue,
        c: &JsValue,
    ) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(line: &str);

    /// What `Promise.resolve` gives: the promise itself, or one settled with a plain value.
    pub type Settled;

    #[wasm_bindgen(js_namespace = Promise, js_name = resolve)]
    fn promise_resolve(value: &JsValue) -> Settled;

    #[wasm_bindgen(method, js_name = then)]
    fn then2(this: &Settled, ok: &JsValue, failed: &JsValue) -> js_sys::Promise;

    #[wasm_bindgen(js_namespace = Promise, js_name = reject)]
    fn promise_reject(reason: &JsValue) -> JsValue;
}

impl Func {
    pub fn call0(&self, this: &JsValue) -> Result<JsValue, JsValue> {
        self.call_with0(this)
    }

    pub fn call1(&self, this: &JsValue, a: &JsValue) -> Result<JsValue, JsValue> {
        self.call_with1(this, a)
    }

    pub fn call2(&self, this: &JsValue, a: &JsValue, b: &JsValue) -> Result<JsValue, JsValue> {
        self.call_with2(this, a, b)
    }

    pub fn call3(
        &self,
        this: &JsValue,
        a: &JsValue,
        b: &JsValue,
        c: &JsValue,
    ) -> Result<JsValue, JsValue> {
        self.call_with3(this, a, b, c)
    }
}

/// A line for the console (`console.warn`): what a driver reports when its caller gave it
/// nowhere else to.
/// A seed from the page's randomness, for a `ClientDriver` whose options name none: the core's
/// fixed default would make a reloaded page's turn ids those of the page before it, and the
/// device would answer them from its ledger instead of running them.
pub fn random_seed() -> u64 {
    let half = || (js_sys::Math::random() * 4_294_967_296.0) as u64;
    (half() << 32) | half()
}

pub fn warn(line: &str) {
    console_warn(line);
}

pub fn err(e: impl Display) -> JsError {
    JsError::new(&e.to_string())
}

pub fn to_js(v: &Value) -> JsValue {
    js_sys::JSON::parse(&v.to_string()).unwrap_or(JsValue::NULL)
}

pub fn from_js(v: &JsValue) -> Result<Value, JsError> {
    json_value(v).map_err(err)
}

/// A JS value as JSON (`undefined` and `null` are `null`), or the sentence why it is not.
pub fn json_value(v: &JsValue) -> Result<Value, String> {
    if v.is_undefined() || v.is_null() {
        return Ok(Value::Null);
    }
    let text: String = js_sys::JSON::stringify(v)
        .map_err(|_| "the value cannot be written as JSON".to_string())?
        .into();
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

pub fn array(items: impl IntoIterator<Item = Value>) -> JsValue {
    to_js(&Value::Array(items.into_iter().collect()))
}

/// A time from JS: a finite number of milliseconds, not negative.
pub fn time(now: f64) -> Result<Time, JsError> {
    whole("now", now).map(Time)
}

pub fn whole(what: &str, n: f64) -> Result<u64, JsError> {
    if (0.0..=9_007_199_254_740_991.0).contains(&n) {
        Ok(n as u64)
    } else {
        Err(err(format!("{what} must be a finite number ≥ 0 (got {n})")))
    }
}

/// A frame from JS: a string (a WebSocket text message, a stdio line) or bytes (a
/// `Uint8Array`, node's `Buffer`, an `ArrayBuffer`).
pub fn bytes(data: &JsValue) -> Result<Vec<u8>, JsError> {
    if let Some(s) = data.as_string() {
        return Ok(s.into_bytes());
    }
    if data.is_instance_of::<js_sys::Uint8Array>() || data.is_instance_of::<js_sys::ArrayBuffer>() {
        return Ok(js_sys::Uint8Array::new(data).to_vec());
    }
    Err(err(
        "a frame must be a string, a Uint8Array or an ArrayBuffer",
    ))
}

/// `obj[name]`, or `undefined` when `obj` has no such member (or is not an object).
pub fn member(obj: &JsValue, name: &str) -> JsValue {
    if !obj.is_object() && !obj.is_function() {
        return JsValue::UNDEFINED;
    }
    Reflect::get(obj, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED)
}

/// `obj[name]` when it is a function, `None` when it is left out; anything else is refused
/// with `what` (`"options.dial"`) in the sentence.
pub fn function(obj: &JsValue, name: &str, what: &str) -> Result<Option<Func>, JsError> {
    let f = member(obj, name);
    if f.is_undefined() || f.is_null() {
        Ok(None)
    } else if f.is_function() {
        Ok(Some(f.unchecked_into()))
    } else {
        Err(err(format!("{what} must be a function")))
    }
}

/// Refuse an options object with a member not in `known`, so a misspelt callback is an error
/// rather than a silent default.
pub fn known_members(obj: &JsValue, known: &[&str], what: &str) -> Result<(), JsError> {
    if obj.is_undefined() || obj.is_null() {
        return Ok(());
    }
    let Some(o) = obj.dyn_ref::<js_sys::Object>() else {
        return Err(err(format!("{what} must be an object")));
    };
    for key in js_sys::Object::keys(o).iter() {
        let key = key.as_string().unwrap_or_default();
        if !known.contains(&key.as_str()) {
            return Err(err(format!(
                "{what} has no member `{key}` (known: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// Whether `v` is a promise or another thenable.
pub fn is_thenable(v: &JsValue) -> bool {
    member(v, "then").is_function()
}

/// A promise rejected with `reason`.
pub fn rejected(reason: &JsValue) -> js_sys::Promise {
    promise_reject(reason).unchecked_into()
}

/// A promise of `value` (itself, when it is one).
pub fn resolved(value: &JsValue) -> js_sys::Promise {
    promise_resolve(value).unchecked_into()
}

/// Run `ok` with what `value` settles to (at once if it is not a promise, in a microtask), or
/// `failed` with why it was rejected. Returns the promise of what `ok` returns.
pub fn when_settled(value: &JsValue, ok: JsValue, failed: &JsValue) -> js_sys::Promise {
    promise_resolve(value).then2(&ok, failed)
}

/// [`when_settled`] for its effect alone: the promise it makes has no further use.
pub fn on_settled(value: &JsValue, ok: JsValue, failed: &JsValue) {
    let _ = when_settled(value, ok, failed);
}

/// A JS function that calls `f` every time (an event listener). Its Rust side is freed when JS
/// no longer holds the function.
pub fn callback(f: impl Fn(JsValue) + 'static) -> JsValue {
    Closure::<dyn Fn(JsValue)>::new(f).into_js_value()
}

/// A JS function that calls `f` once (a timer, a promise's handler).
pub fn once(f: impl FnOnce(JsValue) + 'static) -> JsValue {
    Closure::<dyn FnMut(JsValue)>::once(f).into_js_value()
}

/// A JS function that calls `f` once and hands its result (or throws its error) back to JS:
/// a promise's handler whose outcome is the promise's.
pub fn once_returning(f: impl FnOnce(JsValue) -> Result<JsValue, JsValue> + 'static) -> JsValue {
    Closure::<dyn FnMut(JsValue) -> Result<JsValue, JsValue>>::once(f).into_js_value()
}

/// An error a JS callback threw (`onEvent`, `onEffect`, `store.apply`, ...) that has no caller
/// to go back to: it becomes an unhandled promise rejection, which node reports (and by
/// default exits on) and a browser logs, while the driver carries on.
pub fn report(error: JsValue) {
    let _ = promise_reject(&error);
}

/// The sentence of a JS error (its `message`), or the value itself when it is a string.
pub fn message_of(error: &JsValue) -> String {
    error
        .as_string()
        .or_else(|| member(error, "message").as_string())
        .unwrap_or_else(|| "an error without a message".into())
}
