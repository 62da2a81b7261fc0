//! Secret values of MCP servers (tokens in `env`, `Authorization` headers) in the OS
//! keyring, never in `mcp.toml` or a log.
//!
//! Same service name as the app's other secrets (outpost-desktop), entries named
//! `mcp/<server>/<key>`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{McpError, Result};

/// The keyring's service name for Outpost's entries (shared with the desktop app).
pub const KEYRING_SERVICE: &str = "dev.outpost.app";

/// Where secret values live.
pub trait SecretStore: Send + Sync + std::fmt::Debug {
    /// The value, if set.
    fn get(&self, entry: &str) -> Result<Option<String>>;
    /// Stores it.
    fn set(&self, entry: &str, value: &str) -> Result<()>;
    /// Deletes it (no error when absent).
    fn delete(&self, entry: &str) -> Result<()>;
    /// Whether values survive this process (false for the in-memory store), so a command
    /// that writes a config referring to them can refuse instead of losing them.
    fn persistent(&self) -> bool;
}

/// The OS keyring (Secret Service on Linux, Keychain on macOS, Credential Manager on Windows).
#[derive(Debug, Default)]
pub struct Keyring;

fn unavailable(e: &keyring::Error) -> McpError {
    McpError::Keyring(format!(
        "the system keyring is not available ({e}); on Linux, install and unlock a Secret \
         Service keyring (GNOME Keyring or KWallet)"
    ))
}

/// Runs one keyring call on a thread of its own.
///
/// The keyring crate's Secret Service backend makes blocking D-Bus calls (through libdbus;
/// its zbus backend, used before, also panicked with "Cannot start a runtime from within a
/// runtime" on a thread driving async tasks), which would stall a runtime thread, such as
/// a server started from async code. A short-lived thread outside any runtime avoids that;
/// keyring calls are rare (a server start, `outpost mcp add`), so the thread costs nothing
/// that matters.
fn off_runtime<T: Send>(call: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .name("outpost-keyring".into())
            .spawn_scoped(s, call)
            .map_err(|e| McpError::Keyring(format!("cannot start the keyring thread: {e}")))?;
        worker.join().unwrap_or_else(|_| {
            Err(McpError::Keyring(
                "the keyring call failed unexpectedly".into(),
            ))
        })
    })
}

impl Keyring {
    fn entry(name: &str) -> Result<keyring::Entry> {
        keyring::Entry::new(KEYRING_SERVICE, name).map_err(|e| unavailable(&e))
    }
}

impl SecretStore for Keyring {
    fn get(&self, entry: &str) -> Result<Option<String>> {
        off_runtime(|| match Self::entry(entry)?.get_password() {
            Ok(v) => Ok(Some(v)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(unavailable(&e)),
        })
    }

    fn set(&self, entry: &str, value: &str) -> Result<()> {
        off_runtime(|| {
            Self::entry(entry)?
                .set_password(value)
                .map_err(|e| unavailable(&e))
        })
    }

    fn delete(&self, entry: &str) -> Result<()> {
        off_runtime(|| match Self::entry(entry)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(unavailable(&e)),
        })
    }

    fn persistent(&self) -> bool {
        true
    }
}

/// Values held in memory for one run (tests, and `OUTPOST_SECRETS=memory`).
#[derive(Debug, Default)]
pub struct MemorySecrets {
    values: Mutex<HashMap<String, String>>,
}

impl MemorySecrets {
    /// A new empty store, shared.
    pub fn shared() -> Arc<dyn SecretStore> {
        Arc::new(Self::default())
    }
}

impl SecretStore for MemorySecrets {
    fn get(&self, entry: &str) -> Result<Option<String>> {
        let g = outpost_sync::lock(&self.values);
        Ok(g.get(entry).cloned())
    }

    fn set(&self, entry: &str, value: &str) -> Result<()> {
        let mut g = outpost_sync::lock(&self.values);
        g.insert(entry.to_owned(), value.to_owned());
        Ok(())
    }

    fn delete(&self, entry: &str) -> Result<()> {
        let mut g = outpost_sync::lock(&self.values);
        g.remove(entry);
        Ok(())
    }

    fn persistent(&self) -> bool {
        false
    }
}

/// The store the environment asks for: `OUTPOST_SECRETS=memory` keeps values for this run
/// only; anything else is the OS keyring.
pub fn from_env() -> Arc<dyn SecretStore> {
    match std::env::var("OUTPOST_SECRETS").as_deref() {
        Ok("memory") => Arc::new(MemorySecrets::default()),
        _ => Arc::new(Keyring),
    }
}

/// Whether a variable or header name looks like it holds a secret (`GITHUB_TOKEN`,
/// `API_KEY`, `Authorization`, `DB_PASSWORD`, ...).
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "AUTH",
        "CREDENTIAL",
        "COOKIE",
    ]
    .iter()
    .any(|w| upper.contains(w))
}

/// The keyring entry name `outpost mcp add` uses for a server's value.
pub fn entry_name(server: &str, key: &str) -> String {
    format!("{}{key}", entry_prefix(server))
}

/// What every keyring entry Outpost stores for `server` starts with (`mcp/NAME/`): such an
/// entry is the server's own and goes when the server or its value goes; an entry the user
/// pointed a value at elsewhere is not.
pub fn entry_prefix(server: &str) -> String {
    format!("mcp/{server}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names() {
        for n in [
            "GITHUB_TOKEN",
            "api_key",
            "Authorization",
            "DB_PASSWORD",
            "X-Secret",
        ] {
            assert!(looks_secret(n), "{n}");
        }
        for n in ["PATH", "HOME", "LOG_LEVEL", "X-Request-Id"] {
            assert!(!looks_secret(n), "{n}");
        }
    }
}
