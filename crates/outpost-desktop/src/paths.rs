//! Where the app keeps its files: the config folder (settings, the policy, `mcp.toml`) and
//! the data folder (the store, logs), both the user's alone.

use std::path::{Path, PathBuf};

use crate::error::{DesktopError, Result};

/// Where the app keeps its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Settings and the policy (`$OUTPOST_CONFIG_DIR`, else the platform's config dir).
    pub config_dir: PathBuf,
    /// The conversation store (`$OUTPOST_DATA_DIR`, else the platform's data dir).
    pub data_dir: PathBuf,
}

impl Paths {
    /// The platform's directories, overridden by `OUTPOST_CONFIG_DIR` / `OUTPOST_DATA_DIR`.
    pub fn from_env() -> Result<Self> {
        let env_dir = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let config_dir = match env_dir("OUTPOST_CONFIG_DIR") {
            Some(d) => d,
            None => directories::ProjectDirs::from("dev", "outpost", "outpost")
                .map(|p| p.config_dir().to_path_buf())
                .ok_or_else(|| {
                    DesktopError::Internal(
                        "Cannot find a configuration folder: $HOME is not set. Set \
                         OUTPOST_CONFIG_DIR to choose one."
                            .into(),
                    )
                })?,
        };
        let data_dir = outpost_store::data_dir(None)?;
        Ok(Self {
            config_dir,
            data_dir,
        })
    }

    /// Creates the config and data folders for the user only (0700; existing ones are
    /// tightened): see `outpost_store::private`.
    pub fn create_private_dirs(&self) -> Result<()> {
        for dir in [&self.config_dir, &self.data_dir] {
            private_dir(dir)?;
        }
        Ok(())
    }

    /// `settings.toml`.
    pub fn settings_file(&self) -> PathBuf {
        self.config_dir.join("settings.toml")
    }

    /// `policy.toml`, shared with `outpost connect --policy`.
    pub fn policy_file(&self) -> PathBuf {
        self.config_dir.join("policy.toml")
    }
}

/// Creates `dir` for the user only (0700), tightening it when it exists (the app's
/// single-instance lock and socket live in the data folder).
pub fn private_dir(dir: &Path) -> Result<()> {
    outpost_store::private::create_dir(dir).map_err(|source| DesktopError::Io {
        action: "create the folder",
        path: dir.display().to_string(),
        source,
    })
}
