//! A prompt's blocks: checked against the block and prompt limits (sized before a byte is
//! decoded), turned into the turn's text, its attachments and the `@path` mentions it names.

use base64::Engine as _;
use serde_json::json;

use crate::config::SessionLimits;
use crate::engine::Attachment;
use crate::jsonrpc::RpcError;
use crate::mentions::Mention;
use crate::rng::Rng;
use crate::wire::session::ContentBlock;

/// The decoded size of a base64 text, without decoding it (so an oversized block is refused
/// before a byte is allocated for it).
fn decoded_len(b64: &str) -> u64 {
    let trimmed = b64.trim_end_matches('=');
    (trimmed.len() as u64 * 3) / 4
}

/// A name safe to put in a file name: the uri's last segment, letters, digits, `.`, `-`, `_`.
pub(super) fn safe_name(uri: Option<&str>, fallback: &str) -> String {
    let last = uri.and_then(|u| u.rsplit(['/', '\\']).next()).unwrap_or("");
    let cleaned: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let cleaned = cleaned.trim_start_matches('.').to_string();
    if cleaned.is_empty() {
        fallback.to_string()
    } else {
        cleaned
    }
}

fn image_extension(mime: &str) -> Option<&'static str> {
    match mime {
        "image/png" => Some("png"),
        "image/jpeg" => Some("jpg"),
        "image/webp" => Some("webp"),
        "image/gif" => Some("gif"),
        _ => None,
    }
}

/// A prompt's blocks, checked and turned into what a turn is given.
pub(super) struct Prepared {
    pub text: String,
    pub attachments: Vec<(Attachment, Vec<u8>)>,
    /// The `@path` mentions of the text blocks (what the person typed), each once, in order.
    pub mentions: Vec<Mention>,
}

/// Every block within `sessions.max_block_bytes` and the whole within `max_prompt_bytes`,
/// decoded sizes counted without decoding: checked first, so a prompt over them is refused
/// before anything is done for it (its session attached, a turn queued, a byte decoded).
pub(super) fn check_sizes(
    blocks: &[ContentBlock<'_>],
    limits: &SessionLimits,
) -> Result<(), RpcError> {
    let mut total = 0u64;
    for (i, block) in blocks.iter().enumerate() {
        let n = i + 1;
        let size = match block {
            ContentBlock::Text { text } => text.len() as u64,
            ContentBlock::ResourceLink { uri } => uri.len() as u64,
            ContentBlock::Image { data, .. } => decoded_len(data),
            ContentBlock::Resource { resource } => match (&resource.text, &resource.blob) {
                (Some(t), None) => t.len() as u64,
                (None, Some(b)) => decoded_len(b),
                _ => {
                    return Err(RpcError::invalid_params(format!(
                        "block {n}: a resource carries exactly one of `text` and `blob`"
                    )))
                }
            },
        };
        if size > limits.max_block_bytes {
            return Err(RpcError::invalid_params(format!(
                "block {n} is {size} bytes decoded, over the limit of {} bytes a block \
                     (max_block_bytes)",
                limits.max_block_bytes
            ))
            .with_data(json!({ "block": n, "size": size, "limit": limits.max_block_bytes })));
        }
        total += size;
        if total > limits.max_prompt_bytes {
            return Err(RpcError::invalid_params(format!(
                "the prompt is over {} bytes decoded by block {n} ({total} bytes so far), \
                     over the limit of {} bytes a prompt (max_prompt_bytes)",
                limits.max_prompt_bytes, limits.max_prompt_bytes
            ))
            .with_data(json!({ "size": total, "limit": limits.max_prompt_bytes })));
        }
    }
    Ok(())
}

/// A prompt's blocks checked against `limits` and turned into what a turn is given; each
/// attachment is named with a token drawn from `rng`, in block order (`now`: the time in the
/// name).
pub(super) fn prepare(
    blocks: Vec<ContentBlock<'_>>,
    limits: SessionLimits,
    rng: &mut Rng,
    now: u64,
) -> Result<Prepared, RpcError> {
    check_sizes(&blocks, &limits)?;
    let mut texts: Vec<String> = Vec::new();
    let mut attachments = Vec::new();
    let mut mentions: Vec<Mention> = Vec::new();
    for (i, block) in blocks.into_iter().enumerate() {
        let n = i + 1;
        let decode = |data: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(data.as_bytes())
                .map_err(|e| {
                    RpcError::invalid_params(format!("block {n}: data is not valid base64 ({e})"))
                })
        };
        match block {
            ContentBlock::Text { text } => {
                for m in crate::mentions::find(&text) {
                    if !mentions.contains(&m) {
                        mentions.push(m);
                    }
                }
                texts.push(text);
            }
            ContentBlock::ResourceLink { uri } => texts.push(format!("(see {uri})")),
            ContentBlock::Image {
                data,
                mime_type,
                uri,
            } => {
                let ext = image_extension(&mime_type).ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "block {n}: image type `{mime_type}` is not one of image/png, \
                             image/jpeg, image/webp, image/gif"
                    ))
                })?;
                let bytes = decode(&data)?;
                let name = safe_name(uri.as_deref(), &format!("image.{ext}"));
                attachments.push(attachment(rng, now, name, mime_type, bytes, false));
            }
            ContentBlock::Resource { resource } => {
                let name = safe_name(Some(&resource.uri), "resource");
                let (mime, bytes, text) = match (resource.text, resource.blob) {
                    (Some(t), _) => (
                        resource.mime_type.unwrap_or_else(|| "text/plain".into()),
                        t.into_bytes(),
                        true,
                    ),
                    (None, Some(b)) => (
                        resource
                            .mime_type
                            .unwrap_or_else(|| "application/octet-stream".into()),
                        decode(&b)?,
                        false,
                    ),
                    (None, None) => unreachable!("checked when sizing the block"),
                };
                attachments.push(attachment(rng, now, name, mime, bytes, text));
            }
        }
    }
    Ok(Prepared {
        text: texts.join("\n\n"),
        attachments,
        mentions,
    })
}

fn attachment(
    rng: &mut Rng,
    now: u64,
    name: String,
    mime_type: String,
    bytes: Vec<u8>,
    text: bool,
) -> (Attachment, Vec<u8>) {
    let file_name = format!("{now}-{}-{name}", rng.token(8));
    let meta = Attachment {
        file_name,
        name,
        mime_type,
        size: bytes.len() as u64,
        text,
        first_line: None,
    };
    (meta, bytes)
}

#[cfg(test)]
pub(super) mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::jsonrpc::code;

    pub(in crate::device) fn image(name: &str) -> ContentBlock<'static> {
        ContentBlock::Image {
            // "png!" in base64.
            data: Cow::Borrowed("cG5nIQ=="),
            mime_type: "image/png".into(),
            uri: Some(format!("file:///tmp/{name}")),
        }
    }

    #[test]
    fn attachments_are_named_in_block_order_with_one_token_each() {
        let mut rng = Rng::new(7);
        let blocks = vec![
            ContentBlock::Text {
                text: "look".into(),
            },
            image("a.png"),
            image("b.png"),
        ];
        let prepared = prepare(blocks, SessionLimits::default(), &mut rng, 42).unwrap();
        let mut same = Rng::new(7);
        let names: Vec<String> = prepared
            .attachments
            .iter()
            .map(|(a, _)| a.file_name.clone())
            .collect();
        let a = format!("42-{}-a.png", same.token(8));
        let b = format!("42-{}-b.png", same.token(8));
        assert_eq!(names, vec![a, b]);
        assert_eq!(prepared.attachments[0].1, b"png!");
        assert_eq!(prepared.text, "look");
        // Nothing more was drawn.
        assert_eq!(rng.token(8), same.token(8));
    }

    #[test]
    fn a_block_over_the_limit_is_refused_naming_it() {
        let limits = SessionLimits {
            max_block_bytes: 3,
            ..SessionLimits::default()
        };
        let err = prepare(vec![image("a.png")], limits, &mut Rng::new(1), 0)
            .err()
            .expect("refused");
        assert_eq!(err.code, code::INVALID_PARAMS);
        assert!(
            err.message.contains("block 1 is 4 bytes decoded"),
            "{}",
            err.message
        );
        assert!(err.message.contains("max_block_bytes"), "{}", err.message);
    }
}
