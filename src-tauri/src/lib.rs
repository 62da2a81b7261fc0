//! The Outpost desktop app: a thin Tauri 2 shell over [`outpost_desktop::Desktop`].
//!
//! - `commands/<domain>.rs`: one Tauri command per entry of ui/CONTRACT.md, each a few
//!   lines delegating to `Desktop`.
//! - `notify`: desktop notifications (notify-rust); clicking one focuses the window.
//! - `error`: the one `{code, message}` command error.
//!
//! The app is built from a generic `Builder<R: Runtime>` so it does not depend on wry in
//! its logic; `main.rs` only calls [`run`].

mod commands;
mod error;
mod notify;

use std::sync::Arc;

use outpost_desktop::config::Paths;
use outpost_desktop::secrets::{Keyring, MemorySecrets, SecretStore};
use outpost_desktop::{Desktop, Notifier};
use tauri::{Manager, Runtime, WindowEvent};

/// The label of the one window (tauri.conf.json).
pub const MAIN_WINDOW: &str = "main";

/// Builds the app on `builder` with everything registered: plugins, state, commands.
pub fn build<R: Runtime>(builder: tauri::Builder<R>) -> tauri::Builder<R> {
    builder
        // A second launch focuses the first window instead of opening another app.
        .plugin(tauri_plugin_single_instance::init(|app, _argv, _cwd| {
            focus_main(app);
        }))
        .plugin(tauri_plugin_window_state::Builder::default().build())
        .plugin(tauri_plugin_dialog::init())
        .setup(|app| {
            let desktop = open_desktop(app.handle())?;
            app.manage(desktop.clone());
            if let Some(window) = app.get_webview_window(MAIN_WINDOW) {
                let d = desktop.clone();
                window.on_window_event(move |ev| {
                    if let WindowEvent::Focused(f) = ev {
                        d.set_focused(*f);
                    }
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
        .invoke_handler(tauri::generate_handler![
            commands::session::session_subscribe,
            commands::session::session_connect,
            commands::session::session_start_demo,
            commands::session::session_disconnect,
            commands::session::session_new_conversation,
            commands::session::session_test_connection,
            commands::chat::chat_send,
            commands::chat::chat_open_link,
            commands::consent::consent_answer,
            commands::consent::consent_list_remembered,
            commands::consent::consent_revoke,
            commands::settings::settings_get,
            commands::settings::settings_set,
            commands::settings::settings_set_secret,
            commands::settings::settings_clear_secret,
            commands::settings::settings_pick_folder,
            commands::settings::settings_about,
            commands::history::history_list,
            commands::history::history_search,
            commands::history::history_get,
            commands::history::history_export,
            commands::history::history_delete_all,
            commands::tools::tools_list,
            commands::tools::tools_set,
            commands::mcp::mcp_servers_list,
            commands::mcp::mcp_servers_add,
            commands::mcp::mcp_servers_get,
            commands::mcp::mcp_servers_update,
            commands::mcp::mcp_servers_restart,
            commands::mcp::mcp_servers_set_rule,
            commands::mcp::mcp_servers_set_enabled,
            commands::mcp::mcp_servers_remove,
            commands::mcp::mcp_servers_log,
            commands::mcp::mcp_servers_import_preview,
            commands::mcp::mcp_elicitation_answer,
            commands::voice::voice_status,
            commands::voice::voice_start,
            commands::voice::voice_stop,
            commands::voice::voice_control,
            commands::voice::voice_devices,
            commands::voice::voice_set_devices,
        ])
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

/// Shows, unminimizes and focuses the main window.
pub fn focus_main<R: Runtime>(app: &tauri::AppHandle<R>) {
    if let Some(w) = app.get_webview_window(MAIN_WINDOW) {
        let _ = w.show();
        let _ = w.unminimize();
        let _ = w.set_focus();
    }
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
    let app = build(tauri::Builder::default()).run(tauri::generate_context!());
    if let Err(e) = app {
        tracing::error!(error = %e, "the app could not start");
        std::process::exit(1);
    }
}
