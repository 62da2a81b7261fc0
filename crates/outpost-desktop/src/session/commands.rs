//! [`Desktop`]'s session commands (`session_*`): connect (with the credentials the
//! settings name), the local demo, disconnect, a new conversation, a connection test.

use std::time::Instant;

use outpost_core::Credentials;
use outpost_livekit::{Room, RoomOptions, TokenEndpoint, TokenRequest};

use crate::contract::{
    AppEvent, ConnectionSettings, ConnectionTestResult, ErrorEvent, SessionInfo, SessionSnapshot,
};
use crate::demo::{Demo, DemoPrograms};
use crate::desktop::{Desktop, EventSink, TOKEN_ENV};
use crate::error::{DesktopError, Result};
use crate::settings::{AuthMode, ConnectionConfig, connection_config};
use outpost_sync::lock;

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

    pub(crate) fn token(&self) -> Result<Option<String>> {
        let from_env = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
        match self.inner.secrets.get("livekit_token") {
            Ok(Some(t)) => Ok(Some(t)),
            Ok(None) => Ok(from_env),
            Err(e) => from_env.map(Some).ok_or(e),
        }
    }

    /// The API key's secret: the keyring's, else `$LIVEKIT_API_SECRET`.
    pub(crate) fn api_secret(&self) -> Result<Option<String>> {
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
        self.start_session(creds, room, config.disabled_tools, None)
            .await
    }

    /// Uses these demo programs instead of looking them up (tests, whose executables do
    /// not sit next to the programs).
    pub fn set_demo_programs(&self, programs: DemoPrograms) {
        self.inner.sessions.set_demo_programs(programs);
    }

    /// `session_start_demo`: the local demo (`outpost-room` and `outpost-agent` as child
    /// processes, logging to the data directory's `logs/`).
    pub async fn start_demo(&self) -> Result<()> {
        self.disconnect().await;
        let logs = self.inner.paths.data_dir.join("logs");
        let demo = match self.inner.sessions.demo_programs() {
            Some(p) => Demo::start_with(&p, &logs).await?,
            None => Demo::start(&logs).await?,
        };
        let creds = Credentials::Token {
            url: demo.url.clone(),
            token: demo.token.clone(),
        };
        let saved = {
            let mut c = lock(&self.inner.config);
            c.configured = true;
            c.demo = true;
            c.save(&self.inner.paths.settings_file())
        };
        if let Err(e) = saved {
            demo.stop().await;
            return Err(e);
        }
        let disabled = self.config().disabled_tools;
        self.start_session(
            creds,
            Some(crate::demo::DEMO_ROOM.into()),
            disabled,
            Some(demo),
        )
        .await
    }

    /// `session_disconnect`: leaves the room (and stops the demo).
    pub async fn disconnect(&self) {
        self.end_session().await;
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
