//! `outpost-desktop`: everything the desktop app does, without Tauri. The Tauri shell
//! (`src-tauri`) is a list of thin commands over [`Desktop`]; this crate implements
//! ui/CONTRACT.md on top of `outpost-core` and can be driven headless in tests.
//!
//! Layout: one folder per domain, each its state and (in `commands`) [`Desktop`]'s
//! commands over it, as in `src-tauri/src/commands/`.
//! - [`session`]: the one owner of a session's lifetime (the core's session, its MCP
//!   servers, the demo's children: started and ended together), the live view folded from
//!   its events (`session::live`), the `session_*` and `chat_*` commands.
//! - `consent`: the open consent questions as the UI sees them; `consent_*`.
//! - [`settings`]: the app's `settings.toml`; `settings_*`.
//! - `history`: store records → contract types; `history_*`.
//! - [`mcp`]: the user's MCP servers (`mcp.toml`): started with a session, stopped with it;
//!   `mcp_*`.
//! - [`voice`]: the microphone and speaker (outpost-audio) joined to the session's audio:
//!   push-to-talk, open mic, mute, device states, levels; `voice_*`.
//! - `desktop`: [`Desktop`], the handle that ties the domains together, and the two small
//!   command domains that need no folder (`tools_*`, `system_*`).
//!
//! Beside them: [`contract`] (the UI contract's types: camelCase JSON, `{type, data}`
//! events), [`attachments`] (files the user gives the assistant: checked, staged and shown
//! before they go), [`paths`] (where the app keeps its files), [`autostart`] (start at
//! login, the XDG autostart entry), [`secrets`] (the OS keyring), [`demo`] (the local demo:
//! the room server and the reference assistant as child processes), [`tray`] (what the
//! tray icon shows, a fold of the UI's events), `error`
//! ([`DesktopError`] and its `{code, message}` form).

pub mod attachments;
pub mod autostart;
mod consent;
pub mod contract;
pub mod demo;
mod desktop;
mod error;
mod history;
pub mod mcp;
pub mod paths;
pub mod secrets;
pub mod session;
pub mod settings;
pub mod tray;
pub mod voice;

pub use desktop::{BACKGROUND_FLAG, Desktop, EventSink, EventWatcher, Notifier};
pub use error::{CommandError, DesktopError, Result};
pub use session::check_link;
