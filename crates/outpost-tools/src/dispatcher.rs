//! The dispatcher: seed 000's client side.
//!
//! Feed it every ToolUseRequest ([`Dispatcher::handle_request`]) and ToolUseCancel
//! ([`Dispatcher::handle_cancel`]); read [`DispatchEvent`]s from the one receiver returned
//! by [`Dispatcher::new`], in the order they happened: results and progress to send to the
//! server, and the typed facts of each call's lifecycle (who decided what, when it
//! started, an "always" answer that could not be saved) for the audit log. Per request id:
//!
//! - `execution: server` is remembered (for duplicates) and never run, and gets no answer.
//! - `execution: client` gets exactly one ToolUseResult: the tool's, or unknown_tool,
//!   invalid_parameters, execution_error, timeout, permission_denied or cancelled.
//! - `execution: either` runs when the tool is supported, valid and permitted; in every
//!   case where it does not start, the answer is unknown_tool (seed text) so the server
//!   runs it itself. Once it started, its outcome is answered as for `client`.
//! - A duplicate id never runs twice: while the first is in flight it is ignored; after,
//!   the same result is sent again while it is still held. Finished results are held
//!   within a byte budget ([`HELD_RESULT_BYTES`]); an older one is answered with an
//!   `execution_error` saying it was already answered (PROTOCOL.md §6.1), so a stream of
//!   large results cannot pile up in memory.
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
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use outpost_policy::{
    AccessRequest, Allowance, ConsentBroker, ConsentOutcome, ConsentRequest, ConversationGrants,
    Decider, Decision, FolderAccess, PolicyStore, Verdict,
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
use crate::tool::{Access, Job, ProgressSink, RunContext, Tool, ToolEnv, ToolSpec};

/// Finished request ids remembered for duplicate detection.
pub const REMEMBERED_RESULTS: usize = 10_000;

/// At most this many bytes (roughly: text and numbers) of finished results are held for
/// resending to duplicates; the oldest are let go first.
pub const HELD_RESULT_BYTES: usize = 8 * 1024 * 1024;

/// Whether a call was allowed or denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// The call may run.
    Allowed,
    /// The call may not run.
    Denied,
}

/// Everything the dispatcher reports, on one channel, in the order it happened. For each
/// request: `Decided` before `Started`, `Started` before the job's `Progress`, and all of
/// them before its one `Result`; nothing about a request follows its `Result` (a call
/// answered by its deadline or a cancel before it started never reports `Started`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DispatchEvent {
    /// Send to the server: the request's one answer.
    Result(ToolUseResult),
    /// Send to the server: the call waits for consent, or started after consent.
    Progress(ToolUseProgress),
    /// The call was allowed or denied, and by whom.
    Decided {
        /// The request.
        request_id: String,
        /// Allowed or denied.
        outcome: AuditOutcome,
        /// Who decided.
        by: Decider,
        /// Why, in words.
        reason: String,
        /// The user's answer, when the user answered a prompt (`by` is [`Decider::User`]).
        decision: Option<Decision>,
        /// The resolved paths concerned.
        paths: Vec<PathBuf>,
    },
    /// The tool started running (also for calls allowed without asking, which send no
    /// progress).
    Started {
        /// The request.
        request_id: String,
    },
    /// An "always" answer applied to the call but could not be written to the policy file:
    /// the user must be told it will not be remembered.
    PolicyWriteFailed {
        /// The request.
        request_id: String,
        /// The decision that was not saved.
        decision: Decision,
        /// The error.
        message: String,
    },
}

impl DispatchEvent {
    /// The protocol message to send, for results and progress.
    pub fn to_message(&self) -> Option<Message> {
        match self {
            Self::Result(r) => Some(Message::ToolUseResult(r.clone())),
            Self::Progress(p) => Some(Message::ToolUseProgress(p.clone())),
            _ => None,
        }
    }
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
    /// A server request: recorded, never answered.
    Recorded,
    /// Answered; the result is held for duplicates while the budget allows.
    Answered(Held),
}

#[derive(Debug)]
enum Held {
    Result {
        result: ToolUseResult,
        bytes: usize,
    },
    /// Let go to stay within [`HELD_RESULT_BYTES`]; the size it had.
    Released {
        bytes: usize,
    },
}

#[derive(Debug, Default)]
struct State {
    requests: HashMap<String, Slot>,
    finished: VecDeque<String>,
    /// Bytes of the results in `Held::Result`.
    held_bytes: usize,
    grants: HashMap<String, ConversationGrants>,
}

/// A cheap estimate of what a result occupies: its strings and numbers, not serde's
/// allocation overhead.
fn result_bytes(r: &ToolUseResult) -> usize {
    fn value(v: &Value) -> usize {
        match v {
            Value::String(s) => s.len() + 8,
            Value::Array(a) => 8 + a.iter().map(value).sum::<usize>(),
            Value::Object(m) => 8 + m.iter().map(|(k, v)| k.len() + value(v)).sum::<usize>(),
            _ => 8,
        }
    }
    let map = r
        .result
        .as_ref()
        .map_or(0, |m| m.iter().map(|(k, v)| k.len() + value(v)).sum());
    64 + r.id.len() + map + r.error_message.as_ref().map_or(0, String::len)
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    /// Tools that come and go while the dispatcher runs (an MCP server's); replaced whole by
    /// [`Dispatcher::set_extra_tools`]. Looked up after `registry`.
    extra: RwLock<Arc<Registry>>,
    env: ToolEnv,
    policy: PolicyStore,
    broker: ConsentBroker,
    out: mpsc::UnboundedSender<DispatchEvent>,
    state: Mutex<State>,
    runtime: tokio::runtime::Handle,
}

/// Runs tool requests under the policy. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Dispatcher {
    /// A dispatcher over `registry`. Must be called inside a tokio runtime (requests are
    /// run on it). Returns the receiver of everything the dispatcher emits, in order.
    pub fn new(
        registry: Registry,
        env: ToolEnv,
        policy: PolicyStore,
        broker: ConsentBroker,
    ) -> (Self, mpsc::UnboundedReceiver<DispatchEvent>) {
        let (out, events) = mpsc::unbounded_channel();
        let inner = Inner {
            registry,
            extra: RwLock::new(Arc::new(Registry::new())),
            env,
            policy,
            broker,
            out,
            state: Mutex::new(State::default()),
            runtime: tokio::runtime::Handle::current(),
        };
        (
            Self {
                inner: Arc::new(inner),
            },
            events,
        )
    }

    /// The catalogue for `ClientHello.tools`: the fixed tools, then the extra ones.
    pub fn catalogue(&self) -> Vec<ToolDescriptor> {
        let mut tools = self.inner.registry.descriptors();
        tools.extend(self.inner.extra().descriptors());
        tools
    }

    /// Replaces the tools that come and go (an MCP server's). A name the fixed registry
    /// already has is left out (the fixed tool wins). Calls already started keep the tool
    /// they started with; a request for a tool no longer offered is an unknown tool.
    /// Returns the names left out.
    pub fn set_extra_tools(&self, mut extra: Registry) -> Vec<String> {
        let clashes: Vec<String> = extra
            .names()
            .filter(|n| self.inner.registry.get(n).is_some())
            .map(str::to_owned)
            .collect();
        for n in &clashes {
            extra.remove(n);
        }
        *outpost_sync::write(&self.inner.extra) = Arc::new(extra);
        clashes
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

    /// Bytes of finished results held for duplicates (at most about [`HELD_RESULT_BYTES`]).
    pub fn held_result_bytes(&self) -> usize {
        self.inner.lock().held_bytes
    }

    /// Forgets what the user allowed for `scope` ("allow for this conversation").
    pub fn end_conversation(&self, scope: &str) {
        self.inner.lock().grants.remove(scope);
    }

    /// Takes one ToolUseRequest from the server. `scope` keys "allow for this
    /// conversation" grants: the caller makes it change whenever the conversation or the
    /// assistant does, so grants never outlive either. Returns at once; the answer (if any)
    /// comes on the event receiver.
    pub fn handle_request(&self, scope: &str, req: ToolUseRequest) -> Handled {
        let inner = &self.inner;
        let mut state = inner.lock();
        match state.requests.get(&req.id) {
            Some(Slot::Running(_) | Slot::Recorded) => return Handled::DuplicateIgnored,
            Some(Slot::Answered(Held::Result { result, .. })) => {
                inner.emit(DispatchEvent::Result(result.clone()));
                return Handled::DuplicateResent;
            }
            Some(Slot::Answered(Held::Released { bytes })) => {
                inner.emit(DispatchEvent::Result(ToolUseResult::execution_error(
                    &req.id,
                    format!(
                        "This request was answered already; its result ({bytes} bytes) is no \
                         longer held for resending, and Outpost never runs a request twice"
                    ),
                    None,
                )));
                return Handled::DuplicateResent;
            }
            None => {}
        }
        if req.execution == Execution::Server {
            inner.remember(&mut state, req.id, Slot::Recorded);
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
        match start(&self.inner, scope, req, &token, arrived) {
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
        match state.requests.get(&cancel.id) {
            Some(Slot::Running(token)) => {
                token.cancel();
                true
            }
            _ => false,
        }
    }
}

impl Inner {
    fn extra(&self) -> Arc<Registry> {
        Arc::clone(&outpost_sync::read(&self.extra))
    }

    /// The tool called `name` (fixed tools first), its spec, and its parameters checked
    /// against its schema.
    fn lookup(
        &self,
        name: &str,
        params: &Value,
    ) -> Option<(Arc<dyn Tool>, ToolSpec, crate::error::Result<()>)> {
        let found = |r: &Registry| {
            r.get(name)
                .map(|e| (Arc::clone(&e.tool), e.spec.clone(), e.validate(params)))
        };
        found(&self.registry).or_else(|| found(&self.extra()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        outpost_sync::lock(&self.state)
    }

    fn emit(&self, event: DispatchEvent) {
        // The session dropped its receiver: it is shutting down and wants nothing more.
        let _ = self.out.send(event);
    }

    /// Emits `events` about the call `id` only while it is unanswered, under the lock that
    /// [`Inner::finish`] holds to answer it, so nothing about a call follows its result: a
    /// deadline or a cancel can answer while the blocking phase or the job still runs, and
    /// what they report then is dropped. Returns whether the events went out.
    fn emit_for(&self, id: &str, events: impl IntoIterator<Item = DispatchEvent>) -> bool {
        let state = self.lock();
        if !matches!(state.requests.get(id), Some(Slot::Running(_))) {
            return false;
        }
        for event in events {
            self.emit(event);
        }
        true
    }

    fn progress(&self, id: &str, state: ProgressState, detail: String) {
        self.emit_for(
            id,
            [DispatchEvent::Progress(ToolUseProgress {
                id: id.to_owned(),
                state,
                detail: Some(detail),
            })],
        );
    }

    fn decided(
        &self,
        id: &str,
        outcome: AuditOutcome,
        by: Decider,
        reason: &str,
        decision: Option<Decision>,
        paths: &[PathBuf],
    ) {
        self.emit_for(
            id,
            [decided_event(id, outcome, by, reason, decision, paths)],
        );
    }

    fn started(&self, id: &str) {
        self.emit_for(id, [started_event(id)]);
    }

    /// Keeps `slot` for `id`, then lets go of the oldest ids past [`REMEMBERED_RESULTS`]
    /// and of the oldest held results past [`HELD_RESULT_BYTES`].
    fn remember(&self, state: &mut State, id: String, slot: Slot) {
        if let Slot::Answered(Held::Result { bytes, .. }) = &slot {
            state.held_bytes += bytes;
        }
        state.requests.insert(id.clone(), slot);
        state.finished.push_back(id);
        while state.finished.len() > REMEMBERED_RESULTS {
            if let Some(old) = state.finished.pop_front() {
                if let Some(Slot::Answered(Held::Result { bytes, .. })) =
                    state.requests.remove(&old)
                {
                    state.held_bytes -= bytes;
                }
            }
        }
        if state.held_bytes > HELD_RESULT_BYTES {
            let State {
                requests,
                finished,
                held_bytes,
                ..
            } = state;
            for old in finished.iter() {
                if *held_bytes <= HELD_RESULT_BYTES {
                    break;
                }
                if let Some(slot @ Slot::Answered(Held::Result { .. })) = requests.get_mut(old) {
                    if let Slot::Answered(Held::Result { bytes, .. }) = slot {
                        let bytes = *bytes;
                        *held_bytes -= bytes;
                        *slot = Slot::Answered(Held::Released { bytes });
                    }
                }
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
        tracing::debug!(request = id, ms = ms(arrived.elapsed()), "answered");
        let bytes = result_bytes(&result);
        self.remember(
            &mut state,
            id.to_owned(),
            Slot::Answered(Held::Result { result, bytes }),
        );
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

fn decided_event(
    id: &str,
    outcome: AuditOutcome,
    by: Decider,
    reason: &str,
    decision: Option<Decision>,
    paths: &[PathBuf],
) -> DispatchEvent {
    DispatchEvent::Decided {
        request_id: id.to_owned(),
        outcome,
        by,
        reason: reason.to_owned(),
        decision,
        paths: paths.to_vec(),
    }
}

fn started_event(id: &str) -> DispatchEvent {
    DispatchEvent::Started {
        request_id: id.to_owned(),
    }
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
    spec: ToolSpec,
    cx: RunContext,
    arrived: Instant,
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
    // Kept for the consent prompt, which shows the arguments exactly as received.
    let shown = req.parameters.clone();
    let params = as_value(req.parameters);
    let Some((tool, spec, valid)) = inner.lookup(&tool_name, &params) else {
        return Start::Done(ToolUseResult::unknown_tool(&id, &tool_name));
    };
    if let Err(e) = valid {
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
    let hints = spec.hints;
    let server = spec.descriptor.server_name.clone();
    if let Some((by, reason)) = policy.tool_denied(&tool_name, server.as_deref(), hints) {
        inner.decided(&id, AuditOutcome::Denied, by, &reason, None, &[]);
        return Start::Done(not_run(
            &id,
            &tool_name,
            execution,
            ToolUseResult::permission_denied(&id, by.phrase(), &reason),
        ));
    }
    let grants = inner
        .lock()
        .grants
        .get(conversation)
        .cloned()
        .unwrap_or_default();
    let progress_to = Arc::downgrade(inner);
    let progress_id = id.clone();
    let cx = RunContext {
        cancel: token.clone(),
        policy: Arc::clone(&policy),
        tool: tool_name.clone(),
        // A job that goes on after its deadline or cancel reports nothing more.
        progress: ProgressSink::new(&id, move |p| {
            if let Some(inner) = progress_to.upgrade() {
                inner.emit_for(&progress_id, [DispatchEvent::Progress(p)]);
            }
        }),
    };
    let env = inner.env.clone();
    let phase1_inner = Arc::clone(inner);
    let phase1_id = id.clone();
    let phase1_cx = cx.clone();
    let phase1_tool = tool_name.clone();
    let phase1_server = server.clone();
    let phase1 = inner.runtime.spawn_blocking(move || {
        let prepared = match tool.prepare(params, &env) {
            Ok(p) => p,
            Err(e) => return Phase1::Failed(e),
        };
        let access = prepared.access;
        let verdict = policy.evaluate(
            &AccessRequest {
                tool: &phase1_cx.tool,
                server: phase1_server.as_deref(),
                hints,
                paths: &access.paths,
                folder: access.folder.as_deref(),
                force_ask: access.force_ask.as_deref(),
            },
            &grants,
        );
        match verdict {
            Verdict::Allow(allowance) => {
                let (by, reason) = match &allowance {
                    Allowance::ToolRule => {
                        (Decider::Policy, "the tool is set to \"allow\"".to_owned())
                    }
                    Allowance::Folder { path } => (
                        Decider::Policy,
                        format!("inside the allowed folder {}", path.display()),
                    ),
                    Allowance::Conversation => (
                        Decider::ConversationGrant,
                        "allowed for this conversation".to_owned(),
                    ),
                    Allowance::Default => (Decider::Policy, "a harmless tool".to_owned()),
                };
                // A call whose deadline has passed does not start, even when the timer
                // that answers it has not fired yet (a busy machine can delay it past a
                // short deadline): it is answered `timeout` here, as the timer would.
                if arrived.elapsed() >= Duration::from_millis(u64::from(timeout_ms)) {
                    phase1_inner.finish(
                        &phase1_id,
                        ToolUseResult::timeout(&phase1_id, timeout_ms),
                        arrived,
                    );
                    return Phase1::Finished;
                }
                // Decided and started together, only while the call is unanswered: once
                // the deadline (or a cancel) has answered it, the job never runs.
                let begun = !phase1_cx.cancel.is_cancelled()
                    && phase1_inner.emit_for(
                        &phase1_id,
                        [
                            decided_event(
                                &phase1_id,
                                AuditOutcome::Allowed,
                                by,
                                &reason,
                                None,
                                &access.paths,
                            ),
                            started_event(&phase1_id),
                        ],
                    );
                if !begun {
                    return Phase1::Abandoned;
                }
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
        spec,
        cx,
        arrived,
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
        spec,
        cx,
        arrived,
    } = p;
    let token = cx.cancel.clone();
    let deadline = Duration::from_millis(u64::from(timeout_ms));
    // Resolution and (when allowed outright) the run share the request's deadline.
    let phase1 = tokio::select! {
        joined = &mut phase1 => joined,
        () = token.cancelled() => return Some(ToolUseResult::cancelled(&id)),
        () = tokio::time::sleep(deadline) => {
            // Answered before the token is set: a job allowed outright answers from the
            // blocking phase, and one that stops because of the token would otherwise
            // race this answer with its own `cancelled`.
            inner.finish(&id, ToolUseResult::timeout(&id, timeout_ms), arrived);
            token.cancel();
            return None;
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
            inner.decided(&id, AuditOutcome::Denied, by, &reason, None, &access.paths);
            not_run(
                &id,
                &tool_name,
                execution,
                ToolUseResult::permission_denied(&id, by.phrase(), &reason),
            )
        }
        Verdict::Ask { reason, options } => {
            let question = ConsentRequest {
                consent_id: String::new(),
                request_id: id.clone(),
                conversation_id: conversation.clone(),
                tool: tool_name.clone(),
                server: spec.descriptor.server_name.clone(),
                description: spec.descriptor.description.clone(),
                claims: spec.claims,
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
    let consent_timeout = policy_now.consent_timeout();
    let outcome = tokio::select! {
        outcome = inner.broker.ask(question, consent_timeout) => outcome,
        () = token.cancelled() => return ToolUseResult::cancelled(id),
    };
    let deny = |by: Decider, reason: &str, decision: Option<Decision>| {
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
            ToolUseResult::permission_denied(id, by.phrase(), reason),
        )
    };
    let decision = match outcome {
        ConsentOutcome::NoUi => {
            return deny(
                Decider::NoConsentUi,
                "this call needs the user's permission and no consent prompt is available",
                None,
            );
        }
        ConsentOutcome::TimedOut => {
            return deny(
                Decider::ConsentTimeout,
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
        // A small file write; done off the async threads. Reported before the decision,
        // so the user learns it together with the call's outcome.
        tokio::task::spawn_blocking(move || {
            if let Err(e) = store.remember(&tool, folder.as_deref(), access_kind) {
                let event = DispatchEvent::PolicyWriteFailed {
                    request_id: id.clone(),
                    decision,
                    message: e.to_string(),
                };
                inner.emit_for(&id, [event]);
            }
        })
    };
    match decision {
        Decision::DenyOnce => {
            return deny(Decider::User, "the user declined this call", Some(decision));
        }
        Decision::AlwaysDeny => {
            let _ = persist(FolderAccess::Deny).await;
            return deny(
                Decider::User,
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
        Decider::User,
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
    inner.started(id);
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
