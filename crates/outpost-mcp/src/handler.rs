//! The rmcp client handler: answers `roots/list`, passes elicitation and sampling to the
//! caller's [`ServerRequests`], routes progress notifications to the call that asked for
//! them, and counts `notifications/tools/list_changed`.

// Roots and sampling are marked deprecated in rmcp (SEP-2577) but are part of every
// protocol version the servers we host speak.
#![allow(deprecated)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientConfig, CreateMessageRequestParams, CreateMessageResult, CustomNotification,
    ElicitRequestParams, ElicitResult, ErrorCode, ErrorData, ListRootsResult,
    ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::progress::{MAX_PROGRESS_MESSAGE, PROGRESS_INTERVAL, Progress};
use crate::requests::{ElicitationAnswer, ElicitationRequest, Root, ServerRequests};
use crate::text::cut;

/// Progress notifications that arrive before their call registered (bounded).
const MAX_EARLY_PROGRESS: usize = 64;

/// `notifications/elicitation/complete` ids remembered for a call that waits for them.
const MAX_COMPLETED: usize = 64;

/// The notification a server sends when a URL elicitation's out-of-band flow finished
/// (MCP 2025-11-25); rmcp passes it on as a custom notification.
pub(crate) const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

#[derive(Debug, Default)]
struct Routes {
    /// Each call's sink and when its last progress was passed on.
    live: HashMap<ProgressToken, (mpsc::UnboundedSender<Progress>, Option<std::time::Instant>)>,
    early: VecDeque<(ProgressToken, Progress)>,
}

/// State shared between the handler (inside rmcp's service task) and the connection.
#[derive(Debug)]
pub(crate) struct Shared {
    routes: Mutex<Routes>,
    /// Counts `notifications/tools/list_changed`.
    pub tools_changed: watch::Sender<u64>,
    /// The last `elicitationId`s of `notifications/elicitation/complete` (bounded).
    pub elicitations_done: watch::Sender<VecDeque<String>>,
}

impl Shared {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            routes: Mutex::new(Routes::default()),
            tools_changed: watch::Sender::new(0),
            elicitations_done: watch::Sender::new(VecDeque::new()),
        })
    }

    /// Sends `token`'s progress to `sink` from now on (and any that came early).
    pub fn route(&self, token: ProgressToken, sink: mpsc::UnboundedSender<Progress>) {
        let mut r = outpost_sync::lock(&self.routes);
        let early = std::mem::take(&mut r.early);
        // Of the early ones, the latest is enough.
        let mut latest = None;
        for (t, p) in early {
            if t == token {
                latest = Some(p);
            } else {
                r.early.push_back((t, p));
            }
        }
        let mut sent = None;
        if let Some(p) = latest {
            let _ = sink.send(p);
            sent = Some(std::time::Instant::now());
        }
        r.live.insert(token, (sink, sent));
    }

    pub fn unroute(&self, token: &ProgressToken) {
        let mut r = outpost_sync::lock(&self.routes);
        r.live.remove(token);
        r.early.retain(|(t, _)| t != token);
    }

    /// Passes a call's progress on: at most one per [`PROGRESS_INTERVAL`], its message cut
    /// to [`MAX_PROGRESS_MESSAGE`].
    fn progress(&self, params: ProgressNotificationParam) {
        let mut message = params.message;
        if let Some(m) = message.as_mut() {
            cut(m, MAX_PROGRESS_MESSAGE);
        }
        let p = Progress {
            progress: params.progress,
            total: params.total,
            message,
        };
        let mut r = outpost_sync::lock(&self.routes);
        if let Some((sink, last)) = r.live.get_mut(&params.progress_token) {
            let now = std::time::Instant::now();
            if last.is_none_or(|l| now.duration_since(l) >= PROGRESS_INTERVAL) {
                *last = Some(now);
                let _ = sink.send(p);
            }
        } else {
            if r.early.len() >= MAX_EARLY_PROGRESS {
                r.early.pop_front();
            }
            r.early.push_back((params.progress_token, p));
        }
    }
}

/// Cheap to clone: the connection keeps one to answer the `input_required` rounds of MCP
/// 2026-07-28 (crate::input) the same way as the server requests of older revisions.
#[derive(Debug, Clone)]
pub(crate) struct Handler {
    pub server: String,
    pub info: ClientConfig,
    pub roots: watch::Receiver<Vec<Root>>,
    pub requests: Arc<dyn ServerRequests>,
    pub shared: Arc<Shared>,
}

fn wire_roots(roots: &[Root]) -> ListRootsResult {
    let list: Vec<Value> = roots
        .iter()
        .map(|r| match &r.name {
            Some(n) => json!({"uri": r.uri, "name": n}),
            None => json!({"uri": r.uri}),
        })
        .collect();
    serde_json::from_value(json!({ "roots": list }))
        .unwrap_or_else(|_| ListRootsResult::new(Vec::new()))
}

fn internal(message: String) -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None)
}

impl Handler {
    /// The roots offered now (`roots/list`).
    pub fn roots_now(&self) -> ListRootsResult {
        let roots = self.roots.borrow().clone();
        wire_roots(&roots)
    }

    /// Asks the user through [`ServerRequests::elicit`] (`elicitation/create`).
    pub async fn elicit(&self, request: ElicitRequestParams) -> Result<ElicitResult, ErrorData> {
        let ours = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => ElicitationRequest::Form {
                message,
                requested_schema: serde_json::to_value(requested_schema).unwrap_or(Value::Null),
            },
            ElicitRequestParams::UrlElicitationParams {
                message,
                url,
                elicitation_id,
                ..
            } => ElicitationRequest::Url {
                message,
                url,
                elicitation_id,
            },
            #[allow(unreachable_patterns)]
            _ => {
                return Err(ErrorData::invalid_request(
                    "this elicitation mode is not supported by Outpost",
                    None,
                ));
            }
        };
        let answer = self.requests.elicit(&self.server, ours).await;
        let wire = match answer {
            ElicitationAnswer::Accept(Some(content)) => {
                json!({"action": "accept", "content": content})
            }
            ElicitationAnswer::Accept(None) => json!({"action": "accept"}),
            ElicitationAnswer::Decline => json!({"action": "decline"}),
            ElicitationAnswer::Cancel => json!({"action": "cancel"}),
        };
        serde_json::from_value(wire).map_err(|e| internal(format!("elicitation answer: {e}")))
    }

    /// Passes a sampling request to [`ServerRequests::sample`] (`sampling/createMessage`).
    pub async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        match self.requests.sample(&self.server, params).await {
            Ok(result) => serde_json::from_value(result).map_err(|e| {
                internal(format!("sampling answer is not a CreateMessageResult: {e}"))
            }),
            Err(message) => Err(ErrorData::new(ErrorCode::INVALID_REQUEST, message, None)),
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(self.roots_now())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.elicit(request).await
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.sample(params).await
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.shared.progress(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.shared.tools_changed.send_modify(|n| *n += 1);
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method != ELICITATION_COMPLETE {
            return;
        }
        let Some(id) = notification
            .params
            .as_ref()
            .and_then(|p| p.get("elicitationId"))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty() && id.len() <= 1024)
        else {
            return;
        };
        let id = id.to_owned();
        self.shared.elicitations_done.send_modify(|done| {
            if done.len() >= MAX_COMPLETED {
                done.pop_front();
            }
            done.push_back(id);
        });
    }
}
