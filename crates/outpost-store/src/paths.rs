//! Where the store lives on disk.
//!
//! Resolution order: an explicit path (a command-line flag), then the `OUTPOST_DATA_DIR`
//! environment variable, then the platform's per-user data directory
//! (`~/.local/share/outpost` on Linux, `~/Library/Application Support/Outpost` on macOS,
//! `%APPDATA%\Outpost\data` on Windows).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Environment variable that overrides the data directory (used by tests and portable setups).
pub const DATA_DIR_ENV: &str = "OUTPOST_DATA_DIR";

/// File name of the database inside the data directory.
pub const DATABASE_FILE: &str = "outpost.sqlite3";

/// Resolves the data directory: `explicit` if given, else `$OUTPOST_DATA_DIR` if set and
/// non-empty, else the platform's per-user data directory. Does not create it.
pub fn data_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    resolve_data_dir(explicit, std::env::var_os(DATA_DIR_ENV))
}

/// [`data_dir`] with the environment value passed in, so it can be tested without touching
/// the process environment.
pub fn resolve_data_dir(explicit: Option<&Path>, env_value: Option<OsString>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return check(path.to_path_buf());
    }
    if let Some(value) = env_value.filter(|v| !v.is_empty()) {
        return check(PathBuf::from(value));
    }
    directories::ProjectDirs::from("", "", "Outpost")
        .map(|dirs| dirs.data_dir().to_path_buf())
        .ok_or(Error::NoDataDir)
}

/// The database file inside `dir`.
pub fn database_path(dir: &Path) -> PathBuf {
    dir.join(DATABASE_FILE)
}

/// Creates `dir` (and parents) if needed, for the user only (see [`crate::private`]), and
/// checks it is a directory.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    crate::private::create_dir(dir).map_err(|error| Error::Io {
        action: "create data directory",
        path: dir.to_path_buf(),
        error,
    })?;
    let meta = std::fs::metadata(dir).map_err(|error| Error::Io {
        action: "inspect data directory",
        path: dir.to_path_buf(),
        error,
    })?;
    if !meta.is_dir() {
        return Err(Error::BadDataDir {
            path: dir.to_path_buf(),
            reason: "it exists and is not a directory",
        });
    }
    Ok(())
}

fn check(path: PathBuf) -> Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(Error::BadDataDir {
            path,
            reason: "the path is empty",
        });
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn explicit_path_wins_over_environment() {
        let got = resolve_data_dir(Some(Path::new("/a/flag")), Some("/b/env".into())).unwrap();
        assert_eq!(got, PathBuf::from("/a/flag"));
    }

    #[test]
    fn environment_wins_over_platform_default() {
        let got = resolve_data_dir(None, Some("/b/env".into())).unwrap();
        assert_eq!(got, PathBuf::from("/b/env"));
    }

    #[test]
    fn empty_environment_value_is_ignored() {
        let got = resolve_data_dir(None, Some(OsString::new()));
        // Falls through to the platform default (or NoDataDir without a home directory).
        match got {
            Ok(p) => {
                assert!(p.ends_with("outpost") || p.ends_with("Outpost") || p.ends_with("data"))
            }
            Err(e) => assert!(matches!(e, Error::NoDataDir)),
        }
    }

    #[test]
    fn empty_explicit_path_is_rejected() {
        let err = resolve_data_dir(Some(Path::new("")), None).unwrap_err();
        assert!(matches!(err, Error::BadDataDir { .. }), "{err}");
    }

    #[test]
    fn ensure_dir_rejects_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let err = ensure_dir(&file).unwrap_err();
        assert!(err.to_string().contains("plain-file"), "{err}");
    }

    #[test]
    fn ensure_dir_creates_nested_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let nested = tmp.path().join("a/b/c");
        ensure_dir(&nested).unwrap();
        assert!(nested.is_dir());
    }
}
