//! Desktop notifications through notify-rust (the D-Bus notification service on Linux).
//! Clicking a notification focuses the app. Without a notification daemon, showing fails:
//! that is logged once per notification and never disturbs the session.

use outpost_desktop::Notifier;
use tauri::{AppHandle, Runtime};

/// notify-rust, with a click focusing the main window.
pub struct DesktopNotifier<R: Runtime> {
    app: AppHandle<R>,
}

impl<R: Runtime> std::fmt::Debug for DesktopNotifier<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DesktopNotifier")
    }
}

impl<R: Runtime> DesktopNotifier<R> {
    /// A notifier for `app`.
    pub fn new(app: AppHandle<R>) -> Self {
        Self { app }
    }
}

impl<R: Runtime> Notifier for DesktopNotifier<R> {
    fn notify(&self, title: &str, body: &str) {
        let title = title.to_owned();
        let body = body.to_owned();
        let app = self.app.clone();
        // Showing talks to D-Bus and waiting for the click blocks: its own thread.
        let spawned = std::thread::Builder::new()
            .name("notification".into())
            .spawn(move || {
                let shown = notify_rust::Notification::new()
                    .appname("Outpost")
                    .summary(&title)
                    .body(&body)
                    .icon("dialog-information")
                    .action("default", "Open Outpost")
                    .show();
                match shown {
                    Ok(handle) => handle.wait_for_action(|action| {
                        if action == "default" {
                            crate::focus_main(&app);
                        }
                    }),
                    Err(e) => {
                        tracing::warn!(error = %e, "no notification shown (is a notification daemon running?)");
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no notification shown");
        }
    }
}
