//! The one error every command rejects with: `{code, message}` (ui/CONTRACT.md).

use outpost_desktop::{CommandError, DesktopError};

/// What a command returns.
pub type CmdResult<T> = Result<T, CommandError>;

/// Converts a desktop error into the serialized form.
pub fn err(e: DesktopError) -> CommandError {
    CommandError::from(e)
}
