//! Outpost's local tool executor: the tools the assistant may run on the user's computer,
//! and the dispatcher that runs them under the user's policy, as seed 000 requires.
//!
//! Layout:
//! - `tool`: the [`Tool`] trait, [`ToolSpec`] (descriptor with schemars-generated schemas
//!   plus policy hints), [`Access`] (what a call touches) and the blocking [`Job`].
//! - `registry`: [`Registry`] of tools with compiled JSON Schema validators; its
//!   [`descriptors`](Registry::descriptors) are the client hello's catalogue.
//! - `builtin`: read_local_file, list_directory, search_files, file_info, write_file,
//!   calculator, system_info, open_path, open_url; [`Launcher`] for the last two. The
//!   calculator evaluates one expression with no variables, assignments or `;` statements,
//!   listed functions only, and a static bound (256 KiB) on every value it can build,
//!   checked before evaluation: its work is bounded by construction, because the blocking
//!   thread it runs on cannot be stopped by the timeout (its module doc says why this, and
//!   not a child process).
//! - `paths`: `~` expansion and [`Resolved`](paths::Resolved): a path resolved once before
//!   the policy check, with the handle of its folder that the job then works through
//!   ([`SafeRoot`] opens beneath it and refuses FIFOs, sockets and devices).
//! - `dispatcher`: [`Dispatcher`] — one ToolUseResult per client request, duplicates,
//!   cancels, timeouts, progress, consent through `outpost-policy`, and one ordered stream of
//!   typed [`DispatchEvent`]s (who decided, started, results).
//!
//! Only this crate touches the user's files on the assistant's behalf, and only after
//! `outpost-policy` allowed the call.

mod builtin;
mod dispatcher;
mod error;
mod launcher;
pub mod paths;
mod registry;
mod tool;

pub use builtin::{
    Calculator, DesktopLauncher, FileInfo, Launcher, ListDirectory, OpenPath, OpenUrl,
    ReadLocalFile, SearchFiles, SystemInfo, WriteFile, builtin_registry,
};
pub use dispatcher::{
    AuditOutcome, DispatchEvent, Dispatcher, HELD_RESULT_BYTES, Handled, REMEMBERED_RESULTS,
};
pub use error::{Result, ToolError};
pub use paths::SafeRoot;
pub use registry::{Entry, Registry};
pub use tool::{
    Access, Job, Prepared, ProgressSink, RunContext, Tool, ToolEnv, ToolSpec, parse_params, to_map,
};
