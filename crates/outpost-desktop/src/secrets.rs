//! Secrets (the LiveKit token) in the OS keyring, never in a plain file.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::{DesktopError, Result};

/// The keyring's service name for Outpost's entries.
pub const KEYRING_SERVICE: &str = "dev.outpost.app";

/// The secrets the UI may set (CONTRACT.md `SecretName`).
pub const SECRET_NAMES: &[&str] = &["livekit_token", "livekit_api_secret"];

/// Where secrets live.
pub trait SecretStore: Send + Sync + std::fmt::Debug {
    /// The secret, if set.
    fn get(&self, name: &str) -> Result<Option<String>>;
    /// Stores it.
    fn set(&self, name: &str, value: &str) -> Result<()>;
    /// Deletes it (no error when absent).
    fn delete(&self, name: &str) -> Result<()>;
}

/// The OS keyring (Secret Service on Linux, Keychain on macOS, Credential Manager on
/// Windows).
#[derive(Debug, Default)]
pub struct Keyring;

fn unavailable(e: &keyring::Error) -> DesktopError {
    DesktopError::KeyringUnavailable(format!(
        "The system keyring is not available ({e}). On Linux, install and unlock a Secret \
         Service keyring (GNOME Keyring or KWallet), or use a token endpoint instead of a \
         fixed token."
    ))
}

/// Runs one keyring call on a thread of its own.
///
/// The keyring crate's Secret Service backend makes blocking D-Bus calls (through libdbus;
/// with its zbus backend, used before, they also panicked with "Cannot start a runtime from
/// within a runtime" on a thread driving async tasks). Every async caller, such as the app's
/// async commands and connecting, would stall its runtime thread for as long as the keyring
/// daemon takes (an unlock prompt: indefinitely). A short-lived thread outside any runtime
/// avoids that; keyring calls are rare (a user action, a connect), so the thread costs
/// nothing that matters.
fn off_runtime<T: Send>(call: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .name("outpost-keyring".into())
            .spawn_scoped(s, call)
            .map_err(|e| {
                DesktopError::KeyringUnavailable(format!("cannot start the keyring thread: {e}"))
            })?;
        worker.join().unwrap_or_else(|_| {
            Err(DesktopError::KeyringUnavailable(
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
    fn get(&self, name: &str) -> Result<Option<String>> {
        off_runtime(|| match Self::entry(name)?.get_password() {
            Ok(v) => Ok(Some(v)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(unavailable(&e)),
        })
    }

    fn set(&self, name: &str, value: &str) -> Result<()> {
        off_runtime(|| {
            Self::entry(name)?
                .set_password(value)
                .map_err(|e| unavailable(&e))
        })
    }

    fn delete(&self, name: &str) -> Result<()> {
        off_runtime(|| match Self::entry(name)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(unavailable(&e)),
        })
    }
}

/// Secrets held in memory for one run (tests, and `OUTPOST_SECRETS=memory`).
#[derive(Debug, Default)]
pub struct MemorySecrets {
    values: Mutex<HashMap<String, String>>,
}

impl SecretStore for MemorySecrets {
    fn get(&self, name: &str) -> Result<Option<String>> {
        let g = outpost_sync::lock(&self.values);
        Ok(g.get(name).cloned())
    }

    fn set(&self, name: &str, value: &str) -> Result<()> {
        let mut g = outpost_sync::lock(&self.values);
        g.insert(name.to_owned(), value.to_owned());
        Ok(())
    }

    fn delete(&self, name: &str) -> Result<()> {
        let mut g = outpost_sync::lock(&self.values);
        g.remove(name);
        Ok(())
    }
}

/// Checks a secret's name against [`SECRET_NAMES`].
pub fn check_name(name: &str) -> Result<()> {
    if SECRET_NAMES.contains(&name) {
        Ok(())
    } else {
        Err(DesktopError::invalid(
            "name",
            format!("'{name}' is not a secret Outpost keeps (known: livekit_token)"),
        ))
    }
}
