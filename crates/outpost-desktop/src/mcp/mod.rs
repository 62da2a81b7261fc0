//! The user's MCP servers in the app (docs/MCP.md): the same `mcp.toml` as `outpost
//! connect` (config directory, `$OUTPOST_CONFIG_DIR`), started when a session starts and
//! stopped when it ends. One home for the domain: this module is what the servers are and
//! how `mcp.toml` is shown and edited (list, add, get, update, enable, remove, trust,
//! import); `start` starts them with a session, `elicitation` brings their forms to the
//! user, `sign_in` is the OAuth sign-in of HTTP servers, `sandbox` what a server may
//! touch, `rules` the per-tool rules in the pane; `commands` is [`crate::Desktop`]'s
//! `mcp_*` commands over it and the servers' start and stop with a session.

mod commands;
mod elicitation;
mod rules;
mod sandbox;
mod sign_in;
mod start;

pub(crate) use commands::SessionServers;
pub use elicitation::*;
pub use rules::*;
pub use sandbox::*;
pub use sign_in::*;
pub use start::*;

use outpost_sync::lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::oneshot;

use outpost_mcp::config::{self, McpConfig};
use outpost_mcp::secrets::SecretStore;
use outpost_mcp::{
    ConfigValue, ConnectOptions, Connection, ElicitationAnswer, ElicitationRequest, HostOptions,
    McpError, McpHost, McpTool, Root, ServerConfig, ServerRequests, ServerStatus, Transport,
};
use outpost_policy::{Policy, PolicyStore, Rule};

use crate::contract::{
    AppEvent, ElicitationAction, ElicitationClosed, ElicitationEvent, McpAccess, McpFolderAccess,
    McpGrantKind, McpImportPreview, McpNetwork, McpSandboxGrant, McpSandboxInfo, McpSandboxMode,
    McpSandboxState, McpServerDraft, McpServerInfo, McpServerStatus, McpServerTools, McpSignIn,
    McpToolInfo, McpTransport, ServerClaims, ToolRule,
};
use crate::error::{DesktopError, Result};
use crate::paths::Paths;

/// The end of a server's stderr log that `mcp_servers_log` returns.
pub const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// `mcp.toml` in the app's config directory.
pub fn config_file(paths: &Paths) -> PathBuf {
    config::config_path(&paths.config_dir)
}

fn mcp_err(e: McpError) -> DesktopError {
    match e {
        McpError::UnknownServer(name) => {
            DesktopError::NotFound(format!("There is no tool server named '{name}'."))
        }
        McpError::Invalid { .. } => DesktopError::invalid("server", e.to_string()),
        other => DesktopError::Internal(other.to_string()),
    }
}

fn load(paths: &Paths) -> Result<McpConfig> {
    McpConfig::load(&config_file(paths)).map_err(mcp_err)
}

/// Writes `after` (read as `before`) and records the write: `confirmed` (the server the
/// user just added, edited or confirmed) and the servers confirmed before stay confirmed
/// (outpost_mcp::trust).
fn save(paths: &Paths, before: &McpConfig, after: &McpConfig, confirmed: &[&str]) -> Result<()> {
    outpost_mcp::edit::save(
        &config_file(paths),
        &paths.data_dir,
        before,
        after,
        confirmed,
    )
    .map_err(mcp_err)
}

/// The servers waiting for the user's confirmation (none when the record is unreadable:
/// the session's start tells that).
fn unconfirmed(paths: &Paths, cfg: &McpConfig) -> Vec<String> {
    outpost_mcp::trust::unconfirmed(&paths.data_dir, &config_file(paths), cfg).unwrap_or_default()
}

fn status_of(s: &ServerStatus) -> McpServerStatus {
    match s {
        ServerStatus::Running => McpServerStatus::Running,
        ServerStatus::Starting => McpServerStatus::Starting,
        ServerStatus::Restarting { .. } => McpServerStatus::Crashed,
        ServerStatus::Disabled => McpServerStatus::Disabled,
        ServerStatus::Unconfirmed => McpServerStatus::Unconfirmed,
        ServerStatus::NoSandbox => McpServerStatus::NoSandbox,
        _ => McpServerStatus::Stopped,
    }
}

fn info(
    name: &str,
    cfg: &ServerConfig,
    host: Option<&McpHost>,
    paths: &Paths,
    held: bool,
) -> McpServerInfo {
    let state = host.and_then(|h| h.snapshot().get(name).cloned());
    let (status, tool_count, last_error) = match &state {
        _ if held => (
            McpServerStatus::Unconfirmed,
            0,
            Some(outpost_mcp::trust::unconfirmed_message(name)),
        ),
        Some(st) => (
            status_of(&st.status),
            u32::try_from(st.tools.len()).unwrap_or(u32::MAX),
            st.last_error.clone(),
        ),
        None if cfg.enabled => (McpServerStatus::Stopped, 0, None),
        None => (McpServerStatus::Disabled, 0, None),
    };
    let (transport, has_log) = match &cfg.transport {
        Transport::Stdio { .. } => (McpTransport::Stdio, log_file(paths, name).is_file()),
        Transport::Http { .. } => (McpTransport::Http, false),
    };
    McpServerInfo {
        name: name.to_owned(),
        transport,
        target: cfg.describe(),
        enabled: cfg.enabled,
        status,
        tool_count,
        protocol: state
            .as_ref()
            .filter(|_| !held)
            .and_then(|st| st.protocol_version.clone()),
        last_error,
        has_log,
        // The policy's rule and the sandbox are filled in by the caller (`Desktop`), which
        // holds the policy ([`sandbox_of`]).
        rule: ToolRule::Ask,
        sandbox: None,
        sign_in: None,
    }
}

/// Starts `name` again in a live session (when it is enabled and confirmed); its info.
fn restart_if_running(paths: &Paths, host: Option<&McpHost>, name: &str) -> Result<McpServerInfo> {
    let cfg = load(paths)?;
    let Some(server) = cfg.servers.get(name) else {
        return Err(mcp_err(McpError::UnknownServer(name.to_owned())));
    };
    let held = unconfirmed(paths, &cfg).iter().any(|n| n == name);
    if let Some(h) = host
        && server.enabled
        && !held
    {
        h.start(name, server.clone()).map_err(mcp_err)?;
    }
    Ok(info(name, server, host, paths, held))
}

fn log_file(paths: &Paths, name: &str) -> PathBuf {
    config::log_dir(&paths.data_dir).join(format!("{name}.log"))
}

/// `mcp_servers_list`: every server of `mcp.toml`, with its state in the live session.
pub fn list(paths: &Paths, host: Option<&McpHost>) -> Result<Vec<McpServerInfo>> {
    let cfg = load(paths)?;
    let held = unconfirmed(paths, &cfg);
    Ok(cfg
        .servers
        .iter()
        .map(|(n, c)| info(n, c, host, paths, held.contains(n)))
        .collect())
}

/// `mcp_servers_trust`: the user confirms a server added or changed in `mcp.toml` outside
/// Outpost, as it is now; in a live session an enabled one starts at once.
pub fn trust(paths: &Paths, host: Option<&McpHost>, name: &str) -> Result<McpServerInfo> {
    let cfg = load(paths)?;
    let Some(server) = cfg.servers.get(name) else {
        return Err(mcp_err(McpError::UnknownServer(name.to_owned())));
    };
    outpost_mcp::trust::confirm(
        &paths.data_dir,
        &config_file(paths),
        &cfg,
        &[name.to_owned()],
    )
    .map_err(mcp_err)?;
    if let Some(h) = host {
        h.start(name, server.clone()).map_err(mcp_err)?;
    }
    Ok(info(name, server, host, paths, false))
}

/// Checks a draft and turns it into a server; every value not named in `plain` goes to
/// `secrets` as `mcp/NAME/KEY` (refused when it keeps nothing past this run).
fn draft_config(d: &McpServerDraft, secrets: &dyn SecretStore) -> Result<ServerConfig> {
    config::check_server_name(&d.name).map_err(|e| DesktopError::invalid("name", e.to_string()))?;
    let command = d.command.trim();
    let url = d.url.trim();
    for k in d.env.keys() {
        if k.is_empty() || k.contains(['=', '\0']) || d.env[k].contains('\0') {
            return Err(DesktopError::invalid(
                "env",
                format!("'{k}' is not a usable name"),
            ));
        }
    }
    let mut values = std::collections::BTreeMap::new();
    let mut to_store = Vec::new();
    for (k, v) in &d.env {
        if !d.plain.contains(k) {
            let entry = outpost_mcp::secrets::entry_name(&d.name, k);
            to_store.push((entry.clone(), v.clone()));
            values.insert(k.clone(), ConfigValue::Secret { secret: entry });
        } else {
            values.insert(k.clone(), ConfigValue::Plain(v.clone()));
        }
    }
    let transport = match (command.is_empty(), url.is_empty()) {
        (false, true) => {
            if command.contains('\0') || d.args.iter().any(|a| a.contains('\0')) {
                return Err(DesktopError::invalid("command", "contains a NUL character"));
            }
            Transport::Stdio {
                command: command.to_owned(),
                args: d.args.clone(),
                env: values,
                cwd: (!d.cwd.trim().is_empty()).then(|| PathBuf::from(d.cwd.trim())),
                sandbox: draft_sandbox(d)?,
            }
        }
        (true, false) => {
            config::check_url(url).map_err(|e| DesktopError::invalid("url", e.to_string()))?;
            if !d.read.is_empty() || !d.write.is_empty() {
                return Err(DesktopError::invalid(
                    "sandbox",
                    "folders to read or write are for a command's server: an HTTP server \
                     runs elsewhere",
                ));
            }
            Transport::Http {
                url: url.to_owned(),
                headers: values,
            }
        }
        (false, false) => {
            return Err(DesktopError::invalid(
                "server",
                "give either a command or a URL, not both",
            ));
        }
        (true, true) => {
            return Err(DesktopError::invalid(
                "server",
                "give the command that starts the server, or its URL",
            ));
        }
    };
    if !to_store.is_empty() {
        if !secrets.persistent() {
            return Err(DesktopError::KeyringUnavailable(format!(
                "there is no system keyring to keep the value of {} in; mark a value that \
                 is not secret as plain (written into mcp.toml), or add the server without it",
                to_store
                    .iter()
                    .map(|(e, _)| e.rsplit('/').next().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for (entry, value) in &to_store {
            secrets
                .set(entry, value)
                .map_err(|e| DesktopError::KeyringUnavailable(e.to_string()))?;
        }
    }
    Ok(ServerConfig {
        enabled: d.enabled,
        transport,
        protocol: None,
    })
}

/// `mcp_servers_add`: writes the server into `mcp.toml`; in a live session an enabled
/// server starts at once.
pub fn add(
    paths: &Paths,
    host: Option<&McpHost>,
    secrets: &dyn SecretStore,
    d: &McpServerDraft,
) -> Result<McpServerInfo> {
    let mut cfg = load(paths)?;
    config::check_server_name(&d.name).map_err(|e| DesktopError::invalid("name", e.to_string()))?;
    if cfg.servers.contains_key(&d.name) {
        return Err(DesktopError::invalid(
            "name",
            format!(
                "a tool server named '{}' already exists; remove it first",
                d.name
            ),
        ));
    }
    let before = cfg.clone();
    cfg.servers
        .insert(d.name.clone(), ServerConfig::stdio("-", Vec::new()));
    // A name whose tools could be named like another server's is refused first.
    cfg.check().map_err(|e| DesktopError::invalid("name", e))?;
    let server = draft_config(d, secrets)?;
    cfg.servers.insert(d.name.clone(), server.clone());
    save(paths, &before, &cfg, &[d.name.as_str()])?;
    if let Some(h) = host {
        h.start(&d.name, server.clone()).map_err(mcp_err)?;
    }
    Ok(info(&d.name, &server, host, paths, false))
}

/// A draft with nothing set but its name and whether it is enabled (the sandbox's
/// defaults).
pub fn empty_draft(name: &str, enabled: bool) -> McpServerDraft {
    McpServerDraft {
        name: name.to_owned(),
        command: String::new(),
        args: Vec::new(),
        url: String::new(),
        env: std::collections::BTreeMap::new(),
        plain: Vec::new(),
        cwd: String::new(),
        enabled,
        sandbox: McpSandboxMode::On,
        network: McpNetwork::Auto,
        folders: McpFolderAccess::ReadWrite,
        read: Vec::new(),
        write: Vec::new(),
        reach: None,
    }
}

/// `mcp_servers_get`: a server's settings as the form edits them. A secret value (kept in
/// the keyring) comes back empty, by name only; saving it empty keeps it.
pub fn get(paths: &Paths, name: &str) -> Result<McpServerDraft> {
    let cfg = load(paths)?;
    let Some(server) = cfg.servers.get(name) else {
        return Err(mcp_err(McpError::UnknownServer(name.to_owned())));
    };
    let shown = |m: &std::collections::BTreeMap<String, ConfigValue>| {
        m.iter()
            .map(|(k, v)| match v {
                ConfigValue::Plain(s) => (k.clone(), s.clone()),
                ConfigValue::Secret { .. } => (k.clone(), String::new()),
            })
            .collect()
    };
    let plain = |m: &std::collections::BTreeMap<String, ConfigValue>| {
        m.iter()
            .filter(|(_, v)| matches!(v, ConfigValue::Plain(_)))
            .map(|(k, _)| k.clone())
            .collect()
    };
    let mut draft = match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            sandbox: _,
        } => McpServerDraft {
            name: name.to_owned(),
            command: command.clone(),
            args: args.clone(),
            url: String::new(),
            env: shown(env),
            plain: plain(env),
            cwd: cwd
                .as_ref()
                .map(|c| c.display().to_string())
                .unwrap_or_default(),
            ..empty_draft(name, server.enabled)
        },
        Transport::Http { url, headers } => McpServerDraft {
            url: url.clone(),
            env: shown(headers),
            plain: plain(headers),
            ..empty_draft(name, server.enabled)
        },
    };
    sandbox_fields(&mut draft, server.sandbox());
    Ok(draft)
}

/// `mcp_servers_update`: replaces an existing server's settings (command or URL, arguments,
/// env or headers, working directory, enabled) and, in a live session, restarts it with
/// them. A secret value (any not marked plain) left empty keeps the keyring entry it
/// had; a new value replaces it there; a secret whose name is gone, or now plain, is
/// deleted from the keyring. Nothing secret is written to `mcp.toml`.
pub fn update(
    paths: &Paths,
    host: Option<&McpHost>,
    secrets: &dyn SecretStore,
    d: &McpServerDraft,
) -> Result<McpServerInfo> {
    let mut cfg = load(paths)?;
    let Some(old) = cfg.servers.get(&d.name).cloned() else {
        return Err(mcp_err(McpError::UnknownServer(d.name.clone())));
    };
    let old_values = old.values();
    // Empty values whose entry is already a secret: kept as they are, not written again.
    let mut kept = Vec::new();
    let mut draft = d.clone();
    draft.env.retain(|k, v| {
        if v.is_empty()
            && !d.plain.contains(k)
            && let Some(ConfigValue::Secret { secret }) = old_values.get(k)
        {
            kept.push((k.clone(), secret.clone()));
            return false;
        }
        true
    });
    let mut server = draft_config(&draft, secrets)?;
    // A pinned MCP revision is set in mcp.toml only; the pane's edit keeps it.
    server.protocol = old.protocol.clone();
    let values = server.values_mut();
    for (k, secret) in kept {
        values.insert(k, ConfigValue::Secret { secret });
    }
    let own = outpost_mcp::secrets::entry_prefix(&d.name);
    let gone: Vec<String> = old_values
        .iter()
        .filter_map(|(k, v)| match v {
            ConfigValue::Secret { secret }
                if secret.starts_with(&own)
                    && !matches!(values.get(k), Some(ConfigValue::Secret { secret: s }) if s == secret) =>
            {
                Some(secret.clone())
            }
            _ => None,
        })
        .collect();
    let before = cfg.clone();
    cfg.servers.insert(d.name.clone(), server.clone());
    save(paths, &before, &cfg, &[d.name.as_str()])?;
    for entry in gone {
        if let Err(e) = secrets.delete(&entry) {
            tracing::warn!(entry = %entry, error = %e, "could not delete a keyring entry");
        }
    }
    if let Some(h) = host {
        h.start(&d.name, server.clone()).map_err(mcp_err)?;
    }
    Ok(info(&d.name, &server, host, paths, false))
}

/// `mcp_servers_restart`: stops the server and starts it again with what `mcp.toml` says
/// now. Servers run only in a live session: without one, nothing to restart.
pub fn restart(paths: &Paths, host: Option<&McpHost>, name: &str) -> Result<McpServerInfo> {
    let cfg = load(paths)?;
    let Some(server) = cfg.servers.get(name) else {
        return Err(mcp_err(McpError::UnknownServer(name.to_owned())));
    };
    // Tool servers run only while connected (they start at connect).
    let Some(h) = host else {
        return Err(DesktopError::NotConnected);
    };
    // A server waiting for the user's confirmation is not started by a restart.
    if unconfirmed(paths, &cfg).iter().any(|n| n == name) {
        h.hold(name, outpost_mcp::trust::unconfirmed_message(name))
            .map_err(mcp_err)?;
        return Ok(info(name, server, host, paths, true));
    }
    h.start(name, server.clone()).map_err(mcp_err)?;
    Ok(info(name, server, host, paths, false))
}

/// `mcp_servers_set_enabled`: writes `enabled`; in a live session the server starts or
/// stops at once.
pub fn set_enabled(
    paths: &Paths,
    host: Option<&McpHost>,
    name: &str,
    enabled: bool,
) -> Result<McpServerInfo> {
    let mut cfg = load(paths)?;
    let before = cfg.clone();
    let Some(server) = cfg.servers.get_mut(name) else {
        return Err(mcp_err(McpError::UnknownServer(name.to_owned())));
    };
    server.enabled = enabled;
    let server = server.clone();
    // Switching a server on or off does not confirm it.
    save(paths, &before, &cfg, &[])?;
    let held = unconfirmed(paths, &cfg).iter().any(|n| n == name);
    if let Some(h) = host {
        if held {
            h.hold(name, outpost_mcp::trust::unconfirmed_message(name))
                .map_err(mcp_err)?;
        } else {
            h.start(name, server.clone()).map_err(mcp_err)?;
        }
    }
    Ok(info(name, &server, host, paths, held))
}

/// `mcp_servers_remove`: stops the server, removes it from `mcp.toml` and deletes the
/// keyring entries made for it (`mcp/NAME/...`).
pub fn remove(
    paths: &Paths,
    host: Option<&McpHost>,
    secrets: &dyn SecretStore,
    name: &str,
) -> Result<()> {
    let gone = outpost_mcp::edit::remove(&config_file(paths), &paths.data_dir, name, secrets)
        .map_err(mcp_err)?;
    if let Some(h) = host {
        let _ = h.remove(name);
    }
    for (entry, e) in gone.kept_secrets {
        tracing::warn!(entry = %entry, error = %e, "could not delete a keyring entry");
    }
    // Its OAuth sign-in too (revoked first by `Desktop::mcp_server_remove`).
    if let Err(e) = secrets.delete(&outpost_mcp::oauth::credentials_entry(name)) {
        tracing::warn!(server = %name, error = %e, "could not delete the sign-in");
    }
    Ok(())
}

/// `mcp_servers_log`: the end of a server's stderr log (empty when it has none yet).
pub fn log(paths: &Paths, name: &str) -> Result<String> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    if !load(paths)?.servers.contains_key(name) {
        return Err(mcp_err(McpError::UnknownServer(name.to_owned())));
    }
    let file = log_file(paths, name);
    let mut f = match std::fs::File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(source) => {
            return Err(DesktopError::Io {
                action: "read",
                path: file.display().to_string(),
                source,
            });
        }
    };
    let io = |source| DesktopError::Io {
        action: "read",
        path: file.display().to_string(),
        source,
    };
    let len = f.metadata().map_err(io)?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))
        .map_err(io)?;
    let mut buf = Vec::new();
    f.take(LOG_TAIL_BYTES).read_to_end(&mut buf).map_err(io)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    // Start at a whole line when the tail was cut.
    Ok(if len > LOG_TAIL_BYTES {
        text.split_once('\n')
            .map_or(text.clone(), |(_, r)| r.to_owned())
    } else {
        text
    })
}

/// `mcp_servers_import_preview`: reads a Claude Desktop config for the review step;
/// nothing is written or started. Names already configured are skipped.
pub fn import_preview(paths: &Paths, text: &str) -> Result<McpImportPreview> {
    let existing = load(paths)?;
    let got = outpost_mcp::import::claude_desktop(text)
        .map_err(|e| DesktopError::invalid("file", e.to_string()))?;
    let mut skipped = got.skipped;
    let mut servers = Vec::new();
    for (name, cfg) in got.servers {
        if existing.servers.contains_key(&name) {
            skipped.push(format!(
                "'{name}': a tool server with this name already exists"
            ));
            continue;
        }
        let plain = |m: &std::collections::BTreeMap<String, ConfigValue>| {
            m.iter()
                .filter_map(|(k, v)| match v {
                    ConfigValue::Plain(s) => Some((k.clone(), s.clone())),
                    ConfigValue::Secret { .. } => None,
                })
                .collect()
        };
        let (command, args, url, env, cwd) = match &cfg.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
                sandbox: _,
            } => (
                command.clone(),
                args.clone(),
                String::new(),
                plain(env),
                cwd.as_ref()
                    .map(|c| c.display().to_string())
                    .unwrap_or_default(),
            ),
            Transport::Http { url, headers } => (
                String::new(),
                Vec::new(),
                url.clone(),
                plain(headers),
                String::new(),
            ),
        };
        // Every value of an import goes to the keyring, as for a server added by hand;
        // the review step may mark some plain.
        let mut draft = McpServerDraft {
            command,
            args,
            url,
            env,
            cwd,
            ..empty_draft(&name, cfg.enabled)
        };
        sandbox_fields(&mut draft, cfg.sandbox());
        servers.push(draft);
    }
    Ok(McpImportPreview { servers, skipped })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use outpost_mcp::MemorySecrets;

    fn paths() -> (tempfile::TempDir, Paths) {
        let dir = tempfile::tempdir().unwrap();
        let p = Paths {
            config_dir: dir.path().join("config"),
            data_dir: dir.path().join("data"),
        };
        std::fs::create_dir_all(&p.config_dir).unwrap();
        (dir, p)
    }

    fn draft(name: &str, command: &str, url: &str) -> McpServerDraft {
        McpServerDraft {
            command: command.into(),
            args: vec!["-y".into(), "srv".into()],
            url: url.into(),
            ..empty_draft(name, true)
        }
    }

    #[test]
    fn add_list_disable_log_remove() {
        let (_d, p) = paths();
        let secrets = MemorySecrets::default();
        assert!(list(&p, None).unwrap().is_empty());
        let a = add(&p, None, &secrets, &draft("everything", "npx", "")).unwrap();
        assert_eq!(
            (a.status, a.transport, a.target.as_str()),
            (McpServerStatus::Stopped, McpTransport::Stdio, "npx -y srv")
        );
        add(
            &p,
            None,
            &secrets,
            &draft("remote", "", "http://127.0.0.1:9/mcp"),
        )
        .unwrap();
        let names: Vec<String> = list(&p, None)
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["everything", "remote"]);
        // Written to mcp.toml, the same file `outpost mcp` and `outpost connect` read.
        let cfg = McpConfig::load(&config_file(&p)).unwrap();
        assert_eq!(cfg.servers["remote"].describe(), "http://127.0.0.1:9/mcp");
        let off = set_enabled(&p, None, "everything", false).unwrap();
        assert_eq!(
            (off.enabled, off.status),
            (false, McpServerStatus::Disabled)
        );
        assert!(!McpConfig::load(&config_file(&p)).unwrap().servers["everything"].enabled);
        assert_eq!(log(&p, "everything").unwrap(), "");
        let dir = config::log_dir(&p.data_dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut big = "x".repeat(usize::try_from(LOG_TAIL_BYTES).unwrap());
        big.push_str("\nlast line\n");
        std::fs::write(dir.join("everything.log"), format!("--- started\n{big}")).unwrap();
        assert_eq!(log(&p, "everything").unwrap(), "last line\n");
        assert!(list(&p, None).unwrap()[0].has_log);
        remove(&p, None, &secrets, "everything").unwrap();
        assert_eq!(list(&p, None).unwrap().len(), 1);
    }

    /// An in-memory store that says it persists, standing in for the OS keyring.
    #[derive(Debug, Default)]
    struct FakeKeyring(MemorySecrets);
    impl SecretStore for FakeKeyring {
        fn get(&self, entry: &str) -> outpost_mcp::Result<Option<String>> {
            self.0.get(entry)
        }
        fn set(&self, entry: &str, value: &str) -> outpost_mcp::Result<()> {
            self.0.set(entry, value)
        }
        fn delete(&self, entry: &str) -> outpost_mcp::Result<()> {
            self.0.delete(entry)
        }
        fn persistent(&self) -> bool {
            true
        }
    }

    #[test]
    fn edit_keeps_replaces_and_deletes_secrets_never_writing_them_to_the_file() {
        let (_d, p) = paths();
        let keyring = FakeKeyring::default();
        let toml = || std::fs::read_to_string(config_file(&p)).unwrap();
        let mut d = draft("gh", "npx", "");
        d.env.insert("GITHUB_TOKEN".into(), "s3cret-one".into());
        d.env.insert("LOG_LEVEL".into(), "debug".into());
        d.plain.push("LOG_LEVEL".into());
        add(&p, None, &keyring, &d).unwrap();
        assert_eq!(
            keyring.get("mcp/gh/GITHUB_TOKEN").unwrap().as_deref(),
            Some("s3cret-one")
        );
        assert!(!toml().contains("s3cret"), "{}", toml());

        // The form gets the secret by name only.
        let mut form = get(&p, "gh").unwrap();
        assert_eq!(form.env["GITHUB_TOKEN"], "");
        assert_eq!(form.env["LOG_LEVEL"], "debug");
        assert_eq!(form.args, ["-y", "srv"]);

        // Saved with the secret left empty: kept; the other changes are written.
        form.args = vec!["--stdio".into()];
        form.env.insert("LOG_LEVEL".into(), "info".into());
        let info = update(&p, None, &keyring, &form).unwrap();
        assert_eq!(info.target, "npx --stdio");
        assert_eq!(
            keyring.get("mcp/gh/GITHUB_TOKEN").unwrap().as_deref(),
            Some("s3cret-one")
        );
        let cfg = McpConfig::load(&config_file(&p)).unwrap();
        let Transport::Stdio { env, .. } = &cfg.servers["gh"].transport else {
            panic!()
        };
        assert_eq!(env["LOG_LEVEL"], ConfigValue::Plain("info".into()));
        assert_eq!(
            env["GITHUB_TOKEN"],
            ConfigValue::Secret {
                secret: "mcp/gh/GITHUB_TOKEN".into()
            }
        );

        // A new value replaces it in the keyring, still not in the file.
        form.env.insert("GITHUB_TOKEN".into(), "s3cret-two".into());
        update(&p, None, &keyring, &form).unwrap();
        assert_eq!(
            keyring.get("mcp/gh/GITHUB_TOKEN").unwrap().as_deref(),
            Some("s3cret-two")
        );
        assert!(!toml().contains("s3cret"), "{}", toml());

        // Removed from the form: deleted from the keyring.
        form.env.remove("GITHUB_TOKEN");
        update(&p, None, &keyring, &form).unwrap();
        assert_eq!(keyring.get("mcp/gh/GITHUB_TOKEN").unwrap(), None);

        // An HTTP server's headers the same way.
        let mut web = draft("web", "", "http://127.0.0.1:9/mcp");
        web.args.clear();
        web.env
            .insert("Authorization".into(), "Bearer s3cret-h".into());
        add(&p, None, &keyring, &web).unwrap();
        let mut form = get(&p, "web").unwrap();
        assert_eq!(form.env["Authorization"], "");
        form.url = "http://127.0.0.1:10/mcp".into();
        update(&p, None, &keyring, &form).unwrap();
        assert_eq!(
            keyring.get("mcp/web/Authorization").unwrap().as_deref(),
            Some("Bearer s3cret-h")
        );
        assert!(!toml().contains("s3cret"), "{}", toml());

        // Unknown servers, and a restart with no session.
        let code = |r: Result<McpServerInfo>| r.unwrap_err().code();
        assert_eq!(
            code(update(&p, None, &keyring, &draft("nope", "npx", ""))),
            "not_found"
        );
        assert_eq!(get(&p, "nope").unwrap_err().code(), "not_found");
        assert_eq!(code(restart(&p, None, "nope")), "not_found");
        assert_eq!(code(restart(&p, None, "gh")), "not_connected");
        // A bad edit is refused and the file stays as it was.
        let before = toml();
        let mut bad = get(&p, "gh").unwrap();
        bad.url = "http://x/mcp".into();
        assert_eq!(code(update(&p, None, &keyring, &bad)), "invalid_argument");
        assert_eq!(toml(), before);
    }

    #[test]
    fn every_value_goes_to_the_keyring_unless_marked_plain() {
        let (_d, p) = paths();
        let keyring = FakeKeyring::default();
        let toml = || std::fs::read_to_string(config_file(&p)).unwrap();
        let mut d = draft("gh", "npx", "");
        d.env
            .insert("GH_PAT".into(), "innocent-looking-s3cret".into());
        d.env.insert("LOG_LEVEL".into(), "debug".into());
        d.plain.push("LOG_LEVEL".into());
        // A plain name not in `env` means nothing.
        d.plain.push("NOT_SET".into());
        add(&p, None, &keyring, &d).unwrap();
        assert_eq!(
            keyring.get("mcp/gh/GH_PAT").unwrap().as_deref(),
            Some("innocent-looking-s3cret")
        );
        assert!(!toml().contains("innocent-looking"), "{}", toml());
        assert!(toml().contains("LOG_LEVEL = \"debug\""), "{}", toml());
        assert_eq!(keyring.get("mcp/gh/LOG_LEVEL").unwrap(), None);
        let form = get(&p, "gh").unwrap();
        assert_eq!(form.env["GH_PAT"], "");
        assert_eq!(form.plain, ["LOG_LEVEL"]);
        // Marked plain on edit: written to the file, and the keyring entry goes.
        let mut edit = form.clone();
        edit.env.insert("GH_PAT".into(), "now-plain".into());
        edit.plain.push("GH_PAT".into());
        update(&p, None, &keyring, &edit).unwrap();
        assert!(toml().contains("GH_PAT = \"now-plain\""), "{}", toml());
        assert_eq!(keyring.get("mcp/gh/GH_PAT").unwrap(), None);
        // And back to secret.
        let mut edit = get(&p, "gh").unwrap();
        edit.plain.retain(|n| n != "GH_PAT");
        edit.env.insert("GH_PAT".into(), "secret-again".into());
        update(&p, None, &keyring, &edit).unwrap();
        assert!(!toml().contains("secret-again"), "{}", toml());
        assert_eq!(
            keyring.get("mcp/gh/GH_PAT").unwrap().as_deref(),
            Some("secret-again")
        );
        // Without a keyring that keeps values: refused, naming the value, not showing it.
        let mut e = draft("web", "", "http://127.0.0.1:9/mcp");
        e.args.clear();
        e.env.insert("X-Team".into(), "team-s3cret".into());
        let err = add(&p, None, &MemorySecrets::default(), &e).unwrap_err();
        assert_eq!(err.code(), "keyring_unavailable");
        assert!(err.to_string().contains("X-Team") && !err.to_string().contains("team-s3cret"));
    }

    fn tool(server: &str, name: &str, read_only: Option<bool>) -> McpTool {
        McpTool {
            server: server.into(),
            name: name.into(),
            outpost_name: outpost_mcp::naming::tool_name(server, name),
            title: None,
            description: format!("{name} things"),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            hints: outpost_mcp::ToolHints {
                read_only,
                ..outpost_mcp::ToolHints::default()
            },
        }
    }

    #[tokio::test]
    async fn per_tool_rules_are_written_under_tools_and_deny_wins() {
        let (_d, p) = paths();
        add(&p, None, &MemorySecrets::default(), &draft("ev", "npx", "")).unwrap();
        let store = PolicyStore::open(
            p.config_dir.join("policy.toml"),
            outpost_policy::PolicyContext::new(p.config_dir.clone(), Vec::new()),
        )
        .unwrap();
        let lists = ToolLists::default();
        lists.remember(
            "ev",
            Arc::new(vec![
                tool("ev", "echo", Some(true)),
                tool("ev", "get-sum", None),
            ]),
        );
        let got = lists
            .tools(&p, None, &store, "ev", false, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(got.server_rule, ToolRule::Ask);
        assert_eq!(got.problem, None);
        let names: Vec<&str> = got.tools.iter().map(|t| t.outpost_name.as_str()).collect();
        assert_eq!(names, ["mcp__ev__echo", "mcp__ev__get-sum"]);
        assert_eq!(got.tools[0].claims.and_then(|c| c.read_only), Some(true));
        assert_eq!(got.tools[1].claims, None, "no claims: none shown");
        assert!(
            got.tools
                .iter()
                .all(|t| t.rule.is_none() && t.effective == ToolRule::Ask)
        );

        // Allow one tool: written under [tools] by its Outpost name.
        let got = lists
            .set_rule(
                &p,
                None,
                &store,
                "ev",
                "mcp__ev__echo",
                Some(ToolRule::Allow),
            )
            .unwrap();
        assert_eq!(
            (got.tools[0].rule, got.tools[0].effective),
            (Some(ToolRule::Allow), ToolRule::Allow)
        );
        let file = std::fs::read_to_string(p.config_dir.join("policy.toml")).unwrap();
        let policy =
            outpost_policy::parse_policy(&p.config_dir.join("policy.toml"), &file).unwrap();
        assert_eq!(policy.tools.get("mcp__ev__echo"), Some(&Rule::Allow));
        // The server's deny wins over the tool's allow.
        store
            .update(|p| {
                p.mcp_servers.insert("ev".into(), Rule::Deny);
            })
            .unwrap();
        let got = lists
            .tools(&p, None, &store, "ev", false, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(got.server_rule, ToolRule::Deny);
        assert_eq!(
            (got.tools[0].rule, got.tools[0].effective),
            (Some(ToolRule::Allow), ToolRule::Deny)
        );
        // A tool's deny wins over the server's allow; none again follows the server.
        store
            .update(|p| {
                p.mcp_servers.insert("ev".into(), Rule::Allow);
            })
            .unwrap();
        let got = lists
            .set_rule(
                &p,
                None,
                &store,
                "ev",
                "mcp__ev__get-sum",
                Some(ToolRule::Deny),
            )
            .unwrap();
        assert_eq!(got.tools[1].effective, ToolRule::Deny);
        assert_eq!(got.tools[0].effective, ToolRule::Allow);
        let got = lists
            .set_rule(&p, None, &store, "ev", "mcp__ev__echo", None)
            .unwrap();
        assert_eq!(
            (got.tools[0].rule, got.tools[0].effective),
            (None, ToolRule::Allow)
        );
        assert!(!store.current().policy().tools.contains_key("mcp__ev__echo"));

        // A rule for a tool the server does not list is shown, not hidden.
        store
            .update(|p| {
                p.tools.insert("mcp__ev__gone".into(), Rule::Ask);
                p.tools.insert("mcp__other__x".into(), Rule::Deny);
            })
            .unwrap();
        let got = lists
            .tools(&p, None, &store, "ev", false, Duration::from_secs(1))
            .await
            .unwrap();
        let gone = got
            .tools
            .iter()
            .find(|t| t.outpost_name == "mcp__ev__gone")
            .unwrap();
        assert_eq!(
            (gone.name.as_str(), gone.offered, gone.effective),
            ("gone", false, ToolRule::Ask)
        );
        assert!(
            got.tools
                .iter()
                .all(|t| t.outpost_name.starts_with("mcp__ev__"))
        );

        // Bad input: unknown server, a tool of another server, not a tool name.
        for (server, tool) in [
            ("nope", "mcp__nope__x"),
            ("ev", "mcp__other__x"),
            ("ev", "mcp__ev__"),
            ("ev", "mcp__ev__a b"),
            ("ev", "echo"),
        ] {
            let e = lists
                .set_rule(&p, None, &store, server, tool, Some(ToolRule::Allow))
                .unwrap_err();
            assert!(
                ["not_found", "invalid_argument"].contains(&e.code()),
                "{server} {tool}"
            );
        }
        assert!(
            lists
                .tools(&p, None, &store, "nope", false, Duration::from_secs(1))
                .await
                .is_err()
        );
        // A server that cannot start: the rules only, and why.
        add(
            &p,
            None,
            &MemorySecrets::default(),
            &draft("broken", "/nonexistent/srv", ""),
        )
        .unwrap();
        let got = lists
            .tools(&p, None, &store, "broken", true, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(got.tools.is_empty());
        assert!(got.problem.is_some_and(|m| m.contains("did not list")));
    }

    #[test]
    fn bad_input_is_refused_and_nothing_is_written() {
        let (_d, p) = paths();
        let secrets = MemorySecrets::default();
        let code = |r: Result<McpServerInfo>| r.unwrap_err().code();
        let long = "n".repeat(33);
        for (name, command, url) in [
            ("", "npx", ""),
            ("a b", "npx", ""),
            ("a__b", "npx", ""),
            (long.as_str(), "npx", ""),
            ("x", "", ""),
            ("x", "npx", "http://h.invalid/"),
            ("x", "", "ftp://h.invalid/"),
            ("x", "", "not a url"),
            ("x", "np\0x", ""),
        ] {
            assert_eq!(
                code(add(&p, None, &secrets, &draft(name, command, url))),
                "invalid_argument",
                "{name:?} {command:?} {url:?}"
            );
        }
        let mut bad_env = draft("x", "npx", "");
        bad_env.env.insert("A=B".into(), "v".into());
        assert_eq!(code(add(&p, None, &secrets, &bad_env)), "invalid_argument");
        // A secret-looking value needs a keyring that keeps it.
        let mut secret = draft("x", "npx", "");
        secret.env.insert("GITHUB_TOKEN".into(), "t0ken".into());
        let e = add(&p, None, &secrets, &secret).unwrap_err();
        assert_eq!(e.code(), "keyring_unavailable");
        assert!(!e.to_string().contains("t0ken"), "{e}");
        assert!(!config_file(&p).exists(), "nothing may be written");
        add(&p, None, &secrets, &draft("x", "npx", "")).unwrap();
        assert_eq!(
            code(add(&p, None, &secrets, &draft("x", "npx", ""))),
            "invalid_argument"
        );
        // Issue 30, finding 10: `x_` beside `x` could name its tools like x's.
        let e = add(&p, None, &secrets, &draft("x_", "npx", "")).unwrap_err();
        assert_eq!(e.code(), "invalid_argument");
        assert!(e.to_string().contains("mcp__x___x"), "{e}");
        assert_eq!(code(set_enabled(&p, None, "nope", true)), "not_found");
        assert_eq!(
            remove(&p, None, &secrets, "nope").unwrap_err().code(),
            "not_found"
        );
        assert_eq!(log(&p, "nope").unwrap_err().code(), "not_found");
        assert_eq!(log(&p, "../../etc/passwd").unwrap_err().code(), "not_found");
        // A broken mcp.toml is reported, not overwritten.
        std::fs::write(config_file(&p), "[servers.x]\ncommand = 5\n").unwrap();
        assert!(list(&p, None).is_err());
        assert!(add(&p, None, &secrets, &draft("y", "npx", "")).is_err());
        assert_eq!(
            std::fs::read_to_string(config_file(&p)).unwrap(),
            "[servers.x]\ncommand = 5\n"
        );
    }

    #[test]
    fn import_preview_reviews_without_writing() {
        let (_d, p) = paths();
        let secrets = MemorySecrets::default();
        add(&p, None, &secrets, &draft("time", "uvx", "")).unwrap();
        let before = std::fs::read_to_string(config_file(&p)).unwrap();
        let text = r#"{"mcpServers": {
            "time": {"command": "uvx", "args": ["mcp-server-time"]},
            "fs": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"], "cwd": "/tmp", "env": {"MODE": "ro"}},
            "remote": {"url": "https://mcp.example.invalid/mcp", "headers": {"X-A": "b"}},
            "bad": {"args": []}
        }}"#;
        let got = import_preview(&p, text).unwrap();
        let names: Vec<&str> = got.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs", "remote"]);
        assert_eq!(got.servers[0].cwd, "/tmp");
        assert_eq!(got.servers[0].env["MODE"], "ro");
        assert_eq!(got.servers[1].url, "https://mcp.example.invalid/mcp");
        assert_eq!(got.skipped.len(), 2, "{:?}", got.skipped);
        assert!(
            got.skipped
                .iter()
                .any(|s| s.contains("'time'") && s.contains("already exists"))
        );
        assert_eq!(std::fs::read_to_string(config_file(&p)).unwrap(), before);
        for bad in ["", "{", "[]", "{\"mcpServers\": 3}"] {
            assert_eq!(
                import_preview(&p, bad).unwrap_err().code(),
                "invalid_argument",
                "{bad}"
            );
        }
        // The reviewed drafts are what `add` takes: every value to the keyring (refused
        // without one), unless the review marks it plain.
        assert!(got.servers[0].plain.is_empty());
        assert_eq!(
            add(&p, None, &secrets, &got.servers[0]).unwrap_err().code(),
            "keyring_unavailable"
        );
        let mut fs = got.servers[0].clone();
        fs.plain.push("MODE".into());
        let info = add(&p, None, &secrets, &fs).unwrap();
        assert_eq!(info.target, "npx -y server-filesystem /tmp");
    }

    /// Issue 30, finding 3: a server written into `mcp.toml` behind Outpost's back is
    /// listed as unconfirmed and not started (at connect, by a restart, or to list its
    /// tools) until the user confirms it in the pane; servers Outpost wrote are unaffected.
    #[tokio::test]
    async fn a_server_added_outside_outpost_waits_for_the_users_confirmation() {
        let (dir, p) = paths();
        let secrets = outpost_mcp::MemorySecrets::default();
        add(&p, None, &secrets, &draft("mine", "true", "")).unwrap();
        let marker = dir.path().join("ran");
        let mut text = std::fs::read_to_string(config_file(&p)).unwrap();
        text.push_str(&format!(
            // Unsandboxed, so that its marker shows whether it ran at all.
            "\n[servers.sneaky]\ncommand = \"sh\"\nargs = [\"-c\", \"touch '{}'; sleep 30\"]\nsandbox = \"off\"\n",
            marker.display()
        ));
        std::fs::write(config_file(&p), text).unwrap();
        let status = |list: &[McpServerInfo], name: &str| {
            list.iter().find(|i| i.name == name).map(|i| i.status)
        };
        let listed = list(&p, None).unwrap();
        assert_eq!(
            status(&listed, "sneaky"),
            Some(McpServerStatus::Unconfirmed)
        );
        assert_eq!(status(&listed, "mine"), Some(McpServerStatus::Stopped));
        let started = start(
            &p,
            Vec::new(),
            outpost_mcp::SandboxOptions::default(),
            Arc::new(outpost_mcp::DefaultRequests),
            Duration::from_millis(300),
        )
        .await;
        let host = started.host.unwrap();
        assert!(
            started
                .problems
                .iter()
                .any(|m| m.contains("'sneaky' was added or changed outside Outpost")),
            "{:?}",
            started.problems
        );
        assert_eq!(
            status(&list(&p, Some(&host)).unwrap(), "sneaky"),
            Some(McpServerStatus::Unconfirmed)
        );
        restart(&p, Some(&host), "sneaky").unwrap();
        let lists = ToolLists::default();
        let store = PolicyStore::in_memory(
            Policy::default(),
            outpost_policy::PolicyContext::new(dir.path(), Vec::new()),
        );
        let tools = lists
            .tools(
                &p,
                Some(&host),
                &store,
                "sneaky",
                true,
                Duration::from_secs(2),
            )
            .await
            .unwrap();
        assert!(tools.problem.unwrap_or_default().contains("not started"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!marker.exists(), "an unconfirmed server ran");
        let info = trust(&p, Some(&host), "sneaky").unwrap();
        assert_ne!(info.status, McpServerStatus::Unconfirmed);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !marker.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the confirmed server never ran"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(trust(&p, None, "nope").unwrap_err().code(), "not_found");
        host.shutdown();
    }

    /// A UI answerer whose events are kept, with this form timeout.
    fn recording_ui(timeout: Duration) -> (UiRequests, Arc<Mutex<Vec<AppEvent>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let ui = UiRequests {
            pending: Arc::new(Elicitations::default()),
            emit: Arc::new(move |e| sink.lock().unwrap().push(e)),
            timeout,
        };
        (ui, events)
    }

    /// Issue 30: open forms are bounded. One server may hold at most
    /// `MAX_FORMS_PER_SERVER` open and all of them `MAX_FORMS`; the rest are declined at
    /// once, never shown; a slot frees when a form is answered.
    #[tokio::test]
    async fn open_forms_are_bounded_per_server_and_in_all() {
        let (ui, events) = recording_ui(Duration::from_secs(30));
        let form = || ElicitationRequest::Form {
            message: "?".into(),
            requested_schema: serde_json::json!({"type": "object"}),
        };
        let ask = |server: String| {
            let ui = ui.clone();
            let req = form();
            tokio::spawn(async move { ui.elicit(&server, req).await })
        };
        // One server asks 10 times: MAX_FORMS_PER_SERVER open, the rest declined at once.
        let mut greedy: Vec<_> = (0..10).map(|_| ask("greedy".into())).collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut declined = 0;
        while declined < 10 - MAX_FORMS_PER_SERVER {
            assert!(std::time::Instant::now() < deadline, "{declined} declined");
            let mut still = Vec::new();
            for h in greedy {
                if h.is_finished() {
                    assert_eq!(h.await.unwrap(), ElicitationAnswer::Decline);
                    declined += 1;
                } else {
                    still.push(h);
                }
            }
            greedy = still;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(ui.pending.open_count(), MAX_FORMS_PER_SERVER);
        // Many servers: MAX_FORMS open in all.
        let others: Vec<_> = (0..40).map(|i| ask(format!("s{}", i % 20))).collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(ui.pending.open_count(), MAX_FORMS);
        let shown = events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, AppEvent::Elicitation(_)))
            .count();
        assert_eq!(shown, MAX_FORMS, "only the open forms are shown");
        // Closing them all answers every waiting server (cancel); all slots free.
        assert_eq!(ui.pending.close_all().len(), MAX_FORMS);
        for h in greedy.into_iter().chain(others) {
            let a = h.await.unwrap();
            assert!(matches!(
                a,
                ElicitationAnswer::Cancel | ElicitationAnswer::Decline
            ));
        }
        assert_eq!(ui.pending.open_count(), 0);
    }

    /// A call that gives up on its question (its timeout, the user's Stop: the asking
    /// future is dropped) closes the form and frees its slot; before, it stayed on screen
    /// and, four times over, made every later form of that server declined unasked.
    #[tokio::test]
    async fn a_form_whose_call_gave_up_is_closed_and_its_slot_freed() {
        let (ui, events) = recording_ui(Duration::from_secs(300));
        for round in 0..2 * MAX_FORMS_PER_SERVER {
            let asking = {
                let ui = ui.clone();
                tokio::spawn(async move {
                    ui.elicit(
                        "srv",
                        ElicitationRequest::Form {
                            message: "?".into(),
                            requested_schema: serde_json::json!({"type": "object"}),
                        },
                    )
                    .await
                })
            };
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while ui.pending.open_count() == 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "round {round}: no form opened (declined unasked?)"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            asking.abort();
            let _ = asking.await;
            assert_eq!(ui.pending.open_count(), 0, "round {round}");
        }
        let (opened, closed) = events
            .lock()
            .unwrap()
            .iter()
            .fold((0, 0), |(o, c), e| match e {
                AppEvent::Elicitation(_) => (o + 1, c),
                AppEvent::ElicitationClosed(_) => (o, c + 1),
                _ => (o, c),
            });
        assert_eq!(
            (opened, closed),
            (2 * MAX_FORMS_PER_SERVER, 2 * MAX_FORMS_PER_SERVER)
        );
    }

    #[tokio::test]
    async fn an_elicitation_waits_for_the_users_answer_or_times_out() {
        let (ui, events) = recording_ui(Duration::from_secs(5));
        let schema =
            serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}});
        let form = move || ElicitationRequest::Form {
            message: "Your name?".into(),
            requested_schema: schema.clone(),
        };
        let asking = tokio::spawn({
            let ui = ui.clone();
            let req = form();
            async move { ui.elicit("everything", req).await }
        });
        let id = loop {
            if let Some(AppEvent::Elicitation(e)) = events.lock().unwrap().first().cloned() {
                assert_eq!(
                    (e.server.as_str(), e.message.as_str()),
                    ("everything", "Your name?")
                );
                break e.id;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        // A bad action ("maybe") is refused when the command's argument is read
        // (tests/contract_ts.rs); here, an unknown form.
        assert_eq!(
            ui.pending
                .answer("nope", ElicitationAction::Decline, None)
                .unwrap_err()
                .code(),
            "not_found"
        );
        let mut content = Map::new();
        content.insert("name".into(), "Ada".into());
        ui.pending
            .answer(&id, ElicitationAction::Accept, Some(content.clone()))
            .unwrap();
        assert_eq!(
            asking.await.unwrap(),
            ElicitationAnswer::Accept(Some(content))
        );
        assert!(
            matches!(events.lock().unwrap().last(), Some(AppEvent::ElicitationClosed(c)) if c.id == id)
        );
        assert_eq!(
            ui.pending
                .answer(&id, ElicitationAction::Accept, None)
                .unwrap_err()
                .code(),
            "not_found"
        );
        // Decline and cancel reach the server as they are.
        for (round, (action, want)) in [
            (ElicitationAction::Decline, ElicitationAnswer::Decline),
            (ElicitationAction::Cancel, ElicitationAnswer::Cancel),
        ]
        .into_iter()
        .enumerate()
        {
            let asking = tokio::spawn({
                let ui = ui.clone();
                let req = form();
                async move { ui.elicit("everything", req).await }
            });
            let id = loop {
                let asked: Vec<String> = events
                    .lock()
                    .unwrap()
                    .iter()
                    .filter_map(|e| match e {
                        AppEvent::Elicitation(e) => Some(e.id.clone()),
                        _ => None,
                    })
                    .collect();
                if asked.len() == round + 2 {
                    break asked[round + 1].clone();
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            ui.pending.answer(&id, action, None).unwrap();
            assert_eq!(asking.await.unwrap(), want);
        }
        // Nobody answers: cancelled at the timeout. A form without a schema is declined.
        let quick = UiRequests {
            timeout: Duration::from_millis(50),
            ..ui.clone()
        };
        assert_eq!(
            quick.elicit("everything", form()).await,
            ElicitationAnswer::Cancel
        );
        assert_eq!(quick.pending.open_count(), 0);
        let not_form = ElicitationRequest::Form {
            message: "x".into(),
            requested_schema: Value::Bool(true),
        };
        assert_eq!(
            quick.elicit("everything", not_form).await,
            ElicitationAnswer::Decline
        );

        // URL mode: shown with its URL and no schema; accepting carries no content.
        let asking = tokio::spawn({
            let ui = ui.clone();
            async move {
                ui.elicit(
                    "everything",
                    ElicitationRequest::Url {
                        message: "Sign in".into(),
                        url: "https://example.com/auth?x=1".into(),
                        elicitation_id: "e1".into(),
                    },
                )
                .await
            }
        });
        let (id, url, schema_empty) = loop {
            let found = events.lock().unwrap().iter().find_map(|e| match e {
                AppEvent::Elicitation(e) if e.url.is_some() => {
                    Some((e.id.clone(), e.url.clone(), e.schema.is_empty()))
                }
                _ => None,
            });
            if let Some(f) = found {
                break f;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(url.as_deref(), Some("https://example.com/auth?x=1"));
        assert!(schema_empty);
        ui.pending
            .answer(&id, ElicitationAction::Accept, None)
            .unwrap();
        assert_eq!(asking.await.unwrap(), ElicitationAnswer::Accept(None));
        // A URL the page could not open safely is declined without asking.
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://a b",
            "",
        ] {
            let req = ElicitationRequest::Url {
                message: "x".into(),
                url: bad.into(),
                elicitation_id: String::new(),
            };
            assert_eq!(
                quick.elicit("everything", req).await,
                ElicitationAnswer::Decline,
                "{bad}"
            );
        }
        assert_eq!(quick.pending.open_count(), 0);
    }
}
