//! `outpost-desktop`: everything the desktop app does, without Tauri. The Tauri shell
//! (`src-tauri`) is a list of thin commands over [`Desktop`]; this crate implements
//! ui/CONTRACT.md on top of `outpost-core` and can be driven headless in tests.
//!
//! Layout:
//! - [`contract`]: the UI contract's types (camelCase JSON, `{type, data}` events).
//! - [`live`]: the live view: core events → contract events, plus the snapshot a reloaded
//!   page needs.
//! - [`attachments`]: files the user gives the assistant: checked (secrets list, size),
//!   staged and shown before they go.
//! - [`autostart`]: start at login (the XDG autostart entry).
//! - [`config`]: where files live and the app's `settings.toml`.
//! - [`secrets`]: the OS keyring.
//! - [`demo`]: the local demo (the room server and the reference assistant as child
//!   processes).
//! - [`mcp`]: the user's MCP servers (`mcp.toml`): started with a session, stopped with it.
//! - [`tray`]: what the tray icon shows (a fold of the UI's events).
//! - [`voice`]: the microphone and speaker (outpost-audio) joined to the session's audio:
//!   push-to-talk, open mic, mute, device states, levels.
//! - `desktop`: [`Desktop`], one method per command, one module per command domain as in
//!   `src-tauri/src/commands/` (session, chat, consent, settings, history, tools, mcp, voice,
//!   system).
//! - `history`: store records → contract types.
//! - `error`: [`DesktopError`] and its `{code, message}` form.

pub mod attachments;
pub mod autostart;
pub mod config;
pub mod contract;
pub mod demo;
mod desktop;
mod error;
mod history;
pub mod live;
pub mod mcp;
pub mod secrets;
pub mod tray;
pub mod voice;

pub use desktop::{BACKGROUND_FLAG, Desktop, EventSink, EventWatcher, Notifier, check_link};
pub use error::{CommandError, DesktopError, Result};

/// Locks `m`, the one lock helper of this crate. A lock whose holder panicked is taken as
/// it is: one failed command must not make every later one panic too.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
