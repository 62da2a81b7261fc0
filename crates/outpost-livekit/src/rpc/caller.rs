//! The calling side: [`PerformRpc`] sent in the version the callee takes, its ack and
//! response awaited, a version 2 response stream read.

use super::*;

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

/// An outgoing call waiting for its ack and response.
pub(super) struct Pending {
    pub(super) destination: String,
    pub(super) ack: Option<oneshot::Sender<()>>,
    pub(super) response: Option<oneshot::Sender<Result<String, RpcError>>>,
}

impl Rpc {
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
    pub(super) fn expects(&self, sender: &str, request_id: &str) -> bool {
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
    pub(super) fn complete(
        &self,
        sender: &str,
        request_id: &str,
        result: Result<String, RpcError>,
    ) {
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
}

/// A version 2 response: read it and end the call it answers.
pub(super) fn on_response_stream(rpc: &Arc<Rpc>, sender: &str, id: String, reader: StreamReader) {
    let rpc = rpc.clone();
    let sender = sender.to_owned();
    tokio::spawn(async move {
        let result = read_payload(reader, RpcErrorCode::ResponsePayloadTooLarge).await;
        rpc.complete(&sender, &id, result);
    });
}

/// Whether calls to `destination` go out as version 2.
fn use_v2(rpc: &Rpc, destination: &str) -> bool {
    rpc.v2
        && rpc
            .shared
            .roster()
            .remote
            .iter()
            .find(|p| p.identity == destination)
            .is_some_and(|p| p.client_protocol >= CLIENT_PROTOCOL_RPC_V2)
}

/// Calls `call.method` on `call.destination_identity`; see [`crate::Room::perform_rpc`].
pub(crate) async fn perform(rpc: &Rpc, call: PerformRpc) -> Result<String, RpcError> {
    if let Some(v) = lock(&rpc.server_version).clone() {
        if !server_supports_rpc(&v) {
            return Err(RpcError::built_in(RpcErrorCode::UnsupportedServer, None));
        }
    }
    let v2 = use_v2(rpc, &call.destination_identity);
    if !v2 && call.payload.len() > MAX_PAYLOAD_BYTES {
        return Err(RpcError::built_in(
            RpcErrorCode::RequestPayloadTooLarge,
            None,
        ));
    }
    let id = format!("RPC_{}", nanoid::nanoid!(20));
    let (ack_tx, ack_rx) = oneshot::channel();
    let (resp_tx, resp_rx) = oneshot::channel();
    lock(&rpc.pending).insert(
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
        lock(&rpc.pending).remove(&id);
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
            rpc,
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
            rpc,
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
