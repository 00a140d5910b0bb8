//! What the model is given for a turn: the system text (the device's own, then the instance's
//! instructions), the session's earlier turns within the context budget, and the prompt with
//! its attachments, as the spec says each kind of attachment is given.

use serde_json::Value;

use crate::engine::{Attachment, Context, PriorTurn};
use crate::model::chat::{Message, Part, Role};

/// An attachment as it was read for the model: its bytes (perhaps cut at the bound) and its
/// whole size, or why it could not be read.
pub struct ReadAttachment<'a> {
    pub attachment: &'a Attachment,
    pub read: crate::model::engine::FileRead,
}

/// The messages of a turn, and what had to be left out (each said in a notice).
pub struct Composed {
    pub messages: Vec<Message>,
    pub notices: Vec<String>,
}

/// The parts of the system text the device has of its own.
pub struct SystemParts<'a> {
    /// The device's own system text.
    pub own: &'a str,
    /// The device's own personalization (`{ personality, personality_custom, instructions }`:
    /// config.yaml's, or the instance's `/v1/me/personalization` when logged in to one that
    /// has it), used unless the client sends the account's.
    pub personalization: Option<&'a Value>,
    /// The instance's name, for `## Instructions from <instance>`.
    pub instance: Option<&'a str>,
    /// The summary `/compact` folded the session's earlier turns into (`TurnStart::summary`),
    /// given last, as what the turns after it follow on.
    pub summary: Option<&'a str>,
}

/// The heading a compaction's summary is given under.
pub const SUMMARY_HEADING: &str = "## The conversation so far";

/// Tokens a text costs, estimated at four bytes a token (rounded up): the budget is kept by
/// an estimate, since the core has no tokenizer for the instance's models.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Every message also costs a few tokens of framing.
const MESSAGE_OVERHEAD: u64 = 4;

/// An image part, as counted against the budget (a typical vision model's cost of one).
const IMAGE_TOKENS: u64 = 1_000;

fn message_tokens(m: &Message) -> u64 {
    MESSAGE_OVERHEAD
        + m.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => estimate_tokens(t),
                Part::Image { .. } => IMAGE_TOKENS,
            })
            .sum::<u64>()
}

/// Compose a turn's messages. `budget` is the model's context in tokens; a quarter of it is
/// kept for the answer, and earlier turns are dropped oldest first to fit the rest.
pub fn compose(
    system: &SystemParts<'_>,
    context: &Context,
    history: &[PriorTurn],
    text: &str,
    attachments: &[ReadAttachment<'_>],
    vision: bool,
    budget: u64,
) -> Composed {
    let mut notices = Vec::new();
    let mut messages = Vec::new();
    let system_text = system_text(system, context);
    if !system_text.is_empty() {
        messages.push(Message::new(Role::System, vec![Part::Text(system_text)]));
    }
    let prompt = user_message(text, attachments, vision, &mut notices);
    let fixed: u64 = messages.iter().map(message_tokens).sum::<u64>() + message_tokens(&prompt);
    let mut room = (budget - budget / 4).saturating_sub(fixed);
    // The newest turns that fit, kept whole (a turn is its question and its answer).
    let mut kept = 0;
    for turn in history.iter().rev() {
        let cost =
            2 * MESSAGE_OVERHEAD + estimate_tokens(&turn.prompt) + estimate_tokens(&turn.answer);
        if cost > room {
            break;
        }
        room -= cost;
        kept += 1;
    }
    let dropped = history.len() - kept;
    if dropped > 0 {
        notices.push(format!(
            "{dropped} earlier turn{} of this session {} left out of the model's context, to keep \
             within its {budget} tokens",
            if dropped == 1 { "" } else { "s" },
            if dropped == 1 { "was" } else { "were" },
        ));
    }
    for turn in &history[dropped..] {
        messages.push(text_message(Role::User, &turn.prompt));
        messages.push(text_message(Role::Assistant, &turn.answer));
    }
    messages.push(prompt);
    Composed { messages, notices }
}

/// What a tool result says once it was dropped to keep the turn within the model's context.
pub const DROPPED_RESULT: &str =
    "(this output was dropped to keep within the model's context; call the tool again if it \
     is still needed)";

/// Keep a turn that grew with its tool results within `budget` (as [`compose`] does, a
/// quarter kept for the answer): the oldest tool results are dropped first, each replaced by
/// [`DROPPED_RESULT`], never the conversation itself. Returns how many were dropped now.
pub fn fit_tool_results(messages: &mut [Message], budget: u64) -> usize {
    let room = budget - budget / 4;
    let mut total: u64 = messages.iter().map(message_tokens).sum();
    let mut dropped = 0;
    for m in messages.iter_mut() {
        if total <= room {
            break;
        }
        let kept = matches!(m.parts.as_slice(), [Part::Text(t)] if t == DROPPED_RESULT);
        if m.role != Role::Tool || kept {
            continue;
        }
        let before = message_tokens(m);
        m.parts = vec![Part::Text(DROPPED_RESULT.to_string())];
        total = total - before + message_tokens(m);
        dropped += 1;
    }
    dropped
}

fn text_message(role: Role, text: &str) -> Message {
    Message::new(role, vec![Part::Text(text.to_string())])
}

/// The device's own text, or the account's personalization in its place, then the chat's
/// instructions under `## Instructions from <instance>`.
fn system_text(system: &SystemParts<'_>, context: &Context) -> String {
    let mut out = String::from(system.own.trim_end());
    // `personalization: null`, or never said: the device's own.
    let said = context.personalization.as_ref().filter(|p| !p.is_null());
    if let Some(p) = said.or(system.personalization) {
        let personal = personalization_text(p);
        if !personal.is_empty() {
            push_section(&mut out, &personal);
        }
    }
    if let Some(Value::String(instructions)) = &context.system_prompt {
        if !instructions.trim().is_empty() {
            let from = system.instance.unwrap_or("the instance");
            push_section(
                &mut out,
                &format!("## Instructions from {from}\n\n{}", instructions.trim_end()),
            );
        }
    }
    if let Some(summary) = system.summary.filter(|s| !s.trim().is_empty()) {
        push_section(
            &mut out,
            &format!(
                "{SUMMARY_HEADING}\n\nThe earlier turns of this session were summarized \
                 (/compact); the turns after this summary follow on from it.\n\n{}",
                summary.trim_end()
            ),
        );
    }
    out
}

fn push_section(out: &mut String, section: &str) {
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(section);
}

/// The account's `{ personality, personality_custom, instructions }`, as lines the model reads.
fn personalization_text(p: &Value) -> String {
    let field = |k: &str| {
        p.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    let mut lines = Vec::new();
    match (field("personality"), field("personality_custom")) {
        (_, Some(custom)) => lines.push(format!("Personality: {custom}")),
        (Some(preset), None) => lines.push(format!("Personality: {preset}")),
        (None, None) => {}
    }
    if let Some(instructions) = field("instructions") {
        lines.push(format!("The person's instructions: {instructions}"));
    }
    lines.join("\n")
}

/// The prompt, then each attachment as the spec gives its kind: a text resource line-numbered,
/// an image as an image part for a vision model (a line saying it is there for any other), any
/// other file as `(binary file, N bytes)`.
fn user_message(
    text: &str,
    attachments: &[ReadAttachment<'_>],
    vision: bool,
    notices: &mut Vec<String>,
) -> Message {
    let mut parts = vec![Part::Text(text.to_string())];
    for a in attachments {
        let name = &a.attachment.name;
        let (bytes, size) = match &a.read {
            Ok((bytes, size)) => (bytes, *size),
            Err(reason) => {
                notices.push(format!("the attachment {name} could not be read: {reason}"));
                parts.push(Part::Text(format!("(attachment {name} could not be read)")));
                continue;
            }
        };
        let cut = (bytes.len() as u64) < size;
        let mime = a.attachment.mime_type.as_str();
        if a.attachment.text {
            let body = String::from_utf8_lossy(bytes);
            let mut shown = if mime == crate::engine::LISTING_MIME {
                format!("{name}:\n{body}")
            } else {
                let first = a.attachment.first_line.unwrap_or(1);
                format!("{name}:\n{}", line_numbered(&body, first))
            };
            if cut {
                shown.push_str(&format!(
                    "\n(cut: {} of {size} bytes shown, engine.max_attachment_bytes)",
                    bytes.len()
                ));
                notices.push(format!(
                    "the attachment {name} was cut to {} of its {size} bytes \
                     (engine.max_attachment_bytes)",
                    bytes.len()
                ));
            }
            parts.push(Part::Text(shown));
        } else if mime.starts_with("image/") && vision && !cut {
            parts.push(Part::Image {
                url: format!("data:{mime};base64,{}", base64_encode(bytes)),
            });
        } else if mime.starts_with("image/") {
            if cut {
                notices.push(format!(
                    "the image {name} ({size} bytes) is larger than engine.max_attachment_bytes \
                     and was not shown to the model"
                ));
            }
            parts.push(Part::Text(format!(
                "(image {name} is attached in this session's attachment directory as {}; \
                 this model cannot see it)",
                a.attachment.file_name
            )));
        } else {
            parts.push(Part::Text(format!("{name}: (binary file, {size} bytes)")));
        }
    }
    Message::new(Role::User, merge_text(parts))
}

/// Adjacent text parts joined by a blank line: a message of text alone is one string.
fn merge_text(parts: Vec<Part>) -> Vec<Part> {
    let mut out: Vec<Part> = Vec::with_capacity(parts.len());
    for p in parts {
        match (out.last_mut(), p) {
            (Some(Part::Text(prev)), Part::Text(t)) => {
                prev.push_str("\n\n");
                prev.push_str(&t);
            }
            (_, p) => out.push(p),
        }
    }
    out
}

/// `   1| first line`, numbered from `first` (1 for a whole file), as the TUI attaches an
/// `@file`.
fn line_numbered(text: &str, first: u64) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let last = first.saturating_add(lines.len() as u64);
    let width = last.to_string().len().max(4);
    let mut out = String::with_capacity(text.len() + lines.len() * (width + 2));
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{:>width$}| {line}", first + i as u64));
    }
    out
}

pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attachment(name: &str, mime: &str, text: bool) -> Attachment {
        Attachment {
            file_name: format!("1-abc-{name}"),
            name: name.into(),
            mime_type: mime.into(),
            size: 0,
            text,
            first_line: None,
        }
    }

    fn system() -> SystemParts<'static> {
        SystemParts {
            own: "You are LLeMbas CLI.",
            personalization: None,
            instance: Some("example"),
            summary: None,
        }
    }

    fn texts(m: &Message) -> String {
        m.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Image { url } => format!("[image {}]", &url[..url.find(',').unwrap()]),
            })
            .collect::<Vec<_>>()
            .join("|")
    }

    #[test]
    fn the_instances_instructions_follow_the_devices_own_text() {
        let context = Context {
            system_prompt: Some(Value::String("Be brief.".into())),
            ..Context::default()
        };
        let c = compose(&system(), &context, &[], "hi", &[], false, 10_000);
        assert_eq!(
            texts(&c.messages[0]),
            "You are LLeMbas CLI.\n\n## Instructions from example\n\nBe brief."
        );
        assert_eq!(texts(&c.messages[1]), "hi");
        assert!(c.notices.is_empty());
    }

    #[test]
    fn a_compactions_summary_closes_the_system_text() {
        let with_summary = SystemParts {
            summary: Some("we fixed the parser\n"),
            ..system()
        };
        let c = compose(
            &with_summary,
            &Context::default(),
            &[],
            "hi",
            &[],
            false,
            10_000,
        );
        assert_eq!(
            texts(&c.messages[0]),
            format!(
                "You are LLeMbas CLI.\n\n{SUMMARY_HEADING}\n\nThe earlier turns of this session \
                 were summarized (/compact); the turns after this summary follow on from it.\n\n\
                 we fixed the parser"
            )
        );
        // A blank summary says nothing.
        let blank = SystemParts {
            summary: Some("  "),
            ..system()
        };
        let c = compose(&blank, &Context::default(), &[], "hi", &[], false, 10_000);
        assert_eq!(texts(&c.messages[0]), "You are LLeMbas CLI.");
    }

    #[test]
    fn the_accounts_personalization_is_used_and_null_means_the_devices_own() {
        let said = Context {
            personalization: Some(serde_json::json!({
                "personality": "friendly", "personality_custom": "", "instructions": "Use metric."
            })),
            ..Context::default()
        };
        let c = compose(&system(), &said, &[], "hi", &[], false, 10_000);
        assert_eq!(
            texts(&c.messages[0]),
            "You are LLeMbas CLI.\n\nPersonality: friendly\nThe person's instructions: Use metric."
        );
        let null = Context {
            personalization: Some(Value::Null),
            ..Context::default()
        };
        let c = compose(&system(), &null, &[], "hi", &[], false, 10_000);
        assert_eq!(texts(&c.messages[0]), "You are LLeMbas CLI.");
        // The device's own, used for null and for nothing said, not over the account's.
        let own = serde_json::json!({ "personality": "terse", "instructions": "" });
        let with_own = SystemParts {
            personalization: Some(&own),
            ..system()
        };
        for context in [&null, &Context::default()] {
            let c = compose(&with_own, context, &[], "hi", &[], false, 10_000);
            assert_eq!(
                texts(&c.messages[0]),
                "You are LLeMbas CLI.\n\nPersonality: terse"
            );
        }
        let c = compose(&with_own, &said, &[], "hi", &[], false, 10_000);
        assert!(texts(&c.messages[0]).contains("friendly"));
        assert!(!texts(&c.messages[0]).contains("terse"));
    }

    #[test]
    fn older_turns_are_dropped_first_to_fit_and_a_notice_says_how_many() {
        let turn = |n: usize| PriorTurn {
            prompt: format!("question {n} {}", "x".repeat(400)),
            answer: format!("answer {n}"),
        };
        let history: Vec<PriorTurn> = (0..10).map(turn).collect();
        // 1,000 tokens: 750 for the request; each turn costs about 115.
        let c = compose(
            &system(),
            &Context::default(),
            &history,
            "now",
            &[],
            false,
            1_000,
        );
        let kept: Vec<String> = c.messages[1..c.messages.len() - 1]
            .iter()
            .map(|m| texts(m).chars().take(10).collect::<String>())
            .collect();
        assert_eq!(kept.len() % 2, 0);
        let turns = kept.len() / 2;
        assert!((1..10).contains(&turns), "{turns} turns kept");
        // The newest are the ones kept, in order.
        assert!(kept.last().unwrap().starts_with("answer 9"), "{kept:?}");
        assert!(
            kept[0].starts_with(&format!("question {}", 10 - turns)),
            "{kept:?}"
        );
        assert_eq!(c.notices.len(), 1);
        assert!(
            c.notices[0].starts_with(&format!("{} earlier turns", 10 - turns)),
            "{:?}",
            c.notices
        );
        // With room for all, nothing is dropped and nothing is said.
        let c = compose(
            &system(),
            &Context::default(),
            &history,
            "now",
            &[],
            false,
            100_000,
        );
        assert_eq!(c.messages.len(), 1 + 20 + 1);
        assert!(c.notices.is_empty());
    }

    #[test]
    fn attachments_are_given_as_the_spec_says_for_their_kind() {
        let text = attachment("notes.md", "text/markdown", true);
        let png = attachment("a.png", "image/png", false);
        let blob = attachment("data.bin", "application/octet-stream", false);
        let read = |a: &'static Attachment, bytes: &[u8]| ReadAttachment {
            attachment: a,
            read: Ok((bytes.to_vec(), bytes.len() as u64)),
        };
        let (text, png, blob) = (
            Box::leak(Box::new(text)),
            Box::leak(Box::new(png)),
            Box::leak(Box::new(blob)),
        );
        let all = [
            read(text, b"one\ntwo"),
            read(png, b"png!"),
            read(blob, b"\0\x01\x02"),
        ];
        let c = compose(
            &system(),
            &Context::default(),
            &[],
            "look",
            &all,
            true,
            100_000,
        );
        assert_eq!(
            texts(c.messages.last().unwrap()),
            "look\n\nnotes.md:\n   1| one\n   2| two|[image data:image/png;base64]|data.bin: (binary file, 3 bytes)"
        );
        // A model without vision is told the image is there.
        let c = compose(
            &system(),
            &Context::default(),
            &[],
            "look",
            &all[1..2],
            false,
            100_000,
        );
        let said = texts(c.messages.last().unwrap());
        assert!(said.contains("(image a.png is attached"), "{said}");
        assert!(said.contains("1-abc-a.png"), "{said}");
    }

    #[test]
    fn a_cut_or_unreadable_attachment_is_said_in_a_notice() {
        let text = Box::leak(Box::new(attachment("big.txt", "text/plain", true)));
        let gone = Box::leak(Box::new(attachment("gone.txt", "text/plain", true)));
        let all = [
            ReadAttachment {
                attachment: text,
                read: Ok((b"abc".to_vec(), 10)),
            },
            ReadAttachment {
                attachment: gone,
                read: Err("No such file".into()),
            },
        ];
        let c = compose(
            &system(),
            &Context::default(),
            &[],
            "x",
            &all,
            false,
            100_000,
        );
        assert_eq!(c.notices.len(), 2, "{:?}", c.notices);
        assert!(c.notices[0].contains("cut to 3 of its 10 bytes (engine.max_attachment_bytes)"));
        assert!(c.notices[1].contains("gone.txt could not be read: No such file"));
    }

    #[test]
    fn a_mentions_range_is_numbered_from_its_first_line_and_a_listing_not_at_all() {
        let mut range = attachment("src/a.rs#9-10", "text/plain", true);
        range.first_line = Some(9);
        let listing = attachment("docs/", crate::engine::LISTING_MIME, true);
        let (range, listing) = (Box::leak(Box::new(range)), Box::leak(Box::new(listing)));
        let read = |a: &'static Attachment, bytes: &[u8]| ReadAttachment {
            attachment: a,
            read: Ok((bytes.to_vec(), bytes.len() as u64)),
        };
        let all = [read(range, b"nine\nten\n"), read(listing, b"a.md\nb/")];
        let c = compose(
            &system(),
            &Context::default(),
            &[],
            "@x",
            &all,
            false,
            100_000,
        );
        assert_eq!(
            texts(c.messages.last().unwrap()),
            "@x\n\nsrc/a.rs#9-10:\n   9| nine\n  10| ten\n\ndocs/:\na.md\nb/"
        );
    }
}
