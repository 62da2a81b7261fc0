//! The system-wide shortcut (Tauri's global-shortcut plugin: an X11 key grab on Linux, so
//! it works whichever window has the focus). Held while voice is on in push-to-talk, the
//! microphone is live until it comes up; pressed otherwise, Outpost comes forward with the
//! message box focused. The desktop decides which (`Desktop::shortcut_down`); this module
//! registers the accelerator from the settings and reports whether it works.
//!
//! Without an X11 display the grab cannot be made, and in a Wayland session with XWayland
//! it sees the keys only while an X11 window has the focus: the desktop portal's
//! GlobalShortcuts interface is not used yet, and Settings → Voice says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use outpost_desktop::Desktop;
use tauri::{AppHandle, Runtime};
use tauri_plugin_global_shortcut::{GlobalShortcutExt as _, ShortcutState};

/// (Re)registers the settings' shortcut; the outcome goes to the desktop's settings.
pub fn apply<R: Runtime>(app: &AppHandle<R>, desktop: &Desktop) {
    let gs = app.global_shortcut();
    let _ = gs.unregister_all();
    let accel = desktop.shortcut();
    if accel.trim().is_empty() {
        desktop.set_shortcut_status(false, "Off.".into());
        return;
    }
    if std::env::var_os("DISPLAY").is_none() {
        desktop.set_shortcut_status(
            false,
            "Not available: system-wide shortcuts need an X11 display (on Wayland the \
             desktop portal's GlobalShortcuts is not used yet). Space in Outpost's window \
             still talks."
                .into(),
        );
        return;
    }
    // Whether the current press is the talk key (then its release ends talking).
    let talking = Arc::new(AtomicBool::new(false));
    let d = desktop.clone();
    let registered = gs.on_shortcut(accel.as_str(), move |app, _shortcut, ev| match ev.state {
        ShortcutState::Pressed => {
            let talk = d.shortcut_down();
            talking.store(talk, Ordering::SeqCst);
            tracing::info!(talk, "system-wide shortcut down");
            if !talk {
                crate::focus_main(app);
                d.set_focused(true);
            }
        }
        ShortcutState::Released => {
            if talking.swap(false, Ordering::SeqCst) {
                d.shortcut_up();
                tracing::info!("system-wide shortcut up");
            }
        }
    });
    // A Wayland session with XWayland has a DISPLAY too: the grab then sees the keys only
    // while an X11 window has the focus.
    let wayland = std::env::var_os("WAYLAND_DISPLAY").is_some()
        || std::env::var("XDG_SESSION_TYPE").is_ok_and(|t| t == "wayland");
    match registered {
        Ok(()) if wayland => desktop.set_shortcut_status(
            true,
            format!(
                "{accel} is registered through XWayland: it works only while an X11 window \
                 has the focus (Wayland windows keep their keys; the desktop portal's \
                 GlobalShortcuts is not used yet)."
            ),
        ),
        Ok(()) => desktop.set_shortcut_status(
            true,
            format!("{accel} works in every window (an X11 key grab)."),
        ),
        Err(e) => desktop.set_shortcut_status(
            false,
            format!(
                "{accel} could not be registered: {e}. Another program may hold it; choose another."
            ),
        ),
    }
}
