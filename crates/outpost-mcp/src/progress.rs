//! A tool call's progress as a server reports it, and the bounds Outpost passes it on
//! within.

use std::time::Duration;

/// Shortest time between two progress notifications passed on for one call: the ones in
/// between are dropped (progress says how far a call is; the latest is what matters), so a
/// server that floods them costs at most ten a second.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Longest progress message passed on, in bytes; a longer one is cut (ending in `…`).
pub const MAX_PROGRESS_MESSAGE: usize = 1024;

/// One progress notification of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Progress so far (increases).
    pub progress: f64,
    /// Total, if known.
    pub total: Option<f64>,
    /// A message, if any.
    pub message: Option<String>,
}
