//! The store's error type.

use std::path::PathBuf;

/// Everything that can go wrong in the store. Each variant says what failed and with which
/// input, so the message can be shown to a user or written to a log as is. The cause is part
/// of that message and therefore not also returned from `source()`: printing the error chain
/// (`{:#}`) shows each cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// SQLite refused an operation.
    #[error("store: {context}: {error}")]
    Sqlite {
        /// What the store was doing.
        context: String,
        /// The SQLite error (part of the message, so not a `source()`).
        error: rusqlite::Error,
    },
    /// The schema could not be brought up to date.
    #[error("store: migrating the database schema failed: {0}")]
    Migration(rusqlite_migration::Error),
    /// The database file was written by a newer Outpost.
    #[error(
        "store: the database is at schema version {found}, newer than this build knows ({known}); \
         upgrade Outpost or point OUTPOST_DATA_DIR elsewhere"
    )]
    SchemaTooNew {
        /// Version found in the file.
        found: usize,
        /// Newest version this build knows.
        known: usize,
    },
    /// A filesystem operation on the data directory failed.
    #[error("store: {action} {path}: {error}", path = path.display())]
    Io {
        /// What was attempted ("create data directory", ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error (part of the message, so not a `source()`).
        error: std::io::Error,
    },
    /// No data directory could be determined (no home directory and no override).
    #[error(
        "store: cannot determine the user's data directory; pass an explicit path or set OUTPOST_DATA_DIR"
    )]
    NoDataDir,
    /// A data directory path was given but is unusable.
    #[error("store: data directory {path:?} is not usable: {reason}")]
    BadDataDir {
        /// The path as given.
        path: PathBuf,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A search query could not be understood.
    #[error("store: invalid search query {query:?}: {reason}")]
    InvalidSearchQuery {
        /// The query as given.
        query: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A referenced record does not exist.
    #[error("store: {what} {id:?} not found")]
    NotFound {
        /// Kind of record ("conversation", "tool call", ...).
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// A tool-call lifecycle event does not fit the call's current state.
    #[error("store: tool call {id:?} cannot go from {from} to {to}")]
    InvalidTransition {
        /// Tool-call id.
        id: String,
        /// Current state.
        from: String,
        /// Requested state.
        to: String,
    },
    /// A value read from the database is not one this build understands.
    #[error("store: unexpected value {value:?} in column {column}")]
    Corrupt {
        /// Column name.
        column: &'static str,
        /// The value found.
        value: String,
    },
    /// A parameter passed to the store is out of range.
    #[error("store: invalid argument {name}: {reason}")]
    InvalidArgument {
        /// Parameter name.
        name: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// The batch holding this write could not be committed; the write is not stored.
    #[error("store: committing the write batch failed: {0}")]
    CommitFailed(String),
    /// JSON (de)serialisation failed.
    #[error("store: JSON {context}: {error}")]
    Json {
        /// What was being (de)serialised.
        context: &'static str,
        /// The serde_json error (part of the message, so not a `source()`).
        error: serde_json::Error,
    },
    /// The writer or reader thread has stopped (the store was closed, or a thread panicked).
    #[error("store: the {0} thread has stopped; the operation was not performed")]
    Stopped(&'static str),
}

impl From<rusqlite_migration::Error> for Error {
    fn from(e: rusqlite_migration::Error) -> Self {
        Self::Migration(e)
    }
}

/// Result alias for the store.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Adds context to rusqlite errors.
pub(crate) trait SqlContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> SqlContext<T> for rusqlite::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|error| Error::Sqlite {
            context: context(),
            error,
        })
    }
}
