//! `chat_*`: what the user says, and links from the assistant's text.

use outpost_desktop::contract::UserMessage;
use outpost_desktop::{Desktop, check_link};
use tauri::State;

use crate::error::{CmdResult, err};

/// Sends a user message.
#[tauri::command]
pub async fn chat_send(desktop: State<'_, Desktop>, text: String) -> CmdResult<UserMessage> {
    desktop.send(text).await.map_err(err)
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
