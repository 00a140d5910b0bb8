//! The card an answer is for. An answer to a card (approval, question or plan) may name its
//! card in `_meta.lembas.toolCallId`; the spec's answers need not, so one that names none is
//! taken as the answer to the request it answers. One that names another card is not: the
//! client does not send it, and the device does not count it.

use serde_json::Value;

/// Whether `answer` names, in `_meta.lembas.toolCallId`, a card other than `tool_call_id`.
pub fn names_another_card(answer: &Value, tool_call_id: &str) -> bool {
    answer["_meta"]["lembas"]["toolCallId"]
        .as_str()
        .is_some_and(|named| named != tool_call_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_answer_naming_another_card_is_for_another_card() {
        let named =
            |t: &str| json!({ "outcome": "dismissed", "_meta": { "lembas": { "toolCallId": t } } });
        assert!(names_another_card(&named("call_2"), "call_3"));
        assert!(!names_another_card(&named("call_3"), "call_3"));
        assert!(!names_another_card(
            &json!({ "outcome": "dismissed" }),
            "call_3"
        ));
        assert!(!names_another_card(&Value::Null, "call_3"));
    }
}
