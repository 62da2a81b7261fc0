//! `chat_*`: what the user says, the files that go with it, and links from the
//! assistant's text.

use outpost_desktop::contract::{AttachmentView, UserMessage};
use outpost_desktop::{Desktop, check_link};
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_dialog::DialogExt as _;

use crate::error::{CmdResult, err};

/// Sends a user message.
#[tauri::command]
pub async fn chat_send(desktop: State<'_, Desktop>, text: String) -> CmdResult<UserMessage> {
    desktop.send(text).await.map_err(err)
}

/// Shows the native file picker and stages the chosen file; the staged files, unchanged
/// when the picker was cancelled.
#[tauri::command]
pub async fn chat_attach_pick<R: Runtime>(
    app: AppHandle<R>,
    desktop: State<'_, Desktop>,
) -> CmdResult<Vec<AttachmentView>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.dialog().file().pick_file(move |picked| {
        let _ = tx.send(picked);
    });
    match rx.await.ok().flatten().and_then(|p| p.into_path().ok()) {
        Some(path) => desktop.attach_path(&path).map_err(err),
        None => Ok(desktop.attachments_staged()),
    }
}

/// Stages a pasted file (its bytes as base64).
#[tauri::command]
pub fn chat_attach_data(
    desktop: State<'_, Desktop>,
    name: String,
    mime_type: Option<String>,
    data: String,
) -> CmdResult<Vec<AttachmentView>> {
    desktop
        .attach_data(&name, mime_type.as_deref(), &data)
        .map_err(err)
}

/// Takes a staged file off the next message.
#[tauri::command]
pub fn chat_attach_remove(desktop: State<'_, Desktop>, id: String) -> Vec<AttachmentView> {
    desktop.attach_remove(&id)
}

/// Opens an http(s) or mailto link in the system's browser or mail app.
#[tauri::command]
pub fn chat_open_link(url: String) -> CmdResult<()> {
    check_link(&url).map_err(err)?;
    open::that_detached(url.trim()).map_err(|e| {
        err(outpost_desktop::DesktopError::Internal(format!(
            "Could not open the link: {e}"
        )))
    })
}
