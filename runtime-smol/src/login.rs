//! `lembas login`: check the instance speaks protocol 3 and takes the token (its model list,
//! `GET /v1/models`), then save the login (the address in `login.json`, the token in a file
//! only the user can read) and, when config.yaml sets no `embedding:`, the instance's first
//! embedding model as it (see [`crate::embedding`]). It says whose personalization applies
//! (see [`crate::personalization`]).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use lembas_core::discovery;
use serde::{Deserialize, Serialize};

use crate::dirs::{create_private_dir, Dirs};
use crate::link::{fetch_discovery, fetch_models, Instance, ModelsError};

/// The saved login.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Login {
    pub url: String,
    /// An extra certificate authority trusted for this instance (PEM file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
}

/// Check discovery and save the login. Errors are sentences for the person.
pub fn login(
    dirs: &Dirs,
    url: &str,
    token: &str,
    ca_file: Option<&Path>,
    home: Option<&Path>,
) -> Result<String, String> {
    let token = token.trim();
    if token.is_empty() {
        return Err("the token is empty".into());
    }
    let instance = Instance::parse(url)?;
    let ca = ca_file
        .map(|p| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display())))
        .transpose()?;
    let doc = fetch_discovery(&instance, ca.as_deref())?;
    let found = discovery::check(&doc, &instance.host).map_err(|e| e.to_string())?;
    // A refused token fails the login; an instance whose list cannot be read is still one to
    // link to (each dial fetches the list again).
    // The login lists the models; each dial keeps `engine.max_models` of them.
    let most = lembas_core::model::models::DEFAULT_MAX_MODELS;
    let models = match fetch_models(&instance, token, ca.as_deref(), most) {
        Ok(list) => Ok(list),
        Err(ModelsError::Refused(why)) => return Err(why),
        Err(ModelsError::Failed(why)) => Err(why),
    };
    create_private_dir(&dirs.config).map_err(|e| format!("{}: {e}", dirs.config.display()))?;
    write_private(&dirs.token_file(), token.as_bytes())?;
    let login = Login {
        url: instance.base_url(),
        ca_file: ca_file
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()))
            .map(|p| p.to_string_lossy().into_owned()),
    };
    let json = serde_json::to_vec_pretty(&login).map_err(|e| e.to_string())?;
    write_private(&dirs.login_file(), &json)?;
    let mut said = format!(
        "logged in to {} (LLeMbas {}, link protocol 3)",
        instance.base_url(),
        found.version.as_deref().unwrap_or("2.x")
    );
    match models {
        Ok(list) => {
            let names: Vec<&str> = list.chat.iter().map(|m| m.id.as_str()).collect();
            said.push_str(&format!(
                "\n{} chat model{}: {}",
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            ));
            if let Some(note) = list.cut_note() {
                said.push_str(&format!("\n{note}"));
            }
            if let Some(id) = list.embedding {
                let value = format!("{}/{id}", instance.host);
                match crate::embedding::set_if_unset(&dirs.config_file(), &value, home) {
                    Ok(true) => said.push_str(&format!("\nembedding: {value} (config.yaml)")),
                    Ok(false) => {}
                    Err(e) => said.push_str(&format!("\nembedding not set: {e}")),
                }
            }
        }
        Err(why) => said.push_str(&format!(
            "\nthe instance's models could not be listed ({why}); `lembas link` tries again"
        )),
    }
    use crate::personalization::FromInstance;
    said.push_str(
        match crate::personalization::fetch(&instance, token, ca.as_deref()) {
            FromInstance::NotAvailable => {
                "\npersonalization: config.yaml's (the instance has none available)"
            }
            FromInstance::Available(Some(_)) => {
                "\npersonalization: the account's, from the instance (in place of config.yaml's)"
            }
            FromInstance::Available(None) => "\npersonalization: none (turned off on the instance)",
        },
    );
    Ok(said)
}

/// The saved login and token, or a sentence saying to log in.
pub fn load(dirs: &Dirs) -> Result<(Login, String), String> {
    let not_logged_in =
        || "this device is not logged in; run `lembas login <url>` first".to_string();
    let text = std::fs::read(dirs.login_file()).map_err(|_| not_logged_in())?;
    let login: Login = serde_json::from_slice(&text).map_err(|e| {
        format!(
            "{}: {e}; run `lembas login` again",
            dirs.login_file().display()
        )
    })?;
    let token = std::fs::read_to_string(dirs.token_file()).map_err(|_| not_logged_in())?;
    Ok((login, token.trim().to_string()))
}

/// Write `bytes` to `path` atomically, readable by the user alone (0600).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}
