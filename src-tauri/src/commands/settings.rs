//! `settings_*`: the settings pane.

use outpost_desktop::Desktop;
use outpost_desktop::contract::{AboutInfo, Settings};
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_dialog::DialogExt;

use crate::error::{CmdResult, err};

/// The settings, with `hasToken` from the keyring.
#[tauri::command]
pub fn settings_get(desktop: State<'_, Desktop>) -> Settings {
    desktop.settings()
}

/// Confirms the policy file as it is on disk (a change made outside Outpost that allows
/// more), putting it in force.
#[tauri::command]
pub fn settings_trust_policy(desktop: State<'_, Desktop>) -> CmdResult<Settings> {
    desktop.trust_policy().map_err(err)
}

/// Validates and saves all settings.
#[tauri::command]
pub async fn settings_set(desktop: State<'_, Desktop>, settings: Settings) -> CmdResult<Settings> {
    desktop.set_settings(settings).await.map_err(err)
}

/// Stores a secret in the OS keyring.
#[tauri::command]
pub async fn settings_set_secret(
    desktop: State<'_, Desktop>,
    name: String,
    value: String,
) -> CmdResult<()> {
    // The keyring talks to D-Bus and may block: off the async workers.
    let d = desktop.inner().clone();
    tauri::async_runtime::spawn_blocking(move || d.set_secret(&name, &value))
        .await
        .map_err(|e| err(outpost_desktop::DesktopError::Internal(e.to_string())))?
        .map_err(err)
}

/// Deletes a secret from the keyring.
#[tauri::command]
pub async fn settings_clear_secret(desktop: State<'_, Desktop>, name: String) -> CmdResult<()> {
    let d = desktop.inner().clone();
    tauri::async_runtime::spawn_blocking(move || d.clear_secret(&name))
        .await
        .map_err(|e| err(outpost_desktop::DesktopError::Internal(e.to_string())))?
        .map_err(err)
}

/// The native folder picker; `None` when cancelled.
#[tauri::command]
pub async fn settings_pick_folder<R: Runtime>(app: AppHandle<R>) -> CmdResult<Option<String>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.dialog().file().pick_folder(move |picked| {
        let _ = tx.send(picked);
    });
    let picked = rx.await.ok().flatten();
    Ok(picked
        .and_then(|p| p.into_path().ok())
        .map(|p| p.display().to_string()))
}

/// Versions and where files live.
#[tauri::command]
pub fn settings_about<R: Runtime>(app: AppHandle<R>, desktop: State<'_, Desktop>) -> AboutInfo {
    desktop.about(&app.package_info().version.to_string())
}
