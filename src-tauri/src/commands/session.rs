//! `session_*`: the link to the assistant and the UI's event channel.

use outpost_desktop::Desktop;
use outpost_desktop::contract::{
    AppEvent, ConnectionSettings, ConnectionTestResult, SessionInfo, SessionSnapshot,
};
use tauri::State;
use tauri::ipc::Channel;

use crate::error::{CmdResult, err};

/// Registers the UI's event channel and returns the state now.
#[tauri::command]
pub fn session_subscribe(
    desktop: State<'_, Desktop>,
    on_event: Channel<AppEvent>,
) -> SessionSnapshot {
    // The first call the UI makes once its page is up: startup measurements look for this.
    tracing::info!("ui subscribed");
    desktop.subscribe(Box::new(move |ev| {
        if let Err(e) = on_event.send(ev) {
            tracing::debug!(error = %e, "the UI channel is gone");
        }
    }))
}

/// Connects with the saved settings.
#[tauri::command]
pub async fn session_connect(desktop: State<'_, Desktop>) -> CmdResult<()> {
    desktop.connect().await.map_err(err)
}

/// Starts the local demo and connects to it.
#[tauri::command]
pub async fn session_start_demo(desktop: State<'_, Desktop>) -> CmdResult<()> {
    desktop.start_demo().await.map_err(err)
}

/// Leaves the room.
#[tauri::command]
pub async fn session_disconnect(desktop: State<'_, Desktop>) -> CmdResult<()> {
    desktop.disconnect().await;
    Ok(())
}

/// Starts a new conversation.
#[tauri::command]
pub async fn session_new_conversation(
    desktop: State<'_, Desktop>,
) -> CmdResult<Option<SessionInfo>> {
    desktop.new_conversation().await.map_err(err)
}

/// Tries unsaved connection settings.
#[tauri::command]
pub async fn session_test_connection(
    desktop: State<'_, Desktop>,
    connection: ConnectionSettings,
    token: Option<String>,
) -> CmdResult<ConnectionTestResult> {
    Ok(desktop.test_connection(connection, token).await)
}
