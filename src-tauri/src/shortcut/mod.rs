//! The system-wide shortcut. Held while voice is on in push-to-talk, the microphone is
//! live until it comes up; pressed otherwise, Outpost comes forward with the message box
//! focused. The desktop decides which (`Desktop::shortcut_down`); this module registers
//! the accelerator from the settings and reports whether it works.
//!
//! Two ways to have a key in every window: on Wayland the desktop portal's
//! GlobalShortcuts interface (`portal`; the compositor owns the keys), elsewhere Tauri's
//! global-shortcut plugin (an X11 key grab). `OUTPOST_SHORTCUT_BACKEND=portal` or `x11`
//! overrides the choice (tests use it to try the portal under Xvfb). When the portal is
//! missing or refuses, the X11 grab is tried and Settings → Voice says why; in a Wayland
//! session that grab sees the keys only while an X11 (XWayland) window has the focus.

mod portal;

use std::sync::atomic::{AtomicBool, Ordering};

use outpost_desktop::Desktop;
use tauri::{AppHandle, Runtime};
use tauri_plugin_global_shortcut::{GlobalShortcutExt as _, ShortcutState};

/// Chooses the portal or the X11 grab (see the module doc).
pub const BACKEND_VAR: &str = "OUTPOST_SHORTCUT_BACKEND";

/// (Re)registers the settings' shortcut; the outcome goes to the desktop's settings. Through
/// the portal that outcome comes later: the receiver hears when it is in.
pub fn apply<R: Runtime>(
    app: &AppHandle<R>,
    desktop: &Desktop,
) -> Option<tokio::sync::oneshot::Receiver<()>> {
    portal::stop();
    let _ = app.global_shortcut().unregister_all();
    let accel = desktop.shortcut();
    if accel.trim().is_empty() {
        desktop.set_shortcut_status(false, "Off.".into());
        return None;
    }
    let portal = match std::env::var(BACKEND_VAR).as_deref() {
        Ok("portal") => true,
        Ok("x11") => false,
        _ => wayland(),
    };
    if portal {
        Some(portal::start(app.clone(), desktop.clone(), accel))
    } else {
        x11(app, desktop, &accel, None);
        None
    }
}

fn wayland() -> bool {
    std::env::var_os("WAYLAND_DISPLAY").is_some()
        || std::env::var("XDG_SESSION_TYPE").is_ok_and(|t| t == "wayland")
}

/// Registers `accel` as an X11 key grab; `no_portal` is why the portal was not used when
/// it was tried first.
fn x11<R: Runtime>(app: &AppHandle<R>, desktop: &Desktop, accel: &str, no_portal: Option<&str>) {
    let why = no_portal
        .map(|e| format!("The desktop portal's GlobalShortcuts gave no shortcut ({e}). "))
        .unwrap_or_default();
    if std::env::var_os("DISPLAY").is_none() {
        desktop.set_shortcut_status(
            false,
            format!(
                "{why}Not available: without the desktop portal a system-wide shortcut \
                 needs an X11 display. Space in Outpost's window still talks."
            ),
        );
        return;
    }
    let keys = Keys::new(desktop.clone());
    let registered = app
        .global_shortcut()
        .on_shortcut(accel, move |app, _shortcut, ev| match ev.state {
            ShortcutState::Pressed => keys.down(app),
            ShortcutState::Released => keys.up(),
        });
    match registered {
        // A Wayland session with XWayland has a DISPLAY too: the grab then sees the keys
        // only while an X11 window has the focus.
        Ok(()) if wayland() => desktop.set_shortcut_status(
            true,
            format!(
                "{why}{accel} is registered through XWayland: it works only while an X11 \
                 window has the focus (Wayland windows keep their keys)."
            ),
        ),
        Ok(()) => desktop.set_shortcut_status(
            true,
            format!("{why}{accel} works in every window (an X11 key grab)."),
        ),
        Err(e) => desktop.set_shortcut_status(
            false,
            format!(
                "{why}{accel} could not be registered: {e}. Another program may hold it; \
                 choose another."
            ),
        ),
    }
}

/// The shortcut's key going down and up, from either backend.
struct Keys {
    desktop: Desktop,
    /// Down and not yet up: a held key repeats its press, which is not a new one.
    held: AtomicBool,
    /// Whether the current press is the talk key (then its release ends talking).
    talking: AtomicBool,
}

impl Keys {
    fn new(desktop: Desktop) -> Self {
        Self {
            desktop,
            held: AtomicBool::new(false),
            talking: AtomicBool::new(false),
        }
    }

    fn down<R: Runtime>(&self, app: &AppHandle<R>) {
        if self.held.swap(true, Ordering::SeqCst) {
            return;
        }
        let talk = self.desktop.shortcut_down();
        self.talking.store(talk, Ordering::SeqCst);
        tracing::info!(talk, "system-wide shortcut down");
        if !talk {
            crate::focus_main(app);
            self.desktop.set_focused(true);
        }
    }

    fn up(&self) {
        self.held.store(false, Ordering::SeqCst);
        if self.talking.swap(false, Ordering::SeqCst) {
            self.desktop.shortcut_up();
            tracing::info!("system-wide shortcut up");
        }
    }
}
