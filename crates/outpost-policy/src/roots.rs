//! The allowed folders as MCP roots, minus everything the policy denies.
//!
//! An MCP root is a folder URI, and a server that honours roots may use everything below
//! it. So an allowed folder cannot be offered as it stands when something below it is
//! denied: a folder with `access = "deny"` (for any tool), a place on the secrets list
//! (unless an `[[exceptions]]` entry lifts it), Outpost's own settings and data (nothing
//! lifts those), /proc, /sys and /dev (unless `allow_system_paths`), or a file with other
//! names (a hard link may be a protected file under another name). Such a folder is
//! split: its subfolders that hold nothing denied are offered instead, and the walk goes
//! down into the ones that do. The files directly in a split folder are not offered (a
//! root is a whole folder). A place named by a fixed path (a denied folder, `~/.ssh`,
//! Outpost's folders) splits its ancestors even before it exists, so creating it later
//! does not put it under an offered root.
//!
//! Only allowed folders that apply to every tool are offered: a folder allowed for named
//! tools only (what an "always allow" answer writes) is the user's answer about those
//! tools, not about a server.
//!
//! The walk is bounded ([`RootLimits`]); what it could not finish checking is not offered,
//! and every folder left out is said in [`RootsPlan::left_out`]. This module decides; the
//! caller lists folders (`list`), so the crate still reads no file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::model::{CompiledPolicy, FolderAccess, SYSTEM_DIRS};

/// What a folder entry is, as the walk needs it. Symbolic links are [`EntryKind::Other`]:
/// never followed (a server that honours roots checks where a link leads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A folder (not a link to one).
    Folder,
    /// A regular file and its link count.
    File {
        /// Names the file has (more than one: hard links).
        links: u64,
    },
    /// Anything else: a symbolic link, a device, a FIFO, a socket.
    Other,
}

/// One entry of a folder listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name in its folder.
    pub name: OsString,
    /// What it is.
    pub kind: EntryKind,
}

/// Bounds of one computation of the roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootLimits {
    /// Folder entries looked at, over every allowed folder.
    pub entries: usize,
    /// Roots offered.
    pub roots: usize,
    /// Folders below an allowed folder the walk goes down.
    pub depth: usize,
}

impl Default for RootLimits {
    fn default() -> Self {
        Self {
            entries: 100_000,
            roots: 512,
            depth: 32,
        }
    }
}

/// Sentences about what was left out, kept to this many (then a count).
const MAX_NOTES: usize = 20;

/// The roots to offer and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootsPlan {
    /// Folders to offer, sorted, none inside another.
    pub roots: Vec<PathBuf>,
    /// One sentence per folder or file left out (at most 20, then how many more).
    pub left_out: Vec<String>,
}

/// Lists one folder (the caller's IO).
pub type ListFolder<'a> = dyn FnMut(&Path) -> std::io::Result<Vec<Entry>> + 'a;

enum Visit {
    /// Nothing below is denied: offer the folder whole.
    Clean,
    /// Something below is denied (or was not checked): offer these folders instead.
    Split(Vec<PathBuf>),
}

struct Walk<'a, 'b> {
    policy: &'a CompiledPolicy,
    limits: RootLimits,
    list: &'a mut ListFolder<'b>,
    fixed: Vec<PathBuf>,
    seen: usize,
    exhausted: bool,
    notes: Vec<String>,
    more_notes: usize,
}

impl Walk<'_, '_> {
    fn note(&mut self, text: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(text);
        } else {
            self.more_notes += 1;
        }
    }

    fn visit(&mut self, dir: &Path, depth: usize) -> Visit {
        if depth > self.limits.depth {
            self.note(format!(
                "{}: more than {} folders deep, not checked",
                dir.display(),
                self.limits.depth
            ));
            return Visit::Split(Vec::new());
        }
        if self.seen >= self.limits.entries {
            self.exhausted = true;
            return Visit::Split(Vec::new());
        }
        let entries = match (self.list)(dir) {
            Ok(e) => e,
            Err(e) => {
                self.note(format!("{}: cannot be listed ({e})", dir.display()));
                return Visit::Split(Vec::new());
            }
        };
        self.seen += entries.len();
        if self.seen > self.limits.entries {
            self.exhausted = true;
            return Visit::Split(Vec::new());
        }
        let mut clean = !self
            .fixed
            .iter()
            .any(|p| p.as_path() != dir && p.starts_with(dir));
        let mut offered = Vec::new();
        let mut inner = Vec::new();
        let mut loose = 0usize;
        for entry in entries {
            let path = dir.join(&entry.name);
            if let Some(why) = self.policy.root_block(&path) {
                clean = false;
                self.note(format!("{}: {why}", path.display()));
                continue;
            }
            match entry.kind {
                EntryKind::Folder => match self.visit(&path, depth + 1) {
                    Visit::Clean => offered.push(path),
                    Visit::Split(roots) => {
                        clean = false;
                        inner.extend(roots);
                    }
                },
                EntryKind::File { links } if links > 1 => {
                    clean = false;
                    self.note(format!(
                        "{}: a file with other names (hard links), maybe a protected one",
                        path.display()
                    ));
                }
                EntryKind::File { .. } | EntryKind::Other => loose += 1,
            }
        }
        if clean {
            return Visit::Clean;
        }
        if loose > 0 {
            self.note(format!(
                "{loose} file(s) directly in {}: a root is a whole folder, and this one holds \
                 something denied",
                dir.display()
            ));
        }
        offered.extend(inner);
        Visit::Split(offered)
    }
}

impl CompiledPolicy {
    /// Why no MCP root may contain `path` (canonical), or `None`. Stricter than
    /// [`Self::hard_deny`]: a folder denied for some tools only keeps every root out.
    pub fn root_block(&self, path: &Path) -> Option<String> {
        if self.secrets.outpost_own(path).is_some() {
            return Some("Outpost's own settings and data".into());
        }
        if !self.policy().allow_system_paths && SYSTEM_DIRS.iter().any(|d| path.starts_with(d)) {
            return Some("a system folder (/proc, /sys, /dev)".into());
        }
        if let Some(f) = self
            .folders
            .iter()
            .find(|f| f.access == FolderAccess::Deny && path.starts_with(&f.path))
        {
            return Some(if f.path == path {
                "denied in the policy file".into()
            } else {
                format!("inside {}, denied in the policy file", f.path.display())
            });
        }
        if let Some(why) = self.secrets.matches(path) {
            if !self.exceptions.iter().any(|e| path.starts_with(e)) {
                return Some(why);
            }
        }
        None
    }

    /// The allowed folders (those for every tool) as MCP roots, split around what the
    /// policy denies (the module's doc). `list` lists one folder.
    pub fn mcp_roots(&self, limits: RootLimits, list: &mut ListFolder<'_>) -> RootsPlan {
        let allowed: Vec<PathBuf> = self
            .folders
            .iter()
            .filter(|f| f.access == FolderAccess::Allow && f.tools.is_none())
            .map(|f| f.path.clone())
            .collect();
        self.split_folders(&allowed, limits, list)
    }

    /// The places named by a fixed path that nothing below a root may hold: denied
    /// folders, the secrets list's fixed places, Outpost's own, the system folders.
    fn fixed_places(&self) -> Vec<PathBuf> {
        let mut fixed: Vec<PathBuf> = self
            .folders
            .iter()
            .filter(|f| f.access == FolderAccess::Deny)
            .map(|f| f.path.clone())
            .collect();
        fixed.extend(self.secrets.fixed_places());
        if !self.policy().allow_system_paths {
            fixed.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
        }
        fixed
    }

    /// Why `folder` (canonical) may not be reached whole by an MCP server: it is a place
    /// the policy denies or lies in one ([`Self::root_block`]), or one lies in it (a
    /// denied folder, a fixed place of the secrets list such as `~/.ssh`, Outpost's own
    /// folders). Unlike [`Self::split_folders`] nothing is listed: a secret-looking file
    /// inside is not looked for. For a program's own folder, granted whole or not at all.
    pub fn whole_block(&self, folder: &Path) -> Option<String> {
        if let Some(why) = self.root_block(folder) {
            return Some(why);
        }
        self.fixed_places()
            .into_iter()
            .find(|p| p.starts_with(folder))
            .map(|p| format!("it holds {}, which the policy denies", p.display()))
    }

    /// `folders` split around what the policy denies, as the MCP roots are (the module's
    /// doc), whatever the policy allows: for the folders a server's own entry names
    /// (files are the caller's to judge with [`Self::root_block`]). `list` lists one
    /// folder.
    pub fn split_folders(
        &self,
        folders: &[PathBuf],
        limits: RootLimits,
        list: &mut ListFolder<'_>,
    ) -> RootsPlan {
        let fixed = self.fixed_places();
        let allowed = folders.to_vec();
        let mut walk = Walk {
            policy: self,
            limits,
            list,
            fixed,
            seen: 0,
            exhausted: false,
            notes: Vec::new(),
            more_notes: 0,
        };
        let mut roots = Vec::new();
        for folder in allowed {
            if let Some(why) = self.root_block(&folder) {
                walk.note(format!("{}: {why}", folder.display()));
                continue;
            }
            match walk.visit(&folder, 0) {
                Visit::Clean => roots.push(folder),
                Visit::Split(r) => roots.extend(r),
            }
        }
        roots.sort();
        roots.dedup();
        let mut kept: Vec<PathBuf> = Vec::new();
        for r in roots {
            if !kept.iter().any(|k| r.starts_with(k)) {
                kept.push(r);
            }
        }
        if kept.len() > limits.roots {
            let over = kept.len() - limits.roots;
            kept.truncate(limits.roots);
            walk.note(format!(
                "{over} more folder(s): at most {} roots are offered",
                limits.roots
            ));
        }
        if walk.exhausted {
            walk.note(format!(
                "the check stopped after {} entries: the folders it did not finish are not \
                 offered",
                limits.entries
            ));
        }
        let mut left_out = walk.notes;
        if walk.more_notes > 0 {
            left_out.push(format!("and {} more", walk.more_notes));
        }
        RootsPlan {
            roots: kept,
            left_out,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::{Exception, FolderRule, Policy, PolicyContext};

    /// A file system in memory: path → kind (parents are implied folders).
    struct Fs(BTreeMap<PathBuf, EntryKind>);

    impl Fs {
        fn new(files: &[(&str, EntryKind)]) -> Self {
            let mut map = BTreeMap::new();
            for (p, kind) in files {
                let path = PathBuf::from(p);
                for a in path.ancestors().skip(1) {
                    if a.as_os_str().len() > 1 {
                        map.insert(a.to_path_buf(), EntryKind::Folder);
                    }
                }
                map.insert(path, *kind);
            }
            Self(map)
        }

        fn list(&self, dir: &Path) -> std::io::Result<Vec<Entry>> {
            if self.0.get(dir) != Some(&EntryKind::Folder) {
                return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
            }
            Ok(self
                .0
                .iter()
                .filter(|(p, _)| p.parent() == Some(dir))
                .map(|(p, k)| Entry {
                    name: p.file_name().unwrap().to_owned(),
                    kind: *k,
                })
                .collect())
        }
    }

    const FILE: EntryKind = EntryKind::File { links: 1 };

    fn folder(path: &str, access: FolderAccess) -> FolderRule {
        FolderRule {
            path: path.into(),
            access,
            tools: None,
        }
    }

    fn with_folders(folders: Vec<FolderRule>) -> Policy {
        Policy {
            folders,
            ..Policy::default()
        }
    }

    fn plan(policy: Policy, fs: &Fs, limits: RootLimits) -> RootsPlan {
        let ctx = PolicyContext::new(
            "/nonexistent-home/u",
            vec![PathBuf::from("/nonexistent-home/u/.config/outpost")],
        );
        let compiled = CompiledPolicy::new(policy, &ctx);
        compiled.mcp_roots(limits, &mut |d: &Path| fs.list(d))
    }

    fn roots(p: &RootsPlan) -> Vec<&str> {
        p.roots.iter().map(|r| r.to_str().unwrap()).collect()
    }

    const H: &str = "/nonexistent-home/u";

    #[test]
    fn a_folder_with_nothing_denied_is_offered_whole() {
        let fs = Fs::new(&[
            ("/nonexistent-home/u/work/a/x.txt", FILE),
            ("/nonexistent-home/u/work/b.txt", FILE),
        ]);
        let p = with_folders(vec![folder("~/work", FolderAccess::Allow)]);
        let plan = plan(p, &fs, RootLimits::default());
        assert_eq!(roots(&plan), [format!("{H}/work").as_str()]);
        assert!(plan.left_out.is_empty(), "{:?}", plan.left_out);
    }

    /// Issue 30, finding 3: home allowed, `~/private` denied, `~/.ssh` and Outpost's own
    /// folder there. The roots are home's other subfolders; nothing denied is under one.
    #[test]
    fn the_home_folder_is_split_around_denied_secret_and_outpost_folders() {
        let fs = Fs::new(&[
            ("/nonexistent-home/u/private/plan.txt", FILE),
            ("/nonexistent-home/u/.ssh/id_rsa", FILE),
            ("/nonexistent-home/u/.config/outpost/mcp.toml", FILE),
            ("/nonexistent-home/u/.config/editor/init.lua", FILE),
            ("/nonexistent-home/u/docs/notes.txt", FILE),
            ("/nonexistent-home/u/proj/src/main.rs", FILE),
            ("/nonexistent-home/u/proj/.env", FILE),
            ("/nonexistent-home/u/notes.txt", FILE),
        ]);
        let p = with_folders(vec![
            folder("~", FolderAccess::Allow),
            folder("~/private", FolderAccess::Deny),
        ]);
        let plan = plan(p, &fs, RootLimits::default());
        assert_eq!(
            roots(&plan),
            [
                format!("{H}/.config/editor"),
                format!("{H}/docs"),
                format!("{H}/proj/src"),
            ]
        );
        let said = plan.left_out.join("\n");
        for what in [
            "private",
            ".ssh",
            ".config/outpost",
            "proj/.env",
            "directly in",
        ] {
            assert!(said.contains(what), "{what} not said:\n{said}");
        }
    }

    /// Issue 28: a server's own `read`/`write` folders are split by the same rule, whether
    /// or not the policy allows them; a program folder is whole or refused.
    #[test]
    fn a_server_s_own_folders_are_split_and_program_folders_judged_whole() {
        let fs = Fs::new(&[
            ("/nonexistent-home/u/data/a/x.txt", FILE),
            ("/nonexistent-home/u/data/.env", FILE),
            ("/nonexistent-home/u/data/keys/id_rsa", FILE),
            ("/nonexistent-home/u/venv/lib/x.py", FILE),
        ]);
        let ctx = PolicyContext::new(
            "/nonexistent-home/u",
            vec![PathBuf::from("/nonexistent-home/u/.config/outpost")],
        );
        let compiled = CompiledPolicy::new(Policy::default(), &ctx);
        let plan = compiled.split_folders(
            &[PathBuf::from(format!("{H}/data"))],
            RootLimits::default(),
            &mut |d: &Path| fs.list(d),
        );
        assert_eq!(roots(&plan), [format!("{H}/data/a")]);
        let said = plan.left_out.join("\n");
        assert!(
            said.contains("data/.env") && said.contains("id_rsa"),
            "{said}"
        );
        assert_eq!(compiled.whole_block(Path::new(&format!("{H}/venv"))), None);
        let home = compiled.whole_block(Path::new(H)).unwrap();
        assert!(home.contains(".ssh") || home.contains("holds"), "{home}");
        assert!(
            compiled
                .whole_block(Path::new(&format!("{H}/.config")))
                .is_some()
        );
        assert!(
            compiled
                .whole_block(Path::new(&format!("{H}/.ssh/x")))
                .is_some()
        );
    }

    #[test]
    fn a_denied_folder_that_does_not_exist_yet_still_splits_its_parents() {
        let fs = Fs::new(&[("/srv/data/a/x", FILE), ("/srv/data/b/y", FILE)]);
        let p = with_folders(vec![
            folder("/srv/data", FolderAccess::Allow),
            folder("/srv/data/later/private", FolderAccess::Deny),
        ]);
        let plan = plan(p, &fs, RootLimits::default());
        assert_eq!(roots(&plan), ["/srv/data/a", "/srv/data/b"]);
    }

    #[test]
    fn hard_links_exceptions_tool_limited_and_blocked_folders() {
        let fs = Fs::new(&[
            ("/srv/a/linked", EntryKind::File { links: 2 }),
            ("/srv/a/sub/ok", FILE),
            ("/srv/b/.env.example", FILE),
            ("/srv/c/x", FILE),
            ("/srv/d/id_keys/k", FILE),
        ]);
        let mut p = with_folders(vec![
            folder("/srv/a", FolderAccess::Allow),
            folder("/srv/b", FolderAccess::Allow),
            FolderRule {
                path: "/srv/c".into(),
                access: FolderAccess::Allow,
                tools: Some(vec!["read_local_file".into()]),
            },
            folder("/srv/d/id_keys", FolderAccess::Allow),
        ]);
        p.exceptions = vec![Exception {
            path: "/srv/b/.env.example".into(),
        }];
        let plan = plan(p, &fs, RootLimits::default());
        // The hard link splits /srv/a; the exception lifts the secrets list for /srv/b; a
        // folder allowed for one tool is not a root; a secret folder is never one.
        assert_eq!(roots(&plan), ["/srv/a/sub", "/srv/b"]);
        assert!(plan.left_out.iter().any(|n| n.contains("hard links")));
        assert!(
            plan.left_out
                .iter()
                .any(|n| n.starts_with("/srv/d/id_keys"))
        );
    }

    #[test]
    fn outpost_s_own_folders_are_never_roots_even_with_an_exception() {
        let fs = Fs::new(&[("/nonexistent-home/u/.config/outpost/policy.toml", FILE)]);
        let mut p = with_folders(vec![folder("~/.config", FolderAccess::Allow)]);
        p.exceptions = vec![Exception {
            path: "~/.config/outpost".into(),
        }];
        let plan = plan(p.clone(), &fs, RootLimits::default());
        assert!(plan.roots.is_empty(), "{:?}", plan.roots);
        p.folders = vec![folder("~/.config/outpost", FolderAccess::Allow)];
        assert!(plan_roots_empty(p, &fs));
    }

    fn plan_roots_empty(p: Policy, fs: &Fs) -> bool {
        plan(p, fs, RootLimits::default()).roots.is_empty()
    }

    #[test]
    fn the_walk_is_bounded_and_what_it_did_not_finish_is_not_offered() {
        let mut files = Vec::new();
        let names: Vec<String> = (0..50).map(|i| format!("/srv/big/d{i:02}/f")).collect();
        for n in &names {
            files.push((n.as_str(), FILE));
        }
        files.push(("/srv/big/.env", FILE));
        let fs = Fs::new(&files);
        let p = with_folders(vec![folder("/srv/big", FolderAccess::Allow)]);
        let limits = RootLimits {
            entries: 71,
            roots: 512,
            depth: 32,
        };
        let plan = plan(p.clone(), &fs, limits);
        // 51 entries in /srv/big, then one per subfolder: 20 checked, the rest not.
        assert_eq!(plan.roots.len(), 20, "{:?}", plan.roots);
        assert!(plan.left_out.iter().any(|n| n.contains("stopped after 71")));
        let few = RootLimits {
            roots: 5,
            ..RootLimits::default()
        };
        let plan = super::tests::plan(p, &fs, few);
        assert_eq!(plan.roots.len(), 5);
        assert!(plan.left_out.iter().any(|n| n.contains("at most 5 roots")));
    }
}
