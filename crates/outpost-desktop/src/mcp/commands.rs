//! [`Desktop`]'s tool-server commands (`mcp_*`), and the MCP servers started and stopped
//! with a session.

use std::sync::Arc;

use outpost_policy::Rule;

use crate::contract::{AppEvent, ErrorEvent};
use crate::error::{DesktopError, Result};

use crate::desktop::Desktop;
use outpost_sync::lock;

/// The MCP servers of one session and the task that offers them the policy's allowed
/// folders as roots again whenever the policy changes (`roots/list_changed`).
pub(crate) struct SessionServers {
    pub(crate) host: outpost_mcp::McpHost,
    roots: tokio::task::AbortHandle,
}

impl Desktop {
    /// Starts the enabled servers of `mcp.toml` for a new session (docs/MCP.md, "In the
    /// app"); problems are told to the UI as non-fatal errors. The session's owner keeps
    /// them and ends them with [`Desktop::stop_mcp`].
    pub(crate) async fn start_mcp(&self) -> Option<SessionServers> {
        let roots = self.inner.core.mcp_roots().await;
        for why in &roots.left_out {
            tracing::info!("not offered to MCP servers as a root: {why}");
        }
        // Stdio servers run sandboxed: the allowed folders (as the roots), their own
        // `read`/`write` folders judged by the policy.
        let sandbox = outpost_mcp::SandboxOptions {
            folders: roots.folders,
            gate: self.inner.core.mcp_gate(),
            ..outpost_mcp::SandboxOptions::default()
        };
        let roots = roots.roots;
        let timeout_secs = self
            .inner
            .core
            .permissions()
            .policy()
            .current()
            .policy()
            .consent_timeout_secs;
        let weak = Arc::downgrade(&self.inner);
        let requests = crate::mcp::UiRequests {
            pending: Arc::clone(&self.inner.elicitations),
            emit: Arc::new(move |ev| {
                if let Some(inner) = weak.upgrade() {
                    lock(&inner.live).emit(ev);
                }
            }),
            timeout: std::time::Duration::from_secs(timeout_secs),
        };
        let started = crate::mcp::start(
            &self.inner.paths,
            roots,
            sandbox,
            Arc::new(requests),
            crate::mcp::START_WAIT,
        )
        .await;
        {
            let live = lock(&self.inner.live);
            for message in started.problems {
                live.emit(AppEvent::Error(ErrorEvent {
                    code: "mcp_server_failed".into(),
                    message,
                    fatal: None,
                }));
            }
        }
        let host = started.host?;
        // The allowed folders change in Settings, by an "always" answer or by editing
        // policy.toml: every change of the policy re-offers them, and the host tells
        // its servers when the list differs.
        let roots = self
            .inner
            .core
            .follow_mcp_roots(host.clone())
            .abort_handle();
        Some(SessionServers { host, roots })
    }

    /// Stops every MCP server now (their process groups are killed before this returns):
    /// the app's exit path calls it, so no server outlives the app.
    pub fn stop_tool_servers(&self) {
        let servers = self.inner.sessions.take_servers();
        self.stop_mcp(servers);
    }

    /// Stops a session's MCP servers, if it has any, and closes the forms they asked.
    pub(crate) fn stop_mcp(&self, servers: Option<SessionServers>) {
        if let Some(s) = servers {
            s.roots.abort();
            s.host.shutdown();
        }
        let closed = self.inner.elicitations.close_all();
        let live = lock(&self.inner.live);
        for id in closed {
            live.emit(AppEvent::ElicitationClosed(
                crate::contract::ElicitationClosed { id },
            ));
        }
    }

    fn mcp_host(&self) -> Option<outpost_mcp::McpHost> {
        self.inner.sessions.mcp_host()
    }

    fn mcp_secrets(&self) -> Arc<dyn outpost_mcp::SecretStore> {
        outpost_mcp::secrets::from_env()
    }

    /// Writes `draft` with `save` (adding or updating the server), in this session's host
    /// and with the keyring; the server's info with its rule.
    fn mcp_save(
        &self,
        draft: &crate::contract::McpServerDraft,
        save: fn(
            &crate::paths::Paths,
            Option<&outpost_mcp::McpHost>,
            &dyn outpost_mcp::SecretStore,
            &crate::contract::McpServerDraft,
        ) -> Result<crate::contract::McpServerInfo>,
    ) -> Result<crate::contract::McpServerInfo> {
        save(
            &self.inner.paths,
            self.mcp_host().as_ref(),
            &*self.mcp_secrets(),
            draft,
        )
        .map(|i| self.with_rule(i))
    }

    /// A server's rule in the policy (`[mcp_servers]`; absent is ask).
    fn mcp_rule(&self, name: &str) -> crate::contract::ToolRule {
        let policy = self.inner.core.permissions().policy().current();
        match policy.policy().mcp_servers.get(name) {
            Some(Rule::Allow) => crate::contract::ToolRule::Allow,
            Some(Rule::Deny) => crate::contract::ToolRule::Deny,
            _ => crate::contract::ToolRule::Ask,
        }
    }

    /// The sandbox's inputs now: the live session's allowed folders, else the policy's
    /// (walked: bounded), and the policy as the gate.
    fn mcp_sandbox(&self, host: Option<&outpost_mcp::McpHost>) -> outpost_mcp::SandboxOptions {
        let perms = self.inner.core.permissions();
        outpost_mcp::SandboxOptions {
            folders: host.map_or_else(|| perms.mcp_roots().folders, |h| h.folders()),
            gate: perms.mcp_gate(),
            ..outpost_mcp::SandboxOptions::default()
        }
    }

    /// Fills in what the Desktop knows of a server: its rule in the policy, what it may
    /// touch (its sandbox) and its sign-in.
    fn with_rule(&self, info: crate::contract::McpServerInfo) -> crate::contract::McpServerInfo {
        let host = self.mcp_host();
        let cfg = outpost_mcp::McpConfig::load(&crate::mcp::config_file(&self.inner.paths)).ok();
        let opts = self.mcp_sandbox(host.as_ref());
        self.fill(info, cfg.as_ref(), host.as_ref(), &opts)
    }

    /// [`Self::with_rule`] with the config, host and sandbox options read once for a list.
    fn fill(
        &self,
        mut info: crate::contract::McpServerInfo,
        cfg: Option<&outpost_mcp::McpConfig>,
        host: Option<&outpost_mcp::McpHost>,
        opts: &outpost_mcp::SandboxOptions,
    ) -> crate::contract::McpServerInfo {
        info.rule = self.mcp_rule(&info.name);
        if let Some(server) = cfg.and_then(|c| c.servers.get(&info.name)) {
            info.sandbox = crate::mcp::sandbox_of(&info.name, server, host, opts);
            info.sign_in = crate::mcp::sign_in_of(&info.name, server, host, || {
                self.inner
                    .mcp_sign_ins
                    .stored(&info.name, &*self.mcp_secrets())
            });
        }
        info
    }

    /// `mcp_servers_list`.
    pub fn mcp_servers(&self) -> Result<Vec<crate::contract::McpServerInfo>> {
        let host = self.mcp_host();
        let cfg = outpost_mcp::McpConfig::load(&crate::mcp::config_file(&self.inner.paths)).ok();
        let opts = self.mcp_sandbox(host.as_ref());
        Ok(crate::mcp::list(&self.inner.paths, host.as_ref())?
            .into_iter()
            .map(|i| self.fill(i, cfg.as_ref(), host.as_ref(), &opts))
            .collect())
    }

    /// `mcp_servers_set_rule`: the server's rule in the policy (`[mcp_servers]`): allow,
    /// ask (removes the entry: the default) or deny. Takes effect at the next call.
    pub fn mcp_server_set_rule(
        &self,
        name: &str,
        rule: crate::contract::ToolRule,
    ) -> Result<crate::contract::McpServerInfo> {
        let info = crate::mcp::list(&self.inner.paths, self.mcp_host().as_ref())?
            .into_iter()
            .find(|i| i.name == name)
            .ok_or_else(|| {
                DesktopError::NotFound(format!("There is no tool server named '{name}'."))
            })?;
        self.inner
            .core
            .permissions()
            .policy()
            .update(|p| match rule {
                crate::contract::ToolRule::Allow => {
                    p.mcp_servers.insert(name.to_owned(), Rule::Allow);
                }
                crate::contract::ToolRule::Deny => {
                    p.mcp_servers.insert(name.to_owned(), Rule::Deny);
                }
                crate::contract::ToolRule::Ask => {
                    p.mcp_servers.remove(name);
                }
            })?;
        Ok(self.with_rule(info))
    }

    /// `mcp_servers_tools`: a server's tools with their rules (the server may be started
    /// on its own to list them: within the app's tokio runtime).
    pub async fn mcp_server_tools(
        &self,
        name: &str,
        refresh: bool,
    ) -> Result<crate::contract::McpServerTools> {
        let host = self.mcp_host();
        let policy = self.inner.core.permissions().policy();
        self.inner
            .mcp_tools
            .tools(
                &self.inner.paths,
                host.as_ref(),
                policy,
                name,
                refresh,
                crate::mcp::START_WAIT,
            )
            .await
    }

    /// `mcp_servers_set_tool_rule`: one tool's rule (`[tools]`), or none to follow its
    /// server's. Takes effect at the next call.
    pub fn mcp_server_set_tool_rule(
        &self,
        name: &str,
        tool: &str,
        rule: Option<crate::contract::ToolRule>,
    ) -> Result<crate::contract::McpServerTools> {
        self.inner.mcp_tools.set_rule(
            &self.inner.paths,
            self.mcp_host().as_ref(),
            self.inner.core.permissions().policy(),
            name,
            tool,
            rule,
        )
    }

    /// `mcp_servers_add`. In a live session an enabled server starts at once: call it
    /// within the app's tokio runtime (as `mcp_servers_set_enabled`).
    pub fn mcp_server_add(
        &self,
        draft: &crate::contract::McpServerDraft,
    ) -> Result<crate::contract::McpServerInfo> {
        self.mcp_save(draft, crate::mcp::add)
    }

    /// `mcp_servers_get`, with what the server may touch as it would start now.
    pub fn mcp_server_get(&self, name: &str) -> Result<crate::contract::McpServerDraft> {
        let mut draft = crate::mcp::get(&self.inner.paths, name)?;
        if let Ok(cfg) = outpost_mcp::McpConfig::load(&crate::mcp::config_file(&self.inner.paths))
            && let Some(server) = cfg.servers.get(name)
        {
            let opts = self.mcp_sandbox(self.mcp_host().as_ref());
            draft.reach = crate::mcp::sandbox_of(name, server, None, &opts);
        }
        Ok(draft)
    }

    /// `mcp_servers_update`. In a live session the server restarts with its new settings:
    /// call it within the app's tokio runtime.
    pub fn mcp_server_update(
        &self,
        draft: &crate::contract::McpServerDraft,
    ) -> Result<crate::contract::McpServerInfo> {
        self.mcp_save(draft, crate::mcp::update)
    }

    /// `mcp_servers_restart`: within the app's tokio runtime.
    pub fn mcp_server_restart(&self, name: &str) -> Result<crate::contract::McpServerInfo> {
        crate::mcp::restart(&self.inner.paths, self.mcp_host().as_ref(), name)
            .map(|i| self.with_rule(i))
    }

    /// `mcp_servers_set_enabled`.
    pub fn mcp_server_set_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<crate::contract::McpServerInfo> {
        crate::mcp::set_enabled(&self.inner.paths, self.mcp_host().as_ref(), name, enabled)
            .map(|i| self.with_rule(i))
    }

    /// `mcp_servers_trust`: the user confirms a server added or changed in `mcp.toml`
    /// outside Outpost; in a live session an enabled one starts at once (within the app's
    /// tokio runtime).
    pub fn mcp_server_trust(&self, name: &str) -> Result<crate::contract::McpServerInfo> {
        crate::mcp::trust(&self.inner.paths, self.mcp_host().as_ref(), name)
            .map(|i| self.with_rule(i))
    }

    /// `mcp_servers_sign_in`: the OAuth sign-in in the user's browser, waiting for it up
    /// to `within`; in a live session the server starts again with the new tokens.
    pub async fn mcp_server_sign_in(
        &self,
        name: &str,
        within: std::time::Duration,
    ) -> Result<crate::contract::McpServerInfo> {
        let host = self.mcp_host();
        let info = crate::mcp::sign_in(
            &self.inner.paths,
            host.as_ref(),
            self.mcp_secrets(),
            &self.inner.mcp_sign_ins,
            name,
            within,
        )
        .await?;
        self.inner.mcp_sign_ins.set(name, true);
        Ok(self.with_rule(info))
    }

    /// `mcp_servers_sign_in_cancel`: ends the sign-in of `name` that waits for the browser
    /// (its `mcp_servers_sign_in` fails with `cancelled`); whether one was waiting (none:
    /// nothing to do).
    pub fn mcp_server_sign_in_cancel(&self, name: &str) -> bool {
        let cancelled = self.inner.mcp_sign_ins.cancel(name);
        if cancelled {
            tracing::info!(server = %name, "sign-in cancelled by the user");
        }
        cancelled
    }

    /// `mcp_servers_sign_out`: revokes and deletes the server's tokens.
    pub async fn mcp_server_sign_out(&self, name: &str) -> Result<crate::contract::McpServerInfo> {
        let host = self.mcp_host();
        let info =
            crate::mcp::sign_out(&self.inner.paths, host.as_ref(), &self.mcp_secrets(), name)
                .await?;
        self.inner.mcp_sign_ins.set(name, false);
        Ok(self.with_rule(info))
    }

    /// `mcp_servers_remove`: an HTTP server's sign-in is revoked first.
    pub async fn mcp_server_remove(&self, name: &str) -> Result<()> {
        crate::mcp::revoke_sign_in(&self.inner.paths, &self.mcp_secrets(), name).await;
        self.inner.mcp_sign_ins.set(name, false);
        crate::mcp::remove(
            &self.inner.paths,
            self.mcp_host().as_ref(),
            &*self.mcp_secrets(),
            name,
        )
    }

    /// `mcp_servers_log`.
    pub fn mcp_server_log(&self, name: &str) -> Result<String> {
        crate::mcp::log(&self.inner.paths, name)
    }

    /// `mcp_elicitation_answer`.
    pub fn mcp_elicitation_answer(
        &self,
        id: &str,
        action: crate::contract::ElicitationAction,
        content: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<()> {
        self.inner.elicitations.answer(id, action, content)
    }

    /// `mcp_servers_import_preview`, with what each server would touch: its needs as
    /// derived from its command (npx's cache and the network, say), adjustable after the
    /// import like any server's.
    pub fn mcp_import_preview(&self, text: &str) -> Result<crate::contract::McpImportPreview> {
        let mut preview = crate::mcp::import_preview(&self.inner.paths, text)?;
        let parsed = outpost_mcp::import::claude_desktop(text).ok();
        let opts = self.mcp_sandbox(self.mcp_host().as_ref());
        for draft in &mut preview.servers {
            let server = parsed
                .as_ref()
                .and_then(|p| p.servers.iter().find(|(n, _)| *n == draft.name))
                .map(|(_, s)| s);
            if let Some(server) = server {
                draft.reach = crate::mcp::sandbox_of(&draft.name, server, None, &opts);
            }
        }
        Ok(preview)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::desktop::Notifier;
    use crate::paths::Paths;
    use outpost_core::Core;
    use outpost_policy::{FolderAccess, FolderRule};

    #[tokio::test]
    async fn a_change_of_the_allowed_folders_reaches_the_mcp_host() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir_all(&a).unwrap();
        let core = Core::open(
            Some(dir.path().join("data")),
            outpost_core::ToolsConfig {
                policy: outpost_core::PolicySource::InMemory(outpost_policy::Policy::default()),
                home: dir.path().to_path_buf(),
                protected: Vec::new(),
            },
        )
        .unwrap();
        let host = outpost_mcp::McpHost::new(
            outpost_mcp::HostOptions::new(
                outpost_mcp::ConnectOptions::default(),
                Arc::new(outpost_mcp::MemorySecrets::default()),
            ),
            core.mcp_roots().await.roots,
        );
        assert!(host.roots().is_empty());
        let task = core.follow_mcp_roots(host.clone());
        let folder = |path: &std::path::Path, access| FolderRule {
            path: path.display().to_string(),
            access,
            tools: None,
        };
        core.permissions()
            .policy()
            .update(|p| {
                p.folders = vec![
                    folder(&a, FolderAccess::Allow),
                    folder(&dir.path().join("b"), FolderAccess::Deny),
                ];
            })
            .unwrap();
        let want = vec![outpost_mcp::Root::from_path(&a).unwrap()];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while host.roots() != want {
            assert!(std::time::Instant::now() < deadline, "{:?}", host.roots());
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        core.permissions()
            .policy()
            .update(|p| p.folders.clear())
            .unwrap();
        while !host.roots().is_empty() {
            assert!(std::time::Instant::now() < deadline, "{:?}", host.roots());
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        task.abort();
    }

    /// A throw-away folder and the app's paths in it.
    fn test_paths() -> (tempfile::TempDir, Paths) {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            config_dir: dir.path().join("config"),
            data_dir: dir.path().join("data"),
        };
        (dir, paths)
    }

    /// Whether `pid` has ended (gone, or a zombie nobody reaped yet).
    fn ended(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    }

    /// Issue 30, finding 12 (the app's exit path): stopping the tool servers kills each
    /// server's process group before it returns, helpers included, with no task left to
    /// run (the runtime is blocked here, as it may be gone when the app exits).
    #[tokio::test]
    async fn stopping_the_tool_servers_ends_their_groups_at_once() {
        let (dir, paths) = test_paths();
        std::fs::create_dir_all(&paths.config_dir).unwrap();
        // Not in `dir` itself, which holds Outpost's own folders (no sandbox reaches them).
        let pids = dir.path().join("pids");
        std::fs::create_dir_all(&pids).unwrap();
        let (server, helper) = (pids.join("server.pid"), pids.join("helper.pid"));
        let everything = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        );
        let script = format!(
            "echo $$ > '{}'; sleep 1000 & echo $! > '{}'; exec node '{}' stdio",
            server.display(),
            helper.display(),
            everything.display()
        );
        std::fs::write(
            paths.config_dir.join("mcp.toml"),
            // Sandboxed: the inline script's needs given as a user would (its pid files'
            // folder to write, the server's package to read).
            format!(
                "[servers.helper]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n\
                 write = [{}]\nread = [{}]\n",
                toml::Value::String(script),
                toml::Value::String(pids.display().to_string()),
                toml::Value::String(everything.ancestors().nth(4).unwrap().display().to_string()),
            ),
        )
        .unwrap();
        let desktop = Desktop::open(
            paths,
            Arc::new(crate::secrets::MemorySecrets::default()),
            Arc::new(Quiet),
        )
        .unwrap();
        let servers = desktop.start_mcp().await.unwrap();
        let host = servers.host.clone();
        desktop.inner.sessions.begin(Some(servers), None);
        host.wait_running("helper", std::time::Duration::from_secs(30))
            .await
            .unwrap();
        let pids = [
            std::fs::read_to_string(&server).unwrap(),
            std::fs::read_to_string(&helper).unwrap(),
        ];
        assert!(pids.iter().all(|p| !ended(p)));
        desktop.stop_tool_servers();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !pids.iter().all(|p| ended(p)) {
            assert!(std::time::Instant::now() < deadline, "{pids:?} still run");
            // Blocking: no task of the runtime runs meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[derive(Debug)]
    struct Quiet;
    impl Notifier for Quiet {
        fn notify(&self, _title: &str, _body: &str) {}
    }

    #[tokio::test]
    async fn a_tool_servers_rule_is_written_to_the_policy_and_listed() {
        let (_dir, paths) = test_paths();
        let desktop = Desktop::open(
            paths.clone(),
            Arc::new(crate::secrets::MemorySecrets::default()),
            Arc::new(Quiet),
        )
        .unwrap();
        let draft = crate::contract::McpServerDraft {
            command: "npx".into(),
            ..crate::mcp::empty_draft("files", true)
        };
        let added = desktop.mcp_server_add(&draft).unwrap();
        assert_eq!(added.rule, crate::contract::ToolRule::Ask);
        let set = |rule| desktop.mcp_server_set_rule("files", rule).unwrap().rule;
        assert_eq!(
            set(crate::contract::ToolRule::Allow),
            crate::contract::ToolRule::Allow
        );
        let file = std::fs::read_to_string(paths.policy_file()).unwrap();
        let policy = outpost_policy::parse_policy(&paths.policy_file(), &file).unwrap();
        assert_eq!(policy.mcp_servers.get("files"), Some(&Rule::Allow));
        assert_eq!(
            set(crate::contract::ToolRule::Deny),
            crate::contract::ToolRule::Deny
        );
        assert_eq!(
            desktop.mcp_servers().unwrap()[0].rule,
            crate::contract::ToolRule::Deny
        );
        // Ask is the default: the entry goes.
        assert_eq!(
            set(crate::contract::ToolRule::Ask),
            crate::contract::ToolRule::Ask
        );
        let file = std::fs::read_to_string(paths.policy_file()).unwrap();
        let policy = outpost_policy::parse_policy(&paths.policy_file(), &file).unwrap();
        assert!(!policy.mcp_servers.contains_key("files"));
        assert_eq!(
            desktop
                .mcp_server_set_rule("nope", crate::contract::ToolRule::Allow)
                .unwrap_err()
                .code(),
            "not_found"
        );
    }

    /// The pane's list says an HTTP server's sign-in, as each command's answer does (the
    /// list used to leave it out, so the pane lost "Sign in" at its next refresh).
    #[tokio::test]
    async fn the_list_carries_an_http_server_s_sign_in() {
        let (_dir, paths) = test_paths();
        std::fs::create_dir_all(&paths.config_dir).unwrap();
        let desktop = Desktop::open(
            paths,
            Arc::new(crate::secrets::MemorySecrets::default()),
            Arc::new(Quiet),
        )
        .unwrap();
        let draft = crate::contract::McpServerDraft {
            url: "http://127.0.0.1:9/mcp".into(),
            ..crate::mcp::empty_draft("web", true)
        };
        let added = desktop.mcp_server_add(&draft).unwrap();
        let not_yet = Some(crate::contract::McpSignIn::NotSignedIn);
        assert_eq!(added.sign_in, not_yet);
        assert_eq!(desktop.mcp_servers().unwrap()[0].sign_in, not_yet);
    }

    /// Issue 28: the pane's list and form carry what a server may touch (its sandbox as
    /// planned: its program, the folders its settings name, the network) and its sandbox
    /// settings, written to mcp.toml; bad settings are refused and nothing is written.
    #[tokio::test]
    async fn the_pane_shows_and_keeps_a_server_s_sandbox() {
        use crate::contract::{
            McpAccess, McpFolderAccess, McpGrantKind, McpNetwork, McpSandboxState,
        };
        let (dir, paths) = test_paths();
        std::fs::create_dir_all(&paths.config_dir).unwrap();
        let refs = dir.path().join("refs");
        let out = dir.path().join("out");
        for d in [&refs, &out] {
            std::fs::create_dir_all(d).unwrap();
        }
        let everything = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        );
        let desktop = Desktop::open(
            paths.clone(),
            Arc::new(crate::secrets::MemorySecrets::default()),
            Arc::new(Quiet),
        )
        .unwrap();
        let draft = crate::contract::McpServerDraft {
            command: "node".into(),
            args: vec![everything.display().to_string(), "stdio".into()],
            network: McpNetwork::Off,
            folders: McpFolderAccess::Read,
            read: vec![refs.display().to_string()],
            write: vec![out.display().to_string()],
            ..crate::mcp::empty_draft("ev", true)
        };
        let added = desktop.mcp_server_add(&draft).unwrap();
        let sandbox = added.sandbox.unwrap();
        if sandbox.state == McpSandboxState::Refused {
            // A kernel without Landlock: the pane says why and how to agree.
            assert!(sandbox.why.unwrap().contains("Landlock"));
        } else {
            assert_eq!(sandbox.state, McpSandboxState::Sandboxed);
            assert!(!sandbox.network && sandbox.network_why.contains("off in mcp.toml"));
            let has = |path: &std::path::Path, access, kind| {
                let path = path.canonicalize().unwrap().display().to_string();
                sandbox
                    .grants
                    .iter()
                    .any(|g| g.path == path && g.access == access && g.kind == kind)
            };
            assert!(
                has(&refs, McpAccess::Read, McpGrantKind::Extra),
                "{sandbox:?}"
            );
            assert!(
                has(&out, McpAccess::ReadWrite, McpGrantKind::Extra),
                "{sandbox:?}"
            );
            assert!(
                sandbox
                    .grants
                    .iter()
                    .any(|g| g.kind == McpGrantKind::Program && g.path.ends_with("node_modules")),
                "{sandbox:?}"
            );
        }
        let listed = desktop.mcp_servers().unwrap();
        assert!(listed[0].sandbox.is_some());
        let got = desktop.mcp_server_get("ev").unwrap();
        assert_eq!(
            (
                got.network,
                got.folders,
                got.read.clone(),
                got.write.clone()
            ),
            (
                draft.network,
                draft.folders,
                draft.read.clone(),
                draft.write.clone()
            )
        );
        assert!(got.reach.is_some());
        let file = std::fs::read_to_string(paths.config_dir.join("mcp.toml")).unwrap();
        assert!(
            file.contains("network = false") && file.contains("folders = \"read\""),
            "{file}"
        );
        // Bad settings: a relative path; folders for an HTTP server.
        let bad = crate::contract::McpServerDraft {
            read: vec!["relative/x".into()],
            ..draft.clone()
        };
        assert_eq!(
            desktop.mcp_server_update(&bad).unwrap_err().code(),
            "invalid_argument"
        );
        let web = crate::contract::McpServerDraft {
            url: "http://127.0.0.1:9/mcp".into(),
            read: vec![refs.display().to_string()],
            ..crate::mcp::empty_draft("web", true)
        };
        assert_eq!(
            desktop.mcp_server_add(&web).unwrap_err().code(),
            "invalid_argument"
        );
        assert_eq!(
            std::fs::read_to_string(paths.config_dir.join("mcp.toml")).unwrap(),
            file
        );
    }
}
