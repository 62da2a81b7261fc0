//! The signaling connection, on LiveKit's official `livekit-signaling` client.
//!
//! That crate already does what the official SDKs do on the WebSocket: the URL and
//! query parameters, the `/rtc/v1` → `/rtc` fallback, `rtc/validate` to explain a
//! refused upgrade, the join-response deadline, `Ping`/`Pong` keep-alive with the
//! server's interval and timeout, resume (`reconnect=1&sid=…`) and the queue of
//! requests held during a resume. This module only maps its errors to ours and picks
//! the options a data-only client needs.

use std::time::Duration;

use livekit_signaling::{SignalClient, SignalError, SignalEvents, SignalOptions};

use crate::error::Error;
use crate::proto::{JoinResponse, ReconnectReason, ReconnectResponse, signal_request};

/// Signal protocol version we announce. 15 keeps in-band data channels (16+ changes
/// nothing we use; 18 switches to pre-negotiated channel ids).
const PROTOCOL: u32 = 15;

/// The `sdk` we announce to the server.
pub(crate) const SDK: &str = "outpost";

/// What the engine needs from a connected signal client.
pub(crate) struct Signal {
    client: SignalClient,
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signal").finish_non_exhaustive()
    }
}

/// A message or the end of the signal connection.
pub(crate) type Events = SignalEvents;
pub(crate) use livekit_signaling::SignalEvent as Event;

fn options(
    single_pc: bool,
    connect_timeout: Duration,
    auto_subscribe: bool,
    client_protocol: i32,
) -> SignalOptions {
    let mut o = SignalOptions::default();
    o.auto_subscribe = auto_subscribe;
    o.adaptive_stream = false;
    o.single_peer_connection = single_pc;
    o.connect_timeout = connect_timeout;
    o.protocol_version = PROTOCOL;
    // We read neither compressed streams nor data streams version 2 (client_protocol
    // 2), so we must not advertise them: peers would send us what we cannot read.
    // RPC version 2 (client_protocol 1) we do speak, unless the caller turned it off.
    o.client_capabilities = Vec::new();
    o.client_protocol = client_protocol;
    // Who we are, honestly: livekit-server derives behaviour from the SDK a client
    // names (for "rust" it assumes the official Rust SDK and its versions). "outpost" is
    // no SDK it knows, so it takes us as a generic client (no codec changes mid-track, no
    // SCTP zero checksum; ICE over TCP and Opus as for every client), and the version is
    // plain semver, which it parses (it read "outpost-livekit-0.1.0" as 0.0.0).
    o.sdk_options.sdk = SDK.to_owned();
    o.sdk_options.sdk_version = Some(env!("CARGO_PKG_VERSION").to_owned());
    o
}

/// Maps a signaling error for `url` to ours.
pub(crate) fn map_error(url: &str, e: SignalError) -> Error {
    match e {
        SignalError::UrlParse(reason) => Error::BadUrl {
            url: url.to_owned(),
            reason,
        },
        SignalError::TokenFormat => {
            Error::InvalidArgument("the access token has characters not allowed in a header".into())
        }
        SignalError::Client(status, body) if status.as_u16() == 401 || status.as_u16() == 403 => {
            Error::Unauthorized {
                status: status.as_u16(),
                reason: body,
            }
        }
        SignalError::Handshake { status } if status.as_u16() == 401 || status.as_u16() == 403 => {
            Error::Unauthorized {
                status: status.as_u16(),
                reason: "refused without a reason".into(),
            }
        }
        SignalError::Client(status, body) | SignalError::Server(status, body) => {
            Error::Unreachable {
                url: url.to_owned(),
                reason: format!("HTTP {status}: {body}"),
            }
        }
        SignalError::Handshake { status } => Error::Unreachable {
            url: url.to_owned(),
            reason: format!("WebSocket upgrade answered HTTP {status}"),
        },
        SignalError::Timeout(what) => Error::Unreachable {
            url: url.to_owned(),
            reason: what,
        },
        SignalError::Connection(why) => Error::Unreachable {
            url: url.to_owned(),
            reason: why,
        },
        SignalError::LeaveRequest { reason, .. } => Error::Signal(format!(
            "server sent leave during reconnect: {}",
            reason.as_str_name()
        )),
        other => Error::Signal(other.to_string()),
    }
}

/// Whether a connect error means retrying cannot help.
pub(crate) fn is_permanent(e: &Error) -> bool {
    matches!(
        e,
        Error::BadUrl { .. } | Error::Unauthorized { .. } | Error::InvalidArgument(_)
    )
}

impl Signal {
    /// Joins: opens the WebSocket and waits for the join response.
    pub(crate) async fn connect(
        url: &str,
        token: &str,
        connect_timeout: Duration,
        auto_subscribe: bool,
        client_protocol: i32,
    ) -> Result<(Self, JoinResponse, Events), Error> {
        let (client, join, events) = SignalClient::connect(
            url,
            token,
            options(false, connect_timeout, auto_subscribe, client_protocol),
            None,
        )
        .await
        .map_err(|e| map_error(url, e))?;
        validate_join(&join)?;
        Ok((Self { client }, join, events))
    }

    /// Tries to resume the session on a new WebSocket.
    pub(crate) async fn resume(
        &self,
        url: &str,
        reason: ReconnectReason,
    ) -> Result<ReconnectResponse, Error> {
        self.client
            .restart(reason)
            .await
            .map_err(|e| map_error(url, e))
    }

    /// Releases requests held during a resume.
    pub(crate) async fn resumed(&self) {
        self.client.set_reconnected().await;
    }

    /// Sends a request (held while resuming, for the kinds the official client holds).
    pub(crate) async fn send(&self, msg: signal_request::Message) {
        self.client.send(msg).await;
    }

    /// Closes the WebSocket (the client sends a close frame).
    pub(crate) async fn close(&self) {
        self.client.close().await;
    }
}

/// The official engine aborts on a join response without a room or with a zero ping
/// interval; we refuse it with an error instead.
fn validate_join(join: &JoinResponse) -> Result<(), Error> {
    if join.room.is_none() || join.participant.is_none() {
        return Err(Error::Signal(
            "join response without room or participant".into(),
        ));
    }
    if join.ping_interval <= 0 || join.ping_timeout <= 0 {
        return Err(Error::Signal(format!(
            "join response with ping interval {} s and timeout {} s; both must be positive",
            join.ping_interval, join.ping_timeout
        )));
    }
    Ok(())
}
