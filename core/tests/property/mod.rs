//! Which seeds a seeded property runs, chosen here in the test harness (the core has no
//! randomness of its own): `LEMBAS_PROPERTY_SEEDS` of them (else the property's default), from
//! a random offset (`/dev/urandom`, else the clock) that `LEMBAS_PROPERTY_SEED_OFFSET` fixes, so
//! every run looks at seeds no run looked at before. The offset is printed before the first run,
//! and a failing seed is printed with the command that runs it alone (`LEMBAS_PROPERTY_SEED`).
//! Seeds that once broke a promise run first, every time.

use std::io::Write;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// Runs `run` on every seed this test is to try; a seed that panics is told with its replay
/// command, and the panic goes on. Returns the one seed `LEMBAS_PROPERTY_SEED` names, if it
/// does, without running anything: the caller runs it its own (verbose) way.
pub fn seeds(known: &[u64], default: u64, mut run: impl FnMut(u64)) -> Option<u64> {
    if let Some(seed) = env_u64("LEMBAS_PROPERTY_SEED") {
        return Some(seed);
    }
    let count = env_u64("LEMBAS_PROPERTY_SEEDS").unwrap_or(default);
    let offset = env_u64("LEMBAS_PROPERTY_SEED_OFFSET").unwrap_or_else(random_offset);
    let test = std::thread::current()
        .name()
        .unwrap_or("the property")
        .to_string();
    // Straight to the stream, not through eprintln!, which the test harness keeps to itself
    // unless the test fails.
    tell(&format!(
        "{test}: {count} seeds from LEMBAS_PROPERTY_SEED_OFFSET={offset} (after {known:?})"
    ));
    let all = known
        .iter()
        .copied()
        .chain((0..count).map(|i| offset.wrapping_add(i)));
    for seed in all {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| run(seed))) {
            tell(&format!(
                "{test}: seed {seed} failed (offset {offset}). Run it alone, told step by step:\n  \
                 LEMBAS_PROPERTY_SEED={seed} cargo test{release} -p {package} --test {target} \
                 -- --exact {test} --nocapture",
                release = if cfg!(debug_assertions) { "" } else { " --release" },
                // The package whose test includes this file (the core's, or a shell's).
                package = env!("CARGO_PKG_NAME"),
                target = env!("CARGO_CRATE_NAME"),
            ));
            resume_unwind(panic);
        }
    }
    None
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={value:?} is not a whole number ≥ 0: {e}")),
    )
}

fn random_offset() -> u64 {
    let mut bytes = [0u8; 8];
    match std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
    {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => {
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            since.as_nanos() as u64
        }
    }
}

fn tell(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
