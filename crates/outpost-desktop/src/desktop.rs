//! [`Desktop`]: one method per command of ui/CONTRACT.md.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use outpost_core::{ConnectOptions, Core, Credentials, PolicySource, Session, ToolsConfig};
use outpost_livekit::{Room, RoomOptions, TokenEndpoint, TokenRequest};
use outpost_policy::{FolderAccess, FolderRule, Rule};
use outpost_protocol::ToolDescriptor;
use outpost_store::{ConversationId, ExportFormat, ExportScope, SearchQuery, SearchSyntax, now_ms};

use crate::config::{AppConfig, AuthMode, ConnectionConfig, NotificationConfig, Paths};
use crate::contract::{
    AboutInfo, AppEvent, AudioDevices, ConnectionSettings, ConnectionTestResult,
    ConversationDetail, ConversationSummary, Decision, ErrorEvent, ExportResult, FolderScope,
    NotificationSettings, RememberedDecision, RememberedKind, SearchHit, SearchHitKind,
    SessionInfo, SessionSnapshot, Settings, ToolInfo, ToolRule, UserMessage, VoiceControl,
    VoiceStatus,
};
use crate::demo::{Demo, DemoPrograms};
use crate::error::{DesktopError, Result};
use crate::history;
use crate::live::LiveState;
use crate::secrets::{SecretStore, check_name};

/// Receives the UI events (the Tauri channel of `session_subscribe`).
pub type EventSink = Box<dyn Fn(AppEvent) + Send + Sync>;

/// Shows desktop notifications (notify-rust in the shell). Errors are the notifier's to
/// log: a missing notification daemon must not disturb the session.
pub trait Notifier: Send + Sync + std::fmt::Debug {
    /// Shows one notification; clicking it should bring the app forward.
    fn notify(&self, title: &str, body: &str);
}

/// The environment variable that supplies a token when the keyring has none (headless
/// runs, CI). Never written anywhere.
pub const TOKEN_ENV: &str = "OUTPOST_LIVEKIT_TOKEN";

struct Live {
    state: LiveState,
    sink: Option<EventSink>,
}

impl Live {
    fn emit(&self, ev: AppEvent) {
        if let Some(sink) = &self.sink {
            sink(ev);
        }
    }
}

struct Inner {
    core: Core,
    paths: Paths,
    config: Mutex<AppConfig>,
    secrets: Arc<dyn SecretStore>,
    notifier: Arc<dyn Notifier>,
    live: Mutex<Live>,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    demo: tokio::sync::Mutex<Option<Demo>>,
    /// The MCP servers of the current session (started at connect, stopped at
    /// disconnect or when the session ends).
    mcp: Mutex<Option<outpost_mcp::McpHost>>,
    /// The task that offers the policy's allowed folders to the session's servers as roots
    /// again whenever the policy changes (`roots/list_changed`); ended with the servers.
    mcp_roots: Mutex<Option<tokio::task::AbortHandle>>,
    /// MCP elicitation forms waiting for the user.
    elicitations: Arc<crate::mcp::Elicitations>,
    /// The tools each MCP server listed last (Settings → Tool servers' per-tool rules).
    mcp_tools: crate::mcp::ToolLists,
    /// The demo's programs when set by [`Desktop::set_demo_programs`]; else looked up at
    /// each start.
    demo_programs: Mutex<Option<DemoPrograms>>,
    focused: AtomicBool,
    tools: Vec<ToolDescriptor>,
    /// A problem found at start (a damaged settings file), told to the first subscriber.
    startup_error: Mutex<Option<String>>,
    _watcher: Option<outpost_policy::PolicyWatcher>,
    /// Voice: the devices and the microphone track (crate::voice).
    voice: Arc<crate::voice::VoiceHub>,
}

/// The desktop app's backend. Cheap to clone; all clones share one state.
#[derive(Clone)]
pub struct Desktop {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Desktop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desktop")
            .field("paths", &self.inner.paths)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Desktop {
    /// Opens the store, the policy (`policy.toml`, created with commented defaults) and
    /// the settings. A damaged settings file leaves the defaults in force (the file is not
    /// overwritten until the user saves) and is reported to the UI.
    pub fn open(
        paths: Paths,
        secrets: Arc<dyn SecretStore>,
        notifier: Arc<dyn Notifier>,
    ) -> Result<Self> {
        let (config, startup_error) = match AppConfig::load(&paths.settings_file()) {
            Ok(c) => (c, None),
            Err(e) => (AppConfig::default(), Some(e.to_string())),
        };
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        let tools = ToolsConfig {
            policy: PolicySource::File(paths.policy_file()),
            home,
            protected: vec![paths.config_dir.clone()],
        };
        let core = Core::open(Some(paths.data_dir.clone()), tools)?;
        let watcher = match core.permissions().policy().watch() {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "policy file changes will not be picked up");
                None
            }
        };
        let catalogue = core.builtin_tools()?;
        let mut state = LiveState::default();
        state.set_tools(&catalogue);
        if config.retention_days > 0 {
            // Apply the retention once at start (the writer also keeps the setting).
            let store = core.store().clone();
            // Queued writes: dropping the handle does not cancel them.
            drop(store.set_retention_days(Some(config.retention_days)));
            drop(store.apply_retention(now_ms()));
        }
        Ok(Self {
            inner: Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| Inner {
                voice: {
                    let weak = weak.clone();
                    crate::voice::VoiceHub::new(Arc::new(move |ev| {
                        if let Some(inner) = weak.upgrade() {
                            lock(&inner.live).emit(ev);
                        }
                    }))
                },
                core,
                paths,
                config: Mutex::new(config),
                secrets,
                notifier,
                live: Mutex::new(Live { state, sink: None }),
                session: tokio::sync::Mutex::new(None),
                demo: tokio::sync::Mutex::new(None),
                mcp: Mutex::new(None),
                mcp_roots: Mutex::new(None),
                elicitations: Arc::default(),
                mcp_tools: crate::mcp::ToolLists::default(),
                demo_programs: Mutex::new(None),
                focused: AtomicBool::new(true),
                tools: catalogue,
                startup_error: Mutex::new(startup_error),
                _watcher: watcher,
            }),
        })
    }

    /// The core (store and policy), for the shell's own needs.
    pub fn core(&self) -> &Core {
        &self.inner.core
    }

    /// Whether the window has the focus (notifications are shown only when not).
    pub fn set_focused(&self, focused: bool) {
        self.inner.focused.store(focused, Ordering::Relaxed);
    }

    fn config(&self) -> AppConfig {
        lock(&self.inner.config).clone()
    }

    // --- session -------------------------------------------------------------------------

    /// `session_subscribe`: registers the sink (replacing an earlier one) and returns the
    /// state at this moment; every later event goes to the sink, in order.
    pub fn subscribe(&self, sink: EventSink) -> SessionSnapshot {
        let configured = self.config().configured;
        let mut live = lock(&self.inner.live);
        live.sink = Some(sink);
        if let Some(message) = lock(&self.inner.startup_error).take() {
            live.emit(AppEvent::Error(ErrorEvent {
                code: "internal_error".into(),
                message,
                fatal: None,
            }));
        }
        live.state.snapshot(configured)
    }

    /// Whether the app should connect by itself at start (a saved connection or the demo).
    pub fn should_autoconnect(&self) -> bool {
        let c = self.config();
        c.configured
    }

    /// Connects as configured at start: the demo again, or the saved connection.
    pub async fn autoconnect(&self) -> Result<()> {
        if self.config().demo {
            self.start_demo().await
        } else {
            self.connect().await
        }
    }

    fn token(&self) -> Result<Option<String>> {
        let from_env = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
        match self.inner.secrets.get("livekit_token") {
            Ok(Some(t)) => Ok(Some(t)),
            Ok(None) => Ok(from_env),
            Err(e) => from_env.map(Some).ok_or(e),
        }
    }

    fn credentials(&self, c: &ConnectionConfig, token: Option<String>) -> Result<Credentials> {
        match c.auth_mode {
            AuthMode::Token => {
                if c.livekit_url.trim().is_empty() {
                    return Err(DesktopError::NotConfigured(
                        "Set the LiveKit URL in Settings → Connection first.".into(),
                    ));
                }
                let token = match token {
                    Some(t) => t,
                    None => self.token()?.ok_or_else(|| {
                        DesktopError::NotConfigured(
                            "No access token: paste one in Settings → Connection (it is kept \
                             in the system keyring), or use a token endpoint."
                                .into(),
                        )
                    })?,
                };
                Ok(Credentials::Token {
                    url: c.livekit_url.trim().to_owned(),
                    token,
                })
            }
            AuthMode::Endpoint => {
                if c.token_endpoint.trim().is_empty() {
                    return Err(DesktopError::NotConfigured(
                        "Set the token endpoint in Settings → Connection first.".into(),
                    ));
                }
                let nonempty = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_owned());
                let request = TokenRequest {
                    room_name: nonempty(&c.room),
                    participant_identity: nonempty(&c.identity),
                    ..TokenRequest::default()
                };
                Ok(Credentials::Endpoint {
                    endpoint: Box::new(TokenEndpoint::new(c.token_endpoint.trim())),
                    request: Box::new(request),
                })
            }
        }
    }

    /// `session_connect`: connects with the saved settings. Returns once the attempt has
    /// started; progress arrives as events.
    pub async fn connect(&self) -> Result<()> {
        let config = self.config();
        let creds = self.credentials(&config.connection, None)?;
        let room = (!config.connection.room.is_empty()).then(|| config.connection.room.clone());
        self.start_session(creds, room, config.disabled_tools).await
    }

    /// Uses these demo programs instead of looking them up (tests, whose executables do
    /// not sit next to the programs).
    pub fn set_demo_programs(&self, programs: DemoPrograms) {
        *lock(&self.inner.demo_programs) = Some(programs);
    }

    /// `session_start_demo`: the local demo (`outpost-room` and `outpost-agent` as child
    /// processes, logging to the data directory's `logs/`).
    pub async fn start_demo(&self) -> Result<()> {
        self.disconnect().await;
        let logs = self.inner.paths.data_dir.join("logs");
        let programs = lock(&self.inner.demo_programs).clone();
        let demo = match programs {
            Some(p) => Demo::start_with(&p, &logs).await?,
            None => Demo::start(&logs).await?,
        };
        let creds = Credentials::Token {
            url: demo.url.clone(),
            token: demo.token.clone(),
        };
        *self.inner.demo.lock().await = Some(demo);
        {
            let mut c = lock(&self.inner.config);
            c.configured = true;
            c.demo = true;
            c.save(&self.inner.paths.settings_file())?;
        }
        let disabled = self.config().disabled_tools;
        self.start_session(creds, Some(crate::demo::DEMO_ROOM.into()), disabled)
            .await
    }

    async fn start_session(
        &self,
        creds: Credentials,
        room: Option<String>,
        disabled_tools: Vec<String>,
    ) -> Result<()> {
        let mut slot = self.inner.session.lock().await;
        if let Some(old) = slot.take() {
            let _ = old.leave().await;
        }
        self.stop_mcp();
        {
            let mut live = lock(&self.inner.live);
            let ev = live.state.connecting(None);
            live.emit(ev);
        }
        let mcp = self.start_mcp().await;
        let conversation_id = lock(&self.inner.live)
            .state
            .conversation_id()
            .map(str::to_owned);
        let mut opts = ConnectOptions::new(creds);
        opts.consent_ui = true;
        opts.room_name = room;
        opts.conversation_id = conversation_id;
        opts.disabled_tools = disabled_tools;
        opts.client_version = env!("CARGO_PKG_VERSION").into();
        opts.mcp = mcp;
        // The assistant's audio is subscribed; it plays only while voice is on.
        opts.voice = true;
        let (session, mut events) = match self.inner.core.connect(opts).await {
            Ok(x) => x,
            Err(e) => {
                self.stop_mcp();
                let msg = format!("Could not connect: {e}");
                let mut live = lock(&self.inner.live);
                let ev = live.state.failed(msg.clone());
                live.emit(ev);
                return Err(DesktopError::Internal(msg));
            }
        };
        let session = Arc::new(session);
        *slot = Some(Arc::clone(&session));
        drop(slot);
        self.inner.voice.attach(Arc::clone(&session));
        let me = self.clone();
        tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                me.on_core_event(ev);
            }
            // The session ended (left, refused, or the link gave up).
            let mut slot = me.inner.session.lock().await;
            if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &session)) {
                *slot = None;
                me.inner.voice.detach().await;
                // The servers live as long as the session that offers their tools.
                me.stop_mcp();
            }
        });
        Ok(())
    }

    /// Starts the enabled servers of `mcp.toml` for a new session (docs/MCP.md, "In the
    /// app"); problems are told to the UI as non-fatal errors.
    async fn start_mcp(&self) -> Option<outpost_mcp::McpHost> {
        let roots = policy_roots(&self.inner.core);
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
        lock(&self.inner.mcp).clone_from(&started.host);
        if let Some(host) = started.host.clone() {
            // The allowed folders change in Settings, by an "always" answer or by editing
            // policy.toml: every change of the policy re-offers them, and the host tells
            // its servers when the list differs.
            let task = follow_roots(self.inner.core.clone(), host);
            if let Some(old) = lock(&self.inner.mcp_roots).replace(task.abort_handle()) {
                old.abort();
            }
        }
        started.host
    }

    /// Stops every MCP server of the session, if any.
    fn stop_mcp(&self) {
        if let Some(task) = lock(&self.inner.mcp_roots).take() {
            task.abort();
        }
        if let Some(host) = lock(&self.inner.mcp).take() {
            host.shutdown();
        }
        let closed = self.inner.elicitations.close_all();
        let live = lock(&self.inner.live);
        for id in closed {
            live.emit(AppEvent::ElicitationClosed(
                crate::contract::ElicitationClosed { id },
            ));
        }
    }

    fn on_core_event(&self, ev: outpost_core::UiEvent) {
        let now = now_ms();
        let consent_summary = match &ev {
            outpost_core::UiEvent::ConsentRequested(p) => Some(p.summary.clone()),
            _ => None,
        };
        let finished = {
            let mut live = lock(&self.inner.live);
            let (out, finished) = live.state.apply(ev, now);
            for e in out {
                live.emit(e);
            }
            finished
        };
        if self.inner.focused.load(Ordering::Relaxed) {
            return;
        }
        let n = self.config().notifications;
        if !n.enabled {
            return;
        }
        if let Some(summary) = consent_summary.filter(|_| n.on_consent) {
            self.inner
                .notifier
                .notify("Outpost needs your permission", &summary);
        }
        if let Some(f) =
            finished.filter(|f| n.on_long_task && f.took_ms >= i64::from(n.long_task_secs) * 1000)
        {
            let how = if f.success { "finished" } else { "failed" };
            self.inner.notifier.notify(
                &format!("{} {how}", f.tool),
                &format!("It took {} s.", f.took_ms / 1000),
            );
        }
    }

    /// `session_disconnect`: leaves the room (and stops the demo).
    pub async fn disconnect(&self) {
        self.inner.voice.stop().await;
        let session = self.inner.session.lock().await.take();
        if let Some(s) = session {
            let _ = s.leave().await;
        }
        self.stop_mcp();
        if let Some(d) = self.inner.demo.lock().await.take() {
            d.stop().await;
        }
        let mut live = lock(&self.inner.live);
        let ev = live.state.disconnected(None);
        live.emit(ev);
    }

    // --- voice ---------------------------------------------------------------------------

    /// `voice_status`: the voice state now (for a reloaded page).
    pub fn voice_status(&self) -> VoiceStatus {
        self.inner.voice.status()
    }

    /// `voice_start`: opens the chosen devices and publishes the microphone (sent only
    /// while it should: see `voice::transmitting`). Needs a session.
    pub async fn voice_start(&self) -> Result<VoiceStatus> {
        self.session().await?;
        let c = self.config();
        Ok(self.inner.voice.start(c.voice_input, c.voice_output).await)
    }

    /// `voice_stop`: unpublishes the microphone and closes the devices.
    pub async fn voice_stop(&self) -> VoiceStatus {
        self.inner.voice.stop().await
    }

    /// `voice_control`: mute, push-to-talk or open mic, the talk key.
    pub fn voice_control(&self, control: VoiceControl) -> VoiceStatus {
        self.inner.voice.control(control)
    }

    /// `voice_devices`: the audio devices and the chosen ones.
    pub async fn voice_devices(&self) -> AudioDevices {
        let c = self.config();
        crate::voice::devices(c.voice_input, c.voice_output).await
    }

    /// `voice_set_devices`: chooses the microphone and output (`None` = the system's
    /// default), saved in the settings; used from the next `voice_start`.
    pub async fn voice_set_devices(
        &self,
        input: Option<String>,
        output: Option<String>,
    ) -> Result<AudioDevices> {
        for (name, v) in [("input", &input), ("output", &output)] {
            if v.as_ref().is_some_and(|v| v.is_empty() || v.len() > 512) {
                return Err(DesktopError::InvalidArgument {
                    name: name.into(),
                    reason: "a device id is 1 to 512 characters".into(),
                });
            }
        }
        {
            let mut c = lock(&self.inner.config);
            c.voice_input = input;
            c.voice_output = output;
            c.save(&self.inner.paths.settings_file())?;
        }
        Ok(self.voice_devices().await)
    }

    async fn session(&self) -> Result<Arc<Session>> {
        self.inner
            .session
            .lock()
            .await
            .clone()
            .ok_or(DesktopError::NotConnected)
    }

    /// `session_new_conversation`: sends a new hello. Returns `None`: the new conversation's
    /// id comes with the `session` event once the assistant has welcomed it.
    pub async fn new_conversation(&self) -> Result<Option<SessionInfo>> {
        let Ok(s) = self.session().await else {
            return Ok(None);
        };
        s.switch_conversation(None)?;
        Ok(None)
    }

    /// `session_test_connection`: joins with unsaved settings and leaves.
    pub async fn test_connection(
        &self,
        connection: ConnectionSettings,
        token: Option<String>,
    ) -> ConnectionTestResult {
        let conn = match connection_config(&connection) {
            Ok(c) => c,
            Err(e) => return fail(e.to_string()),
        };
        let creds = match self.credentials(&conn, token.filter(|t| !t.trim().is_empty())) {
            Ok(c) => c,
            Err(e) => return fail(e.to_string()),
        };
        let started = Instant::now();
        let joined = match &creds {
            Credentials::Token { url, token } => {
                Room::connect(url, token, RoomOptions::default()).await
            }
            Credentials::Endpoint { endpoint, request } => {
                Room::connect_with_endpoint(endpoint, request, RoomOptions::default()).await
            }
        };
        match joined {
            Ok((room, _events)) => {
                let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                let others = room.participants().len();
                let _ = room.leave().await;
                let who = match others {
                    0 => "nobody else is in the room yet".to_owned(),
                    1 => "1 other participant is there".to_owned(),
                    n => format!("{n} other participants are there"),
                };
                ConnectionTestResult {
                    ok: true,
                    message: format!("Joined in {ms} ms; {who}."),
                    latency_ms: Some(ms),
                }
            }
            Err(e) => fail(format!("Could not connect: {e}")),
        }
    }

    // --- chat ----------------------------------------------------------------------------

    /// `chat_send`.
    pub async fn send(&self, text: String) -> Result<UserMessage> {
        if text.trim().is_empty() {
            return Err(DesktopError::invalid("text", "the message is empty"));
        }
        let session = self.session().await?;
        let first = {
            let live = lock(&self.inner.live);
            let asked = live.state.has_user_message();
            live.state
                .conversation_id()
                .filter(|_| !asked)
                .map(str::to_owned)
        };
        let id = session.send_message(text.clone())?;
        if let Some(conversation) = first {
            // The first thing said names the conversation in the history.
            let title: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let title = match title.char_indices().nth(80) {
                Some((cut, _)) => format!("{}…", &title[..cut]),
                None => title,
            };
            drop(
                self.inner
                    .core
                    .store()
                    .set_conversation_title(ConversationId(conversation), Some(title)),
            );
        }
        Ok(UserMessage {
            id,
            text,
            at: now_ms(),
        })
    }

    // --- consent -------------------------------------------------------------------------

    /// `consent_answer`.
    pub fn answer_consent(&self, consent_id: &str, decision: Decision) -> Result<()> {
        {
            let live = lock(&self.inner.live);
            let req = live
                .state
                .consent(consent_id)
                .ok_or(DesktopError::UnknownConsent)?;
            if !req.options.contains(&decision) {
                let offered: Vec<&str> = req.options.iter().map(|d| d.as_str()).collect();
                return Err(DesktopError::invalid(
                    "decision",
                    format!(
                        "'{}' is not offered for this question (offered: {})",
                        decision.as_str(),
                        offered.join(", ")
                    ),
                ));
            }
        }
        self.inner.core.answer_consent(consent_id, decision)?;
        let mut live = lock(&self.inner.live);
        if let Some(ev) = live.state.answered(consent_id) {
            live.emit(ev);
        }
        Ok(())
    }

    /// `consent_list_remembered`: the "always" answers written to the policy. (This
    /// session's "for this conversation" grants are kept by the executor and not listed.)
    pub fn remembered(&self) -> Vec<RememberedDecision> {
        let policy = self.inner.core.permissions().policy().current();
        let p = policy.policy();
        let mut out = Vec::new();
        for (tool, rule) in &p.tools {
            let decision = match rule {
                Rule::Allow => RememberedKind::AlwaysAllow,
                Rule::Deny => RememberedKind::AlwaysDeny,
                Rule::Ask => continue,
            };
            out.push(RememberedDecision {
                id: format!("tool:{tool}"),
                tool: tool.clone(),
                decision,
                folder: None,
                conversation_id: None,
                at: None,
            });
        }
        for f in &p.folders {
            let Some([tool]) = f.tools.as_deref() else {
                continue;
            };
            out.push(RememberedDecision {
                id: folder_id(f),
                tool: tool.clone(),
                decision: match f.access {
                    FolderAccess::Allow => RememberedKind::AlwaysAllow,
                    FolderAccess::Deny => RememberedKind::AlwaysDeny,
                },
                folder: Some(f.path.clone()),
                conversation_id: None,
                at: None,
            });
        }
        out
    }

    /// `consent_revoke`.
    pub fn revoke(&self, id: &str) -> Result<()> {
        if !self.remembered().iter().any(|r| r.id == id) {
            return Err(DesktopError::NotFound(format!(
                "No remembered decision '{id}' (it may have been revoked already)."
            )));
        }
        self.inner.core.permissions().policy().update(|p| {
            if let Some(tool) = id.strip_prefix("tool:") {
                p.tools.remove(tool);
            } else {
                p.folders.retain(|f| folder_id(f) != id);
            }
        })?;
        Ok(())
    }

    // --- settings ------------------------------------------------------------------------

    /// `settings_get`.
    pub fn settings(&self) -> Settings {
        let c = self.config();
        let policy = self.inner.core.permissions().policy().current();
        let p = policy.policy();
        let has_token = matches!(self.token(), Ok(Some(_)));
        Settings {
            connection: ConnectionSettings {
                auth_mode: match c.connection.auth_mode {
                    AuthMode::Token => "token",
                    AuthMode::Endpoint => "endpoint",
                }
                .into(),
                livekit_url: c.connection.livekit_url,
                token_endpoint: c.connection.token_endpoint,
                room: c.connection.room,
                identity: c.connection.identity,
                has_token,
            },
            consent_timeout_secs: p.consent_timeout_secs,
            folders: p
                .folders
                .iter()
                .map(|f| FolderScope {
                    path: f.path.clone(),
                    access: match f.access {
                        FolderAccess::Allow => "allow",
                        FolderAccess::Deny => "deny",
                    }
                    .into(),
                    tools: f.tools.clone(),
                })
                .collect(),
            notifications: NotificationSettings {
                enabled: c.notifications.enabled,
                on_consent: c.notifications.on_consent,
                on_long_task: c.notifications.on_long_task,
                long_task_secs: c.notifications.long_task_secs,
            },
            retention_days: c.retention_days,
        }
    }

    /// `settings_set`: validates everything first, then writes the policy and the
    /// settings file.
    pub async fn set_settings(&self, s: Settings) -> Result<Settings> {
        let connection = connection_config(&s.connection)?;
        if s.consent_timeout_secs == 0 || s.consent_timeout_secs > 86_400 {
            return Err(DesktopError::invalid(
                "consentTimeoutSecs",
                format!(
                    "must be between 1 and 86400 seconds, got {}",
                    s.consent_timeout_secs
                ),
            ));
        }
        if s.notifications.long_task_secs == 0 {
            return Err(DesktopError::invalid(
                "notifications.longTaskSecs",
                "must be at least 1 second",
            ));
        }
        let mut folders = Vec::with_capacity(s.folders.len());
        for (i, f) in s.folders.iter().enumerate() {
            let access = match f.access.as_str() {
                "allow" => FolderAccess::Allow,
                "deny" => FolderAccess::Deny,
                other => {
                    return Err(DesktopError::invalid(
                        format!("folders[{i}].access"),
                        format!("must be \"allow\" or \"deny\", got \"{other}\""),
                    ));
                }
            };
            let path = f.path.trim();
            folders.push(FolderRule {
                path: path.to_owned(),
                access,
                tools: f.tools.clone(),
            });
        }
        // The policy's own check names a bad folder (`folders[i].path`); reported as a
        // refused argument, not as a failed save.
        let policy = self.inner.core.permissions().policy();
        let mut candidate = policy.current().policy().clone();
        candidate.consent_timeout_secs = s.consent_timeout_secs;
        candidate.folders.clone_from(&folders);
        candidate
            .check()
            .map_err(|reason| DesktopError::invalid("settings", reason))?;
        // Edit inside the policy's lock: an "always" answer written meanwhile is kept.
        policy.update(|p| {
            p.consent_timeout_secs = s.consent_timeout_secs;
            p.folders = folders;
        })?;
        let retention = s.retention_days;
        {
            let mut c = lock(&self.inner.config);
            let had = c.connection.clone();
            c.connection = connection;
            if c.connection != had
                && (!c.connection.livekit_url.is_empty() || !c.connection.token_endpoint.is_empty())
            {
                c.configured = true;
                c.demo = false;
            }
            c.notifications = NotificationConfig {
                enabled: s.notifications.enabled,
                on_consent: s.notifications.on_consent,
                on_long_task: s.notifications.on_long_task,
                long_task_secs: s.notifications.long_task_secs,
            };
            c.retention_days = retention;
            c.save(&self.inner.paths.settings_file())?;
        }
        let store = self.inner.core.store();
        store
            .set_retention_days((retention > 0).then_some(retention))
            .await?;
        if retention > 0 {
            store.apply_retention(now_ms()).await?;
        }
        Ok(self.settings())
    }

    /// `settings_set_secret`.
    pub fn set_secret(&self, name: &str, value: &str) -> Result<()> {
        check_name(name)?;
        if value.trim().is_empty() {
            return Err(DesktopError::invalid("value", "the token is empty"));
        }
        self.inner.secrets.set(name, value.trim())
    }

    /// `settings_clear_secret`.
    pub fn clear_secret(&self, name: &str) -> Result<()> {
        check_name(name)?;
        self.inner.secrets.delete(name)
    }

    /// `settings_about`.
    pub fn about(&self, app_version: &str) -> AboutInfo {
        AboutInfo {
            app_version: app_version.into(),
            core_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: outpost_protocol::PROTOCOL_VERSION,
            data_dir: self.inner.paths.data_dir.display().to_string(),
            policy_file: self.inner.paths.policy_file().display().to_string(),
        }
    }

    // --- history -------------------------------------------------------------------------

    /// Waits until every write queued so far is committed (for tests and before exit).
    pub async fn store_flush(&self) {
        if let Err(e) = self.inner.core.store().flush().await {
            tracing::warn!(error = %e, "history flush failed");
        }
    }

    /// The newest `want` conversations (all of them with `usize::MAX`), following the
    /// store's pages (it returns at most `MAX_PAGE` at a time).
    async fn conversations(&self, want: usize) -> Result<Vec<outpost_store::ConversationSummary>> {
        let store = self.inner.core.store();
        let mut out = Vec::new();
        let mut before = None;
        while out.len() < want {
            let page = store
                .list_conversations(outpost_store::query::MAX_PAGE, before)
                .await?;
            out.extend(page.items);
            match page.next {
                Some(next) => before = Some(next),
                None => break,
            }
        }
        out.truncate(want);
        Ok(out)
    }

    /// `history_list`.
    pub async fn history_list(&self, limit: u32, offset: u32) -> Result<Vec<ConversationSummary>> {
        let limit = limit.clamp(1, 500) as usize;
        let all = self.conversations(offset as usize + limit).await?;
        Ok(all
            .iter()
            .skip(offset as usize)
            .map(history::summary)
            .collect())
    }

    /// `history_search`.
    pub async fn history_search(
        &self,
        query: String,
        limit: u32,
        highlight_start: String,
        highlight_end: String,
    ) -> Result<Vec<SearchHit>> {
        if query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let mut q = SearchQuery::new(query);
        q.syntax = SearchSyntax::Plain;
        q.limit = limit.clamp(1, 200);
        q.highlight_start = highlight_start;
        q.highlight_end = highlight_end;
        let store = self.inner.core.store();
        let hits = store.search(q).await?;
        let mut out = Vec::with_capacity(hits.len());
        let mut titles = std::collections::HashMap::new();
        for h in hits {
            let cid = h.conversation_id.as_str().to_owned();
            if !titles.contains_key(&cid) {
                let title = store
                    .conversation(h.conversation_id.clone())
                    .await?
                    .map(|c| history::title(&c))
                    .unwrap_or_default();
                titles.insert(cid.clone(), title);
            }
            out.push(SearchHit {
                kind: match h.kind {
                    outpost_store::HitKind::Message => SearchHitKind::Message,
                    outpost_store::HitKind::ToolCall => SearchHitKind::ToolCall,
                },
                conversation_title: titles.get(&cid).cloned().unwrap_or_default(),
                conversation_id: cid,
                id: h.id,
                at: h.at,
                tool_name: h.tool_name,
                snippet: h.snippet,
            });
        }
        Ok(out)
    }

    /// `history_get`.
    pub async fn history_get(&self, conversation_id: &str) -> Result<ConversationDetail> {
        let id = ConversationId(conversation_id.to_owned());
        let store = self.inner.core.store();
        if store.conversation(id.clone()).await?.is_none() {
            return Err(DesktopError::NotFound(format!(
                "There is no conversation {conversation_id} in the history."
            )));
        }
        let timeline = store.timeline(id).await?;
        let transcript = history::transcript(&timeline.items);
        let messages = transcript
            .iter()
            .filter(|e| !matches!(e, crate::contract::TranscriptEntry::Tool { .. }))
            .count();
        let calls = transcript.len() - messages;
        let summary = history::summary(&outpost_store::ConversationSummary {
            conversation: timeline.conversation,
            message_count: messages as u64,
            tool_call_count: calls as u64,
        });
        Ok(ConversationDetail {
            summary,
            transcript,
        })
    }

    /// `history_export`: writes into `dir` (the shell passes the downloads folder).
    pub async fn history_export(
        &self,
        conversation_id: Option<String>,
        format: &str,
        dir: &std::path::Path,
    ) -> Result<ExportResult> {
        let (fmt, ext) = match format {
            "json" => (ExportFormat::Json, "json"),
            "markdown" => (ExportFormat::Markdown, "md"),
            other => {
                return Err(DesktopError::invalid(
                    "format",
                    format!("must be \"json\" or \"markdown\", got \"{other}\""),
                ));
            }
        };
        let (scope, stem) = match &conversation_id {
            Some(id) => {
                let cid = ConversationId(id.clone());
                if self
                    .inner
                    .core
                    .store()
                    .conversation(cid.clone())
                    .await?
                    .is_none()
                {
                    return Err(DesktopError::NotFound(format!(
                        "There is no conversation {id} in the history."
                    )));
                }
                (
                    ExportScope::Conversation(cid),
                    format!("outpost-{}", export_file_stem(id)),
                )
            }
            None => (ExportScope::All, "outpost-history".to_owned()),
        };
        let text = self.inner.core.store().export(scope, fmt).await?;
        std::fs::create_dir_all(dir).map_err(|source| DesktopError::Io {
            action: "create",
            path: dir.display().to_string(),
            source,
        })?;
        let stamp = outpost_store::export::format_time(now_ms())
            .replace([':', ' '], "-")
            .replace(['T', 'Z'], "");
        let path = dir.join(format!("{stem}-{stamp}.{ext}"));
        std::fs::write(&path, &text).map_err(|source| DesktopError::Io {
            action: "write",
            path: path.display().to_string(),
            source,
        })?;
        Ok(ExportResult {
            path: path.display().to_string(),
            bytes: text.len() as u64,
        })
    }

    /// `history_delete_all`.
    pub async fn history_delete_all(&self) -> Result<u64> {
        let all = self.conversations(usize::MAX).await?;
        let store = self.inner.core.store();
        let live = lock(&self.inner.live)
            .state
            .conversation_id()
            .map(str::to_owned);
        let mut deleted = 0;
        for s in all {
            if Some(s.conversation.id.as_str()) == live.as_deref() {
                continue;
            }
            if store.delete_conversation(s.conversation.id).await? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    // --- tools ---------------------------------------------------------------------------

    // --- tool servers (MCP) ----------------------------------------------------------

    fn mcp_host(&self) -> Option<outpost_mcp::McpHost> {
        lock(&self.inner.mcp).clone()
    }

    fn mcp_secrets(&self) -> Arc<dyn outpost_mcp::SecretStore> {
        outpost_mcp::secrets::from_env()
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

    fn with_rule(
        &self,
        mut info: crate::contract::McpServerInfo,
    ) -> crate::contract::McpServerInfo {
        info.rule = self.mcp_rule(&info.name);
        info
    }

    /// `mcp_servers_list`.
    pub fn mcp_servers(&self) -> Result<Vec<crate::contract::McpServerInfo>> {
        Ok(
            crate::mcp::list(&self.inner.paths, self.mcp_host().as_ref())?
                .into_iter()
                .map(|i| self.with_rule(i))
                .collect(),
        )
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
        crate::mcp::add(
            &self.inner.paths,
            self.mcp_host().as_ref(),
            &*self.mcp_secrets(),
            draft,
        )
        .map(|i| self.with_rule(i))
    }

    /// `mcp_servers_get`.
    pub fn mcp_server_get(&self, name: &str) -> Result<crate::contract::McpServerDraft> {
        crate::mcp::get(&self.inner.paths, name)
    }

    /// `mcp_servers_update`. In a live session the server restarts with its new settings:
    /// call it within the app's tokio runtime.
    pub fn mcp_server_update(
        &self,
        draft: &crate::contract::McpServerDraft,
    ) -> Result<crate::contract::McpServerInfo> {
        crate::mcp::update(
            &self.inner.paths,
            self.mcp_host().as_ref(),
            &*self.mcp_secrets(),
            draft,
        )
        .map(|i| self.with_rule(i))
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

    /// `mcp_servers_remove`.
    pub fn mcp_server_remove(&self, name: &str) -> Result<()> {
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
        action: &str,
        content: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<()> {
        self.inner.elicitations.answer(id, action, content)
    }

    /// `mcp_servers_import_preview`.
    pub fn mcp_import_preview(&self, text: &str) -> Result<crate::contract::McpImportPreview> {
        crate::mcp::import_preview(&self.inner.paths, text)
    }

    /// `tools_list`.
    pub fn tools(&self) -> Vec<ToolInfo> {
        let policy = self.inner.core.permissions().policy().current();
        let disabled = self.config().disabled_tools;
        self.inner
            .tools
            .iter()
            .map(|t| tool_info(t, policy.policy().tools.get(&t.name).copied(), &disabled))
            .collect()
    }

    /// `tools_set`: on/off in the settings; allow/ask/deny in the policy. "ask" on a
    /// non-destructive tool returns it to its default (folder scopes decide, else ask).
    /// Takes effect for the next session (the hello lists the tools).
    pub fn set_tool(&self, name: &str, enabled: bool, rule: &str) -> Result<ToolInfo> {
        let t = self
            .inner
            .tools
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| DesktopError::NotFound(format!("There is no tool '{name}'.")))?;
        let new_rule = match rule {
            "allow" if t.destructive => {
                return Err(DesktopError::invalid(
                    "rule",
                    format!("'{name}' can change or delete data: it always asks"),
                ));
            }
            "allow" => Some(Rule::Allow),
            "deny" => Some(Rule::Deny),
            "ask" if t.destructive => Some(Rule::Ask),
            "ask" => None,
            other => {
                return Err(DesktopError::invalid(
                    "rule",
                    format!("must be \"allow\", \"ask\" or \"deny\", got \"{other}\""),
                ));
            }
        };
        self.inner
            .core
            .permissions()
            .policy()
            .update(|p| match new_rule {
                Some(r) => {
                    p.tools.insert(name.to_owned(), r);
                }
                None => {
                    p.tools.remove(name);
                }
            })?;
        {
            let mut c = lock(&self.inner.config);
            c.disabled_tools.retain(|n| n != name);
            if !enabled {
                c.disabled_tools.push(name.to_owned());
            }
            c.save(&self.inner.paths.settings_file())?;
        }
        let disabled = self.config().disabled_tools;
        Ok(tool_info(t, new_rule, &disabled))
    }
}

/// Longest conversation-id part of an export file name, in bytes.
const EXPORT_STEM_MAX: usize = 64;

/// The conversation id (chosen by the assistant, so anything) as one readable file-name
/// part that cannot leave the export folder: ASCII letters, digits, `_` and single dots
/// kept, every other run of characters (`/`, `\`, `:`, spaces, controls, non-ASCII) one
/// `-`, no dot or dash at either end, at most [`EXPORT_STEM_MAX`] bytes, and
/// `conversation` when nothing is left.
fn export_file_stem(id: &str) -> String {
    let mut out = String::with_capacity(id.len().min(EXPORT_STEM_MAX));
    for c in id.chars() {
        let next = if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            c
        } else {
            '-'
        };
        // Runs collapse: "a//b" is "a-b", and ".." never survives to look like a parent.
        if (next == '-' || next == '.') && out.ends_with(next) {
            continue;
        }
        out.push(next);
        if out.len() >= EXPORT_STEM_MAX {
            break;
        }
    }
    let stem = out.trim_matches(|c| c == '-' || c == '.');
    if stem.is_empty() {
        "conversation".to_owned()
    } else {
        stem.to_owned()
    }
}

fn fail(message: String) -> ConnectionTestResult {
    ConnectionTestResult {
        ok: false,
        message,
        latency_ms: None,
    }
}

fn folder_id(f: &FolderRule) -> String {
    let access = match f.access {
        FolderAccess::Allow => "allow",
        FolderAccess::Deny => "deny",
    };
    let tools = f.tools.as_deref().unwrap_or_default().join(",");
    format!("folder:{access}:{tools}:{}", f.path)
}

fn tool_info(t: &ToolDescriptor, rule: Option<Rule>, disabled: &[String]) -> ToolInfo {
    let rule = match rule {
        Some(Rule::Allow) => ToolRule::Allow,
        Some(Rule::Deny) => ToolRule::Deny,
        Some(Rule::Ask) => ToolRule::Ask,
        // Destructive tools are off until the user sets a rule.
        None if t.destructive => ToolRule::Deny,
        None => ToolRule::Ask,
    };
    ToolInfo {
        name: t.name.clone(),
        description: t.description.clone(),
        server_name: t.server_name.clone(),
        claims: None,
        parameters: t.parameters.clone(),
        enabled: !disabled.iter().any(|d| d == &t.name),
        rule,
        read_only: t.read_only,
        destructive: t.destructive,
        open_world: t.open_world,
    }
}

/// Validates the connection part of the settings.
fn connection_config(c: &ConnectionSettings) -> Result<ConnectionConfig> {
    let auth_mode = match c.auth_mode.as_str() {
        "token" => AuthMode::Token,
        "endpoint" => AuthMode::Endpoint,
        other => {
            return Err(DesktopError::invalid(
                "connection.authMode",
                format!("must be \"token\" or \"endpoint\", got \"{other}\""),
            ));
        }
    };
    let url = c.livekit_url.trim();
    if !url.is_empty()
        && !["ws://", "wss://", "http://", "https://"]
            .iter()
            .any(|s| url.starts_with(s))
    {
        return Err(DesktopError::invalid(
            "connection.livekitUrl",
            format!("must start with wss://, ws://, https:// or http://, got \"{url}\""),
        ));
    }
    let endpoint = c.token_endpoint.trim();
    if !endpoint.is_empty()
        && !["http://", "https://"]
            .iter()
            .any(|s| endpoint.starts_with(s))
    {
        return Err(DesktopError::invalid(
            "connection.tokenEndpoint",
            format!("must start with https:// or http://, got \"{endpoint}\""),
        ));
    }
    Ok(ConnectionConfig {
        auth_mode,
        livekit_url: url.to_owned(),
        token_endpoint: endpoint.to_owned(),
        room: c.room.trim().to_owned(),
        identity: c.identity.trim().to_owned(),
    })
}

/// `chat_open_link`'s check: only `http:`, `https:` and `mailto:` links leave the app.
pub fn check_link(url: &str) -> Result<()> {
    let lower = url.trim().to_ascii_lowercase();
    let ok = ["http://", "https://", "mailto:"]
        .iter()
        .any(|s| lower.starts_with(s))
        && !url.chars().any(char::is_control);
    if ok {
        Ok(())
    } else {
        Err(DesktopError::invalid(
            "url",
            format!("only http, https and mailto links can be opened, not \"{url}\""),
        ))
    }
}

/// Offers the policy's allowed folders to `host`'s servers again after every change of the
/// policy (when the list differs, the host sends them `notifications/roots/list_changed`).
fn follow_roots(core: Core, host: outpost_mcp::McpHost) -> tokio::task::JoinHandle<()> {
    let mut status = core.permissions().policy().status();
    tokio::spawn(async move {
        while status.changed().await.is_ok() {
            let roots = policy_roots(&core);
            if roots != host.roots() {
                host.set_roots(roots);
            }
        }
    })
}

/// The policy's allowed folders as MCP roots (see [`crate::mcp::roots`]).
fn policy_roots(core: &Core) -> Vec<outpost_mcp::Root> {
    let folders: Vec<(String, bool)> = {
        let policy = core.permissions().policy().current();
        policy
            .policy()
            .folders
            .iter()
            .map(|f| (f.path.clone(), matches!(f.access, FolderAccess::Allow)))
            .collect()
    };
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
    crate::mcp::roots(&folders, &home)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_change_of_the_allowed_folders_reaches_the_mcp_host() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir_all(&a).unwrap();
        let core = Core::open(
            None,
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
            policy_roots(&core),
        );
        assert!(host.roots().is_empty());
        let task = follow_roots(core.clone(), host.clone());
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
                    folder(dir.path(), FolderAccess::Deny),
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

    #[derive(Debug)]
    struct Quiet;
    impl Notifier for Quiet {
        fn notify(&self, _title: &str, _body: &str) {}
    }

    #[tokio::test]
    async fn a_tool_servers_rule_is_written_to_the_policy_and_listed() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            config_dir: dir.path().join("config"),
            data_dir: dir.path().join("data"),
        };
        let desktop = Desktop::open(
            paths.clone(),
            Arc::new(crate::secrets::MemorySecrets::default()),
            Arc::new(Quiet),
        )
        .unwrap();
        let draft = crate::contract::McpServerDraft {
            name: "files".into(),
            command: "npx".into(),
            args: Vec::new(),
            url: String::new(),
            env: std::collections::BTreeMap::new(),
            plain: Vec::new(),
            cwd: String::new(),
            enabled: true,
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
}
