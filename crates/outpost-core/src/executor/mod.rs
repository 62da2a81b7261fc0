//! The one place that knows `outpost-tools` and `outpost-policy`: builds the dispatcher
//! with the built-in tools, the policy and the consent broker, and maps their events to
//! the machine's [`ExecEvent`]s and the UI's consent events. If those crates change,
//! only this module follows. `mcp` turns the tools of the user's MCP servers
//! (`outpost-mcp`) into dispatcher tools.

mod mcp;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use outpost_mcp::{McpHost, McpTool};

use outpost_policy::{
    ConsentBroker, ConsentEvent, ConsentInbox, Decision, Entry, EntryKind, Policy, PolicyContext,
    PolicyStore, RootLimits, ServerClaims,
};
use outpost_protocol::{ToolDescriptor, ToolUseCancel, ToolUseRequest};
pub use outpost_tools::DispatchEvent;
use outpost_tools::{AuditOutcome, DesktopLauncher, Dispatcher, ToolEnv};
use tokio::sync::mpsc;

use crate::error::{CoreError, Result};
use crate::events::{ConsentPrompt, UiEvent};
use crate::machine::ExecEvent;

/// Where the permission policy comes from.
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// A policy file (created with commented defaults when missing). An invalid file is
    /// an error here, so a headless client never runs with rules it did not read.
    File(PathBuf),
    /// A policy held in memory ("always" answers are not written anywhere).
    InMemory(Policy),
}

/// How the executor is set up.
#[derive(Debug, Clone)]
pub struct ToolsConfig {
    /// The policy.
    pub policy: PolicySource,
    /// The user's home directory (for `~` and the secrets list).
    pub home: PathBuf,
    /// Outpost's own folders (data directory, config): never readable by tools.
    pub protected: Vec<PathBuf>,
}

impl ToolsConfig {
    /// The built-in default policy, `$HOME` as home.
    pub fn defaults() -> Self {
        Self {
            policy: PolicySource::InMemory(Policy::default()),
            home: std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
            protected: Vec::new(),
        }
    }
}

/// The policy and consent broker shared by every session of a [`crate::Core`].
#[derive(Debug, Clone)]
pub struct Permissions {
    policy: PolicyStore,
    broker: ConsentBroker,
    home: PathBuf,
}

impl Permissions {
    /// Opens the policy as configured. Outpost's own places are out of every tool's reach
    /// whatever the policy says: the caller's `protected` folders, the policy file, and
    /// [`outpost_places`].
    pub fn new(config: &ToolsConfig) -> Result<Self> {
        Self::with_trust(config, None)
    }

    /// [`Self::new`], with the record of confirmed settings in `trust_dir` (the data
    /// directory): a change of the policy file made outside Outpost that allows more than
    /// the user confirmed is not put in force (it is told in the policy's status).
    pub fn with_trust(config: &ToolsConfig, trust_dir: Option<&std::path::Path>) -> Result<Self> {
        let mut protected = config.protected.clone();
        protected.extend(outpost_places());
        if let PolicySource::File(path) = &config.policy {
            protected.push(path.clone());
            // What the policy store writes before renaming it over the file.
            protected.push(path.with_extension("toml.tmp"));
        }
        let ctx = PolicyContext::new(config.home.clone(), protected);
        let policy = match &config.policy {
            PolicySource::File(path) => {
                let store =
                    PolicyStore::open_with_trust(path.clone(), ctx, trust_dir.map(Into::into))
                        .map_err(|e| CoreError::Policy {
                            path: path.clone(),
                            message: e.to_string(),
                        })?;
                let error = store.status().borrow().error.clone();
                if let Some(message) = error {
                    return Err(CoreError::Policy {
                        path: path.clone(),
                        message,
                    });
                }
                store
            }
            PolicySource::InMemory(p) => PolicyStore::in_memory(p.clone(), ctx),
        };
        Ok(Self {
            policy,
            broker: ConsentBroker::new(),
            home: config.home.clone(),
        })
    }

    /// Attaches a consent UI: questions arrive on the inbox (see [`consent_event`]).
    /// Without one, every question is denied at once.
    pub fn attach_consent(&self) -> ConsentInbox {
        self.broker.attach()
    }

    /// Answers a consent question.
    pub fn answer_consent(&self, consent_id: &str, decision: Decision) -> Result<()> {
        self.broker
            .answer(consent_id, decision)
            .map_err(|e| match e {
                outpost_policy::PolicyError::DecisionNotOffered { .. } => {
                    CoreError::InvalidArgument {
                        name: "decision",
                        reason: e.to_string(),
                    }
                }
                _ => CoreError::Consent(e.to_string()),
            })
    }

    /// The policy in force (read it, or edit it for a settings pane).
    pub fn policy(&self) -> &PolicyStore {
        &self.policy
    }

    /// The policy file, if the policy has one.
    pub fn policy_path(&self) -> Option<PathBuf> {
        self.policy.path().map(PathBuf::from)
    }

    /// Why the file at `path`, which the user chose to give the assistant (dropped or
    /// picked), must not be sent, or `None`: the rules no answer lifts (the built-in
    /// secrets list unless the policy file makes an exception for it, a denied folder, a
    /// system directory), judged on its real path (symlinks followed), as for a tool.
    pub fn attachment_refused(&self, path: &std::path::Path) -> Option<String> {
        let real = outpost_policy::canonical_or_clean(path);
        self.policy
            .current()
            .hard_deny(ATTACHMENT, &real)
            .map(|(_, why)| why)
    }

    /// Why a file known only by its `name` (pasted: no path) must not be sent, or `None`:
    /// the secrets list's file-name rules (`id_rsa`, `.env`, `*.pem`, …).
    pub fn attachment_name_refused(&self, name: &str) -> Option<String> {
        let name = std::path::Path::new(name).file_name()?;
        self.policy
            .current()
            .hard_deny(ATTACHMENT, std::path::Path::new(name))
            .map(|(_, why)| why)
    }
}

/// Where Outpost keeps its settings and data: the config and data folders this run's
/// environment names (`$OUTPOST_CONFIG_DIR`, `$OUTPOST_DATA_DIR`), the platform's (also
/// when the environment points elsewhere: the user's own profile stays out of reach of a
/// demo or a test run), and the local demo's profile beside the platform's data folder
/// (`outpost-demo`, scripts/run.sh). A `--data-dir` is added by the core, which opens the
/// store there.
pub fn outpost_places() -> Vec<PathBuf> {
    let mut places = Vec::new();
    if let Ok(dir) = outpost_mcp::config::config_dir_from_env() {
        places.push(dir);
    }
    places.extend(outpost_mcp::config::platform_config_dir());
    if let Ok(dir) = outpost_store::data_dir(None) {
        places.push(dir);
    }
    if let Ok(dir) = outpost_store::paths::resolve_data_dir(None, None) {
        if let Some(parent) = dir.parent() {
            places.push(parent.join("outpost-demo"));
        }
        places.push(dir);
    }
    places.sort();
    places.dedup();
    places
}

/// The user confirms the policy file at `path` as it is now (a change made outside
/// Outpost that allows more than they had confirmed), in the record in `data_dir`. Returns
/// what the change allows that was not in force (empty when nothing was waiting). Every
/// Outpost that follows the file puts it in force. An invalid or missing file is an error.
pub fn confirm_policy(
    path: &std::path::Path,
    data_dir: &std::path::Path,
) -> Result<Option<String>> {
    let err = |e: outpost_policy::PolicyError| CoreError::Policy {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    if !path.is_file() {
        return Err(CoreError::Policy {
            path: path.to_path_buf(),
            message: "there is no such file".into(),
        });
    }
    outpost_policy::read_policy(path).map_err(err)?;
    let ctx = PolicyContext::new(ToolsConfig::defaults().home, Vec::new());
    let store = PolicyStore::open_with_trust(path.to_path_buf(), ctx, Some(data_dir.to_path_buf()))
        .map_err(err)?;
    let waiting = store.status().borrow().unconfirmed.clone();
    store.confirm().map_err(err)?;
    Ok(waiting)
}

/// The MCP roots to offer now ([`Permissions::mcp_roots`]) and what was left out of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpRoots {
    /// The roots, as `file://` URIs.
    pub roots: Vec<outpost_mcp::Root>,
    /// The same folders as paths: what a sandboxed server may reach of the allowed
    /// folders (`McpHost::set_folders`).
    pub folders: Vec<PathBuf>,
    /// One sentence per folder or file left out (bounded), for the log or the terminal.
    pub left_out: Vec<String>,
}

/// The policy as the MCP sandbox's gate: a server's own `read`/`write` folders split
/// around everything the policy denies, as the roots are, and its program folders
/// reachable whole only when nothing denied is in or around them
/// (`outpost_policy::CompiledPolicy::{split_folders, whole_block}`). It reads the policy
/// in force at each server start.
#[derive(Debug, Clone)]
struct PolicyGate {
    policy: PolicyStore,
}

/// The sandbox's gate over `policy` ([`outpost_mcp::FolderGate`]): for callers outside a
/// session (the app's list of a server's tools).
pub fn mcp_gate(policy: PolicyStore) -> Arc<dyn outpost_mcp::FolderGate> {
    Arc::new(PolicyGate { policy })
}

impl outpost_mcp::FolderGate for PolicyGate {
    fn split(&self, folders: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
        let compiled = self.policy.current();
        let mut kept = Vec::new();
        let mut notes = Vec::new();
        let mut dirs = Vec::new();
        for f in folders {
            let real = match std::fs::canonicalize(f) {
                Ok(r) => r,
                Err(e) => {
                    notes.push(format!("{}: {e}", f.display()));
                    continue;
                }
            };
            match std::fs::metadata(&real) {
                Ok(m) if m.is_dir() => dirs.push(real),
                Ok(m) => match compiled.root_block(&real) {
                    Some(why) => notes.push(format!("{}: {why}", real.display())),
                    None if file_links(&m) > 1 => notes.push(format!(
                        "{}: a file with other names (hard links), maybe a protected one",
                        real.display()
                    )),
                    None => kept.push(real),
                },
                Err(e) => notes.push(format!("{}: {e}", real.display())),
            }
        }
        if !dirs.is_empty() {
            let limits = RootLimits::default();
            let plan = compiled.split_folders(&dirs, limits, &mut |dir: &std::path::Path| {
                list_folder(dir, limits.entries + 1)
            });
            kept.extend(plan.roots);
            notes.extend(plan.left_out);
        }
        (kept, notes)
    }

    fn whole(&self, folder: &std::path::Path) -> Option<String> {
        let real = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        self.policy.current().whole_block(&real)
    }
}

#[cfg(unix)]
fn file_links(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    m.nlink()
}

#[cfg(not(unix))]
fn file_links(_m: &std::fs::Metadata) -> u64 {
    1
}

impl Permissions {
    /// The policy's allowed folders as MCP roots, split around everything it denies
    /// ([`outpost_policy::CompiledPolicy::mcp_roots`]): a server that honours roots never
    /// learns of a denied folder, a secret or Outpost's own files as something it may
    /// use. Walks the allowed folders (bounded): call it off the async threads.
    pub fn mcp_roots(&self) -> McpRoots {
        let limits = RootLimits::default();
        let plan = self
            .policy
            .current()
            .mcp_roots(limits, &mut |dir: &std::path::Path| {
                list_folder(dir, limits.entries + 1)
            });
        McpRoots {
            roots: plan
                .roots
                .iter()
                .filter_map(|p| outpost_mcp::Root::from_path(p).ok())
                .collect(),
            folders: plan.roots,
            left_out: plan.left_out,
        }
    }

    /// The policy as the MCP sandbox's gate ([`mcp_gate`]).
    pub fn mcp_gate(&self) -> Arc<dyn outpost_mcp::FolderGate> {
        mcp_gate(self.policy.clone())
    }
}

/// One folder's entries for the roots walk (links not followed), at most `max`.
fn list_folder(dir: &std::path::Path, max: usize) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)?.take(max) {
        let entry = entry?;
        let kind = match entry.file_type()? {
            t if t.is_dir() => EntryKind::Folder,
            t if t.is_file() => EntryKind::File {
                links: links(&entry),
            },
            _ => EntryKind::Other,
        };
        out.push(Entry {
            name: entry.file_name(),
            kind,
        });
    }
    Ok(out)
}

#[cfg(unix)]
fn links(entry: &std::fs::DirEntry) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    // Unreadable: counted as linked, so its folder is not offered whole.
    entry.metadata().map_or(2, |m| m.nlink())
}

#[cfg(not(unix))]
fn links(_entry: &std::fs::DirEntry) -> u64 {
    1
}
/// The name attachments are judged under (a `[[folders]]` rule limited to other tools
/// does not apply to them).
pub const ATTACHMENT: &str = "attach_file";

/// The built-in tools' descriptors (name, schema, hints), in catalogue order.
pub fn builtin_tools() -> Result<Vec<ToolDescriptor>> {
    outpost_tools::builtin_registry()
        .map(|r| r.descriptors())
        .map_err(|e| CoreError::Tools(e.to_string()))
}

/// One session's tool executor.
#[derive(Debug, Clone)]
pub struct Executor {
    dispatcher: Dispatcher,
    /// The grant scope of the latest request: when it changes, the old scope's grants end.
    scope: Arc<std::sync::Mutex<Option<String>>>,
    /// The user's MCP servers, and the tools of theirs on offer now.
    mcp: Option<McpHost>,
    offered: Arc<Mutex<Vec<McpTool>>>,
}

/// The MCP tools' part of the catalogue: each tool's server claims, by Outpost name.
pub type McpClaims = BTreeMap<String, ServerClaims>;

impl Executor {
    /// A dispatcher over the built-in tools except `disabled` (those are neither offered
    /// nor run: a request for one is an unknown tool). Must run inside a tokio runtime.
    ///
    /// With `mcp`, the tools its running servers offer join the catalogue after the
    /// built-ins (see [`Self::refresh_mcp`]).
    pub fn new(
        perms: &Permissions,
        disabled: &[String],
        mcp: Option<McpHost>,
    ) -> Result<(Self, mpsc::UnboundedReceiver<DispatchEvent>)> {
        let mut registry =
            outpost_tools::builtin_registry().map_err(|e| CoreError::Tools(e.to_string()))?;
        for name in disabled {
            registry.remove(name);
        }
        let env = ToolEnv {
            home: perms.home.clone(),
            launcher: Arc::new(DesktopLauncher),
        };
        let (dispatcher, events) =
            Dispatcher::new(registry, env, perms.policy.clone(), perms.broker.clone());
        let executor = Self {
            dispatcher,
            scope: Arc::default(),
            mcp,
            offered: Arc::default(),
        };
        executor.refresh_mcp();
        Ok((executor, events))
    }

    /// The catalogue for the hello: the built-in tools, then the MCP tools.
    pub fn catalogue(&self) -> Vec<ToolDescriptor> {
        self.dispatcher.catalogue()
    }

    /// The MCP host, if the session offers MCP tools.
    pub fn mcp_host(&self) -> Option<&McpHost> {
        self.mcp.as_ref()
    }

    /// The server claims of the MCP tools on offer.
    pub fn mcp_claims(&self) -> McpClaims {
        outpost_sync::lock(&self.offered)
            .iter()
            .map(|t| (t.outpost_name.clone(), mcp::claims(t)))
            .collect()
    }

    /// Takes the MCP servers' tool lists as they are now. Returns true when the tools on
    /// offer changed (then [`Self::catalogue`] is the new catalogue). Tools whose schema
    /// cannot be used are left out with a warning in the log.
    pub fn refresh_mcp(&self) -> bool {
        let Some(host) = &self.mcp else {
            return false;
        };
        let tools = host.tools();
        let mut offered = outpost_sync::lock(&self.offered);
        if *offered == tools {
            return false;
        }
        let runtime = tokio::runtime::Handle::current();
        let (registry, left_out) = mcp::registry(host, &tools, &runtime);
        for why in left_out {
            tracing::warn!("an MCP tool is not offered: {why}");
        }
        for name in self.dispatcher.set_extra_tools(registry) {
            tracing::warn!("the MCP tool {name} has the name of a built-in tool; not offered");
        }
        *offered = tools;
        true
    }

    /// Starts (or deduplicates) a request. `scope` keys "allow for this conversation"
    /// grants (see [`crate::machine::Effect::RunTool`]); a new scope ends the previous one's
    /// grants.
    pub fn run(&self, scope: &str, request: ToolUseRequest) {
        {
            let mut current = outpost_sync::lock(&self.scope);
            if current.as_deref() != Some(scope) {
                if let Some(old) = current.replace(scope.to_owned()) {
                    self.dispatcher.end_conversation(&old);
                }
            }
        }
        self.dispatcher.handle_request(scope, request);
    }

    /// Stops a call.
    pub fn cancel(&self, cancel: &ToolUseCancel) -> bool {
        self.dispatcher.handle_cancel(cancel)
    }

    /// Calls still being decided or run.
    pub fn in_flight(&self) -> usize {
        self.dispatcher.in_flight()
    }
}

/// What the machine needs from a dispatcher event: everything but the resolved paths.
pub fn exec_event(ev: DispatchEvent) -> Option<ExecEvent> {
    Some(match ev {
        DispatchEvent::Result(r) => ExecEvent::Result(r),
        DispatchEvent::Progress(p) => ExecEvent::Progress(p),
        DispatchEvent::Decided {
            request_id,
            outcome,
            by,
            reason,
            decision,
            ..
        } => ExecEvent::Decided {
            request_id,
            allowed: outcome == AuditOutcome::Allowed,
            by,
            reason,
            decision,
        },
        DispatchEvent::Started { request_id } => ExecEvent::Started { request_id },
        DispatchEvent::PolicyWriteFailed {
            request_id,
            decision,
            message,
        } => ExecEvent::PolicyWriteFailed {
            request_id,
            decision,
            message,
        },
        // A later dispatcher event this session does not know yet.
        _ => return None,
    })
}

/// The UI event for a consent broker event.
pub fn consent_event(ev: ConsentEvent) -> UiEvent {
    match ev {
        ConsentEvent::Asked(q) => UiEvent::ConsentRequested(ConsentPrompt {
            consent_id: q.consent_id,
            request_id: q.request_id,
            tool: q.tool,
            server: q.server,
            description: q.description,
            claims: q.claims,
            parameters: q.parameters,
            summary: q.summary,
            paths: q.paths.iter().map(|p| p.display().to_string()).collect(),
            folder: q.folder.map(|p| p.display().to_string()),
            reason: q.reason,
            destructive: q.destructive,
            options: q.options.clone(),
            expires_in_ms: q.expires_in_ms,
        }),
        ConsentEvent::Withdrawn { consent_id, reason } => {
            UiEvent::ConsentWithdrawn { consent_id, reason }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The secrets list decides for files the user gives, by their real path; a pasted
    /// file (a name only) by the list's name rules.
    #[test]
    fn attachments_from_the_secrets_list_are_refused_by_real_path_and_by_name() {
        let home = tempfile::tempdir().unwrap();
        let home_path = std::fs::canonicalize(home.path()).unwrap();
        let perms = Permissions::new(&ToolsConfig {
            policy: PolicySource::InMemory(Policy::default()),
            home: home_path.clone(),
            protected: Vec::new(),
        })
        .unwrap();
        std::fs::create_dir_all(home_path.join(".ssh")).unwrap();
        std::fs::create_dir_all(home_path.join("pictures")).unwrap();
        let key = home_path.join(".ssh/id_ed25519");
        std::fs::write(&key, "secret").unwrap();
        let photo = home_path.join("pictures/otter.png");
        std::fs::write(&photo, "png").unwrap();
        let disguised = home_path.join("pictures/holiday.png");
        std::os::unix::fs::symlink(&key, &disguised).unwrap();

        let why = perms
            .attachment_refused(&key)
            .expect("the SSH key is refused");
        assert!(why.contains("secrets list"), "{why}");
        assert_eq!(perms.attachment_refused(&photo), None);
        assert!(
            perms.attachment_refused(&disguised).is_some(),
            "a link to a secret is judged by what it points to"
        );
        assert!(perms.attachment_name_refused("id_rsa").is_some());
        assert!(perms.attachment_name_refused(".env").is_some());
        assert!(perms.attachment_name_refused("server.pem").is_some());
        assert_eq!(perms.attachment_name_refused("Screenshot.png"), None);
    }
}
