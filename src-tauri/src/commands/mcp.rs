//! `mcp_servers_*`: the user's MCP servers (Settings → Tool servers). Only these commands,
//! which the UI calls on the user's action, change `mcp.toml`; nothing an assistant sends
//! reaches them.

use outpost_desktop::Desktop;
use outpost_desktop::contract::{
    ElicitationAction, JsonObject, McpImportPreview, McpServerDraft, McpServerInfo, McpServerTools,
    ToolRule,
};
use tauri::State;

use crate::error::{CmdResult, err};

/// Every configured server with its status.
#[tauri::command]
pub fn mcp_servers_list(desktop: State<'_, Desktop>) -> CmdResult<Vec<McpServerInfo>> {
    desktop.mcp_servers().map_err(err)
}

// Adding, enabling and removing may start or stop a server's supervisor task: async
// commands run on the app's tokio runtime (sync ones would run on the main thread).

/// Adds a server (started at once in a live session when enabled).
#[tauri::command]
pub async fn mcp_servers_add(
    desktop: State<'_, Desktop>,
    server: McpServerDraft,
) -> CmdResult<McpServerInfo> {
    desktop.mcp_server_add(&server).map_err(err)
}

/// A server's settings for the edit form (secret values by name only).
#[tauri::command]
pub fn mcp_servers_get(desktop: State<'_, Desktop>, name: String) -> CmdResult<McpServerDraft> {
    desktop.mcp_server_get(&name).map_err(err)
}

/// Replaces a server's settings (restarted at once in a live session).
#[tauri::command]
pub async fn mcp_servers_update(
    desktop: State<'_, Desktop>,
    server: McpServerDraft,
) -> CmdResult<McpServerInfo> {
    desktop.mcp_server_update(&server).map_err(err)
}

/// Restarts a server of the live session.
#[tauri::command]
pub async fn mcp_servers_restart(
    desktop: State<'_, Desktop>,
    name: String,
) -> CmdResult<McpServerInfo> {
    desktop.mcp_server_restart(&name).map_err(err)
}

/// Sets a server's rule in the policy (allow, ask, deny).
#[tauri::command]
pub fn mcp_servers_set_rule(
    desktop: State<'_, Desktop>,
    name: String,
    rule: ToolRule,
) -> CmdResult<McpServerInfo> {
    desktop.mcp_server_set_rule(&name, rule).map_err(err)
}

/// A server's tools with their own and effective rules (may start the server on its own
/// to list them, when no session runs it).
#[tauri::command]
pub async fn mcp_servers_tools(
    desktop: State<'_, Desktop>,
    name: String,
    refresh: Option<bool>,
) -> CmdResult<McpServerTools> {
    desktop
        .mcp_server_tools(&name, refresh.unwrap_or(false))
        .await
        .map_err(err)
}

/// Sets one tool's rule in the policy (allow, ask, deny), or removes it (null: the tool
/// follows its server's rule).
#[tauri::command]
pub fn mcp_servers_set_tool_rule(
    desktop: State<'_, Desktop>,
    name: String,
    tool: String,
    rule: Option<ToolRule>,
) -> CmdResult<McpServerTools> {
    desktop
        .mcp_server_set_tool_rule(&name, &tool, rule)
        .map_err(err)
}

/// Enables or disables a server.
#[tauri::command]
pub async fn mcp_servers_set_enabled(
    desktop: State<'_, Desktop>,
    name: String,
    enabled: bool,
) -> CmdResult<McpServerInfo> {
    desktop.mcp_server_set_enabled(&name, enabled).map_err(err)
}

/// Removes a server.
#[tauri::command]
pub async fn mcp_servers_remove(desktop: State<'_, Desktop>, name: String) -> CmdResult<()> {
    desktop.mcp_server_remove(&name).await.map_err(err)
}

/// Signs in to an HTTP server with OAuth in the user's browser (waits for the login, at
/// most five minutes); the server starts again with the new tokens.
#[tauri::command]
pub async fn mcp_servers_sign_in(
    desktop: State<'_, Desktop>,
    name: String,
) -> CmdResult<McpServerInfo> {
    desktop
        .mcp_server_sign_in(&name, outpost_desktop::mcp::SIGN_IN_WAIT)
        .await
        .map_err(err)
}

/// Cancels a sign-in waiting for the browser (its `mcp_servers_sign_in` fails with
/// `cancelled`).
#[tauri::command]
pub fn mcp_servers_sign_in_cancel(desktop: State<'_, Desktop>, name: String) {
    desktop.mcp_server_sign_in_cancel(&name);
}

/// Signs out of an HTTP server: revokes and deletes its tokens.
#[tauri::command]
pub async fn mcp_servers_sign_out(
    desktop: State<'_, Desktop>,
    name: String,
) -> CmdResult<McpServerInfo> {
    desktop.mcp_server_sign_out(&name).await.map_err(err)
}

/// Confirms a server added or changed in mcp.toml outside Outpost (started at once in a
/// live session when enabled).
#[tauri::command]
pub async fn mcp_servers_trust(
    desktop: State<'_, Desktop>,
    name: String,
) -> CmdResult<McpServerInfo> {
    desktop.mcp_server_trust(&name).map_err(err)
}

/// The end of a server's stderr log.
#[tauri::command]
pub fn mcp_servers_log(desktop: State<'_, Desktop>, name: String) -> CmdResult<String> {
    desktop.mcp_server_log(&name).map_err(err)
}

/// Reads a Claude Desktop config for the review step (nothing is written or started).
#[tauri::command]
pub fn mcp_servers_import_preview(
    desktop: State<'_, Desktop>,
    text: String,
) -> CmdResult<McpImportPreview> {
    desktop.mcp_import_preview(&text).map_err(err)
}

/// Answers an MCP server's elicitation form: `accept` (with the content), `decline` or
/// `cancel`.
#[tauri::command]
pub fn mcp_elicitation_answer(
    desktop: State<'_, Desktop>,
    id: String,
    action: ElicitationAction,
    content: Option<JsonObject>,
) -> CmdResult<()> {
    desktop
        .mcp_elicitation_answer(&id, action, content)
        .map_err(err)
}
