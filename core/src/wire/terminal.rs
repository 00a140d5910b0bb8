//! Remote terminals on the wire: `_lembas/terminal/open`, `input`, `resize`, `close`, `output`
//! and `exit`.

use serde::{Deserialize, Serialize};

/// `_lembas/terminal/open`'s params; each is optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenParams {
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub cols: Option<u16>,
    #[serde(default)]
    pub rows: Option<u16>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenResult<'a> {
    pub terminal_id: &'a str,
    pub cwd: &'a str,
    pub cols: u16,
    pub rows: u16,
    /// `bash`, `zsh`, `fish` or `other` (capability `shell`).
    pub shell: &'a str,
    pub integration: bool,
}

/// `input`: base64 keystrokes.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputParams<'a> {
    #[serde(borrow)]
    pub terminal_id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub data: std::borrow::Cow<'a, str>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResizeParams {
    pub terminal_id: String,
    pub cols: u16,
    pub rows: u16,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloseParams {
    pub terminal_id: String,
}

/// `output` (base64) from the device.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output<'a> {
    pub terminal_id: &'a str,
    pub data: &'a str,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exit<'a> {
    pub terminal_id: &'a str,
    pub code: i32,
}
