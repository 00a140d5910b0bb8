//! What a device says first, as JSON a test feeds a lone `Client` (one with no `Device` behind
//! it): its `_lembas/hello` and its answer to `initialize`.

use serde_json::{json, Value};

/// `_lembas/hello` from a device on `protocol` at `version`.
pub fn hello(protocol: u32, version: &str, host: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "_lembas/hello",
        "params": {
            "protocol": protocol,
            "version": version,
            "device": { "host": host, "platform": "linux" },
            "limits": { "roots": ["/home/dev/work"], "max_mode": "edit", "require_trust": true },
        },
    })
}

/// The answer to the `initialize` request `id` of a protocol 3 device listing `capabilities`.
pub fn initialize_answer(id: &Value, capabilities: &[&str]) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": false,
                "promptCapabilities": { "image": true, "audio": false, "embeddedContext": true },
                "mcpCapabilities": { "http": false, "sse": false },
            },
            "authMethods": [],
            "agentInfo": { "name": "LLeMbas CLI", "version": "2.0.0" },
            "_meta": { "lembas": {
                "protocol": 3,
                "harness_spec": "3.0.0",
                "limits": { "roots": ["/home/dev/work"], "max_mode": "edit", "require_trust": true },
                "connection": null,
                "capabilities": capabilities,
            } },
        },
    })
}
