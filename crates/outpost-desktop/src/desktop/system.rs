//! [`Desktop`]'s system commands (`system_*`): how Outpost lives on the desktop, in the
//! tray when its window is closed ([`crate::tray`]) and at login ([`crate::autostart`]).

use crate::autostart;
use crate::contract::SystemSettings;
use crate::error::{DesktopError, Result};

use super::{Desktop, lock};

/// The command-line flag of a start at login: the window stays hidden when the app keeps
/// running in the tray.
pub const BACKGROUND_FLAG: &str = "--background";

impl Desktop {
    /// `system_settings`.
    pub fn system_settings(&self) -> SystemSettings {
        let file = autostart::entry_path();
        SystemSettings {
            keep_in_tray: self.config().keep_in_tray,
            start_at_login: file.as_deref().is_some_and(autostart::enabled),
            autostart_file: file.map(|p| p.display().to_string()).unwrap_or_default(),
        }
    }

    /// `system_set`: saves "keep in tray" in settings.toml and writes or removes the
    /// autostart entry for `program` (the running executable).
    pub fn set_system(
        &self,
        settings: &SystemSettings,
        program: &std::path::Path,
    ) -> Result<SystemSettings> {
        let file = autostart::entry_path();
        match (&file, settings.start_at_login) {
            (Some(path), on) => autostart::set(path, program, on)?,
            (None, true) => {
                return Err(DesktopError::invalid(
                    "startAtLogin",
                    "there is no home folder to put the autostart entry in ($HOME is not set)",
                ));
            }
            (None, false) => {}
        }
        {
            let mut c = lock(&self.inner.config);
            c.keep_in_tray = settings.keep_in_tray;
            c.save(&self.inner.paths.settings_file())?;
        }
        Ok(self.system_settings())
    }

    /// Whether closing the window keeps the session running in the tray.
    pub fn keep_in_tray(&self) -> bool {
        self.config().keep_in_tray
    }
}
