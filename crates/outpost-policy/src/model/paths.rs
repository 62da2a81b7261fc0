//! How a path is resolved before any rule sees it: `~` expanded against the machine's
//! facts ([`PolicyContext`]), symbolic links followed as the system would, `..` applied.

use std::path::{Component, Path, PathBuf};

/// The machine facts a policy is compiled against.
#[derive(Debug, Clone)]
pub struct PolicyContext {
    /// The user's home directory (canonical when it exists).
    pub home: PathBuf,
    /// Outpost's own config and data directories: always protected.
    pub protected: Vec<PathBuf>,
}

impl PolicyContext {
    /// A context for `home`, protecting `protected` (both canonicalized when they exist).
    pub fn new(home: impl Into<PathBuf>, protected: Vec<PathBuf>) -> Self {
        let home = home.into();
        Self {
            home: canonical_or_clean(&home),
            protected: protected.iter().map(|p| canonical_or_clean(p)).collect(),
        }
    }

    /// Expands a leading `~` to the home directory.
    pub fn expand(&self, path: &str) -> PathBuf {
        if path == "~" {
            self.home.clone()
        } else if let Some(rest) = path.strip_prefix("~/") {
            self.home.join(rest)
        } else {
            PathBuf::from(path)
        }
    }
}

/// Most symbolic links followed while resolving one path that does not exist (Linux's limit).
const MAX_SYMLINKS: usize = 40;

/// Where `path` leads: its canonical form when it exists. When it does not (or cannot be
/// resolved), it is resolved as far as it exists, the way the system would: symbolic links
/// are followed, dangling ones included, and `..` goes to the real parent; the part that
/// does not exist is appended with `.` and `..` applied lexically. So a missing file under
/// a symlinked folder is judged where the link leads, and a rule for a folder that does
/// not exist yet still compares sensibly. A relative path is only cleaned lexically.
pub fn canonical_or_clean(path: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(path) {
        return c;
    }
    if !path.has_root() {
        return clean(path);
    }
    // Components still to walk, the next one last.
    let mut todo: Vec<Part> = parts(path);
    todo.reverse();
    let mut out = PathBuf::new();
    let mut followed = 0;
    while let Some(part) = todo.pop() {
        match part {
            Part::Prefix(p) => out = PathBuf::from(p),
            Part::Root => {
                let prefix = match out.components().next() {
                    Some(Component::Prefix(p)) => PathBuf::from(p.as_os_str()),
                    _ => PathBuf::new(),
                };
                out = prefix;
                out.push(Component::RootDir.as_os_str());
            }
            Part::Up => {
                out.pop();
            }
            Part::Name(name) => {
                let next = out.join(&name);
                // Fails for anything but a symbolic link, missing entries included.
                match std::fs::read_link(&next) {
                    Ok(target) if followed < MAX_SYMLINKS => {
                        // Walked from the link's folder (`out`), or from the root.
                        followed += 1;
                        let mut more = parts(&target);
                        more.reverse();
                        todo.extend(more);
                    }
                    _ => out = next,
                }
            }
        }
    }
    out
}

/// One component of a path being resolved, owned so that link targets can join the walk.
enum Part {
    Prefix(std::ffi::OsString),
    Root,
    Up,
    Name(std::ffi::OsString),
}

fn parts(path: &Path) -> Vec<Part> {
    path.components()
        .filter_map(|c| match c {
            Component::Prefix(p) => Some(Part::Prefix(p.as_os_str().to_owned())),
            Component::RootDir => Some(Part::Root),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Up),
            Component::Normal(n) => Some(Part::Name(n.to_owned())),
        })
        .collect()
}

/// `path` with `.` and `..` removed lexically.
fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
