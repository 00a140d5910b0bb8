//! `lembas config set <key> <value>` for the personalization keys (`personality`,
//! `personality_custom`, `instructions`): the key is written into config.yaml (the rest of the
//! file kept, see [`crate::config_edit`]), and, logged in to an instance that has the account's
//! personalization available, written back there too: a `PUT /v1/me/personalization` of only
//! the field changed and `enabled: true`, so the instance keeps the rest of what it saved.

use std::path::Path;

use crate::config_edit;
use crate::dirs::Dirs;
use crate::link::Instance;
use crate::personalization::{self, FromInstance};

/// The keys `lembas config set` takes.
pub const KEYS: [&str; 3] = personalization::FIELDS;

/// Set `key` to `value`; a sentence per place it was written. An error after config.yaml was
/// written says so.
pub fn set(dirs: &Dirs, key: &str, value: &str, home: Option<&Path>) -> Result<String, String> {
    if !KEYS.contains(&key) {
        return Err(format!(
            "`{key}` is not a key `lembas config set` takes ({})",
            KEYS.join(", ")
        ));
    }
    let path = dirs.config_file();
    let text = config_edit::read(&path)?;
    // The file must be good as it is (the error names file, line and key).
    crate::config::parse(&text, &path, home).map_err(|e| e.to_string())?;
    config_edit::write_checked(&path, &config_edit::with_string(&text, key, value), home)?;
    let mut said = format!("{key} set in {}", path.display());
    let Ok((login, token)) = crate::login::load(dirs) else {
        return Ok(said);
    };
    let instance = Instance::parse(&login.url)?;
    let ca = login
        .ca_file
        .as_ref()
        .map(|p| std::fs::read(p).map_err(|e| format!("{p}: {e}")))
        .transpose()?;
    match personalization::fetch(&instance, &token, ca.as_deref()) {
        FromInstance::NotAvailable => said.push_str(&format!(
            "\n{} has no personalization available: config.yaml's applies",
            instance.base_url()
        )),
        FromInstance::Available(_) => {
            personalization::put(&instance, &token, ca.as_deref(), key, value)
                .map_err(|e| format!("{said}, but not on {}: {e}", instance.base_url()))?;
            said.push_str(&format!(
                "\n{key} set on {} (the account's personalization, enabled)",
                instance.base_url()
            ));
        }
    }
    Ok(said)
}
