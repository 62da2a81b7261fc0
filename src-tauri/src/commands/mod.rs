//! The Tauri commands of ui/CONTRACT.md, one module per domain. Each is a few lines
//! delegating to `outpost_desktop::Desktop`.

pub mod chat;
pub mod consent;
pub mod history;
pub mod mcp;
pub mod session;
pub mod settings;
pub mod system;
pub mod tools;
pub mod voice;
