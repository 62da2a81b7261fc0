//! Paths from the assistant: `~` expansion, resolution of `..` and symlinks before the
//! policy sees them, and opening beneath a checked directory so that what is read is what
//! was checked.
//!
//! Resolution never fails on a path that does not exist: it is resolved as far as it
//! exists, and whatever the tool finds there (nothing, a directory where a file was
//! expected, a FIFO) is reported only after the policy allowed the call, so an assistant
//! cannot learn whether a protected path exists from the answer.
//!
//! Opening works on directory handles (cap-std): the checked directory is opened once, the
//! last component is opened relative to it without following symlinks and without
//! blocking (a FIFO swapped in cannot hang the reader), and the opened handle is compared
//! with the checked path (its real path on Linux, device and inode elsewhere). Anything but
//! a regular file or directory is refused before a byte is read.

use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

use crate::error::{Result, ToolError};

/// Longest path accepted from the assistant, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// Expands `~`, and checks that `raw` is a usable absolute path. `field` names the
/// parameter in errors.
pub fn expand(home: &Path, field: &str, raw: &str) -> Result<PathBuf> {
    let bad = |why: String| ToolError::InvalidParameters(format!("{field}: {why}"));
    if raw.is_empty() {
        return Err(bad("must not be empty".into()));
    }
    if raw.contains('\0') {
        return Err(bad("contains a NUL byte".into()));
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(bad(format!(
            "is {} bytes long; the limit is {MAX_PATH_BYTES}",
            raw.len()
        )));
    }
    let path = if raw == "~" {
        home.to_path_buf()
    } else if let Some(rest) = raw.strip_prefix("~/") {
        home.join(rest)
    } else if raw.starts_with('~') {
        return Err(bad(format!(
            "'{raw}': only '~' and '~/...' are expanded; use an absolute path"
        )));
    } else {
        PathBuf::from(raw)
    };
    if !path.is_absolute() {
        return Err(bad(format!(
            "'{raw}' is relative; use an absolute path or one starting with '~/'"
        )));
    }
    Ok(path)
}

/// Turns an IO error about `path` into a readable execution error.
pub fn io_error(path: &Path, e: &io::Error) -> ToolError {
    let p = path.display();
    match e.kind() {
        io::ErrorKind::NotFound => ToolError::exec(format!("File not found: {p}")),
        io::ErrorKind::PermissionDenied => {
            ToolError::exec(format!("The system does not allow access to {p}: {e}"))
        }
        _ => ToolError::exec(format!("Cannot access {p}: {e}")),
    }
}

/// Expands `raw` and resolves it to the place the policy judges: the canonical path when it
/// exists; otherwise as far as it exists, following symlinks (dangling ones too), with the
/// missing rest appended ([`outpost_policy::canonical_or_clean`]). Never fails because of
/// what exists or not: whether a path exists must not show in the answer before the policy
/// allowed the call, so tools stat the resolved path and report what they find from the job.
pub fn resolve(home: &Path, field: &str, raw: &str) -> Result<PathBuf> {
    let path = expand(home, field, raw)?;
    Ok(outpost_policy::canonical_or_clean(&path))
}

/// Resolves a path that may not exist yet: the parent is resolved as [`resolve`] does (it
/// may be missing too; the job finds out), the last component must be a plain name and is
/// not followed. Returns (resolved parent, name).
pub fn resolve_for_create(home: &Path, field: &str, raw: &str) -> Result<(PathBuf, PathBuf)> {
    let path = expand(home, field, raw)?;
    let name = match path.components().next_back() {
        Some(Component::Normal(n)) => PathBuf::from(n),
        _ => {
            return Err(ToolError::InvalidParameters(format!(
                "{field}: '{raw}' does not end in a file name"
            )));
        }
    };
    let parent = path.parent().unwrap_or(Path::new("/"));
    Ok((outpost_policy::canonical_or_clean(parent), name))
}

/// The metadata of the resolved `path`, or the error to answer once the call is allowed.
pub fn stat(path: &Path) -> Result<std::fs::Metadata> {
    std::fs::metadata(path).map_err(|e| io_error(path, &e))
}

/// Describes a file type that is not a regular file or directory, for refusals.
pub fn odd_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return Some("a named pipe (FIFO)");
        }
        if ft.is_socket() {
            return Some("a socket");
        }
        if ft.is_char_device() {
            return Some("a character device");
        }
        if ft.is_block_device() {
            return Some("a block device");
        }
    }
    if ft.is_symlink() {
        return Some("a symbolic link");
    }
    if ft.is_file() || ft.is_dir() {
        None
    } else {
        Some("not a regular file")
    }
}

/// A directory opened once, beneath which files are opened.
#[derive(Debug)]
pub struct SafeRoot {
    dir: Dir,
    path: PathBuf,
}

impl SafeRoot {
    /// Opens the (canonical) directory `path` as the base for opening files. Files
    /// opened beneath it are verified themselves, so this handle is not: use
    /// [`open_verified`](Self::open_verified) when the directory itself is what is read.
    pub fn open(path: &Path) -> Result<Self> {
        let dir =
            Dir::open_ambient_dir(path, ambient_authority()).map_err(|e| io_error(path, &e))?;
        Ok(Self {
            dir,
            path: path.to_path_buf(),
        })
    }

    /// Opens the (canonical) directory `path` and checks it is the directory that was
    /// resolved (for listings, where the directory's entries are the output).
    pub fn open_verified(path: &Path) -> Result<Self> {
        let root = Self::open(path)?;
        verify(&root.dir, path)?;
        Ok(root)
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `rel` (relative, no symlink in its last component) for reading. Refuses
    /// anything but a regular file, without blocking on FIFOs or devices.
    pub fn open_file(&self, rel: &Path) -> Result<(File, std::fs::Metadata)> {
        let mut opts = OpenOptions::new();
        opts.read(true);
        self.open_checked(rel, &mut opts, None)
    }

    /// Like [`open_file`](Self::open_file), for a file whose identity was taken when the
    /// policy checked it: the opened file must be that very file.
    pub fn open_file_expecting(&self, rel: &Path, id: FileId) -> Result<(File, std::fs::Metadata)> {
        let mut opts = OpenOptions::new();
        opts.read(true);
        self.open_checked(rel, &mut opts, Some(id))
    }

    /// Opens `rel` for writing with the given options (create / truncate / append).
    pub fn open_for_write(
        &self,
        rel: &Path,
        opts: &mut OpenOptions,
    ) -> Result<(File, std::fs::Metadata)> {
        self.open_checked(rel, opts, None)
    }

    fn open_checked(
        &self,
        rel: &Path,
        opts: &mut OpenOptions,
        expected: Option<FileId>,
    ) -> Result<(File, std::fs::Metadata)> {
        let full = self.path.join(rel);
        opts.follow(FollowSymlinks::No);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
            #[allow(clippy::cast_possible_wrap)]
            opts.custom_flags(flags.bits() as i32);
        }
        let file = self
            .dir
            .open_with(rel, opts)
            .map_err(|e| open_error(&full, &e))?;
        let file = file.into_std();
        let meta = file.metadata().map_err(|e| io_error(&full, &e))?;
        if let Some(kind) = odd_kind(&meta.file_type()) {
            return Err(ToolError::refused(format!(
                "{} is {kind}; only regular files are read or written",
                full.display()
            )));
        }
        if meta.is_dir() {
            return Err(ToolError::exec(format!(
                "{} is a directory",
                full.display()
            )));
        }
        match expected {
            // Same device and inode as the file the policy judged: it is that file, whatever
            // happened to the path since.
            Some(id) if FileId::of(&meta) == Some(id) => {}
            Some(_) => {
                return Err(ToolError::refused(format!(
                    "{} changed between the permission check and the read (a symlink or \
                     rename race)",
                    full.display()
                )));
            }
            None => verify(&file, &full)?,
        }
        Ok((file, meta))
    }

    /// Opens the subdirectory `name` beneath this one without following a symlink.
    pub fn open_subdir(&self, name: &Path) -> Result<Self> {
        let full = self.path.join(name);
        let dir = self
            .dir
            .open_dir_nofollow(name)
            .map_err(|e| open_error(&full, &e))?;
        verify(&dir, &full)?;
        Ok(Self { dir, path: full })
    }

    /// The entries of this directory, as cap-std reads them (no symlink is followed).
    pub fn entries(&self) -> Result<cap_std::fs::ReadDir> {
        self.dir.entries().map_err(|e| io_error(&self.path, &e))
    }
}

fn open_error(path: &Path, e: &io::Error) -> ToolError {
    // ELOOP from O_NOFOLLOW, or cap-std's own "escapes the root" refusal.
    #[cfg(unix)]
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        return ToolError::refused(format!(
            "{} became a symbolic link after it was checked",
            path.display()
        ));
    }
    if e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("outside") {
        return ToolError::refused(format!(
            "{} leads outside the checked folder",
            path.display()
        ));
    }
    io_error(path, e)
}

/// Checks that the open handle `fd` is the object at `expected` (which has no symlinks).
#[cfg(unix)]
fn verify(fd: &impl std::os::fd::AsFd, expected: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let changed = || {
        ToolError::refused(format!(
            "{} changed while it was being opened (a symlink or rename race)",
            expected.display()
        ))
    };
    #[cfg(target_os = "linux")]
    {
        let link = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
        if let Ok(real) = std::fs::read_link(link) {
            return if real == expected {
                Ok(())
            } else {
                Err(changed())
            };
        }
    }
    let st = rustix::fs::fstat(fd).map_err(|e| io_error(expected, &e.into()))?;
    let now = std::fs::symlink_metadata(expected).map_err(|e| io_error(expected, &e))?;
    #[allow(clippy::useless_conversion)]
    if now.dev() == u64::from(st.st_dev) && now.ino() == u64::from(st.st_ino) {
        Ok(())
    } else {
        Err(changed())
    }
}

#[cfg(not(unix))]
fn verify<T>(_fd: &T, _expected: &Path) -> Result<()> {
    Ok(())
}

/// A file's identity (device and inode), taken when the policy checks a path and compared
/// with what is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file `meta` describes, where the platform has one.
    pub fn of(meta: &std::fs::Metadata) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(Self {
                dev: meta.dev(),
                ino: meta.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            None
        }
    }
}

/// Whether the file has more than one name (hard links), which a path check cannot see.
pub fn has_other_names(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.is_file() && meta.nlink() > 1
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn expand_handles_tilde_and_rejects_bad_shapes() {
        let home = Path::new("/home/u");
        assert_eq!(expand(home, "p", "~").unwrap(), PathBuf::from("/home/u"));
        assert_eq!(
            expand(home, "p", "~/a/b").unwrap(),
            PathBuf::from("/home/u/a/b")
        );
        assert_eq!(
            expand(home, "p", "/etc/x").unwrap(),
            PathBuf::from("/etc/x")
        );
        for (raw, needle) in [
            ("", "must not be empty"),
            ("a\0b", "NUL"),
            ("~root/x", "only '~'"),
            ("notes.txt", "relative"),
            ("../x", "relative"),
        ] {
            let e = expand(home, "filePath", raw).unwrap_err();
            let ToolError::InvalidParameters(m) = e else {
                panic!()
            };
            assert!(
                m.starts_with("filePath: ") && m.contains(needle),
                "{raw:?}: {m}"
            );
        }
        let long = format!("/{}", "a".repeat(MAX_PATH_BYTES));
        assert!(expand(home, "p", &long).is_err());
    }

    #[test]
    fn safe_root_reads_regular_files_and_refuses_fifos_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root_path = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root_path.join("a.txt"), "hi").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root_path.join("link")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root_path.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let root = SafeRoot::open(&root_path).unwrap();
        let (_, meta) = root.open_file(Path::new("a.txt")).unwrap();
        assert_eq!(meta.len(), 2);
        assert!(matches!(
            root.open_file(Path::new("link")),
            Err(ToolError::Refused { .. })
        ));
        let e = root.open_file(Path::new("fifo")).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(root.open_file(Path::new("../x")).is_err());
    }
}
