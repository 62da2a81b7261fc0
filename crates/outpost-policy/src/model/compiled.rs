//! A [`Policy`] compiled against a machine ([`CompiledPolicy`]), and the evaluation of one
//! call, strongest rule first (the order is in the module above).

use std::path::{Path, PathBuf};

use crate::secrets::SecretsList;

use super::*;

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
            options: Decision::ALL.to_vec(),
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
            options: Decision::ALL.to_vec(),
        }
    }
}
