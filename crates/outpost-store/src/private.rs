//! The profile's folders and files are the user's alone: the conversation log, the
//! settings, the policy and what lies beside them. Under the usual umask 022 a folder
//! would be created 0755 and a file 0644, readable by every account on the machine; here
//! folders are 0700 and files 0600 on Unix (elsewhere the platform's per-user folders
//! already keep others out). Existing ones made before are tightened, not only new ones.

use std::io::Write as _;
use std::path::Path;

/// Creates `dir` (and missing parents) for the user only, and takes group and other
/// access away from it when it already exists.
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        restrict(dir, 0o700)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Takes group and other access away from the file at `path`, when it exists.
pub fn restrict_file(path: &Path) -> std::io::Result<()> {
    match restrict(path, 0o600) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Writes `contents` to `path` (created or truncated) for the user only.
pub fn write_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options.open(path)?;
    restrict_file(path)?;
    f.write_all(contents)?;
    f.flush()
}

/// Drops the permission bits outside `keep` (0700 or 0600) from `path`.
#[cfg_attr(not(unix), allow(unused_variables))]
fn restrict(path: &Path, keep: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & keep))?;
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn folders_are_0700_and_files_0600_new_or_old() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a/b");
        create_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("f");
        write_file(&file, b"x").unwrap();
        assert_eq!(mode(&file), 0o600);
        // Made before, readable by everyone: tightened.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        create_dir(&dir).unwrap();
        restrict_file(&file).unwrap();
        assert_eq!((mode(&dir), mode(&file)), (0o700, 0o600));
        restrict_file(&dir.join("missing")).unwrap();
    }
}
