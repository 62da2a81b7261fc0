//! The protocol server: one [`Session`] task per app (by participant identity), fed by
//! [`serve`], which reads the room.
//!
//! A session answers ClientHello with ServerWelcome (or a fatal `unsupported_version`),
//! rejects messages that come too early or from the wrong side, and runs one turn per
//! UserMessage, one after the other: a UserMessage that arrives while a turn runs waits in
//! the session's queue (the user typed ahead) and is answered, in order, once the turns
//! before it are done. This is the session's job, not the brains', so every brain gets it.
//!
//! Only a new hello, a fatal error from the app, or the app leaving interrupts the turn in
//! progress: its pending tool calls are cancelled (ToolUseCancel, with the reason) and its
//! message is closed with what was said so far plus `(interrupted)`. A hello for the same
//! conversation (a full rejoin) keeps the queue and answers it after the welcome. A hello
//! for another conversation drops the queue: the app switched away from those questions
//! itself (an answer sent before the welcome would be refused as early, one sent after it
//! would land in the wrong conversation). A hello for a conversation this agent does not
//! hold (the app continues one from its history after the agent restarted) is welcomed
//! under the id it asked for, with the hello's `history` as what was said before.
//!
//! A turn is the tool loop: stream the brain's text as AssistantDelta, then for each tool
//! call send a ToolUseRequest and
//! - `server` (the agent's own tool, which the app did not list): run it here, send the
//!   ToolUseResult to the app for transparency;
//! - `client` (anything the agent does not have): wait for the app's ToolUseResult;
//! - `either` (both have it): wait for the app; if it answers `unknown_tool`, run it here
//!   and send our own ToolUseResult with the same id (PROTOCOL.md §6.3).
//!
//! Waiting for the app counts `timeoutMs` plus a grace period, but not while the app
//! reports `awaiting_consent` (§6.2); a deadline that passes sends ToolUseCancel and
//! feeds the model a `timeout` failure. Results then go back to the brain, until it
//! answers without tool calls; the AssistantMessage carries the whole text.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use outpost_livekit::{RoomEvent, RoomEvents};
use outpost_llm::{ChatMessage, ModelTurn, ToolBatch, ToolCall, ToolCallError, ToolResult};
use outpost_protocol::{
    ATTACHMENTS_CAPABILITY, AssistantDelta, AssistantMessage, AssistantState, AssistantStatus,
    Attachment, ClientHello, ErrorMessage, Execution, HistoryMessage, HistoryRole, MAX_TIMEOUT_MS,
    MIN_PROTOCOL_VERSION, Message, PROTOCOL_VERSION, ProgressState, Role, ServerWelcome, TOPIC,
    ToolDescriptor, ToolErrorCode, ToolUseCancel, ToolUseProgress, ToolUseRequest, ToolUseResult,
    UserMessage, decode, negotiate, new_id, peek_id,
};

use crate::brain::{Brain, BrainRequest};
use crate::error::{Error, Result};
use crate::link::{Link, read_stream};
use crate::tools::ServerTools;

/// Tuning of the protocol server.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Extra time granted after `timeoutMs` before the agent gives up on the app's
    /// result (the app enforces the timeout itself and should answer first).
    pub result_grace: Duration,
    /// Longest wait for a user's consent before giving up on a call.
    pub consent_limit: Duration,
    /// Most model rounds in one turn.
    pub max_rounds: usize,
    /// The system prompt at the start of every conversation.
    pub system_prompt: String,
    /// Longest time to receive one incoming byte stream.
    pub stream_read_limit: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            result_grace: Duration::from_secs(2),
            consent_limit: Duration::from_secs(600),
            max_rounds: 8,
            system_prompt: "You are the assistant of Outpost, a desktop app. Tools marked \
                as the user's run on the user's computer after the user allows them. Be \
                concise."
                .to_owned(),
            stream_read_limit: Duration::from_secs(120),
        }
    }
}

type History = Arc<tokio::sync::Mutex<Vec<ChatMessage>>>;

/// What every session shares.
#[derive(Debug)]
pub struct Shared {
    link: Link,
    brain: Arc<dyn Brain>,
    tools: ServerTools,
    config: AgentConfig,
    conversations: Mutex<HashMap<String, History>>,
}

impl Shared {
    /// Everything a session needs.
    pub fn new(link: Link, brain: Arc<dyn Brain>, tools: ServerTools, config: AgentConfig) -> Self {
        Self {
            link,
            brain,
            tools,
            config,
            conversations: Mutex::default(),
        }
    }

    async fn send(&self, to: &str, msg: impl Into<Message>) {
        let msg = msg.into();
        if let Err(e) = self.link.send(to, &msg).await {
            tracing::warn!(to, error = %e, ty = %msg.message_type(), "send failed");
        }
    }

    /// The conversation a hello asks for: the one held under `id`; else, when the app
    /// asked for one this agent does not hold (it restarted since), that id with the
    /// hello's `history` as what was said so far; else a new one.
    fn conversation(&self, id: Option<&str>, earlier: &[HistoryMessage]) -> (String, History) {
        let mut map = outpost_sync::lock(&self.conversations);
        if let Some((id, h)) = id.and_then(|id| map.get(id).map(|h| (id, h))) {
            return (id.to_owned(), h.clone());
        }
        let mut messages = vec![ChatMessage::system(&self.config.system_prompt)];
        messages.extend(earlier.iter().map(|m| match m.role {
            HistoryRole::User => ChatMessage::User {
                text: m.text.clone(),
            },
            HistoryRole::Assistant => ChatMessage::Assistant {
                text: m.text.clone(),
                tool_calls: Vec::new(),
            },
        }));
        let id = id.map_or_else(new_id, str::to_owned);
        let h: History = Arc::new(tokio::sync::Mutex::new(messages));
        map.insert(id.clone(), h.clone());
        (id, h)
    }
}

enum Inbound {
    Message(Message),
    Left,
}

enum ToolEvent {
    Result(ToolUseResult),
    Progress(ToolUseProgress),
}

/// Reads the room and feeds sessions until the room is closed for good.
pub async fn serve(shared: Arc<Shared>, mut events: RoomEvents) -> Result<()> {
    let mut sessions: HashMap<String, mpsc::UnboundedSender<Inbound>> = HashMap::new();
    while let Some(ev) = events.recv().await {
        match ev {
            RoomEvent::Data(d)
                if d.topic.as_deref() == Some(TOPIC) && !d.sender_identity.is_empty() =>
            {
                deliver(&shared, &mut sessions, &d.sender_identity, &d.payload).await;
            }
            RoomEvent::StreamOpened(reader) => {
                if reader.info.topic != TOPIC {
                    continue;
                }
                let from = reader.info.sender_identity.clone();
                // Read inline: packets and streams share one ordered channel, and
                // handling them in arrival order keeps the sender's order.
                let read =
                    tokio::time::timeout(shared.config.stream_read_limit, read_stream(reader))
                        .await;
                match read {
                    Ok(Ok(bytes)) => deliver(&shared, &mut sessions, &from, &bytes).await,
                    Ok(Err(failure)) => {
                        tracing::warn!(from, ?failure, "incoming message stream failed");
                        if let Some(e) = failure.to_decode_error() {
                            shared.send(&from, e.to_error_message(None)).await;
                        }
                    }
                    Err(_) => {
                        tracing::warn!(from, "incoming message stream took too long; dropped")
                    }
                }
            }
            RoomEvent::ParticipantLeft(p) => {
                if let Some(tx) = sessions.remove(&p.identity) {
                    let _ = tx.send(Inbound::Left);
                }
            }
            RoomEvent::Reconnecting { reason } => tracing::warn!(reason, "link lost; reconnecting"),
            RoomEvent::Reconnected { resumed } => tracing::info!(resumed, "link back"),
            RoomEvent::Disconnected { reason } => {
                return Err(Error::Config(format!(
                    "disconnected from the room: {reason}"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

async fn deliver(
    shared: &Arc<Shared>,
    sessions: &mut HashMap<String, mpsc::UnboundedSender<Inbound>>,
    from: &str,
    bytes: &[u8],
) {
    let msg = match decode(bytes) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(from, error = %e, "rejected a message");
            shared.send(from, e.to_error_message(peek_id(bytes))).await;
            return;
        }
    };
    let tx = sessions.entry(from.to_owned()).or_insert_with(|| {
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let session = Session::new(shared.clone(), from.to_owned(), done_tx);
        tokio::spawn(session.run(rx, done_rx));
        tx
    });
    let _ = tx.send(Inbound::Message(msg));
}

struct RunningTurn {
    /// Which turn this is: its task reports this number when it ends.
    n: u64,
    cancel: CancellationToken,
    /// Why the turn was interrupted; set before `cancel` fires (ToolUseCancel's reason).
    why: Arc<OnceLock<String>>,
    events: mpsc::UnboundedSender<ToolEvent>,
    join: tokio::task::JoinHandle<()>,
}

/// Attachments held for messages not yet received, per app.
const HELD_ATTACHMENTS: usize = 32;

/// Largest UTF-8 attachment whose text the model is given, in bytes.
const ATTACHMENT_TEXT_BYTES: u64 = 64 * 1024;

/// What the model is told about an attachment: a line the scripted brain reads
/// (`[attachment: NAME, TYPE, N bytes, sha256 HEX]`), then the text of a small UTF-8 file.
/// The model bridges are text only: an image is described, not shown.
pub fn attachment_note(a: &Attachment) -> String {
    let mut note = format!(
        "[attachment: {}, {}, {} bytes, sha256 {}]",
        a.name, a.mime_type, a.size, a.sha256
    );
    if a.size <= ATTACHMENT_TEXT_BYTES && !a.mime_type.starts_with("image/") {
        if let Some(text) = a.bytes().ok().and_then(|b| String::from_utf8(b).ok()) {
            note.push_str(&format!("\n```\n{}\n```", text.trim_end()));
        }
    }
    note
}

/// One app's protocol session.
struct Session {
    shared: Arc<Shared>,
    identity: String,
    conversation: Option<(String, History)>,
    client_tools: Vec<ToolDescriptor>,
    turn: Option<RunningTurn>,
    /// UserMessages waiting for the turn in progress to end, oldest first.
    queue: VecDeque<UserMessage>,
    /// Attachments (type 13) waiting for the UserMessage they belong to, oldest first;
    /// at most [`HELD_ATTACHMENTS`] (an app that never sends the message cannot pile
    /// them up).
    attached: VecDeque<Attachment>,
    /// Turns started so far (numbers them).
    started: u64,
    /// Where turn tasks report that they ended.
    done: mpsc::UnboundedSender<u64>,
}

impl Session {
    fn new(shared: Arc<Shared>, identity: String, done: mpsc::UnboundedSender<u64>) -> Self {
        Self {
            shared,
            identity,
            conversation: None,
            client_tools: Vec::new(),
            turn: None,
            queue: VecDeque::new(),
            attached: VecDeque::new(),
            started: 0,
            done,
        }
    }

    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Inbound>,
        mut done: mpsc::UnboundedReceiver<u64>,
    ) {
        loop {
            tokio::select! {
                inbound = rx.recv() => match inbound {
                    Some(Inbound::Message(m)) => self.handle(m).await,
                    Some(Inbound::Left) | None => {
                        tracing::info!(identity = %self.identity, "app left");
                        self.drop_queue("the app left the room");
                        self.interrupt("the app left the room").await;
                        return;
                    }
                },
                Some(n) = done.recv() => {
                    // A turn that was interrupted already made way; only the current one
                    // ending lets the next queued message go.
                    if self.turn.as_ref().is_some_and(|t| t.n == n) {
                        self.turn = None;
                        self.next_turn();
                    }
                }
            }
        }
    }

    async fn send(&self, msg: impl Into<Message>) {
        self.shared.send(&self.identity, msg).await;
    }

    async fn interrupt(&mut self, why: &str) {
        if let Some(t) = self.turn.take() {
            if !t.join.is_finished() {
                tracing::info!(identity = %self.identity, why, "interrupting the turn");
            }
            let _ = t.why.set(why.to_owned());
            t.cancel.cancel();
            let _ = t.join.await;
        }
    }

    /// Forgets the messages still waiting for their turn (the app left or gave up).
    fn drop_queue(&mut self, why: &str) {
        if !self.queue.is_empty() {
            tracing::info!(identity = %self.identity, why, dropped = self.queue.len(), "queued user messages dropped");
            self.queue.clear();
        }
    }

    async fn handle(&mut self, msg: Message) {
        let welcomed = self.conversation.is_some();
        match msg {
            Message::ClientHello(h) => self.hello(h).await,
            Message::Error(e) => {
                tracing::warn!(identity = %self.identity, code = %e.code.as_str(), message = %e.message, fatal = e.fatal, "the app reported an error");
                if e.fatal {
                    self.drop_queue("the app reported a fatal error");
                    self.interrupt("the app reported a fatal error").await;
                    self.conversation = None;
                }
            }
            Message::UserMessage(mut m) if welcomed => {
                // Its attachments came just before it: the model reads about them first.
                let notes: Vec<String> = self
                    .attached
                    .iter()
                    .filter(|a| a.message_id == m.id)
                    .map(attachment_note)
                    .collect();
                self.attached.retain(|a| a.message_id != m.id);
                if !notes.is_empty() {
                    m.text = format!("{}\n\n{}", notes.join("\n\n"), m.text);
                }
                // The user typed ahead: answer in order, one turn after the other.
                self.queue.push_back(m);
                self.next_turn();
            }
            Message::Attachment(a) if welcomed => {
                tracing::info!(identity = %self.identity, name = %a.name, size = a.size, "attachment");
                if self.attached.len() >= HELD_ATTACHMENTS {
                    self.attached.pop_front();
                }
                self.attached.push_back(a);
            }
            Message::ToolUseResult(r) if welcomed => {
                self.to_turn(&r.id.clone(), ToolEvent::Result(r))
            }
            Message::ToolUseProgress(p) if welcomed => {
                self.to_turn(&p.id.clone(), ToolEvent::Progress(p))
            }
            Message::ToolsChanged(t) if welcomed => {
                // Version 2: the app's catalogue changed (an MCP server's tools came or
                // went). The next turn offers the new list to the model.
                tracing::info!(identity = %self.identity, tools = t.tools.len(), "the app's tools changed");
                self.client_tools = t.tools;
            }
            m @ (Message::UserMessage(_)
            | Message::Attachment(_)
            | Message::ToolUseResult(_)
            | Message::ToolUseProgress(_)) => {
                self.send(ErrorMessage::unexpected(&m, Role::Client, true))
                    .await;
            }
            other => {
                self.send(ErrorMessage::unexpected(&other, Role::Client, false))
                    .await;
            }
        }
    }

    fn to_turn(&self, id: &str, ev: ToolEvent) {
        match &self.turn {
            Some(t) if !t.join.is_finished() => {
                let _ = t.events.send(ev);
            }
            _ => tracing::debug!(id, "tool message with no turn in progress; ignored"),
        }
    }

    async fn hello(&mut self, hello: ClientHello) {
        let ours = MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION;
        let Some(version) = negotiate(hello.versions(), ours.clone()) else {
            self.drop_queue("no common protocol version");
            self.interrupt("no common protocol version").await;
            self.conversation = None;
            self.send(ErrorMessage::unsupported_version(hello.versions(), ours))
                .await;
            return;
        };
        let same = matches!(
            (&self.conversation, hello.conversation_id.as_deref()),
            (Some((now, _)), Some(asked)) if now == asked
        );
        if !same {
            self.drop_queue("the app switched to another conversation");
        }
        self.interrupt("the app said hello again").await;
        let (conversation_id, history) = self
            .shared
            .conversation(hello.conversation_id.as_deref(), &hello.history);
        tracing::info!(identity = %self.identity, client = %hello.client_name, version = %hello.client_version, tools = hello.tools.len(), earlier = hello.history.len(), conversation = %conversation_id, "welcome");
        self.client_tools = hello.tools;
        self.conversation = Some((conversation_id.clone(), history));
        self.send(ServerWelcome {
            protocol_version: version,
            session_id: new_id(),
            conversation_id,
            assistant_name: self.shared.brain.assistant_name(),
            capabilities: vec![ATTACHMENTS_CAPABILITY.to_owned()],
        })
        .await;
        self.send(status(AssistantState::Idle, None, None)).await;
        // A rejoin keeps what the user typed ahead; answer it now.
        self.next_turn();
    }

    /// Starts the turn for the oldest queued message, unless a turn is running.
    fn next_turn(&mut self) {
        if self.turn.is_some() {
            return;
        }
        let Some((_, history)) = &self.conversation else {
            return;
        };
        let Some(m) = self.queue.pop_front() else {
            return;
        };
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let why = Arc::new(OnceLock::new());
        let turn = Turn {
            shared: self.shared.clone(),
            identity: self.identity.clone(),
            client_tools: self.client_tools.clone(),
            cancel: cancel.clone(),
            why: why.clone(),
            events: events_rx,
            message_id: new_id(),
            seq: 0,
            text: String::new(),
            spoke: false,
        };
        self.started += 1;
        let n = self.started;
        let done = self.done.clone();
        let history = history.clone();
        let join = tokio::spawn(async move {
            turn.run(history, m).await;
            let _ = done.send(n);
        });
        self.turn = Some(RunningTurn {
            n,
            cancel,
            why,
            events: events_tx,
            join,
        });
    }
}

fn status(
    state: AssistantState,
    tool_use_id: Option<String>,
    detail: Option<String>,
) -> AssistantStatus {
    AssistantStatus {
        state,
        tool_use_id,
        detail,
    }
}

/// How a phase of a turn ended.
enum Phase<T> {
    Done(T),
    Interrupted,
}

struct Waiting {
    call: ToolCall,
    execution: Execution,
    timeout_ms: u32,
    deadline: Instant,
}

type Job = BoxFuture<'static, (String, ToolCall, ToolUseResult)>;

/// One answer to one user message.
struct Turn {
    shared: Arc<Shared>,
    identity: String,
    client_tools: Vec<ToolDescriptor>,
    cancel: CancellationToken,
    /// Why the session interrupted this turn (set before `cancel` fires).
    why: Arc<OnceLock<String>>,
    events: mpsc::UnboundedReceiver<ToolEvent>,
    message_id: String,
    seq: u32,
    /// The final text so far: each round's text, joined by a blank line.
    text: String,
    spoke: bool,
}

impl Turn {
    async fn send(&self, msg: impl Into<Message>) {
        self.shared.send(&self.identity, msg).await;
    }

    fn route(&self, name: &str) -> Execution {
        let client = self.client_tools.iter().any(|t| t.name == name);
        match (client, self.shared.tools.has(name)) {
            (true, true) => Execution::Either,
            (false, true) => Execution::Server,
            _ => Execution::Client,
        }
    }

    fn catalogue(&self) -> Vec<ToolDescriptor> {
        let mut all = self.client_tools.clone();
        for t in self.shared.tools.descriptors() {
            if !all.iter().any(|c| c.name == t.name) {
                all.push(t.clone());
            }
        }
        all
    }

    async fn delta(&mut self, piece: String) {
        if piece.is_empty() {
            return;
        }
        if !self.spoke {
            self.spoke = true;
            self.send(status(AssistantState::Speaking, None, None))
                .await;
        }
        let d = AssistantDelta {
            message_id: self.message_id.clone(),
            seq: self.seq,
            delta: piece,
        };
        self.seq += 1;
        self.send(d).await;
    }

    async fn run(mut self, history: History, user: UserMessage) {
        let mut history = history.lock().await;
        history.push(ChatMessage::user(&user.text));
        self.send(status(AssistantState::Thinking, None, None))
            .await;
        let catalogue = self.catalogue();
        let max = self.shared.config.max_rounds;
        let mut interrupted = false;
        for round in 0..max {
            let turn = match self.model_round(&history, &catalogue).await {
                Phase::Interrupted => {
                    interrupted = true;
                    break;
                }
                Phase::Done(Err(e)) => {
                    tracing::error!(error = %e, "the brain failed");
                    self.append(&format!("(The model could not answer: {e})"))
                        .await;
                    break;
                }
                Phase::Done(Ok(t)) => t,
            };
            history.push(ChatMessage::Assistant {
                text: turn.text.clone(),
                tool_calls: turn.tool_calls.clone(),
            });
            if turn.tool_calls.is_empty() {
                break;
            }
            let (results, phase) = self.run_tools(turn.tool_calls).await;
            history.extend(results.into_iter().map(ChatMessage::tool));
            if matches!(phase, Phase::Interrupted) {
                interrupted = true;
                break;
            }
            if round + 1 == max {
                self.append(&format!("(Stopped after {max} rounds of tool calls.)"))
                    .await;
            } else {
                self.send(status(AssistantState::Thinking, None, None))
                    .await;
            }
        }
        if interrupted {
            self.text.push_str(if self.text.is_empty() {
                "(interrupted)"
            } else {
                "\n\n(interrupted)"
            });
        }
        if self.text.is_empty() {
            self.text = "(no answer)".to_owned();
        }
        let done = AssistantMessage {
            id: self.message_id.clone(),
            text: std::mem::take(&mut self.text),
            in_reply_to: Some(user.id),
        };
        self.send(done).await;
        if !interrupted {
            self.send(status(AssistantState::Idle, None, None)).await;
        }
    }

    /// Adds a whole piece of text (an error note) as one delta.
    async fn append(&mut self, text: &str) {
        let sep = if self.text.is_empty() { "" } else { "\n\n" };
        self.text.push_str(sep);
        self.text.push_str(text);
        self.delta(format!("{sep}{text}")).await;
    }

    /// Asks the brain once, streaming its text as deltas.
    async fn model_round(
        &mut self,
        history: &[ChatMessage],
        tools: &[ToolDescriptor],
    ) -> Phase<Result<ModelTurn>> {
        let brain = self.shared.brain.clone();
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let cancel = self.cancel.clone();
        let mut streamed = String::new();
        let sep = if self.text.is_empty() { "" } else { "\n\n" };
        let result = {
            let fut = brain.respond(BrainRequest { history, tools }, &tx);
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return Phase::Interrupted,
                    Some(piece) = rx.recv() => {
                        let shown = if streamed.is_empty() { format!("{sep}{piece}") } else { piece.clone() };
                        streamed.push_str(&piece);
                        self.delta(shown).await;
                    }
                    r = &mut fut => break r,
                }
            }
        };
        while let Ok(piece) = rx.try_recv() {
            let shown = if streamed.is_empty() {
                format!("{sep}{piece}")
            } else {
                piece.clone()
            };
            streamed.push_str(&piece);
            self.delta(shown).await;
        }
        if let Ok(turn) = &result {
            // Brains that did not stream (or streamed only part) still show everything.
            if let Some(rest) = turn.text.strip_prefix(streamed.as_str()) {
                let shown = if streamed.is_empty() {
                    format!("{sep}{rest}")
                } else {
                    rest.to_owned()
                };
                if !rest.is_empty() {
                    self.delta(shown).await;
                }
            }
            if !turn.text.is_empty() {
                self.text.push_str(sep);
                self.text.push_str(&turn.text);
            }
        }
        Phase::Done(result)
    }

    fn server_job(&self, request_id: String, call: ToolCall, timeout_ms: u32) -> Job {
        let shared = self.shared.clone();
        Box::pin(async move {
            let r = shared
                .tools
                .run(&call, Duration::from_millis(u64::from(timeout_ms)))
                .await;
            let result = match r {
                Ok(serde_json::Value::Object(m)) => ToolUseResult::ok(&request_id, m),
                Ok(other) => {
                    let mut m = outpost_protocol::Map::new();
                    m.insert("value".into(), other);
                    ToolUseResult::ok(&request_id, m)
                }
                Err(e) => protocol_failure(&request_id, &call, &e, timeout_ms),
            };
            (request_id, call, result)
        })
    }

    fn timeout_for(&self, call: &ToolCall, execution: Execution) -> u32 {
        let client = self
            .client_tools
            .iter()
            .find(|t| t.name == call.name)
            .and_then(|t| t.timeout_ms)
            .filter(|_| execution != Execution::Server);
        self.shared
            .brain
            .timeout_hint(call)
            .or(client)
            .or_else(|| self.shared.tools.timeout_ms(&call.name))
            .unwrap_or(outpost_protocol::DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS)
    }

    /// Runs one batch of tool calls; results come back in call order.
    async fn run_tools(&mut self, calls: Vec<ToolCall>) -> (Vec<ToolResult>, Phase<()>) {
        let mut batch = match ToolBatch::new(calls.clone()) {
            Ok(b) => b,
            Err(e) => {
                let results = calls
                    .iter()
                    .map(|c| ToolResult::error(&c.id, &c.name, format!("execution_error: {e}")))
                    .collect();
                return (results, Phase::Done(()));
            }
        };
        let grace = self.shared.config.result_grace;
        let mut waiting: HashMap<String, Waiting> = HashMap::new();
        let mut jobs: FuturesUnordered<Job> = FuturesUnordered::new();
        for call in calls {
            let parameters = match call.arguments_map() {
                Ok(p) => p,
                Err(e) => {
                    let _ = batch.add_result(ToolResult::from_error(&call, &e));
                    continue;
                }
            };
            let execution = self.route(&call.name);
            let timeout_ms = self.timeout_for(&call, execution);
            let id = new_id();
            self.send(ToolUseRequest {
                id: id.clone(),
                message_id: self.message_id.clone(),
                tool_name: call.name.clone(),
                execution,
                parameters,
                timeout_ms: Some(timeout_ms),
            })
            .await;
            self.send(status(
                AssistantState::UsingTool,
                Some(id.clone()),
                Some(format!("{} ({})", call.name, execution.as_str())),
            ))
            .await;
            if execution == Execution::Server {
                jobs.push(self.server_job(id, call, timeout_ms));
            } else {
                waiting.insert(
                    id,
                    Waiting {
                        call,
                        execution,
                        timeout_ms,
                        deadline: Instant::now() + ms(timeout_ms) + grace,
                    },
                );
            }
        }
        while !waiting.is_empty() || !jobs.is_empty() {
            let next_deadline = waiting.values().map(|w| w.deadline).min();
            let sleep = async {
                match next_deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => {
                    let why = self.why.get().map_or("the turn was interrupted", String::as_str).to_owned();
                    for (id, w) in waiting.drain() {
                        self.send(ToolUseCancel { id, reason: Some(why.clone()) }).await;
                        let _ = batch.add_result(ToolResult::error(&w.call.id, &w.call.name, format!("cancelled: {why}")));
                    }
                    return (batch.into_results(), Phase::Interrupted);
                }
                Some((id, call, result)) = jobs.next(), if !jobs.is_empty() => {
                    self.send(result.clone()).await;
                    let _ = batch.add_result(ToolResult::from_protocol(&call, &result));
                    tracing::debug!(id, tool = %call.name, success = result.success, "server tool done");
                }
                ev = self.events.recv() => match ev {
                    Some(ToolEvent::Result(r)) => match waiting.remove(&r.id) {
                        Some(w) if w.execution == Execution::Either
                            && r.error_code == Some(ToolErrorCode::UnknownTool)
                            && self.shared.tools.has(&w.call.name) =>
                        {
                            tracing::debug!(id = %r.id, tool = %w.call.name, "the app declined an either tool; running it here");
                            jobs.push(self.server_job(r.id, w.call, w.timeout_ms));
                        }
                        Some(w) => {
                            let _ = batch.add_result(ToolResult::from_protocol(&w.call, &r));
                        }
                        None => tracing::debug!(id = %r.id, "result for no pending call (late, duplicate or server-run); ignored"),
                    },
                    Some(ToolEvent::Progress(p)) => {
                        if let Some(w) = waiting.get_mut(&p.id) {
                            w.deadline = match p.state {
                                // The user is deciding: the timeout is not running.
                                ProgressState::AwaitingConsent => Instant::now() + self.shared.config.consent_limit,
                                ProgressState::Running => Instant::now() + ms(w.timeout_ms) + grace,
                            };
                        }
                    }
                    None => {
                        // The session is gone; nobody will answer.
                        self.cancel.cancel();
                    }
                },
                () = sleep => {
                    let now = Instant::now();
                    let expired: Vec<String> = waiting.iter().filter(|(_, w)| w.deadline <= now).map(|(id, _)| id.clone()).collect();
                    for id in expired {
                        if let Some(w) = waiting.remove(&id) {
                            tracing::info!(id, tool = %w.call.name, "no result in time; cancelling");
                            self.send(ToolUseCancel { id, reason: Some(format!("no result within {} ms", w.timeout_ms)) }).await;
                            let _ = batch.add_result(ToolResult::error(&w.call.id, &w.call.name, format!(
                                "timeout: Tool execution exceeded timeout of {}ms (no result from the app)", w.timeout_ms
                            )));
                        }
                    }
                }
            }
        }
        (batch.into_results(), Phase::Done(()))
    }
}

fn ms(n: u32) -> Duration {
    Duration::from_millis(u64::from(n))
}

fn protocol_failure(
    id: &str,
    call: &ToolCall,
    e: &ToolCallError,
    timeout_ms: u32,
) -> ToolUseResult {
    match e {
        ToolCallError::Timeout(_) => ToolUseResult::timeout(id, timeout_ms),
        ToolCallError::InvalidArguments { reason, .. } => {
            ToolUseResult::invalid_parameters(id, &call.name, reason)
        }
        ToolCallError::MissingArgument { argument, .. } => {
            ToolUseResult::invalid_parameters(id, &call.name, &format!("{argument}: required"))
        }
        ToolCallError::ToolNotFound(_) => ToolUseResult::failure(
            id,
            ToolErrorCode::UnknownTool,
            format!("Tool '{}' is not supported by this server", call.name),
        ),
        ToolCallError::Denied(r) => ToolUseResult::permission_denied(id, "the server", r),
        ToolCallError::ExecutionFailed(m) => ToolUseResult::execution_error(id, m.clone(), None),
    }
}
