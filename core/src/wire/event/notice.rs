//! Notices that name one thing: `_lembas/permission/settled` (a card to take down),
//! `$/cancel_request` (ACP's own, for an editor) and `_lembas/session/deleted` (a session
//! deleted on the device).

use serde::{Deserialize, Serialize};

/// The method that takes a card down: answered elsewhere or no longer waited for.
pub const SETTLED: &str = "_lembas/permission/settled";
/// ACP's method that withdraws a request (a card put to an editor).
pub const CANCEL_REQUEST: &str = "$/cancel_request";
/// The method that tells a session was deleted on the device.
pub const DELETED: &str = "_lembas/session/deleted";

/// `_lembas/permission/settled` params: the card with this `toolCallId` is answered elsewhere
/// or no longer waited for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettledParams {
    /// The session's event sequence number (our extension).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<super::seq::SeqMeta>,
    pub session_id: String,
    pub tool_call_id: String,
}

/// `$/cancel_request` params: the request (a card put to an editor) is no longer waited for.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequestParams<'a> {
    /// The request's id, as it was sent.
    pub request_id: &'a serde_json::value::RawValue,
}

/// `_lembas/session/deleted` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletedParams {
    pub session_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_encode_as_their_value_did() {
        let settled = SettledParams {
            meta: super::super::seq::SeqMeta::some(3),
            session_id: "ses_1".into(),
            tool_call_id: "call_1".into(),
        };
        let deleted = DeletedParams {
            session_id: "ses_1".into(),
        };
        assert_eq!(
            serde_json::to_string(&settled).unwrap(),
            serde_json::to_value(&settled).unwrap().to_string()
        );
        assert_eq!(
            serde_json::to_string(&deleted).unwrap(),
            serde_json::to_value(&deleted).unwrap().to_string()
        );
    }
}
