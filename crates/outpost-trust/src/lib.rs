//! What Outpost confirmed of its own config files.
//!
//! `mcp.toml` and the policy file decide what runs on the user's computer, and both are
//! plain files: anything that can write a file (a tool server given a wide folder, a
//! script) could add a server to `mcp.toml` or widen the policy. So Outpost records what it
//! wrote itself, and what the user confirmed, as keyed fingerprints (HMAC-SHA256 under a
//! random key kept in the same record) in `trust.json` in the data directory, readable by
//! the user only (0600), with a copy of each text a caller asks to keep (the policy as last
//! confirmed). A change Outpost did not make no longer matches: `outpost-mcp` does not start
//! a server whose entry is new or changed, and `outpost-policy` keeps the last confirmed
//! policy when the file on disk allows more, until the user confirms (`outpost mcp trust`,
//! `outpost policy trust`, or the app's settings).
//!
//! A file the record has never seen is taken as it is the first time Outpost reads it (a
//! config from before this record existed, a fresh data folder: [`Trust::knows`]). A
//! record that cannot be read confirms nothing, and once it is written again no file is
//! taken on first sight any more (`strict`): each must be confirmed.
//!
//! The data folder is out of reach of every tool and of every MCP root (outpost-policy).
//! A program that runs as the user with its own code can still rewrite anything; that is
//! the sandbox's job, not this record's (docs/SECURITY.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

/// The record's file name in the data directory.
pub const FILE_NAME: &str = "trust.json";

/// What can go wrong with the record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The record could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The system's random source failed (no key could be made).
    #[error("no random key could be made for {0}")]
    Random(PathBuf),
}

/// The crate's result type.
pub type Result<T, E = TrustError> = std::result::Result<T, E>;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    /// Fingerprint of each confirmed entry, by name.
    #[serde(default)]
    entries: BTreeMap<String, String>,
    /// The confirmed text of the entries whose text is kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    copies: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnDisk {
    version: u32,
    /// The HMAC key, hex.
    key: String,
    /// No file is taken on first sight (set after a damaged record).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    strict: bool,
    /// Records by the config file's path.
    #[serde(default)]
    files: BTreeMap<String, Record>,
}

/// The record of confirmed config files. Read it, check or confirm entries, then
/// [`save`](Self::save). Two processes saving at once: the later one wins (each reads the
/// record just before it changes it).
pub struct Trust {
    path: PathBuf,
    key: hmac::Key,
    key_hex: String,
    strict: bool,
    files: BTreeMap<String, Record>,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("path", &self.path)
            .field("strict", &self.strict)
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What is signed for one entry: each part with its length, so no two entries read alike.
fn message(file: &str, name: &str, content: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(24 + file.len() + name.len() + content.len());
    for part in [file, name, content] {
        m.extend_from_slice(&(part.len() as u64).to_le_bytes());
        m.extend_from_slice(part.as_bytes());
    }
    m
}

/// The record's key for a config file: its real path when it (or its folder) exists.
fn file_key(file: &Path) -> String {
    let real = std::fs::canonicalize(file).ok().or_else(|| {
        let parent = std::fs::canonicalize(file.parent()?).ok()?;
        Some(parent.join(file.file_name()?))
    });
    real.unwrap_or_else(|| file.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

impl Trust {
    /// Reads the record in `data_dir` (none yet: an empty record with a new key). A record
    /// that cannot be parsed confirms nothing and makes the record strict.
    pub fn open(data_dir: &Path) -> Result<Self> {
        let path = data_dir.join(FILE_NAME);
        let fresh = |strict: bool| -> Result<Self> {
            let mut key = [0u8; 32];
            SystemRandom::new()
                .fill(&mut key)
                .map_err(|_| TrustError::Random(path.clone()))?;
            Ok(Self {
                key: hmac::Key::new(hmac::HMAC_SHA256, &key),
                key_hex: hex(&key),
                path: path.clone(),
                strict,
                files: BTreeMap::new(),
            })
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return fresh(false),
            Err(source) => return Err(TrustError::Io { path, source }),
        };
        let parsed = serde_json::from_str::<OnDisk>(&text)
            .ok()
            .filter(|d| d.version == 1)
            .and_then(|d| Some((unhex(&d.key).filter(|k| k.len() == 32)?, d)));
        match parsed {
            Some((key, disk)) => Ok(Self {
                key: hmac::Key::new(hmac::HMAC_SHA256, &key),
                key_hex: disk.key,
                path,
                strict: disk.strict,
                files: disk.files,
            }),
            None => fresh(true),
        }
    }

    /// Where the record lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn tag(&self, file: &str, name: &str, content: &str) -> hmac::Tag {
        hmac::sign(&self.key, &message(file, name, content))
    }

    fn matches(&self, file: &str, name: &str, content: &str, tag: &str) -> bool {
        unhex(tag).is_some_and(|tag| {
            // Constant time, as a verification should be.
            hmac::verify(&self.key, &message(file, name, content), &tag).is_ok()
        })
    }

    /// Whether the record has seen `file` (always true once the record is strict): a
    /// file it has not seen is taken as it stands the first time.
    pub fn knows(&self, file: &Path) -> bool {
        self.strict || self.files.contains_key(&file_key(file))
    }

    /// Whether `content` is what was confirmed for the entry `name` of `file`.
    pub fn confirmed(&self, file: &Path, name: &str, content: &str) -> bool {
        let key = file_key(file);
        self.files
            .get(&key)
            .and_then(|r| r.entries.get(name))
            .is_some_and(|tag| self.matches(&key, name, content, tag))
    }

    /// Confirms `content` as the entry `name` of `file`.
    pub fn confirm(&mut self, file: &Path, name: &str, content: &str) {
        let key = file_key(file);
        let tag = hex(self.tag(&key, name, content).as_ref());
        let record = self.files.entry(key).or_default();
        record.entries.insert(name.to_owned(), tag);
        record.copies.remove(name);
    }

    /// Confirms `content` and keeps a copy of it ([`Self::copy`]).
    pub fn confirm_keeping(&mut self, file: &Path, name: &str, content: &str) {
        self.confirm(file, name, content);
        self.files
            .entry(file_key(file))
            .or_default()
            .copies
            .insert(name.to_owned(), content.to_owned());
    }

    /// The kept copy of the confirmed entry `name` of `file`, when it still matches its
    /// fingerprint.
    pub fn copy(&self, file: &Path, name: &str) -> Option<&str> {
        let key = file_key(file);
        let record = self.files.get(&key)?;
        let text = record.copies.get(name)?;
        let tag = record.entries.get(name)?;
        self.matches(&key, name, text, tag).then_some(text.as_str())
    }

    /// Marks `file` as seen, with no entry confirmed (so nothing of it is taken on first
    /// sight any more).
    pub fn know(&mut self, file: &Path) {
        self.files.entry(file_key(file)).or_default();
    }

    /// Drops the entries of `file` that are not in `keep`.
    pub fn retain(&mut self, file: &Path, keep: &dyn Fn(&str) -> bool) {
        if let Some(r) = self.files.get_mut(&file_key(file)) {
            r.entries.retain(|n, _| keep(n));
            r.copies.retain(|n, _| keep(n));
        }
    }

    /// Writes the record (readable by the user only), through a temporary file renamed
    /// over it.
    pub fn save(&self) -> Result<()> {
        let io = |source| TrustError::Io {
            path: self.path.clone(),
            source,
        };
        let disk = OnDisk {
            version: 1,
            key: self.key_hex.clone(),
            strict: self.strict,
            files: self.files.clone(),
        };
        let text = serde_json::to_string_pretty(&disk).unwrap_or_default();
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp).map_err(io)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn confirmed_entries_survive_a_reopen_and_changes_do_not_match() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("mcp.toml");
        std::fs::write(&cfg, "x").unwrap();
        let mut t = Trust::open(dir.path()).unwrap();
        assert!(!t.knows(&cfg));
        t.confirm(&cfg, "files", "npx server");
        t.confirm_keeping(&cfg, "", "policy text");
        t.save().unwrap();
        let t = Trust::open(dir.path()).unwrap();
        assert!(t.knows(&cfg));
        assert!(t.confirmed(&cfg, "files", "npx server"));
        assert!(!t.confirmed(&cfg, "files", "npx evil"));
        assert!(!t.confirmed(&cfg, "other", "npx server"));
        assert_eq!(t.copy(&cfg, ""), Some("policy text"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(t.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_forged_or_damaged_record_confirms_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("policy.toml");
        let mut t = Trust::open(dir.path()).unwrap();
        t.confirm_keeping(&cfg, "", "old");
        t.save().unwrap();
        // A copy edited in the record no longer matches its fingerprint.
        let text = std::fs::read_to_string(t.path()).unwrap();
        std::fs::write(t.path(), text.replace("\"old\"", "\"new\"")).unwrap();
        let t = Trust::open(dir.path()).unwrap();
        assert_eq!(t.copy(&cfg, ""), None);
        assert!(!t.confirmed(&cfg, "", "new"));
        // A record that is not one: nothing confirmed, and nothing taken on first sight.
        std::fs::write(t.path(), "{").unwrap();
        let t = Trust::open(dir.path()).unwrap();
        assert!(t.knows(&dir.path().join("never-seen.toml")));
        assert!(!t.confirmed(&cfg, "", "old"));
        t.save().unwrap();
        assert!(
            Trust::open(dir.path())
                .unwrap()
                .knows(&dir.path().join("x"))
        );
    }
}
