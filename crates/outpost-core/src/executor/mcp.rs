//! The user's MCP servers' tools as Outpost tools: an [`outpost_tools::Tool`] per tool an
//! [`McpHost`] offers, built again whenever a server's tool list changes.
//!
//! An MCP tool touches nothing Outpost can resolve, so it has no paths: the policy judges
//! it by its rule and its server's (`[tools]`, `[mcp_servers]`; default ask), and its
//! annotations travel to the consent prompt as the server's claims only. The call runs as
//! a job on the blocking pool that waits for the MCP call: the dispatcher's deadline and a
//! ToolUseCancel set the job's token, which sends the server `notifications/cancelled`;
//! the server's progress notifications become ToolUseProgress `running` with a detail.

use std::time::Duration;

use outpost_mcp::{CallOptions, McpError, McpHost, McpTool, Progress};
use outpost_policy::{ServerClaims, ToolHints};
use outpost_protocol::{Map, ToolDescriptor, Value};
use outpost_tools::{Access, Prepared, Registry, RunContext, Tool, ToolEnv, ToolError, ToolSpec};
use tokio::sync::mpsc;

/// The longest an MCP call may take on its own; the request's `timeoutMs` (at most an hour)
/// is enforced by the dispatcher, which cancels the call.
const CALL_BOUND: Duration = Duration::from_secs(3600);

/// One MCP tool as an Outpost tool.
struct McpToolAdapter {
    host: McpHost,
    tool: McpTool,
    runtime: tokio::runtime::Handle,
}

/// What the server claims, as the policy's value type.
pub(crate) fn claims(t: &McpTool) -> ServerClaims {
    ServerClaims {
        read_only: t.hints.read_only,
        destructive: t.hints.destructive,
        idempotent: t.hints.idempotent,
        open_world: t.hints.open_world,
    }
}

/// The catalogue entry of an MCP tool. The descriptor's hints describe the tool to the
/// assistant with MCP's defaults for what the server did not say (not read-only,
/// destructive, open world); they are the server's claims and grant nothing.
pub(crate) fn descriptor(t: &McpTool) -> ToolDescriptor {
    let parameters = match &t.input_schema {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let read_only = t.hints.read_only == Some(true);
    ToolDescriptor {
        name: t.outpost_name.clone(),
        description: t.description.clone(),
        parameters,
        result_schema: None,
        read_only,
        destructive: !read_only && t.hints.destructive != Some(false),
        open_world: t.hints.open_world != Some(false),
        server_name: Some(t.server.clone()),
        timeout_ms: None,
    }
}

fn progress_line(p: &Progress) -> String {
    let amount = match p.total {
        Some(total) => format!("{}/{}", p.progress, total),
        None => format!("{}", p.progress),
    };
    match &p.message {
        Some(m) => format!("{amount}: {m}"),
        None => amount,
    }
}

fn tool_error(e: McpError) -> ToolError {
    match e {
        // Whoever cancelled (the user, the assistant, the deadline) decides the answer.
        McpError::Cancelled { .. } | McpError::Timeout { .. } => ToolError::Cancelled,
        other => ToolError::exec(other.to_string()),
    }
}

impl Tool for McpToolAdapter {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            descriptor: descriptor(&self.tool),
            // Outpost's own hints for the policy: none. An MCP tool's rules decide.
            hints: ToolHints::default(),
            claims: Some(claims(&self.tool)),
        }
    }

    fn prepare(&self, params: Map, _env: &ToolEnv) -> outpost_tools::Result<Prepared> {
        let host = self.host.clone();
        let server = self.tool.server.clone();
        let name = self.tool.name.clone();
        let runtime = self.runtime.clone();
        let summary = format!("Run '{name}' on the MCP server '{server}'");
        let job = move |cx: &RunContext| {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let opts = CallOptions {
                timeout: CALL_BOUND,
                cancel: cx.cancel.clone(),
                progress: Some(tx),
            };
            let sink = cx.progress.clone();
            let outcome = runtime.block_on(async {
                let call = host.call(&server, &name, Some(params), opts);
                tokio::pin!(call);
                loop {
                    tokio::select! {
                        r = &mut call => break r,
                        Some(p) = rx.recv() => sink.report(progress_line(&p)),
                    }
                }
            });
            let outcome = outcome.map_err(tool_error)?;
            if outcome.is_error {
                let text = outcome
                    .result
                    .get("text")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .unwrap_or("no message")
                    .to_owned();
                return Err(ToolError::Execution {
                    message: format!(
                        "The MCP server '{server}' reports that '{name}' failed: {text}"
                    ),
                    partial: Some(outcome.result),
                });
            }
            Ok(outcome.result)
        };
        Ok(Prepared {
            access: Access {
                summary,
                ..Access::default()
            },
            job: Box::new(job),
        })
    }
}

/// A registry of every tool the host's running servers offer now. A tool whose parameter
/// schema cannot be compiled is left out; its name and why are returned.
pub(crate) fn registry(
    host: &McpHost,
    tools: &[McpTool],
    runtime: &tokio::runtime::Handle,
) -> (Registry, Vec<String>) {
    let mut reg = Registry::new();
    let mut left_out = Vec::new();
    for t in tools {
        let adapter = McpToolAdapter {
            host: host.clone(),
            tool: t.clone(),
            runtime: runtime.clone(),
        };
        if let Err(e) = reg.register(adapter) {
            left_out.push(format!("{}: {e}", t.outpost_name));
        }
    }
    (reg, left_out)
}
