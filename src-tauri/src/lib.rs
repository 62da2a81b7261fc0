//! The Outpost desktop app: a thin Tauri 2 shell over [`outpost_desktop::Desktop`].
//!
//! - `commands/<domain>.rs`: one Tauri command per entry of ui/CONTRACT.md, each a few
//!   lines delegating to `Desktop`.
//! - `notify`: desktop notifications (notify-rust); clicking one focuses the window.
//! - `shortcut`: the system-wide shortcut (hold to talk, press to raise).
//! - `tray`: the tray icon and its menu (state, voice, mute, open, quit); with "keep
//!   running in the tray" closing the window hides it.
//! - `error`: the one `{code, message}` command error.
//!
//! The app is built from a generic `Builder<R: Runtime>` so it does not depend on wry in
//! its logic; `main.rs` only calls [`run`].

mod commands;
mod error;
mod notify;
mod shortcut;
#[cfg(unix)]
pub mod single_instance;
mod tray;

use std::sync::Arc;

use outpost_desktop::paths::Paths;
use outpost_desktop::secrets::{Keyring, MemorySecrets, SecretStore};
use outpost_desktop::{Desktop, Notifier};
use tauri::{Manager, Runtime, WindowEvent};

/// The label of the one window (tauri.conf.json).
pub const MAIN_WINDOW: &str = "main";

/// Builds the app on `builder` with everything registered: plugins, state, commands.
/// (The single-instance check is [`run`]'s: it happens before the app is built.)
pub fn build<R: Runtime>(builder: tauri::Builder<R>) -> tauri::Builder<R> {
    builder
        .plugin(tauri_plugin_window_state::Builder::default().build())
        .plugin(tauri_plugin_dialog::init())
        .plugin(tauri_plugin_global_shortcut::Builder::new().build())
        .setup(|app| {
            let desktop = open_desktop(app.handle())?;
            app.manage(desktop.clone());
            if let Err(e) = tray::install(app.handle(), &desktop) {
                tracing::warn!(error = %e, "no tray icon");
            }
            let _ = shortcut::apply(app.handle(), &desktop);
            if let Some(window) = app.get_webview_window(MAIN_WINDOW) {
                let d = desktop.clone();
                let w = window.clone();
                // A start at login with "keep in tray" on starts in the tray.
                if desktop.keep_in_tray()
                    && std::env::args().any(|a| a == outpost_desktop::BACKGROUND_FLAG)
                {
                    let _ = window.hide();
                    desktop.set_focused(false);
                }
                window.on_window_event(move |ev| match ev {
                    WindowEvent::Focused(f) => d.set_focused(*f),
                    // "Keep running in the tray": the window goes, the session stays.
                    WindowEvent::CloseRequested { api, .. } if d.keep_in_tray() => {
                        api.prevent_close();
                        let _ = w.hide();
                        d.set_focused(false);
                        tracing::info!("window closed to the tray");
                    }
                    // Files dropped on the window: staged for the next message (or
                    // refused, with a notice), by their real paths.
                    WindowEvent::DragDrop(tauri::DragDropEvent::Drop { paths, .. }) => {
                        d.attach_dropped(paths);
                    }
                    _ => {}
                });
            }
            if desktop.should_autoconnect() {
                tauri::async_runtime::spawn(async move {
                    if let Err(e) = desktop.autoconnect().await {
                        tracing::warn!(error = %e, "could not connect at start");
                    }
                });
            }
            Ok(())
        })
        // build.rs writes the call from commands.txt, the one list of the app's commands.
        .invoke_handler(include!(concat!(env!("OUT_DIR"), "/handler.rs")))
}

fn open_desktop<R: Runtime>(app: &tauri::AppHandle<R>) -> anyhow::Result<Desktop> {
    let paths = Paths::from_env()?;
    // `OUTPOST_SECRETS=memory` keeps secrets for this run only (tests, machines without a
    // keyring). Nothing is ever written to a file.
    let secrets: Arc<dyn SecretStore> = match std::env::var("OUTPOST_SECRETS").as_deref() {
        Ok("memory") => Arc::new(MemorySecrets::default()),
        _ => Arc::new(Keyring),
    };
    let notifier: Arc<dyn Notifier> = Arc::new(notify::DesktopNotifier::new(app.clone()));
    Ok(Desktop::open(paths, secrets, notifier)?)
}

/// Shows, unminimizes and focuses the main window; `false` when there is none (any more).
pub fn focus_main<R: Runtime>(app: &tauri::AppHandle<R>) -> bool {
    let Some(w) = app.get_webview_window(MAIN_WINDOW) else {
        return false;
    };
    let shown = w.show().is_ok();
    let _ = w.unminimize();
    let _ = w.set_focus();
    shown
}

/// Runs the app (the binary's `main`).
pub fn run() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "outpost=info,outpost_app=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // One app per profile: a second start brings the first window forward and exits, or
    // waits while the first one quits (single_instance.rs). Decided before any window.
    #[cfg(unix)]
    let instance = match Paths::from_env() {
        Ok(paths) => match single_instance::claim(&paths.data_dir) {
            single_instance::Claim::Handed => return,
            single_instance::Claim::Primary(i) => Some(i),
        },
        // open_desktop reports this again, where the app can show it.
        Err(_) => None,
    };
    let app = match build(tauri::Builder::default()).build(tauri::generate_context!()) {
        Ok(app) => app,
        Err(e) => {
            tracing::error!(error = %e, "the app could not start");
            std::process::exit(1);
        }
    };
    #[cfg(unix)]
    if let Some(i) = &instance {
        let handle = app.handle().clone();
        i.running(Box::new(move || focus_main(&handle)));
    }
    // SIGTERM (a session logging out, `kill`) quits like closing the window does: the demo's
    // programs end, and a start meanwhile waits for this one (single_instance.rs).
    #[cfg(unix)]
    {
        let handle = app.handle().clone();
        tauri::async_runtime::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    if term.recv().await.is_some() {
                        tracing::info!("SIGTERM: quitting");
                        handle.exit(0);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "SIGTERM will end the app abruptly"),
            }
        });
    }
    // Test-only: linger this long while quitting (still holding the instance lock), so the
    // app's end-to-end test can start a second instance during a shutdown for certain.
    let linger = std::env::var("OUTPOST_TEST_EXIT_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(std::time::Duration::from_millis);
    app.run(move |app, event| {
        if let tauri::RunEvent::ExitRequested { .. } | tauri::RunEvent::Exit = event {
            #[cfg(unix)]
            if let Some(i) = &instance {
                i.exiting();
            }
        }
        // No MCP server outlives the app: their process groups are killed now, before the
        // runtime that supervises them is gone (a crash is covered by the servers'
        // parent-death signal and watchdog, outpost-mcp's process.rs).
        if let (tauri::RunEvent::Exit, Some(desktop)) = (&event, app.try_state::<Desktop>()) {
            desktop.stop_tool_servers();
        }
        if let (tauri::RunEvent::Exit, Some(d)) = (&event, linger) {
            std::thread::sleep(d);
        }
    });
}
