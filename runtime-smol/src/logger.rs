//! Logging to stderr (never stdout: on `serve --stdio`, stdout is the protocol's).
//!
//! Only this crate's own lines are shown at the chosen level; every dependency is capped at
//! `warn`. That cap is a security rule, not taste: tungstenite logs a client handshake's whole
//! request (`Authorization` header and all) at `trace`, and the device token must never reach a
//! log, whatever level is asked for.

use log::LevelFilter;

/// `verbosity`: 0 = info, 1 = debug, 2 or more = trace. `LEMBAS_LOG` (`error` … `trace`)
/// overrides it. Safe to call more than once (later calls are ignored).
pub fn init(verbosity: u8) {
    init_level(match verbosity {
        0 => LevelFilter::Info,
        1 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    })
}

/// As [`init`], from a level (`LEMBAS_LOG` still overrides it).
pub fn init_level(mut level: LevelFilter) {
    if let Some(l) = std::env::var("LEMBAS_LOG")
        .ok()
        .and_then(|v| v.parse::<LevelFilter>().ok())
    {
        level = l;
    }
    let _ = env_logger::Builder::new()
        .filter_level(LevelFilter::Warn)
        .filter_module("lembas", level)
        .target(env_logger::Target::Stderr)
        .format_timestamp_millis()
        .try_init();
}
