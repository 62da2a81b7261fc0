//! `tools_*`: the local tools and their rules.

use outpost_desktop::Desktop;
use outpost_desktop::contract::{ToolInfo, ToolRule};
use tauri::State;

use crate::error::{CmdResult, err};

/// Every built-in tool with its rule.
#[tauri::command]
pub fn tools_list(desktop: State<'_, Desktop>) -> Vec<ToolInfo> {
    desktop.tools()
}

/// Switches a tool on or off and sets its rule.
#[tauri::command]
pub fn tools_set(
    desktop: State<'_, Desktop>,
    name: String,
    enabled: bool,
    rule: ToolRule,
) -> CmdResult<ToolInfo> {
    desktop.set_tool(&name, enabled, rule).map_err(err)
}
