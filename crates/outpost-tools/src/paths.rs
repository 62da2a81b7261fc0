//! Paths from the assistant: `~` expansion, and resolution into a [`Resolved`] path: the
//! place the policy judges together with an open handle that pins it, so that every later
//! step of the call (stat, open, list, launch) works on what was judged.
//!
//! Resolution never fails on a path that does not exist: it is resolved as far as it
//! exists, and whatever the tool finds there (nothing, a directory where a file was
//! expected, a FIFO) is reported only after the policy allowed the call, so an assistant
//! cannot learn whether a protected path exists from the answer.
//!
//! Handles: resolving opens the deepest existing folder on the way (a cap-std `Dir`,
//! `O_PATH` on Linux), following symlinks once, the way the system does, and derives that
//! folder's real path *from the handle* (`/proc/self/fd` on Linux; device and inode against
//! the path elsewhere). The path the policy judges is that real path plus the missing rest,
//! and the target's identity (device and inode) is read through the same handle. A folder
//! swapped for a symlink at any moment therefore cannot move the call somewhere that was
//! not judged: the job works only through the held folder, opens the last component
//! relative to it without following symlinks and without blocking (a FIFO swapped in
//! cannot hang the reader), checks it is the very object seen at resolution, and refuses
//! anything but a regular file or directory before a byte is read. The job also checks
//! that the held folder is still at the judged path and refuses when it moved.
//!
//! What is left: open_path hands a *path* to another program, so a swap between its last
//! check and that program opening the path is not seen; search_files enumerates with the
//! `ignore` walker by path (for .gitignore rules) but reports and reads only what it finds
//! again through handles beneath the held root, so a swapped folder can at most change
//! which ignore rules apply.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata, OpenOptions};

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
        // `~//x` is home/x: joining an absolute rest would replace home with `/x`.
        home.join(rest.trim_start_matches('/'))
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

/// Expands `raw` and resolves it to the place the policy would judge, without holding
/// anything ([`outpost_policy::canonical_or_clean`]). Tools use [`Resolved`] instead, which
/// derives that place from an open handle and keeps it.
pub fn resolve(home: &Path, field: &str, raw: &str) -> Result<PathBuf> {
    let path = expand(home, field, raw)?;
    Ok(outpost_policy::canonical_or_clean(&path))
}

fn changed(path: &Path) -> ToolError {
    ToolError::refused(format!(
        "{} changed between the permission check and its use (a symlink or rename race)",
        path.display()
    ))
}

/// A path resolved once for one call: the place the policy judges, the handle of the
/// deepest existing folder on the way, and what was found at the place (read through that
/// handle). Everything the job does goes through the handle.
#[derive(Debug)]
pub struct Resolved {
    /// What the policy judges: the held folder's real path plus `rest`.
    path: PathBuf,
    /// The deepest existing folder, with its real path.
    dir: SafeRoot,
    /// The names below the held folder that lead to the target: one when the target's
    /// folder exists, none for `/`, more when folders are missing.
    rest: Vec<OsString>,
    /// What was at the target when it was resolved (not following a symlink), or the error
    /// to answer with once the call is allowed.
    found: Result<Metadata>,
    /// The error to answer with when the target's folder is needed and is missing.
    folder_missing: Option<ToolError>,
}

impl Resolved {
    /// Expands `raw` and resolves it: symlinks (dangling ones too) and `..` are followed as
    /// far as the path exists ([`outpost_policy::canonical_or_clean`]), then the result is
    /// pinned by a handle. Never fails because of what exists at the path.
    pub fn resolve(home: &Path, field: &str, raw: &str) -> Result<Self> {
        let path = expand(home, field, raw)?;
        let canonical = outpost_policy::canonical_or_clean(&path);
        match (canonical.parent(), canonical.file_name()) {
            (Some(parent), Some(name)) => Self::hold(parent, vec![name.to_owned()]),
            _ => Self::hold(&canonical, Vec::new()),
        }
    }

    /// Resolves a path that may not exist yet, for creating it: the folder is resolved as
    /// [`resolve`](Self::resolve) does (it may be missing too; the job finds out), the last
    /// component must be a plain name and is not followed.
    pub fn resolve_for_create(home: &Path, field: &str, raw: &str) -> Result<Self> {
        let path = expand(home, field, raw)?;
        let name = match path.components().next_back() {
            Some(Component::Normal(n)) => n.to_owned(),
            _ => {
                return Err(ToolError::InvalidParameters(format!(
                    "{field}: '{raw}' does not end in a file name"
                )));
            }
        };
        let parent = path.parent().unwrap_or(Path::new("/"));
        Self::hold(&outpost_policy::canonical_or_clean(parent), vec![name])
    }

    /// Opens the deepest existing folder of `folder` (a path without symlinks as far as
    /// it exists) and takes the judged path from that handle.
    fn hold(folder: &Path, mut rest: Vec<OsString>) -> Result<Self> {
        let mut candidate = folder.to_path_buf();
        let mut missing: Option<io::Error> = None;
        let dir = loop {
            match Dir::open_ambient_dir(&candidate, ambient_authority()) {
                Ok(dir) => break dir,
                Err(e) => {
                    match (candidate.parent(), candidate.file_name()) {
                        (Some(parent), Some(name)) => {
                            rest.insert(0, name.to_owned());
                            candidate = parent.to_path_buf();
                        }
                        // Not even `/` opens: nothing to do with the path asked for.
                        _ => return Err(io_error(&candidate, &e)),
                    }
                    missing.get_or_insert(e);
                }
            }
        };
        let real = real_path(&dir, &candidate);
        let dir_path = real.clone().unwrap_or_else(|| candidate.clone());
        let path = rest.iter().fold(dir_path.clone(), |p, n| p.join(n));
        let folder_path = path.parent().unwrap_or(&path).to_path_buf();
        let (found, folder_missing) = if real.is_none() {
            (Err(changed(&path)), Some(changed(&path)))
        } else {
            match (missing, rest.as_slice()) {
                (Some(e), _) => (Err(io_error(&path, &e)), Some(io_error(&folder_path, &e))),
                (None, []) => (dir.dir_metadata().map_err(|e| io_error(&path, &e)), None),
                (None, [name]) => (
                    dir.symlink_metadata(name).map_err(|e| io_error(&path, &e)),
                    None,
                ),
                // More than one name left means a folder failed to open.
                (None, _) => (Err(changed(&path)), Some(changed(&path))),
            }
        };
        Ok(Self {
            path,
            dir: SafeRoot {
                dir,
                path: dir_path,
            },
            rest,
            found,
            folder_missing,
        })
    }

    /// The path the policy judges.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder the path is in (the path itself for `/`).
    pub fn parent(&self) -> &Path {
        self.path.parent().unwrap_or(&self.path)
    }

    /// What was at the path when it was resolved, not following a symlink there; or the
    /// error to answer with (not found, not a directory…). For the job only.
    pub fn found(&self) -> Result<&Metadata> {
        self.found.as_ref().map_err(Clone::clone)
    }

    /// Like [`found`](Self::found), for tools that need an object: a symlink there (a
    /// loop the resolution gave up on, or a swap) is refused.
    pub fn target(&self) -> Result<&Metadata> {
        let meta = self.found()?;
        if meta.file_type().is_symlink() {
            return Err(ToolError::refused(format!(
                "{} is a symbolic link that could not be followed (a loop), or it became one \
                 while it was checked",
                self.path.display()
            )));
        }
        Ok(meta)
    }

    /// Whether the target is a file with other names (hard links), which a path check
    /// cannot see.
    pub fn has_other_names(&self) -> bool {
        self.found.as_ref().is_ok_and(has_other_names)
    }

    fn name(&self) -> Option<&Path> {
        match self.rest.as_slice() {
            [name] => Some(Path::new(name)),
            _ => None,
        }
    }

    /// Checks that the held folder is still at the path it had when the policy judged the
    /// call (the handle keeps working on it if it moved, but the answer would name a path
    /// it no longer has).
    pub fn recheck(&self) -> Result<()> {
        if real_path(&self.dir.dir, &self.dir.path).as_deref() == Some(self.dir.path.as_path()) {
            Ok(())
        } else {
            Err(changed(&self.path))
        }
    }

    /// The target's metadata now, read through the held folder without following a
    /// symlink; it must be the object found at resolution.
    pub fn metadata(&self) -> Result<Metadata> {
        let before = self.target()?;
        self.recheck()?;
        let now = match self.name() {
            Some(name) => self.dir.dir.symlink_metadata(name),
            None => self.dir.dir.dir_metadata(),
        }
        .map_err(|e| io_error(&self.path, &e))?;
        if FileId::of(before) != FileId::of(&now) {
            return Err(changed(&self.path));
        }
        Ok(now)
    }

    /// Opens the target for reading through the held folder: it must be the regular file
    /// found at resolution. FIFOs, sockets and devices are refused (unopened when they
    /// were there at resolution).
    pub fn open_file(&self) -> Result<(File, Metadata)> {
        let before = self.target()?;
        if let Some(kind) = odd_kind(&before.file_type()) {
            return Err(ToolError::refused(format!(
                "{} is {kind}; only regular files are read or written",
                self.path.display()
            )));
        }
        self.recheck()?;
        let name = self
            .name()
            .ok_or_else(|| ToolError::exec(format!("{} is a directory", self.path.display())))?;
        let mut opts = OpenOptions::new();
        opts.read(true);
        self.dir
            .open_checked(name, &mut opts, Some(FileId::of(before)))
    }

    /// Opens the target folder through the held folder (for listing and searching): it
    /// must be a folder, the one found at resolution.
    pub fn open_dir(&self) -> Result<SafeRoot> {
        let before = self.target()?;
        if !before.is_dir() {
            return Err(ToolError::exec(format!(
                "{} is not a directory",
                self.path.display()
            )));
        }
        self.recheck()?;
        let root = match self.name() {
            Some(name) => self.dir.open_subdir(name)?,
            None => SafeRoot {
                dir: self
                    .dir
                    .dir
                    .try_clone()
                    .map_err(|e| io_error(&self.path, &e))?,
                path: self.path.clone(),
            },
        };
        let now = root
            .dir
            .dir_metadata()
            .map_err(|e| io_error(&self.path, &e))?;
        if FileId::of(before) != FileId::of(&now) {
            return Err(changed(&self.path));
        }
        Ok(root)
    }

    /// The held folder and the target's name, for creating or changing the target; fails
    /// when the folder is missing or moved.
    pub fn folder_for_write(&self) -> Result<(&SafeRoot, &Path)> {
        if let Some(e) = &self.folder_missing {
            return Err(e.clone());
        }
        self.recheck()?;
        let name = self
            .name()
            .ok_or_else(|| ToolError::exec(format!("{} is not a file", self.path.display())))?;
        Ok((&self.dir, name))
    }
}

/// Describes a file type that is not a regular file or directory, for refusals.
pub fn odd_kind(ft: &cap_std::fs::FileType) -> Option<&'static str> {
    #[cfg(unix)]
    {
        use cap_std::fs::FileTypeExt;
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

/// An open folder, with its real path, beneath which files are opened.
#[derive(Debug)]
pub struct SafeRoot {
    dir: Dir,
    path: PathBuf,
}

impl SafeRoot {
    /// Opens the (canonical) directory `path` by path and checks it is the directory at
    /// that path (its real path, or device and inode). Tools get their folders from
    /// [`Resolved`]; this is for callers that hold a path they trust.
    pub fn open_verified(path: &Path) -> Result<Self> {
        let dir =
            Dir::open_ambient_dir(path, ambient_authority()).map_err(|e| io_error(path, &e))?;
        verify(&dir, path)?;
        Ok(Self {
            dir,
            path: path.to_path_buf(),
        })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `rel` (relative, no symlink in its last component) for reading. Refuses
    /// anything but a regular file, without blocking on FIFOs or devices.
    pub fn open_file(&self, rel: &Path) -> Result<(File, Metadata)> {
        let mut opts = OpenOptions::new();
        opts.read(true);
        self.open_checked(rel, &mut opts, None)
    }

    /// Opens `rel` for writing with the given options (create / truncate / append).
    pub fn open_for_write(&self, rel: &Path, opts: &mut OpenOptions) -> Result<(File, Metadata)> {
        self.open_checked(rel, opts, None)
    }

    /// What is at `name` in this folder, not following a symlink.
    pub fn entry_metadata(&self, name: &Path) -> Result<Metadata> {
        self.dir
            .symlink_metadata(name)
            .map_err(|e| io_error(&self.path.join(name), &e))
    }

    fn open_checked(
        &self,
        rel: &Path,
        opts: &mut OpenOptions,
        expected: Option<FileId>,
    ) -> Result<(File, Metadata)> {
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
        let meta = Metadata::from_file(&file).map_err(|e| io_error(&full, &e))?;
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
            Some(id) if FileId::of(&meta) == id => {}
            Some(_) => return Err(changed(&full)),
            None => verify(&file, &full)?,
        }
        Ok((file, meta))
    }

    /// Opens the subdirectory `name` beneath this one without following a symlink.
    pub fn open_subdir(&self, name: &Path) -> Result<Self> {
        let full = self.path.join(name);
        let dir = self.dir.open_dir_nofollow(name).map_err(|e| {
            // A symlink where a folder was gives ENOTDIR rather than ELOOP here.
            if self
                .dir
                .symlink_metadata(name)
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                ToolError::refused(format!(
                    "{} became a symbolic link after it was checked",
                    full.display()
                ))
            } else {
                open_error(&full, &e)
            }
        })?;
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

/// Where the open handle `fd` is now: on Linux the kernel's own record of its path
/// (`/proc/self/fd`), elsewhere `opened_as`; either way confirmed by device and inode
/// against what is at that path now (a deleted or unreachable folder gives `None`).
#[cfg(unix)]
#[allow(clippy::useless_conversion)]
fn real_path(fd: &impl std::os::fd::AsFd, opened_as: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    #[cfg(target_os = "linux")]
    let candidate = {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
            .unwrap_or_else(|_| opened_as.to_path_buf())
    };
    #[cfg(not(target_os = "linux"))]
    let candidate = opened_as.to_path_buf();
    let st = rustix::fs::fstat(fd).ok()?;
    let now = std::fs::symlink_metadata(&candidate).ok()?;
    (now.dev() == u64::from(st.st_dev) && now.ino() == u64::from(st.st_ino)).then_some(candidate)
}

#[cfg(not(unix))]
fn real_path<T>(_fd: &T, opened_as: &Path) -> Option<PathBuf> {
    Some(opened_as.to_path_buf())
}

/// Checks that the open handle `fd` is the object at `expected` (which has no symlinks).
#[cfg(unix)]
fn verify(fd: &impl std::os::fd::AsFd, expected: &Path) -> Result<()> {
    if real_path(fd, expected).as_deref() == Some(expected) {
        Ok(())
    } else {
        Err(changed(expected))
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
    /// The identity of the file `meta` describes (zeros where the platform has none).
    pub fn of(meta: &Metadata) -> Self {
        #[cfg(unix)]
        {
            use cap_std::fs::MetadataExt;
            Self {
                dev: meta.dev(),
                ino: meta.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            Self { dev: 0, ino: 0 }
        }
    }
}

/// Whether the file has more than one name (hard links), which a path check cannot see.
pub fn has_other_names(meta: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
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

    /// Issue 19.4: extra slashes after `~` stay inside home (Path::join with an absolute
    /// rest used to replace home: `~//x` was `/x`).
    #[test]
    fn extra_slashes_after_tilde_stay_in_home() {
        let home = Path::new("/home/u");
        for raw in ["~//x", "~///x", "~//.ssh/../x"] {
            let got = expand(home, "p", raw).unwrap();
            assert!(got.starts_with(home), "{raw:?} expanded to {got:?}");
        }
        assert_eq!(
            expand(home, "p", "~//x").unwrap(),
            PathBuf::from("/home/u/x")
        );
        assert_eq!(
            expand(home, "p", "~//")
                .unwrap()
                .components()
                .collect::<Vec<_>>(),
            home.components().collect::<Vec<_>>()
        );
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
        let root = SafeRoot::open_verified(&root_path).unwrap();
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

    /// The judged path comes from the held handle, and a missing rest is appended to the
    /// deepest folder that exists.
    #[test]
    fn resolved_holds_the_deepest_existing_folder() {
        let dir = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(home.join("a/b")).unwrap();
        std::fs::write(home.join("a/b/f"), "x").unwrap();
        let r = Resolved::resolve(&home, "p", "~/a/b/f").unwrap();
        assert_eq!(r.path(), home.join("a/b/f"));
        assert!(r.found().unwrap().is_file());
        let r = Resolved::resolve(&home, "p", "~/a/nope/deeper/f").unwrap();
        assert_eq!(r.path(), home.join("a/nope/deeper/f"));
        assert_eq!(r.dir.path(), home.join("a"));
        let e = r.found().unwrap_err();
        assert!(e.to_string().starts_with("File not found: "), "{e}");
        let r = Resolved::resolve(&home, "p", "/").unwrap();
        assert_eq!(r.path(), Path::new("/"));
        assert!(r.found().unwrap().is_dir());
        assert!(r.open_dir().is_ok());
    }
}
