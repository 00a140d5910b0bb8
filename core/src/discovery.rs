//! `/.well-known/lembas.json`: does this server speak link protocol 3? A pure function of the
//! document's bytes, used at login and again at every dial of the link.

use serde_json::Value;

use crate::wire::handshake::PROTOCOL;

/// What a protocol 3 server's discovery document told us.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    pub protocols: Vec<u64>,
    pub version: Option<String>,
}

/// Why the server was refused; `Display` is the sentence to show the person.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiscoveryError {
    /// The server speaks other protocols only.
    Unsupported {
        server: String,
        version: Option<String>,
        protocols: Vec<u64>,
    },
    /// The document is not the JSON object discovery promises.
    Malformed { server: String, why: String },
}

impl std::fmt::Display for DiscoveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiscoveryError::Unsupported {
                server,
                version,
                protocols,
            } => write!(
                f,
                "{server} runs LLeMbas {}, which speaks link protocol {}; this LLeMbas CLI needs a \
                 LLeMbas 2.0 server (protocol {PROTOCOL}) — update the server, or use LLeMbas CLI \
                 1.x with it",
                version.as_deref().unwrap_or("1.x"),
                spoken_list(protocols),
            ),
            DiscoveryError::Malformed { server, why } => write!(
                f,
                "{server} answered /.well-known/lembas.json with something that is not a LLeMbas \
                 discovery document ({why}); check the server's address"
            ),
        }
    }
}

impl std::error::Error for DiscoveryError {}

/// "1", "1 and 2", "1, 2 and 4".
fn spoken_list(protocols: &[u64]) -> String {
    let names: Vec<String> = protocols.iter().map(u64::to_string).collect();
    match names.split_last() {
        None => "none".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Accept the server when `protocols` lists 3, or, without `protocols`, when `protocol` is 3.
pub fn check(document: &[u8], server: &str) -> Result<Discovery, DiscoveryError> {
    let malformed = |why: String| DiscoveryError::Malformed {
        server: server.to_string(),
        why,
    };
    let doc: Value =
        serde_json::from_slice(document).map_err(|e| malformed(format!("not JSON: {e}")))?;
    let obj = doc
        .as_object()
        .ok_or_else(|| malformed("not a JSON object".into()))?;
    let version = match obj.get("version") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(malformed("`version` is not a string".into())),
    };
    let protocols = match (obj.get("protocols"), obj.get("protocol")) {
        (Some(Value::Array(list)), _) => list
            .iter()
            .map(|p| p.as_u64().ok_or(()))
            .collect::<Result<Vec<u64>, ()>>()
            .map_err(|_| {
                malformed("`protocols` holds something other than whole numbers".into())
            })?,
        (Some(_), _) => return Err(malformed("`protocols` is not a list".into())),
        (None, Some(p)) => vec![p
            .as_u64()
            .ok_or_else(|| malformed("`protocol` is not a whole number".into()))?],
        (None, None) => {
            return Err(malformed(
                "it names neither `protocols` nor `protocol`".into(),
            ))
        }
    };
    if protocols.contains(&u64::from(PROTOCOL)) {
        Ok(Discovery { protocols, version })
    } else {
        Err(DiscoveryError::Unsupported {
            server: server.to_string(),
            version,
            protocols,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2_0_server_is_accepted() {
        let d = check(
            br#"{"protocol":3,"protocols":[3],"version":"2.0.1"}"#,
            "lembas.example",
        )
        .unwrap();
        assert_eq!(d.protocols, vec![3]);
        assert!(check(br#"{"protocol":3}"#, "s").is_ok());
        // `protocols` wins over the frozen `protocol`.
        assert!(check(br#"{"protocol":1,"protocols":[1,2,3]}"#, "s").is_ok());
    }

    #[test]
    fn a_1_x_server_gets_the_spec_sentence() {
        let e = check(
            br#"{"protocol":1,"protocols":[1,2],"version":"1.9.0"}"#,
            "lembas.example",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "lembas.example runs LLeMbas 1.9.0, which speaks link protocol 1 and 2; this LLeMbas \
             CLI needs a LLeMbas 2.0 server (protocol 3) — update the server, or use LLeMbas CLI \
             1.x with it"
        );
        let e = check(br#"{"protocol":1}"#, "old.example").unwrap_err();
        assert!(e.to_string().contains("speaks link protocol 1;"), "{e}");
    }

    #[test]
    fn malformed_documents_say_so() {
        for doc in [
            &b"<html>"[..],
            b"[3]",
            br#"{"protocols":"3"}"#,
            br#"{"name":"x"}"#,
            br#"{"protocols":[3.5]}"#,
        ] {
            let e = check(doc, "s").unwrap_err();
            assert!(matches!(e, DiscoveryError::Malformed { .. }), "{e}");
            assert!(
                e.to_string().contains("not a LLeMbas discovery document"),
                "{e}"
            );
        }
    }
}
