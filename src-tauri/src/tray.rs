//! The tray icon (Tauri's tray; on Linux a StatusNotifierItem with a com.canonical.dbusmenu
//! menu, through libayatana-appindicator): the link and the assistant's state, voice on or
//! off, mute, open, quit. What it shows is `outpost_desktop::tray::TrayModel`'s view of the
//! app's events; its clicks are the same desktop commands the window's buttons call.
//!
//! With "keep running in the tray" on, closing the window hides it (the session goes on);
//! a consent question then reaches the user as a notification and in the tray, with the
//! seconds left before it is denied (refreshed every second while one waits).

use std::sync::{Arc, Mutex};

use outpost_desktop::Desktop;
use outpost_desktop::contract::VoiceControl;
use outpost_desktop::tray::{TrayModel, TrayView};
use tauri::menu::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::{TrayIcon, TrayIconBuilder};
use tauri::{AppHandle, Runtime};

/// Menu ids.
const STATUS: &str = "status";
const VOICE: &str = "voice";
const MUTE: &str = "mute";
const OPEN: &str = "open";
const QUIT: &str = "quit";

/// The icon and the menu items whose words or checks change.
struct Items<R: Runtime> {
    icon: TrayIcon<R>,
    status: MenuItem<R>,
    voice: CheckMenuItem<R>,
    mute: CheckMenuItem<R>,
}

impl<R: Runtime> Items<R> {
    fn show(&self, v: &TrayView) {
        let _ = self.status.set_text(&v.status);
        let _ = self.voice.set_checked(v.voice_on);
        let _ = self.voice.set_enabled(v.voice_available);
        let _ = self.mute.set_checked(v.muted);
        let _ = self.mute.set_enabled(v.voice_on);
        let _ = self.icon.set_tooltip(Some(&v.tooltip));
        // The title is what an indicator shows beside the icon (and what AT reads): a
        // question waiting says so there too.
        let title = if v.attention {
            Some("Outpost: permission needed")
        } else {
            None
        };
        let _ = self.icon.set_title(title);
    }
}

/// Puts the icon in the tray and keeps it up to date.
pub fn install<R: Runtime>(app: &AppHandle<R>, desktop: &Desktop) -> tauri::Result<()> {
    let status = MenuItem::with_id(app, STATUS, "Outpost — not connected", false, None::<&str>)?;
    let voice = CheckMenuItem::with_id(app, VOICE, "Voice", false, false, None::<&str>)?;
    let mute = CheckMenuItem::with_id(app, MUTE, "Mute microphone", false, false, None::<&str>)?;
    let open = MenuItem::with_id(app, OPEN, "Open Outpost", true, None::<&str>)?;
    let quit = MenuItem::with_id(app, QUIT, "Quit Outpost", true, None::<&str>)?;
    let menu = Menu::with_items(
        app,
        &[
            &status,
            &PredefinedMenuItem::separator(app)?,
            &voice,
            &mute,
            &PredefinedMenuItem::separator(app)?,
            &open,
            &quit,
        ],
    )?;
    let mut builder = TrayIconBuilder::with_id("outpost")
        .menu(&menu)
        .tooltip("Outpost")
        .show_menu_on_left_click(true);
    if let Some(icon) = app.default_window_icon() {
        builder = builder.icon(icon.clone());
    }
    let icon = builder.build(app)?;
    let items = Arc::new(Items {
        icon,
        status,
        voice,
        mute,
    });
    let model = Arc::new(Mutex::new(TrayModel::default()));
    let (d, m, i) = (desktop.clone(), Arc::clone(&model), Arc::clone(&items));
    items.icon.on_menu_event(move |app, ev| {
        clicked(app, &d, ev.id().as_ref());
        // A check item flips itself when clicked; show the state as it is (a voice event
        // corrects it again once the command took effect).
        let view = outpost_sync::lock(&m).view(now_ms());
        i.show(&view);
    });
    let (m, i, h) = (Arc::clone(&model), Arc::clone(&items), app.clone());
    desktop.watch(Box::new(move |ev| {
        let now = now_ms();
        let mut model = outpost_sync::lock(&m);
        if model.apply(ev, now) {
            let view = model.view(now);
            let i = Arc::clone(&i);
            // Menus belong to the main thread.
            let _ = h.run_on_main_thread(move || i.show(&view));
        }
    }));
    // The seconds left of a waiting question, refreshed while one waits.
    let h = app.clone();
    tauri::async_runtime::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tick.tick().await;
            let view = {
                let model = outpost_sync::lock(&model);
                model.counting_down().then(|| model.view(now_ms()))
            };
            if let Some(view) = view {
                let i = Arc::clone(&items);
                let _ = h.run_on_main_thread(move || i.show(&view));
            }
        }
    });
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A menu click: the same commands as the window's buttons.
fn clicked<R: Runtime>(app: &AppHandle<R>, desktop: &Desktop, id: &str) {
    tracing::info!(item = id, "tray menu");
    match id {
        OPEN => {
            crate::focus_main(app);
            desktop.set_focused(true);
        }
        QUIT => app.exit(0),
        VOICE => {
            let d = desktop.clone();
            tauri::async_runtime::spawn(async move {
                if d.voice_status().on {
                    d.voice_stop().await;
                } else if let Err(e) = d.voice_start().await {
                    tracing::warn!(error = %e, "voice from the tray");
                }
            });
        }
        MUTE => {
            let muted = desktop.voice_status().muted;
            desktop.voice_control(VoiceControl {
                muted: Some(!muted),
                mode: None,
                talking: None,
                echo_cancellation: None,
            });
        }
        _ => {}
    }
}
