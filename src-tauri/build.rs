//! Declares the app commands so each gets an `allow-…` permission, and only those the
//! capability lists (capabilities/default.json) can be called from the webview.

/// Every command of ui/CONTRACT.md (kept in the same order as `generate_handler!`).
const COMMANDS: &[&str] = &[
    "session_subscribe",
    "session_connect",
    "session_start_demo",
    "session_disconnect",
    "session_new_conversation",
    "session_test_connection",
    "chat_send",
    "chat_attach_pick",
    "chat_attach_data",
    "chat_attach_remove",
    "chat_open_link",
    "consent_answer",
    "consent_list_remembered",
    "consent_revoke",
    "settings_get",
    "settings_set",
    "settings_set_secret",
    "settings_clear_secret",
    "settings_pick_folder",
    "settings_about",
    "settings_trust_policy",
    "history_list",
    "history_search",
    "history_get",
    "history_continue",
    "history_export",
    "history_delete_all",
    "tools_list",
    "tools_set",
    "mcp_servers_list",
    "mcp_servers_add",
    "mcp_servers_get",
    "mcp_servers_update",
    "mcp_servers_restart",
    "mcp_servers_set_rule",
    "mcp_servers_tools",
    "mcp_servers_set_tool_rule",
    "mcp_servers_set_enabled",
    "mcp_servers_remove",
    "mcp_servers_trust",
    "mcp_servers_sign_in",
    "mcp_servers_sign_out",
    "mcp_servers_log",
    "mcp_servers_import_preview",
    "mcp_elicitation_answer",
    "voice_status",
    "voice_start",
    "voice_stop",
    "voice_control",
    "voice_devices",
    "voice_set_devices",
    "system_settings",
    "system_set",
];

fn main() {
    let attributes = tauri_build::Attributes::new()
        .app_manifest(tauri_build::AppManifest::new().commands(COMMANDS));
    if let Err(e) = tauri_build::try_build(attributes) {
        panic!("tauri-build failed: {e:#}");
    }
}
