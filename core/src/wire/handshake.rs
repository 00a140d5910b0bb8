//! `_lembas/hello` and `initialize`: who is speaking, which protocol, which capabilities.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::config::Mode;

/// The only link protocol this build speaks (LLeMbas 2.0 and LLeMbas CLI 2.0).
pub const PROTOCOL: u32 = 3;
/// The harness spec this build implements.
pub const HARNESS_SPEC: &str = "3.0.0";
/// ACP's own protocol version, as `initialize` carries it.
pub const ACP_PROTOCOL_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub host: String,
    pub platform: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub roots: Vec<String>,
    pub max_mode: Mode,
    pub require_trust: bool,
}

/// `_lembas/hello`, sent by the device before anything else on a link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub version: String,
    #[serde(default)]
    pub harness_spec: Option<String>,
    pub device: DeviceInfo,
    pub limits: Limits,
}

/// `clientCapabilities._meta.lembas`: absent for a plain ACP client, `true` from a protocol 1
/// client, `{ protocol, show? }` from a later one (an object without `protocol` is protocol 1).
#[derive(Clone, Debug, PartialEq)]
pub enum LembasFlag {
    Bool(bool),
    Said {
        protocol: Option<u32>,
        show: Option<bool>,
    },
}

#[derive(Deserialize)]
struct Said {
    #[serde(default)]
    protocol: Option<u32>,
    #[serde(default)]
    show: Option<bool>,
}

/// A boolean or an object, told apart by what arrives (`#[serde(untagged)]` would buffer the
/// value and try each variant, and say only "did not match any variant" when none fits).
impl<'de> Deserialize<'de> for LembasFlag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Flag;
        impl<'de> Visitor<'de> for Flag {
            type Value = LembasFlag;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`true` or an object with `protocol`")
            }

            fn visit_bool<E: de::Error>(self, b: bool) -> Result<LembasFlag, E> {
                Ok(LembasFlag::Bool(b))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<LembasFlag, A::Error> {
                let Said { protocol, show } =
                    Said::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(LembasFlag::Said { protocol, show })
            }
        }
        d.deserialize_any(Flag)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ClientMeta {
    #[serde(default)]
    pub lembas: Option<LembasFlag>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ClientCapabilities {
    #[serde(default, rename = "_meta")]
    pub meta: Option<ClientMeta>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub protocol_version: u32,
    #[serde(default)]
    pub client_capabilities: ClientCapabilities,
}

/// What a client said about itself in `initialize`, kept for the life of its connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientSaid {
    /// It said `_meta.lembas`: it gets `_lembas/event` and `_lembas/*` notifications.
    pub lembas: bool,
    /// The link protocol it speaks (1 when it said `true` or gave no number).
    pub protocol: u32,
    pub show: bool,
}

impl InitializeParams {
    pub fn client_said(&self) -> ClientSaid {
        let flag = self
            .client_capabilities
            .meta
            .as_ref()
            .and_then(|m| m.lembas.as_ref());
        match flag {
            None | Some(LembasFlag::Bool(false)) => ClientSaid::default(),
            Some(LembasFlag::Bool(true)) => ClientSaid {
                lembas: true,
                protocol: 1,
                show: false,
            },
            Some(LembasFlag::Said { protocol, show }) => ClientSaid {
                lembas: true,
                protocol: protocol.unwrap_or(1),
                show: show.unwrap_or(false),
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    pub image: bool,
    pub audio: bool,
    pub embedded_context: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpCapabilities {
    pub http: bool,
    pub sse: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub load_session: bool,
    pub prompt_capabilities: PromptCapabilities,
    pub mcp_capabilities: McpCapabilities,
    /// ACP's optional session methods this connection may use (an editor's: stdio, the hub).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_capabilities: Option<SessionCapabilities>,
}

/// ACP v1's `sessionCapabilities`: each method offered is an empty object.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionCapabilities {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list: Option<Offered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<Offered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub close: Option<Offered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete: Option<Offered>,
}

/// `{}`: the method is offered.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Offered {}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentInfo {
    pub name: String,
    pub version: String,
}

/// `initialize`'s `_meta.lembas`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentLembas {
    pub protocol: u32,
    pub harness_spec: String,
    /// `null` on stdio, where no remote limits apply.
    pub limits: Option<Limits>,
    pub connection: Option<String>,
    pub capabilities: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentMeta {
    pub lembas: AgentLembas,
}

/// The device's `initialize` answer. Only encoded: a client reads its own view of it,
/// [`Initialized`], so these fields' decoding stays out of the web client's module.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: u32,
    pub agent_capabilities: AgentCapabilities,
    pub auth_methods: Vec<serde_json::Value>,
    pub agent_info: AgentInfo,
    /// Absent when a plain ACP agent answers (what the client checks before trusting the rest).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<AgentMeta>,
}

/// What a client reads of an `initialize` answer: the link protocol and capabilities in
/// `_meta.lembas`, and nothing else (the agent's ACP capabilities, info and limits are for an
/// editor). Decoded straight from the frame, without a `serde_json::Value` in between.
#[derive(Debug, Deserialize)]
pub struct Initialized {
    /// Absent when a plain ACP agent answers (what the client checks before trusting the rest).
    #[serde(rename = "_meta", default)]
    pub meta: Option<InitializedMeta>,
}

#[derive(Debug, Deserialize)]
pub struct InitializedMeta {
    pub lembas: InitializedLembas,
}

#[derive(Debug, Deserialize)]
pub struct InitializedLembas {
    pub protocol: u32,
    pub capabilities: Vec<String>,
}

impl Initialized {
    /// The capabilities listed, if the answer speaks link protocol [`PROTOCOL`].
    pub fn capabilities(self) -> Option<Vec<String>> {
        let lembas = self.meta?.lembas;
        (lembas.protocol == PROTOCOL).then_some(lembas.capabilities)
    }
}

/// The client's `initialize` params: protocol 3 and, when it has a viewer, `show`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    pub protocol_version: u32,
    pub client_capabilities: ClientCapabilitiesSaid,
}

/// `clientCapabilities` as a lembas client says them: `{"_meta": {"lembas": {...}}}`.
#[derive(Clone, Debug, Serialize)]
pub struct ClientCapabilitiesSaid {
    #[serde(rename = "_meta")]
    pub meta: ClientMetaSaid,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClientMetaSaid {
    pub lembas: LembasSaid,
}

/// `{ protocol, show? }` (`show` only when true).
#[derive(Clone, Debug, Serialize)]
pub struct LembasSaid {
    pub protocol: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub show: bool,
}

impl InitializeRequest {
    pub fn lembas(show: bool) -> Self {
        InitializeRequest {
            protocol_version: ACP_PROTOCOL_VERSION,
            client_capabilities: ClientCapabilitiesSaid {
                meta: ClientMetaSaid {
                    lembas: LembasSaid {
                        protocol: PROTOCOL,
                        show,
                    },
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(json: &str) -> ClientSaid {
        serde_json::from_str::<InitializeParams>(json)
            .unwrap()
            .client_said()
    }

    #[test]
    fn what_a_client_says_about_itself() {
        assert_eq!(said(r#"{"protocolVersion":1}"#), ClientSaid::default());
        assert_eq!(
            said(r#"{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":true}}}"#),
            ClientSaid {
                lembas: true,
                protocol: 1,
                show: false
            }
        );
        assert_eq!(
            said(
                r#"{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":3,"show":true}}}}"#
            ),
            ClientSaid {
                lembas: true,
                protocol: 3,
                show: true
            }
        );
        assert_eq!(
            said(r#"{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}"#),
            ClientSaid::default()
        );
    }

    #[test]
    fn a_client_reads_only_the_protocol_and_capabilities_of_initialize() {
        let read = |json: &str| {
            serde_json::from_str::<Initialized>(json)
                .unwrap()
                .capabilities()
        };
        assert_eq!(
            read(
                r#"{"protocolVersion":1,"agentInfo":{"name":"lembas"},"_meta":{"lembas":{"protocol":3,"limits":null,"capabilities":["delete"]}}}"#
            ),
            Some(vec!["delete".to_string()])
        );
        assert_eq!(
            read(r#"{"protocolVersion":1,"_meta":{"lembas":{"protocol":2,"capabilities":[]}}}"#),
            None
        );
        assert_eq!(read(r#"{"protocolVersion":1}"#), None);
        assert!(serde_json::from_str::<Initialized>(r#"{"_meta":{"lembas":{}}}"#).is_err());
    }

    #[test]
    fn a_client_says_its_protocol_and_show_only_when_true() {
        let said = |show| serde_json::to_string(&InitializeRequest::lembas(show)).unwrap();
        assert_eq!(
            said(false),
            r#"{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":3}}}}"#
        );
        assert_eq!(
            said(true),
            r#"{"protocolVersion":1,"clientCapabilities":{"_meta":{"lembas":{"protocol":3,"show":true}}}}"#
        );
    }
}
