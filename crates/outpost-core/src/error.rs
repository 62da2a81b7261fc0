//! The crate's error type.

use std::path::PathBuf;

/// What can go wrong when starting or driving a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// Joining the room failed.
    #[error("could not join the room: {0}")]
    Connect(#[from] outpost_livekit::Error),
    /// The store could not be opened or queried.
    #[error("conversation store: {0}")]
    Store(#[from] outpost_store::Error),
    /// The policy file is unreadable or invalid.
    #[error("policy file {path}: {message}")]
    Policy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The tool registry could not be built.
    #[error("tools: {0}")]
    Tools(String),
    /// A consent answer was refused (unknown question, or an answer not offered).
    #[error("consent answer refused: {0}")]
    Consent(String),
    /// The session has ended; nothing more can be sent.
    #[error("the session has ended")]
    Ended,
    /// An argument is unusable.
    #[error("invalid {name}: {reason}")]
    InvalidArgument {
        /// Which argument.
        name: &'static str,
        /// Why.
        reason: String,
    },
}

/// Result alias.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;
