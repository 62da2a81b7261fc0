//! The dispatcher: seed 000's client side.
//!
//! Feed it every ToolUseRequest ([`Dispatcher::handle_request`]) and ToolUseCancel
//! ([`Dispatcher::handle_cancel`]); read [`DispatchEvent`]s from the receiver returned by
//! [`Dispatcher::new`]: results and progress to send to the server, and audit events to
//! store. Per request id:
//!
//! - `execution: server` is recorded (audit) and never run, and gets no answer.
//! - `execution: client` gets exactly one ToolUseResult: the tool's, or unknown_tool,
//!   invalid_parameters, execution_error, timeout, permission_denied or cancelled.
//! - `execution: either` runs when the tool is supported, valid and permitted; in every
//!   case where it does not start, the answer is unknown_tool (seed text) so the server
//!   runs it itself. Once it started, its outcome is answered as for `client`.
//! - A duplicate id never runs twice: while the first is in flight it is ignored; after,
//!   the same result is sent again.
//! - A cancel of a request in flight stops it (consent withdrawn, job cancelled) and the
//!   request is answered once, with `cancelled`.
//!
//! Consent: when the policy says "ask", a ToolUseProgress `awaiting_consent` goes out, the
//! [`ConsentBroker`] asks the UI, and the deadline (`timeoutMs`) is not running. When the
//! user allows, `running` goes out and the deadline starts. A call allowed by the policy
//! without asking sends no progress: it is running from the start.
//!
//! Blocking work (path resolution, the tool's job) runs on tokio's blocking pool. At the
//! deadline or on cancel the job's [`CancellationToken`] is set; jobs check it between
//! chunks, and no job reads from anything that can block forever (FIFOs and devices are
//! refused), so no thread is left behind.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use outpost_policy::{
    AccessRequest, Allowance, ConsentBroker, ConsentOutcome, ConsentRequest, ConversationGrants,
    Decision, FolderAccess, PolicyStore, Verdict,
};
use outpost_protocol::{
    Execution, Map, Message, ProgressState, ToolDescriptor, ToolUseCancel, ToolUseProgress,
    ToolUseRequest, ToolUseResult, Value,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::registry::{Registry, as_value};
use crate::tool::{Access, Job, RunContext, ToolEnv};

/// Finished request ids remembered for duplicate detection.
pub const REMEMBERED_RESULTS: usize = 10_000;

/// Whether a call was allowed or denied, in audit events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// The call may run.
    Allowed,
    /// The call may not run.
    Denied,
}

/// One thing the dispatcher did, for the audit log. Every request, decision and outcome
/// produces one. `atMs` is Unix time in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "event",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum AuditEvent {
    /// A ToolUseRequest arrived.
    Requested {
        /// When.
        at_ms: u64,
        /// The conversation.
        conversation_id: String,
        /// The request.
        request_id: String,
        /// The assistant message that asked for it.
        message_id: String,
        /// The tool.
        tool: String,
        /// "server", "client" or "either".
        execution: String,
        /// The parameters as received.
        parameters: Map,
        /// The timeout that applies, in milliseconds.
        timeout_ms: u32,
    },
    /// A request id seen before arrived again.
    Duplicate {
        /// When.
        at_ms: u64,
        /// The request.
        request_id: String,
        /// Whether the earlier result was sent again (false: still in flight, or a server
        /// tool).
        resent: bool,
    },
    /// The user was asked.
    ConsentAsked {
        /// When.
        at_ms: u64,
        /// The request.
        request_id: String,
        /// Why the policy asks.
        reason: String,
        /// The answers offered.
        options: Vec<Decision>,
    },
    /// The call was allowed or denied.
    Decided {
        /// When.
        at_ms: u64,
        /// The request.
        request_id: String,
        /// Allowed or denied.
        outcome: AuditOutcome,
        /// Who decided: "your policy", "the user", "the built-in secrets list", ...
        by: String,
        /// Why, in words.
        reason: String,
        /// The user's answer, when the user was asked.
        decision: Option<Decision>,
        /// The resolved paths concerned.
        paths: Vec<PathBuf>,
    },
    /// The tool started running.
    Started {
        /// When.
        at_ms: u64,
        /// The request.
        request_id: String,
    },
    /// The request was answered.
    Finished {
        /// When.
        at_ms: u64,
        /// The request.
        request_id: String,
        /// Whether the tool succeeded.
        success: bool,
        /// The error code, on failure.
        error_code: Option<String>,
        /// The error message, on failure.
        error_message: Option<String>,
        /// From arrival to answer, in milliseconds.
        duration_ms: u64,
    },
    /// A ToolUseCancel arrived.
    CancelRequested {
        /// When.
        at_ms: u64,
        /// The request.
        request_id: String,
        /// The server's reason.
        reason: Option<String>,
        /// Whether a request in flight was stopped (false: unknown or finished id).
        effective: bool,
    },
    /// An "always" answer could not be written to the policy file (it still applied to
    /// the call).
    PolicyWriteFailed {
        /// When.
        at_ms: u64,
        /// The request.
        request_id: String,
        /// The error.
        message: String,
    },
}

/// What the dispatcher hands back to the session: messages for the server on
/// [`DispatchReceivers::messages`]; `Audit` is used by consumers that merge both streams.
#[derive(Debug, Clone, PartialEq)]
pub enum DispatchEvent {
    /// Send to the server.
    Result(ToolUseResult),
    /// Send to the server.
    Progress(ToolUseProgress),
    /// Persist.
    Audit(AuditEvent),
}

impl DispatchEvent {
    /// The protocol message to send, for results and progress.
    pub fn to_message(&self) -> Option<Message> {
        match self {
            Self::Result(r) => Some(Message::ToolUseResult(r.clone())),
            Self::Progress(p) => Some(Message::ToolUseProgress(p.clone())),
            Self::Audit(_) => None,
        }
    }
}

/// Where the dispatcher's output goes. Two channels, so that the session's sender wakes
/// only for messages to send, and the audit writer can batch.
#[derive(Debug)]
pub struct DispatchReceivers {
    /// Results and progress, in the order they must be sent. Only
    /// [`DispatchEvent::Result`] and [`DispatchEvent::Progress`] arrive here.
    pub messages: mpsc::UnboundedReceiver<DispatchEvent>,
    /// Audit events, in the order they happened.
    pub audit: mpsc::UnboundedReceiver<AuditEvent>,
}

/// What [`Dispatcher::handle_request`] did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// A new client or either request; its answer will follow.
    Started,
    /// A server-executed request, recorded only.
    Recorded,
    /// A duplicate of a request still in flight (or of a server request): ignored.
    DuplicateIgnored,
    /// A duplicate of a finished request: its result was sent again.
    DuplicateResent,
}

#[derive(Debug)]
enum Slot {
    Running(CancellationToken),
    Finished(Option<ToolUseResult>),
}

#[derive(Debug, Default)]
struct State {
    requests: HashMap<String, Slot>,
    finished: VecDeque<String>,
    grants: HashMap<String, ConversationGrants>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    env: ToolEnv,
    policy: PolicyStore,
    broker: ConsentBroker,
    out: mpsc::UnboundedSender<DispatchEvent>,
    audit_out: mpsc::UnboundedSender<AuditEvent>,
    state: Mutex<State>,
    runtime: tokio::runtime::Handle,
}

/// Runs tool requests under the policy. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Dispatcher {
    /// A dispatcher over `registry`. Must be called inside a tokio runtime (requests are
    /// run on it). Returns the receivers of what the dispatcher emits.
    pub fn new(
        registry: Registry,
        env: ToolEnv,
        policy: PolicyStore,
        broker: ConsentBroker,
    ) -> (Self, DispatchReceivers) {
        let (out, messages) = mpsc::unbounded_channel();
        let (audit_out, audit) = mpsc::unbounded_channel();
        let inner = Inner {
            registry,
            env,
            policy,
            broker,
            out,
            audit_out,
            state: Mutex::new(State::default()),
            runtime: tokio::runtime::Handle::current(),
        };
        (
            Self {
                inner: Arc::new(inner),
            },
            DispatchReceivers { messages, audit },
        )
    }

    /// The catalogue for `ClientHello.tools`.
    pub fn catalogue(&self) -> Vec<ToolDescriptor> {
        self.inner.registry.descriptors()
    }

    /// The consent broker the UI attaches to.
    pub fn broker(&self) -> &ConsentBroker {
        &self.inner.broker
    }

    /// The policy in use.
    pub fn policy(&self) -> &PolicyStore {
        &self.inner.policy
    }

    /// Requests still being decided or run.
    pub fn in_flight(&self) -> usize {
        self.inner
            .lock()
            .requests
            .values()
            .filter(|s| matches!(s, Slot::Running(_)))
            .count()
    }

    /// Forgets what the user allowed for `conversation_id` ("allow for this conversation").
    pub fn end_conversation(&self, conversation_id: &str) {
        self.inner.lock().grants.remove(conversation_id);
    }

    /// Takes one ToolUseRequest from the server. Returns at once; the answer (if any) comes
    /// on the event receiver.
    pub fn handle_request(&self, conversation_id: &str, req: ToolUseRequest) -> Handled {
        let inner = &self.inner;
        let mut state = inner.lock();
        inner.audit(AuditEvent::Requested {
            at_ms: now_ms(),
            conversation_id: conversation_id.to_owned(),
            request_id: req.id.clone(),
            message_id: req.message_id.clone(),
            tool: req.tool_name.clone(),
            execution: req.execution.as_str().to_owned(),
            parameters: req.parameters.clone(),
            timeout_ms: req.effective_timeout_ms(),
        });
        match state.requests.get(&req.id) {
            Some(Slot::Running(_)) | Some(Slot::Finished(None)) => {
                inner.audit(AuditEvent::Duplicate {
                    at_ms: now_ms(),
                    request_id: req.id,
                    resent: false,
                });
                return Handled::DuplicateIgnored;
            }
            Some(Slot::Finished(Some(result))) => {
                inner.emit(DispatchEvent::Result(result.clone()));
                inner.audit(AuditEvent::Duplicate {
                    at_ms: now_ms(),
                    request_id: req.id,
                    resent: true,
                });
                return Handled::DuplicateResent;
            }
            None => {}
        }
        if req.execution == Execution::Server {
            inner.remember(&mut state, req.id, None);
            return Handled::Recorded;
        }
        let token = CancellationToken::new();
        state
            .requests
            .insert(req.id.clone(), Slot::Running(token.clone()));
        drop(state);
        let arrived = Instant::now();
        let id = req.id.clone();
        // Checks and the blocking phase start here, on the caller's thread: an allowed call
        // is answered from the blocking pool without waiting for a task to be scheduled.
        match start(&self.inner, conversation_id, req, &token, arrived) {
            Start::Done(result) => self.inner.finish(&id, result, arrived),
            Start::Pending(pending) => {
                let inner = Arc::clone(&self.inner);
                self.inner.runtime.spawn(async move {
                    if let Some(result) = watch(&inner, *pending).await {
                        inner.finish(&id, result, arrived);
                    }
                });
            }
        }
        Handled::Started
    }

    /// Takes one ToolUseCancel. Returns whether a request in flight was stopped; its
    /// `cancelled` answer follows on the event receiver.
    pub fn handle_cancel(&self, cancel: &ToolUseCancel) -> bool {
        let state = self.inner.lock();
        let effective = match state.requests.get(&cancel.id) {
            Some(Slot::Running(token)) => {
                token.cancel();
                true
            }
            _ => false,
        };
        self.inner.audit(AuditEvent::CancelRequested {
            at_ms: now_ms(),
            request_id: cancel.id.clone(),
            reason: cancel.reason.clone(),
            effective,
        });
        effective
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn emit(&self, event: DispatchEvent) {
        debug_assert!(
            !matches!(event, DispatchEvent::Audit(_)),
            "audit goes on its own channel"
        );
        // The session dropped its receiver: it is shutting down and wants nothing more.
        let _ = self.out.send(event);
    }

    fn audit(&self, event: AuditEvent) {
        // As for emit: a dropped receiver means nobody records any more.
        let _ = self.audit_out.send(event);
    }

    fn progress(&self, id: &str, state: ProgressState, detail: String) {
        self.emit(DispatchEvent::Progress(ToolUseProgress {
            id: id.to_owned(),
            state,
            detail: Some(detail),
        }));
    }

    fn decided(
        &self,
        id: &str,
        outcome: AuditOutcome,
        by: &str,
        reason: &str,
        decision: Option<Decision>,
        paths: &[PathBuf],
    ) {
        self.audit(AuditEvent::Decided {
            at_ms: now_ms(),
            request_id: id.to_owned(),
            outcome,
            by: by.to_owned(),
            reason: reason.to_owned(),
            decision,
            paths: paths.to_vec(),
        });
    }

    fn remember(&self, state: &mut State, id: String, result: Option<ToolUseResult>) {
        state.requests.insert(id.clone(), Slot::Finished(result));
        state.finished.push_back(id);
        while state.finished.len() > REMEMBERED_RESULTS {
            if let Some(old) = state.finished.pop_front() {
                state.requests.remove(&old);
            }
        }
    }

    /// Answers `id` unless it was answered already (the deadline, a cancel and the job
    /// can race; the first one wins).
    fn finish(&self, id: &str, result: ToolUseResult, arrived: Instant) {
        let mut state = self.lock();
        if !matches!(state.requests.get(id), Some(Slot::Running(_))) {
            return;
        }
        // Sent under the lock so a duplicate arriving now is answered after the original.
        self.emit(DispatchEvent::Result(result.clone()));
        self.audit(AuditEvent::Finished {
            at_ms: now_ms(),
            request_id: id.to_owned(),
            success: result.success,
            error_code: result.error_code.as_ref().map(|c| c.as_str().to_owned()),
            error_message: result.error_message.clone(),
            duration_ms: ms(arrived.elapsed()),
        });
        self.remember(&mut state, id.to_owned(), Some(result));
    }
}

/// How the first, blocking phase ended.
enum Phase1 {
    /// The tool could not be prepared.
    Failed(ToolError),
    /// The policy allowed it, the job ran and the request was answered.
    Finished,
    /// The policy denied it or wants to ask.
    Verdict(Verdict, Access, Job),
    /// The request was cancelled or timed out before the job started.
    Abandoned,
}

/// Answers for a request that did not start: `either` turns them into unknown_tool so the
/// server runs the tool itself.
fn not_run(req_id: &str, tool: &str, execution: Execution, result: ToolUseResult) -> ToolUseResult {
    if execution == Execution::Either {
        ToolUseResult::unknown_tool(req_id, tool)
    } else {
        result
    }
}

/// What [`start`] left to do.
enum Start {
    /// Answered without running anything.
    Done(ToolUseResult),
    /// The blocking phase is under way.
    Pending(Box<Pending>),
}

struct Pending {
    phase1: tokio::task::JoinHandle<Phase1>,
    conversation: String,
    id: String,
    tool_name: String,
    execution: Execution,
    timeout_ms: u32,
    shown: Map,
    hints: outpost_policy::ToolHints,
    cx: RunContext,
}

/// The synchronous start of a request: lookup, schema check, tool-level deny, then the
/// blocking phase (resolve paths, evaluate the policy and, when allowed outright, run the
/// job and answer).
fn start(
    inner: &Arc<Inner>,
    conversation: &str,
    req: ToolUseRequest,
    token: &CancellationToken,
    arrived: Instant,
) -> Start {
    let id = req.id.clone();
    let tool_name = req.tool_name.clone();
    let execution = req.execution;
    let timeout_ms = req.effective_timeout_ms();
    let Some(entry) = inner.registry.get(&tool_name) else {
        return Start::Done(ToolUseResult::unknown_tool(&id, &tool_name));
    };
    // Kept for the consent prompt, which shows the arguments exactly as received.
    let shown = req.parameters.clone();
    let params = as_value(req.parameters);
    if let Err(e) = entry.validate(&params) {
        return Start::Done(not_run(
            &id,
            &tool_name,
            execution,
            e.to_result(&id, &tool_name),
        ));
    }
    let Value::Object(params) = params else {
        return Start::Done(not_run(
            &id,
            &tool_name,
            execution,
            ToolUseResult::invalid_parameters(&id, &tool_name, "parameters: must be a map"),
        ));
    };
    let policy = inner.policy.current();
    let hints = entry.spec.hints;
    if let Some((by, reason)) = policy.tool_denied(&tool_name, hints) {
        inner.decided(&id, AuditOutcome::Denied, &by, &reason, None, &[]);
        return Start::Done(not_run(
            &id,
            &tool_name,
            execution,
            ToolUseResult::permission_denied(&id, &by, &reason),
        ));
    }
    let grants = inner
        .lock()
        .grants
        .get(conversation)
        .cloned()
        .unwrap_or_default();
    let cx = RunContext {
        cancel: token.clone(),
        policy: Arc::clone(&policy),
        tool: tool_name.clone(),
    };
    let tool = Arc::clone(&entry.tool);
    let env = inner.env.clone();
    let phase1_inner = Arc::clone(inner);
    let phase1_id = id.clone();
    let phase1_cx = cx.clone();
    let phase1_tool = tool_name.clone();
    let phase1 = inner.runtime.spawn_blocking(move || {
        let prepared = match tool.prepare(params, &env) {
            Ok(p) => p,
            Err(e) => return Phase1::Failed(e),
        };
        let access = prepared.access;
        let verdict = policy.evaluate(
            &AccessRequest {
                tool: &phase1_cx.tool,
                hints,
                paths: &access.paths,
                folder: access.folder.as_deref(),
                force_ask: access.force_ask.as_deref(),
            },
            &grants,
        );
        match verdict {
            Verdict::Allow(allowance) => {
                if phase1_cx.cancel.is_cancelled() {
                    return Phase1::Abandoned;
                }
                let (by, reason) = match &allowance {
                    Allowance::ToolRule => {
                        ("your policy", "the tool is set to \"allow\"".to_owned())
                    }
                    Allowance::Folder { path } => (
                        "your policy",
                        format!("inside the allowed folder {}", path.display()),
                    ),
                    Allowance::Conversation => {
                        ("the user", "allowed for this conversation".to_owned())
                    }
                    Allowance::Default => ("your policy", "a harmless tool".to_owned()),
                };
                phase1_inner.decided(
                    &phase1_id,
                    AuditOutcome::Allowed,
                    by,
                    &reason,
                    None,
                    &access.paths,
                );
                phase1_inner.audit(AuditEvent::Started {
                    at_ms: now_ms(),
                    request_id: phase1_id.clone(),
                });
                let outcome = (prepared.job)(&phase1_cx);
                let result = job_result(
                    &phase1_id,
                    &phase1_tool,
                    outcome,
                    &phase1_cx.cancel,
                    timeout_ms,
                );
                phase1_inner.finish(&phase1_id, result, arrived);
                Phase1::Finished
            }
            other => Phase1::Verdict(other, access, prepared.job),
        }
    });
    Start::Pending(Box::new(Pending {
        phase1,
        conversation: conversation.to_owned(),
        id,
        tool_name,
        execution,
        timeout_ms,
        shown,
        hints,
        cx,
    }))
}

/// Enforces the deadline and cancellation of the blocking phase, then handles denial and
/// consent. Returns the answer, or `None` when the blocking phase already answered.
async fn watch(inner: &Arc<Inner>, p: Pending) -> Option<ToolUseResult> {
    let Pending {
        mut phase1,
        conversation,
        id,
        tool_name,
        execution,
        timeout_ms,
        shown,
        hints,
        cx,
    } = p;
    let token = cx.cancel.clone();
    let deadline = Duration::from_millis(u64::from(timeout_ms));
    // Resolution and (when allowed outright) the run share the request's deadline.
    let phase1 = tokio::select! {
        joined = &mut phase1 => joined,
        () = token.cancelled() => return Some(ToolUseResult::cancelled(&id)),
        () = tokio::time::sleep(deadline) => {
            token.cancel();
            return Some(ToolUseResult::timeout(&id, timeout_ms));
        }
    };
    let (verdict, access, job) = match phase1 {
        Err(e) => {
            return Some(ToolUseResult::execution_error(
                &id,
                format!("The tool '{tool_name}' failed unexpectedly: {e}"),
                None,
            ));
        }
        Ok(Phase1::Finished) => return None,
        Ok(Phase1::Abandoned) => return Some(ToolUseResult::cancelled(&id)),
        Ok(Phase1::Failed(e)) => {
            return Some(not_run(
                &id,
                &tool_name,
                execution,
                e.to_result(&id, &tool_name),
            ));
        }
        Ok(Phase1::Verdict(v, access, job)) => (v, access, job),
    };
    Some(match verdict {
        Verdict::Allow(_) => {
            // Evaluated in the blocking phase; an Allow always runs there.
            ToolUseResult::execution_error(&id, "internal error: allowed call did not run", None)
        }
        Verdict::Deny { by, reason } => {
            inner.decided(&id, AuditOutcome::Denied, &by, &reason, None, &access.paths);
            not_run(
                &id,
                &tool_name,
                execution,
                ToolUseResult::permission_denied(&id, &by, &reason),
            )
        }
        Verdict::Ask { reason, options } => {
            let question = ConsentRequest {
                consent_id: String::new(),
                request_id: id.clone(),
                conversation_id: conversation.clone(),
                tool: tool_name.clone(),
                parameters: shown,
                summary: access.summary.clone(),
                paths: access.paths.clone(),
                folder: access.folder.clone(),
                reason,
                destructive: hints.destructive,
                options,
                expires_in_ms: 0,
            };
            consent_then_run(
                inner,
                &conversation,
                &id,
                &tool_name,
                execution,
                question,
                access,
                job,
                cx,
                timeout_ms,
            )
            .await
        }
    })
}

#[allow(clippy::too_many_arguments)]
async fn consent_then_run(
    inner: &Arc<Inner>,
    conversation: &str,
    id: &str,
    tool_name: &str,
    execution: Execution,
    question: ConsentRequest,
    access: Access,
    job: Job,
    cx: RunContext,
    timeout_ms: u32,
) -> ToolUseResult {
    let token = cx.cancel.clone();
    let policy_now = inner.policy.current();
    inner.progress(
        id,
        ProgressState::AwaitingConsent,
        format!("Waiting for the user to allow: {}", access.summary),
    );
    inner.audit(AuditEvent::ConsentAsked {
        at_ms: now_ms(),
        request_id: id.to_owned(),
        reason: question.reason.clone(),
        options: question.options.clone(),
    });
    let consent_timeout = policy_now.consent_timeout();
    let outcome = tokio::select! {
        outcome = inner.broker.ask(question, consent_timeout) => outcome,
        () = token.cancelled() => return ToolUseResult::cancelled(id),
    };
    let deny = |by: &str, reason: &str, decision: Option<Decision>| {
        inner.decided(
            id,
            AuditOutcome::Denied,
            by,
            reason,
            decision,
            &access.paths,
        );
        not_run(
            id,
            tool_name,
            execution,
            ToolUseResult::permission_denied(id, by, reason),
        )
    };
    let decision = match outcome {
        ConsentOutcome::NoUi => {
            return deny(
                "Outpost",
                "this call needs the user's permission and no consent prompt is available",
                None,
            );
        }
        ConsentOutcome::TimedOut => {
            return deny(
                "the consent timeout",
                &format!("nobody answered within {} s", consent_timeout.as_secs()),
                None,
            );
        }
        ConsentOutcome::Decided(d) => d,
    };
    let persist = |access_kind: FolderAccess| {
        let store = inner.policy.clone();
        let folder = access.folder.clone();
        let tool = tool_name.to_owned();
        let inner = Arc::clone(inner);
        let id = id.to_owned();
        // A small file write; done off the async threads.
        tokio::task::spawn_blocking(move || {
            if let Err(e) = store.remember(&tool, folder.as_deref(), access_kind) {
                inner.audit(AuditEvent::PolicyWriteFailed {
                    at_ms: now_ms(),
                    request_id: id,
                    message: e.to_string(),
                });
            }
        })
    };
    match decision {
        Decision::DenyOnce => {
            return deny("the user", "the user declined this call", Some(decision));
        }
        Decision::AlwaysDeny => {
            let _ = persist(FolderAccess::Deny).await;
            return deny(
                "the user",
                "the user declined this and future calls",
                Some(decision),
            );
        }
        Decision::AllowForConversation => {
            inner
                .lock()
                .grants
                .entry(conversation.to_owned())
                .or_default()
                .grant(tool_name, access.folder.as_deref());
        }
        Decision::AlwaysAllow => {
            let _ = persist(FolderAccess::Allow).await;
        }
        Decision::AllowOnce => {}
    }
    inner.decided(
        id,
        AuditOutcome::Allowed,
        "the user",
        decision.as_str(),
        Some(decision),
        &access.paths,
    );
    if token.is_cancelled() {
        return ToolUseResult::cancelled(id);
    }
    inner.progress(
        id,
        ProgressState::Running,
        format!("Running: {}", access.summary),
    );
    inner.audit(AuditEvent::Started {
        at_ms: now_ms(),
        request_id: id.to_owned(),
    });
    let deadline = Duration::from_millis(u64::from(timeout_ms));
    let job_cx = cx.clone();
    let mut handle = tokio::task::spawn_blocking(move || job(&job_cx));
    tokio::select! {
        joined = &mut handle => match joined {
            Ok(outcome) => job_result(id, tool_name, outcome, &token, timeout_ms),
            Err(e) => ToolUseResult::execution_error(
                id,
                format!("The tool '{tool_name}' failed unexpectedly: {e}"),
                None,
            ),
        },
        () = token.cancelled() => ToolUseResult::cancelled(id),
        () = tokio::time::sleep(deadline) => {
            token.cancel();
            ToolUseResult::timeout(id, timeout_ms)
        }
    }
}

fn job_result(
    id: &str,
    tool: &str,
    outcome: crate::error::Result<Map>,
    token: &CancellationToken,
    timeout_ms: u32,
) -> ToolUseResult {
    match outcome {
        Ok(map) => ToolUseResult::ok(id, map),
        // The job noticed the token: whoever set it already decided the answer, but this
        // path is reached only when the job returned first; report what stopped it.
        Err(ToolError::Cancelled) if token.is_cancelled() => ToolUseResult::cancelled(id),
        Err(ToolError::Cancelled) => ToolUseResult::timeout(id, timeout_ms),
        Err(e) => e.to_result(id, tool),
    }
}
