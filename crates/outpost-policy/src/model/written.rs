//! The policy as the file says it: rules for tools and folders, exceptions to the secrets
//! list, the consent timeout.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Default seconds to wait for the user's answer before denying.
pub const DEFAULT_CONSENT_TIMEOUT_SECS: u64 = 120;
/// Longest consent timeout the file may set: one day.
pub const MAX_CONSENT_TIMEOUT_SECS: u64 = 86_400;

/// A per-tool rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Run without asking, except where a deny rule or the secrets list says otherwise.
    Allow,
    /// Ask every time.
    Ask,
    /// Never run.
    Deny,
}

/// What a folder entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum FolderAccess {
    /// Tools run without asking inside the folder.
    Allow,
    /// No tool may touch the folder.
    Deny,
}

/// One `[[folders]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FolderRule {
    /// Absolute path or a path starting with `~`.
    pub path: String,
    /// Allow or deny.
    pub access: FolderAccess,
    /// The tools this entry applies to; absent means every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// One `[[exceptions]]` entry: lifts the secrets deny list for exactly this path (and what is
/// below it, when it is a folder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exception {
    /// Absolute path or a path starting with `~`.
    pub path: String,
}

/// The policy as written in the policy file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Seconds to wait for an answer before a question counts as "deny".
    #[serde(default = "default_consent_timeout")]
    pub consent_timeout_secs: u64,
    /// Whether tools may read /proc, /sys and /dev.
    #[serde(default)]
    pub allow_system_paths: bool,
    /// Per-tool rules; a tool not listed follows its default. An MCP tool is named by its
    /// Outpost name (`mcp__<server>__<tool>`).
    #[serde(default)]
    pub tools: BTreeMap<String, Rule>,
    /// Per-MCP-server rules (by the server's name in `mcp.toml`), for every tool of that
    /// server that `tools` does not name. A `deny` here or in `tools` wins; otherwise the
    /// tool's own rule comes before its server's; with neither, an MCP tool asks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, Rule>,
    /// Folder scopes.
    #[serde(default)]
    pub folders: Vec<FolderRule>,
    /// Exceptions to the secrets deny list.
    #[serde(default)]
    pub exceptions: Vec<Exception>,
}

fn default_consent_timeout() -> u64 {
    DEFAULT_CONSENT_TIMEOUT_SECS
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            consent_timeout_secs: DEFAULT_CONSENT_TIMEOUT_SECS,
            allow_system_paths: false,
            tools: BTreeMap::new(),
            mcp_servers: BTreeMap::new(),
            folders: Vec::new(),
            exceptions: Vec::new(),
        }
    }
}

impl Policy {
    /// The rule an MCP tool runs under: `deny` at the tool (`[tools]`, by its Outpost
    /// name) or its server (`[mcp_servers]`) wins; otherwise the tool's own rule, else its
    /// server's, else ask (what [`CompiledPolicy::evaluate`] does for an MCP tool before
    /// conversation grants).
    pub fn mcp_tool_rule(&self, tool: &str, server: &str) -> Rule {
        let own = self.tools.get(tool).copied();
        let of_server = self.mcp_servers.get(server).copied();
        if own == Some(Rule::Deny) || of_server == Some(Rule::Deny) {
            return Rule::Deny;
        }
        own.or(of_server).unwrap_or(Rule::Ask)
    }

    /// What `new` allows that `self` does not, one sentence each (empty: `new` allows
    /// nothing more). Judged entry by entry, on the safe side: a rule that is not the same,
    /// made `deny`, or `allow` made `ask`, counts as allowing more; so does a new allowed
    /// folder or exception, a denied folder gone, and `allow_system_paths` turned on.
    /// The consent timeout is neither.
    pub fn widenings(&self, new: &Policy) -> Vec<String> {
        let mut out = Vec::new();
        if new.allow_system_paths && !self.allow_system_paths {
            out.push("allow_system_paths is turned on".to_owned());
        }
        let word = |r: Option<&Rule>| match r {
            None => "(no rule)",
            Some(Rule::Allow) => "allow",
            Some(Rule::Ask) => "ask",
            Some(Rule::Deny) => "deny",
        };
        for (table, old, new) in [
            ("tools", &self.tools, &new.tools),
            ("mcp_servers", &self.mcp_servers, &new.mcp_servers),
        ] {
            for name in old.keys().chain(new.keys()) {
                let (a, b) = (old.get(name), new.get(name));
                let narrower = a == b
                    || b == Some(&Rule::Deny)
                    || (a == Some(&Rule::Allow) && b == Some(&Rule::Ask));
                let line = format!("[{table}] \"{name}\": {} → {}", word(a), word(b));
                if !narrower && !out.contains(&line) {
                    out.push(line);
                }
            }
        }
        for f in &new.folders {
            if f.access == FolderAccess::Allow && !self.folders.contains(f) {
                out.push(format!("a new allowed folder: {}", f.path));
            }
        }
        for f in &self.folders {
            if f.access == FolderAccess::Deny && !new.folders.contains(f) {
                out.push(format!("a denied folder is no longer denied: {}", f.path));
            }
        }
        for e in &new.exceptions {
            if !self.exceptions.contains(e) {
                out.push(format!("a new exception to the secrets list: {}", e.path));
            }
        }
        out
    }

    /// Checks values serde cannot: ranges and path shapes. The message names the entry.
    pub fn check(&self) -> Result<(), String> {
        if self.consent_timeout_secs == 0 || self.consent_timeout_secs > MAX_CONSENT_TIMEOUT_SECS {
            return Err(format!(
                "consent_timeout_secs must be between 1 and {MAX_CONSENT_TIMEOUT_SECS}, got {}",
                self.consent_timeout_secs
            ));
        }
        for name in self.tools.keys() {
            if name.trim().is_empty() {
                return Err("tools: a tool name must not be empty".into());
            }
        }
        for name in self.mcp_servers.keys() {
            if name.trim().is_empty() {
                return Err("mcp_servers: a server name must not be empty".into());
            }
        }
        for (i, f) in self.folders.iter().enumerate() {
            check_path(&format!("folders[{i}].path"), &f.path)?;
        }
        for (i, e) in self.exceptions.iter().enumerate() {
            check_path(&format!("exceptions[{i}].path"), &e.path)?;
        }
        Ok(())
    }
}

fn check_path(field: &str, path: &str) -> Result<(), String> {
    if path.contains('\0') {
        return Err(format!("{field} must not contain a NUL byte"));
    }
    if !(path == "~" || path.starts_with("~/") || Path::new(path).is_absolute()) {
        return Err(format!(
            "{field} must be an absolute path or start with '~/', got '{path}'"
        ));
    }
    Ok(())
}
