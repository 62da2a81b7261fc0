//! [`Desktop`]'s session commands (`session_*`): connect, the local demo, disconnect, a new
//! conversation, a connection test; and the session's core events → UI events.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use outpost_core::{ConnectOptions, Credentials};
use outpost_livekit::{Room, RoomOptions, TokenEndpoint, TokenRequest};
use outpost_store::now_ms;

use crate::config::{AuthMode, ConnectionConfig};
use crate::contract::{
    AppEvent, ConnectionSettings, ConnectionTestResult, ErrorEvent, SessionInfo, SessionSnapshot,
};
use crate::demo::{Demo, DemoPrograms};
use crate::error::{DesktopError, Result};

use super::settings::connection_config;
use super::{Desktop, EventSink, TOKEN_ENV, lock};

impl Desktop {
    /// `session_subscribe`: registers the sink (replacing an earlier one) and returns the
    /// state at this moment; every later event goes to the sink, in order.
    pub fn subscribe(&self, sink: EventSink) -> SessionSnapshot {
        let configured = self.config().configured;
        // A (re)loaded page starts with no file waiting to be sent: it shows none.
        drop(self.inner.staged.take());
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

    pub(super) fn token(&self) -> Result<Option<String>> {
        let from_env = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
        match self.inner.secrets.get("livekit_token") {
            Ok(Some(t)) => Ok(Some(t)),
            Ok(None) => Ok(from_env),
            Err(e) => from_env.map(Some).ok_or(e),
        }
    }

    /// The API key's secret: the keyring's, else `$LIVEKIT_API_SECRET`.
    pub(super) fn api_secret(&self) -> Result<Option<String>> {
        let from_env = std::env::var("LIVEKIT_API_SECRET")
            .ok()
            .filter(|t| !t.is_empty());
        match self.inner.secrets.get("livekit_api_secret") {
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
                Ok(Credentials::Endpoint {
                    endpoint: Box::new(TokenEndpoint::new(c.token_endpoint.trim())),
                    request: Box::new(token_request(c)),
                })
            }
            AuthMode::ApiKey => {
                if c.livekit_url.trim().is_empty() || c.api_key.trim().is_empty() {
                    return Err(DesktopError::NotConfigured(
                        "Set the LiveKit URL and the API key in Settings → Connection first."
                            .into(),
                    ));
                }
                if c.room.trim().is_empty() || c.identity.trim().is_empty() {
                    return Err(DesktopError::NotConfigured(
                        "Set the room and the identity in Settings → Connection: Outpost \
                         mints its token for them."
                            .into(),
                    ));
                }
                // A secret typed into the form but not saved yet (a connection test).
                let secret = match token {
                    Some(t) => t,
                    None => self.api_secret()?.ok_or_else(|| {
                        DesktopError::NotConfigured(
                            "No API secret: enter it in Settings → Connection (it is kept in \
                             the system keyring)."
                                .into(),
                        )
                    })?,
                };
                let token = outpost_livekit::mint_dev_token(
                    c.api_key.trim(),
                    &secret,
                    &token_request(c),
                    std::time::Duration::from_secs(6 * 3600),
                )
                .map_err(|e| DesktopError::NotConfigured(e.to_string()))?;
                Ok(Credentials::Token {
                    url: c.livekit_url.trim().to_owned(),
                    token,
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

    fn on_core_event(&self, ev: outpost_core::UiEvent) {
        let now = now_ms();
        // The question's deadline goes with it: a user away from the window (or with it
        // closed to the tray) learns how long it waits before it is denied.
        let consent_summary = match &ev {
            outpost_core::UiEvent::ConsentRequested(p) => Some(format!(
                "{} — denied in {} s unless you answer.",
                p.summary,
                p.expires_in_ms.div_ceil(1000)
            )),
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
}

fn fail(message: String) -> ConnectionTestResult {
    ConnectionTestResult {
        ok: false,
        message,
        latency_ms: None,
    }
}

/// What to ask a token endpoint for, or to put into a minted token: the room, our
/// identity and the agent to dispatch by name.
fn token_request(c: &ConnectionConfig) -> TokenRequest {
    let nonempty = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_owned());
    TokenRequest {
        room_name: nonempty(&c.room),
        participant_identity: nonempty(&c.identity),
        ..TokenRequest::default()
    }
    .dispatch_agent(c.agent_name.trim())
}
