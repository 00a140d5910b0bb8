//! The device's half of the handshake: `_lembas/hello` on a new link, then `initialize`.

use serde_json::value::RawValue;

use super::connection::Phase;
use super::{ConnId, ConnKind, Device};
use crate::config::DeviceConfig;
use crate::jsonrpc::{self, code, RpcError};
use crate::methods::{self, Needs, On};
use crate::wire::handshake::{
    AgentCapabilities, AgentInfo, AgentLembas, AgentMeta, DeviceInfo, Hello, InitializeParams,
    InitializeResult, Limits, McpCapabilities, Offered, PromptCapabilities, SessionCapabilities,
    ACP_PROTOCOL_VERSION, HARNESS_SPEC, PROTOCOL,
};

/// The name the device gives itself in `agentInfo`.
pub const AGENT_NAME: &str = "LLeMbas CLI";

impl Device {
    pub(super) fn limits(&self) -> Limits {
        limits(&self.config)
    }

    pub(super) fn send_hello(&mut self, conn: ConnId) {
        let hello = hello(&self.config);
        self.out
            .send(conn, jsonrpc::encode_notification("_lembas/hello", &hello));
    }

    pub(super) fn initialize(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, RpcError> {
        // Dispatch routes only a frame of an open connection here.
        let Some(c) = self.conns.get_mut(&conn) else {
            return Err(RpcError::new(
                code::INTERNAL_ERROR,
                format!("no open connection {}", conn.0),
            ));
        };
        if c.phase != Phase::AwaitingInitialize {
            return Err(RpcError::invalid_request(
                "`initialize` was already answered on this connection",
            ));
        }
        let params: InitializeParams = jsonrpc::parse_params("initialize", params)?;
        let result = initialize_result(&self.config, c.kind);
        c.initialized(params.client_said());
        if c.kind == ConnKind::Link {
            self.link.initialized();
        }
        Ok(to_raw(&result))
    }
}

/// The `_lembas/hello` a new link is sent under `config`.
fn hello(config: &DeviceConfig) -> Hello {
    Hello {
        protocol: PROTOCOL,
        version: config.version.clone(),
        harness_spec: Some(HARNESS_SPEC.into()),
        device: DeviceInfo {
            host: config.host.clone(),
            platform: config.platform.clone(),
        },
        limits: limits(config),
    }
}

/// What `initialize` answers on a connection of `kind` under `config`.
fn initialize_result(config: &DeviceConfig, kind: ConnKind) -> InitializeResult {
    let limits = (kind == ConnKind::Link).then(|| limits(config));
    // An editor's connection (stdio, the hub) gets ACP's session surface (session_acp.rs).
    let local = matches!(kind, ConnKind::Stdio | ConnKind::Hub);
    let offered = || Some(Offered {});
    let connection = match kind {
        ConnKind::Link => config.connection.clone(),
        ConnKind::Stdio | ConnKind::Terminal | ConnKind::Hub => None,
    };
    InitializeResult {
        protocol_version: ACP_PROTOCOL_VERSION,
        agent_capabilities: AgentCapabilities {
            load_session: local,
            session_capabilities: local.then(|| SessionCapabilities {
                list: offered(),
                resume: offered(),
                close: offered(),
                delete: offered(),
            }),
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
            version: config.version.clone(),
        },
        meta: Some(AgentMeta {
            lembas: AgentLembas {
                protocol: PROTOCOL,
                harness_spec: HARNESS_SPEC.into(),
                limits,
                connection,
                capabilities: capabilities(config, kind).map(str::to_string).collect(),
            },
        }),
    }
}

/// The limits of remote work a link is told (in `_lembas/hello` and `initialize`).
fn limits(config: &DeviceConfig) -> Limits {
    let remote = &config.remote;
    Limits {
        roots: remote.advertised_roots().to_vec(),
        max_mode: remote.max_mode,
        require_trust: remote.require_trust,
    }
}

/// The capabilities `initialize` lists on a connection of `kind` under `config`: those this
/// build has ([`methods::CAPABILITIES`]) that work there under the settings.
pub(super) fn capabilities(
    config: &DeviceConfig,
    kind: ConnKind,
) -> impl Iterator<Item = &'static str> + '_ {
    methods::CAPABILITIES
        .iter()
        .filter(move |c| {
            let here = c.on() == On::Any || kind == ConnKind::Link;
            let set = match c.needs {
                Needs::Nothing => true,
                Needs::Store => config.has_store,
                Needs::RemoteTerminal => config.remote.terminal,
                Needs::Models => !config.models.is_empty(),
            };
            here && set && c.built()
        })
        .map(|c| c.name)
}

/// Our own result types always serialize (see `jsonrpc::to_frame`).
pub(super) fn to_raw<T: serde::Serialize>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("the core's results always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Mode;

    fn config() -> DeviceConfig {
        let mut config = DeviceConfig::default();
        config.remote.enabled = true;
        config.remote.roots = vec!["/work".into()];
        config.remote.max_mode = Mode::Plan;
        config.connection = Some("home".into());
        config
    }

    #[test]
    fn a_link_is_told_the_limits_and_its_connection_and_an_editor_the_session_surface() {
        let config = config();
        let link = initialize_result(&config, ConnKind::Link);
        let lembas = &link.meta.as_ref().expect("a lembas meta").lembas;
        let told = lembas.limits.as_ref().expect("a link is told the limits");
        assert_eq!(
            (told.max_mode, &told.roots),
            (Mode::Plan, &config.remote.roots)
        );
        assert_eq!(lembas.connection.as_deref(), Some("home"));
        assert!(!link.agent_capabilities.load_session);
        assert!(link.agent_capabilities.session_capabilities.is_none());
        for kind in [ConnKind::Stdio, ConnKind::Hub] {
            let local = initialize_result(&config, kind);
            let lembas = &local.meta.as_ref().expect("a lembas meta").lembas;
            assert!(
                lembas.limits.is_none() && lembas.connection.is_none(),
                "{kind:?}"
            );
            assert!(local.agent_capabilities.load_session, "{kind:?}");
            assert!(
                local.agent_capabilities.session_capabilities.is_some(),
                "{kind:?}"
            );
        }
        let terminal = initialize_result(&config, ConnKind::Terminal);
        assert!(!terminal.agent_capabilities.load_session);
        // The hello says the same limits as a link's `initialize`.
        assert_eq!(&hello(&config).limits, told);
    }
}
