//! The one-pass decoders of the core's tagged shapes (prompt blocks, history turns, question
//! answers, stored answers and turn states, `_meta.lembas` of `initialize`): the same values and
//! errors serde's tagged enums gave, whatever the key order, and base64 payloads borrowed from
//! the frame.

use std::borrow::Cow;

use lembas_core::device::Answer;
use lembas_core::engine::{QuestionAnswer, StopReason};
use lembas_core::store::StoredTurnState;
use lembas_core::wire::handshake::LembasFlag;
use lembas_core::wire::session::{ContentBlock, HistoryTurn, PromptParams, TurnNotes};

fn blocks(json: &str) -> Vec<ContentBlock<'_>> {
    serde_json::from_str::<PromptParams>(json)
        .expect("the prompt decodes")
        .prompt
}

#[test]
fn a_block_reads_with_its_tag_anywhere() {
    let b = blocks(r#"{"sessionId":"s","prompt":[{"text":"hi","type":"text"}]}"#);
    assert!(matches!(&b[..], [ContentBlock::Text { text }] if text == "hi"));
    let b = blocks(r#"{"sessionId":"s","prompt":[{"uri":"file:///a","type":"resource_link"}]}"#);
    assert!(matches!(&b[..], [ContentBlock::ResourceLink { uri }] if uri == "file:///a"));
}

#[test]
fn base64_payloads_borrow_from_the_frame_unless_escaped() {
    let json = r#"{"sessionId":"s","prompt":[
        {"type":"image","data":"aGVsbG8=","mimeType":"image/png"},
        {"type":"resource","resource":{"uri":"file:///b","blob":"d29ybGQ="}},
        {"type":"image","data":"a\/b=","mimeType":"image/png"}]}"#;
    let b = blocks(json);
    assert!(
        matches!(&b[0], ContentBlock::Image { data: Cow::Borrowed("aGVsbG8="), mime_type, uri: None } if mime_type == "image/png")
    );
    assert!(
        matches!(&b[1], ContentBlock::Resource { resource } if matches!(resource.blob, Some(Cow::Borrowed("d29ybGQ="))))
    );
    assert!(matches!(&b[2], ContentBlock::Image { data: Cow::Owned(d), .. } if d == "a/b="));
}

#[test]
fn a_block_without_its_field_or_with_an_unknown_type_says_which() {
    let e = serde_json::from_str::<PromptParams>(r#"{"sessionId":"s","prompt":[{"type":"text"}]}"#)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("missing field `text`"), "{e}");
    let e = serde_json::from_str::<PromptParams>(
        r#"{"sessionId":"s","prompt":[{"type":"image","data":"x"}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("missing field `mimeType`"), "{e}");
    let e =
        serde_json::from_str::<PromptParams>(r#"{"sessionId":"s","prompt":[{"type":"video"}]}"#)
            .unwrap_err()
            .to_string();
    assert!(e.starts_with("unknown variant `video`"), "{e}");
    let e = serde_json::from_str::<PromptParams>(r#"{"sessionId":"s","prompt":[{"text":"x"}]}"#)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("missing field `type`"), "{e}");
}

/// What the core writes, it reads back the same.
fn round_trip<T>(v: &T) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    serde_json::from_str(&serde_json::to_string(v).unwrap()).expect("reads back")
}

#[test]
fn history_answers_and_turn_states_read_back_what_was_written() {
    let turns = [
        HistoryTurn::User {
            text: "hi".into(),
            turn_id: Some("t1".into()),
            attachments: vec![],
        },
        HistoryTurn::Assistant {
            text: "hello".into(),
            reasoning: "r".into(),
            tools: vec![],
        },
    ];
    for t in &turns {
        assert_eq!(&round_trip(t), t);
    }
    let answers = [
        QuestionAnswer::Options {
            labels: vec!["a".into()],
        },
        QuestionAnswer::Custom { text: "c".into() },
        QuestionAnswer::Back { text: "b".into() },
        QuestionAnswer::Skipped,
    ];
    for a in &answers {
        assert_eq!(&round_trip(a), a);
    }
    let states = [
        StoredTurnState::Queued,
        StoredTurnState::Running,
        StoredTurnState::Done {
            answer: Answer::stopped(
                StopReason::EndTurn,
                TurnNotes {
                    unsent: vec!["later".into()],
                    ..TurnNotes::default()
                },
            ),
        },
        StoredTurnState::Done {
            answer: Answer::Failed {
                code: -32603,
                message: "engine died".into(),
            },
        },
    ];
    for s in &states {
        assert_eq!(&round_trip(s), s);
    }
    let e = serde_json::from_str::<StoredTurnState>(r#"{"state":"done"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("missing field `answer`"), "{e}");
    let e = serde_json::from_str::<QuestionAnswer>(r#"{"kind":"custom"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("missing field `text`"), "{e}");
}

#[test]
fn the_lembas_flag_is_a_boolean_or_an_object() {
    let flag = |s| serde_json::from_str::<LembasFlag>(s);
    assert_eq!(flag("true").unwrap(), LembasFlag::Bool(true));
    assert_eq!(
        flag(r#"{"protocol":3,"show":true}"#).unwrap(),
        LembasFlag::Said {
            protocol: Some(3),
            show: Some(true)
        }
    );
    assert_eq!(
        flag("{}").unwrap(),
        LembasFlag::Said {
            protocol: None,
            show: None
        }
    );
    let e = flag(r#""yes""#).unwrap_err().to_string();
    assert!(
        e.contains("expected `true` or an object with `protocol`"),
        "{e}"
    );
    let e = flag(r#"{"protocol":"3"}"#).unwrap_err().to_string();
    assert!(e.starts_with("invalid type: string \"3\""), "{e}");
}
