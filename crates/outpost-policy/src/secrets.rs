//! The built-in secrets deny list: places and file names that hold credentials, keys,
//! browsing data and Outpost's own state. It wins over every allow rule; only an explicit
//! per-path exception in the policy file lifts it.
//!
//! Every comparison ignores case: on case-insensitive file systems (macOS by default,
//! Windows, vfat and exFAT drives, ext4 folders with casefolding) `~/.SSH/ID_RSA` and
//! `server.KEY` are the same files as `~/.ssh/id_rsa` and `server.key`. On a case-sensitive
//! system this protects a few more names than needed, which is the safe side.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Directories and files under the home directory that are always protected. Each is a
/// glob relative to the home directory (`*` stays within one name); everything beneath a
/// match is protected too.
const HOME_ENTRIES: &[&str] = &[
    // SSH, GnuPG and cloud or developer tool credentials.
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".dockercfg",
    ".config/containers/auth.json",
    ".netrc",
    ".pgpass",
    ".my.cnf",
    ".mylogin.cnf",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh/hosts.yml",
    ".config/hub",
    ".npmrc",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings-security.xml",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".terraformrc",
    ".config/rclone/rclone.conf",
    ".s3cfg",
    ".boto",
    ".oci",
    ".config/doctl",
    ".config/op",
    ".config/sops",
    // Keyrings and password stores.
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".password-store",
    ".local/share/password-store",
    ".config/Bitwarden*",
    ".config/1Password",
    ".config/keepassxc",
    "Library/Keychains",
    // Browser and mail profiles (cookies, saved passwords, history, mail).
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    "snap/firefox",
    "snap/chromium",
    "snap/thunderbird",
    ".var/app/org.mozilla.firefox",
    ".var/app/org.mozilla.Thunderbird",
    ".var/app/com.google.Chrome",
    ".var/app/org.chromium.Chromium",
    ".var/app/com.brave.Browser",
    ".var/app/com.bitwarden.desktop",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge",
    "Library/Thunderbird",
    "Library/Safari",
    "Library/Cookies",
    "AppData/Roaming/Mozilla",
    "AppData/Roaming/Thunderbird",
    "AppData/Local/Google/Chrome/User Data",
    "AppData/Local/Microsoft/Edge/User Data",
    // Shell history kept in a directory (fish; macOS Terminal's per-session zsh history).
    ".local/share/fish",
    ".zsh_sessions",
];

/// File or directory names protected wherever they appear.
const NAME_PATTERNS: &[&str] = &[
    ".env*",
    // Private keys and key stores: PEM, PuTTY, Java, PKCS#12, KeePass.
    "*.pem",
    "*.key",
    "id_*",
    "*.ppk",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.p12",
    "*.pfx",
    // Credential files that keep their name wherever they are copied.
    ".netrc",
    "_netrc",
    ".pgpass",
    ".my.cnf",
    ".mylogin.cnf",
    ".git-credentials",
    ".vault-token",
    "credentials.tfrc.json",
    // Kerberos ticket caches (/tmp/krb5cc_1000).
    "krb5cc_*",
    // Firefox and Thunderbird saved passwords and their key, in any profile folder.
    "logins.json",
    "key3.db",
    "key4.db",
    "signons.sqlite",
    "wallet.dat",
    // Shell and REPL histories.
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
    home: Vec<String>,
    home_path: PathBuf,
    /// Two globs per [`HOME_ENTRIES`] entry (the entry, and everything beneath it).
    home_entries: GlobSet,
    protected: Vec<(PathBuf, Vec<String>)>,
    names: GlobSet,
}

/// A constant pattern, matched without regard to case.
fn glob_set<'a>(patterns: impl IntoIterator<Item = &'a str>) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        // The patterns are constants; a bad one is a programming error caught by tests,
        // so skipping it here is only a guard.
        if let Ok(glob) = GlobBuilder::new(pattern)
            .case_insensitive(true)
            .literal_separator(true)
            .build()
        {
            builder.add(glob);
        }
    }
    builder.build().unwrap_or_else(|_| GlobSet::empty())
}

/// The path's components, lower-cased, for case-insensitive prefix tests.
fn folded(path: &Path) -> Vec<String> {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy().to_lowercase())
        .collect()
}

impl SecretsList {
    /// The list for `home` (already canonical) plus Outpost's own directories.
    pub fn new(home: &Path, protected: &[PathBuf]) -> Self {
        let home_patterns: Vec<String> = HOME_ENTRIES
            .iter()
            .flat_map(|e| [(*e).to_owned(), format!("{e}/**")])
            .collect();
        Self {
            home: folded(home),
            home_path: home.to_path_buf(),
            home_entries: glob_set(home_patterns.iter().map(String::as_str)),
            protected: protected.iter().map(|p| (p.clone(), folded(p))).collect(),
            names: glob_set(NAME_PATTERNS.iter().copied()),
        }
    }

    /// Why `path` (canonical) is one of Outpost's own folders or files (its config and data
    /// folders, its policy file), or `None`. Unlike the rest of the list, no exception in
    /// the policy lifts this: a tool that could change these could change its own limits.
    pub fn outpost_own(&self, path: &Path) -> Option<String> {
        let parts = folded(path);
        self.protected
            .iter()
            .find(|(_, dir_parts)| parts.starts_with(dir_parts))
            .map(|(dir, _)| {
                format!(
                    "{} holds Outpost's own settings and data, which no tool may read or \
                     change whatever the policy says",
                    dir.display()
                )
            })
    }

    /// The places on the list that are named by a fixed path (Outpost's own folders, and
    /// the home entries without a wildcard), whether they exist or not: a folder that
    /// contains one cannot be handed out whole (MCP roots), even before it is created.
    pub fn fixed_places(&self) -> Vec<PathBuf> {
        let home = HOME_ENTRIES
            .iter()
            .filter(|e| !e.contains(['*', '?', '[', '{']))
            .map(|e| self.home_path.join(e));
        self.protected
            .iter()
            .map(|(p, _)| p.clone())
            .chain(home)
            .collect()
    }

    /// Why `path` (canonical) is protected, or `None` when it is not on the list.
    pub fn matches(&self, path: &Path) -> Option<String> {
        if let Some(why) = self.outpost_own(path) {
            return Some(why);
        }
        let parts = folded(path);
        if parts.len() > self.home.len() && parts.starts_with(&self.home) {
            let relative: Vec<String> = path
                .components()
                .skip(self.home.len())
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if let Some(i) = self.home_entries.matches(relative.join("/")).first() {
                let entry = HOME_ENTRIES.get(i / 2).copied().unwrap_or_default();
                return Some(format!("~/{entry} is on the built-in secrets list"));
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
        for p in NAME_PATTERNS.iter().chain(HOME_ENTRIES) {
            GlobBuilder::new(p).build().unwrap();
        }
        let l = list();
        assert_eq!(l.names.len(), NAME_PATTERNS.len());
        assert_eq!(l.home_entries.len(), 2 * HOME_ENTRIES.len());
    }

    /// Issue 17's list of credential files that were read without a prompt, and the other
    /// places it asked for, each with a case variant as a case-insensitive file system
    /// would serve it.
    #[test]
    fn protects_common_credential_files_in_any_case() {
        let l = list();
        for p in [
            "/home/u/.config/gh/hosts.yml",
            "/home/u/.config/git/credentials",
            "/home/u/.my.cnf",
            "/home/u/.vault-token",
            "/home/u/.zsh_sessions/5A1B.historynew",
            "/home/u/.thunderbird/abcd.default-release/logins.json",
            "/home/u/.thunderbird/abcd.default-release/key4.db",
            "/home/u/.var/app/org.mozilla.firefox/.mozilla/firefox/x/logins.json",
            "/home/u/custom-profile/logins.json",
            "/home/u/custom-profile/key4.db",
            "/home/u/.config/containers/auth.json",
            "/home/u/putty/server.ppk",
            "/home/u/.terraform.d/credentials.tfrc.json",
            "/home/u/.config/rclone/rclone.conf",
            "/tmp/krb5cc_1000",
            "/home/u/android/release.jks",
            "/home/u/android/debug.keystore",
            "/home/u/Sync/passwords.kdbx",
            "/home/u/.password-store/mail.gpg",
            "/home/u/.config/Bitwarden/data.json",
            "/home/u/.config/Bitwarden CLI/data.json",
            "/home/u/.local/share/keyrings/login.keyring",
            "/home/u/.azure/msal_token_cache.json",
            "/home/u/.config/gcloud/access_tokens.db",
            "/home/u/.aws/credentials",
            "/home/u/.kube/config",
            "/home/u/.docker/config.json",
            "/home/u/.netrc",
            "/home/u/.pgpass",
            "/home/u/.npmrc",
            "/home/u/.pypirc",
            "/srv/app/.netrc",
            "/srv/app/.vault-token",
        ] {
            let upper = p.to_uppercase();
            let mixed: String = p
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            for variant in [p, upper.as_str(), mixed.as_str()] {
                assert!(
                    l.matches(Path::new(variant)).is_some(),
                    "{variant} should be protected"
                );
            }
        }
        for p in [
            "/home/u/tls/server.KEY",
            "/home/u/app/.ENV",
            "/home/u/app/.Env.Local",
            "/home/u/.SSH/config",
            "/home/u/Backup/ID_RSA",
            "/home/u/.Bash_History",
            "/HOME/U/.ssh/config",
            "/home/u/.CONFIG/OUTPOST/policy.toml",
        ] {
            assert!(l.matches(Path::new(p)).is_some(), "{p} should be protected");
        }
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
            "/home/u/notes.txt",
            "/home/u/keyboard.md",
            "/home/u/docs/Environment.md",
            "/home/u/docs/KEYBOARD.MD",
            "/home/u/.config/gh/config.yml",
            "/home/u/.config/git/config",
            "/home/u/.config/rclone/notes.txt",
            "/home/u/.terraform.d/plugins/x",
            "/home/u/src/login.json",
            "/home/u/src/key4.dbx",
            "/home/u/src/monkey.keystores",
            "/tmp/krb5.conf",
            "/home/u/work/ppk-notes.txt",
            "/home/u/.config/outpost-other/x",
        ] {
            assert!(
                l.matches(Path::new(p)).is_none(),
                "{p} should not be protected"
            );
        }
    }
}
