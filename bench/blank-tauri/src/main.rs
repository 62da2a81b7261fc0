//! A blank Tauri 2 app: the template's one window and page, plus the one signal the
//! benchmark needs. It is the floor `scripts/bench-app.sh` measures outpost-app against
//! (docs/BENCHMARKS.md, "Desktop app"): same tauri, same features, same release profile,
//! same WebKit; only what Outpost adds on top differs.

// No console window on Windows release builds (as the template).
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

/// The page calls this once it has loaded (dist/index.html): the same "interactive" signal
/// as outpost-app's first command (`session_subscribe`, logged as "ui subscribed").
#[tauri::command]
fn ready() {
    // The bench reads stderr; this app has no logging framework on purpose.
    #[allow(clippy::print_stderr)]
    {
        eprintln!("ui subscribed");
    }
}

fn main() {
    let result = tauri::Builder::default()
        .invoke_handler(tauri::generate_handler![ready])
        .run(tauri::generate_context!());
    if let Err(e) = result {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("the app could not start: {e}");
        }
        std::process::exit(1);
    }
}
