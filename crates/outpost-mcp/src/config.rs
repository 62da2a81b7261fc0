//! `mcp.toml`: the MCP servers the user added, by name.
//!
//! ```toml
//! [servers.github]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-github"]
//! env = { GITHUB_TOKEN = { secret = "mcp/github/GITHUB_TOKEN" } }
//!
//! [servers.remote]
//! url = "https://example.invalid/mcp"
//! headers = { Authorization = { secret = "mcp/remote/Authorization" } }
//! enabled = false
//! ```
//!
//! A server has either `command` (stdio: spawned directly, never through a shell) or `url`
//! (Streamable HTTP). Values in `env` and `headers` are plain strings or `{ secret = "ENTRY" }`,
//! an entry in the OS keyring resolved when the server starts. A stdio server runs in a
//! sandbox ([`crate::sandbox`]) that `sandbox`, `network`, `folders`, `read` and `write`
//! adjust:
//!
//! ```toml
//! [servers.files]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/src"]
//! network = false            # default: off, on for npx/uvx-style launchers
//! folders = "read"           # the allowed folders: "read-write" (default), "read", "none"
//! read = ["~/reference"]     # more it may read (split around what the policy denies)
//! write = ["~/out"]          # more it may read and write
//! sandbox = "on"             # "on" (default), "if-available", "off"
//! ```
//!
//! Any server may pin its MCP revision with `protocol = "2025-11-25"` (one of
//! [`crate::connection::PROTOCOL_VERSIONS`]); without it the host offers the newest and
//! takes what the server answers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{McpError, Result};
use crate::sandbox::{FolderAccess, Sandbox, SandboxMode};
use crate::secrets::SecretStore;

/// The file name inside the config directory.
pub const CONFIG_FILE: &str = "mcp.toml";

/// Longest server name, so that `mcp__<server>__<tool>` leaves room for the tool.
pub const MAX_SERVER_NAME: usize = 32;

/// Every configured server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Servers by name (sorted, so the file and every listing have one order).
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawServer", into = "RawServer")]
pub struct ServerConfig {
    /// Whether the host starts it.
    pub enabled: bool,
    /// How to reach it.
    pub transport: Transport,
    /// The MCP revision to speak, when the user pins one (`protocol = "2025-11-25"`);
    /// otherwise the newest, negotiated down for an older server
    /// ([`crate::connection::PROTOCOL_VERSIONS`]).
    pub protocol: Option<String>,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A local process speaking MCP on its stdin/stdout.
    Stdio {
        /// The program (a path, or a name looked up on `PATH`).
        command: String,
        /// Its arguments, passed as they are (no shell).
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, ConfigValue>,
        /// Working directory; the host's when absent.
        cwd: Option<PathBuf>,
        /// What its sandbox lets it reach beyond what its program needs.
        sandbox: Sandbox,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint URL (`http` or `https`).
        url: String,
        /// Extra request headers.
        headers: BTreeMap<String, ConfigValue>,
    },
}

/// A value that is either written in the file or kept in the keyring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConfigValue {
    /// Written in the file as it is.
    Plain(String),
    /// The name of a keyring entry holding the value.
    Secret {
        /// Keyring entry name (`mcp/<server>/<key>` when `outpost mcp add` wrote it).
        secret: String,
    },
}

/// The file's form of a server (flat, optional fields); checked into [`ServerConfig`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, ConfigValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    headers: BTreeMap<String, ConfigValue>,
    #[serde(default = "yes")]
    enabled: bool,
    // The sandbox's settings (stdio only). Written only when not the default, so an entry
    // from before the sandbox keeps its fingerprint (crate::trust) and stays confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sandbox: Option<SandboxMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    network: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    folders: Option<FolderAccess>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    read: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    write: Vec<PathBuf>,
    // Written only when pinned, like the sandbox's settings, for the same reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    protocol: Option<String>,
}

fn yes() -> bool {
    true
}

impl TryFrom<RawServer> for ServerConfig {
    type Error = String;

    fn try_from(raw: RawServer) -> Result<Self, String> {
        let transport = match (raw.command, raw.url) {
            (Some(_), Some(_)) => {
                return Err(
                    "a server has either `command` (stdio) or `url` (HTTP), not both".into(),
                );
            }
            (None, None) => {
                return Err("a server needs `command` (stdio) or `url` (Streamable HTTP)".into());
            }
            (Some(command), None) => {
                if !raw.headers.is_empty() {
                    return Err("`headers` are for HTTP servers (`url`), not `command`".into());
                }
                if command.trim().is_empty() {
                    return Err("`command` is empty".into());
                }
                let sandbox = Sandbox {
                    mode: raw.sandbox.unwrap_or_default(),
                    network: raw.network,
                    folders: raw.folders.unwrap_or_default(),
                    read: raw.read,
                    write: raw.write,
                };
                sandbox.check()?;
                Transport::Stdio {
                    command,
                    args: raw.args,
                    env: raw.env,
                    cwd: raw.cwd,
                    sandbox,
                }
            }
            (None, Some(url)) => {
                if !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
                    return Err("`args`, `env` and `cwd` are for stdio servers (`command`)".into());
                }
                if raw.sandbox.is_some()
                    || raw.network.is_some()
                    || raw.folders.is_some()
                    || !raw.read.is_empty()
                    || !raw.write.is_empty()
                {
                    return Err(
                        "`sandbox`, `network`, `folders`, `read` and `write` are for \
                                stdio servers (`command`): an HTTP server runs elsewhere"
                            .into(),
                    );
                }
                check_url(&url).map_err(|e| e.to_string())?;
                Transport::Http {
                    url,
                    headers: raw.headers,
                }
            }
        };
        if let Some(v) = &raw.protocol
            && !crate::connection::PROTOCOL_VERSIONS.contains(&v.as_str())
        {
            return Err(format!(
                "`protocol` is '{v}'; Outpost speaks {}",
                crate::connection::PROTOCOL_VERSIONS.join(", ")
            ));
        }
        Ok(Self {
            enabled: raw.enabled,
            transport,
            protocol: raw.protocol,
        })
    }
}

impl From<ServerConfig> for RawServer {
    fn from(s: ServerConfig) -> Self {
        let mut raw = RawServer {
            enabled: s.enabled,
            protocol: s.protocol,
            ..RawServer::default()
        };
        match s.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
                sandbox,
            } => {
                raw.command = Some(command);
                raw.args = args;
                raw.env = env;
                raw.cwd = cwd;
                raw.sandbox = (sandbox.mode != SandboxMode::default()).then_some(sandbox.mode);
                raw.network = sandbox.network;
                raw.folders =
                    (sandbox.folders != FolderAccess::default()).then_some(sandbox.folders);
                raw.read = sandbox.read;
                raw.write = sandbox.write;
            }
            Transport::Http { url, headers } => {
                raw.url = Some(url);
                raw.headers = headers;
            }
        }
        raw
    }
}

/// Checks an HTTP server's URL: absolute, `http` or `https`.
pub fn check_url(url: &str) -> Result<()> {
    let parsed =
        url::Url::parse(url).map_err(|e| McpError::invalid("url", format!("'{url}': {e}")))?;
    match parsed.scheme() {
        "http" | "https" => Ok(()),
        other => Err(McpError::invalid(
            "url",
            format!(
                "'{url}': the scheme is '{other}'; an MCP server URL starts with http:// or https://"
            ),
        )),
    }
}

/// Checks a server name: 1 to 32 ASCII letters, digits, `-` or `_`, without `__` (which
/// separates server and tool in Outpost's tool names).
pub fn check_server_name(name: &str) -> Result<()> {
    let bad = |why: &str| Err(McpError::invalid("server name", format!("'{name}' {why}")));
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > MAX_SERVER_NAME {
        return bad(&format!("is longer than {MAX_SERVER_NAME} characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return bad("may only contain ASCII letters, digits, '-' and '_'");
    }
    if name.contains("__") {
        return bad("may not contain '__' (it separates server and tool in tool names)");
    }
    Ok(())
}

/// The server among `others` whose tools' Outpost names could be the same as `name`'s:
/// `name` without one trailing `_`, if it is there.
pub fn colliding_server<'a>(
    name: &str,
    others: impl IntoIterator<Item = &'a String>,
) -> Option<&'a str> {
    let shorter = name.strip_suffix('_')?;
    others
        .into_iter()
        .find(|o| o.as_str() == shorter)
        .map(String::as_str)
}

/// Why `a` and `a_` (`longer`) cannot both be configured.
pub fn collision_message(shorter: &str, longer: &str) -> String {
    format!(
        "the MCP servers '{shorter}' and '{longer}' cannot both be configured: a tool '_x' \
         of '{shorter}' and a tool 'x' of '{longer}' would both be named \
         'mcp__{shorter}___x' in Outpost and share their rules; rename one (its rules in \
         policy.toml follow the new name: `mcp__NEW__...` under [tools], NEW under \
         [mcp_servers])"
    )
}

impl McpConfig {
    /// The URL of the Streamable HTTP server `name` (the ones that sign in with OAuth):
    /// `UnknownServer`, or `Invalid` for a stdio server.
    pub fn http_url(&self, name: &str) -> Result<&str> {
        match self.servers.get(name).map(|s| &s.transport) {
            Some(Transport::Http { url, .. }) => Ok(url),
            Some(Transport::Stdio { .. }) => Err(McpError::invalid(
                "name",
                format!("'{name}' is a stdio server; only Streamable HTTP servers sign in"),
            )),
            None => Err(McpError::UnknownServer(name.to_owned())),
        }
    }

    /// Reads `path`; a missing file is an empty config.
    pub fn load(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(McpError::Config {
                    path: path.to_owned(),
                    message: e.to_string(),
                });
            }
        };
        Self::parse(&text).map_err(|message| McpError::Config {
            path: path.to_owned(),
            message,
        })
    }

    /// The names of the servers that are switched on, in name order.
    pub fn enabled(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|(_, s)| s.enabled)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Parses the file's text and checks it ([`Self::check`]).
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: Self = toml::from_str(text).map_err(|e| e.to_string())?;
        config.check()?;
        Ok(config)
    }

    /// Checks every server name, and that no two servers' tools could share an Outpost
    /// name: `NAME` and `NAME_` together are refused, since a tool `_x` of the first and a
    /// tool `x` of the second would both be `mcp__NAME___x` (and share their policy rules).
    /// No other pair can collide (server names have no `__`; docs/MCP.md, "Tool names").
    pub fn check(&self) -> Result<(), String> {
        for name in self.servers.keys() {
            check_server_name(name).map_err(|e| e.to_string())?;
            if let Some(other) = colliding_server(name, self.servers.keys()) {
                return Err(collision_message(other, name));
            }
        }
        Ok(())
    }

    /// Writes the config to `path` (a temporary file renamed over it, so a reader never
    /// sees half a file). Comments in an existing file are not kept.
    pub fn save(&self, path: &Path) -> Result<()> {
        let err = |message: String| McpError::Config {
            path: path.to_owned(),
            message,
        };
        // Never write a file that would not load.
        self.check().map_err(err)?;
        let body = toml::to_string_pretty(self).map_err(|e| err(e.to_string()))?;
        let text = format!(
            "# Outpost's MCP servers (docs/MCP.md). Edited by `outpost mcp add/remove` and the\n\
             # settings pane; secrets are keyring entries ({{ secret = \"...\" }}), never values.\n\n{body}"
        );
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("creating {}: {e}", dir.display())))?;
        }
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, text).map_err(|e| err(format!("writing {}: {e}", tmp.display())))?;
        std::fs::rename(&tmp, path).map_err(|e| err(e.to_string()))
    }
}

/// A server's transport with every keyring reference replaced by its value. Never logged
/// (its `Debug` hides the values).
#[derive(Clone)]
pub(crate) enum Resolved {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
        sandbox: Sandbox,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio { command, args, .. } => write!(f, "Stdio({command} {args:?})"),
            Self::Http { url, .. } => write!(f, "Http({url})"),
        }
    }
}

fn resolve_values(
    server: &str,
    values: &BTreeMap<String, ConfigValue>,
    secrets: &dyn SecretStore,
) -> Result<Vec<(String, String)>> {
    values
        .iter()
        .map(|(k, v)| {
            let value = match v {
                ConfigValue::Plain(s) => s.clone(),
                ConfigValue::Secret { secret } => {
                    secrets
                        .get(secret)?
                        .ok_or_else(|| McpError::MissingSecret {
                            server: server.to_owned(),
                            key: k.clone(),
                            entry: secret.clone(),
                        })?
                }
            };
            Ok((k.clone(), value))
        })
        .collect()
}

impl ServerConfig {
    /// Its values: a stdio server's environment, an HTTP server's headers.
    pub fn values(&self) -> &BTreeMap<String, ConfigValue> {
        match &self.transport {
            Transport::Stdio { env, .. } => env,
            Transport::Http { headers, .. } => headers,
        }
    }

    /// Its values, to change.
    pub fn values_mut(&mut self) -> &mut BTreeMap<String, ConfigValue> {
        match &mut self.transport {
            Transport::Stdio { env, .. } => env,
            Transport::Http { headers, .. } => headers,
        }
    }

    /// What it may touch as stdio server `name` under `opts`, planned from its settings
    /// (plain values only, `PATH` and the like: secrets are not read for this; looks at
    /// files, so call it off the async threads). `None` for an HTTP server, which runs
    /// elsewhere.
    pub fn planned_reach(&self, name: &str, opts: &crate::SandboxOptions) -> Option<crate::Reach> {
        let Transport::Stdio {
            command,
            args,
            env,
            cwd,
            sandbox,
        } = &self.transport
        else {
            return None;
        };
        let plain: Vec<(String, String)> = env
            .iter()
            .filter_map(|(k, v)| match v {
                ConfigValue::Plain(p) => Some((k.clone(), p.clone())),
                ConfigValue::Secret { .. } => None,
            })
            .collect();
        let entry = crate::sandbox::Entry {
            server: name,
            command,
            args,
            env: &plain,
            cwd: cwd.as_deref(),
            sandbox,
        };
        Some(crate::sandbox::plan(&entry, opts))
    }

    /// The keyring entries its values name that are its own, as server `name`
    /// ([`crate::secrets::entry_prefix`]).
    pub fn own_secrets(&self, name: &str) -> Vec<&str> {
        let own = crate::secrets::entry_prefix(name);
        self.values()
            .values()
            .filter_map(|v| match v {
                ConfigValue::Secret { secret } if secret.starts_with(&own) => Some(secret.as_str()),
                _ => None,
            })
            .collect()
    }

    /// A stdio server.
    pub fn stdio(command: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            enabled: true,
            transport: Transport::Stdio {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                cwd: None,
                sandbox: Sandbox::default(),
            },
            protocol: None,
        }
    }

    /// A Streamable HTTP server.
    pub fn http(url: impl Into<String>) -> Self {
        Self {
            enabled: true,
            transport: Transport::Http {
                url: url.into(),
                headers: BTreeMap::new(),
            },
            protocol: None,
        }
    }

    /// A stdio server's sandbox settings (`None` for HTTP).
    pub fn sandbox(&self) -> Option<&Sandbox> {
        match &self.transport {
            Transport::Stdio { sandbox, .. } => Some(sandbox),
            Transport::Http { .. } => None,
        }
    }

    /// A stdio server's sandbox settings, to change them (`None` for HTTP).
    pub fn sandbox_mut(&mut self) -> Option<&mut Sandbox> {
        match &mut self.transport {
            Transport::Stdio { sandbox, .. } => Some(sandbox),
            Transport::Http { .. } => None,
        }
    }

    /// One line saying what runs: the command and its arguments, or the URL.
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                let mut s = command.clone();
                for a in args {
                    s.push(' ');
                    s.push_str(a);
                }
                s
            }
            Transport::Http { url, .. } => url.clone(),
        }
    }

    pub(crate) fn resolve(&self, server: &str, secrets: &dyn SecretStore) -> Result<Resolved> {
        Ok(match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
                sandbox,
            } => Resolved::Stdio {
                command: command.clone(),
                args: args.clone(),
                env: resolve_values(server, env, secrets)?,
                cwd: cwd.clone(),
                sandbox: sandbox.clone(),
            },
            Transport::Http { url, headers } => Resolved::Http {
                url: url.clone(),
                headers: resolve_values(server, headers, secrets)?,
            },
        })
    }
}

/// The platform's config directory for Outpost (`~/.config/outpost` on Linux), whatever
/// `$OUTPOST_CONFIG_DIR` says; `None` without a home directory.
pub fn platform_config_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("dev", "outpost", "outpost")
        .map(|p| p.config_dir().to_path_buf())
}

/// The config directory: `$OUTPOST_CONFIG_DIR`, else the platform's (the same folder as
/// the app's `settings.toml` and `policy.toml`).
pub fn config_dir_from_env() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("OUTPOST_CONFIG_DIR").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    platform_config_dir().ok_or_else(|| {
        McpError::invalid(
            "config directory",
            "cannot find one: $HOME is not set. Set OUTPOST_CONFIG_DIR to choose one.",
        )
    })
}

/// `mcp.toml` in `config_dir`.
pub fn config_path(config_dir: &Path) -> PathBuf {
    config_dir.join(CONFIG_FILE)
}

/// The per-server stderr logs' folder in the data directory (`mcp-logs`).
pub fn log_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("mcp-logs")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::secrets::MemorySecrets;

    #[test]
    fn round_trips_both_kinds_and_secret_references() {
        let text = r#"
[servers.gh]
command = "npx"
args = ["-y", "srv"]
env = { TOKEN = { secret = "mcp/gh/TOKEN" }, MODE = "fast" }
cwd = "/tmp"

[servers.web]
url = "http://127.0.0.1:9/mcp"
headers = { X-Api-Key = { secret = "mcp/web/X-Api-Key" } }
enabled = false
"#;
        let c = McpConfig::parse(text).unwrap();
        assert!(c.servers["gh"].enabled);
        assert!(!c.servers["web"].enabled);
        let Transport::Stdio { env, .. } = &c.servers["gh"].transport else {
            panic!("stdio expected")
        };
        assert_eq!(env["MODE"], ConfigValue::Plain("fast".into()));
        let again = McpConfig::parse(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn a_pinned_revision_is_kept_checked_and_written_only_when_set() {
        let c = McpConfig::parse("[servers.a]\nurl='http://h/'\nprotocol='2025-11-25'").unwrap();
        assert_eq!(c.servers["a"].protocol.as_deref(), Some("2025-11-25"));
        assert_eq!(McpConfig::parse(&toml::to_string(&c).unwrap()).unwrap(), c);
        let e = McpConfig::parse("[servers.a]\ncommand='x'\nprotocol='2030-01-01'").unwrap_err();
        assert!(
            e.contains("'2030-01-01'") && e.contains("2026-07-28"),
            "{e}"
        );
        // Unset, it is not written: entries from before keep their fingerprint.
        let plain = McpConfig::parse("[servers.a]\ncommand='x'").unwrap();
        assert!(!toml::to_string(&plain).unwrap().contains("protocol"));
    }

    #[test]
    fn rejects_both_neither_and_bad_names() {
        for (text, says) in [
            ("[servers.a]\ncommand='x'\nurl='http://h/'", "not both"),
            ("[servers.a]\nenabled=true", "needs"),
            ("[servers.a]\nurl='file:///x'", "http"),
            ("[servers.a__b]\ncommand='x'", "__"),
        ] {
            let e = McpConfig::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        assert!(McpConfig::parse("[servers.\"a b\"]\ncommand='x'").is_err());
    }

    /// Issue 30, finding 10: servers `a` and `a_` would name a tool `_x` of the first and a
    /// tool `x` of the second alike (`mcp__a___x`), so the user's rule for one would run the
    /// other: such a configuration is refused, naming both; either alone is fine.
    #[test]
    fn only_an_http_server_has_a_url_to_sign_in_to() {
        let c = McpConfig::parse(
            "[servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\n\n[servers.gh]\ncommand = \"npx\"\n",
        )
        .unwrap();
        assert_eq!(c.http_url("web").unwrap(), "http://127.0.0.1:9/mcp");
        assert!(matches!(c.http_url("gh"), Err(McpError::Invalid { .. })));
        assert!(matches!(
            c.http_url("nope"),
            Err(McpError::UnknownServer(_))
        ));
    }

    #[test]
    fn servers_whose_tool_names_could_collide_are_refused() {
        let err =
            McpConfig::parse("[servers.a]\ncommand='x'\n[servers.a_]\ncommand='y'").unwrap_err();
        assert!(
            err.contains("'a' and 'a_'") && err.contains("mcp__a___x"),
            "{err}"
        );
        assert!(McpConfig::parse("[servers.a_]\ncommand='y'").is_ok());
        assert!(McpConfig::parse("[servers.a]\ncommand='x'\n[servers.a-]\ncommand='y'").is_ok());
        let mut c = McpConfig::parse("[servers.a]\ncommand='x'").unwrap();
        c.servers
            .insert("a_".into(), ServerConfig::stdio("y", Vec::new()));
        let dir = tempfile::tempdir().unwrap();
        assert!(c.save(&dir.path().join("mcp.toml")).is_err());
        assert!(!dir.path().join("mcp.toml").exists());
        assert!(McpConfig::parse("[servers.a]\ncommand='x'\nheaders={A='b'}").is_err());
    }

    #[test]
    fn resolves_secrets_and_names_a_missing_one() {
        let c = McpConfig::parse("[servers.a]\ncommand='x'\nenv={T={secret='mcp/a/T'}}").unwrap();
        let store = MemorySecrets::default();
        let err = c.servers["a"].resolve("a", &store).unwrap_err();
        assert!(err.to_string().contains("mcp/a/T"), "{err}");
        store.set("mcp/a/T", "s3cret").unwrap();
        let r = c.servers["a"].resolve("a", &store).unwrap();
        assert!(!format!("{r:?}").contains("s3cret"));
        let Resolved::Stdio { env, .. } = r else {
            panic!()
        };
        assert_eq!(env, vec![("T".to_owned(), "s3cret".to_owned())]);
    }
}
