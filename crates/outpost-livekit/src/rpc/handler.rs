//! The answering side: a request (packet or stream header) checked, acknowledged and
//! served by its method's handler under the caller's deadline and the running limits;
//! callers that may not call turned away within their refusal budget.

use super::*;

/// A caller's budget of answered refusals (a token bucket).
#[derive(Debug, Clone, Copy)]
pub(super) struct Bucket {
    pub(super) tokens: f64,
    pub(super) at: Instant,
}

/// Aborts the handler task when the request's task ends (timeout, room closed).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Rpc {
    /// Whether a refusal to `caller` may be answered now (and spends one from its budget).
    pub(super) fn answer_refusal(&self, caller: &str, now: Instant) -> bool {
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
}

/// Answers `request_id` from `caller` with an `RpcResponse` packet.
fn respond_packet(rpc: &Rpc, caller: &str, request_id: String, result: Result<String, RpcError>) {
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
    if let Err(e) = send(rpc, data_packet::Value::RpcResponse(resp), caller) {
        tracing::debug!("RPC response not sent: {e}");
    }
}
/// Answers `request_id` from `caller` in `version`.
async fn respond(
    rpc: &Rpc,
    caller: &str,
    request_id: String,
    version: Version,
    result: Result<String, RpcError>,
) {
    match (version, result) {
        (Version::V2, Ok(payload)) => {
            let attributes = HashMap::from([(ATTR_REQUEST_ID.to_owned(), request_id.clone())]);
            if let Err(e) = send_stream(rpc, caller, RESPONSE_TOPIC, attributes, &payload).await {
                tracing::info!(request = %request_id, "RPC response stream not sent: {e}");
                respond_packet(
                    rpc,
                    caller,
                    request_id,
                    Err(RpcError::built_in(
                        RpcErrorCode::SendFailed,
                        Some(e.to_string()),
                    )),
                );
            }
        }
        (_, result) => respond_packet(rpc, caller, request_id, result),
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
fn may_call(rpc: &Rpc, caller: &str) -> bool {
    match rpc.callers {
        RpcCallers::Anyone => true,
        RpcCallers::Assistant => is_assistant(rpc, caller),
    }
}

fn is_assistant(rpc: &Rpc, caller: &str) -> bool {
    rpc.shared
        .roster()
        .assistant
        .as_ref()
        .is_some_and(|a| a.identity == caller)
}

/// Turns away request `id` of `caller`, who may not call: ack and the refusal while its
/// budget lasts, then silence.
fn refuse_caller(rpc: &Rpc, caller: &str, id: &str, method: &str) -> Refused {
    tracing::debug!(request = %id, from = caller, "RPC call from a participant that may not call; refused");
    if rpc.answer_refusal(caller, Instant::now()) && ack(rpc, caller, id) {
        respond_packet(rpc, caller, id.to_owned(), Err(rpc.refusal.clone()));
    }
    Refused {
        caller: caller.to_owned(),
        method: truncate(method.to_owned(), MAX_REFUSED_METHOD_BYTES),
    }
}

/// An incoming version 1 `RpcRequest` from `caller` (the identity the server stamped):
/// ack at once, then answer from the handler, or with an error when the request cannot
/// be served. A caller that may not call is refused (and returned).
pub(crate) fn on_request(rpc: &Arc<Rpc>, caller: &str, req: RpcRequest) -> Option<Refused> {
    if caller.is_empty() || req.id.is_empty() {
        tracing::debug!("RPC request without a caller identity or id; ignored");
        return None;
    }
    if !may_call(rpc, caller) {
        return Some(refuse_caller(rpc, caller, &req.id, &req.method));
    }
    if !ack(rpc, caller, &req.id) {
        return None;
    }
    let refuse = |code, data| refuse_request(rpc, caller, &req.id, code, data);
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
        rpc,
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
fn ack(rpc: &Rpc, caller: &str, request_id: &str) -> bool {
    let ack = RpcAck {
        request_id: request_id.to_owned(),
    };
    match send(rpc, data_packet::Value::RpcAck(ack), caller) {
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
    rpc: &Arc<Rpc>,
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
    let cap = rpc.max_v2_payload;
    let announced = h.total_length.filter(|t| *t > cap);
    if h.topic == RESPONSE_TOPIC {
        if !rpc.expects(sender, &request_id) {
            return None;
        }
        if let Some(t) = announced {
            let why = format!("the response announces {t} bytes; this client reads at most {cap}");
            tracing::info!(request = %request_id, "RPC response stream refused: {why}");
            let e = RpcError::built_in(RpcErrorCode::ResponsePayloadTooLarge, Some(why));
            rpc.complete(sender, &request_id, Err(e));
            return None;
        }
        let reader = receivers.on_header_capped(sender, assistant, h, now, cap);
        on_response_stream(rpc, sender, request_id, reader);
        return None;
    }
    if !may_call(rpc, sender) {
        let method = h.attributes.get(ATTR_METHOD).map_or("", String::as_str);
        return Some(refuse_caller(rpc, sender, &request_id, method));
    }
    if !ack(rpc, sender, &request_id) {
        return None;
    }
    let refuse = |code: RpcErrorCode, data: String| {
        tracing::info!(request = %request_id, from = sender, "RPC request stream refused: {data}");
        respond_packet(
            rpc,
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
        rpc,
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

/// Answers `caller`'s request `id` with the built-in error `code`.
fn refuse_request(
    rpc: &Arc<Rpc>,
    caller: &str,
    id: &str,
    code: RpcErrorCode,
    data: Option<String>,
) {
    respond_packet(
        rpc,
        caller,
        id.to_owned(),
        Err(RpcError::built_in(code, data)),
    );
}

/// Runs the handler for an acknowledged request and answers it; refuses it at once
/// when it has no handler or too many are running: [`MAX_RUNNING`] of the assistant's,
/// [`MAX_RUNNING_PER_CALLER`] of any other caller's, [`MAX_RUNNING`] of all other
/// callers' together (so they never take the assistant's room).
fn serve(rpc: &Arc<Rpc>, caller: &str, req: Request) {
    let refuse = |code, data| refuse_request(rpc, caller, &req.id, code, data);
    let Some(handler) = lock(&rpc.handlers.handlers).get(&req.method).cloned() else {
        return refuse(RpcErrorCode::UnsupportedMethod, None);
    };
    let key = (caller.to_owned(), req.id.clone());
    let assistant = rpc.shared.assistant_identity();
    let mut running = lock(&rpc.running);
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
    let rpc2 = rpc.clone();
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
        respond(&rpc2, &key2.0, key2.1.clone(), version, result).await;
        lock(&rpc2.running).remove(&key2);
    });
    running.insert(key, task.abort_handle());
}
