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
        let (active, status) = lock(&self.inner.shortcut_status).clone();
        SystemSettings {
            keep_in_tray: self.config().keep_in_tray,
            start_at_login: file.as_deref().is_some_and(autostart::enabled),
            autostart_file: file.map(|p| p.display().to_string()).unwrap_or_default(),
            shortcut: self.shortcut(),
            shortcut_status: status,
            shortcut_active: active,
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
        let shortcut = settings.shortcut.trim();
        if shortcut.len() > 64 || shortcut.chars().any(char::is_control) {
            return Err(DesktopError::invalid(
                "shortcut",
                "a shortcut is a short accelerator such as Ctrl+Alt+Space",
            ));
        }
        {
            let mut c = lock(&self.inner.config);
            c.keep_in_tray = settings.keep_in_tray;
            c.voice_shortcut = Some(shortcut.to_owned());
            c.save(&self.inner.paths.settings_file())?;
        }
        Ok(self.system_settings())
    }

    /// The system-wide shortcut's accelerator (empty: off).
    pub fn shortcut(&self) -> String {
        self.config()
            .voice_shortcut
            .unwrap_or_else(|| crate::settings::DEFAULT_SHORTCUT.to_owned())
    }

    /// The shell says whether the shortcut works system-wide, and in what words.
    pub fn set_shortcut_status(&self, active: bool, status: String) {
        *lock(&self.inner.shortcut_status) = (active, status);
    }

    /// The system-wide shortcut went down: with voice on in push-to-talk it is the talk
    /// key (true: the caller must send the release); otherwise it raises the window and
    /// focuses the message box (the shell shows the window; this tells the page).
    pub fn shortcut_down(&self) -> bool {
        let v = self.voice_status();
        if v.on && v.mode == crate::contract::VoiceMode::PushToTalk {
            self.voice_control(talk(true));
            true
        } else {
            lock(&self.inner.live).emit(crate::contract::AppEvent::Raised(
                crate::contract::Raised {
                    focus: "composer".into(),
                },
            ));
            false
        }
    }

    /// Whether closing the window keeps the session running in the tray.
    pub fn keep_in_tray(&self) -> bool {
        self.config().keep_in_tray
    }

    /// The talk key came up: the microphone stops at once.
    pub fn shortcut_up(&self) {
        self.voice_control(talk(false));
    }
}

fn talk(down: bool) -> crate::contract::VoiceControl {
    crate::contract::VoiceControl {
        talking: Some(down),
        muted: None,
        mode: None,
        echo_cancellation: None,
    }
}
