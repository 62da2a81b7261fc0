//! The one error of this crate, and its `{code, message}` form for the UI.

use serde::Serialize;

/// What went wrong in a desktop command. `Display` is a full sentence shown as is.
#[derive(Debug, thiserror::Error)]
pub enum DesktopError {
    /// The connection settings are incomplete.
    #[error("{0}")]
    NotConfigured(String),
    /// No session is live.
    #[error("Outpost is not connected to an assistant. Connect first (Settings → Connection).")]
    NotConnected,
    /// An argument was refused; `name` is the field.
    #[error("{name}: {reason}")]
    InvalidArgument {
        /// The field.
        name: String,
        /// Why.
        reason: String,
    },
    /// Something asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// No OS keyring.
    #[error("{0}")]
    KeyringUnavailable(String),
    /// The core failed.
    #[error("{0}")]
    Core(#[from] outpost_core::CoreError),
    /// The store failed.
    #[error("The conversation history failed: {0}")]
    Store(#[from] outpost_store::Error),
    /// The policy file failed.
    #[error("The permission policy could not be saved: {0}")]
    Policy(#[from] outpost_policy::PolicyError),
    /// A file could not be read or written.
    #[error("Could not {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// Where.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file the user wanted to give the assistant was refused (secrets list, size).
    #[error("{0}")]
    Refused(String),
    /// The user cancelled what the command was waiting for.
    #[error("{0}")]
    Cancelled(String),
    /// Anything else.
    #[error("{0}")]
    Internal(String),
}

impl DesktopError {
    /// The code the UI switches on (CONTRACT.md "Errors").
    pub fn code(&self) -> &'static str {
        match self {
            DesktopError::NotConfigured(_) => "not_configured",
            DesktopError::NotConnected => "not_connected",
            DesktopError::InvalidArgument { .. } => "invalid_argument",
            DesktopError::NotFound(_) => "not_found",
            DesktopError::KeyringUnavailable(_) => "keyring_unavailable",
            DesktopError::Refused(_) => "attachment_refused",
            DesktopError::Cancelled(_) => "cancelled",
            DesktopError::Core(outpost_core::CoreError::InvalidArgument { .. }) => {
                "invalid_argument"
            }
            DesktopError::Core(outpost_core::CoreError::Consent(_)) => "unknown_consent",
            DesktopError::Core(outpost_core::CoreError::Ended) => "not_connected",
            _ => "internal_error",
        }
    }

    /// A refused argument.
    pub fn invalid(name: impl Into<String>, reason: impl Into<String>) -> Self {
        DesktopError::InvalidArgument {
            name: name.into(),
            reason: reason.into(),
        }
    }
}

/// The serialized form every failed command rejects with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandError {
    /// Machine-readable code.
    pub code: String,
    /// A sentence for people.
    pub message: String,
}

impl From<DesktopError> for CommandError {
    fn from(e: DesktopError) -> Self {
        CommandError {
            code: e.code().to_owned(),
            message: e.to_string(),
        }
    }
}

/// This crate's results.
pub type Result<T, E = DesktopError> = std::result::Result<T, E>;
