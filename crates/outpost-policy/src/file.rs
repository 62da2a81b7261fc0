//! The policy file: a commented TOML file in the config directory, loaded at start,
//! reloaded when it changes, and edited in place (comments kept) when the user picks
//! "always allow" or "always deny".
//!
//! An invalid file never loosens anything: the error is reported through
//! [`PolicyStore::status`] and the last valid policy stays in force. A file that is invalid
//! at start leaves the built-in defaults in force (which ask before anything outside a
//! folder scope runs).
//!
//! With a trust record ([`PolicyStore::open_with_trust`], `outpost-trust` in the data
//! directory), a change Outpost did not make itself takes effect only when it allows
//! nothing more than the policy last confirmed ([`Policy::widenings`]); otherwise the
//! confirmed policy stays in force, the change is told in [`PolicyStatus::unconfirmed`],
//! and it waits for the user ([`PolicyStore::confirm`]). Outpost's own writes ("always"
//! answers, the settings pane) are confirmed as they are written.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use notify::{RecursiveMode, Watcher};
use tokio::sync::watch;

use crate::error::{PolicyError, Result};
use crate::model::{CompiledPolicy, FolderAccess, Policy, PolicyContext, Rule};

/// The file written when none exists. Parsing it gives [`Policy::default`].
pub const DEFAULT_POLICY_TOML: &str = r#"# Outpost tool permissions
#
# Outpost runs tools on this computer only as this file allows. Edit it with any text
# editor: Outpost reloads it when you save. If the file has a mistake, Outpost shows the
# error and keeps using the last version that was valid.
#
# How a tool call is decided, strongest rule first:
#   1. "deny" always wins: a tool set to "deny", or a folder with access = "deny".
#   2. Tools that change files (write_file) are off until you enable them below, and then
#      ask every time. open_path and open_url ask every time.
#   3. The built-in secrets list is never touched: ~/.ssh, ~/.gnupg, cloud and developer
#      credentials (~/.aws, ~/.config/gcloud, ~/.kube, ~/.docker/config.json, ~/.netrc,
#      ~/.config/gh/hosts.yml, ~/.vault-token, ...), keyrings, password stores, browser
#      and mail profiles, .env files, private keys and key stores (*.pem, *.key, id_*,
#      *.ppk, *.jks, *.kdbx, ...), shell histories, and Outpost's own settings and data,
#      in upper or lower case alike. To allow one exact path, add it under [[exceptions]].
#   4. A tool set to "allow" runs without asking; "ask" asks every time.
#   5. Other tools run without asking inside the folders listed with access = "allow",
#      and ask you everywhere else.
#   6. Tools of your MCP servers (mcp.toml; named mcp__SERVER__TOOL) ask unless their own
#      rule under [tools] or their server's under [mcp_servers] says otherwise; "deny" at
#      either level wins. What a server claims about its tools (read-only, destructive...)
#      is shown when you are asked and never decides anything.

# Seconds Outpost waits for your answer before treating a question as "deny".
consent_timeout_secs = 120

# Let tools read /proc, /sys and /dev. Devices, pipes and sockets are refused even then.
allow_system_paths = false

# Per-tool rules: "allow", "ask" or "deny". A tool not listed follows its default.
# Example: enable write_file (it will still ask every time):
#   write_file = "ask"
[tools]

# Per-MCP-server rules, for every tool of that server without its own rule. Example:
#   [mcp_servers]
#   time = "allow"
#   github = "deny"
# A tool's own rule comes first, e.g. under [tools]:  "mcp__github__create_issue" = "ask"

# Folder scopes. Example:
#   [[folders]]
#   path = "~/Documents"
#   access = "allow"               # or "deny"
#   tools = ["read_local_file"]    # optional: only these tools
# "Always allow" and "always deny" answers are added here.

# Exceptions to the secrets list, one exact path each. Example:
#   [[exceptions]]
#   path = "~/projects/app/.env.example"
"#;

/// The entry name of a policy file in the trust record (the whole file is one entry).
const TRUST_ENTRY: &str = "policy";

/// How long the watcher waits for a burst of change events to end before reloading.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(150);

/// Where the policy stands: which load is in force and the last error, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyStatus {
    /// Increases by one each time a valid file is loaded.
    pub generation: u64,
    /// The last load's error, `None` when the file in force is the file on disk.
    pub error: Option<String>,
    /// A change of the file made outside Outpost that allows more than the policy last
    /// confirmed, and is not in force until the user confirms it: what it would allow.
    pub unconfirmed: Option<String>,
}

#[derive(Debug)]
struct Inner {
    path: Option<PathBuf>,
    /// The data directory holding the trust record; none: every valid file is taken.
    trust_dir: Option<PathBuf>,
    ctx: PolicyContext,
    current: RwLock<Arc<CompiledPolicy>>,
    status: watch::Sender<PolicyStatus>,
    // Serializes edits of the file so two "always" answers do not lose each other.
    edit: Mutex<()>,
}

/// The policy in force, shared by the dispatcher, the UI and the file watcher.
#[derive(Debug, Clone)]
pub struct PolicyStore {
    inner: Arc<Inner>,
}

impl PolicyStore {
    /// Opens the policy file at `path`, writing [`DEFAULT_POLICY_TOML`] when it does not
    /// exist. An invalid file is reported in [`status`](Self::status) and the defaults apply.
    pub fn open(path: impl Into<PathBuf>, ctx: PolicyContext) -> Result<Self> {
        Self::open_with_trust(path, ctx, None)
    }

    /// [`Self::open`], gating changes made outside Outpost with the trust record in
    /// `trust_dir` (the data directory; the module's doc).
    pub fn open_with_trust(
        path: impl Into<PathBuf>,
        ctx: PolicyContext,
        trust_dir: Option<PathBuf>,
    ) -> Result<Self> {
        let path = path.into();
        if !path.exists() {
            if let Some(dir) = path.parent() {
                private_dir(dir).map_err(|source| PolicyError::Io {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            write_atomic(&path, DEFAULT_POLICY_TOML)?;
        }
        let store = Self::build(Some(path), trust_dir, ctx, Policy::default());
        // The error, if any, is now in `status`; the defaults stay in force.
        let _ = store.reload();
        Ok(store)
    }

    /// A store with no file: `policy` stays in force and "always" answers are kept in
    /// memory only. For tests, benchmarks and headless use.
    pub fn in_memory(policy: Policy, ctx: PolicyContext) -> Self {
        Self::build(None, None, ctx, policy)
    }

    fn build(
        path: Option<PathBuf>,
        trust_dir: Option<PathBuf>,
        ctx: PolicyContext,
        policy: Policy,
    ) -> Self {
        let compiled = Arc::new(CompiledPolicy::new(policy, &ctx));
        let (status, _) = watch::channel(PolicyStatus {
            generation: 0,
            error: None,
            unconfirmed: None,
        });
        Self {
            inner: Arc::new(Inner {
                path,
                trust_dir,
                ctx,
                current: RwLock::new(compiled),
                status,
                edit: Mutex::new(()),
            }),
        }
    }

    /// The file's path, if the store has one.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The context the policy is compiled against.
    pub fn context(&self) -> &PolicyContext {
        &self.inner.ctx
    }

    /// The policy in force.
    pub fn current(&self) -> Arc<CompiledPolicy> {
        Arc::clone(&outpost_sync::read(&self.inner.current))
    }

    /// The current status; subscribe to learn of reloads and errors.
    pub fn status(&self) -> watch::Receiver<PolicyStatus> {
        self.inner.status.subscribe()
    }

    fn install(&self, policy: Policy) {
        self.install_gated(policy, None);
    }

    fn install_gated(&self, policy: Policy, unconfirmed: Option<String>) {
        let compiled = Arc::new(CompiledPolicy::new(policy, &self.inner.ctx));
        *outpost_sync::write(&self.inner.current) = compiled;
        self.inner.status.send_modify(|s| {
            s.generation += 1;
            s.error = None;
            s.unconfirmed = unconfirmed;
        });
    }

    fn trust(&self, path: &Path) -> Result<Option<outpost_trust::Trust>> {
        let Some(dir) = &self.inner.trust_dir else {
            return Ok(None);
        };
        outpost_trust::Trust::open(dir)
            .map(Some)
            .map_err(|e| PolicyError::Invalid {
                path: path.to_path_buf(),
                message: format!("the record of confirmed settings cannot be read: {e}"),
            })
    }

    /// What to put in force for `text` (parsed: `policy`) read from `path`: the policy, or
    /// when it is a change made outside Outpost that allows more than the confirmed one,
    /// the confirmed one and what the change would allow. A change that allows nothing
    /// more is confirmed here.
    fn gate(&self, path: &Path, text: &str, policy: Policy) -> Result<(Policy, Option<String>)> {
        let Some(mut trust) = self.trust(path)? else {
            return Ok((policy, None));
        };
        if trust.knows(path) && trust.confirmed(path, TRUST_ENTRY, text) {
            return Ok((policy, None));
        }
        let confirmed = if trust.knows(path) {
            // Nothing confirmed that still reads: the built-in defaults.
            trust
                .copy(path, TRUST_ENTRY)
                .and_then(|t| parse_policy(path, t).ok())
                .unwrap_or_default()
        } else {
            // First sight: taken as it is.
            policy.clone()
        };
        let wider = confirmed.widenings(&policy);
        if !wider.is_empty() {
            let message = format!(
                "{} was changed outside Outpost and would allow more than you confirmed: {}. \
                 The policy you confirmed stays in force until you confirm the change \
                 (`outpost policy trust {}`, or Settings in the app).",
                path.display(),
                wider.join("; "),
                path.display()
            );
            tracing::warn!("{message}");
            return Ok((confirmed, Some(message)));
        }
        trust.confirm_keeping(path, TRUST_ENTRY, text);
        trust.save().map_err(|e| PolicyError::Invalid {
            path: path.to_path_buf(),
            message: format!("the record of confirmed settings cannot be written: {e}"),
        })?;
        Ok((policy, None))
    }

    /// Records `text` as confirmed for the file (Outpost wrote it, or the user confirmed).
    fn confirm_text(&self, path: &Path, text: &str) -> Result<()> {
        if let Some(mut trust) = self.trust(path)? {
            trust.confirm_keeping(path, TRUST_ENTRY, text);
            trust.save().map_err(|e| PolicyError::Invalid {
                path: path.to_path_buf(),
                message: format!("the record of confirmed settings cannot be written: {e}"),
            })?;
        }
        Ok(())
    }

    /// The user confirms the file as it is on disk now (a change made outside Outpost):
    /// it is recorded, rewritten unchanged (so every Outpost watching it reloads) and put
    /// in force. An invalid file is refused.
    pub fn confirm(&self) -> Result<()> {
        let Some(path) = self.inner.path.clone() else {
            return Ok(());
        };
        let _guard = outpost_sync::lock(&self.inner.edit);
        let text = std::fs::read_to_string(&path).map_err(|source| PolicyError::Io {
            path: path.clone(),
            source,
        })?;
        let policy = parse_policy(&path, &text)?;
        self.confirm_text(&path, &text)?;
        write_atomic(&path, &text)?;
        self.install(policy);
        Ok(())
    }

    /// Reads the file again. On error the last valid policy stays in force, the error is
    /// published in [`status`](Self::status) and returned. A change made outside Outpost
    /// that allows more than the confirmed policy is not put in force (the module's doc).
    pub fn reload(&self) -> Result<()> {
        let Some(path) = self.inner.path.clone() else {
            return Ok(());
        };
        let read = std::fs::read_to_string(&path)
            .map_err(|source| PolicyError::Io {
                path: path.clone(),
                source,
            })
            .and_then(|text| {
                let policy = parse_policy(&path, &text)?;
                self.gate(&path, &text, policy)
            });
        match read {
            Ok((policy, unconfirmed)) => {
                self.install_gated(policy, unconfirmed);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "policy file rejected; keeping the last valid policy");
                let msg = e.to_string();
                self.inner.status.send_modify(|s| s.error = Some(msg));
                Err(e)
            }
        }
    }

    /// Starts watching the file's directory; each change reloads it. Stop by dropping the
    /// returned watcher.
    pub fn watch(&self) -> Result<PolicyWatcher> {
        let Some(path) = self.inner.path.clone() else {
            return Err(PolicyError::Watch {
                path: PathBuf::new(),
                message: "this policy store has no file".into(),
            });
        };
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let file_name = path.file_name().map(|n| n.to_os_string());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                if event.kind.is_access() {
                    return;
                }
                let ours = event
                    .paths
                    .iter()
                    .any(|p| p.file_name().map(|n| n.to_os_string()) == file_name);
                if ours {
                    let _ = tx.send(());
                }
            })
            .map_err(|e| PolicyError::Watch {
                path: path.clone(),
                message: e.to_string(),
            })?;
        // Watching the directory (not the file) survives editors that save by renaming.
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| PolicyError::Watch {
                path: path.clone(),
                message: e.to_string(),
            })?;
        // Saving often takes several events (truncate, write, rename); reload once they
        // settle so a half-written file is not mistaken for the user's intent. The thread
        // ends when the watcher, and with it the sender, is dropped.
        let store = self.clone();
        std::thread::Builder::new()
            .name("outpost-policy-watch".into())
            .spawn(move || {
                while rx.recv().is_ok() {
                    while rx.recv_timeout(SETTLE).is_ok() {}
                    // The error is published in status(); nothing else to do here.
                    let _ = store.reload();
                }
            })
            .map_err(|e| PolicyError::Watch {
                path: path.clone(),
                message: e.to_string(),
            })?;
        Ok(PolicyWatcher { _watcher: watcher })
    }

    /// Remembers an "always allow" or "always deny" answer: for a folder, a `[[folders]]`
    /// entry limited to `tool`; without one, the tool's rule. The file keeps its comments.
    pub fn remember(&self, tool: &str, folder: Option<&Path>, access: FolderAccess) -> Result<()> {
        let _guard = outpost_sync::lock(&self.inner.edit);
        let mut policy = self.current().policy().clone();
        apply(&mut policy, tool, folder, access);
        self.rewrite(policy, |doc| edit_document(doc, tool, folder, access))?;
        Ok(())
    }

    /// Installs `policy` (in memory), or, with a file: applies `edit` to the file's TOML
    /// document (comments kept), checks the result reads back, writes it atomically and
    /// installs what was read back. The caller holds the edit lock.
    fn rewrite(
        &self,
        policy: Policy,
        edit: impl FnOnce(&mut toml_edit::DocumentMut),
    ) -> Result<Policy> {
        let Some(path) = self.inner.path.clone() else {
            self.install(policy.clone());
            return Ok(policy);
        };
        let text = std::fs::read_to_string(&path).map_err(|source| PolicyError::Io {
            path: path.clone(),
            source,
        })?;
        // Never confirm, by editing it, a change made outside Outpost that waits for the
        // user: an "always" answer must not put it in force behind their back.
        if let Ok(on_disk) = parse_policy(&path, &text) {
            if let (_, Some(unconfirmed)) = self.gate(&path, &text, on_disk)? {
                return Err(PolicyError::Unconfirmed {
                    path: path.clone(),
                    message: unconfirmed,
                });
            }
        }
        let mut doc: toml_edit::DocumentMut =
            text.parse()
                .map_err(|e: toml_edit::TomlError| PolicyError::Invalid {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
        edit(&mut doc);
        let new_text = doc.to_string();
        // Never write a file we could not read back.
        let parsed = parse_policy(&path, &new_text)?;
        write_atomic(&path, &new_text)?;
        self.confirm_text(&path, &new_text)?;
        self.install(parsed.clone());
        Ok(parsed)
    }
}

impl PolicyStore {
    /// Replaces the settings a settings pane edits (consent timeout, per-tool rules, folder
    /// scopes) with `edit`'s result, after [`Policy::check`]. The file keeps its comments and
    /// every other key; the new policy is in force when this returns.
    pub fn update(&self, edit: impl FnOnce(&mut Policy)) -> Result<Policy> {
        let _guard = outpost_sync::lock(&self.inner.edit);
        let mut policy = self.current().policy().clone();
        edit(&mut policy);
        let path_for_errors = self.inner.path.clone().unwrap_or_default();
        policy.check().map_err(|message| PolicyError::Invalid {
            path: path_for_errors.clone(),
            message,
        })?;
        let written = policy.clone();
        self.rewrite(policy, |doc| write_settings(doc, &written))
    }
}

/// Writes the pane-editable keys of `policy` into `doc`, leaving comments and other keys.
fn write_settings(doc: &mut toml_edit::DocumentMut, policy: &Policy) {
    let timeout = i64::try_from(policy.consent_timeout_secs).unwrap_or(i64::MAX);
    // Assigning through the index keeps the key and the comments above it.
    doc["consent_timeout_secs"] = toml_edit::value(timeout);
    if !doc.get("tools").is_some_and(toml_edit::Item::is_table) {
        doc.insert("tools", toml_edit::table());
    }
    if let Some(tools) = doc.get_mut("tools").and_then(toml_edit::Item::as_table_mut) {
        tools.clear();
        for (name, rule) in &policy.tools {
            let word = match rule {
                Rule::Allow => "allow",
                Rule::Ask => "ask",
                Rule::Deny => "deny",
            };
            tools.insert(name, toml_edit::value(word));
        }
    }
    // Per-server rules (Settings → Tool servers): written when there are some, or when the
    // file has the table (emptied then).
    if !policy.mcp_servers.is_empty()
        && !doc
            .get("mcp_servers")
            .is_some_and(toml_edit::Item::is_table)
    {
        doc.insert("mcp_servers", toml_edit::table());
    }
    if let Some(servers) = doc
        .get_mut("mcp_servers")
        .and_then(toml_edit::Item::as_table_mut)
    {
        servers.clear();
        for (name, rule) in &policy.mcp_servers {
            let word = match rule {
                Rule::Allow => "allow",
                Rule::Ask => "ask",
                Rule::Deny => "deny",
            };
            servers.insert(name, toml_edit::value(word));
        }
    }
    let mut folders = toml_edit::ArrayOfTables::new();
    for f in &policy.folders {
        let mut t = toml_edit::Table::new();
        t.insert("path", toml_edit::value(f.path.clone()));
        let access = match f.access {
            FolderAccess::Allow => "allow",
            FolderAccess::Deny => "deny",
        };
        t.insert("access", toml_edit::value(access));
        if let Some(list) = &f.tools {
            let mut arr = toml_edit::Array::new();
            for name in list {
                arr.push(name.as_str());
            }
            t.insert("tools", toml_edit::value(arr));
        }
        folders.push(t);
    }
    doc.remove("folders");
    if !folders.is_empty() {
        doc.insert("folders", toml_edit::Item::ArrayOfTables(folders));
    }
}

fn apply(policy: &mut Policy, tool: &str, folder: Option<&Path>, access: FolderAccess) {
    match folder {
        Some(f) => policy.folders.push(crate::model::FolderRule {
            path: f.to_string_lossy().into_owned(),
            access,
            tools: Some(vec![tool.to_owned()]),
        }),
        None => {
            let rule = match access {
                FolderAccess::Allow => Rule::Allow,
                FolderAccess::Deny => Rule::Deny,
            };
            policy.tools.insert(tool.to_owned(), rule);
        }
    }
}

fn edit_document(
    doc: &mut toml_edit::DocumentMut,
    tool: &str,
    folder: Option<&Path>,
    access: FolderAccess,
) {
    let access_str = match access {
        FolderAccess::Allow => "allow",
        FolderAccess::Deny => "deny",
    };
    match folder {
        Some(f) => {
            let mut table = toml_edit::Table::new();
            table.insert("path", toml_edit::value(f.to_string_lossy().into_owned()));
            table.insert("access", toml_edit::value(access_str));
            let mut tools = toml_edit::Array::new();
            tools.push(tool);
            table.insert("tools", toml_edit::value(tools));
            if !doc.contains_key("folders") {
                doc.insert(
                    "folders",
                    toml_edit::Item::ArrayOfTables(toml_edit::ArrayOfTables::new()),
                );
            }
            if let Some(arr) = doc
                .get_mut("folders")
                .and_then(toml_edit::Item::as_array_of_tables_mut)
            {
                arr.push(table);
            }
        }
        None => {
            if !doc.contains_key("tools") {
                doc.insert("tools", toml_edit::table());
            }
            if let Some(t) = doc.get_mut("tools").and_then(toml_edit::Item::as_table_mut) {
                t.insert(tool, toml_edit::value(access_str));
            }
        }
    }
}

/// Reads and checks a policy file.
pub fn read_policy(path: &Path) -> Result<Policy> {
    let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_policy(path, &text)
}

/// Parses and checks policy text; `path` is only used in errors.
pub fn parse_policy(path: &Path, text: &str) -> Result<Policy> {
    let policy: Policy = toml::from_str(text).map_err(|e| PolicyError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    policy.check().map_err(|message| PolicyError::Invalid {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(policy)
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let io = |source| PolicyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("toml.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    // The policy is the user's alone, like the rest of the profile (0600; the folder 0700).
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::io::Write::write_all(&mut options.open(&tmp).map_err(io)?, text.as_bytes()).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Creates the policy's folder (and missing parents) 0700 where it is created.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Keeps a policy file watched; dropping it stops the watching.
#[derive(Debug)]
pub struct PolicyWatcher {
    _watcher: notify::RecommendedWatcher,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::model::{Exception, FolderRule};

    fn ctx(home: &Path) -> PolicyContext {
        PolicyContext::new(home, vec![])
    }

    #[test]
    fn default_text_parses_to_the_default_policy() {
        let p = parse_policy(Path::new("x"), DEFAULT_POLICY_TOML).unwrap();
        assert_eq!(p, Policy::default());
    }

    #[test]
    fn policy_round_trips_through_toml() {
        let p = Policy {
            consent_timeout_secs: 30,
            allow_system_paths: true,
            tools: [
                ("write_file".to_owned(), Rule::Ask),
                ("calculator".to_owned(), Rule::Deny),
                ("mcp__time__get_current_time".to_owned(), Rule::Allow),
            ]
            .into(),
            mcp_servers: [("files".to_owned(), Rule::Deny)].into(),
            folders: vec![
                FolderRule {
                    path: "~/Documents".into(),
                    access: FolderAccess::Allow,
                    tools: None,
                },
                FolderRule {
                    path: "/srv/private".into(),
                    access: FolderAccess::Deny,
                    tools: Some(vec!["read_local_file".into()]),
                },
            ],
            exceptions: vec![Exception {
                path: "~/app/.env.example".into(),
            }],
        };
        let text = toml::to_string(&p).unwrap();
        assert_eq!(parse_policy(Path::new("x"), &text).unwrap(), p);
    }

    #[test]
    fn update_rewrites_pane_settings_keeps_comments_and_refuses_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        let store = PolicyStore::open(&path, ctx(dir.path())).unwrap();
        store
            .remember("calculator", None, FolderAccess::Deny)
            .unwrap();
        let saved = store
            .update(|p| {
                p.consent_timeout_secs = 90;
                p.tools.remove("calculator");
                p.tools.insert("write_file".into(), Rule::Ask);
                p.folders = vec![FolderRule {
                    path: "~/Documents".into(),
                    access: FolderAccess::Allow,
                    tools: None,
                }];
                p.mcp_servers.insert("files".into(), Rule::Allow);
                p.mcp_servers.insert("web".into(), Rule::Deny);
            })
            .unwrap();
        assert_eq!(store.current().policy(), &saved);
        assert_eq!(saved.mcp_servers.get("files"), Some(&Rule::Allow));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# Outpost tool permissions"), "{text}");
        let reread = read_policy(&path).unwrap();
        assert_eq!(reread, saved);
        assert_eq!(reread.consent_timeout_secs, 90);
        assert_eq!(reread.tools.get("calculator"), None);
        assert_eq!(reread.tools.get("write_file"), Some(&Rule::Ask));
        assert_eq!(reread.folders.len(), 1);
        assert_eq!(reread.mcp_servers.len(), 2);
        // Removing the last server rule empties the table.
        let fewer = store.update(|p| p.mcp_servers.clear()).unwrap();
        assert!(read_policy(&path).unwrap().mcp_servers.is_empty());
        let saved = store
            .update(|p| {
                p.mcp_servers.clone_from(&saved.mcp_servers);
            })
            .unwrap();
        assert!(fewer.mcp_servers.is_empty());

        // A relative folder path is refused, naming the field; nothing changes on disk.
        let err = store
            .update(|p| {
                p.folders.push(FolderRule {
                    path: "relative/dir".into(),
                    access: FolderAccess::Allow,
                    tools: None,
                })
            })
            .unwrap_err();
        assert!(err.to_string().contains("folders[1].path"), "{err}");
        assert_eq!(read_policy(&path).unwrap(), saved);
        let err = store.update(|p| p.consent_timeout_secs = 0).unwrap_err();
        assert!(err.to_string().contains("consent_timeout_secs"), "{err}");
        assert_eq!(store.current().policy(), &saved);
    }

    #[test]
    fn open_writes_defaults_and_remember_keeps_comments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cfg/policy.toml");
        let store = PolicyStore::open(&path, ctx(dir.path())).unwrap();
        assert_eq!(store.current().policy(), &Policy::default());
        assert_eq!(store.status().borrow().error, None);

        let folder = dir.path().join("notes");
        store
            .remember("read_local_file", Some(&folder), FolderAccess::Allow)
            .unwrap();
        store
            .remember("calculator", None, FolderAccess::Deny)
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# Outpost tool permissions"), "{text}");
        assert!(text.contains("# Folder scopes. Example:"), "{text}");
        let reread = read_policy(&path).unwrap();
        assert_eq!(reread.tools.get("calculator"), Some(&Rule::Deny));
        assert_eq!(reread.folders.len(), 1);
        assert_eq!(reread.folders[0].path, folder.to_string_lossy());
        assert_eq!(
            reread.folders[0].tools.as_deref(),
            Some(&["read_local_file".to_owned()][..])
        );
        assert_eq!(store.current().policy(), &reread);
    }

    /// Issue 30, finding 3: a change of the policy file made outside Outpost that allows
    /// more does not take effect until the user confirms it; one that allows less does;
    /// Outpost's own edits are confirmed as written; a new process sees the same.
    #[test]
    fn an_outside_change_that_allows_more_waits_for_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let path = dir.path().join("policy.toml");
        let docs = "[[folders]]\npath = \"~/docs\"\naccess = \"allow\"\n";
        std::fs::write(&path, docs).unwrap();
        let open = || PolicyStore::open_with_trust(&path, ctx(dir.path()), Some(data.clone()));
        // First sight: taken as it is.
        let store = open().unwrap();
        let confirmed = read_policy(&path).unwrap();
        assert_eq!(store.current().policy(), &confirmed);
        assert_eq!(store.status().borrow().unconfirmed, None);

        // Less: in force, and confirmed.
        let less = format!("{docs}[tools]\ncalculator = \"deny\"\n");
        std::fs::write(&path, &less).unwrap();
        store.reload().unwrap();
        assert_eq!(
            store.current().policy().tools.get("calculator"),
            Some(&Rule::Deny)
        );
        let confirmed = read_policy(&path).unwrap();

        // More: the confirmed policy stays, the change is told.
        let more =
            format!("{less}write_file = \"ask\"\n[[folders]]\npath = \"~\"\naccess = \"allow\"\n");
        std::fs::write(&path, &more).unwrap();
        store.reload().unwrap();
        assert_eq!(store.current().policy(), &confirmed);
        let told = store.status().borrow().unconfirmed.clone().unwrap();
        assert!(
            told.contains("write_file") && told.contains("a new allowed folder: ~"),
            "{told}"
        );
        // A new process: the same.
        let again = open().unwrap();
        assert_eq!(again.current().policy(), &confirmed);
        assert!(again.status().borrow().unconfirmed.is_some());
        // Outpost does not edit the file meanwhile (an edit would confirm the change).
        let err = store
            .remember("calculator", None, FolderAccess::Allow)
            .unwrap_err();
        assert!(matches!(err, PolicyError::Unconfirmed { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), more);

        // The user confirms: in force, here and in a new process.
        store.confirm().unwrap();
        assert_eq!(store.current().policy(), &read_policy(&path).unwrap());
        assert_eq!(store.status().borrow().unconfirmed, None);
        assert_eq!(open().unwrap().status().borrow().unconfirmed, None);

        // Outpost's own edits are confirmed as written.
        store
            .update(|p| {
                p.mcp_servers.insert("files".into(), Rule::Allow);
            })
            .unwrap();
        let reopened = open().unwrap();
        assert_eq!(reopened.status().borrow().unconfirmed, None);
        assert_eq!(
            reopened.current().policy().mcp_servers.get("files"),
            Some(&Rule::Allow)
        );
    }

    #[test]
    fn invalid_file_is_reported_and_last_valid_policy_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(
            &path,
            "consent_timeout_secs = 7\n[tools]\ncalculator = \"deny\"\n",
        )
        .unwrap();
        let store = PolicyStore::open(&path, ctx(dir.path())).unwrap();
        assert_eq!(store.current().policy().consent_timeout_secs, 7);

        for bad in [
            "consent_timeout_secs = \"soon\"\n",
            "[tools]\ncalculator = \"sometimes\"\n",
            "[[folders]]\npath = \"relative\"\naccess = \"allow\"\n",
            "unknown_key = 1\n",
            "this is not toml",
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = store.reload().unwrap_err();
            assert!(matches!(err, PolicyError::Invalid { .. }), "{bad}: {err}");
            assert_eq!(store.current().policy().consent_timeout_secs, 7, "{bad}");
            assert!(store.status().borrow().error.is_some());
        }
        std::fs::write(&path, "consent_timeout_secs = 9\n").unwrap();
        store.reload().unwrap();
        assert_eq!(store.current().policy().consent_timeout_secs, 9);
        assert_eq!(store.status().borrow().error, None);
    }

    #[test]
    fn invalid_file_at_start_leaves_defaults_and_reports() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, "[tools]\nwrite_file = \"allow\"\nbroken").unwrap();
        let store = PolicyStore::open(&path, ctx(dir.path())).unwrap();
        assert_eq!(store.current().policy(), &Policy::default());
        let err = store.status().borrow().error.clone().unwrap();
        assert!(err.contains("policy.toml"), "{err}");
    }

    #[tokio::test]
    async fn watcher_reloads_on_change_and_keeps_last_valid_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        let store = PolicyStore::open(&path, ctx(dir.path())).unwrap();
        let _watcher = store.watch().unwrap();
        let mut status = store.status();
        let start = status.borrow().generation;

        std::fs::write(&path, "consent_timeout_secs = 33\n").unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                if store.current().policy().consent_timeout_secs == 33 {
                    break;
                }
                status.changed().await.unwrap();
            }
        })
        .await
        .expect("the watcher did not reload the changed file");
        assert!(status.borrow().generation > start);

        std::fs::write(&path, "consent_timeout_secs = [").unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                if status.borrow_and_update().error.is_some() {
                    break;
                }
                status.changed().await.unwrap();
            }
        })
        .await
        .expect("the watcher did not report the invalid file");
        assert_eq!(store.current().policy().consent_timeout_secs, 33);
    }
}
