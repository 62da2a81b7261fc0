//! Which servers of `mcp.toml` the user confirmed.
//!
//! A server is started only when its entry (name and every setting) is one Outpost wrote
//! itself (`outpost mcp add`, the app's Tool servers pane) or the user confirmed
//! (`outpost mcp trust`, the pane's Confirm), as recorded by `outpost-trust` in the data
//! directory. An entry added or changed behind Outpost's back, say by a tool server that
//! can write files, is listed as [`crate::ServerStatus::Unconfirmed`] and never started
//! until the user confirms it. A file the record has never seen is taken as it is the
//! first time it is read (a config from before this record, a new data folder).

use std::path::Path;

use outpost_trust::Trust;

use crate::config::{McpConfig, ServerConfig};
use crate::error::{McpError, Result};
use crate::host::McpHost;

/// What is recorded of one server: its settings as JSON (keyring references, never
/// secret values), in one order.
fn fingerprint(server: &ServerConfig) -> String {
    serde_json::to_string(server).unwrap_or_default()
}

fn open(data_dir: &Path) -> Result<Trust> {
    Trust::open(data_dir).map_err(|e| McpError::Trust(e.to_string()))
}

fn save(trust: &Trust) -> Result<()> {
    trust.save().map_err(|e| McpError::Trust(e.to_string()))
}

/// Why a server is held back, for its state and the CLI.
pub fn unconfirmed_message(name: &str) -> String {
    format!(
        "its entry in mcp.toml was added or changed outside Outpost, so it is not started \
         until you confirm it: check what it runs (`outpost mcp list`), then `outpost mcp \
         trust {name}` (or Confirm in the app's Settings → Tool servers)"
    )
}

/// The servers of `config` (read from `path`) that are not confirmed, without recording
/// anything (a file never seen has none).
pub fn unconfirmed(data_dir: &Path, path: &Path, config: &McpConfig) -> Result<Vec<String>> {
    let trust = open(data_dir)?;
    if !trust.knows(path) {
        return Ok(Vec::new());
    }
    Ok(not_confirmed(&trust, path, config))
}

/// The servers of `config` that `trust` has not confirmed as they are now.
fn not_confirmed(trust: &Trust, path: &Path, config: &McpConfig) -> Vec<String> {
    config
        .servers
        .iter()
        .filter(|(name, server)| !trust.confirmed(path, name, &fingerprint(server)))
        .map(|(name, _)| name.clone())
        .collect()
}

/// [`unconfirmed`], but a file never seen is taken as it is and recorded.
pub fn check(data_dir: &Path, path: &Path, config: &McpConfig) -> Result<Vec<String>> {
    let mut trust = open(data_dir)?;
    if !trust.knows(path) {
        trust.know(path);
        for (name, server) in &config.servers {
            trust.confirm(path, name, &fingerprint(server));
        }
        save(&trust)?;
        return Ok(Vec::new());
    }
    Ok(not_confirmed(&trust, path, config))
}

/// After Outpost wrote `after` to `path`, where it read `before`: the servers named in
/// `confirm` (the one the user just added or edited) are confirmed as they are now, and so
/// is a server that was confirmed in `before` (an edit Outpost made for the user, such as
/// switching it off); a server that was not stays unconfirmed; removed ones are forgotten.
pub fn record_write(
    data_dir: &Path,
    path: &Path,
    before: &McpConfig,
    after: &McpConfig,
    confirm: &[&str],
) -> Result<()> {
    let mut trust = open(data_dir)?;
    let first_sight = !trust.knows(path);
    trust.know(path);
    let was_confirmed = |name: &str| {
        before
            .servers
            .get(name)
            .is_some_and(|s| first_sight || trust.confirmed(path, name, &fingerprint(s)))
    };
    let keep: Vec<(String, String)> = after
        .servers
        .iter()
        .filter(|(name, _)| confirm.contains(&name.as_str()) || was_confirmed(name))
        .map(|(name, server)| (name.clone(), fingerprint(server)))
        .collect();
    trust.retain(path, &|_| false);
    for (name, print) in keep {
        trust.confirm(path, &name, &print);
    }
    save(&trust)
}

/// The user confirms the servers `names` (all of `config` when empty) as they are in
/// `config` now. An unknown name is an error, and nothing is recorded then.
pub fn confirm(data_dir: &Path, path: &Path, config: &McpConfig, names: &[String]) -> Result<()> {
    if let Some(unknown) = names.iter().find(|n| !config.servers.contains_key(*n)) {
        return Err(McpError::UnknownServer(unknown.clone()));
    }
    let mut trust = open(data_dir)?;
    trust.know(path);
    for (name, server) in &config.servers {
        if names.is_empty() || names.contains(name) {
            trust.confirm(path, name, &fingerprint(server));
        }
    }
    save(&trust)
}

/// Starts the confirmed servers of `config` (read from `path`) in `host` and lists the
/// others as unconfirmed, without starting them. Returns the names held back.
pub fn start_confirmed(
    host: &McpHost,
    config: &McpConfig,
    path: &Path,
    data_dir: &Path,
) -> Result<Vec<String>> {
    let held = check(data_dir, path, config)?;
    for (name, server) in &config.servers {
        if held.contains(name) {
            host.hold(name, unconfirmed_message(name))?;
        } else {
            host.start(name, server.clone())?;
        }
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cfg(text: &str) -> McpConfig {
        McpConfig::parse(text).unwrap()
    }

    #[test]
    fn outside_additions_and_changes_wait_and_outpost_s_own_writes_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let path = dir.path().join("mcp.toml");
        let first = cfg("[servers.files]\ncommand = 'npx'\n");
        // First sight: taken as it is.
        assert!(check(&data, &path, &first).unwrap().is_empty());
        // Added and changed behind Outpost's back: held.
        let hacked = cfg("[servers.files]\ncommand = 'sh'\n\n[servers.evil]\ncommand = 'sh'\n");
        assert_eq!(check(&data, &path, &hacked).unwrap(), ["evil", "files"]);
        assert_eq!(
            unconfirmed(&data, &path, &hacked).unwrap(),
            ["evil", "files"]
        );
        // Outpost adds a server for the user: that one is confirmed, the others stay held.
        let mut added = hacked.clone();
        added
            .servers
            .insert("mine".into(), ServerConfig::stdio("node", Vec::new()));
        record_write(&data, &path, &hacked, &added, &["mine"]).unwrap();
        assert_eq!(check(&data, &path, &added).unwrap(), ["evil", "files"]);
        // Switching a confirmed server off through Outpost keeps it confirmed.
        let mut off = added.clone();
        off.servers.get_mut("mine").unwrap().enabled = false;
        record_write(&data, &path, &added, &off, &[]).unwrap();
        assert_eq!(check(&data, &path, &off).unwrap(), ["evil", "files"]);
        // The user confirms one.
        confirm(&data, &path, &off, &["files".to_owned()]).unwrap();
        assert_eq!(check(&data, &path, &off).unwrap(), ["evil"]);
        assert!(matches!(
            confirm(&data, &path, &off, &["nope".to_owned()]),
            Err(McpError::UnknownServer(_))
        ));
        // Removing one forgets it: added back by hand, it waits again.
        let mut removed = off.clone();
        removed.servers.remove("files");
        record_write(&data, &path, &off, &removed, &[]).unwrap();
        assert_eq!(check(&data, &path, &off).unwrap(), ["evil", "files"]);
    }
}
