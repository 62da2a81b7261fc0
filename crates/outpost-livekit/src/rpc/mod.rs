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

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::engine::Shared;
use crate::proto::{
    self, RpcAck, RpcErrorPacket, RpcRequest, RpcResponse, data_packet, data_stream, rpc_response,
};
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

/// An outgoing call for [`crate::Room::perform_rpc`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PerformRpc {
    /// Who to call.
    pub destination_identity: String,
    /// Method name.
    pub method: String,
    /// Request payload (at most [`MAX_PAYLOAD_BYTES`] when the call goes out as
    /// version 1; no limit with version 2).
    pub payload: String,
    /// How long to wait for the response once the request is acknowledged
    /// (default 15 s, as the official SDKs).
    pub response_timeout: Duration,
    /// How long to wait for the acknowledgement (default 7 s, as the official SDKs).
    /// The request tells the handler `response_timeout − max_round_trip_latency`
    /// (at least 1 s), so its answer arrives before we stop waiting.
    pub max_round_trip_latency: Duration,
}

impl PerformRpc {
    /// A call with the default timeouts.
    pub fn new(
        destination_identity: impl Into<String>,
        method: impl Into<String>,
        payload: impl Into<String>,
    ) -> Self {
        Self {
            destination_identity: destination_identity.into(),
            method: method.into(),
            payload: payload.into(),
            response_timeout: Duration::from_secs(15),
            max_round_trip_latency: Duration::from_secs(7),
        }
    }

    /// Sets the response timeout.
    #[must_use]
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets the acknowledgement timeout.
    #[must_use]
    pub fn max_round_trip_latency(mut self, latency: Duration) -> Self {
        self.max_round_trip_latency = latency;
        self
    }
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

/// An outgoing call waiting for its ack and response.
struct Pending {
    destination: String,
    ack: Option<oneshot::Sender<()>>,
    response: Option<oneshot::Sender<Result<String, RpcError>>>,
}

/// A caller's budget of answered refusals (a token bucket).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// RPC state of one room, shared by the handle and the engine.
pub(crate) struct Rpc {
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

impl Default for Rpc {
    fn default() -> Self {
        Self::from_options(&crate::RoomOptions {
            rpc_v2: false,
            ..crate::RoomOptions::default()
        })
    }
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Aborts the handler task when the request's task ends (timeout, room closed).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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

impl Rpc {
    /// The room's RPC state from its options: answering from `rpc_methods` (shared, not
    /// copied), calling with version 2 towards peers that take it when `rpc_v2` is set.
    pub(crate) fn from_options(opts: &crate::RoomOptions) -> Self {
        Self {
            handlers: opts.rpc_methods.clone(),
            pending: Mutex::default(),
            running: Mutex::default(),
            server_version: Mutex::default(),
            v2: opts.rpc_v2,
            callers: opts.rpc_callers,
            refusal: opts.rpc_refusal.clone(),
            max_v2_payload: u64::try_from(opts.rpc_max_v2_payload).unwrap_or(u64::MAX),
            refusals: Mutex::default(),
        }
    }

    /// Whether a refusal to `caller` may be answered now (and spends one from its budget).
    fn answer_refusal(&self, caller: &str, now: Instant) -> bool {
        let mut buckets = lock(&self.refusals);
        if !buckets.contains_key(caller) && buckets.len() >= MAX_REFUSAL_BUCKETS {
            // Forget the callers whose budget is whole again; they cost nothing to forget.
            let whole = REFUSAL_BURST / REFUSALS_PER_SEC;
            buckets.retain(|_, b| now.saturating_duration_since(b.at).as_secs_f64() < whole);
            if buckets.len() >= MAX_REFUSAL_BUCKETS {
                return false;
            }
        }
        let b = buckets.entry(caller.to_owned()).or_insert(Bucket {
            tokens: REFUSAL_BURST,
            at: now,
        });
        let refill = now.saturating_duration_since(b.at).as_secs_f64() * REFUSALS_PER_SEC;
        b.tokens = (b.tokens + refill).min(REFUSAL_BURST);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
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

    /// An `RpcAck` from `sender`: only the participant we called may acknowledge.
    pub(crate) fn on_ack(&self, sender: &str, ack: RpcAck) {
        let mut pending = lock(&self.pending);
        match pending.get_mut(&ack.request_id) {
            Some(p) if p.destination == sender => {
                if let Some(tx) = p.ack.take() {
                    let _ = tx.send(());
                }
            }
            Some(_) => {
                tracing::warn!(request = %ack.request_id, from = sender, "RPC ack from a participant we did not call; ignored")
            }
            None => {
                tracing::debug!(request = %ack.request_id, "RPC ack for an unknown request; ignored")
            }
        }
    }

    /// An `RpcResponse` from `sender`. A response without its ack counts as both.
    /// Late responses (the call gave up) are ignored.
    pub(crate) fn on_response(&self, sender: &str, resp: RpcResponse) {
        if !self.expects(sender, &resp.request_id) {
            return;
        }
        let result = match resp.value {
            Some(rpc_response::Value::Payload(s)) => Ok(s),
            Some(rpc_response::Value::Error(e)) => Err(RpcError::from_packet(e)),
            Some(rpc_response::Value::CompressedPayload(_)) => Err(RpcError::built_in(
                RpcErrorCode::ApplicationError,
                Some("compressed RPC payloads are not supported".into()),
            )),
            None => Ok(String::new()),
        };
        self.complete(sender, &resp.request_id, result);
    }

    /// Whether `request_id` is a call of ours to `sender` still waiting for its answer.
    fn expects(&self, sender: &str, request_id: &str) -> bool {
        match lock(&self.pending).get(request_id) {
            None => {
                tracing::debug!(request = %request_id, "RPC response for an unknown or expired request; ignored");
                false
            }
            Some(p) if p.destination != sender => {
                tracing::warn!(request = %request_id, from = sender, "RPC response from a participant we did not call; ignored");
                false
            }
            Some(_) => true,
        }
    }

    /// Ends the call `request_id` to `sender` with `result`; the answer counts as the
    /// ack too. Ignored when the call is over or went to someone else.
    fn complete(&self, sender: &str, request_id: &str, result: Result<String, RpcError>) {
        if !self.expects(sender, request_id) {
            return;
        }
        let Some(mut p) = lock(&self.pending).remove(request_id) else {
            return;
        };
        if let Some(tx) = p.ack.take() {
            let _ = tx.send(());
        }
        if let Some(tx) = p.response.take() {
            let _ = tx.send(result);
        }
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

fn local_identity(shared: &Shared) -> String {
    shared
        .roster()
        .local
        .as_ref()
        .map(|l| l.identity.clone())
        .unwrap_or_default()
}

/// Queues an RPC packet to `to` on the reliable channel.
fn send(shared: &Shared, value: data_packet::Value, to: &str) -> crate::Result<()> {
    let identity = local_identity(shared);
    let to = to.to_owned();
    shared.outbox.push(
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

/// Answers `request_id` from `caller` with an `RpcResponse` packet.
fn respond_packet(
    shared: &Shared,
    caller: &str,
    request_id: String,
    result: Result<String, RpcError>,
) {
    let value = match result {
        Ok(payload) if payload.len() > MAX_PAYLOAD_BYTES => {
            tracing::info!(request = %request_id, size = payload.len(), "RPC response over the payload limit; answering with an error");
            rpc_response::Value::Error(
                RpcError::built_in(RpcErrorCode::ResponsePayloadTooLarge, None).to_packet(),
            )
        }
        Ok(payload) => rpc_response::Value::Payload(payload),
        Err(e) => rpc_response::Value::Error(e.to_packet()),
    };
    let resp = RpcResponse {
        request_id,
        value: Some(value),
    };
    if let Err(e) = send(shared, data_packet::Value::RpcResponse(resp), caller) {
        tracing::debug!("RPC response not sent: {e}");
    }
}

/// Sends `text` as one text stream on `topic` to `to`.
async fn send_stream(
    shared: &Shared,
    to: &str,
    topic: &str,
    attributes: HashMap<String, String>,
    text: &str,
) -> crate::Result<()> {
    let sink = Sink {
        outbox: shared.outbox.clone(),
        identity: local_identity(shared),
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

/// Answers `request_id` from `caller` in `version`.
async fn respond(
    shared: &Shared,
    caller: &str,
    request_id: String,
    version: Version,
    result: Result<String, RpcError>,
) {
    match (version, result) {
        (Version::V2, Ok(payload)) => {
            let attributes = HashMap::from([(ATTR_REQUEST_ID.to_owned(), request_id.clone())]);
            if let Err(e) = send_stream(shared, caller, RESPONSE_TOPIC, attributes, &payload).await
            {
                tracing::info!(request = %request_id, "RPC response stream not sent: {e}");
                respond_packet(
                    shared,
                    caller,
                    request_id,
                    Err(RpcError::built_in(
                        RpcErrorCode::SendFailed,
                        Some(e.to_string()),
                    )),
                );
            }
        }
        (_, result) => respond_packet(shared, caller, request_id, result),
    }
}

/// Where a request's payload is.
enum Payload {
    /// In the request packet (version 1).
    Inline(String),
    /// In the request stream, still to be read (version 2).
    Stream(Box<StreamReader>),
}

/// A request that passed the checks every version shares.
struct Request {
    id: String,
    method: String,
    response_timeout: Duration,
    version: Version,
    payload: Payload,
}

/// Whether `caller` may call our methods now.
fn may_call(shared: &Shared, caller: &str) -> bool {
    match shared.rpc.callers {
        RpcCallers::Anyone => true,
        RpcCallers::Assistant => is_assistant(shared, caller),
    }
}

fn is_assistant(shared: &Shared, caller: &str) -> bool {
    shared
        .roster()
        .assistant
        .as_ref()
        .is_some_and(|a| a.identity == caller)
}

/// Turns away request `id` of `caller`, who may not call: ack and the refusal while its
/// budget lasts, then silence.
fn refuse_caller(shared: &Shared, caller: &str, id: &str, method: &str) -> Refused {
    tracing::debug!(request = %id, from = caller, "RPC call from a participant that may not call; refused");
    if shared.rpc.answer_refusal(caller, Instant::now()) && ack(shared, caller, id) {
        respond_packet(
            shared,
            caller,
            id.to_owned(),
            Err(shared.rpc.refusal.clone()),
        );
    }
    Refused {
        caller: caller.to_owned(),
        method: truncate(method.to_owned(), MAX_REFUSED_METHOD_BYTES),
    }
}

/// An incoming version 1 `RpcRequest` from `caller` (the identity the server stamped):
/// ack at once, then answer from the handler, or with an error when the request cannot
/// be served. A caller that may not call is refused (and returned).
pub(crate) fn on_request(shared: &Arc<Shared>, caller: &str, req: RpcRequest) -> Option<Refused> {
    if caller.is_empty() || req.id.is_empty() {
        tracing::debug!("RPC request without a caller identity or id; ignored");
        return None;
    }
    if !may_call(shared, caller) {
        return Some(refuse_caller(shared, caller, &req.id, &req.method));
    }
    if !ack(shared, caller, &req.id) {
        return None;
    }
    let refuse = |code: RpcErrorCode, data: Option<String>| {
        respond_packet(
            shared,
            caller,
            req.id.clone(),
            Err(RpcError::built_in(code, data)),
        );
    };
    if req.version != VERSION_V1 {
        refuse(RpcErrorCode::UnsupportedVersion, None);
        return None;
    }
    if req.payload.is_empty() && !req.compressed_payload.is_empty() {
        // We do not advertise compression, so a compressed request is a peer's bug.
        refuse(
            RpcErrorCode::ApplicationError,
            Some("compressed RPC payloads are not supported".into()),
        );
        return None;
    }
    if req.payload.len() > MAX_PAYLOAD_BYTES {
        refuse(RpcErrorCode::RequestPayloadTooLarge, None);
        return None;
    }
    let response_timeout = if req.response_timeout_ms == 0 {
        DEFAULT_RESPONSE_TIMEOUT
    } else {
        Duration::from_millis(u64::from(req.response_timeout_ms))
    };
    serve(
        shared,
        caller,
        Request {
            id: req.id,
            method: req.method,
            response_timeout,
            version: Version::V1,
            payload: Payload::Inline(req.payload),
        },
    );
    None
}

/// Sends the ack for `request_id`; false when it could not be queued (the room is
/// closed, so nothing more can be sent either).
fn ack(shared: &Shared, caller: &str, request_id: &str) -> bool {
    let ack = RpcAck {
        request_id: request_id.to_owned(),
    };
    match send(shared, data_packet::Value::RpcAck(ack), caller) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("RPC ack not sent: {e}");
            false
        }
    }
}

/// The header of a stream on [`REQUEST_TOPIC`] or [`RESPONSE_TOPIC`] from `sender`
/// (`assistant`: whether the room takes it for the assistant): a version 2 request or
/// response. Everything that can be decided from the header is decided before the stream
/// is opened in `receivers`, so a stream we will not read takes no slot and buffers
/// nothing (its chunks find no stream and are dropped); one we read is capped at
/// [`crate::RoomOptions::rpc_max_v2_payload`]. Never shown to the application, as the
/// official SDKs do not show them either. A caller that may not call is refused (and
/// returned).
pub(crate) fn on_stream_header(
    shared: &Arc<Shared>,
    receivers: &mut Receivers,
    sender: &str,
    assistant: bool,
    h: data_stream::Header,
    now: Instant,
) -> Option<Refused> {
    if matches!(
        h.content_header,
        Some(data_stream::header::ContentHeader::ByteHeader(_))
    ) {
        tracing::warn!(stream = %h.stream_id, topic = %h.topic, from = sender, "byte stream on an RPC topic; ignored");
        return None;
    }
    let Some(request_id) = h
        .attributes
        .get(ATTR_REQUEST_ID)
        .filter(|id| !id.is_empty())
        .cloned()
    else {
        tracing::warn!(stream = %h.stream_id, topic = %h.topic, from = sender, "RPC stream without {ATTR_REQUEST_ID}; ignored (there is nobody to answer)");
        return None;
    };
    if sender.is_empty() {
        tracing::debug!("RPC stream without a sender identity; ignored");
        return None;
    }
    let cap = shared.rpc.max_v2_payload;
    let announced = h.total_length.filter(|t| *t > cap);
    if h.topic == RESPONSE_TOPIC {
        if !shared.rpc.expects(sender, &request_id) {
            return None;
        }
        if let Some(t) = announced {
            let why = format!("the response announces {t} bytes; this client reads at most {cap}");
            tracing::info!(request = %request_id, "RPC response stream refused: {why}");
            let e = RpcError::built_in(RpcErrorCode::ResponsePayloadTooLarge, Some(why));
            shared.rpc.complete(sender, &request_id, Err(e));
            return None;
        }
        let reader = receivers.on_header_capped(sender, assistant, h, now, cap);
        on_response_stream(shared, sender, request_id, reader);
        return None;
    }
    if !may_call(shared, sender) {
        let method = h.attributes.get(ATTR_METHOD).map_or("", String::as_str);
        return Some(refuse_caller(shared, sender, &request_id, method));
    }
    if !ack(shared, sender, &request_id) {
        return None;
    }
    let refuse = |code: RpcErrorCode, data: String| {
        tracing::info!(request = %request_id, from = sender, "RPC request stream refused: {data}");
        respond_packet(
            shared,
            sender,
            request_id.clone(),
            Err(RpcError::built_in(code, Some(data))),
        );
        None
    };
    let (method, response_timeout) = match request_attributes(&h.attributes) {
        Ok(r) => r,
        Err((code, data)) => return refuse(code, data),
    };
    if let Some(t) = announced {
        return refuse(
            RpcErrorCode::RequestPayloadTooLarge,
            format!("the request announces {t} bytes; this client reads at most {cap}"),
        );
    }
    let reader = receivers.on_header_capped(sender, assistant, h, now, cap);
    serve(
        shared,
        sender,
        Request {
            id: request_id,
            method,
            response_timeout,
            version: Version::V2,
            payload: Payload::Stream(Box::new(reader)),
        },
    );
    None
}

/// A version 2 request's method and response timeout from its stream attributes, or the
/// error to answer with.
fn request_attributes(
    attrs: &HashMap<String, String>,
) -> Result<(String, Duration), (RpcErrorCode, String)> {
    match attrs.get(ATTR_VERSION).map(|v| v.parse::<u32>()) {
        Some(Ok(VERSION_V2)) => {}
        Some(_) => {
            return Err((
                RpcErrorCode::UnsupportedVersion,
                format!(
                    "{ATTR_VERSION} is {:?}; this client speaks version 2 on request streams",
                    attrs.get(ATTR_VERSION).map(String::as_str).unwrap_or("")
                ),
            ));
        }
        None => {
            return Err((
                RpcErrorCode::UnsupportedVersion,
                format!("the request stream has no {ATTR_VERSION} attribute"),
            ));
        }
    }
    let Some(method) = attrs.get(ATTR_METHOD).cloned() else {
        return Err((
            RpcErrorCode::UnsupportedMethod,
            format!("the request stream has no {ATTR_METHOD} attribute"),
        ));
    };
    let response_timeout = match attrs.get(ATTR_RESPONSE_TIMEOUT_MS) {
        None => DEFAULT_RESPONSE_TIMEOUT,
        Some(v) => match v.parse::<u64>() {
            Ok(0) => DEFAULT_RESPONSE_TIMEOUT,
            Ok(ms) => Duration::from_millis(ms.min(u64::from(u32::MAX))),
            Err(_) => {
                return Err((
                    RpcErrorCode::ApplicationError,
                    format!("{ATTR_RESPONSE_TIMEOUT_MS} is not a number of milliseconds: {v:?}"),
                ));
            }
        },
    };
    Ok((method, response_timeout))
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

/// A version 2 response: read it and end the call it answers.
fn on_response_stream(shared: &Arc<Shared>, sender: &str, id: String, reader: StreamReader) {
    let shared = shared.clone();
    let sender = sender.to_owned();
    tokio::spawn(async move {
        let result = read_payload(reader, RpcErrorCode::ResponsePayloadTooLarge).await;
        shared.rpc.complete(&sender, &id, result);
    });
}

/// Runs the handler for an acknowledged request and answers it; refuses it at once
/// when it has no handler or too many are running: [`MAX_RUNNING`] of the assistant's,
/// [`MAX_RUNNING_PER_CALLER`] of any other caller's, [`MAX_RUNNING`] of all other
/// callers' together (so they never take the assistant's room).
fn serve(shared: &Arc<Shared>, caller: &str, req: Request) {
    let refuse = |code: RpcErrorCode, data: Option<String>| {
        respond_packet(
            shared,
            caller,
            req.id.clone(),
            Err(RpcError::built_in(code, data)),
        );
    };
    let Some(handler) = lock(&shared.rpc.handlers.handlers)
        .get(&req.method)
        .cloned()
    else {
        return refuse(RpcErrorCode::UnsupportedMethod, None);
    };
    let key = (caller.to_owned(), req.id.clone());
    let assistant = shared
        .roster()
        .assistant
        .as_ref()
        .map(|a| a.identity.clone());
    let mut running = lock(&shared.rpc.running);
    let mine = running.keys().filter(|(c, _)| c == caller).count();
    let full = if assistant.as_deref() == Some(caller) {
        (mine >= MAX_RUNNING).then(|| format!("{MAX_RUNNING} of your RPC requests are in progress"))
    } else if mine >= MAX_RUNNING_PER_CALLER {
        Some(format!(
            "{MAX_RUNNING_PER_CALLER} of your RPC requests are in progress"
        ))
    } else {
        let others = running
            .keys()
            .filter(|(c, _)| Some(c) != assistant.as_ref())
            .count();
        (others >= MAX_RUNNING).then(|| format!("more than {MAX_RUNNING} RPC requests in progress"))
    };
    if let Some(why) = full {
        drop(running);
        return refuse(RpcErrorCode::ApplicationError, Some(why));
    }
    if running.contains_key(&key) {
        tracing::debug!(request = %req.id, "duplicate RPC request; ignored");
        return;
    }
    let deadline = Instant::now() + req.response_timeout;
    let shared2 = shared.clone();
    let caller2 = caller.to_owned();
    let key2 = key.clone();
    let request_id = req.id.clone();
    let task = tokio::spawn(async move {
        let Request {
            id,
            method,
            response_timeout,
            version,
            payload,
        } = req;
        let work = async move {
            let payload = match payload {
                Payload::Inline(p) => p,
                Payload::Stream(reader) => {
                    read_payload(*reader, RpcErrorCode::RequestPayloadTooLarge).await?
                }
            };
            let invocation = RpcInvocation {
                request_id: id,
                caller_identity: caller2.clone(),
                method,
                payload,
                response_timeout,
                deadline,
            };
            // The handler runs in its own task so that a panic in it becomes an
            // APPLICATION_ERROR answer instead of taking this task down unanswered.
            let work = tokio::spawn(handler(invocation));
            let _guard = AbortOnDrop(work.abort_handle());
            match work.await {
                Ok(result) => result,
                Err(e) => {
                    tracing::warn!(request = %request_id, "RPC handler failed: {e}");
                    Err(RpcError::built_in(RpcErrorCode::ApplicationError, None))
                }
            }
        };
        let result = tokio::time::timeout_at(deadline, work)
            .await
            .unwrap_or_else(|_| Err(RpcError::built_in(RpcErrorCode::ResponseTimeout, None)));
        respond(&shared2, &key2.0, key2.1.clone(), version, result).await;
        lock(&shared2.rpc.running).remove(&key2);
    });
    running.insert(key, task.abort_handle());
}

/// Whether calls to `destination` go out as version 2.
fn use_v2(shared: &Shared, destination: &str) -> bool {
    shared.rpc.v2
        && shared
            .roster()
            .remote
            .iter()
            .find(|p| p.identity == destination)
            .is_some_and(|p| p.client_protocol >= CLIENT_PROTOCOL_RPC_V2)
}

/// Calls `call.method` on `call.destination_identity`; see [`crate::Room::perform_rpc`].
pub(crate) async fn perform(shared: &Shared, call: PerformRpc) -> Result<String, RpcError> {
    if let Some(v) = lock(&shared.rpc.server_version).clone() {
        if !server_supports_rpc(&v) {
            return Err(RpcError::built_in(RpcErrorCode::UnsupportedServer, None));
        }
    }
    let v2 = use_v2(shared, &call.destination_identity);
    if !v2 && call.payload.len() > MAX_PAYLOAD_BYTES {
        return Err(RpcError::built_in(
            RpcErrorCode::RequestPayloadTooLarge,
            None,
        ));
    }
    let id = format!("RPC_{}", nanoid::nanoid!(20));
    let (ack_tx, ack_rx) = oneshot::channel();
    let (resp_tx, resp_rx) = oneshot::channel();
    lock(&shared.rpc.pending).insert(
        id.clone(),
        Pending {
            destination: call.destination_identity.clone(),
            ack: Some(ack_tx),
            response: Some(resp_tx),
        },
    );
    let handler_timeout = call
        .response_timeout
        .saturating_sub(call.max_round_trip_latency)
        .max(Duration::from_secs(1));
    let handler_timeout_ms = u32::try_from(handler_timeout.as_millis()).unwrap_or(u32::MAX);
    let forget = || {
        lock(&shared.rpc.pending).remove(&id);
    };
    let sent = if v2 {
        let attributes = HashMap::from([
            (ATTR_REQUEST_ID.to_owned(), id.clone()),
            (ATTR_METHOD.to_owned(), call.method),
            (
                ATTR_RESPONSE_TIMEOUT_MS.to_owned(),
                handler_timeout_ms.to_string(),
            ),
            (ATTR_VERSION.to_owned(), VERSION_V2.to_string()),
        ]);
        send_stream(
            shared,
            &call.destination_identity,
            REQUEST_TOPIC,
            attributes,
            &call.payload,
        )
        .await
    } else {
        let req = RpcRequest {
            id: id.clone(),
            method: call.method,
            payload: call.payload,
            response_timeout_ms: handler_timeout_ms,
            version: VERSION_V1,
            ..Default::default()
        };
        send(
            shared,
            data_packet::Value::RpcRequest(req),
            &call.destination_identity,
        )
    };
    if let Err(e) = sent {
        forget();
        return Err(RpcError::built_in(
            RpcErrorCode::SendFailed,
            Some(e.to_string()),
        ));
    }
    match tokio::time::timeout(call.max_round_trip_latency, ack_rx).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => {
            forget();
            return Err(RpcError::built_in(
                RpcErrorCode::RecipientDisconnected,
                None,
            ));
        }
        Err(_) => {
            forget();
            return Err(RpcError::built_in(RpcErrorCode::ConnectionTimeout, None));
        }
    }
    match tokio::time::timeout(call.response_timeout, resp_rx).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => {
            forget();
            Err(RpcError::built_in(
                RpcErrorCode::RecipientDisconnected,
                None,
            ))
        }
        Err(_) => {
            forget();
            Err(RpcError::built_in(RpcErrorCode::ResponseTimeout, None))
        }
    }
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
