//! The `_meta.lembas` context a client gives with `session/new` and `session/prompt`
//! (`system_prompt`, `personalization`, `library`, `prototypes`): bounded where it enters,
//! before anything else of the request is done, since the session's record keeps it and is
//! written again at every turn.

use serde_json::json;

use crate::config::SessionLimits;
use crate::engine::Context;
use crate::jsonrpc::RpcError;

/// `context` if its JSON is within `sessions.max_meta_bytes`, else the refusal naming it.
pub(super) fn bounded(context: Context, limits: &SessionLimits) -> Result<Context, RpcError> {
    let size = json_len(&context);
    let max = limits.max_meta_bytes;
    if size > max {
        return Err(RpcError::invalid_params(format!(
            "the `_meta.lembas` context is {size} bytes of JSON, over the limit of {max} bytes \
             (sessions.max_meta_bytes)"
        ))
        .with_data(json!({ "size": size, "limit": max })));
    }
    Ok(context)
}

/// The bytes of the context's values as JSON, counted without writing them out.
fn json_len(context: &Context) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    for value in [
        &context.system_prompt,
        &context.personalization,
        &context.library,
        &context.prototypes,
    ]
    .into_iter()
    .flatten()
    {
        // Writing a `Value` into a counter cannot fail.
        let _ = serde_json::to_writer(&mut count, value);
    }
    count.0
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_context_is_counted_as_its_json_and_refused_past_the_bound() {
        let context = Context {
            system_prompt: Some(Value::String("abc".into())),
            personalization: Some(Value::Null),
            library: Some(json!({ "bases": [] })),
            prototypes: None,
        };
        // "abc" 5, null 4, {"bases":[]} 12.
        assert_eq!(json_len(&context), 21);
        let limits = |max| SessionLimits {
            max_meta_bytes: max,
            ..SessionLimits::default()
        };
        assert_eq!(bounded(context.clone(), &limits(21)), Ok(context.clone()));
        let err = bounded(context, &limits(20)).unwrap_err();
        assert_eq!(
            err.message,
            "the `_meta.lembas` context is 21 bytes of JSON, over the limit of 20 bytes \
             (sessions.max_meta_bytes)"
        );
        assert_eq!(err.data, Some(json!({ "size": 21, "limit": 20 })));
        assert_eq!(
            json_len(&Context::default()),
            0,
            "nothing said is nothing counted"
        );
    }
}
