//! The HTTP side: routes, token checks, and the [`Server`] handle that starts and
//! stops everything.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::auth::Grant;
use crate::error::{Error, Result};
use crate::room::{Registry, Stats};
use crate::tasks::Tasks;

pub use crate::shared::Config;
use crate::shared::Shared;

/// A running room server.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    tls: bool,
    shared: Arc<Shared>,
    http: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds `addr` and starts serving.
    pub async fn bind(addr: SocketAddr, config: Config) -> Result<Self> {
        let listener = TcpListener::bind(addr).await.map_err(|source| Error::Io {
            what: format!("bind {addr}"),
            source,
        })?;
        Self::start(listener, config).await
    }

    /// Starts serving on an already bound listener.
    pub async fn start(listener: TcpListener, mut config: Config) -> Result<Self> {
        let addr = listener.local_addr().map_err(|source| Error::Io {
            what: "local address".into(),
            source,
        })?;
        if config.wire.udp_ip.is_unspecified() && !addr.ip().is_unspecified() {
            config.wire.udp_ip = addr.ip();
        }
        let tasks = Tasks::default();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            registry: Arc::new(Registry::new(
                config.empty_timeout,
                tasks.clone(),
                shutdown_rx,
            )),
            config,
            tasks,
            shutdown,
            node_id: format!("ND_{}", addr.port()),
        });
        let app = Router::new()
            .route("/", get(|| async { "OK" }))
            .route("/rtc", get(rtc))
            .route("/rtc/validate", get(validate))
            .route("/rtc/v1", get(single_pc))
            .route("/rtc/v1/validate", get(single_pc))
            .with_state(shared.clone());
        let mut stop = shared.shutdown.subscribe();
        let tls = shared.config.tls.clone();
        let http = match &tls {
            None => tokio::spawn(async move {
                let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                });
                if let Err(e) = serve.await {
                    tracing::error!("http server: {e}");
                }
            }),
            Some(identity) => {
                let listener = crate::tls::listen(
                    listener,
                    addr,
                    identity,
                    &shared.tasks,
                    shared.shutdown.subscribe(),
                );
                tokio::spawn(async move {
                    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                        let _ = stop.wait_for(|s| *s).await;
                    });
                    if let Err(e) = serve.await {
                        tracing::error!("https server: {e}");
                    }
                })
            }
        };
        tracing::info!(%addr, tls = tls.is_some(), "outpost-room listening");
        Ok(Self {
            addr,
            tls: tls.is_some(),
            shared,
            http,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://ADDR` (`wss://ADDR` with TLS), the URL SDKs connect to.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "wss" } else { "ws" };
        format!("{scheme}://{}", self.addr)
    }

    /// Room, participant and task counts.
    pub fn stats(&self) -> Stats {
        self.shared.registry.stats()
    }

    /// Open rooms and their participants' identities, sorted.
    pub fn rooms(&self) -> Vec<(String, Vec<String>)> {
        self.shared.registry.snapshot()
    }

    /// Mints a join token signed with the server's keys, valid for an hour.
    pub fn token(&self, room: &str, identity: &str) -> Result<String> {
        self.shared
            .config
            .keys
            .mint(room, identity, None, Duration::from_secs(3600))
    }

    /// Tells every connected client to leave, stops listening, and waits (up to five
    /// seconds) for all sessions to end, then drops the rooms. Returns what is left
    /// (all zero unless a session failed to stop in time).
    pub async fn shutdown(self) -> Stats {
        let _ = self.shared.shutdown.send(true);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.shared.tasks.count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if tokio::time::timeout(Duration::from_secs(2), self.http)
            .await
            .is_err()
        {
            tracing::warn!("http listener did not stop in time");
        }
        self.shared.registry.clear();
        let left = self.shared.registry.stats();
        tracing::info!(?left, "outpost-room stopped");
        left
    }
}

fn token_from(params: &HashMap<String, String>, headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        if let Some(t) = v.strip_prefix("Bearer ") {
            return Some(t.trim().to_owned());
        }
    }
    params.get("access_token").cloned()
}

/// The grant of the request's token, or the reason it is refused.
fn authorize(
    shared: &Shared,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Grant, String> {
    let Some(token) = token_from(params, headers) else {
        return Err("no access token (Authorization: Bearer … or access_token=…)".to_owned());
    };
    shared.config.keys.verify(&token).map_err(|e| match e {
        Error::Unauthorized(reason) => reason,
        other => other.to_string(),
    })
}

fn unauthorized(reason: &str) -> Response {
    tracing::info!(reason, "join refused");
    (StatusCode::UNAUTHORIZED, reason.to_owned()).into_response()
}

async fn rtc(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let grant = match authorize(&shared, &params, &headers) {
        Ok(g) => g,
        Err(reason) => return unauthorized(&reason),
    };
    let reconnect = params
        .get("reconnect")
        .is_some_and(|v| v == "1" || v == "true");
    if reconnect && shared.config.resume_window.is_zero() {
        // Without a resume window the old session ended with its socket; the SDKs
        // fall back to a full rejoin.
        return (
            StatusCode::NOT_FOUND,
            "session resume is not enabled on this server (--resume-window); rejoin",
        )
            .into_response();
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => return e.into_response(),
    };
    if reconnect {
        let sid = params.get("sid").cloned().unwrap_or_default();
        let tasks = shared.tasks.clone();
        return ws
            .max_message_size(shared.config.max_signal_message)
            .max_frame_size(shared.config.max_signal_message)
            .on_upgrade(move |socket| {
                tasks.track(crate::session::resume(shared, socket, grant, sid))
            });
    }
    let client_protocol = params
        .get("client_protocol")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // The SDKs send `auto_subscribe=0` (or `false`) when the app subscribes by hand;
    // this server subscribes automatically or not at all.
    let auto_subscribe = params
        .get("auto_subscribe")
        .is_none_or(|v| v != "0" && v != "false");
    let tasks = shared.tasks.clone();
    ws.max_message_size(shared.config.max_signal_message)
        .max_frame_size(shared.config.max_signal_message)
        .on_upgrade(move |socket| {
            tasks.track(crate::session::run(
                shared,
                socket,
                grant,
                client_protocol,
                auto_subscribe,
            ))
        })
}

async fn validate(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    match authorize(&shared, &params, &headers) {
        Ok(_) => (StatusCode::OK, "success").into_response(),
        Err(reason) => unauthorized(&reason),
    }
}

async fn single_pc() -> Response {
    (
        StatusCode::NOT_FOUND,
        "single peer connection mode (/rtc/v1) is not implemented; use /rtc",
    )
        .into_response()
}
