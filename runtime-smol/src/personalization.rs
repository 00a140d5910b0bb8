//! The person's personalization (`personality`, `personality_custom`, `instructions`): the
//! device's own in config.yaml, unless the instance it is logged in to keeps the account's
//! (`GET /v1/me/personalization` answering `available: true`), which is then used in its place
//! (none of it when the account's is not `enabled`). The model engine puts it in the system
//! text. `lembas config set` writes a change back with a `PUT` of the changed field alone and
//! `enabled: true`, so the instance keeps the rest of what it saved (spec, "The HTTP API the CLI
//! uses").
//!
//! The token goes in one header and in no reason, log line or URL.

use serde_json::{json, Map, Value};

use crate::link::{agent, Instance};

/// The fields personalization is made of, as config.yaml and the instance name them.
pub const FIELDS: [&str; 3] = ["personality", "personality_custom", "instructions"];

/// The largest answer read.
const MAX_BODY: u64 = 64 * 1024;

/// What the instance said of the account's personalization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromInstance {
    /// Not available (`available: false`, a 403 or 404, or no answer): the device's own applies.
    NotAvailable,
    /// Available: the account's fields, used in place of the device's own; `None` when the
    /// account has it turned off (`enabled: false`).
    Available(Option<Value>),
}

impl FromInstance {
    /// What the model engine uses, given the device's own (`local`).
    pub fn effective(&self, local: Option<Value>) -> Option<Value> {
        match self {
            FromInstance::NotAvailable => local,
            FromInstance::Available(fields) => fields.clone(),
        }
    }
}

/// The personalization fields of `v` that are strings, as one object (`None`: none are).
pub fn fields_of(v: &Value) -> Option<Value> {
    let map: Map<String, Value> = FIELDS
        .iter()
        .filter_map(|k| Some((k.to_string(), Value::String(v.get(*k)?.as_str()?.into()))))
        .collect();
    (!map.is_empty()).then_some(Value::Object(map))
}

fn url(instance: &Instance) -> String {
    format!("{}/v1/me/personalization", instance.base_url())
}

/// `GET /v1/me/personalization` with the device token (blocking; call through
/// `blocking::unblock`). Anything but a 2xx answer saying `available: true` is "not available",
/// logged at debug level: an instance without it is no error.
pub fn fetch(instance: &Instance, token: &str, ca: Option<&[u8]>) -> FromInstance {
    match try_fetch(instance, token, ca) {
        Ok(from) => from,
        Err(why) => {
            log::debug!(
                "personalization not available from the instance ({why}); config.yaml's applies"
            );
            FromInstance::NotAvailable
        }
    }
}

fn try_fetch(instance: &Instance, token: &str, ca: Option<&[u8]>) -> Result<FromInstance, String> {
    let url = url(instance);
    let mut resp = agent(ca)?
        .get(&url)
        .header("authorization", &format!("Bearer {token}"))
        .call()
        .map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(format!("{url} answered HTTP {status}"));
    }
    let body = resp
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_vec()
        .map_err(|e| format!("{url}: {e}"))?;
    let v: Value = serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))?;
    if v["available"] != true {
        return Ok(FromInstance::NotAvailable);
    }
    Ok(FromInstance::Available(
        (v["enabled"] == true).then(|| fields_of(&v)).flatten(),
    ))
}

/// `PUT /v1/me/personalization` of `field` alone, set to `value`, with `enabled: true` (blocking).
/// A refusal is the instance's words: a 403's `detail` (else "not allowed"), a 422's.
pub fn put(
    instance: &Instance,
    token: &str,
    ca: Option<&[u8]>,
    field: &str,
    value: &str,
) -> Result<(), String> {
    let url = url(instance);
    let body = json!({ field: value, "enabled": true });
    let mut resp = agent(ca)?
        .put(&url)
        .header("authorization", &format!("Bearer {token}"))
        .header("content-type", "application/json")
        .send(body.to_string())
        .map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(());
    }
    let answer = resp
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_vec()
        .unwrap_or_default();
    Err(refusal(&url, status, &answer))
}

/// A refused `PUT` in the instance's words: a 403's `detail` (else "not allowed"), a 422's
/// (FastAPI lists its complaints; each one's `msg` is what it says).
fn refusal(url: &str, status: u16, body: &[u8]) -> String {
    let answer = serde_json::from_slice::<Value>(body).unwrap_or_default();
    let detail = match &answer["detail"] {
        Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Value::Null => None,
        Value::Array(items) => Some(
            items
                .iter()
                .map(|i| {
                    i["msg"]
                        .as_str()
                        .map_or_else(|| i.to_string(), String::from)
                })
                .collect::<Vec<_>>()
                .join("; "),
        ),
        other => Some(other.to_string()),
    };
    match status {
        403 => format!(
            "the instance refused: {}",
            detail.unwrap_or_else(|| "not allowed".into())
        ),
        422 => format!(
            "the instance refused the value: {}",
            detail.unwrap_or_else(|| "HTTP 422".into())
        ),
        _ => format!(
            "{url} answered HTTP {status}{}",
            detail.map(|d| format!(": {d}")).unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instances_is_used_in_place_of_the_devices_own() {
        let own = Some(json!({ "personality": "terse" }));
        let theirs = json!({ "personality": "warm", "instructions": "British spelling" });
        assert_eq!(FromInstance::NotAvailable.effective(own.clone()), own);
        assert_eq!(
            FromInstance::Available(Some(theirs.clone())).effective(own.clone()),
            Some(theirs)
        );
        // Turned off on the account: none of it, not the device's own either.
        assert_eq!(FromInstance::Available(None).effective(own), None);
        assert_eq!(
            fields_of(&json!({ "enabled": true, "personality": "x", "instructions": 3 })),
            Some(json!({ "personality": "x" }))
        );
        assert_eq!(fields_of(&json!({ "enabled": true })), None);
    }

    #[test]
    fn a_refusal_is_given_in_the_instances_words() {
        let u = "https://i/v1/me/personalization";
        let body = |v: Value| v.to_string().into_bytes();
        assert_eq!(
            refusal(
                u,
                403,
                &body(json!({ "detail": "personalization is off for this plan" }))
            ),
            "the instance refused: personalization is off for this plan"
        );
        assert_eq!(
            refusal(u, 403, b"<html>"),
            "the instance refused: not allowed"
        );
        let fastapi = json!({ "detail": [{ "loc": ["body", "enabled"],
                                           "msg": "Input should be a valid boolean" }] });
        assert_eq!(
            refusal(u, 422, &body(fastapi)),
            "the instance refused the value: Input should be a valid boolean"
        );
        assert_eq!(
            refusal(
                u,
                422,
                &body(json!({ "detail": "instructions must be a string" }))
            ),
            "the instance refused the value: instructions must be a string"
        );
        assert_eq!(refusal(u, 500, b""), format!("{u} answered HTTP 500"));
    }
}
