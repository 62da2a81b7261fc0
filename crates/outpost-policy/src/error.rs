//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in the policy crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The policy file could not be read or written.
    #[error("policy file {path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The policy file is not valid TOML or does not follow the policy's shape.
    #[error("policy file {path} is invalid: {message}")]
    Invalid {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong, with the line and column when TOML knows them.
        message: String,
    },
    /// The file was changed outside Outpost to allow more than the user confirmed, and
    /// Outpost will not edit it (nor so confirm the change) until the user has.
    #[error("{message}")]
    Unconfirmed {
        /// The file concerned.
        path: PathBuf,
        /// What the change would allow, and how to confirm it.
        message: String,
    },
    /// The file watcher could not be started.
    #[error("cannot watch policy file {path}: {message}")]
    Watch {
        /// The file concerned.
        path: PathBuf,
        /// The watcher's error.
        message: String,
    },
    /// A consent answer named a question that is not pending (answered, withdrawn or unknown).
    #[error(
        "the permission question '{0}' is no longer open (it was answered, withdrawn or timed out)"
    )]
    UnknownConsent(String),
    /// A consent answer that is not one of the decisions.
    #[error(
        "'{0}' is not a consent decision (allow_once, allow_for_conversation, always_allow, \
         deny_once, always_deny)"
    )]
    UnknownDecision(String),
    /// A consent answer chose a decision the question did not offer.
    #[error("'{decision}' is not offered for consent question '{consent_id}' (offered: {offered})")]
    DecisionNotOffered {
        /// The question.
        consent_id: String,
        /// The decision given.
        decision: String,
        /// The decisions the question offers, comma-separated.
        offered: String,
    },
}

/// Result alias for this crate.
pub type Result<T, E = PolicyError> = std::result::Result<T, E>;
