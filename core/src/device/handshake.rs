//! The device's half of the handshake: `_lembas/hello` on a new link, then `initialize`.

use serde_json::value::RawValue;

use super::connection::Phase;
use super::{ConnId, ConnKind, Device};
use crate::jsonrpc::{self, RpcError};
use crate::wire::handshake::{
    AgentCapabilities, AgentInfo, AgentLembas, AgentMeta, DeviceInfo, Hello, InitializeParams,
    InitializeResult, Limits, McpCapabilities, PromptCapabilities, ACP_PROTOCOL_VERSION,
    HARNESS_SPEC, PROTOCOL,
};

/// The name the device gives itself in `agentInfo`.
pub const AGENT_NAME: &str = "LLeMbas CLI";

impl Device {
    pub(super) fn limits(&self) -> Limits {
        let remote = &self.config.remote;
        Limits {
            roots: remote.advertised_roots().to_vec(),
            max_mode: remote.max_mode,
            require_trust: remote.require_trust,
        }
    }

    pub(super) fn send_hello(&mut self, conn: ConnId) {
        let hello = Hello {
            protocol: PROTOCOL,
            version: self.config.version.clone(),
            harness_spec: Some(HARNESS_SPEC.into()),
            device: DeviceInfo {
                host: self.config.host.clone(),
                platform: self.config.platform.clone(),
            },
            limits: self.limits(),
        };
        self.out
            .send(conn, jsonrpc::encode_notification("_lembas/hello", &hello));
    }

    pub(super) fn initialize(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, RpcError> {
        if self.conns[&conn].phase != Phase::AwaitingInitialize {
            return Err(RpcError::invalid_request(
                "`initialize` was already answered on this connection",
            ));
        }
        let params: InitializeParams = jsonrpc::parse_params("initialize", params)?;
        let kind = self.conns[&conn].kind;
        let limits = (kind == ConnKind::Link).then(|| self.limits());
        let connection = match kind {
            ConnKind::Link => self.config.connection.clone(),
            ConnKind::Stdio | ConnKind::Terminal => None,
        };
        let result = InitializeResult {
            protocol_version: ACP_PROTOCOL_VERSION,
            agent_capabilities: AgentCapabilities {
                load_session: false,
                prompt_capabilities: PromptCapabilities {
                    image: true,
                    audio: false,
                    embedded_context: true,
                },
                mcp_capabilities: McpCapabilities {
                    http: false,
                    sse: false,
                },
            },
            auth_methods: Vec::new(),
            agent_info: AgentInfo {
                name: AGENT_NAME.into(),
                version: self.config.version.clone(),
            },
            meta: Some(AgentMeta {
                lembas: AgentLembas {
                    protocol: PROTOCOL,
                    harness_spec: HARNESS_SPEC.into(),
                    limits,
                    connection,
                    capabilities: self.capabilities_for(kind).map(str::to_string).collect(),
                },
            }),
        };
        let c = self
            .conns
            .get_mut(&conn)
            .expect("dispatch checked the connection");
        c.said = params.client_said();
        c.phase = Phase::Ready;
        if kind == ConnKind::Link {
            self.link.initialized();
        }
        Ok(to_raw(&result))
    }
}

/// Our own result types always serialize (see `jsonrpc::to_frame`).
pub(super) fn to_raw<T: serde::Serialize>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("the core's results always serialize")
}
