//! Hosts the user's MCP servers so their tools can become Outpost tools.
//!
//! Built on the official Rust SDK (`rmcp`), client side only. Layout:
//! - [`config`]: the `mcp.toml` file in the config directory (servers by name, stdio or
//!   Streamable HTTP, values that may live in the keyring).
//! - [`secrets`]: the OS keyring (and an in-memory store for tests).
//! - [`naming`]: how an MCP tool is named in Outpost's catalogue (`mcp__<server>__<tool>`).
//! - [`result`]: the one JSON shape an MCP tool result is mapped to.
//! - [`requests`]: what the host does with server-initiated requests (elicitation,
//!   sampling): it asks the caller's [`ServerRequests`]; the default declines and refuses.
//! - [`progress`]: a call's progress as a server reports it, and the bounds it is passed
//!   on within.
//! - [`connection`]: one running session with one server (spawn or connect, initialize,
//!   list tools, call tools with progress, timeout and cancellation).
//! - [`import`]: the `mcpServers` block of a Claude Desktop config, read for review.
//! - [`host`]: [`McpHost`], every configured server under supervision (restart with
//!   backoff, roots, tool lists kept current) and one watchable snapshot of their state.
//! - [`sandbox`]: what a stdio server may touch (Landlock and seccomp on Linux): its
//!   program's needs, the allowed folders, `read`/`write`, the network.
//! - [`oauth`]: OAuth 2.1 sign-in for Streamable HTTP servers (rmcp's `auth` client; the
//!   browser does the login, a loopback listener takes the redirect, the keyring keeps the
//!   tokens), sign-out with revocation.
//! - [`trust`]: which servers of `mcp.toml` the user confirmed; one added or changed
//!   behind Outpost's back is not started until they do (`outpost-trust`).
//! - [`edit`]: Outpost's own edits of `mcp.toml`, the CLI's and the app's alike: each write
//!   recorded for [`trust`], a removed server's own keyring entries deleted with it.
//!
//! - [`input`]: the `input_required` rounds of MCP 2026-07-28 (a tool's need of the user,
//!   the roots or a model, answered as the same server request of older revisions).
//!
//! Internals: `handler` is the rmcp client handler; `listen` keeps the `subscriptions/listen`
//! stream a 2026-07-28 server announces tool-list changes on; `text` cuts a server's text to a bound;
//! `tls` installs rustls's crypto provider; `process` spawns stdio servers (no
//! shell), captures their stderr to a bounded per-server log and watches their stdout for
//! output that is not MCP. docs/MCP.md is the user-facing manual.

pub mod config;
pub mod connection;
pub mod edit;
mod error;
mod handler;
pub mod host;
pub mod import;
pub mod input;
mod listen;
pub mod naming;
pub mod oauth;
mod process;
pub mod progress;
pub mod requests;
pub mod result;
pub mod sandbox;
pub mod secrets;
mod text;
mod tls;
pub mod trust;

pub use config::{ConfigValue, McpConfig, ServerConfig, Transport};
pub use connection::{
    CallOptions, CallOutcome, ConnectOptions, Connection, McpTool, Progress, ToolHints,
};
pub use error::{McpError, Result};
pub use host::{HostOptions, HostSnapshot, McpHost, ServerState, ServerStatus};
pub use requests::{DefaultRequests, ElicitationAnswer, ElicitationRequest, Root, ServerRequests};
pub use sandbox::{FolderGate, Reach, Sandbox, SandboxOptions};
pub use secrets::{Keyring, MemorySecrets, SecretStore};
