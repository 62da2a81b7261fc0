//! The built-in tools. Each is a small struct implementing [`Tool`](crate::Tool) with
//! parameter and result types that generate its schemas.

mod calculator;
mod files;
mod open;
mod search;
mod system;

pub use calculator::Calculator;
pub use files::{FileInfo, ListDirectory, ReadLocalFile, WriteFile};
pub use open::{DesktopLauncher, Launcher, OpenPath, OpenUrl};
pub use search::SearchFiles;
pub use system::SystemInfo;

use crate::error::Result;
use crate::registry::Registry;

/// A registry holding every built-in tool.
pub fn builtin_registry() -> Result<Registry> {
    let mut r = Registry::new();
    r.register(ReadLocalFile)?;
    r.register(ListDirectory)?;
    r.register(SearchFiles)?;
    r.register(FileInfo)?;
    r.register(WriteFile)?;
    r.register(Calculator)?;
    r.register(SystemInfo)?;
    r.register(OpenPath)?;
    r.register(OpenUrl)?;
    Ok(r)
}

/// Formats a modification time as RFC 3339 in UTC, or `None` when the platform has none.
pub(crate) fn time_string(t: std::io::Result<std::time::SystemTime>) -> Option<String> {
    let t = t.ok()?;
    jiff::Timestamp::try_from(t).ok().map(|ts| ts.to_string())
}

/// A file type's name in results.
pub(crate) fn kind_name(ft: &cap_std::fs::FileType) -> &'static str {
    if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "file"
    } else {
        "other"
    }
}
