//! The policy model: what the file says ([`Policy`]), the same compiled against a home
//! directory ([`CompiledPolicy`]), and the evaluation of one tool call into a [`Verdict`].
//!
//! Evaluation order, strongest first: an explicit `deny` (tool or folder), the off-by-default
//! rule for destructive tools, Outpost's own settings and data (no exception lifts them),
//! /proc and /sys, the secrets deny list (unless an exception names the path), then the asks that no allow rule may skip (destructive and launching
//! tools, hard-linked files), then allow rules (tool, folder scope, conversation grant), and
//! finally "ask".

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::secrets::SecretsList;

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

/// The machine facts a policy is compiled against.
#[derive(Debug, Clone)]
pub struct PolicyContext {
    /// The user's home directory (canonical when it exists).
    pub home: PathBuf,
    /// Outpost's own config and data directories: always protected.
    pub protected: Vec<PathBuf>,
}

impl PolicyContext {
    /// A context for `home`, protecting `protected` (both canonicalized when they exist).
    pub fn new(home: impl Into<PathBuf>, protected: Vec<PathBuf>) -> Self {
        let home = home.into();
        Self {
            home: canonical_or_clean(&home),
            protected: protected.iter().map(|p| canonical_or_clean(p)).collect(),
        }
    }

    /// Expands a leading `~` to the home directory.
    pub fn expand(&self, path: &str) -> PathBuf {
        if path == "~" {
            self.home.clone()
        } else if let Some(rest) = path.strip_prefix("~/") {
            self.home.join(rest)
        } else {
            PathBuf::from(path)
        }
    }
}

/// Most symbolic links followed while resolving one path that does not exist (Linux's limit).
const MAX_SYMLINKS: usize = 40;

/// Where `path` leads: its canonical form when it exists. When it does not (or cannot be
/// resolved), it is resolved as far as it exists, the way the system would: symbolic links
/// are followed, dangling ones included, and `..` goes to the real parent; the part that
/// does not exist is appended with `.` and `..` applied lexically. So a missing file under
/// a symlinked folder is judged where the link leads, and a rule for a folder that does
/// not exist yet still compares sensibly. A relative path is only cleaned lexically.
pub fn canonical_or_clean(path: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(path) {
        return c;
    }
    if !path.has_root() {
        return clean(path);
    }
    // Components still to walk, the next one last.
    let mut todo: Vec<Part> = parts(path);
    todo.reverse();
    let mut out = PathBuf::new();
    let mut followed = 0;
    while let Some(part) = todo.pop() {
        match part {
            Part::Prefix(p) => out = PathBuf::from(p),
            Part::Root => {
                let prefix = match out.components().next() {
                    Some(Component::Prefix(p)) => PathBuf::from(p.as_os_str()),
                    _ => PathBuf::new(),
                };
                out = prefix;
                out.push(Component::RootDir.as_os_str());
            }
            Part::Up => {
                out.pop();
            }
            Part::Name(name) => {
                let next = out.join(&name);
                // Fails for anything but a symbolic link, missing entries included.
                match std::fs::read_link(&next) {
                    Ok(target) if followed < MAX_SYMLINKS => {
                        // Walked from the link's folder (`out`), or from the root.
                        followed += 1;
                        let mut more = parts(&target);
                        more.reverse();
                        todo.extend(more);
                    }
                    _ => out = next,
                }
            }
        }
    }
    out
}

/// One component of a path being resolved, owned so that link targets can join the walk.
enum Part {
    Prefix(std::ffi::OsString),
    Root,
    Up,
    Name(std::ffi::OsString),
}

fn parts(path: &Path) -> Vec<Part> {
    path.components()
        .filter_map(|c| match c {
            Component::Prefix(p) => Some(Part::Prefix(p.as_os_str().to_owned())),
            Component::RootDir => Some(Part::Root),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Up),
            Component::Normal(n) => Some(Part::Name(n.to_owned())),
        })
        .collect()
}

/// `path` with `.` and `..` removed lexically.
fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Hints of a tool that shape its defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolHints {
    /// Changes nothing.
    pub read_only: bool,
    /// May change or delete data: off by default, asks every time, never "always allow".
    pub destructive: bool,
    /// Reaches outside the machine or into other applications.
    pub open_world: bool,
    /// Asks every time whatever the rules say (e.g. launching another application).
    pub asks_every_time: bool,
}

/// What an MCP server says about one of its tools (the MCP annotations `readOnlyHint`,
/// `destructiveHint`, `idempotentHint`, `openWorldHint`). Claims shown to the user, never
/// used to allow or deny anything: `None` means the server did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(optional_fields))]
pub struct ServerClaims {
    /// `readOnlyHint`: the tool changes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`: the tool may delete or overwrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments changes nothing more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// `openWorldHint`: the tool reaches outside (the web, other systems).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// One tool call, as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct AccessRequest<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The MCP server that provides the tool (its name in `mcp.toml`); `None` for a
    /// built-in tool.
    pub server: Option<&'a str>,
    /// Its hints.
    pub hints: ToolHints,
    /// Canonical paths the call reads, lists or writes.
    pub paths: &'a [PathBuf],
    /// The folder "always allow" and "allow for this conversation" would cover.
    pub folder: Option<&'a Path>,
    /// A reason that forces a question even where a rule would allow (e.g. hard links).
    pub force_ask: Option<&'a str>,
}

/// A user's answer to a consent question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ConsentDecision"))]
pub enum Decision {
    /// Run this call only.
    AllowOnce,
    /// Run this and later calls of this tool in this folder during this conversation.
    AllowForConversation,
    /// Run this tool in this folder from now on (written to the policy file).
    AlwaysAllow,
    /// Do not run this call.
    DenyOnce,
    /// Never run this tool in this folder (written to the policy file).
    AlwaysDeny,
}

impl Decision {
    /// The wire / file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllowOnce => "allow_once",
            Self::AllowForConversation => "allow_for_conversation",
            Self::AlwaysAllow => "always_allow",
            Self::DenyOnce => "deny_once",
            Self::AlwaysDeny => "always_deny",
        }
    }

    /// Whether the call may run.
    pub fn allows(self) -> bool {
        matches!(
            self,
            Self::AllowOnce | Self::AllowForConversation | Self::AlwaysAllow
        )
    }
}

impl std::str::FromStr for Decision {
    type Err = crate::PolicyError;

    /// Parses the wire / file spelling ([`Decision::as_str`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| crate::PolicyError::UnknownDecision(s.to_owned()))
    }
}

impl Decision {
    /// Every decision, in the order a prompt offers them.
    pub const ALL: [Decision; 5] = [
        Self::AllowOnce,
        Self::AllowForConversation,
        Self::AlwaysAllow,
        Self::DenyOnce,
        Self::AlwaysDeny,
    ];
}

/// Who (or what) decided whether a call runs. The audit log records exactly this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decider {
    /// A rule of the user's policy: a tool rule, a folder rule, a system path, a harmless
    /// tool's default, or a destructive tool left off.
    Policy,
    /// The built-in secrets deny list.
    SecretsList,
    /// The user, answering a consent prompt.
    User,
    /// The user's earlier "allow for this conversation" answer.
    ConversationGrant,
    /// Nobody answered the consent prompt before it expired.
    ConsentTimeout,
    /// The call needed consent and no consent prompt was attached (a headless client).
    NoConsentUi,
}

impl Decider {
    /// The stable spelling (audit log, UI contract).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "policy",
            Self::SecretsList => "secrets_list",
            Self::User => "user",
            Self::ConversationGrant => "conversation_grant",
            Self::ConsentTimeout => "consent_timeout",
            Self::NoConsentUi => "no_consent_ui",
        }
    }

    /// How the decider is named to people and in `permission_denied` messages.
    pub fn phrase(self) -> &'static str {
        match self {
            Self::Policy => "your policy",
            Self::SecretsList => "the built-in secrets list",
            Self::User => "the user",
            Self::ConversationGrant => "the user (allowed for this conversation)",
            Self::ConsentTimeout => "the consent timeout",
            Self::NoConsentUi => "Outpost",
        }
    }
}

/// Why a call was allowed without asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Allowance {
    /// The tool is set to "allow".
    ToolRule,
    /// Every path is inside this allowed folder.
    Folder {
        /// The folder.
        path: PathBuf,
    },
    /// The user allowed it for this conversation.
    Conversation,
    /// A harmless tool with no paths (calculator, system_info).
    Default,
}

/// The outcome of evaluating one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow(Allowance),
    /// Ask the user, offering exactly these decisions.
    Ask {
        /// Why the question is asked, for the prompt.
        reason: String,
        /// The decisions the UI may offer.
        options: Vec<Decision>,
    },
    /// Do not run it.
    Deny {
        /// Who denied: the policy or the built-in secrets list.
        by: Decider,
        /// Why.
        reason: String,
    },
}

/// What a user allowed for one conversation.
#[derive(Debug, Clone, Default)]
pub struct ConversationGrants {
    grants: Vec<(String, Option<PathBuf>)>,
}

impl ConversationGrants {
    /// Records "allow for this conversation" for `tool` in `folder`.
    pub fn grant(&mut self, tool: &str, folder: Option<&Path>) {
        let g = (tool.to_owned(), folder.map(Path::to_path_buf));
        if !self.grants.contains(&g) {
            self.grants.push(g);
        }
    }

    fn covers(&self, tool: &str, paths: &[PathBuf]) -> bool {
        self.grants.iter().any(|(t, folder)| {
            t == tool
                && match folder {
                    None => paths.is_empty(),
                    Some(f) => !paths.is_empty() && paths.iter().all(|p| p.starts_with(f)),
                }
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct CompiledFolder {
    pub(crate) path: PathBuf,
    pub(crate) access: FolderAccess,
    pub(crate) tools: Option<Vec<String>>,
}

impl CompiledFolder {
    fn applies(&self, tool: &str, path: &Path) -> bool {
        path.starts_with(&self.path)
            && self
                .tools
                .as_ref()
                .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }
}

pub(crate) const SYSTEM_DIRS: &[&str] = &["/proc", "/sys", "/dev"];

/// A [`Policy`] with its paths expanded and canonicalized, ready to evaluate calls.
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    policy: Policy,
    pub(crate) folders: Vec<CompiledFolder>,
    pub(crate) exceptions: Vec<PathBuf>,
    pub(crate) secrets: SecretsList,
}

impl CompiledPolicy {
    /// Compiles `policy` for `ctx`.
    pub fn new(policy: Policy, ctx: &PolicyContext) -> Self {
        let folders = policy
            .folders
            .iter()
            .map(|f| CompiledFolder {
                path: canonical_or_clean(&ctx.expand(&f.path)),
                access: f.access,
                tools: f.tools.clone(),
            })
            .collect();
        let exceptions = policy
            .exceptions
            .iter()
            .map(|e| canonical_or_clean(&ctx.expand(&e.path)))
            .collect();
        Self {
            policy,
            folders,
            exceptions,
            secrets: SecretsList::new(&ctx.home, &ctx.protected),
        }
    }

    /// The policy as written.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// How long to wait for a consent answer.
    pub fn consent_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.policy.consent_timeout_secs)
    }

    /// Why `path` may not be touched by `tool` whatever the user answers, or `None`.
    /// Recursive tools call this for every entry they return.
    pub fn hard_deny(&self, tool: &str, path: &Path) -> Option<(Decider, String)> {
        // Outpost's own settings and data come first: no exception lifts them.
        if let Some(why) = self.secrets.outpost_own(path) {
            return Some((Decider::SecretsList, why));
        }
        if !self.policy.allow_system_paths && SYSTEM_DIRS.iter().any(|d| path.starts_with(d)) {
            return Some((
                Decider::Policy,
                format!(
                    "{} is a system directory (/proc, /sys and /dev are off limits unless \
                     allow_system_paths = true)",
                    path.display()
                ),
            ));
        }
        if let Some(f) = self
            .folders
            .iter()
            .find(|f| f.access == FolderAccess::Deny && f.applies(tool, path))
        {
            return Some((
                Decider::Policy,
                format!("{} is denied in the policy file", f.path.display()),
            ));
        }
        if let Some(why) = self.secrets.matches(path) {
            if !self.exceptions.iter().any(|e| path.starts_with(e)) {
                return Some((
                    Decider::SecretsList,
                    format!(
                        "{why}; to allow {} add it under [[exceptions]] in the policy file",
                        path.display()
                    ),
                ));
            }
        }
        None
    }

    /// Why `tool` (of MCP server `server`, if any) may not run at all, whatever its
    /// arguments: set to "deny" (the tool or its server), or a destructive built-in tool
    /// the user has not enabled. Checked before paths are resolved.
    pub fn tool_denied(
        &self,
        tool: &str,
        server: Option<&str>,
        hints: ToolHints,
    ) -> Option<(Decider, String)> {
        let rule = self.policy.tools.get(tool).copied();
        if rule == Some(Rule::Deny) {
            return Some((
                Decider::Policy,
                format!("the tool '{tool}' is set to \"deny\""),
            ));
        }
        if let Some(server) = server {
            if self.policy.mcp_servers.get(server) == Some(&Rule::Deny) {
                return Some((
                    Decider::Policy,
                    format!("the MCP server '{server}' is set to \"deny\""),
                ));
            }
            // An MCP tool's hints are the server's claims: they neither allow nor deny.
            return None;
        }
        if hints.destructive && rule.is_none() {
            return Some((
                Decider::Policy,
                format!(
                    "'{tool}' can change or delete files and is off by default; set \
                     {tool} = \"ask\" under [tools] in the policy file to enable it"
                ),
            ));
        }
        None
    }

    /// An MCP tool's verdict once no deny applies: its rule, else its server's, else a
    /// grant for this conversation, else ask.
    fn evaluate_mcp(&self, tool: &str, server: &str, grants: &ConversationGrants) -> Verdict {
        let rule = self
            .policy
            .tools
            .get(tool)
            .or_else(|| self.policy.mcp_servers.get(server))
            .copied();
        match rule {
            Some(Rule::Allow) => return Verdict::Allow(Allowance::ToolRule),
            Some(Rule::Ask) => {
                return Verdict::Ask {
                    reason: format!("'{tool}' (MCP server '{server}') is set to \"ask\""),
                    options: vec![
                        Decision::AllowOnce,
                        Decision::DenyOnce,
                        Decision::AlwaysDeny,
                    ],
                };
            }
            Some(Rule::Deny) | None => {}
        }
        if grants.covers(tool, &[]) {
            return Verdict::Allow(Allowance::Conversation);
        }
        Verdict::Ask {
            reason: format!(
                "'{tool}' is a tool of the MCP server '{server}'; MCP tools ask unless the \
                 policy allows them"
            ),
            options: vec![
                Decision::AllowOnce,
                Decision::AllowForConversation,
                Decision::AlwaysAllow,
                Decision::DenyOnce,
                Decision::AlwaysDeny,
            ],
        }
    }

    /// Evaluates one call. Deny wins over everything.
    pub fn evaluate(&self, req: &AccessRequest<'_>, grants: &ConversationGrants) -> Verdict {
        let tool = req.tool;
        let rule = self.policy.tools.get(tool).copied();
        if let Some((by, reason)) = self.tool_denied(tool, req.server, req.hints) {
            return Verdict::Deny { by, reason };
        }
        if let Some(server) = req.server {
            // An MCP tool touches nothing Outpost can see: its rules, never its claims.
            return self.evaluate_mcp(tool, server, grants);
        }
        for path in req.paths {
            if let Some((by, reason)) = self.hard_deny(tool, path) {
                return Verdict::Deny { by, reason };
            }
        }
        let once_only = vec![
            Decision::AllowOnce,
            Decision::DenyOnce,
            Decision::AlwaysDeny,
        ];
        if req.hints.destructive || req.hints.asks_every_time {
            return Verdict::Ask {
                reason: format!("'{tool}' asks every time"),
                options: once_only,
            };
        }
        if let Some(reason) = req.force_ask {
            return Verdict::Ask {
                reason: reason.to_owned(),
                options: once_only,
            };
        }
        match rule {
            Some(Rule::Allow) => return Verdict::Allow(Allowance::ToolRule),
            Some(Rule::Ask) => {
                return Verdict::Ask {
                    reason: format!("'{tool}' is set to \"ask\""),
                    options: once_only,
                };
            }
            Some(Rule::Deny) | None => {}
        }
        if req.paths.is_empty() && !req.hints.open_world {
            return Verdict::Allow(Allowance::Default);
        }
        if !req.paths.is_empty() {
            let scope = req.paths.iter().map(|p| {
                self.folders
                    .iter()
                    .find(|f| f.access == FolderAccess::Allow && f.applies(tool, p))
            });
            let scopes: Option<Vec<_>> = scope.collect();
            if let Some(first) = scopes.as_ref().and_then(|s| s.first()) {
                return Verdict::Allow(Allowance::Folder {
                    path: first.path.clone(),
                });
            }
        }
        if grants.covers(tool, req.paths) {
            return Verdict::Allow(Allowance::Conversation);
        }
        let reason = match req.folder {
            Some(f) => format!("{} is outside the folders you allowed", f.display()),
            None => format!("'{tool}' reaches outside this computer"),
        };
        Verdict::Ask {
            reason,
            options: vec![
                Decision::AllowOnce,
                Decision::AllowForConversation,
                Decision::AlwaysAllow,
                Decision::DenyOnce,
                Decision::AlwaysDeny,
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ctx() -> PolicyContext {
        PolicyContext {
            home: PathBuf::from("/home/u"),
            protected: vec![PathBuf::from("/home/u/.config/outpost")],
        }
    }

    fn read_only() -> ToolHints {
        ToolHints {
            read_only: true,
            ..ToolHints::default()
        }
    }

    fn eval(policy: &Policy, tool: &str, hints: ToolHints, path: Option<&str>) -> Verdict {
        let compiled = CompiledPolicy::new(policy.clone(), &ctx());
        let paths: Vec<PathBuf> = path.map(PathBuf::from).into_iter().collect();
        let folder = paths
            .first()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf);
        compiled.evaluate(
            &AccessRequest {
                tool,
                server: None,
                hints,
                paths: &paths,
                folder: folder.as_deref(),
                force_ask: None,
            },
            &ConversationGrants::default(),
        )
    }

    fn docs_policy() -> Policy {
        Policy {
            folders: vec![FolderRule {
                path: "~/docs".into(),
                access: FolderAccess::Allow,
                tools: None,
            }],
            ..Policy::default()
        }
    }

    #[test]
    fn read_only_tools_run_inside_scopes_and_ask_outside() {
        let p = docs_policy();
        let v = eval(
            &p,
            "read_local_file",
            read_only(),
            Some("/home/u/docs/a.txt"),
        );
        assert!(
            matches!(v, Verdict::Allow(Allowance::Folder { .. })),
            "{v:?}"
        );
        let v = eval(
            &p,
            "read_local_file",
            read_only(),
            Some("/home/u/docs-evil/a.txt"),
        );
        assert!(
            matches!(v, Verdict::Ask { .. }),
            "prefix trick must not match: {v:?}"
        );
        let v = eval(&p, "read_local_file", read_only(), Some("/home/u/a.txt"));
        match v {
            Verdict::Ask { options, .. } => assert!(options.contains(&Decision::AlwaysAllow)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn secrets_win_over_scopes_and_tool_allow_unless_excepted() {
        let mut p = docs_policy();
        p.folders.push(FolderRule {
            path: "~".into(),
            access: FolderAccess::Allow,
            tools: None,
        });
        p.tools.insert("read_local_file".into(), Rule::Allow);
        for path in [
            "/home/u/.ssh/id_rsa",
            "/home/u/docs/.env",
            "/home/u/docs/x.pem",
        ] {
            let v = eval(&p, "read_local_file", read_only(), Some(path));
            match v {
                Verdict::Deny { by, .. } => assert_eq!(by, Decider::SecretsList),
                other => panic!("{path}: {other:?}"),
            }
        }
        p.exceptions.push(Exception {
            path: "~/docs/.env".into(),
        });
        let v = eval(
            &p,
            "read_local_file",
            read_only(),
            Some("/home/u/docs/.env"),
        );
        assert!(matches!(v, Verdict::Allow(_)), "{v:?}");
        let v = eval(
            &p,
            "read_local_file",
            read_only(),
            Some("/home/u/docs/.env.local"),
        );
        assert!(
            matches!(v, Verdict::Deny { .. }),
            "exception is per path: {v:?}"
        );
    }

    #[test]
    fn widenings_name_what_allows_more_and_nothing_else() {
        let mut old = docs_policy();
        old.tools.insert("read_local_file".into(), Rule::Allow);
        old.tools.insert("web_fetch".into(), Rule::Ask);
        old.mcp_servers.insert("files".into(), Rule::Allow);
        old.folders.push(FolderRule {
            path: "~/docs/private".into(),
            access: FolderAccess::Deny,
            tools: None,
        });
        assert!(old.widenings(&old).is_empty());
        let mut narrower = old.clone();
        narrower.tools.insert("read_local_file".into(), Rule::Ask);
        narrower.tools.insert("web_fetch".into(), Rule::Deny);
        narrower.mcp_servers.insert("files".into(), Rule::Deny);
        narrower.folders.retain(|f| f.access == FolderAccess::Deny);
        narrower.consent_timeout_secs = 5;
        assert!(
            old.widenings(&narrower).is_empty(),
            "{:?}",
            old.widenings(&narrower)
        );
        let mut wider = old.clone();
        wider.allow_system_paths = true;
        wider.tools.insert("write_file".into(), Rule::Ask);
        wider.tools.remove("web_fetch");
        wider.mcp_servers.insert("evil".into(), Rule::Allow);
        wider.folders.retain(|f| f.access == FolderAccess::Allow);
        wider.folders.push(FolderRule {
            path: "~".into(),
            access: FolderAccess::Allow,
            tools: None,
        });
        wider.exceptions.push(Exception {
            path: "~/.ssh".into(),
        });
        let said = old.widenings(&wider).join("\n");
        for what in [
            "allow_system_paths",
            "\"write_file\": (no rule) → ask",
            "\"web_fetch\": ask → (no rule)",
            "[mcp_servers] \"evil\"",
            "a new allowed folder: ~",
            "no longer denied: ~/docs/private",
            "exception to the secrets list: ~/.ssh",
        ] {
            assert!(said.contains(what), "{what} missing:\n{said}");
        }
    }

    /// Issue 30, finding 3: Outpost's own settings and data are out of reach of every tool,
    /// reads and writes, whatever the policy says (allowed folder, tool allowed, an
    /// `[[exceptions]]` entry naming them).
    #[test]
    fn outpost_s_own_folders_are_denied_even_with_an_exception() {
        let mut p = docs_policy();
        p.folders.push(FolderRule {
            path: "~".into(),
            access: FolderAccess::Allow,
            tools: None,
        });
        p.tools.insert("read_local_file".into(), Rule::Allow);
        p.tools.insert("write_file".into(), Rule::Ask);
        p.exceptions.push(Exception {
            path: "~/.config/outpost".into(),
        });
        let write = ToolHints {
            destructive: true,
            ..ToolHints::default()
        };
        for (tool, hints) in [("read_local_file", read_only()), ("write_file", write)] {
            let v = eval(&p, tool, hints, Some("/home/u/.config/outpost/mcp.toml"));
            match v {
                Verdict::Deny { by, reason } => {
                    assert_eq!(by, Decider::SecretsList);
                    assert!(reason.contains("Outpost's own settings"), "{reason}");
                }
                other => panic!("{tool}: {other:?}"),
            }
        }
    }

    #[test]
    fn deny_wins_over_allow() {
        let mut p = docs_policy();
        p.folders.push(FolderRule {
            path: "~/docs/private".into(),
            access: FolderAccess::Deny,
            tools: None,
        });
        let v = eval(
            &p,
            "read_local_file",
            read_only(),
            Some("/home/u/docs/private/a"),
        );
        assert!(matches!(v, Verdict::Deny { .. }), "{v:?}");
        p.tools.insert("read_local_file".into(), Rule::Deny);
        let v = eval(&p, "read_local_file", read_only(), Some("/home/u/docs/a"));
        assert!(matches!(v, Verdict::Deny { .. }), "{v:?}");
    }

    #[test]
    fn destructive_tools_are_off_then_ask_every_time_without_always_allow() {
        let w = ToolHints {
            destructive: true,
            ..ToolHints::default()
        };
        let mut p = docs_policy();
        assert!(matches!(
            eval(&p, "write_file", w, Some("/home/u/docs/a")),
            Verdict::Deny { .. }
        ));
        p.tools.insert("write_file".into(), Rule::Allow);
        match eval(&p, "write_file", w, Some("/home/u/docs/a")) {
            Verdict::Ask { options, .. } => {
                assert!(!options.contains(&Decision::AlwaysAllow));
                assert!(!options.contains(&Decision::AllowForConversation));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn explicit_ask_always_asks_even_inside_scopes() {
        let mut p = docs_policy();
        p.tools.insert("read_local_file".into(), Rule::Ask);
        let v = eval(&p, "read_local_file", read_only(), Some("/home/u/docs/a"));
        assert!(matches!(v, Verdict::Ask { .. }), "{v:?}");
    }

    #[test]
    fn system_dirs_are_refused_by_default() {
        let p = Policy {
            tools: [("read_local_file".to_owned(), Rule::Allow)].into(),
            ..Policy::default()
        };
        for path in ["/proc/self/environ", "/sys/kernel", "/dev/zero"] {
            assert!(matches!(
                eval(&p, "read_local_file", read_only(), Some(path)),
                Verdict::Deny { .. }
            ));
        }
    }

    #[test]
    fn conversation_grants_cover_their_folder_only() {
        let compiled = CompiledPolicy::new(Policy::default(), &ctx());
        let mut grants = ConversationGrants::default();
        grants.grant("read_local_file", Some(Path::new("/home/u/notes")));
        let ask = |p: &str| {
            let paths = vec![PathBuf::from(p)];
            compiled.evaluate(
                &AccessRequest {
                    tool: "read_local_file",
                    server: None,
                    hints: read_only(),
                    paths: &paths,
                    folder: None,
                    force_ask: None,
                },
                &grants,
            )
        };
        assert_eq!(
            ask("/home/u/notes/a"),
            Verdict::Allow(Allowance::Conversation)
        );
        assert!(matches!(ask("/home/u/notes2/a"), Verdict::Ask { .. }));
    }

    #[cfg(unix)]
    #[test]
    fn missing_paths_resolve_through_the_links_that_exist() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("secret/sub")).unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/a.txt"), "a").unwrap();
        symlink(root.join("secret"), root.join("docs/to_secret")).unwrap();
        symlink("../secret/key", root.join("docs/dangling")).unwrap();
        symlink("loop2", root.join("docs/loop1")).unwrap();
        symlink("loop1", root.join("docs/loop2")).unwrap();
        let c = |rel: &str| canonical_or_clean(&root.join(rel));
        // Existing paths: exactly canonicalize.
        assert_eq!(c("docs/to_secret/sub"), root.join("secret/sub"));
        // A missing file under a symlinked folder is where the link leads.
        assert_eq!(c("docs/to_secret/nope/x"), root.join("secret/nope/x"));
        // A dangling link is followed to where it would lead.
        assert_eq!(c("docs/dangling"), root.join("secret/key"));
        assert_eq!(c("docs/dangling/more"), root.join("secret/key/more"));
        // `..` after a folder that does not exist is lexical; through a link, it is real.
        assert_eq!(c("docs/nope/../a.txt"), root.join("docs/a.txt"));
        assert_eq!(c("docs/nope/../../secret/x"), root.join("secret/x"));
        assert_eq!(c("docs/to_secret/../x"), root.join("x"));
        // Below a file, and link loops, end without hanging.
        assert_eq!(c("docs/a.txt/x"), root.join("docs/a.txt/x"));
        assert!(c("docs/loop1").starts_with(root.join("docs")));
        // Relative paths are only cleaned.
        assert_eq!(
            canonical_or_clean(Path::new("a/./b/../c")),
            PathBuf::from("a/c")
        );
    }

    #[test]
    fn check_names_the_bad_entry() {
        let mut p = Policy::default();
        p.folders.push(FolderRule {
            path: "relative/dir".into(),
            access: FolderAccess::Allow,
            tools: None,
        });
        let e = p.check().unwrap_err();
        assert!(e.contains("folders[0].path"), "{e}");
        p.folders.clear();
        p.consent_timeout_secs = 0;
        assert!(p.check().unwrap_err().contains("consent_timeout_secs"));
    }

    fn eval_mcp(policy: &Policy, tool: &str, server: &str, grants: &ConversationGrants) -> Verdict {
        let compiled = CompiledPolicy::new(policy.clone(), &ctx());
        compiled.evaluate(
            &AccessRequest {
                tool,
                server: Some(server),
                // Whatever the server claims, the hints of an MCP tool change nothing.
                hints: ToolHints {
                    read_only: true,
                    destructive: true,
                    open_world: false,
                    asks_every_time: false,
                },
                paths: &[],
                folder: None,
                force_ask: None,
            },
            grants,
        )
    }

    #[test]
    fn mcp_tools_ask_by_default_and_follow_tool_then_server_rules_with_deny_winning() {
        let none = ConversationGrants::default();
        let t = "mcp__time__now";
        let mut p = Policy::default();
        let v = eval_mcp(&p, t, "time", &none);
        assert!(
            matches!(&v, Verdict::Ask { options, reason } if options.contains(&Decision::AlwaysAllow) && reason.contains("'time'")),
            "{v:?}"
        );
        p.mcp_servers.insert("time".into(), Rule::Allow);
        assert_eq!(
            eval_mcp(&p, t, "time", &none),
            Verdict::Allow(Allowance::ToolRule)
        );
        // Another server's rule does not apply.
        assert!(matches!(
            eval_mcp(&p, "mcp__other__x", "other", &none),
            Verdict::Ask { .. }
        ));
        // The tool's own rule comes before its server's.
        p.tools.insert(t.into(), Rule::Ask);
        assert!(matches!(
            eval_mcp(&p, t, "time", &none),
            Verdict::Ask { .. }
        ));
        // Deny wins, whichever level says it.
        p.tools.insert(t.into(), Rule::Allow);
        p.mcp_servers.insert("time".into(), Rule::Deny);
        let v = eval_mcp(&p, t, "time", &none);
        assert!(
            matches!(&v, Verdict::Deny { reason, .. } if reason.contains("MCP server 'time'")),
            "{v:?}"
        );
        p.mcp_servers.insert("time".into(), Rule::Allow);
        p.tools.insert(t.into(), Rule::Deny);
        assert!(matches!(
            eval_mcp(&p, t, "time", &none),
            Verdict::Deny { .. }
        ));
        // A conversation grant covers the tool (no paths), not its neighbours.
        let mut grants = ConversationGrants::default();
        grants.grant("mcp__srv__a", None);
        let p = Policy::default();
        assert_eq!(
            eval_mcp(&p, "mcp__srv__a", "srv", &grants),
            Verdict::Allow(Allowance::Conversation)
        );
        assert!(matches!(
            eval_mcp(&p, "mcp__srv__b", "srv", &grants),
            Verdict::Ask { .. }
        ));
    }

    #[test]
    fn the_effective_mcp_rule_is_what_evaluate_does_for_every_combination() {
        let none = ConversationGrants::default();
        let t = "mcp__srv__a";
        let levels = [None, Some(Rule::Allow), Some(Rule::Ask), Some(Rule::Deny)];
        for own in levels {
            for server in levels {
                let mut p = Policy::default();
                if let Some(r) = own {
                    p.tools.insert(t.into(), r);
                }
                if let Some(r) = server {
                    p.mcp_servers.insert("srv".into(), r);
                }
                let want = match eval_mcp(&p, t, "srv", &none) {
                    Verdict::Allow(_) => Rule::Allow,
                    Verdict::Ask { .. } => Rule::Ask,
                    Verdict::Deny { .. } => Rule::Deny,
                };
                assert_eq!(p.mcp_tool_rule(t, "srv"), want, "{own:?} {server:?}");
            }
        }
    }

    #[test]
    fn the_mcp_servers_table_reads_from_toml_and_rejects_empty_names() {
        let p: Policy = toml::from_str("[mcp_servers]\ntime = \"allow\"\nfs = \"deny\"\n").unwrap();
        assert_eq!(p.mcp_servers.get("time"), Some(&Rule::Allow));
        assert_eq!(p.mcp_servers.get("fs"), Some(&Rule::Deny));
        assert!(p.check().is_ok());
        let p: Policy = toml::from_str("[mcp_servers]\n\" \" = \"allow\"\n").unwrap();
        assert!(p.check().unwrap_err().contains("mcp_servers"));
        assert!(toml::from_str::<Policy>("[mcp_servers]\ntime = \"sometimes\"\n").is_err());
    }
}
