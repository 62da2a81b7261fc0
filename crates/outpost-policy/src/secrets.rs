//! The built-in secrets deny list: places and file names that hold credentials, keys,
//! browsing data and Outpost's own state. It wins over every allow rule; only an explicit
//! per-path exception in the policy file lifts it.

use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Directories and files under the home directory that are always protected.
const HOME_ENTRIES: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    // Keyrings and password stores.
    ".local/share/keyrings",
    ".password-store",
    ".local/share/password-store",
    ".config/Bitwarden",
    ".config/1Password",
    ".config/keepassxc",
    ".config/KeePassXC",
    "Library/Keychains",
    // Browser profiles (cookies, saved passwords, history).
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    "snap/firefox",
    "snap/chromium",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge",
    "Library/Safari",
    "Library/Cookies",
    "AppData/Roaming/Mozilla",
    "AppData/Local/Google/Chrome/User Data",
    "AppData/Local/Microsoft/Edge/User Data",
    // Shell history kept in a directory.
    ".local/share/fish",
];

/// File or directory names protected wherever they appear.
const NAME_PATTERNS: &[&str] = &[
    ".env*",
    "*.pem",
    "*.key",
    "id_*",
    "*.kdbx",
    "*.p12",
    "*.pfx",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".sh_history",
    ".history",
    "fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
];

/// The compiled deny list for one home directory.
#[derive(Debug, Clone)]
pub struct SecretsList {
    home_entries: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    names: GlobSet,
}

impl SecretsList {
    /// The list for `home` (already canonical) plus Outpost's own directories.
    pub fn new(home: &Path, protected: &[PathBuf]) -> Self {
        let mut builder = GlobSetBuilder::new();
        for pattern in NAME_PATTERNS {
            // The patterns are constants; a bad one is a programming error caught by tests,
            // so skipping it here is only a guard.
            if let Ok(glob) = Glob::new(pattern) {
                builder.add(glob);
            }
        }
        let names = builder.build().unwrap_or_else(|_| GlobSet::empty());
        Self {
            home_entries: HOME_ENTRIES.iter().map(|e| home.join(e)).collect(),
            protected: protected.to_vec(),
            names,
        }
    }

    /// Why `path` (canonical) is protected, or `None` when it is not on the list.
    pub fn matches(&self, path: &Path) -> Option<String> {
        for dir in &self.protected {
            if path.starts_with(dir) {
                return Some(format!(
                    "{} holds Outpost's own settings and data",
                    dir.display()
                ));
            }
        }
        for entry in &self.home_entries {
            if path.starts_with(entry) {
                return Some(format!(
                    "{} is on the built-in secrets list",
                    entry.display()
                ));
            }
        }
        for component in path.components() {
            if let Component::Normal(name) = component {
                if self.names.is_match(Path::new(name)) {
                    return Some(format!(
                        "files named like '{}' are on the built-in secrets list",
                        name.to_string_lossy()
                    ));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn list() -> SecretsList {
        SecretsList::new(
            Path::new("/home/u"),
            &[PathBuf::from("/home/u/.config/outpost")],
        )
    }

    #[test]
    fn every_pattern_compiles() {
        for p in NAME_PATTERNS {
            Glob::new(p).unwrap();
        }
        assert_eq!(list().names.len(), NAME_PATTERNS.len());
    }

    #[test]
    fn protects_the_listed_places() {
        let l = list();
        for p in [
            "/home/u/.ssh",
            "/home/u/.ssh/id_ed25519.pub",
            "/home/u/.ssh/config",
            "/home/u/.gnupg/pubring.kbx",
            "/home/u/.aws/credentials",
            "/home/u/.config/gcloud/credentials.db",
            "/home/u/.kube/config",
            "/home/u/.docker/config.json",
            "/home/u/.local/share/keyrings/login.keyring",
            "/home/u/.mozilla/firefox/x.default/logins.json",
            "/home/u/.config/google-chrome/Default/Cookies",
            "/home/u/.password-store/mail.gpg",
            "/home/u/projects/app/.env",
            "/home/u/projects/app/.env.local",
            "/srv/site/tls/server.pem",
            "/srv/site/tls/server.key",
            "/home/u/backup/id_rsa",
            "/home/u/.bash_history",
            "/home/u/.zsh_history",
            "/home/u/.local/share/fish/fish_history",
            "/home/u/.config/outpost/policy.toml",
        ] {
            assert!(l.matches(Path::new(p)).is_some(), "{p} should be protected");
        }
    }

    #[test]
    fn leaves_ordinary_files_alone() {
        let l = list();
        for p in [
            "/home/u/docs/notes.txt",
            "/home/u/.docker/other.json",
            "/home/u/.sshx/notes",
            "/home/u/environment.md",
            "/home/u/keys.txt",
            "/home/u/.config/outpost-other/x",
        ] {
            assert!(
                l.matches(Path::new(p)).is_none(),
                "{p} should not be protected"
            );
        }
    }
}
