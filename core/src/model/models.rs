//! The instance's model list (`GET /v1/models`) and how the device names its models.
//!
//! The served id is the device's ref for a model. The older forms still name the same model:
//! `<connection>/<id>`, and from before providers `<connection>/<model>` for the one served
//! `<provider>/<model>` of that name (spec, "How the device names an instance's models").

use serde::Deserialize;
use serde_json::Value;

use crate::config::Model;

/// Models kept from one list when the caller has no setting of its own: far more than any
/// instance serves, few enough that a hostile list cannot grow the device's memory.
pub const DEFAULT_MAX_MODELS: usize = 1_000;

/// What the device takes from a `/v1/models` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelList {
    /// The chat models, in the instance's order, each `instance: true`.
    pub chat: Vec<Model>,
    /// The first `embedding` model's served id (the library's; `embedding:` in config.yaml).
    pub embedding: Option<String>,
    /// Chat models past the limit, not kept.
    pub left_out: usize,
    /// The limit they were cut at (`max_models`).
    pub limit: usize,
}

impl ModelList {
    /// A line for the log when models were left out, naming the bound.
    pub fn cut_note(&self) -> Option<String> {
        (self.left_out > 0).then(|| {
            format!(
                "the instance serves {} more chat models than the {} the device keeps \
                 (max_models); those were left out",
                self.left_out, self.limit
            )
        })
    }
}

/// One entry of `data`. Only `id` must be there, a string; the rest is read where it has a
/// shape the device knows and ignored otherwise (an odd field costs a model a detail, not the
/// device its whole list).
struct Entry {
    id: String,
    fields: serde_json::Map<String, Value>,
}

impl Entry {
    fn read(raw: Value) -> Result<Entry, String> {
        let Value::Object(mut fields) = raw else {
            return Err("not an object".into());
        };
        match fields.remove("id") {
            Some(Value::String(id)) if !id.is_empty() => Ok(Entry { id, fields }),
            Some(Value::String(_)) => Err("its `id` is empty".into()),
            Some(other) => Err(format!("its `id` is not a string: {other}")),
            None => Err("it has no `id`".into()),
        }
    }

    /// `kind`, absent for an instance that lists chat models only.
    fn kind(&self) -> Option<&str> {
        self.fields.get("kind").map(|k| k.as_str().unwrap_or("?"))
    }

    /// `vision: true`, or "vision" among `capabilities` (`["vision", …]` or
    /// `{ "vision": true, … }`, as servers write it).
    fn vision(&self) -> bool {
        let listed = match self.fields.get("capabilities") {
            Some(Value::Array(items)) => items.iter().any(|c| c == "vision"),
            Some(Value::Object(map)) => map.get("vision") == Some(&Value::Bool(true)),
            _ => false,
        };
        self.fields.get("vision") == Some(&Value::Bool(true)) || listed
    }

    fn context_length(&self) -> Option<u64> {
        // Zero says nothing: the engine's default applies.
        ["context_length", "max_model_len", "context_window"]
            .into_iter()
            .filter_map(|k| self.fields.get(k).and_then(Value::as_u64))
            .find(|n| *n > 0)
    }
}

#[derive(Deserialize)]
struct Body {
    data: Vec<Value>,
}

/// The device's models from a `/v1/models` body: only `kind: "chat"` or no `kind` are chat
/// models (a served id listed twice is kept once), at most `max` of them (the rest counted in
/// `left_out`); and the first `embedding` model's id. A body that is not such a list is an
/// error saying what is wrong with it.
pub fn chat_models(body: &[u8], max: usize) -> Result<ModelList, String> {
    let what = "the instance's model list (GET /v1/models)";
    let body: Body = serde_json::from_slice(body)
        .map_err(|e| format!("{what} is not an object with a `data` list of models: {e}"))?;
    let mut list = ModelList {
        chat: Vec::new(),
        embedding: None,
        left_out: 0,
        limit: max,
    };
    for (i, raw) in body.data.into_iter().enumerate() {
        let entry =
            Entry::read(raw).map_err(|e| format!("{what}: model {} of `data`: {e}", i + 1))?;
        match entry.kind() {
            None | Some("chat") => {}
            Some("embedding") => {
                list.embedding.get_or_insert(entry.id);
                continue;
            }
            // stt, tts, image, and whatever comes later: not a model the device talks to.
            Some(_) => continue,
        }
        if list.chat.iter().any(|m| m.id == entry.id) {
            continue;
        }
        if list.chat.len() >= max {
            list.left_out += 1;
            continue;
        }
        list.chat.push(Model {
            vision: entry.vision(),
            context_length: entry.context_length(),
            ..Model::served(entry.id)
        });
    }
    Ok(list)
}

/// Why a name matched no model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Miss {
    /// No model has that name in any form.
    Unknown,
    /// The older `<connection>/<model>` form fits several served `<provider>/<model>` ids.
    Ambiguous(Vec<String>),
}

impl Miss {
    /// Why `name` names no model, as a refusal says it.
    pub fn reason(&self, name: &str) -> String {
        match self {
            Miss::Unknown => format!(
                "model `{name}` is not one this device can speak to (the instance does not \
                 serve it to this device, or the device is not logged in to it)"
            ),
            Miss::Ambiguous(ids) => format!(
                "model `{name}` could be any of {}: name it by its served id",
                ids.join(", ")
            ),
        }
    }
}

/// The model `name` names among `models`: its served id (or, for a model of the device's own,
/// its ref); or with the login's `connection`, `<connection>/<id>`, or `<connection>/<model>`
/// for the one instance model `<provider>/<model>`. `instance_only`: only a model the instance
/// serves will do (`lembas_model`, `_lembas/configure`).
pub fn resolve<'a>(
    models: &'a [Model],
    name: &str,
    connection: Option<&str>,
    instance_only: bool,
) -> Result<&'a Model, Miss> {
    let eligible = |m: &&Model| m.instance || !instance_only;
    if let Some(m) = models.iter().filter(eligible).find(|m| m.id == name) {
        return Ok(m);
    }
    let Some(rest) = connection
        .filter(|c| !c.is_empty())
        .and_then(|c| name.strip_prefix(c))
        .and_then(|r| r.strip_prefix('/'))
        .filter(|r| !r.is_empty())
    else {
        return Err(Miss::Unknown);
    };
    let served = || models.iter().filter(|m| m.instance);
    if let Some(m) = served().find(|m| m.id == rest) {
        return Ok(m);
    }
    if rest.contains('/') {
        return Err(Miss::Unknown);
    }
    let mut named = served().filter(|m| m.id.split_once('/').is_some_and(|(_, n)| n == rest));
    match (named.next(), named.next()) {
        (Some(m), None) => Ok(m),
        (None, _) => Err(Miss::Unknown),
        (Some(a), Some(b)) => {
            let mut ids = vec![a.id.clone(), b.id.clone()];
            ids.extend(named.map(|m| m.id.clone()));
            Err(Miss::Ambiguous(ids))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<ModelList, String> {
        chat_models(body.as_bytes(), DEFAULT_MAX_MODELS)
    }

    #[test]
    fn only_chat_models_or_those_of_no_kind_are_kept_and_the_first_embedding_is_named() {
        let list = parse(
            r#"{ "object": "list", "data": [
                { "id": "deepseek/flash", "object": "model", "owned_by": "x", "kind": "chat" },
                { "id": "e5/small", "kind": "embedding" },
                { "id": "whisper", "kind": "stt" },
                { "id": "bge/large", "kind": "embedding" },
                { "id": "qwen/coder", "created": 1, "future_field": { "a": [1] } },
                { "id": "flux", "kind": "image" },
                { "id": "piper", "kind": "tts" }
            ] }"#,
        )
        .unwrap();
        let ids: Vec<&str> = list.chat.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["deepseek/flash", "qwen/coder"]);
        assert!(list.chat.iter().all(|m| m.instance));
        assert_eq!(list.embedding.as_deref(), Some("e5/small"));
        assert_eq!(list.cut_note(), None);
    }

    #[test]
    fn vision_and_context_length_are_read_in_each_form_servers_use() {
        let list = parse(
            r#"{ "data": [
                { "id": "a", "vision": true, "context_length": 8192 },
                { "id": "b", "capabilities": ["tools", "vision"], "max_model_len": 32768 },
                { "id": "c", "capabilities": { "vision": true }, "context_window": 4096 },
                { "id": "d", "capabilities": ["tools"], "context_length": 0 },
                { "id": "e", "capabilities": { "vision": false }, "vision": false },
                { "id": "f", "vision": "yes", "context_length": "big", "max_model_len": 2048 },
                { "id": "g", "kind": 5 }
            ] }"#,
        )
        .unwrap();
        let got: Vec<(bool, Option<u64>)> = list
            .chat
            .iter()
            .map(|m| (m.vision, m.context_length))
            .collect();
        assert_eq!(
            got,
            [
                (true, Some(8192)),
                (true, Some(32768)),
                (true, Some(4096)),
                (false, None),
                (false, None),
                (false, Some(2048))
            ]
        );
    }

    #[test]
    fn a_bad_body_is_an_error_saying_what_is_wrong() {
        let cases = [
            ("not json", "GET /v1/models"),
            (r#"{ "object": "list" }"#, "missing field `data`"),
            (r#"[]"#, "not an object with a `data` list"),
            (r#"{ "data": "none" }"#, "invalid type: string"),
            (
                r#"{ "data": [{ "id": "a" }, { "name": "b" }] }"#,
                "model 2 of `data`: it has no `id`",
            ),
            (
                r#"{ "data": [{ "id": 7 }] }"#,
                "model 1 of `data`: its `id` is not a string: 7",
            ),
            (r#"{ "data": [{ "id": "" }] }"#, "its `id` is empty"),
            (r#"{ "data": [3] }"#, "model 1 of `data`: not an object"),
        ];
        for (body, says) in cases {
            let e = parse(body).unwrap_err();
            assert!(e.contains(says), "{body}: {e}");
        }
    }

    #[test]
    fn past_the_limit_models_are_counted_and_the_note_names_the_bound() {
        let body = r#"{ "data": [{ "id": "a" }, { "id": "a" }, { "id": "b" },
            { "id": "e", "kind": "embedding" }, { "id": "c" }, { "id": "d" }] }"#;
        let list = chat_models(body.as_bytes(), 2).unwrap();
        let ids: Vec<&str> = list.chat.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(list.left_out, 2);
        assert_eq!(list.embedding.as_deref(), Some("e"));
        let note = list.cut_note().unwrap();
        assert!(
            note.contains("2 more") && note.contains("max_models"),
            "{note}"
        );
    }

    fn models() -> Vec<Model> {
        vec![
            Model::served("deepseek/flash"),
            Model::served("qwen/coder"),
            Model::served("mistral/coder"),
            Model::served("plain"),
            Model {
                instance: false,
                ..Model::served("mine")
            },
        ]
    }

    fn found(name: &str, connection: Option<&str>, instance_only: bool) -> Result<String, Miss> {
        resolve(&models(), name, connection, instance_only).map(|m| m.id.clone())
    }

    #[test]
    fn the_served_id_and_the_older_forms_name_the_same_model() {
        let home = Some("home");
        for name in ["deepseek/flash", "home/deepseek/flash", "home/flash"] {
            assert_eq!(
                found(name, home, true),
                Ok("deepseek/flash".into()),
                "{name}"
            );
        }
        assert_eq!(found("home/plain", home, true), Ok("plain".into()));
        // The prefixed forms need the login's connection.
        assert_eq!(found("home/flash", None, true), Err(Miss::Unknown));
        assert_eq!(found("away/flash", home, true), Err(Miss::Unknown));
        assert_eq!(found("home/", home, true), Err(Miss::Unknown));
        assert_eq!(found("home/x/flash", home, true), Err(Miss::Unknown));
    }

    #[test]
    fn the_older_form_names_a_model_only_when_exactly_one_fits() {
        let miss = found("home/coder", Some("home"), true).unwrap_err();
        assert_eq!(
            miss,
            Miss::Ambiguous(vec!["qwen/coder".into(), "mistral/coder".into()])
        );
        assert!(miss
            .reason("home/coder")
            .contains("qwen/coder, mistral/coder"));
    }

    #[test]
    fn a_model_of_the_device_own_is_a_ref_but_not_an_instance_name() {
        assert_eq!(found("mine", None, false), Ok("mine".into()));
        assert_eq!(found("mine", None, true), Err(Miss::Unknown));
        assert_eq!(found("home/mine", Some("home"), false), Err(Miss::Unknown));
        assert!(Miss::Unknown
            .reason("mine")
            .contains("model `mine` is not one this device can speak to"));
    }
}
