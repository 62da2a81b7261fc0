//! The file tools: read_local_file, list_directory, file_info and write_file.
//!
//! `prepare` resolves the path once into a [`Resolved`]: the real location the policy
//! judges (also for a path that does not exist) and the open handle of its folder. The
//! job, which runs only once the call is allowed, reports what was there (or that nothing
//! was) and does everything through that handle, so a folder swapped meanwhile cannot
//! redirect it; reads go in chunks so a cancel or deadline stops them promptly. Nothing is
//! truncated silently: a capped read says `truncated: true` and gives the file's total size.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};

use base64::Engine;
use cap_std::fs::OpenOptions;
use outpost_policy::ToolHints;
use outpost_protocol::Map;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{kind_name, time_string};
use crate::error::{Result, ToolError};
use crate::paths::{Resolved, SafeRoot, has_other_names, io_error};
use crate::tool::{Access, Prepared, RunContext, Tool, ToolEnv, ToolSpec, parse_params, to_map};

/// Bytes read per step; cancellation is checked between steps.
const CHUNK: usize = 64 * 1024;
/// Default cap of one read.
pub const DEFAULT_MAX_BYTES: u64 = 1024 * 1024;
/// Largest cap a caller may ask for.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;
/// Largest content write_file accepts, in bytes.
pub const MAX_WRITE_BYTES: usize = 16 * 1024 * 1024;

const HARD_LINK_REASON: &str = "this file has other names (hard links) that a folder rule \
                                cannot see, so it is never read without asking";
const HARD_LINK_INFO_REASON: &str = "this file has other names (hard links) that a folder \
                                     rule cannot see, so it is never described without asking";

// ---------------------------------------------------------------------------------------
// read_local_file

/// Parameters of read_local_file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadParams {
    /// The file to read (absolute, or starting with `~/`).
    #[schemars(length(min = 1, max = 4096))]
    pub file_path: String,
    /// Byte offset to start at (default 0).
    #[schemars(range(min = 0))]
    pub offset: Option<u64>,
    /// Most bytes to return (default 1 MiB, at most 16 MiB).
    #[schemars(range(min = 1, max = 16_777_216))]
    pub max_bytes: Option<u64>,
}

/// Result of read_local_file.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadOutput {
    /// The resolved path that was read.
    pub path: String,
    /// The bytes read: text, or base64 for binary data.
    pub content: String,
    /// "utf-8" or "base64".
    pub encoding: String,
    /// Total size of the file in bytes.
    pub size: u64,
    /// Where the read started.
    pub offset: u64,
    /// How many bytes `content` holds (before base64).
    pub bytes_read: u64,
    /// True when the file goes on past what was returned.
    pub truncated: bool,
    /// Media type guessed from the name (and content).
    pub mime_type: String,
}

/// read_local_file.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadLocalFile;

impl Tool for ReadLocalFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<ReadParams, ReadOutput>(
            "read_local_file",
            "Read a file on the user's computer. Text comes back as UTF-8, anything else as \
             base64. Large files are cut at maxBytes and say truncated: true with their size; \
             read on with offset.",
            ToolHints::READ_ONLY,
            10_000,
        )
    }

    fn prepare(&self, params: Map, env: &ToolEnv) -> Result<Prepared> {
        let p: ReadParams = parse_params(params)?;
        let held = Resolved::resolve(&env.home, "filePath", &p.file_path)?;
        let offset = p.offset.unwrap_or(0);
        let max = p.max_bytes.unwrap_or(DEFAULT_MAX_BYTES).min(MAX_READ_BYTES);
        let force_ask = held.has_other_names().then(|| HARD_LINK_REASON.to_owned());
        let path = held.path().to_path_buf();
        Ok(Prepared {
            access: Access {
                summary: format!("Read {}", path.display()),
                folder: Some(held.parent().to_path_buf()),
                paths: vec![path],
                force_ask,
            },
            // What is (or is not) there is told by the job, after the policy allowed it.
            job: Box::new(move |cx| {
                cx.check()?;
                if held.target()?.is_dir() {
                    return Err(ToolError::exec(format!(
                        "{} is a directory; use list_directory",
                        held.path().display()
                    )));
                }
                read_file(cx, &held, offset, max)
            }),
        })
    }
}

fn read_file(cx: &RunContext, held: &Resolved, offset: u64, max: u64) -> Result<Map> {
    cx.check()?;
    let path = held.path();
    let (mut file, meta) = held.open_file()?;
    let size = meta.len();
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| io_error(path, &e))?;
    }
    let want = usize::try_from(max.min(size.saturating_sub(offset))).unwrap_or(usize::MAX);
    let mut buf = Vec::with_capacity(want);
    let mut chunk = vec![0u8; CHUNK.min(want.max(1))];
    while buf.len() < want {
        cx.check()?;
        let n = (want - buf.len()).min(chunk.len());
        let got = file.read(&mut chunk[..n]).map_err(|e| io_error(path, &e))?;
        if got == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..got]);
    }
    let mut truncated = offset.saturating_add(buf.len() as u64) < size;
    let (content, encoding) = match std::str::from_utf8(&buf) {
        Ok(s) => (s.to_owned(), "utf-8"),
        // The cap cut a character in half: return the whole characters as text.
        Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => {
            buf.truncate(e.valid_up_to());
            truncated = true;
            (String::from_utf8_lossy(&buf).into_owned(), "utf-8")
        }
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(&buf),
            "base64",
        ),
    };
    let mime_type = mime_guess::from_path(path)
        .first()
        .map(|m| m.essence_str().to_owned())
        .unwrap_or_else(|| {
            if encoding == "utf-8" {
                "text/plain"
            } else {
                "application/octet-stream"
            }
            .to_owned()
        });
    to_map(&ReadOutput {
        path: path.to_string_lossy().into_owned(),
        content,
        encoding: encoding.into(),
        size,
        offset,
        bytes_read: buf.len() as u64,
        truncated,
        mime_type,
    })
}

// ---------------------------------------------------------------------------------------
// list_directory

/// Parameters of list_directory.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListParams {
    /// The folder to list (absolute, or starting with `~/`).
    #[schemars(length(min = 1, max = 4096))]
    pub path: String,
    /// List subfolders too (default false).
    pub recursive: Option<bool>,
    /// Most entries to return (default 1000, at most 10000).
    #[schemars(range(min = 1, max = 10_000))]
    pub max_entries: Option<u32>,
    /// Include names starting with "." (default false).
    pub include_hidden: Option<bool>,
}

/// One listed entry.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListEntry {
    /// Path relative to the listed folder.
    pub name: String,
    /// "file", "directory", "symlink" or "other".
    pub kind: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification (RFC 3339, UTC).
    pub modified: Option<String>,
}

/// Result of list_directory.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListOutput {
    /// The resolved folder.
    pub path: String,
    /// The entries, sorted by name within each folder.
    pub entries: Vec<ListEntry>,
    /// True when maxEntries cut the listing short.
    pub truncated: bool,
    /// Entries left out because the secrets list or a deny rule protects them.
    pub withheld: u64,
}

/// list_directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDirectory;

const MAX_DEPTH: usize = 64;

impl Tool for ListDirectory {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<ListParams, ListOutput>(
            "list_directory",
            "List a folder on the user's computer: names, kinds, sizes and modification \
             times, optionally recursive. Protected entries are left out and counted.",
            ToolHints::READ_ONLY,
            10_000,
        )
    }

    fn prepare(&self, params: Map, env: &ToolEnv) -> Result<Prepared> {
        let p: ListParams = parse_params(params)?;
        let held = Resolved::resolve(&env.home, "path", &p.path)?;
        let recursive = p.recursive.unwrap_or(false);
        let hidden = p.include_hidden.unwrap_or(false);
        let max = p.max_entries.unwrap_or(1000) as usize;
        let path = held.path().to_path_buf();
        Ok(Prepared {
            access: Access {
                summary: format!(
                    "List {}{}",
                    path.display(),
                    if recursive { " and its subfolders" } else { "" }
                ),
                paths: vec![path.clone()],
                folder: Some(path),
                force_ask: None,
            },
            // Reported by the job, once the policy allowed the call.
            job: Box::new(move |cx| {
                cx.check()?;
                list(cx, held.open_dir()?, recursive, hidden, max)
            }),
        })
    }
}

fn list(cx: &RunContext, dir: SafeRoot, recursive: bool, hidden: bool, max: usize) -> Result<Map> {
    let mut out = ListOutput {
        path: dir.path().to_string_lossy().into_owned(),
        entries: Vec::new(),
        truncated: false,
        withheld: 0,
    };
    // Depth-first over directory handles: every subfolder is opened beneath its parent
    // without following symlinks, so the walk cannot leave the checked folder.
    let mut stack = vec![(dir, PathBuf::new(), 0usize)];
    'walk: while let Some((root, rel, depth)) = stack.pop() {
        cx.check()?;
        let mut items = Vec::new();
        for entry in root.entries()? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            if !hidden && name.to_string_lossy().starts_with('.') {
                continue;
            }
            items.push(entry);
        }
        items.sort_by_key(cap_std::fs::DirEntry::file_name);
        let mut subdirs = Vec::new();
        for entry in items {
            cx.check()?;
            let name = PathBuf::from(entry.file_name());
            let full = root.path().join(&name);
            if cx.withheld(&full) {
                out.withheld += 1;
                continue;
            }
            if out.entries.len() >= max {
                out.truncated = true;
                break 'walk;
            }
            let Ok(ft) = entry.file_type() else { continue };
            let meta = entry.metadata().ok();
            let rel_name = rel.join(&name);
            out.entries.push(ListEntry {
                name: rel_name.to_string_lossy().into_owned(),
                kind: kind_name(&ft).into(),
                size: meta.as_ref().map_or(0, cap_std::fs::Metadata::len),
                modified: meta.as_ref().and_then(|m| {
                    time_string(m.modified().map(cap_std::time::SystemTime::into_std))
                }),
            });
            if recursive && ft.is_dir() && depth < MAX_DEPTH {
                subdirs.push((name, rel_name));
            }
        }
        // Push in reverse so the walk visits subfolders in name order.
        for (name, rel_name) in subdirs.into_iter().rev() {
            match root.open_subdir(&name) {
                Ok(sub) => stack.push((sub, rel_name, depth + 1)),
                Err(ToolError::Refused { .. }) => out.withheld += 1,
                Err(_) => {}
            }
        }
    }
    to_map(&out)
}

// ---------------------------------------------------------------------------------------
// file_info

/// Parameters of file_info.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InfoParams {
    /// The file or folder (absolute, or starting with `~/`).
    #[schemars(length(min = 1, max = 4096))]
    pub path: String,
}

/// Result of file_info.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InfoOutput {
    /// The path as given, with `~` expanded.
    pub path: String,
    /// The path with `..` and symlinks resolved.
    pub resolved_path: String,
    /// Whether the given path is itself a symbolic link.
    pub is_symlink: bool,
    /// "file", "directory" or "other".
    pub kind: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification (RFC 3339, UTC).
    pub modified: Option<String>,
    /// Creation time, where the platform records it.
    pub created: Option<String>,
    /// Last access, where the platform records it.
    pub accessed: Option<String>,
    /// Whether the file is read-only for its owner.
    pub readonly: bool,
    /// Unix permission bits in octal, e.g. "644".
    pub permissions: Option<String>,
    /// Number of names (hard links) the file has.
    pub hard_links: Option<u64>,
}

/// file_info.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileInfo;

impl Tool for FileInfo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<InfoParams, InfoOutput>(
            "file_info",
            "Describe a file or folder on the user's computer: kind, size, times, \
             permissions, and where symlinks lead.",
            ToolHints::READ_ONLY,
            5_000,
        )
    }

    fn prepare(&self, params: Map, env: &ToolEnv) -> Result<Prepared> {
        let p: InfoParams = parse_params(params)?;
        let given = crate::paths::expand(&env.home, "path", &p.path)?;
        let held = Resolved::resolve(&env.home, "path", &p.path)?;
        // Whether the given path's own last component is a link, without looking at it
        // again: it is one exactly when the path resolved somewhere else than that name
        // beneath its resolved folder (a `..` after a folder that does not exist does not
        // change the folder's resolution, so this does not depend on that folder either).
        let is_symlink = match given.components().next_back() {
            Some(Component::Normal(name)) => given
                .parent()
                .is_some_and(|p| outpost_policy::canonical_or_clean(p).join(name) != held.path()),
            _ => false,
        };
        let path = held.path().to_path_buf();
        let folder = if held.found().is_ok_and(|m| m.is_dir()) {
            Some(path.clone())
        } else {
            Some(held.parent().to_path_buf())
        };
        Ok(Prepared {
            access: Access {
                summary: format!("Look up size and dates of {}", path.display()),
                paths: vec![path],
                folder,
                force_ask: held
                    .has_other_names()
                    .then(|| HARD_LINK_INFO_REASON.to_owned()),
            },
            job: Box::new(move |cx| {
                cx.check()?;
                // Through the held folder, and the object found when the call was judged.
                let meta = held.metadata()?;
                #[cfg(unix)]
                let (permissions, hard_links) = {
                    use cap_std::fs::MetadataExt;
                    (
                        Some(format!("{:o}", meta.mode() & 0o7777)),
                        Some(meta.nlink()),
                    )
                };
                #[cfg(not(unix))]
                let (permissions, hard_links) = (None, None);
                let time = |t: std::io::Result<cap_std::time::SystemTime>| {
                    time_string(t.map(cap_std::time::SystemTime::into_std))
                };
                to_map(&InfoOutput {
                    path: given.to_string_lossy().into_owned(),
                    resolved_path: held.path().to_string_lossy().into_owned(),
                    is_symlink,
                    kind: kind_name(&meta.file_type()).into(),
                    size: meta.len(),
                    modified: time(meta.modified()),
                    created: time(meta.created()),
                    accessed: time(meta.accessed()),
                    readonly: meta.permissions().readonly(),
                    permissions,
                    hard_links,
                })
            }),
        })
    }
}

// ---------------------------------------------------------------------------------------
// write_file

/// What is at `name` in the held folder must allow a write in `mode`: no symlink, nothing
/// but a regular file, nothing at all for `create`, and no file with other names.
fn check_writable(root: &SafeRoot, name: &Path, path: &Path, mode: WriteMode) -> Result<()> {
    match root.entry_metadata(name) {
        Ok(m) if m.file_type().is_symlink() => Err(ToolError::refused(format!(
            "{} is a symbolic link; write to the file it points to instead",
            path.display()
        ))),
        Ok(m) if !m.is_file() => Err(ToolError::exec(format!(
            "{} is not a regular file",
            path.display()
        ))),
        Ok(_) if mode == WriteMode::Create => Err(ToolError::exec(format!(
            "{} already exists; use mode overwrite or append",
            path.display()
        ))),
        Ok(m) if has_other_names(&m) => Err(hard_link_refusal(path)),
        _ => Ok(()),
    }
}

/// A file with other names (hard links) may be a protected file under another name, which
/// the consent question and the folder rules cannot show: it is never written.
fn hard_link_refusal(path: &Path) -> ToolError {
    ToolError::refused(format!(
        "{} has other names (hard links), so writing it would also change a file elsewhere, \
         maybe a protected one; write_file never writes such a file",
        path.display()
    ))
}

/// How write_file treats an existing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteMode {
    /// Create a new file; fail if it exists.
    Create,
    /// Replace the file's content (creating it if needed).
    Overwrite,
    /// Add to the end of the file (creating it if needed).
    Append,
}

/// Parameters of write_file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteParams {
    /// The file to write (absolute, or starting with `~/`).
    #[schemars(length(min = 1, max = 4096))]
    pub file_path: String,
    /// The text to write.
    pub content: String,
    /// create, overwrite or append.
    pub mode: WriteMode,
}

/// Result of write_file.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteOutput {
    /// The resolved path written.
    pub path: String,
    /// Bytes written.
    pub bytes_written: u64,
    /// The file's size afterwards.
    pub size: u64,
    /// The mode used.
    pub mode: WriteMode,
}

/// write_file. Destructive: off by default, asks every time when enabled.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<WriteParams, WriteOutput>(
            "write_file",
            "Create, overwrite or append to a text file on the user's computer. Off unless \
             the user enabled it; the user is asked every time.",
            ToolHints {
                destructive: true,
                ..ToolHints::default()
            },
            10_000,
        )
    }

    fn prepare(&self, params: Map, env: &ToolEnv) -> Result<Prepared> {
        let p: WriteParams = parse_params(params)?;
        if p.content.len() > MAX_WRITE_BYTES {
            return Err(ToolError::InvalidParameters(format!(
                "content: {} bytes is more than the limit of {MAX_WRITE_BYTES}",
                p.content.len()
            )));
        }
        let held = Resolved::resolve_for_create(&env.home, "filePath", &p.file_path)?;
        let path = held.path().to_path_buf();
        let verb = match p.mode {
            WriteMode::Create => "Create",
            WriteMode::Overwrite => "Overwrite",
            WriteMode::Append => "Append to",
        };
        let job_path = path.clone();
        Ok(Prepared {
            access: Access {
                summary: format!("{verb} {} ({} bytes)", path.display(), p.content.len()),
                paths: vec![path],
                folder: Some(held.parent().to_path_buf()),
                force_ask: None,
            },
            job: Box::new(move |cx| {
                cx.check()?;
                // The held folder: it may not have existed when it was checked, and one
                // swapped in since must not take the write elsewhere.
                let (root, name) = held.folder_for_write()?;
                // Checked only now that the call is allowed: before, the answer must not
                // depend on what exists at the path.
                check_writable(root, name, &job_path, p.mode)?;
                let mut opts = OpenOptions::new();
                opts.write(true);
                // No O_TRUNC: the opened file is checked before anything in it changes.
                match p.mode {
                    WriteMode::Create => opts.create_new(true),
                    WriteMode::Overwrite => opts.create(true),
                    WriteMode::Append => opts.create(true).append(true),
                };
                let (mut file, meta) = root.open_for_write(name, &mut opts)?;
                // Again on the opened file itself: a link made after the check counts too.
                if has_other_names(&meta) {
                    return Err(hard_link_refusal(&job_path));
                }
                if p.mode == WriteMode::Overwrite {
                    file.set_len(0).map_err(|e| io_error(&job_path, &e))?;
                }
                let bytes = p.content.as_bytes();
                let mut written = 0usize;
                for chunk in bytes.chunks(CHUNK) {
                    if cx.check().is_err() {
                        return Err(ToolError::Execution {
                            message: format!(
                                "Cancelled after writing {written} of {} bytes to {}",
                                bytes.len(),
                                job_path.display()
                            ),
                            partial: None,
                        });
                    }
                    file.write_all(chunk).map_err(|e| io_error(&job_path, &e))?;
                    written += chunk.len();
                }
                file.flush().map_err(|e| io_error(&job_path, &e))?;
                let size = file.metadata().map_err(|e| io_error(&job_path, &e))?.len();
                to_map(&WriteOutput {
                    path: job_path.to_string_lossy().into_owned(),
                    bytes_written: written as u64,
                    size,
                    mode: p.mode,
                })
            }),
        })
    }
}
