//! The model engine's HTTP to the instance, performed with the global `fetch` (see
//! [`crate::fetch`]): its `Fetch`, `Read` and `Abort` calls, and the model list
//! (`GET /v1/models`) fetched at each dial. The instance's base URL and the device token are
//! JS's `options.model`; the token goes in `Authorization` and nowhere else: never in a URL,
//! an error or a log line (a message that came back with it in is scrubbed too).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use lembas_core::engine_io::{HttpMethod, IoId, IoReply};
use lembas_core::model::engine::ModelEngineConfig;
use lembas_core::model::models::{self, ModelList};

use crate::fetch::{self, AbortController, Chunk, Reader, RequestInit, Response};
use crate::js::{self, err};
use crate::json;
use crate::timer;

const MODEL_OPTIONS: &[&str] = &[
    "instance",
    "token",
    "engine",
    "modelsTimeoutMs",
    "maxModelsBytes",
];

/// The bounds on fetching the model list, each named where it gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelsLimits {
    /// The whole `GET /v1/models`, answer and body (`options.model.modelsTimeoutMs`).
    pub timeout_ms: u64,
    /// Its body's bytes (`options.model.maxModelsBytes`).
    pub max_bytes: usize,
    /// Chat models kept of it (`options.model.engine.max_models`, as the native shell's
    /// config.yaml `engine.max_models`).
    pub max_models: usize,
}

impl Default for ModelsLimits {
    fn default() -> Self {
        ModelsLimits {
            timeout_ms: 15_000,
            max_bytes: 4 << 20,
            max_models: models::DEFAULT_MAX_MODELS,
        }
    }
}

/// Where the engine's requests go, and with which token.
pub struct Instance {
    /// `http(s)://host[:port][/prefix]`, without a trailing `/`: a call's path is joined to it.
    base: String,
    token: String,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// `options.model`: the model engine on this instance.
#[derive(Debug)]
pub struct ModelOptions {
    pub instance: Instance,
    pub engine: ModelEngineConfig,
    pub models: ModelsLimits,
}

/// `options.model`, or `None` when it is left out (the scripted engine). A refusal names the
/// member and why, never the token's value.
pub fn model_options(o: &JsValue) -> Result<Option<ModelOptions>, JsValue> {
    if o.is_undefined() || o.is_null() {
        return Ok(None);
    }
    if !o.is_object() {
        return Err(err("options.model must be an object: { instance, token, engine? }").into());
    }
    js::known_members(o, MODEL_OPTIONS, "options.model")?;
    let string = |name: &str| {
        js::member(o, name)
            .as_string()
            .ok_or_else(|| err(format!("options.model.{name} is needed, a string")))
    };
    let base = base_url(&string("instance")?).map_err(err)?;
    let token = string("token")?;
    check_token(&token).map_err(err)?;
    let engine = js::member(o, "engine");
    let (mut engine, tools_said) = if engine.is_undefined() || engine.is_null() {
        (ModelEngineConfig::default(), false)
    } else {
        let value: serde_json::Value = js::from_js(&engine)?;
        let said = value.pointer("/tools/enabled").is_some();
        (
            json::read("options.model.engine", value).map_err(err)?,
            said,
        )
    };
    // A page has no project on a disk to act on (its shell refuses every tool call), so the
    // model is offered no tools unless the harness asks for them to see the refusals.
    if !tools_said {
        engine.tools.enabled = false;
    }
    // Its refusals name the setting as config.yaml has it (`engine.read_bytes`).
    engine
        .validate()
        .map_err(|e| err(e.0.replace("engine.", "options.model.engine.")))?;
    let mut models = ModelsLimits::default();
    let number = |name: &str| -> Result<Option<u64>, JsValue> {
        let v = js::member(o, name);
        if v.is_undefined() {
            return Ok(None);
        }
        let n = v
            .as_f64()
            .ok_or_else(|| err(format!("options.model.{name} must be a number")))?;
        Ok(Some(js::whole(&format!("options.model.{name}"), n)?))
    };
    if let Some(n) = number("modelsTimeoutMs")? {
        models.timeout_ms = n;
    }
    if let Some(n) = number("maxModelsBytes")? {
        models.max_bytes = usize::try_from(n).unwrap_or(usize::MAX);
    }
    models.max_models = engine.max_models;
    Ok(Some(ModelOptions {
        instance: Instance { base, token },
        engine,
        models,
    }))
}

/// The instance's base URL as calls are joined to it: `http://` or `https://`, a host, no
/// credentials, query or fragment; a trailing `/` dropped.
pub fn base_url(given: &str) -> Result<String, String> {
    let what = "options.model.instance";
    let rest = given
        .strip_prefix("https://")
        .or_else(|| given.strip_prefix("http://"))
        .ok_or_else(|| format!("{what} must be an http:// or https:// URL (got `{given}`)"))?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() {
        return Err(format!("{what} has no host (got `{given}`)"));
    }
    if host.contains('@') {
        // Not echoed: what precedes the `@` is a credential.
        return Err(format!(
            "{what} must not carry credentials: the device token goes in options.model.token"
        ));
    }
    if given.contains(['?', '#']) || given.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{what} must be a base URL, without a query, a fragment or spaces (got `{given}`)"
        ));
    }
    Ok(given.trim_end_matches('/').to_string())
}

/// A token an `Authorization` header can carry. Its value is never in the sentence.
pub fn check_token(token: &str) -> Result<(), String> {
    if token.is_empty() {
        return Err("options.model.token is empty: give the device token".into());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "options.model.token must be printable ASCII without spaces (its value \
                    is not shown)"
                .into(),
        );
    }
    Ok(())
}

/// Where a call's replies go (the driver hands them to its engine).
pub type Reply = Rc<dyn Fn(IoReply)>;

/// One request to the instance: its abort, its body's reader once the head is in, and bytes
/// read past what the last `Read` asked for, kept for the next.
struct Request {
    url: String,
    controller: AbortController,
    reader: RefCell<Option<Reader>>,
    rest: RefCell<Vec<u8>>,
}

pub struct InstanceHttp {
    instance: Instance,
    requests: RefCell<BTreeMap<IoId, Rc<Request>>>,
    /// The model list being fetched, if one is.
    models: RefCell<Weak<ModelsGet>>,
}

impl InstanceHttp {
    pub fn new(instance: Instance) -> InstanceHttp {
        InstanceHttp {
            instance,
            requests: RefCell::new(BTreeMap::new()),
            models: RefCell::new(Weak::new()),
        }
    }

    /// The instance's base URL (for log lines).
    pub fn base(&self) -> &str {
        &self.instance.base
    }

    /// Why a call to `url` failed: the URL and JS's words, with the token scrubbed out.
    fn reason(&self, url: &str, error: &JsValue) -> String {
        let why = fetch::why(error).replace(&self.instance.token, "<token>");
        format!("{url}: {why}")
    }

    fn init<'a>(
        &self,
        method: HttpMethod,
        headers: &'a [(&'a str, &'a str)],
        body: &'a [u8],
    ) -> RequestInit<'a> {
        RequestInit {
            method: method.as_str(),
            headers,
            body: (method == HttpMethod::Post).then_some(body),
        }
    }

    /// `Fetch`: answered with `Head` once the response arrives, or `Failed`.
    pub fn fetch(
        self: &Rc<Self>,
        id: IoId,
        method: HttpMethod,
        path: &str,
        body: &[u8],
        reply: Reply,
    ) {
        let url = format!("{}{path}", self.instance.base);
        let auth = format!("Bearer {}", self.instance.token);
        // A chat completion is asked for as a stream (`stream: true` in its body).
        let accept = if path.ends_with("/chat/completions") {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut headers = vec![("authorization", auth.as_str()), ("accept", accept)];
        if method == HttpMethod::Post {
            headers.push(("content-type", "application/json"));
        }
        let started = AbortController::make().and_then(|controller| {
            let sent = fetch::fetch(&url, &self.init(method, &headers, body), &controller)?;
            Ok((controller, sent))
        });
        let (controller, sent) = match started {
            Ok(s) => s,
            Err(e) => {
                return reply(IoReply::Failed {
                    reason: self.reason(&url, &e),
                })
            }
        };
        let request = Rc::new(Request {
            url,
            controller,
            reader: RefCell::new(None),
            rest: RefCell::new(Vec::new()),
        });
        self.requests.borrow_mut().insert(id, request.clone());
        let (me, me_too, failed_reply, failed_request) =
            (self.clone(), self.clone(), reply.clone(), request.clone());
        let head = js::once(move |v| {
            if !me.is_current(id, &request) {
                return;
            }
            let response: Response = v.unchecked_into();
            match response.reader() {
                Ok(reader) => *request.reader.borrow_mut() = reader,
                Err(e) => {
                    me.requests.borrow_mut().remove(&id);
                    let reason = me.reason(&request.url, &e);
                    return reply(IoReply::Failed { reason });
                }
            }
            reply(IoReply::Head {
                status: response.status().clamp(0.0, 999.0) as u16,
                retry_after: response.header("retry-after"),
            })
        });
        let failed = js::once(move |e| {
            if me_too.is_current(id, &failed_request) {
                me_too.requests.borrow_mut().remove(&id);
                failed_reply(IoReply::Failed {
                    reason: me_too.reason(&failed_request.url, &e),
                });
            }
        });
        js::on_settled(&sent, head, &failed);
    }

    /// `Read`: at most `max` bytes of the body (one `reader.read()`, or what the last one gave
    /// past its `max`), `End` when it is done, or `Failed`.
    pub fn read(self: &Rc<Self>, id: IoId, max: usize, reply: Reply) {
        let Some(request) = self.requests.borrow().get(&id).cloned() else {
            // Let go of (aborted, ended): nothing more is said of it.
            return;
        };
        let max = max.max(1);
        let kept = {
            let mut rest = request.rest.borrow_mut();
            (!rest.is_empty()).then(|| take_front(&mut rest, max))
        };
        if let Some(piece) = kept {
            return reply(IoReply::Body(piece));
        }
        // `read()` calls nothing of ours back: the borrow may span it.
        let asked = request.reader.borrow().as_ref().map(Reader::read);
        let asked = match asked {
            Some(Ok(p)) => p,
            None => {
                // A response without a body.
                self.requests.borrow_mut().remove(&id);
                return reply(IoReply::End);
            }
            Some(Err(e)) => {
                self.requests.borrow_mut().remove(&id);
                let reason = self.reason(&request.url, &e);
                return reply(IoReply::Failed { reason });
            }
        };
        let (me, me_too, failed_reply, failed_request) =
            (self.clone(), self.clone(), reply.clone(), request.clone());
        let got = js::once(move |v| {
            if !me.is_current(id, &request) {
                return;
            }
            match fetch::chunk(&v) {
                Chunk::Done => {
                    me.requests.borrow_mut().remove(&id);
                    reply(IoReply::End)
                }
                // A body piece is never empty: read on.
                Chunk::Bytes(b) if b.is_empty() => me.read(id, max, reply),
                Chunk::Bytes(mut b) => {
                    if b.len() > max {
                        *request.rest.borrow_mut() = b.split_off(max);
                    }
                    reply(IoReply::Body(b))
                }
            }
        });
        let failed = js::once(move |e| {
            if me_too.is_current(id, &failed_request) {
                me_too.requests.borrow_mut().remove(&id);
                failed_reply(IoReply::Failed {
                    reason: me_too.reason(&failed_request.url, &e),
                });
            }
        });
        js::on_settled(&asked, got, &failed);
    }

    /// `Abort`: the request (or its body) is aborted at once; nothing more is reported of it.
    pub fn abort(&self, id: IoId) {
        let request = self.requests.borrow_mut().remove(&id);
        if let Some(r) = request {
            r.controller.abort();
        }
    }

    /// Abort every request, and a model list being fetched without a word of it (the driver
    /// stopped: nothing is left waiting on the network or a timer).
    pub fn abort_all(&self) {
        let all = std::mem::take(&mut *self.requests.borrow_mut());
        for r in all.into_values() {
            r.controller.abort();
        }
        let models = self.models.borrow().upgrade();
        if let Some(get) = models {
            get.done.borrow_mut().take();
            get.finish(Err(String::new()));
        }
    }

    fn is_current(&self, id: IoId, request: &Rc<Request>) -> bool {
        self.requests
            .borrow()
            .get(&id)
            .is_some_and(|r| Rc::ptr_eq(r, request))
    }

    /// `GET /v1/models` with the token, within `limits`: `done` gets the chat models, or why
    /// there are none (naming the URL and the bound).
    pub fn get_models(
        &self,
        limits: ModelsLimits,
        done: impl FnOnce(Result<ModelList, String>) + 'static,
    ) {
        let url = format!("{}/v1/models", self.instance.base);
        let auth = format!("Bearer {}", self.instance.token);
        let headers = [
            ("authorization", auth.as_str()),
            ("accept", "application/json"),
        ];
        let init = self.init(HttpMethod::Get, &headers, &[]);
        let started = AbortController::make().and_then(|controller| {
            let sent = fetch::fetch(&url, &init, &controller)?;
            Ok((controller, sent))
        });
        let (controller, sent) = match started {
            Ok(s) => s,
            Err(e) => return done(Err(self.reason(&url, &e))),
        };
        let get = Rc::new(ModelsGet {
            url,
            token: self.instance.token.clone(),
            limits,
            controller,
            timer: RefCell::new(None),
            timed_out: Cell::new(false),
            body: RefCell::new(Vec::new()),
            done: RefCell::new(Some(Box::new(done))),
        });
        let timeout = {
            let get = get.clone();
            js::once(move |_| {
                get.timed_out.set(true);
                get.controller.abort();
            })
        };
        *get.timer.borrow_mut() = Some(timer::after(limits.timeout_ms, &timeout));
        *self.models.borrow_mut() = Rc::downgrade(&get);
        let (answered, failed) = (get.clone(), get.clone());
        let head = js::once(move |v| answered.head(v.unchecked_into()));
        let failed = js::once(move |e| failed.failed(&e));
        js::on_settled(&sent, head, &failed);
    }
}

/// The first `n` bytes of `v`, leaving the rest in it.
fn take_front(v: &mut Vec<u8>, n: usize) -> Vec<u8> {
    let rest = v.split_off(n.min(v.len()));
    std::mem::replace(v, rest)
}

type ModelsDone = Box<dyn FnOnce(Result<ModelList, String>)>;

/// One `GET /v1/models` under way: its body read whole (within `max_bytes`), all of it
/// within `timeout_ms`.
struct ModelsGet {
    url: String,
    token: String,
    limits: ModelsLimits,
    controller: AbortController,
    timer: RefCell<Option<JsValue>>,
    timed_out: Cell<bool>,
    body: RefCell<Vec<u8>>,
    done: RefCell<Option<ModelsDone>>,
}

impl ModelsGet {
    fn finish(&self, result: Result<ModelList, String>) {
        if let Some(handle) = self.timer.borrow_mut().take() {
            timer::cancel(&handle);
        }
        // Lets go of the connection of a body not read to its end.
        self.controller.abort();
        let done = self.done.borrow_mut().take();
        if let Some(done) = done {
            done(result);
        }
    }

    fn failed(&self, error: &JsValue) {
        let why = if self.timed_out.get() {
            format!(
                "{} gave no answer within {} ms (options.model.modelsTimeoutMs)",
                self.url, self.limits.timeout_ms
            )
        } else {
            let why = fetch::why(error).replace(&self.token, "<token>");
            format!("{}: {why}", self.url)
        };
        self.finish(Err(why));
    }

    fn head(self: &Rc<Self>, response: Response) {
        let status = response.status().clamp(0.0, 999.0) as u16;
        if status == 401 || status == 403 {
            return self.finish(Err(format!(
                "{}: the instance refused the device token (HTTP {status}): log in again",
                self.url
            )));
        }
        if !(200..300).contains(&status) {
            return self.finish(Err(format!("{} answered HTTP {status}", self.url)));
        }
        match response.reader() {
            Ok(Some(reader)) => self.read_on(reader),
            Ok(None) => self.parse(),
            Err(e) => self.failed(&e),
        }
    }

    fn read_on(self: &Rc<Self>, reader: Reader) {
        let asked = match reader.read() {
            Ok(p) => p,
            Err(e) => return self.failed(&e),
        };
        let (me, me_too) = (self.clone(), self.clone());
        let got = js::once(move |v| match fetch::chunk(&v) {
            Chunk::Done => me.parse(),
            Chunk::Bytes(b) => {
                let most = me.limits.max_bytes;
                if me.body.borrow().len() + b.len() > most {
                    return me.finish(Err(format!(
                        "{}: the model list is longer than {most} bytes \
                         (options.model.maxModelsBytes)",
                        me.url
                    )));
                }
                me.body.borrow_mut().extend_from_slice(&b);
                me.read_on(reader);
            }
        });
        let failed = js::once(move |e| me_too.failed(&e));
        js::on_settled(&asked, got, &failed);
    }

    fn parse(&self) {
        let body = std::mem::take(&mut *self.body.borrow_mut());
        self.finish(models::chat_models(&body, self.limits.max_models));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_is_http_with_a_host_and_loses_its_trailing_slash() {
        assert_eq!(
            base_url("http://127.0.0.1:8080/").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            base_url("https://llembas.example/api").unwrap(),
            "https://llembas.example/api"
        );
        for bad in [
            "ftp://x",
            "127.0.0.1:80",
            "http://",
            "http:///v1",
            "http://a b",
        ] {
            let e = base_url(bad).unwrap_err();
            assert!(e.starts_with("options.model.instance"), "{bad}: {e}");
        }
        assert!(base_url("http://x/?a=1").is_err());
        let e = base_url("https://user:s3cret@x").unwrap_err();
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_token_that_a_header_cannot_carry_is_refused_without_showing_it() {
        assert_eq!(check_token("dev_Abc-123.x"), Ok(()));
        assert!(check_token("").is_err());
        for bad in ["has space", "line\nbreak", "tab\t", "é"] {
            let e = check_token(bad).unwrap_err();
            assert!(e.contains("options.model.token"), "{e}");
            assert!(!e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_read_past_its_max_keeps_the_rest_in_order() {
        let mut rest = b"abcdefg".to_vec();
        assert_eq!(take_front(&mut rest, 3), b"abc");
        assert_eq!(take_front(&mut rest, 3), b"def");
        assert_eq!(take_front(&mut rest, 3), b"g");
        assert!(rest.is_empty());
    }
}
