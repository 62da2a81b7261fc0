//! Outpost's conversation log and tool-call audit store, on SQLite.
//!
//! Users get history they can search and export, and an audit log of what tools did on
//! their machine. Everything lives in one SQLite file (`outpost.sqlite3`) in the user's data
//! directory ([`data_dir`]: explicit path, else `$OUTPOST_DATA_DIR`, else the platform's
//! per-user data directory), in WAL mode, with numbered append-only migrations.
//!
//! Layout:
//! - [`store`]: [`Store`], the handle. Writes (`log_*`, `begin_conversation`, ...) are
//!   queued to a writer thread and return at once with a [`Pending`] acknowledgement that
//!   resolves when the write is committed; queries run on a reader thread and also return a
//!   [`Pending`]. Nothing blocks the caller unless it waits.
//! - `writer`: the writer thread. It drains the queue in batches, one transaction per batch,
//!   each write in its own savepoint (one bad write fails alone), and acknowledges only
//!   after COMMIT. With [`Durability::Full`] (default) the commit fsyncs the WAL, so an
//!   acknowledged write survives kill -9 and power loss.
//! - [`model`]: record types (what callers write, what queries return). Independent of the
//!   wire protocol crate: arguments and results are `serde_json::Value`.
//! - [`query`], [`search`], [`export`]: synchronous read functions over a connection
//!   (conversation list, timeline, audit log; FTS5 search with snippets; JSON/Markdown).
//! - [`migrations`]: the schema (`migrations/000N_*.sql`), applied by `rusqlite_migration`.
//! - [`paths`]: the data-directory resolver shared with the CLI and the app.
//! - [`private`]: the profile's folders (0700) and files (0600), for everyone who makes
//!   them (the store, the app's settings, its single-instance lock).
//!
//! Large values (message text, tool arguments, results) are stored once, capped per row at
//! [`StoreConfig::max_field_bytes`] (1 MiB by default); a capped value keeps its first bytes
//! and reads back with a visible note such as `[truncated: 5242880 bytes, stored first
//! 1048576]`.

// The test fixture (`tests/fixture/mod.rs`) is a module of this crate's unit tests and of
// its integration tests alike, and names the crate by its name in both.
#[cfg(test)]
extern crate self as outpost_store;

pub mod error;
pub mod export;
pub mod migrations;
pub mod model;
pub mod paths;
pub mod private;
pub mod query;
pub mod search;
pub mod store;
mod writer;

pub use error::{Error, Result};
pub use export::{ExportDocument, ExportFormat, ExportScope};
pub use model::*;
pub use paths::{DATA_DIR_ENV, data_dir};
pub use query::AuditQuery;
pub use search::{SearchOrder, SearchQuery, SearchSyntax};
pub use store::{Durability, Location, Pending, Store, StoreConfig};
