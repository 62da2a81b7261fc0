//! What opens a path or URL with the desktop's default handler: injectable, so tests never
//! start anything. The tools' environment holds one; open_path and open_url use it.

use std::ffi::OsStr;
use std::fmt;

/// Opens a path or URL with the desktop's default handler.
pub trait Launcher: Send + Sync {
    /// Opens `target`; returns once the handler has been started.
    fn open(&self, target: &OsStr) -> std::io::Result<()>;
}

/// The real launcher (xdg-open, `open`, ShellExecute, via the `open` crate).
#[derive(Debug, Clone, Copy, Default)]
pub struct DesktopLauncher;

impl Launcher for DesktopLauncher {
    fn open(&self, target: &OsStr) -> std::io::Result<()> {
        open::that_detached(target)
    }
}

impl fmt::Debug for dyn Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Launcher")
    }
}
