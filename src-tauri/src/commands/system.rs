//! `system_*`: how Outpost lives on the desktop (the tray when the window closes, start
//! at login).

use outpost_desktop::Desktop;
use outpost_desktop::contract::SystemSettings;
use tauri::{AppHandle, Runtime, State};

use crate::error::{CmdResult, err};

/// The desktop settings now (start at login read from the autostart entry itself).
#[tauri::command]
pub fn system_settings(desktop: State<'_, Desktop>) -> SystemSettings {
    desktop.system_settings()
}

/// Saves them; start at login writes or removes the autostart entry for this executable;
/// the shortcut is registered again (through the desktop portal, its outcome is waited
/// for a moment: the portal answers at once unless the desktop asks the user first).
#[tauri::command]
pub async fn system_set<R: Runtime>(
    app: AppHandle<R>,
    desktop: State<'_, Desktop>,
    settings: SystemSettings,
) -> CmdResult<SystemSettings> {
    let program = std::env::current_exe().map_err(|e| {
        err(outpost_desktop::DesktopError::Internal(format!(
            "Could not tell where Outpost's program is: {e}"
        )))
    })?;
    desktop.set_system(&settings, &program).map_err(err)?;
    if let Some(settled) = crate::shortcut::apply(&app, &desktop) {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), settled).await;
    }
    Ok(desktop.system_settings())
}
