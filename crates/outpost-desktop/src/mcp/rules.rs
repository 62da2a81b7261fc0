//! Per-tool rules in the pane: the tools each server listed last and their own and
//! effective rules under the policy.

use super::*;

/// The tools each server listed last (live, or started for the pane), so the pane shows
/// them and their rules without starting a server again.
#[derive(Debug, Default)]
pub struct ToolLists {
    seen: Mutex<HashMap<String, Arc<Vec<McpTool>>>>,
}

fn tool_rule(r: Rule) -> ToolRule {
    match r {
        Rule::Allow => ToolRule::Allow,
        Rule::Ask => ToolRule::Ask,
        Rule::Deny => ToolRule::Deny,
    }
}

/// What the pane shows for `server`'s tools under `policy`: each tool it offers with its
/// own and its effective rule, then the rules under `[tools]` for tools of that server
/// it does not offer (so a rule never hides).
fn tool_infos(server: &str, tools: &[McpTool], policy: &Policy) -> McpServerTools {
    let own = |name: &str| policy.tools.get(name).copied().map(tool_rule);
    let mut out: Vec<McpToolInfo> = tools
        .iter()
        .map(|t| McpToolInfo {
            name: t.name.clone(),
            outpost_name: t.outpost_name.clone(),
            title: t.title.clone(),
            description: t.description.clone(),
            claims: Some(ServerClaims {
                read_only: t.hints.read_only,
                destructive: t.hints.destructive,
                idempotent: t.hints.idempotent,
                open_world: t.hints.open_world,
            })
            .filter(|c| *c != ServerClaims::default()),
            rule: own(&t.outpost_name),
            effective: tool_rule(policy.mcp_tool_rule(&t.outpost_name, server)),
            offered: true,
        })
        .collect();
    for name in policy.tools.keys() {
        let Some(tool) = outpost_mcp::naming::tool_of(name, server) else {
            continue;
        };
        if !out.iter().any(|t| &t.outpost_name == name) {
            out.push(McpToolInfo {
                name: tool.to_owned(),
                outpost_name: name.clone(),
                title: None,
                description: String::new(),
                claims: None,
                rule: own(name),
                effective: tool_rule(policy.mcp_tool_rule(name, server)),
                offered: false,
            });
        }
    }
    McpServerTools {
        server: server.to_owned(),
        server_rule: tool_rule(policy.mcp_servers.get(server).copied().unwrap_or(Rule::Ask)),
        tools: out,
        problem: None,
    }
}

impl ToolLists {
    pub(super) fn remember(&self, server: &str, tools: Arc<Vec<McpTool>>) {
        lock(&self.seen).insert(server.to_owned(), tools);
    }

    fn known(&self, server: &str) -> Option<Arc<Vec<McpTool>>> {
        lock(&self.seen).get(server).cloned()
    }

    /// `mcp_servers_tools`: `name`'s tools and their rules. From the live session when
    /// the server runs there; else the list seen last, unless `refresh`; else the server
    /// is started on its own (as `outpost mcp tools`: within `wait`, no roots, forms
    /// declined), listed and stopped. A server that does not start gives the rules only,
    /// with the reason.
    pub async fn tools(
        &self,
        paths: &Paths,
        host: Option<&McpHost>,
        policy: &PolicyStore,
        name: &str,
        refresh: bool,
        wait: Duration,
    ) -> Result<McpServerTools> {
        let cfg = load(paths)?;
        let Some(server) = cfg.servers.get(name) else {
            return Err(mcp_err(McpError::UnknownServer(name.to_owned())));
        };
        // Starting in the live session (at connect, or just enabled): its list is coming;
        // a second copy of the server is not started for it.
        if let Some(h) = host
            && h.snapshot()
                .get(name)
                .is_some_and(|st| matches!(st.status, ServerStatus::Starting))
        {
            let _ = h.wait_running(name, wait).await;
        }
        let live = host
            .and_then(|h| h.snapshot().get(name).cloned())
            .filter(|st| matches!(st.status, ServerStatus::Running));
        let mut problem = None;
        let tools = if let Some(st) = live {
            self.remember(name, Arc::clone(&st.tools));
            st.tools
        } else if let Some(known) = self.known(name).filter(|_| !refresh) {
            known
        } else if unconfirmed(paths, &cfg).iter().any(|n| n == name) {
            // Never run a server the user has not confirmed, not even to list its tools.
            problem = Some(format!(
                "The server is not started: {}",
                outpost_mcp::trust::unconfirmed_message(name)
            ));
            Arc::new(Vec::new())
        } else {
            // Sandboxed as at connect, without the allowed folders (as without roots).
            let opts = ConnectOptions {
                log_dir: Some(config::log_dir(&paths.data_dir)),
                start_timeout: wait,
                sandbox: outpost_mcp::SandboxOptions {
                    gate: outpost_core::mcp_gate(policy.clone()),
                    ..outpost_mcp::SandboxOptions::default()
                },
                ..ConnectOptions::default()
            };
            let secrets = outpost_mcp::secrets::from_env();
            let listed = async {
                let conn = Connection::open(name, server, &secrets, &opts).await?;
                let tools = conn.list_tools(wait).await;
                conn.close();
                tools
            }
            .await;
            match listed {
                Ok(t) => {
                    let t = Arc::new(t);
                    self.remember(name, Arc::clone(&t));
                    t
                }
                Err(e) => {
                    problem = Some(format!("The server did not list its tools: {e}"));
                    Arc::new(Vec::new())
                }
            }
        };
        let mut out = tool_infos(name, &tools, policy.current().policy());
        out.problem = problem;
        Ok(out)
    }

    /// `mcp_servers_set_tool_rule`: `tool`'s own rule (by its Outpost name, a tool of
    /// `name`) under `[tools]` in policy.toml: allow, ask or deny; none removes it, so the
    /// tool follows its server's rule. Returns the server's tools as listed last (nothing
    /// is started).
    pub fn set_rule(
        &self,
        paths: &Paths,
        host: Option<&McpHost>,
        policy: &PolicyStore,
        name: &str,
        tool: &str,
        rule: Option<ToolRule>,
    ) -> Result<McpServerTools> {
        if !load(paths)?.servers.contains_key(name) {
            return Err(mcp_err(McpError::UnknownServer(name.to_owned())));
        }
        let prefix = outpost_mcp::naming::prefix(name);
        if outpost_mcp::naming::tool_of(tool, name).is_none()
            || tool.len() > 128
            || !tool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(DesktopError::invalid(
                "tool",
                format!("'{tool}' is not the Outpost name of a tool of '{name}' ({prefix}TOOL)"),
            ));
        }
        policy.update(|p| match rule {
            Some(ToolRule::Allow) => {
                p.tools.insert(tool.to_owned(), Rule::Allow);
            }
            Some(ToolRule::Ask) => {
                p.tools.insert(tool.to_owned(), Rule::Ask);
            }
            Some(ToolRule::Deny) => {
                p.tools.insert(tool.to_owned(), Rule::Deny);
            }
            None => {
                p.tools.remove(tool);
            }
        })?;
        let live = host
            .and_then(|h| h.snapshot().get(name).cloned())
            .filter(|st| matches!(st.status, ServerStatus::Running))
            .map(|st| st.tools);
        let tools = live.or_else(|| self.known(name)).unwrap_or_default();
        Ok(tool_infos(name, &tools, policy.current().policy()))
    }
}
