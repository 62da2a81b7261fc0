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
use outpost_protocol::{Map, Message, ToolDescriptor, ToolsChanged, Value};
use outpost_tools::{Access, Prepared, Registry, RunContext, Tool, ToolEnv, ToolError, ToolSpec};
use tokio::sync::mpsc;

/// Largest catalogue entry of one MCP tool, encoded (its schema, mostly). A bigger one is
/// left out: it would crowd every hello.
pub(crate) const MAX_TOOL_BYTES: usize = 64 * 1024;

/// Most tools offered from one server; the rest are left out.
pub(crate) const MAX_TOOLS_PER_SERVER: usize = 256;

/// Most bytes of MCP tools in the catalogue, encoded, over every server: the tools past it
/// are left out, so the hello and every ToolsChanged stay within it whatever the servers
/// list (each server's list is bounded by `outpost-mcp` too).
pub(crate) const MAX_CATALOGUE_BYTES: usize = 4 * 1024 * 1024;

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
        // What the server may touch goes with the question: its sandbox (or that it has
        // none), as the host planned it at the server's start.
        let reach = host
            .snapshot()
            .get(&server)
            .and_then(|s| s.reach.clone())
            .map(|r| r.summary());
        let summary = match reach {
            Some(r) => format!("Run '{name}' on the MCP server '{server}' ({r})"),
            None => format!("Run '{name}' on the MCP server '{server}'"),
        };
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

/// The size of an MCP tool's catalogue entry, encoded, or why it cannot be offered: its
/// entry breaks a protocol rule (a schema nested deeper than the protocol allows, a name
/// or description with control characters...) or is too large. Checked by encoding it as
/// the wire would.
fn entry_size(t: &McpTool) -> Result<usize, String> {
    let m = Message::ToolsChanged(ToolsChanged {
        tools: vec![descriptor(t)],
    });
    match outpost_protocol::encode(&m) {
        Err(e) => Err(format!("its catalogue entry is not valid: {e}")),
        Ok(b) if b.len() > MAX_TOOL_BYTES => Err(format!(
            "its catalogue entry takes {} bytes, more than {MAX_TOOL_BYTES}",
            b.len()
        )),
        Ok(b) => Ok(b.len()),
    }
}

/// A registry of every tool the host's running servers offer now. A tool that cannot be
/// offered ([`entry_size`], a parameter schema that cannot be compiled, past
/// [`MAX_TOOLS_PER_SERVER`] of its server or [`MAX_CATALOGUE_BYTES`] in all) is left out;
/// its name and why are returned.
pub(crate) fn registry(
    host: &McpHost,
    tools: &[McpTool],
    runtime: &tokio::runtime::Handle,
) -> (Registry, Vec<String>) {
    let mut reg = Registry::new();
    let mut left_out = Vec::new();
    let mut per_server: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut total = 0usize;
    for t in tools {
        let count = per_server.entry(t.server.as_str()).or_default();
        if *count >= MAX_TOOLS_PER_SERVER {
            left_out.push(format!(
                "{}: its server offers more than {MAX_TOOLS_PER_SERVER} tools",
                t.outpost_name
            ));
            continue;
        }
        let size = match entry_size(t) {
            Ok(size) => size,
            Err(why) => {
                left_out.push(format!("{}: {why}", t.outpost_name));
                continue;
            }
        };
        if total + size > MAX_CATALOGUE_BYTES {
            left_out.push(format!(
                "{}: the MCP tools already take {total} bytes of the catalogue (at most \
                 {MAX_CATALOGUE_BYTES})",
                t.outpost_name
            ));
            continue;
        }
        total += size;
        *count += 1;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use outpost_mcp::{ConnectOptions, HostOptions, MemorySecrets, ToolHints as McpHints};
    use serde_json::json;

    fn tool(server: &str, name: &str, schema: Value) -> McpTool {
        McpTool {
            server: server.into(),
            name: name.into(),
            outpost_name: outpost_mcp::naming::tool_name(server, name),
            title: None,
            description: "d".into(),
            input_schema: schema,
            output_schema: None,
            hints: McpHints::default(),
        }
    }

    fn idle_host() -> McpHost {
        McpHost::new(
            HostOptions::new(
                ConnectOptions::default(),
                std::sync::Arc::new(MemorySecrets::default()),
            ),
            Vec::new(),
        )
    }

    #[tokio::test]
    async fn hostile_catalogue_entries_are_left_out_and_the_rest_offered() {
        let host = idle_host();
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let big = json!({"type": "object", "description": "x".repeat(MAX_TOOL_BYTES)});
        // A description is free text: a control character in it is the server's business.
        let mut control = tool("s", "ctl", json!({"type": "object"}));
        control.description = "bell \u{7}".into();
        let mut tools = vec![
            tool(
                "s",
                "ok",
                json!({"type": "object", "properties": {"m": {"type": "string"}}}),
            ),
            tool("s", "deep", deep),
            tool("s", "big", big),
            tool("s", "bad-schema", json!({"type": 12})),
            // Not an object schema at all: offered with an empty object schema.
            tool("s", "odd", json!("anything")),
        ];
        tools.push(control);
        for i in 0..(MAX_TOOLS_PER_SERVER + 3) {
            tools.push(tool("many", &format!("t{i}"), json!({"type": "object"})));
        }
        let (reg, left_out) = registry(&host, &tools, &tokio::runtime::Handle::current());
        let names: Vec<&str> = reg.names().collect();
        assert!(names.contains(&"mcp__s__ok"), "{names:?}");
        assert!(names.contains(&"mcp__s__odd"), "{names:?}");
        assert!(names.contains(&"mcp__s__ctl"), "{names:?}");
        for gone in ["mcp__s__deep", "mcp__s__big", "mcp__s__bad-schema"] {
            assert!(!names.contains(&gone), "{gone} offered");
            assert!(
                left_out.iter().any(|w| w.starts_with(gone)),
                "{gone}: {left_out:?}"
            );
        }
        assert_eq!(
            names
                .iter()
                .filter(|n| n.starts_with("mcp__many__"))
                .count(),
            MAX_TOOLS_PER_SERVER
        );
        // What is offered always makes a valid ToolsChanged.
        let all: Vec<ToolDescriptor> = reg.descriptors();
        outpost_protocol::encode(&Message::ToolsChanged(ToolsChanged { tools: all })).unwrap();
    }

    /// Issue 30, finding 6: however many servers list big tools, the MCP part of the
    /// catalogue stays within its bound (here 8 servers × 200 tools of 6 KB: 9.6 MB
    /// listed).
    #[tokio::test]
    async fn the_whole_catalogue_is_bounded_over_every_server() {
        let host = idle_host();
        let mut tools = Vec::new();
        for s in 0..8 {
            for i in 0..200 {
                let mut t = tool(
                    &format!("s{s}"),
                    &format!("t{i}"),
                    json!({"type": "object"}),
                );
                t.description = "d".repeat(6000);
                tools.push(t);
            }
        }
        let (reg, left_out) = registry(&host, &tools, &tokio::runtime::Handle::current());
        let all: Vec<ToolDescriptor> = reg.descriptors();
        let bytes = outpost_protocol::encode(&Message::ToolsChanged(ToolsChanged { tools: all }))
            .unwrap()
            .len();
        assert!(bytes <= MAX_CATALOGUE_BYTES + 1024, "{bytes}");
        assert!(!left_out.is_empty() && left_out.iter().all(|w| w.contains("of the catalogue")));
        assert!(reg.names().count() > 500, "{}", reg.names().count());
    }
}
