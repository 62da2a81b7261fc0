//! RPC between participants as LiveKit defines it (version 1: one data packet each
//! way), both sides:
//!
//! - Answering: methods registered with [`crate::Room::register_rpc_method`]. An
//!   incoming `RpcRequest` is acknowledged with an `RpcAck` at once, then answered
//!   with one `RpcResponse` carrying the handler's payload or an [`RpcError`]. The
//!   handler runs in its own task under the caller's `response_timeout`; when that
//!   passes the handler is dropped and the caller gets `RESPONSE_TIMEOUT` (what the
//!   official Python SDK does).
//! - Calling: [`crate::Room::perform_rpc`] sends an `RpcRequest` and waits for the ack
//!   (`max_round_trip_latency`) and then the response (`response_timeout`), with the
//!   official SDKs' errors for each way it can fail.
//!
//! Payloads are limited to [`MAX_PAYLOAD_BYTES`] each way, with LiveKit's error codes.
//! RPC version 2 (payloads over `lk.rpc_request` / `lk.rpc_response` text streams) is
//! not implemented; we advertise `client_protocol = 0`, so SDK peers use version 1.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::engine::Shared;
use crate::proto::{
    self, RpcAck, RpcErrorPacket, RpcRequest, RpcResponse, data_packet, rpc_response,
};

/// Largest request or response payload, in bytes (LiveKit's RPC v1 limit, 15 KiB).
pub const MAX_PAYLOAD_BYTES: usize = 15_360;
/// Longest error message sent; longer ones are cut (as the official SDKs do).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 256;
/// The RPC version we speak.
const VERSION: u32 = 1;
/// Incoming requests handled at once; more are answered with an error at once.
const MAX_RUNNING: usize = 64;
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
    /// 1504: the handler's response is over [`MAX_PAYLOAD_BYTES`].
    ResponsePayloadTooLarge,
    /// 1505: the request could not be sent.
    SendFailed,
    /// 1400: no handler for this method at the destination.
    UnsupportedMethod,
    /// 1401: no such participant.
    RecipientNotFound,
    /// 1402: the request payload is over [`MAX_PAYLOAD_BYTES`].
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
    /// Request payload (at most [`MAX_PAYLOAD_BYTES`]).
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

/// RPC state of one room, shared by the handle and the engine.
#[derive(Default)]
pub(crate) struct Rpc {
    handlers: RpcMethods,
    pending: Mutex<HashMap<String, Pending>>,
    /// Incoming requests being handled, by (caller, request id).
    running: Mutex<HashMap<(String, String), tokio::task::AbortHandle>>,
    /// `ServerInfo.version` from the last join response.
    server_version: Mutex<Option<String>>,
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
    /// The room's RPC state, answering from `methods` (shared, not copied).
    pub(crate) fn with_methods(methods: &RpcMethods) -> Self {
        Self {
            handlers: methods.clone(),
            ..Self::default()
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
        let mut pending = lock(&self.pending);
        let Some(p) = pending.get(&resp.request_id) else {
            tracing::debug!(request = %resp.request_id, "RPC response for an unknown or expired request; ignored");
            return;
        };
        if p.destination != sender {
            tracing::warn!(request = %resp.request_id, from = sender, "RPC response from a participant we did not call; ignored");
            return;
        }
        let Some(mut p) = pending.remove(&resp.request_id) else {
            return;
        };
        drop(pending);
        let result = match resp.value {
            Some(rpc_response::Value::Payload(s)) => Ok(s),
            Some(rpc_response::Value::Error(e)) => Err(RpcError::from_packet(e)),
            Some(rpc_response::Value::CompressedPayload(_)) => Err(RpcError::built_in(
                RpcErrorCode::ApplicationError,
                Some("compressed RPC payloads are not supported".into()),
            )),
            None => Ok(String::new()),
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

fn respond(shared: &Shared, caller: &str, request_id: String, result: Result<String, RpcError>) {
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

/// An incoming `RpcRequest` from `caller` (the identity the server stamped): ack at
/// once, then answer from the handler, or with an error when the request cannot be
/// served.
pub(crate) fn on_request(shared: &Arc<Shared>, caller: &str, req: RpcRequest) {
    if caller.is_empty() || req.id.is_empty() {
        tracing::debug!("RPC request without a caller identity or id; ignored");
        return;
    }
    let ack = RpcAck {
        request_id: req.id.clone(),
    };
    if let Err(e) = send(shared, data_packet::Value::RpcAck(ack), caller) {
        tracing::debug!("RPC ack not sent: {e}");
        return;
    }
    let refuse = |code: RpcErrorCode, data: Option<String>| {
        respond(
            shared,
            caller,
            req.id.clone(),
            Err(RpcError::built_in(code, data)),
        );
    };
    if req.version != VERSION {
        return refuse(RpcErrorCode::UnsupportedVersion, None);
    }
    if req.payload.is_empty() && !req.compressed_payload.is_empty() {
        // We do not advertise compression, so a compressed request is a peer's bug.
        return refuse(
            RpcErrorCode::ApplicationError,
            Some("compressed RPC payloads are not supported".into()),
        );
    }
    if req.payload.len() > MAX_PAYLOAD_BYTES {
        return refuse(RpcErrorCode::RequestPayloadTooLarge, None);
    }
    let Some(handler) = lock(&shared.rpc.handlers.handlers)
        .get(&req.method)
        .cloned()
    else {
        return refuse(RpcErrorCode::UnsupportedMethod, None);
    };
    let key = (caller.to_owned(), req.id.clone());
    let mut running = lock(&shared.rpc.running);
    if running.len() >= MAX_RUNNING {
        drop(running);
        return refuse(
            RpcErrorCode::ApplicationError,
            Some(format!("more than {MAX_RUNNING} RPC requests in progress")),
        );
    }
    if running.contains_key(&key) {
        tracing::debug!(request = %req.id, "duplicate RPC request; ignored");
        return;
    }
    let response_timeout = if req.response_timeout_ms == 0 {
        DEFAULT_RESPONSE_TIMEOUT
    } else {
        Duration::from_millis(u64::from(req.response_timeout_ms))
    };
    let deadline = Instant::now() + response_timeout;
    let invocation = RpcInvocation {
        request_id: req.id.clone(),
        caller_identity: caller.to_owned(),
        method: req.method,
        payload: req.payload,
        response_timeout,
        deadline,
    };
    let shared2 = shared.clone();
    let caller2 = caller.to_owned();
    let key2 = key.clone();
    let task = tokio::spawn(async move {
        // The handler runs in its own task so that a panic in it becomes an
        // APPLICATION_ERROR answer instead of taking this task down unanswered.
        let work = tokio::spawn(handler(invocation));
        let _guard = AbortOnDrop(work.abort_handle());
        let result = match tokio::time::timeout_at(deadline, work).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => {
                tracing::warn!(request = %key2.1, "RPC handler failed: {e}");
                Err(RpcError::built_in(RpcErrorCode::ApplicationError, None))
            }
            Err(_) => Err(RpcError::built_in(RpcErrorCode::ResponseTimeout, None)),
        };
        respond(&shared2, &caller2, key2.1.clone(), result);
        lock(&shared2.rpc.running).remove(&key2);
    });
    running.insert(key, task.abort_handle());
}

/// Calls `call.method` on `call.destination_identity`; see [`crate::Room::perform_rpc`].
pub(crate) async fn perform(shared: &Shared, call: PerformRpc) -> Result<String, RpcError> {
    if let Some(v) = lock(&shared.rpc.server_version).clone() {
        if !server_supports_rpc(&v) {
            return Err(RpcError::built_in(RpcErrorCode::UnsupportedServer, None));
        }
    }
    if call.payload.len() > MAX_PAYLOAD_BYTES {
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
    let req = RpcRequest {
        id: id.clone(),
        method: call.method,
        payload: call.payload,
        response_timeout_ms: u32::try_from(handler_timeout.as_millis()).unwrap_or(u32::MAX),
        version: VERSION,
        ..Default::default()
    };
    let forget = || {
        lock(&shared.rpc.pending).remove(&id);
    };
    if let Err(e) = send(
        shared,
        data_packet::Value::RpcRequest(req),
        &call.destination_identity,
    ) {
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn codes_match_the_official_sdks() {
        let codes: Vec<(u32, &str)> = RpcErrorCode::ALL
            .iter()
            .map(|c| (c.code(), c.message()))
            .collect();
        assert!(codes.contains(&(1400, "Method not supported at destination")));
        assert!(codes.contains(&(1402, "Request payload too large")));
        assert!(codes.contains(&(1504, "Response payload too large")));
        assert!(codes.contains(&(1500, "Application error in method handler")));
        for c in RpcErrorCode::ALL {
            assert_eq!(RpcErrorCode::from_code(c.code()), Some(c));
        }
        assert_eq!(RpcErrorCode::from_code(2001), None);
    }

    #[test]
    fn errors_are_cut_to_their_limits_at_character_boundaries() {
        let e = RpcError::new(7, "é".repeat(200), Some("x".repeat(20_000)));
        assert!(e.message.len() <= MAX_ERROR_MESSAGE_BYTES);
        assert!(e.message.chars().all(|c| c == 'é'));
        assert_eq!(e.data.as_ref().map(String::len), Some(MAX_PAYLOAD_BYTES));
        let back = RpcError::from_packet(e.to_packet());
        assert_eq!(back, e);
        // An empty data field on the wire means "no data".
        let none = RpcError::from_packet(RpcError::new(1, "m", None).to_packet());
        assert_eq!(none.data, None);
    }

    use crate::engine::Shared;

    fn shared() -> Arc<Shared> {
        Shared::for_tests()
    }

    /// What was queued: (destination, packet value).
    fn sent(shared: &Shared) -> Vec<(String, data_packet::Value)> {
        shared
            .outbox
            .take_pending()
            .iter()
            .map(|b| {
                let p = proto::decode_data_packet(b).unwrap();
                assert_eq!(p.participant_identity, "me");
                (p.destination_identities.join(","), p.value.unwrap())
            })
            .collect()
    }

    fn request(id: &str, method: &str, payload: &str) -> RpcRequest {
        RpcRequest {
            id: id.into(),
            method: method.into(),
            payload: payload.into(),
            response_timeout_ms: 5_000,
            version: 1,
            ..Default::default()
        }
    }

    fn error_code(v: &data_packet::Value) -> Option<u32> {
        match v {
            data_packet::Value::RpcResponse(RpcResponse {
                value: Some(rpc_response::Value::Error(e)),
                ..
            }) => Some(e.code),
            _ => None,
        }
    }

    #[tokio::test]
    async fn requests_are_acked_at_once_then_answered_or_refused() {
        let s = shared();
        s.rpc.register(
            "echo".into(),
            handler(|inv: RpcInvocation| async move {
                Ok(format!("{}:{}", inv.caller_identity, inv.payload))
            }),
        );
        // Refusals: ack, then the error, without any handler.
        on_request(&s, "bob", request("1", "nope", ""));
        let mut v2 = request("2", "echo", "");
        v2.version = 2;
        on_request(&s, "bob", v2);
        on_request(
            &s,
            "bob",
            request("3", "echo", &"x".repeat(MAX_PAYLOAD_BYTES + 1)),
        );
        let out = sent(&s);
        assert_eq!(out.len(), 6);
        assert!(out.iter().all(|(to, _)| to == "bob"));
        assert!(matches!(&out[0].1, data_packet::Value::RpcAck(a) if a.request_id == "1"));
        assert_eq!(error_code(&out[1].1), Some(1400));
        assert_eq!(error_code(&out[3].1), Some(1404));
        assert_eq!(error_code(&out[5].1), Some(1402));
        // A served request: the ack is queued before the handler has run.
        on_request(&s, "bob", request("4", "echo", "hi"));
        let out = sent(&s);
        assert_eq!(out.len(), 1);
        assert!(matches!(&out[0].1, data_packet::Value::RpcAck(a) if a.request_id == "4"));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let out = sent(&s);
        assert!(
            matches!(&out[..], [(to, data_packet::Value::RpcResponse(RpcResponse {
                request_id, value: Some(rpc_response::Value::Payload(p)) }))]
                if to == "bob" && request_id == "4" && p == "bob:hi"),
            "{out:?}"
        );
    }

    #[tokio::test]
    async fn only_the_participant_called_can_answer() {
        let s = shared();
        let s2 = s.clone();
        let call =
            tokio::spawn(async move { perform(&s2, PerformRpc::new("bob", "m", "p")).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let out = sent(&s);
        let Some((to, data_packet::Value::RpcRequest(req))) = out.first() else {
            panic!("{out:?}")
        };
        assert_eq!(to, "bob");
        // 15 s response timeout minus the 7 s ack allowance.
        assert_eq!((req.version, req.response_timeout_ms), (1, 8_000));
        let answer = |value: &str| RpcResponse {
            request_id: req.id.clone(),
            value: Some(rpc_response::Value::Payload(value.into())),
        };
        s.rpc.on_ack(
            "mallory",
            RpcAck {
                request_id: req.id.clone(),
            },
        );
        s.rpc.on_response("mallory", answer("forged"));
        assert!(!call.is_finished());
        s.rpc.on_response("bob", answer("real"));
        assert_eq!(call.await.unwrap(), Ok("real".to_owned()));
        // A late duplicate is ignored.
        s.rpc.on_response("bob", answer("again"));

        // The destination leaves mid-call.
        let s3 = s.clone();
        let call =
            tokio::spawn(async move { perform(&s3, PerformRpc::new("carol", "m", "p")).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        s.rpc.participant_left("carol");
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(
            err.built_in_code(),
            Some(RpcErrorCode::RecipientDisconnected)
        );
    }

    #[test]
    fn server_version_gate() {
        assert!(server_supports_rpc("1.8.0"));
        assert!(server_supports_rpc("1.9.0"));
        assert!(server_supports_rpc("2.0.1-rc1"));
        assert!(!server_supports_rpc("1.7.9"));
        assert!(!server_supports_rpc("0.15.0"));
        assert!(server_supports_rpc("dev"));
    }
}
