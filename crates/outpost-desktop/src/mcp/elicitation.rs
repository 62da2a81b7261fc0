//! The elicitation bridge: a server's form or link goes to the user through the UI and
//! waits for the answer, bounded per server and in all; sampling is refused.

use super::*;

/// Most forms (or links) one server may have open at once; more are declined at once.
pub const MAX_FORMS_PER_SERVER: usize = 4;
/// Most forms open at once, all servers together; more are declined at once.
pub const MAX_FORMS: usize = 16;

/// The elicitation forms open in the UI, each waiting for the user's answer (at most
/// [`MAX_FORMS_PER_SERVER`] per server and [`MAX_FORMS`] in all: a server that asks more
/// is declined at once, so it can neither pile forms on the user nor hold memory).
#[derive(Debug, Default)]
pub struct Elicitations {
    next: AtomicU64,
    /// By form id: the asking server and where the answer goes.
    open: Mutex<HashMap<String, (String, oneshot::Sender<ElicitationAnswer>)>>,
}

impl Elicitations {
    /// `mcp_elicitation_answer`: accept (with the form's content), decline or cancel.
    pub fn answer(
        &self,
        id: &str,
        action: ElicitationAction,
        content: Option<Map<String, Value>>,
    ) -> Result<()> {
        let answer = match action {
            ElicitationAction::Accept => {
                ElicitationAnswer::Accept(Some(content.unwrap_or_default()))
            }
            ElicitationAction::Decline => ElicitationAnswer::Decline,
            ElicitationAction::Cancel => ElicitationAnswer::Cancel,
        };
        let (_, tx) = lock(&self.open).remove(id).ok_or_else(|| {
            DesktopError::NotFound("That form is no longer open (answered or timed out).".into())
        })?;
        tx.send(answer).map_err(|_| {
            DesktopError::NotFound("That form is no longer open (the server is gone).".into())
        })
    }

    /// Closes every open form (the session ended): each is cancelled; the ids closed.
    pub fn close_all(&self) -> Vec<String> {
        let open: Vec<(String, (String, oneshot::Sender<ElicitationAnswer>))> =
            lock(&self.open).drain().collect();
        open.into_iter()
            .map(|(id, (_, tx))| {
                let _ = tx.send(ElicitationAnswer::Cancel);
                id
            })
            .collect()
    }

    /// How many forms are open.
    pub fn open_count(&self) -> usize {
        lock(&self.open).len()
    }

    /// Opens a form for `server` under a new id, or `None` when it has (or all have) as
    /// many open as allowed.
    fn open_for(&self, server: &str, tx: oneshot::Sender<ElicitationAnswer>) -> Option<String> {
        let mut open = lock(&self.open);
        let of_server = open.values().filter(|(s, _)| s == server).count();
        if of_server >= MAX_FORMS_PER_SERVER || open.len() >= MAX_FORMS {
            return None;
        }
        let id = format!("elicit-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        open.insert(id.clone(), (server.to_owned(), tx));
        Some(id)
    }
}

/// Tells the UI (the desktop's event sink).
pub type Emit = Arc<dyn Fn(AppEvent) + Send + Sync>;

/// The app's answerer of server requests: an elicitation form goes to the user and waits
/// (up to `timeout`, then it is cancelled); URL elicitation is declined; sampling is
/// refused (the default).
#[derive(Clone)]
pub struct UiRequests {
    /// The open forms.
    pub pending: Arc<Elicitations>,
    /// Where the form is shown.
    pub emit: Emit,
    /// How long a form waits (the policy's consent timeout).
    pub timeout: Duration,
}

impl std::fmt::Debug for UiRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiRequests")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl ServerRequests for UiRequests {
    async fn elicit(&self, server: &str, request: ElicitationRequest) -> ElicitationAnswer {
        let (message, schema, url) = match request {
            ElicitationRequest::Form {
                message,
                requested_schema: Value::Object(schema),
            } => (message, schema, None),
            // Only http(s): the page opens it with the system browser on the user's say.
            ElicitationRequest::Url { message, url, .. } if openable(&url) => {
                (message, Map::new(), Some(url))
            }
            _ => return ElicitationAnswer::Decline,
        };
        let url_mode = url.is_some();
        let (tx, rx) = oneshot::channel();
        let Some(id) = self.pending.open_for(server, tx) else {
            tracing::warn!(
                server,
                "an elicitation was declined unasked: too many forms are open"
            );
            return ElicitationAnswer::Decline;
        };
        // Closes the form however this ends: answered, timed out, or given up by the call
        // that asked (its timeout or the user's Stop drop this future mid-wait).
        let _open = OpenForm {
            pending: Arc::clone(&self.pending),
            emit: Arc::clone(&self.emit),
            id: id.clone(),
        };
        (self.emit)(AppEvent::Elicitation(ElicitationEvent {
            id,
            server: server.to_owned(),
            message,
            schema,
            url,
        }));
        match tokio::time::timeout(self.timeout, rx).await {
            // A URL request's acceptance carries no content.
            Ok(Ok(ElicitationAnswer::Accept(_))) if url_mode => ElicitationAnswer::Accept(None),
            Ok(Ok(a)) => a,
            _ => ElicitationAnswer::Cancel,
        }
    }
}

/// A form shown to the user; dropped, it leaves the open forms and the UI closes it.
struct OpenForm {
    pending: Arc<Elicitations>,
    emit: Emit,
    id: String,
}

impl Drop for OpenForm {
    fn drop(&mut self) {
        lock(&self.pending.open).remove(&self.id);
        (self.emit)(AppEvent::ElicitationClosed(ElicitationClosed {
            id: std::mem::take(&mut self.id),
        }));
    }
}

/// A URL the page may offer to open: http(s), no whitespace or control characters (the
/// shell's `chat_open_link` checks it again before opening).
fn openable(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && url.len() <= 4096
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}
