//! [`Desktop`]'s consent commands (`consent_*`).

use outpost_policy::{FolderAccess, FolderRule, Rule};

use crate::contract::{Decision, RememberedDecision, RememberedKind};
use crate::error::{DesktopError, Result};

use crate::desktop::Desktop;

impl Desktop {
    /// `consent_answer`.
    pub fn answer_consent(&self, consent_id: &str, decision: Decision) -> Result<()> {
        // The broker checks the answer and closes the question for every window
        // (`consent_withdrawn`, reason `answered`, through the core's events).
        self.inner.core.answer_consent(consent_id, decision)?;
        Ok(())
    }

    /// `consent_list_remembered`: the "always" answers written to the policy. (This
    /// session's "for this conversation" grants are kept by the executor and not listed.)
    pub fn remembered(&self) -> Vec<RememberedDecision> {
        let policy = self.inner.core.permissions().policy().current();
        let p = policy.policy();
        let mut out = Vec::new();
        for (tool, rule) in &p.tools {
            let decision = match rule {
                Rule::Allow => RememberedKind::AlwaysAllow,
                Rule::Deny => RememberedKind::AlwaysDeny,
                Rule::Ask => continue,
            };
            out.push(RememberedDecision {
                id: format!("tool:{tool}"),
                tool: tool.clone(),
                decision,
                folder: None,
                conversation_id: None,
                at: None,
            });
        }
        for f in &p.folders {
            let Some([tool]) = f.tools.as_deref() else {
                continue;
            };
            out.push(RememberedDecision {
                id: folder_id(f),
                tool: tool.clone(),
                decision: match f.access {
                    FolderAccess::Allow => RememberedKind::AlwaysAllow,
                    FolderAccess::Deny => RememberedKind::AlwaysDeny,
                },
                folder: Some(f.path.clone()),
                conversation_id: None,
                at: None,
            });
        }
        out
    }

    /// `consent_revoke`.
    pub fn revoke(&self, id: &str) -> Result<()> {
        if !self.remembered().iter().any(|r| r.id == id) {
            return Err(DesktopError::NotFound(format!(
                "No remembered decision '{id}' (it may have been revoked already)."
            )));
        }
        self.inner.core.permissions().policy().update(|p| {
            if let Some(tool) = id.strip_prefix("tool:") {
                p.tools.remove(tool);
            } else {
                p.folders.retain(|f| folder_id(f) != id);
            }
        })?;
        Ok(())
    }
}

fn folder_id(f: &FolderRule) -> String {
    let access = match f.access {
        FolderAccess::Allow => "allow",
        FolderAccess::Deny => "deny",
    };
    let tools = f.tools.as_deref().unwrap_or_default().join(",");
    format!("folder:{access}:{tools}:{}", f.path)
}
