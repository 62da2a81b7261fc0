//! [`McpHost`]: every configured server under supervision.
//!
//! One task per enabled server starts it, reads its tools (bounded: see
//! [`Connection::list_tools`]), re-reads them on `notifications/tools/list_changed` (at
//! most once per [`HostOptions::relist_interval`]), and restarts it with exponential backoff when it
//! stops or fails to start. The state of every server lives in one place, a
//! [`HostSnapshot`] that callers watch ([`McpHost::subscribe`]): status, last error, tools
//! (with a version that changes whenever the list does), pid and log file. Calls go to the
//! server's current connection; a call made while the server is starting waits for it
//! (within the call's timeout), a call made while it waits to restart fails at once with
//! the last error.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{McpConfig, ServerConfig, check_server_name};
use crate::connection::{CallOptions, CallOutcome, ConnectOptions, Connection, McpTool};
use crate::error::{McpError, Result};
use crate::oauth::SignInState;
use crate::requests::Root;
use crate::sandbox::{FolderAccess, Reach};
use crate::secrets::SecretStore;

/// How the host runs servers.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Log folder, timeouts, elicitation/sampling handler, capabilities and the sandbox.
    /// Its `roots` is ignored: the host's own list ([`McpHost::set_roots`]) is offered; its
    /// `sandbox.folders` are the folders at first, then [`McpHost::set_folders`]'s.
    pub connect: ConnectOptions,
    /// Where `{ secret = ... }` values are read.
    pub secrets: Arc<dyn SecretStore>,
    /// First restart delay; doubles after each failure in a row.
    pub backoff_initial: Duration,
    /// Longest restart delay.
    pub backoff_max: Duration,
    /// A session that lasted this long resets the failure count.
    pub stable_after: Duration,
    /// Shortest time between two `tools/list` of one server after
    /// `notifications/tools/list_changed`: notifications meanwhile fold into the next
    /// list, so a server that floods them is listed at this pace at most.
    pub relist_interval: Duration,
}

impl HostOptions {
    /// Defaults: restart after 1 s, doubling up to 60 s; a minute of uptime resets.
    pub fn new(connect: ConnectOptions, secrets: Arc<dyn SecretStore>) -> Self {
        Self {
            connect,
            secrets,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            stable_after: Duration::from_secs(60),
            relist_interval: Duration::from_secs(1),
        }
    }
}

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerStatus {
    /// Spawning or connecting, handshake, first `tools/list`.
    Starting,
    /// Ready for calls.
    Running,
    /// Stopped or failed to start; the next attempt is in `retry_in`.
    Restarting {
        /// Failures in a row so far.
        attempt: u32,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// Disabled in the config: never started.
    Disabled,
    /// Added or changed in `mcp.toml` outside Outpost: not started until the user
    /// confirms it ([`crate::trust`]).
    Unconfirmed,
    /// Not started: the kernel cannot sandbox it and the user has not agreed to run it
    /// unsandboxed (`sandbox = "if-available"`); `last_error` says so.
    NoSandbox,
    /// Stopped by the caller.
    Stopped,
}

/// One server's state.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerState {
    /// Where it is.
    pub status: ServerStatus,
    /// The last failure (start error or how the last session ended), if any.
    pub last_error: Option<String>,
    /// Its tools (empty unless it has been running).
    pub tools: Arc<Vec<McpTool>>,
    /// Changes whenever `tools` does.
    pub tools_version: u64,
    /// `notifications/tools/list_changed` handled in the current session.
    pub list_changed: u64,
    /// Process id of a running stdio server.
    pub pid: Option<u32>,
    /// The negotiated MCP version while running.
    pub protocol_version: Option<String>,
    /// The stderr log of a stdio server.
    pub log_file: Option<PathBuf>,
    /// Sessions started so far (the first one included).
    pub starts: u32,
    /// What a stdio server may touch, as planned at its last start (its sandbox).
    pub reach: Option<Arc<Reach>>,
    /// An HTTP server's OAuth sign-in as its last start or call found it (`crate::oauth`):
    /// running with one, or failed for want of one (never signed in, or the stored one no
    /// longer works). `None`: it runs (or last ran) without one, or nothing is known yet.
    pub sign_in: Option<SignInState>,
}

impl ServerState {
    fn new(status: ServerStatus, log_file: Option<PathBuf>) -> Self {
        Self {
            status,
            last_error: None,
            tools: Arc::new(Vec::new()),
            tools_version: 0,
            list_changed: 0,
            pid: None,
            protocol_version: None,
            log_file,
            starts: 0,
            reach: None,
            sign_in: None,
        }
    }
}

/// Every server's state, by name.
pub type HostSnapshot = Arc<BTreeMap<String, ServerState>>;

struct Slot {
    stop: CancellationToken,
    conn: watch::Receiver<Option<Arc<Connection>>>,
}

struct Inner {
    opts: HostOptions,
    /// Parent of every server's stop token; cancelled when the last [`McpHost`] is dropped.
    all: CancellationToken,
    roots: watch::Sender<Vec<Root>>,
    /// The allowed folders sandboxed servers may reach (split around what the policy
    /// denies); a change restarts the sandboxed servers that use them.
    folders: watch::Sender<Vec<PathBuf>>,
    state: watch::Sender<HostSnapshot>,
    servers: Mutex<HashMap<String, Slot>>,
}

impl Inner {
    fn update(&self, name: &str, f: impl FnOnce(&mut ServerState)) {
        self.state.send_modify(|snap| {
            let map = Arc::make_mut(snap);
            if let Some(s) = map.get_mut(name) {
                f(s);
            }
        });
    }
}

/// The MCP host. Cheap to clone; all clones share the servers. Dropping the last clone
/// stops every server (the supervisors alone do not keep them running).
#[derive(Clone)]
pub struct McpHost {
    inner: Arc<Inner>,
    _stop_all: Arc<tokio_util::sync::DropGuard>,
}

impl std::fmt::Debug for McpHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHost")
            .field(
                "servers",
                &self.inner.state.borrow().keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl McpHost {
    /// A host with no servers, offering `roots`.
    pub fn new(opts: HostOptions, roots: Vec<Root>) -> Self {
        let all = CancellationToken::new();
        Self {
            _stop_all: Arc::new(all.clone().drop_guard()),
            inner: Arc::new(Inner {
                all,
                folders: watch::Sender::new(opts.connect.sandbox.folders.clone()),
                opts,
                roots: watch::Sender::new(roots),
                state: watch::Sender::new(Arc::new(BTreeMap::new())),
                servers: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Starts every server of `config` (disabled ones are listed as [`ServerStatus::Disabled`]).
    pub fn start_all(&self, config: &McpConfig) -> Result<()> {
        for (name, server) in &config.servers {
            self.start(name, server.clone())?;
        }
        Ok(())
    }

    /// Starts (or restarts with a new config) one server under supervision. Returns at
    /// once; watch [`Self::subscribe`] or use [`Self::wait_running`].
    pub fn start(&self, name: &str, config: ServerConfig) -> Result<()> {
        check_server_name(name)?;
        self.check_collision(name)?;
        self.stop_slot(name);
        let log_file = match (&config.transport, &self.inner.opts.connect.log_dir) {
            (crate::Transport::Stdio { .. }, Some(dir)) => Some(dir.join(format!("{name}.log"))),
            _ => None,
        };
        let status = if config.enabled {
            ServerStatus::Starting
        } else {
            ServerStatus::Disabled
        };
        self.inner.state.send_modify(|snap| {
            Arc::make_mut(snap).insert(name.to_owned(), ServerState::new(status, log_file));
        });
        if !config.enabled {
            return Ok(());
        }
        let stop = self.inner.all.child_token();
        let (conn_tx, conn_rx) = watch::channel(None);
        outpost_sync::lock(&self.inner.servers).insert(
            name.to_owned(),
            Slot {
                stop: stop.clone(),
                conn: conn_rx,
            },
        );
        tokio::spawn(supervise(
            self.inner.clone(),
            name.to_owned(),
            config,
            stop,
            conn_tx,
        ));
        Ok(())
    }

    /// Lists `name` as [`ServerStatus::Unconfirmed`] (with `why` as its last error)
    /// without starting it; a running one is stopped.
    pub fn hold(&self, name: &str, why: String) -> Result<()> {
        check_server_name(name)?;
        self.check_collision(name)?;
        self.stop_slot(name);
        self.inner.state.send_modify(|snap| {
            let mut state = ServerState::new(ServerStatus::Unconfirmed, None);
            state.last_error = Some(why);
            Arc::make_mut(snap).insert(name.to_owned(), state);
        });
        Ok(())
    }

    /// Refuses `name` when a server the host knows could give its tools the same Outpost
    /// names (`NAME` and `NAME_`: [`crate::config::colliding_server`]).
    fn check_collision(&self, name: &str) -> Result<()> {
        let snapshot = self.snapshot();
        let known: Vec<String> = snapshot.keys().cloned().collect();
        let with_underscore = format!("{name}_");
        let clash = match crate::config::colliding_server(name, &known) {
            Some(shorter) => Some((shorter.to_owned(), name.to_owned())),
            None => known
                .iter()
                .find(|k| **k == with_underscore)
                .map(|longer| (name.to_owned(), longer.clone())),
        };
        match clash {
            Some((shorter, longer)) => Err(McpError::invalid(
                "server name",
                crate::config::collision_message(&shorter, &longer),
            )),
            None => Ok(()),
        }
    }

    fn stop_slot(&self, name: &str) -> bool {
        let slot = outpost_sync::lock(&self.inner.servers).remove(name);
        match slot {
            Some(s) => {
                s.stop.cancel();
                if let Some(c) = s.conn.borrow().as_ref() {
                    c.close();
                }
                true
            }
            None => false,
        }
    }

    /// Stops a server (it stays listed as [`ServerStatus::Stopped`]).
    pub fn stop(&self, name: &str) -> Result<()> {
        if !self.inner.state.borrow().contains_key(name) {
            return Err(McpError::UnknownServer(name.to_owned()));
        }
        self.stop_slot(name);
        self.inner.update(name, |s| {
            s.status = ServerStatus::Stopped;
            s.pid = None;
            s.tools = Arc::new(Vec::new());
            s.tools_version += 1;
        });
        Ok(())
    }

    /// Stops a server and forgets it.
    pub fn remove(&self, name: &str) -> Result<()> {
        self.stop_slot(name);
        let mut found = false;
        self.inner.state.send_modify(|snap| {
            found = Arc::make_mut(snap).remove(name).is_some();
        });
        if found {
            Ok(())
        } else {
            Err(McpError::UnknownServer(name.to_owned()))
        }
    }

    /// Stops every server.
    pub fn shutdown(&self) {
        let names: Vec<String> = self.inner.state.borrow().keys().cloned().collect();
        for n in names {
            let _ = self.stop(&n);
        }
    }

    /// Replaces the roots offered to servers; running servers get
    /// `notifications/roots/list_changed`.
    pub fn set_roots(&self, roots: Vec<Root>) {
        self.inner.roots.send_replace(roots);
    }

    /// The roots offered now.
    pub fn roots(&self) -> Vec<Root> {
        self.inner.roots.borrow().clone()
    }

    /// Replaces the allowed folders sandboxed servers may reach. A sandbox cannot be
    /// widened or narrowed once a process runs in it, so every running sandboxed server
    /// that uses the allowed folders (`folders` not `"none"`) is restarted with the new
    /// ones: a folder the user took back is out of its reach at once, a new one within
    /// its reach. Calls in flight on such a server fail as when it stops.
    pub fn set_folders(&self, folders: Vec<PathBuf>) {
        self.inner.folders.send_if_modified(|f| {
            if *f == folders {
                return false;
            }
            *f = folders;
            true
        });
    }

    /// The allowed folders sandboxed servers may reach now.
    pub fn folders(&self) -> Vec<PathBuf> {
        self.inner.folders.borrow().clone()
    }

    /// Every server's state now, and every change after (the one source of truth).
    pub fn subscribe(&self) -> watch::Receiver<HostSnapshot> {
        self.inner.state.subscribe()
    }

    /// Every server's state now.
    pub fn snapshot(&self) -> HostSnapshot {
        self.inner.state.borrow().clone()
    }

    /// The tools of every running server, by server name then tool order.
    pub fn tools(&self) -> Vec<McpTool> {
        self.snapshot()
            .values()
            .flat_map(|s| s.tools.iter().cloned())
            .collect()
    }

    /// The tool with this Outpost name, if a running server offers it.
    pub fn find_tool(&self, outpost_name: &str) -> Option<McpTool> {
        let server = crate::naming::server_of(outpost_name)?;
        let snap = self.snapshot();
        snap.get(server)?
            .tools
            .iter()
            .find(|t| t.outpost_name == outpost_name)
            .cloned()
    }

    /// Waits until `name` is running (then `Ok`), or fails to start or stops (then the
    /// error), or `within` passes.
    pub async fn wait_running(&self, name: &str, within: Duration) -> Result<()> {
        let mut rx = self.subscribe();
        let verdict = tokio::time::timeout(within, async {
            loop {
                let state = rx.borrow_and_update().get(name).cloned();
                match state {
                    None => return Err(McpError::UnknownServer(name.to_owned())),
                    Some(s) => match s.status {
                        ServerStatus::Running => return Ok(()),
                        ServerStatus::Starting => {}
                        other => {
                            return Err(McpError::NotRunning {
                                server: name.to_owned(),
                                message: describe(&other, s.last_error.as_deref()),
                            });
                        }
                    },
                }
                if rx.changed().await.is_err() {
                    return Err(McpError::UnknownServer(name.to_owned()));
                }
            }
        })
        .await;
        verdict.unwrap_or_else(|_| {
            Err(McpError::NotRunning {
                server: name.to_owned(),
                message: format!("still starting after {} ms", within.as_millis()),
            })
        })
    }

    async fn connection(&self, server: &str, opts: &CallOptions) -> Result<Arc<Connection>> {
        let mut conn = outpost_sync::lock(&self.inner.servers)
            .get(server)
            .map(|s| s.conn.clone())
            .ok_or_else(|| self.not_running(server))?;
        let wait = async {
            loop {
                if let Some(c) = conn.borrow_and_update().clone()
                    && c.closed().borrow().is_none()
                {
                    return Ok(c);
                }
                let starting = self.snapshot().get(server).is_some_and(|s| {
                    s.status == ServerStatus::Starting || s.status == ServerStatus::Running
                });
                if !starting {
                    return Err(self.not_running(server));
                }
                tokio::select! {
                    r = conn.changed() => if r.is_err() { return Err(self.not_running(server)) },
                    // Status changes (a failed start) arrive on the snapshot, not `conn`.
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        };
        tokio::select! {
            r = tokio::time::timeout(opts.timeout, wait) => r.unwrap_or_else(|_| Err(McpError::NotRunning {
                server: server.to_owned(),
                message: format!("still starting after {} ms", opts.timeout.as_millis()),
            })),
            _ = opts.cancel.cancelled() => Err(McpError::Cancelled { server: server.to_owned(), tool: String::new() }),
        }
    }

    fn not_running(&self, server: &str) -> McpError {
        match self.snapshot().get(server) {
            None => McpError::UnknownServer(server.to_owned()),
            Some(s) => McpError::NotRunning {
                server: server.to_owned(),
                message: describe(&s.status, s.last_error.as_deref()),
            },
        }
    }

    /// Calls `tool` (the server's own name for it) on `server`. See
    /// [`Connection::call`] for progress, timeout and cancellation.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        opts: CallOptions,
    ) -> Result<CallOutcome> {
        let started = Instant::now();
        let conn = self.connection(server, &opts).await?;
        let mut opts = opts;
        opts.timeout = opts.timeout.saturating_sub(started.elapsed());
        conn.call(tool, arguments, opts).await
    }

    /// Calls a tool by its Outpost name (`mcp__<server>__<tool>`).
    pub async fn call_outpost(
        &self,
        outpost_name: &str,
        arguments: Option<Map<String, Value>>,
        opts: CallOptions,
    ) -> Result<CallOutcome> {
        let tool = self.find_tool(outpost_name).ok_or_else(|| {
            let server = crate::naming::server_of(outpost_name).unwrap_or("");
            McpError::UnknownTool {
                server: server.to_owned(),
                tool: outpost_name.to_owned(),
            }
        })?;
        self.call(&tool.server, &tool.name, arguments, opts).await
    }
}

fn describe(status: &ServerStatus, last_error: Option<&str>) -> String {
    let what = match status {
        ServerStatus::Starting => "it is starting".to_owned(),
        ServerStatus::Running => "it is running".to_owned(),
        ServerStatus::Restarting { attempt, retry_in } => format!(
            "it will be restarted in {} ms (failure {attempt} in a row)",
            retry_in.as_millis()
        ),
        ServerStatus::Disabled => "it is disabled in mcp.toml".to_owned(),
        ServerStatus::Unconfirmed => "it waits for you to confirm it".to_owned(),
        ServerStatus::NoSandbox => "it cannot be sandboxed here".to_owned(),
        ServerStatus::Stopped => "it was stopped".to_owned(),
    };
    match last_error {
        Some(e) => format!("{what}; last error: {e}"),
        None => what,
    }
}

fn backoff(opts: &HostOptions, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
    opts.backoff_initial
        .saturating_mul(factor)
        .min(opts.backoff_max)
}

async fn supervise(
    inner: Arc<Inner>,
    name: String,
    config: ServerConfig,
    stop: CancellationToken,
    conn_tx: watch::Sender<Option<Arc<Connection>>>,
) {
    let mut failures: u32 = 0;
    let timeout = inner.opts.connect.start_timeout;
    // Whether a change of the allowed folders concerns this server's sandbox.
    let uses_folders = match &config.transport {
        crate::Transport::Stdio { sandbox, .. } => sandbox.folders != FolderAccess::None,
        crate::Transport::Http { .. } => false,
    };
    loop {
        inner.update(&name, |s| {
            s.status = ServerStatus::Starting;
            s.starts += 1;
            // A failed sign-in stays shown through the restarts; a working one is found
            // again by the start.
            if s.sign_in == Some(SignInState::SignedIn) {
                s.sign_in = None;
            }
        });
        let mut connect = inner.opts.connect.clone();
        connect.roots = inner.roots.subscribe();
        let mut folders = inner.folders.subscribe();
        connect.sandbox.folders = folders.borrow_and_update().clone();
        let opened = tokio::select! {
            r = Connection::open(&name, &config, &inner.opts.secrets, &connect) => r,
            _ = stop.cancelled() => return,
        };
        let mut ran_for = Duration::ZERO;
        let error = match opened {
            Err(McpError::NoSandbox { message, .. }) => {
                tracing::warn!(server = %name, "MCP server not started: {message}");
                inner.update(&name, |s| {
                    s.status = ServerStatus::NoSandbox;
                    s.last_error = Some(message);
                });
                return;
            }
            Err(e) => {
                let sign_in = match &e {
                    McpError::SignIn { again: true, .. } => Some(SignInState::Again),
                    McpError::SignIn { again: false, .. } => Some(SignInState::Needed),
                    _ => None,
                };
                inner.update(&name, |s| s.sign_in = sign_in);
                e.to_string()
            }
            Ok(conn) => {
                let conn = Arc::new(conn);
                let began = Instant::now();
                let sandboxed = conn.reach().is_some_and(|r| r.sandboxed());
                let watch = (uses_folders && sandboxed).then_some(&mut folders);
                match session(&inner, &name, &conn, &stop, &conn_tx, timeout, watch).await {
                    Ended::Stopped => {
                        conn.close();
                        return;
                    }
                    Ended::FoldersChanged => {
                        tracing::info!(server = %name, "restarting the MCP server: the folders its sandbox may reach changed");
                        conn.close();
                        let _ = conn_tx.send(None);
                        continue;
                    }
                    Ended::Failed(e) => {
                        conn.close();
                        let _ = conn_tx.send(None);
                        ran_for = began.elapsed();
                        e
                    }
                }
            }
        };
        if ran_for >= inner.opts.stable_after {
            failures = 0;
        }
        failures += 1;
        let delay = backoff(&inner.opts, failures);
        tracing::warn!(server = %name, attempt = failures, "MCP server stopped: {error}");
        inner.update(&name, |s| {
            s.status = ServerStatus::Restarting {
                attempt: failures,
                retry_in: delay,
            };
            s.last_error = Some(error);
            s.pid = None;
            s.protocol_version = None;
            if !s.tools.is_empty() {
                s.tools = Arc::new(Vec::new());
                s.tools_version += 1;
            }
        });
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.cancelled() => return,
        }
    }
}

enum Ended {
    Stopped,
    /// The allowed folders changed: its sandbox must be made again.
    FoldersChanged,
    Failed(String),
}

fn set_tools(inner: &Inner, name: &str, tools: Vec<McpTool>, list_changed: u64) {
    inner.update(name, |s| {
        if *s.tools != tools {
            s.tools = Arc::new(tools);
            s.tools_version += 1;
        }
        s.list_changed = list_changed;
    });
}

async fn session(
    inner: &Inner,
    name: &str,
    conn: &Arc<Connection>,
    stop: &CancellationToken,
    conn_tx: &watch::Sender<Option<Arc<Connection>>>,
    timeout: Duration,
    mut folders: Option<&mut watch::Receiver<Vec<PathBuf>>>,
) -> Ended {
    let mut changed = conn.tools_changed();
    let mut closed = conn.closed();
    // Notifications before the first list are covered by the first list.
    changed.borrow_and_update();
    let tools = tokio::select! {
        r = conn.list_tools(timeout) => r,
        _ = stop.cancelled() => return Ended::Stopped,
    };
    match tools {
        Ok(tools) => {
            // One update: nobody sees it running without its tools.
            inner.update(name, |s| {
                s.status = ServerStatus::Running;
                s.last_error = None;
                s.sign_in = conn.signed_in().then_some(SignInState::SignedIn);
                s.pid = conn.pid();
                s.protocol_version = Some(conn.protocol_version().to_owned());
                s.list_changed = 0;
                s.reach = conn.reach();
                if *s.tools != tools {
                    s.tools = Arc::new(tools);
                    s.tools_version += 1;
                }
            });
        }
        Err(e) => return Ended::Failed(format!("listing its tools failed: {e}")),
    }
    let _ = conn_tx.send(Some(conn.clone()));
    let mut listed = Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ended::Stopped,
            Ok(()) = async {
                match folders.as_deref_mut() {
                    Some(f) => f.changed().await,
                    None => std::future::pending().await,
                }
            } => return Ended::FoldersChanged,
            why = async { closed.wait_for(Option::is_some).await.map(|v| v.clone()) } => {
                let why = why.ok().flatten().unwrap_or_default();
                return Ended::Failed(format!("the server stopped: {why}"));
            }
            r = changed.changed() => {
                if r.is_err() {
                    continue;
                }
                // Coalesce: the notifications that come before the next list is due fold
                // into it (a flood costs one list per interval, not one per notification).
                tokio::select! {
                    _ = tokio::time::sleep_until(listed + inner.opts.relist_interval) => {}
                    _ = stop.cancelled() => return Ended::Stopped,
                }
                let count = *changed.borrow_and_update();
                listed = Instant::now();
                match conn.list_tools(timeout).await {
                    Ok(tools) => set_tools(inner, name, tools, count),
                    Err(e) => tracing::warn!(server = %name, "re-listing tools failed: {e}"),
                }
            }
        }
    }
}
