//! RPC between participants as LiveKit defines it, both sides, in both versions:
//!
//! - **Version 1**: one data packet each way (`RpcRequest`, `RpcAck`, `RpcResponse`),
//!   payloads limited to [`MAX_PAYLOAD_BYTES`] each way.
//! - **Version 2**: the request payload travels as a text stream on topic
//!   [`REQUEST_TOPIC`] whose attributes carry the request id, method, response
//!   timeout and version; a successful answer as a text stream on
//!   [`RESPONSE_TOPIC`] carrying the request id. Acks and error answers stay version 1
//!   packets. LiveKit sets no RPC limit on these payloads (only the SDKs' 5 GB
//!   data-stream cap); we read at most [`crate::RoomOptions::rpc_max_v2_payload`]
//!   ([`DEFAULT_MAX_V2_PAYLOAD_BYTES`]), checked at the header and while reading. A caller uses
//!   version 2 when the callee advertised `client_protocol` ≥ 1
//!   ([`CLIENT_PROTOCOL_RPC_V2`]) in its join; we advertise it unless
//!   [`crate::RoomOptions::rpc_v2`] is off.
//!
//! - Answering: methods registered with [`crate::Room::register_rpc_method`]. An
//!   incoming request is acknowledged with an `RpcAck` at once, then answered with the
//!   handler's payload (in the request's version) or an [`RpcError`]. The handler runs
//!   in its own task under the caller's `response_timeout` (for version 2 that
//!   includes reading the request stream); when that passes the handler is dropped
//!   and the caller gets `RESPONSE_TIMEOUT` (what the official Python SDK does).
//! - Who may call: anyone, or only the assistant ([`crate::RpcCallers`]); a refused
//!   caller is turned away at its request packet or stream header, before its payload
//!   costs anything, and its answers are rate-limited. Calls in progress are limited
//!   per caller and for all other callers together, and the assistant's own calls do
//!   not count against them, so other participants cannot lock it out.
//! - Calling: [`crate::Room::perform_rpc`] sends the request and waits for the ack
//!   (`max_round_trip_latency`) and then the response (`response_timeout`), with the
//!   official SDKs' errors for each way it can fail.
//!
//! This module holds what both sides share (the errors, the method set, the room's RPC
//! state, sending); `handler` answers calls, `caller` makes them.

mod caller;
mod handler;

pub use caller::PerformRpc;
pub(crate) use caller::perform;
use caller::{Pending, on_response_stream};
use handler::Bucket;
pub(crate) use handler::{on_request, on_stream_header};

use outpost_sync::lock;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::proto::{
    self, RpcAck, RpcErrorPacket, RpcRequest, RpcResponse, data_packet, data_stream, rpc_response,
};
use crate::shared::Shared;
use crate::streams::{Receivers, Sink, StreamKind, StreamOptions, StreamReader, StreamWriter};
use crate::types::RpcCallers;

/// Largest request or response payload of RPC version 1, in bytes (15 KiB), as in the
/// official SDKs. Version 2 has no such limit in LiveKit.
pub const MAX_PAYLOAD_BYTES: usize = 15_360;
/// Largest version 2 payload we read unless [`crate::RoomOptions::rpc_max_v2_payload`]
/// says otherwise (1 MiB): far more than a tool call's arguments, which a model writes,
/// and small enough that a caller cannot make us hold much.
pub const DEFAULT_MAX_V2_PAYLOAD_BYTES: usize = 1 << 20;
/// Longest method name a [`crate::RoomEvent::RpcRefused`] carries; longer ones are cut.
pub const MAX_REFUSED_METHOD_BYTES: usize = 256;
/// Longest error message sent; longer ones are cut (as the official SDKs do).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 256;
/// The `client_protocol` a client advertises when it takes RPC version 2 requests
/// (LiveKit's `CLIENT_PROTOCOL_DATA_STREAM_RPC`).
pub const CLIENT_PROTOCOL_RPC_V2: i32 = 1;
/// Text stream topic of version 2 requests.
pub const REQUEST_TOPIC: &str = "lk.rpc_request";
/// Text stream topic of version 2 successful responses.
pub const RESPONSE_TOPIC: &str = "lk.rpc_response";
/// Version 2 request stream attributes (the response stream carries only the id).
const ATTR_REQUEST_ID: &str = "lk.rpc_request_id";
const ATTR_METHOD: &str = "lk.rpc_request_method";
const ATTR_RESPONSE_TIMEOUT_MS: &str = "lk.rpc_request_response_timeout_ms";
const ATTR_VERSION: &str = "lk.rpc_request_version";
/// The `version` of a request packet, and of a request stream's version attribute.
const VERSION_V1: u32 = 1;
const VERSION_V2: u32 = 2;
/// Incoming requests the assistant may have in progress at once, and those of all other
/// callers together; more are answered with an error at once.
const MAX_RUNNING: usize = 64;
/// Incoming requests one caller other than the assistant may have in progress at once.
const MAX_RUNNING_PER_CALLER: usize = 16;
/// Refusals answered to one caller at once; then [`REFUSALS_PER_SEC`] a second, the rest
/// dropped unanswered, so a flood of refused calls does not become a flood of answers.
#[doc(hidden)]
pub const REFUSAL_BURST_ANSWERS: u32 = 10;
const REFUSAL_BURST: f64 = REFUSAL_BURST_ANSWERS as f64;
/// See [`REFUSAL_BURST_ANSWERS`].
const REFUSALS_PER_SEC: f64 = 2.0;
/// Callers whose refusal budget is remembered; beyond it, refusals are not answered.
const MAX_REFUSAL_BUCKETS: usize = 1024;
/// Used when a request carries no response timeout.
const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(15);

/// LiveKit's built-in RPC error codes (1001–1999 are reserved for them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RpcErrorCode {
    /// 1500: the handler failed without an RPC error of its own (or panicked).
    ApplicationError,
    /// 1501: no ack arrived within `max_round_trip_latency`.
    ConnectionTimeout,
    /// 1502: no response within the response timeout.
    ResponseTimeout,
    /// 1503: the other side left (or we did) before answering.
    RecipientDisconnected,
    /// 1504: the handler's response is over [`MAX_PAYLOAD_BYTES`] (version 1).
    ResponsePayloadTooLarge,
    /// 1505: the request could not be sent.
    SendFailed,
    /// 1400: no handler for this method at the destination.
    UnsupportedMethod,
    /// 1401: no such participant.
    RecipientNotFound,
    /// 1402: the request payload is over [`MAX_PAYLOAD_BYTES`] (version 1).
    RequestPayloadTooLarge,
    /// 1403: the server is older than 1.8.0.
    UnsupportedServer,
    /// 1404: a request of an RPC version we do not speak.
    UnsupportedVersion,
}

impl RpcErrorCode {
    /// Every built-in code.
    pub const ALL: [RpcErrorCode; 11] = [
        Self::ApplicationError,
        Self::ConnectionTimeout,
        Self::ResponseTimeout,
        Self::RecipientDisconnected,
        Self::ResponsePayloadTooLarge,
        Self::SendFailed,
        Self::UnsupportedMethod,
        Self::RecipientNotFound,
        Self::RequestPayloadTooLarge,
        Self::UnsupportedServer,
        Self::UnsupportedVersion,
    ];

    /// The numeric code on the wire.
    pub fn code(self) -> u32 {
        match self {
            Self::ApplicationError => 1500,
            Self::ConnectionTimeout => 1501,
            Self::ResponseTimeout => 1502,
            Self::RecipientDisconnected => 1503,
            Self::ResponsePayloadTooLarge => 1504,
            Self::SendFailed => 1505,
            Self::UnsupportedMethod => 1400,
            Self::RecipientNotFound => 1401,
            Self::RequestPayloadTooLarge => 1402,
            Self::UnsupportedServer => 1403,
            Self::UnsupportedVersion => 1404,
        }
    }

    /// The message the official SDKs send with this code.
    pub fn message(self) -> &'static str {
        match self {
            Self::ApplicationError => "Application error in method handler",
            Self::ConnectionTimeout => "Connection timeout",
            Self::ResponseTimeout => "Response timeout",
            Self::RecipientDisconnected => "Recipient disconnected",
            Self::ResponsePayloadTooLarge => "Response payload too large",
            Self::SendFailed => "Failed to send",
            Self::UnsupportedMethod => "Method not supported at destination",
            Self::RecipientNotFound => "Recipient not found",
            Self::RequestPayloadTooLarge => "Request payload too large",
            Self::UnsupportedServer => "RPC not supported by server",
            Self::UnsupportedVersion => "Unsupported RPC version",
        }
    }

    /// The built-in code with this number, if it is one.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }
}

/// An RPC error: what a handler returns to fail a call, and what a call that failed
/// returns. Travels as `{code, message, data}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RPC error {code}: {message}")]
pub struct RpcError {
    /// Application codes are free; 1001–1999 are LiveKit's ([`RpcErrorCode`]).
    pub code: u32,
    /// Human-readable; at most [`MAX_ERROR_MESSAGE_BYTES`] (longer is cut).
    pub message: String,
    /// Extra data (JSON recommended); at most [`MAX_PAYLOAD_BYTES`] (longer is cut).
    pub data: Option<String>,
}

impl RpcError {
    /// An error with any code; message and data are cut to their limits at character
    /// boundaries.
    pub fn new(code: u32, message: impl Into<String>, data: Option<String>) -> Self {
        Self {
            code,
            message: truncate(message.into(), MAX_ERROR_MESSAGE_BYTES),
            data: data.map(|d| truncate(d, MAX_PAYLOAD_BYTES)),
        }
    }

    /// A built-in error with its standard message.
    pub fn built_in(code: RpcErrorCode, data: Option<String>) -> Self {
        Self::new(code.code(), code.message(), data)
    }

    /// The built-in code, when this is one.
    pub fn built_in_code(&self) -> Option<RpcErrorCode> {
        RpcErrorCode::from_code(self.code)
    }

    fn from_packet(e: RpcErrorPacket) -> Self {
        let data = (!e.data.is_empty()).then_some(e.data);
        Self::new(e.code, e.message, data)
    }

    fn to_packet(&self) -> RpcErrorPacket {
        RpcErrorPacket {
            code: self.code,
            message: self.message.clone(),
            data: self.data.clone().unwrap_or_default(),
        }
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// One incoming call, as a handler gets it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RpcInvocation {
    /// The caller's request id (the same on both sides).
    pub request_id: String,
    /// Who called (stamped by the server, not claimed by the caller).
    pub caller_identity: String,
    /// The method called.
    pub method: String,
    /// The request payload.
    pub payload: String,
    /// How long the caller said it waits for the response.
    pub response_timeout: Duration,
    /// When the handler is dropped and the caller answered `RESPONSE_TIMEOUT`
    /// (arrival + `response_timeout`).
    pub deadline: Instant,
}

/// A future a handler returns.
pub type RpcFuture = Pin<Box<dyn Future<Output = Result<String, RpcError>> + Send>>;
type Handler = Arc<dyn Fn(RpcInvocation) -> RpcFuture + Send + Sync>;

/// A room's RPC method handlers. Given to [`crate::Room::connect`] through
/// [`crate::RoomOptions::rpc_methods`], they answer from the first packet the room
/// delivers: a participant that calls the moment we join (a LiveKit agent calling a
/// frontend tool as soon as it sees us) gets an answer, never `UNSUPPORTED_METHOD`
/// for a method that was about to be registered. Cheap to clone: clones share one set,
/// and the room keeps using the set it was given, so methods added or removed here
/// later take effect at once (as with [`crate::Room::register_rpc_method`]).
#[derive(Clone, Default)]
pub struct RpcMethods {
    handlers: Arc<Mutex<HashMap<String, Handler>>>,
}

impl RpcMethods {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the handler for `method`; see
    /// [`crate::Room::register_rpc_method`] for how calls are answered.
    pub fn register<F, Fut>(&self, method: impl Into<String>, f: F)
    where
        F: Fn(RpcInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, RpcError>> + Send + 'static,
    {
        lock(&self.handlers).insert(method.into(), handler(f));
    }

    /// Removes the handler for `method`; later calls get `UNSUPPORTED_METHOD`.
    pub fn unregister(&self, method: &str) {
        lock(&self.handlers).remove(method);
    }

    /// The registered method names, sorted.
    pub fn methods(&self) -> Vec<String> {
        let mut m: Vec<String> = lock(&self.handlers).keys().cloned().collect();
        m.sort();
        m
    }

    /// Whether no method is registered.
    pub fn is_empty(&self) -> bool {
        lock(&self.handlers).is_empty()
    }
}

impl std::fmt::Debug for RpcMethods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcMethods")
            .field("methods", &self.methods())
            .finish()
    }
}

/// RPC state of one room, shared by the handle and the engine, over the room's shared
/// state (its send queue and roster).
pub(crate) struct Rpc {
    shared: Arc<Shared>,
    handlers: RpcMethods,
    pending: Mutex<HashMap<String, Pending>>,
    /// Incoming requests being handled, by (caller, request id).
    running: Mutex<HashMap<(String, String), tokio::task::AbortHandle>>,
    /// `ServerInfo.version` from the last join response.
    server_version: Mutex<Option<String>>,
    /// Whether calls may use version 2 (and we advertise it).
    v2: bool,
    /// Who may call, and what a refused caller is told.
    callers: RpcCallers,
    refusal: RpcError,
    /// Largest version 2 payload read, in bytes.
    max_v2_payload: u64,
    /// Answered refusals per caller.
    refusals: Mutex<HashMap<String, Bucket>>,
}

/// A call turned away because its caller may not call (reported as
/// [`crate::RoomEvent::RpcRefused`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub caller: String,
    pub method: String,
}

impl std::fmt::Debug for Rpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rpc")
            .field("methods", &self.handlers.methods())
            .field("pending", &lock(&self.pending).len())
            .field("running", &lock(&self.running).len())
            .finish()
    }
}

/// Whether `version` (`major.minor.patch`) is at least 1.8.0, the first server
/// version the official SDKs call RPC on. An unreadable version counts as new enough.
fn server_supports_rpc(version: &str) -> bool {
    let mut parts = version
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (1, 8),
        _ => true,
    }
}

/// What of the room's options the RPC layer is built from (see
/// [`crate::RoomOptions::rpc_methods`] and the options after it).
#[derive(Debug, Clone)]
pub(crate) struct RpcSettings {
    pub methods: RpcMethods,
    pub v2: bool,
    pub callers: RpcCallers,
    pub refusal: RpcError,
    pub max_v2_payload: usize,
}

impl Rpc {
    /// The room's RPC state from its settings: answering from `methods` (shared, not
    /// copied), calling with version 2 towards peers that take it when `v2` is set.
    pub(crate) fn new(settings: RpcSettings, shared: Arc<Shared>) -> Self {
        Self {
            shared,
            handlers: settings.methods,
            pending: Mutex::default(),
            running: Mutex::default(),
            server_version: Mutex::default(),
            v2: settings.v2,
            callers: settings.callers,
            refusal: settings.refusal,
            max_v2_payload: u64::try_from(settings.max_v2_payload).unwrap_or(u64::MAX),
            refusals: Mutex::default(),
        }
    }

    /// The room state this works over.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The method set, shared.
    pub(crate) fn methods(&self) -> RpcMethods {
        self.handlers.clone()
    }

    pub(crate) fn register(&self, method: String, handler: Handler) {
        lock(&self.handlers.handlers).insert(method, handler);
    }

    pub(crate) fn unregister(&self, method: &str) {
        self.handlers.unregister(method);
    }

    pub(crate) fn set_server_version(&self, version: Option<String>) {
        *lock(&self.server_version) = version.filter(|v| !v.is_empty());
    }

    /// `identity` left: its pending calls fail with `RECIPIENT_DISCONNECTED`, and the
    /// requests it made stop (nobody is left to answer).
    pub(crate) fn participant_left(&self, identity: &str) {
        lock(&self.refusals).remove(identity);
        lock(&self.pending).retain(|_, p| p.destination != identity);
        lock(&self.running).retain(|(caller, _), task| {
            if caller == identity {
                task.abort();
                false
            } else {
                true
            }
        });
    }

    /// The room closed: every pending call fails and every handler stops.
    pub(crate) fn close(&self) {
        lock(&self.pending).clear();
        for (_, task) in lock(&self.running).drain() {
            task.abort();
        }
    }
}

fn local_identity(rpc: &Rpc) -> String {
    rpc.shared
        .roster()
        .local
        .as_ref()
        .map(|l| l.identity.clone())
        .unwrap_or_default()
}

/// Queues an RPC packet to `to` on the reliable channel.
fn send(rpc: &Rpc, value: data_packet::Value, to: &str) -> crate::Result<()> {
    let identity = local_identity(rpc);
    let to = to.to_owned();
    rpc.shared.outbox.push(
        move |seq| {
            let mut p = proto::rpc_packet(value, &to);
            p.sequence = seq;
            p.participant_identity = identity;
            proto::encode_data_packet(&p)
        },
        None,
    )
}

/// The version a request came in, and so the one its answer goes out in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    /// `RpcResponse` packets, payload at most [`MAX_PAYLOAD_BYTES`].
    V1,
    /// Success as a text stream on [`RESPONSE_TOPIC`]; errors as `RpcResponse` packets.
    V2,
}

/// Sends `text` as one text stream on `topic` to `to`.
async fn send_stream(
    rpc: &Rpc,
    to: &str,
    topic: &str,
    attributes: HashMap<String, String>,
    text: &str,
) -> crate::Result<()> {
    let sink = Sink {
        outbox: rpc.shared.outbox.clone(),
        identity: local_identity(rpc),
    };
    let options = StreamOptions {
        topic: topic.to_owned(),
        destination_identities: vec![to.to_owned()],
        total_length: Some(u64::try_from(text.len()).unwrap_or(u64::MAX)),
        attributes,
        ..StreamOptions::default()
    };
    let mut w = StreamWriter::open(sink, StreamKind::Text, options)?;
    w.write_text(text).await?;
    w.close().await
}

/// Reads a version 2 payload; a stream over the cap is `too_large`.
async fn read_payload(reader: StreamReader, too_large: RpcErrorCode) -> Result<String, RpcError> {
    let id = reader.info.id.clone();
    reader.read_to_string().await.map_err(|e| {
        tracing::info!(stream = %id, "RPC stream failed: {e}");
        match e {
            crate::Error::StreamTooLarge { .. } => {
                RpcError::built_in(too_large, Some(e.to_string()))
            }
            e => RpcError::built_in(
                RpcErrorCode::ApplicationError,
                Some(format!("could not read the stream: {e}")),
            ),
        }
    })
}

/// Wraps a handler closure for [`Rpc::register`].
pub(crate) fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(RpcInvocation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, RpcError>> + Send + 'static,
{
    Arc::new(move |inv| Box::pin(f(inv)) as RpcFuture)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
