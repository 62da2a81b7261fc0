//! [`Desktop`]'s tool commands (`tools_*`).

use outpost_policy::Rule;
use outpost_protocol::ToolDescriptor;

use crate::contract::{ToolInfo, ToolRule};
use crate::error::{DesktopError, Result};

use super::{Desktop, lock};

impl Desktop {
    /// `tools_list`.
    pub fn tools(&self) -> Vec<ToolInfo> {
        let policy = self.inner.core.permissions().policy().current();
        let disabled = self.config().disabled_tools;
        self.inner
            .tools
            .iter()
            .map(|t| tool_info(t, policy.policy().tools.get(&t.name).copied(), &disabled))
            .collect()
    }

    /// `tools_set`: on/off in the settings; allow/ask/deny in the policy. "ask" on a
    /// non-destructive tool returns it to its default (folder scopes decide, else ask).
    /// Takes effect for the next session (the hello lists the tools).
    pub fn set_tool(&self, name: &str, enabled: bool, rule: ToolRule) -> Result<ToolInfo> {
        let t = self
            .inner
            .tools
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| DesktopError::NotFound(format!("There is no tool '{name}'.")))?;
        let new_rule = match rule {
            ToolRule::Allow if t.destructive => {
                return Err(DesktopError::invalid(
                    "rule",
                    format!("'{name}' can change or delete data: it always asks"),
                ));
            }
            ToolRule::Allow => Some(Rule::Allow),
            ToolRule::Deny => Some(Rule::Deny),
            ToolRule::Ask if t.destructive => Some(Rule::Ask),
            ToolRule::Ask => None,
        };
        self.inner
            .core
            .permissions()
            .policy()
            .update(|p| match new_rule {
                Some(r) => {
                    p.tools.insert(name.to_owned(), r);
                }
                None => {
                    p.tools.remove(name);
                }
            })?;
        {
            let mut c = lock(&self.inner.config);
            c.disabled_tools.retain(|n| n != name);
            if !enabled {
                c.disabled_tools.push(name.to_owned());
            }
            c.save(&self.inner.paths.settings_file())?;
        }
        let disabled = self.config().disabled_tools;
        Ok(tool_info(t, new_rule, &disabled))
    }
}

fn tool_info(t: &ToolDescriptor, rule: Option<Rule>, disabled: &[String]) -> ToolInfo {
    let rule = match rule {
        Some(Rule::Allow) => ToolRule::Allow,
        Some(Rule::Deny) => ToolRule::Deny,
        Some(Rule::Ask) => ToolRule::Ask,
        // Destructive tools are off until the user sets a rule.
        None if t.destructive => ToolRule::Deny,
        None => ToolRule::Ask,
    };
    ToolInfo {
        name: t.name.clone(),
        description: t.description.clone(),
        server_name: t.server_name.clone(),
        claims: None,
        parameters: t.parameters.clone(),
        enabled: !disabled.iter().any(|d| d == &t.name),
        rule,
        read_only: t.read_only,
        destructive: t.destructive,
        open_world: t.open_world,
    }
}
