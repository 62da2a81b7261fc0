//! The crate's error type.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong with an MCP server, its configuration or a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// `mcp.toml` could not be read, parsed or written.
    #[error("MCP server config {path}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A value given by the user (a server name, an `--env` pair, a URL) is not valid.
    #[error("invalid {field}: {message}")]
    Invalid {
        /// Which value.
        field: String,
        /// Why.
        message: String,
    },
    /// No server of that name is configured (or running in this host).
    #[error("no MCP server named '{0}' is configured")]
    UnknownServer(String),
    /// The server does not offer that tool.
    #[error("MCP server '{server}' has no tool named '{tool}'")]
    UnknownTool {
        /// The server.
        server: String,
        /// The tool name asked for.
        tool: String,
    },
    /// The keyring could not be used.
    #[error("{0}")]
    Keyring(String),
    /// The config refers to a keyring entry that does not exist.
    #[error(
        "MCP server '{server}': the secret '{entry}' (for {key}) is not in the keyring; set it again with `outpost mcp add`"
    )]
    MissingSecret {
        /// The server.
        server: String,
        /// The variable or header that needs it.
        key: String,
        /// The keyring entry name.
        entry: String,
    },
    /// The server could not be started or did not complete the MCP handshake.
    #[error("MCP server '{server}' could not start: {message}")]
    Start {
        /// The server.
        server: String,
        /// Why, with what the server printed when that helps.
        message: String,
    },
    /// The server is not running (stopped, disabled, or waiting to restart).
    #[error("MCP server '{server}' is not running: {message}")]
    NotRunning {
        /// The server.
        server: String,
        /// Its state and last error.
        message: String,
    },
    /// The call did not finish in time; the server was sent `notifications/cancelled`.
    #[error("MCP server '{server}' did not finish {tool} within {} ms; the call was cancelled", timeout.as_millis())]
    Timeout {
        /// The server.
        server: String,
        /// The MCP tool name.
        tool: String,
        /// The time allowed.
        timeout: Duration,
    },
    /// The caller cancelled the call; the server was sent `notifications/cancelled`.
    #[error("the call to {tool} on MCP server '{server}' was cancelled")]
    Cancelled {
        /// The server.
        server: String,
        /// The MCP tool name.
        tool: String,
    },
    /// The server stopped (crashed, exited, closed the connection) while a call was in flight.
    #[error("MCP server '{server}' stopped during the call to {tool}: {message}")]
    ServerGone {
        /// The server.
        server: String,
        /// The MCP tool name.
        tool: String,
        /// How it stopped.
        message: String,
    },
    /// The server answered with a JSON-RPC error or an answer that is not MCP.
    #[error("MCP server '{server}' answered {method} with an error: {message}")]
    Protocol {
        /// The server.
        server: String,
        /// The request (`tools/call NAME`, `tools/list`).
        method: String,
        /// The server's message.
        message: String,
    },
    /// The server needs the user to complete URL elicitations before the call can run
    /// (`-32042`, MCP 2025-11-25), and they were not completed: declined, cancelled, not
    /// `http(s)`, or the server asked again after they were.
    #[error("MCP server '{server}' needs you to open a link before {tool} can run: {message}")]
    UrlElicitationRequired {
        /// The server.
        server: String,
        /// The MCP tool name.
        tool: String,
        /// What happened (the user's answer, or the server's error message).
        message: String,
    },
    /// The kernel cannot sandbox the server and the user has not agreed to run it
    /// unsandboxed (`sandbox = "if-available"`): it is not started.
    #[error("MCP server '{server}' is not started: {message}")]
    NoSandbox {
        /// The server.
        server: String,
        /// What to tell the user (and how to agree).
        message: String,
    },
    /// The server wants an OAuth sign-in (`again`: the one stored no longer works), or a
    /// sign-in failed.
    #[error("MCP server '{server}' needs you to sign in{}: {message}; run `outpost mcp login {server}` or use Settings → Tool servers", if *again { " again" } else { "" })]
    SignIn {
        /// The server.
        server: String,
        /// A sign-in was stored and no longer works (refused refresh, revoked).
        again: bool,
        /// What happened.
        message: String,
    },
    /// The record of confirmed servers (outpost-trust) could not be read or written.
    #[error("the record of confirmed MCP servers: {0}")]
    Trust(String),
    /// A local I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl McpError {
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = McpError> = std::result::Result<T, E>;
