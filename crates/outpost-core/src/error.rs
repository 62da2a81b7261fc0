//! The crate's error type.
//!
//! Each message is a whole sentence with its cause, shown as is (UI events, the desktop's
//! command errors, logs); a variant that puts its cause in the message does not also return
//! it from `source()`, so printing the error chain (`{:#}`, the CLI) never repeats a cause.

use std::path::PathBuf;

/// What can go wrong when starting or driving a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// Joining the room failed.
    #[error("could not join the room: {0}")]
    Connect(outpost_livekit::Error),
    /// The store could not be opened or queried.
    #[error("conversation store: {0}")]
    Store(outpost_store::Error),
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
    /// Voice could not be used (the session has none, or the track was refused).
    #[error("voice: {0}")]
    Voice(String),
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

impl From<outpost_livekit::Error> for CoreError {
    fn from(e: outpost_livekit::Error) -> Self {
        Self::Connect(e)
    }
}

impl From<outpost_store::Error> for CoreError {
    fn from(e: outpost_store::Error) -> Self {
        Self::Store(e)
    }
}

/// Result alias.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;
