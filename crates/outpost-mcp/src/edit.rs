//! Outpost's own edits of `mcp.toml`: `outpost mcp` and the app's settings pane both write
//! through here, so each write is recorded for [`crate::trust`] (a server changed through
//! Outpost stays confirmed) and a removed server takes its own keyring entries with it.

use std::path::Path;

use crate::{McpConfig, McpError, Result, SecretStore, ServerConfig};

/// Writes `after` (read as `before`) to `path` and records the write in `data_dir`: the
/// servers in `confirmed` (the one just added, edited or confirmed) and those confirmed
/// before stay confirmed.
pub fn save(
    path: &Path,
    data_dir: &Path,
    before: &McpConfig,
    after: &McpConfig,
    confirmed: &[&str],
) -> Result<()> {
    after.save(path)?;
    crate::trust::record_write(data_dir, path, before, after, confirmed)
}

/// A server taken out of `mcp.toml`.
#[derive(Debug)]
pub struct Removed {
    /// Its settings as they were.
    pub server: ServerConfig,
    /// Its own keyring entries that could not be deleted, each with why.
    pub kept_secrets: Vec<(String, McpError)>,
}

/// Removes server `name` from `mcp.toml` at `path` (the write recorded), then deletes the
/// keyring entries that are its own ([`ServerConfig::own_secrets`]). Its OAuth sign-in is
/// the caller's to end first: signing out may revoke at its authorization server
/// ([`crate::oauth::sign_out`]).
pub fn remove(
    path: &Path,
    data_dir: &Path,
    name: &str,
    secrets: &dyn SecretStore,
) -> Result<Removed> {
    let mut cfg = McpConfig::load(path)?;
    let before = cfg.clone();
    let server = cfg
        .servers
        .remove(name)
        .ok_or_else(|| McpError::UnknownServer(name.to_owned()))?;
    save(path, data_dir, &before, &cfg, &[])?;
    let kept_secrets = server
        .own_secrets(name)
        .into_iter()
        .filter_map(|entry| secrets.delete(entry).err().map(|e| (entry.to_owned(), e)))
        .collect();
    Ok(Removed {
        server,
        kept_secrets,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::{ConfigValue, MemorySecrets};

    #[test]
    fn removing_a_server_records_the_write_and_deletes_only_its_own_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.toml");
        let data = dir.path().join("data");
        let store = MemorySecrets::default();
        store.set("mcp/gh/TOKEN", "own").unwrap();
        store.set("shared/TOKEN", "someone else's").unwrap();
        let mut gh = ServerConfig::stdio("gh-server", Vec::new());
        gh.values_mut().insert(
            "TOKEN".into(),
            ConfigValue::Secret {
                secret: "mcp/gh/TOKEN".into(),
            },
        );
        gh.values_mut().insert(
            "OTHER".into(),
            ConfigValue::Secret {
                secret: "shared/TOKEN".into(),
            },
        );
        let before = McpConfig::default();
        let mut cfg = before.clone();
        cfg.servers.insert("gh".into(), gh);
        cfg.servers.insert(
            "time".into(),
            ServerConfig::stdio("time-server", Vec::new()),
        );
        save(&path, &data, &before, &cfg, &["gh", "time"]).unwrap();
        assert!(
            crate::trust::unconfirmed(&data, &path, &cfg)
                .unwrap()
                .is_empty()
        );

        let gone = remove(&path, &data, "gh", &store).unwrap();
        assert_eq!(gone.server.own_secrets("gh"), ["mcp/gh/TOKEN"]);
        assert!(gone.kept_secrets.is_empty());
        assert_eq!(store.get("mcp/gh/TOKEN").unwrap(), None);
        assert_eq!(
            store.get("shared/TOKEN").unwrap().as_deref(),
            Some("someone else's")
        );
        let now = McpConfig::load(&path).unwrap();
        assert_eq!(now.servers.keys().collect::<Vec<_>>(), ["time"]);
        // Outpost's own write: the server left stays confirmed.
        assert!(
            crate::trust::unconfirmed(&data, &path, &now)
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            remove(&path, &data, "gh", &store),
            Err(McpError::UnknownServer(n)) if n == "gh"
        ));
    }
}
