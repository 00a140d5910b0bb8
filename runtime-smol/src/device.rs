//! Building the core's `DeviceConfig` from `config.yaml` and this machine.

use lembas_core::DeviceConfig;

use crate::config::Config;

/// This machine's name, for `_lembas/hello`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// A seed for the ids and jitter the device makes: different per process.
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15
}

pub fn device_config(config: &Config, connection: Option<String>) -> DeviceConfig {
    let mut d = DeviceConfig::default();
    d.seed = fresh_seed();
    d.host = hostname();
    d.platform = std::env::consts::OS.to_string();
    d.connection = connection;
    d.remote = config.remote.clone();
    d.sessions = config.sessions;
    d.frames = config.frames;
    d.terminals = config.terminals;
    d.outbound = config.outbound;
    d.inbound = config.inbound;
    d.mentions = config.mentions;
    d.files = config.files;
    d.commands = config.commands;
    d.liveness = Some(config.liveness);
    d
}
