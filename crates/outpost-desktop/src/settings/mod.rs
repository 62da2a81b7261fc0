//! The app's settings: its own file (`settings.toml` in the config directory, found
//! through [`crate::paths::Paths`]) and [`crate::Desktop`]'s `settings_*` commands in
//! `commands`. Folder scopes and the consent timeout are not in the file: they belong to
//! the policy file, which the tool executor reads. Secrets are never there: they go to the
//! keyring.

mod commands;

pub(crate) use commands::connection_config;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{DesktopError, Result};

/// How the app gets its token (also `ConnectionSettings` `authMode` in the UI contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// A token kept in the keyring.
    #[default]
    Token,
    /// A token endpoint.
    Endpoint,
    /// For local development against your own livekit-server: Outpost mints its token from
    /// an API key and its secret (the secret in the keyring).
    ApiKey,
}

/// The connection part of the settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnectionConfig {
    /// Token or endpoint.
    pub auth_mode: AuthMode,
    /// The LiveKit server.
    pub livekit_url: String,
    /// The token endpoint.
    pub token_endpoint: String,
    /// The room (for the endpoint request and the history).
    pub room: String,
    /// This app's identity (for the endpoint request).
    pub identity: String,
    /// The LiveKit Agents agent to dispatch by name (asked of the endpoint, or put into the
    /// token minted from the API key); empty: agents dispatched automatically.
    pub agent_name: String,
    /// The API key (with `ApiKey`; its secret is in the keyring).
    pub api_key: String,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            auth_mode: AuthMode::Token,
            livekit_url: String::new(),
            token_endpoint: String::new(),
            room: String::new(),
            identity: String::new(),
            agent_name: String::new(),
            api_key: String::new(),
        }
    }
}

/// Notification preferences.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NotificationConfig {
    /// Master switch.
    pub enabled: bool,
    /// Notify when consent is needed.
    pub on_consent: bool,
    /// Notify when a long task finishes.
    pub on_long_task: bool,
    /// Seconds after which a task counts as long.
    pub long_task_secs: u32,
}

impl Default for NotificationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            on_consent: true,
            on_long_task: true,
            long_task_secs: 10,
        }
    }
}

/// The system-wide shortcut unless the user chose another: hold to talk, press to raise.
pub const DEFAULT_SHORTCUT: &str = "Ctrl+Alt+Space";

/// `settings.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AppConfig {
    /// Set once a connection was saved or the demo started: no first-run screen after.
    pub configured: bool,
    /// The last session was the local demo (reconnect to it on start).
    pub demo: bool,
    /// Connection.
    pub connection: ConnectionConfig,
    /// Notifications.
    pub notifications: NotificationConfig,
    /// History retention in days; 0 keeps everything.
    pub retention_days: u32,
    /// Built-in tools switched off.
    pub disabled_tools: Vec<String>,
    /// The chosen microphone (an outpost-audio device id); none = the system default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voice_input: Option<String>,
    /// The chosen speaker or headphones; none = the system default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voice_output: Option<String>,
    /// Echo cancellation for open mic; none = on (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voice_echo_cancellation: Option<bool>,
    /// Closing the window keeps the session running in the tray (off: closing quits).
    pub keep_in_tray: bool,
    /// The system-wide shortcut (an accelerator like `Ctrl+Alt+Space`); none = the
    /// default [`DEFAULT_SHORTCUT`], empty = off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voice_shortcut: Option<String>,
}

impl AppConfig {
    /// Reads the file; a missing file gives the defaults. A damaged file is an error that
    /// names it (the app then starts with defaults and tells the user, never overwriting it
    /// silently).
    pub fn load(path: &Path) -> Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| {
                DesktopError::Internal(format!(
                    "The settings file {} is damaged ({}); fix or delete it.",
                    path.display(),
                    e.message()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(DesktopError::Io {
                action: "read",
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Writes the file atomically (temp file + rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |action, source| DesktopError::Io {
            action,
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent() {
            outpost_store::private::create_dir(dir).map_err(|e| io("create the folder of", e))?;
        }
        let text = toml::to_string_pretty(self)
            .map_err(|e| DesktopError::Internal(format!("Cannot write the settings: {e}")))?;
        let text = format!(
            "# Outpost app settings. Edited by the app's settings pane; folder scopes and the\n\
             # consent timeout live in policy.toml, the token in the OS keyring.\n\n{text}"
        );
        let tmp = path.with_extension("toml.tmp");
        outpost_store::private::write_file(&tmp, text.as_bytes()).map_err(|e| io("write", e))?;
        std::fs::rename(&tmp, path).map_err(|e| io("replace", e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn settings_round_trip_and_missing_file_is_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/settings.toml");
        assert_eq!(AppConfig::load(&path).unwrap(), AppConfig::default());
        let mut c = AppConfig {
            configured: true,
            retention_days: 30,
            ..AppConfig::default()
        };
        c.connection.livekit_url = "wss://example.livekit.cloud".into();
        c.connection.auth_mode = AuthMode::Endpoint;
        c.disabled_tools = vec!["open_path".into()];
        c.save(&path).unwrap();
        assert_eq!(AppConfig::load(&path).unwrap(), c);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("token ="), "no secret in the file: {text}");
    }

    #[test]
    fn damaged_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        std::fs::write(&path, "configured = \"perhaps\"\n").unwrap();
        let err = AppConfig::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("settings.toml") && err.contains("damaged"),
            "{err}"
        );
    }
}
