//! The device's remote limits as they are at the moment of each request (the spec: "the
//! device's limits apply to every request as they are at that moment"). A session made while
//! remote work was on, in a root since removed, or in a directory since untrusted is not used
//! from the link: every request that runs, changes or reads its content passes [`Device::admit`]
//! first, whether the session is in memory or opened again from the store.
//!
//! The rules are about remote work over the instance link (`remote.*`): an editor on
//! `serve --stdio` and a terminal on the device are the device's own person at the device, and
//! work where they are, as `session/new` lets them (its `initialize` says `limits: null`).

use super::{ConnId, ConnKind, Device};
use crate::jsonrpc::RpcError;
use crate::paths;

impl Device {
    /// Whether a request on `conn` may use session `session`, whose directory is `dir`, under
    /// the limits of this moment: remote work on, `dir` inside `remote.roots`, and trusted when
    /// `remote.require_trust`. Only the link is held to them (see the module doc). `dir` is the
    /// session's stored directory (lexical), or the same directory with symlinks followed.
    pub(super) fn admit(&self, conn: ConnId, session: &str, dir: &str) -> Result<(), RpcError> {
        let on_link = self
            .conns
            .get(&conn)
            .is_some_and(|c| c.kind == ConnKind::Link);
        if !on_link {
            return Ok(());
        }
        self.check_directory(dir).map(drop).map_err(|e| {
            RpcError::invalid_params(format!(
                "session `{session}` cannot be used over the link now: {}",
                e.message
            ))
        })
    }

    /// The rules a directory of remote work passes, in order: remote work on, some roots, `dir`
    /// inside one of them, and trusted when `remote.require_trust`. The root, or the reason.
    pub(super) fn check_directory(&self, dir: &str) -> Result<String, RpcError> {
        let root = self.check_roots(dir)?.to_string();
        let remote = &self.config.remote;
        if remote.require_trust && paths::within(dir, &remote.trusted).is_none() {
            return Err(RpcError::invalid_params(format!(
                "`{dir}` is not in a trusted project (remote.require_trust is on; \
                 trust it on the device with `lembas trust`)"
            )));
        }
        Ok(root)
    }
}
