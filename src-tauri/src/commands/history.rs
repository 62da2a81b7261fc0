//! `history_*`: past conversations, search, export.

use outpost_desktop::Desktop;
use outpost_desktop::contract::{
    ConversationDetail, ConversationSummary, ExportFormat, ExportResult, SearchHit,
};
use serde::Serialize;
use tauri::{AppHandle, Manager, Runtime, State};

use crate::error::{CmdResult, err};

/// Conversations, newest first.
#[tauri::command]
pub async fn history_list(
    desktop: State<'_, Desktop>,
    limit: u32,
    offset: u32,
) -> CmdResult<Vec<ConversationSummary>> {
    desktop.history_list(limit, offset).await.map_err(err)
}

/// Plain-text search with marked snippets.
#[tauri::command]
pub async fn history_search(
    desktop: State<'_, Desktop>,
    query: String,
    limit: u32,
    highlight_start: String,
    highlight_end: String,
) -> CmdResult<Vec<SearchHit>> {
    desktop
        .history_search(query, limit, highlight_start, highlight_end)
        .await
        .map_err(err)
}

/// One conversation, read-only.
#[tauri::command]
pub async fn history_get(
    desktop: State<'_, Desktop>,
    conversation_id: String,
) -> CmdResult<ConversationDetail> {
    desktop.history_get(&conversation_id).await.map_err(err)
}

/// Continues a stored conversation in the live session.
#[tauri::command]
pub async fn history_continue(
    desktop: State<'_, Desktop>,
    conversation_id: String,
) -> CmdResult<()> {
    desktop
        .history_continue(&conversation_id)
        .await
        .map_err(err)
}

/// Exports one conversation (or all) into the downloads folder.
#[tauri::command]
pub async fn history_export<R: Runtime>(
    app: AppHandle<R>,
    desktop: State<'_, Desktop>,
    conversation_id: Option<String>,
    format: ExportFormat,
) -> CmdResult<ExportResult> {
    let dir = match std::env::var_os("OUTPOST_EXPORT_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None => app
            .path()
            .download_dir()
            .or_else(|_| app.path().home_dir())
            .map_err(|e| {
                err(outpost_desktop::DesktopError::Internal(format!(
                    "Cannot find a folder to export into: {e}"
                )))
            })?,
    };
    desktop
        .history_export(conversation_id, format, &dir)
        .await
        .map_err(err)
}

/// `{ deleted }`.
#[derive(Debug, Serialize)]
pub struct Deleted {
    deleted: u64,
}

/// Deletes every conversation but the live one.
#[tauri::command]
pub async fn history_delete_all(desktop: State<'_, Desktop>) -> CmdResult<Deleted> {
    let deleted = desktop.history_delete_all().await.map_err(err)?;
    Ok(Deleted { deleted })
}
