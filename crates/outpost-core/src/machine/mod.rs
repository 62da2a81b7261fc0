//! The conversation state machine: pure, no IO.
//!
//! [`Machine::handle`] takes one [`Input`] (something that happened: a packet, a room
//! event, an executor event, a user command, a clock tick) with the current time and
//! returns the [`Effect`]s the caller must carry out, in order: messages to send, tool
//! calls to start or stop, records for the store, events for the UI, leaving the room.
//!
//! What it guarantees (docs/PROTOCOL.md):
//! - Hello goes out once the link is up and the assistant is present; again after a full
//!   rejoin, after the assistant itself rejoined, or when no welcome came within
//!   [`MachineConfig::hello_retry_ms`]. Nothing but errors is sent before the welcome.
//! - Messages that cannot be delivered now (link down, assistant absent, no welcome) are
//!   held and sent, in order, after the next welcome.
//! - Tool results sent shortly before the link or the assistant went away (within
//!   [`MachineConfig::resend_window_ms`]) are sent once more after the next welcome:
//!   LiveKit servers drop packets for participants not in the room at that moment, and
//!   the assistant's duplicate handling makes the repeat harmless. Tools never run twice:
//!   duplicate requests go to the executor, which resends the result it already has.
//! - Every incoming message is decoded and checked for direction and phase; anything
//!   rejected is answered with an ErrorMessage (except malformed ErrorMessages, so two
//!   peers never bounce errors) and never acted on.
//! - "Allow for this conversation" never outlives the conversation or the assistant: each
//!   [`Effect::RunTool`] carries a grant scope that Outpost (not the assistant) changes
//!   whenever the conversation is switched, a welcome names another conversation, or the
//!   assistant leaves, changes or rejoins as a new session.

mod agents;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use outpost_policy::{Decider, Decision, ServerClaims};
use outpost_protocol::{
    AssistantDelta, AssistantMessage, AssistantStatus, DecodeError, Direction, ErrorMessage,
    Execution, MIN_PROTOCOL_VERSION, Message, PROTOCOL_VERSION, ProgressState, ProtocolErrorCode,
    Role, ServerWelcome, ToolDescriptor, ToolErrorCode, ToolUseCancel, ToolUseProgress,
    ToolUseRequest, ToolUseResult, UserMessage,
};
use outpost_store as store;
use outpost_store::{ConversationId, Millis};

pub use agents::{
    CHAT_TOPIC, LIST_TOOLS, READ_RESULT, RPC_APPLICATION_ERROR, RPC_PAYLOAD_LIMIT, RpcCall,
    RpcFailure,
};

use crate::events::{AssistantMode, ErrorDirection, LinkState, Side, UiEvent};

/// Calls remembered (for duplicates, results from the server, store lifecycle).
pub const REMEMBERED_CALLS: usize = 10_000;
/// Assistant messages being assembled from deltas at once.
pub const MAX_OPEN_DELTAS: usize = 1_000;

/// Settings of the machine.
#[derive(Debug, Clone)]
pub struct MachineConfig {
    /// `clientName` of the hello.
    pub client_name: String,
    /// `clientVersion` of the hello.
    pub client_version: String,
    /// The tool catalogue sent in every hello.
    pub tools: Vec<ToolDescriptor>,
    /// What MCP servers claim about their tools in `tools`, by tool name (for the cards).
    pub claims: BTreeMap<String, ServerClaims>,
    /// The conversation the first hello asks to continue.
    pub conversation_id: Option<String>,
    /// The room name, for the store.
    pub room: Option<String>,
    /// Results sent less than this long before a loss are sent again after the welcome.
    pub resend_window_ms: i64,
    /// Hello is repeated when no welcome arrived within this time.
    pub hello_retry_ms: i64,
    /// With no welcome this long after the first hello to an assistant, Outpost takes it
    /// for a LiveKit agent (docs/AGENTS.md).
    pub agents_wait_ms: i64,
}

impl MachineConfig {
    /// Defaults: 5 s resend window, hello repeated after 5 s.
    pub fn new(tools: Vec<ToolDescriptor>) -> Self {
        Self {
            client_name: "Outpost".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            tools,
            claims: BTreeMap::new(),
            conversation_id: None,
            room: None,
            resend_window_ms: 5_000,
            hello_retry_ms: 5_000,
            agents_wait_ms: 8_000,
        }
    }
}

/// What the tool executor reported (the executor adapter maps its own events to these).
#[derive(Debug, Clone, PartialEq)]
pub enum ExecEvent {
    /// A call's answer, to send to the assistant.
    Result(ToolUseResult),
    /// A call waits for consent or started running, to send to the assistant.
    Progress(ToolUseProgress),
    /// The call was allowed or denied.
    Decided {
        /// The call.
        request_id: String,
        /// Allowed.
        allowed: bool,
        /// Who decided.
        by: Decider,
        /// Why.
        reason: String,
        /// The user's answer, when the user answered a prompt.
        decision: Option<Decision>,
    },
    /// An "always" answer applied to the call but could not be saved in the policy file.
    PolicyWriteFailed {
        /// The call.
        request_id: String,
        /// The answer that was not saved.
        decision: Decision,
        /// Why.
        message: String,
    },
    /// The tool started (also for calls allowed without asking, which send no progress).
    Started {
        /// The call.
        request_id: String,
    },
}

/// A request from the user of the session.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Say something to the assistant.
    SendUserMessage {
        /// Message id (a NanoID).
        id: String,
        /// Text.
        text: String,
    },
    /// Stop a tool call running on this machine.
    CancelTool {
        /// The call.
        id: String,
    },
    /// Start a new conversation (`None`) or continue another one: sends a new hello.
    SwitchConversation {
        /// The conversation to continue.
        conversation_id: Option<String>,
    },
    /// End the session.
    Leave,
}

/// Something that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Joined the room; the assistant's identity if it is already there.
    Joined {
        /// The assistant, if present.
        assistant: Option<String>,
    },
    /// The assistant joined.
    AssistantJoined {
        /// Its identity.
        identity: String,
    },
    /// The assistant left.
    AssistantLeft {
        /// Its identity.
        identity: String,
    },
    /// The link was lost.
    Reconnecting {
        /// Why.
        reason: String,
    },
    /// The link is back (`resumed` false: a full rejoin).
    Reconnected {
        /// Same session on the server.
        resumed: bool,
        /// The assistant is not the participant it was before the loss (it left, or
        /// rejoined with a new session id, e.g. after a server restart): what the server
        /// held for it may be lost.
        assistant_changed: bool,
    },
    /// The link is gone for good.
    Disconnected {
        /// Why.
        reason: String,
    },
    /// One message's bytes (packet or complete byte stream) on topic `outpost`.
    Received {
        /// Sender identity.
        sender: String,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// A byte stream on topic `outpost` was larger than the message limit and was dropped.
    TooLarge {
        /// Sender identity.
        sender: String,
        /// Bytes announced or read.
        size: usize,
    },
    /// A byte stream on topic `outpost` broke off.
    StreamFailed {
        /// Sender identity.
        sender: String,
        /// Why.
        reason: String,
    },
    /// The executor reported something.
    Exec(ExecEvent),
    /// The user asked for something.
    Command(Command),
    /// Time passed (the caller ticks about once a second).
    Tick,
    /// A participant's `lk.agent.state` attribute changed.
    AgentState {
        /// Who.
        identity: String,
        /// The new value.
        state: String,
    },
    /// A transcription segment (text stream on `lk.transcription`) grew or ended.
    Transcript {
        /// Whose speech or text it is.
        sender: String,
        /// `lk.segment_id`.
        segment_id: String,
        /// What the segment says so far (replaces earlier text of the segment).
        text: String,
        /// `lk.transcription_final`, or the stream ended.
        is_final: bool,
        /// The segment transcribes the user's own microphone track (its
        /// `lk.transcribed_track_id` is one of ours): the user's speech, not the
        /// assistant's.
        user_speech: bool,
    },
    /// An RPC call to one of Outpost's methods.
    Rpc(RpcCall),
    /// The tools on offer changed (an MCP server's tool list did): the new catalogue and
    /// the MCP tools' claims.
    ToolsChanged {
        /// The whole catalogue now.
        tools: Vec<ToolDescriptor>,
        /// The MCP servers' claims, by tool name.
        claims: BTreeMap<String, ServerClaims>,
    },
}

/// A write for the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// Make sure the conversation exists (create it if new).
    Conversation(store::NewConversation),
    /// The conversation ended.
    EndConversation {
        /// Which.
        id: ConversationId,
        /// When.
        at: Millis,
    },
    /// A whole message.
    Message(store::NewMessage),
    /// A streamed piece.
    Delta(store::MessageDelta),
    /// A status change.
    Status(store::NewStatusChange),
    /// A tool-call lifecycle step.
    Tool(store::ToolCallEvent),
    /// A consent decision.
    Consent(store::NewConsent),
    /// A protocol error.
    ProtocolError(store::NewProtocolError),
}

/// What the caller must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send a message to the assistant (the codec picks packet or byte stream).
    Send {
        /// Destination identity.
        to: String,
        /// The message.
        message: Message,
    },
    /// Hand a client or either request to the executor.
    RunTool {
        /// The conversation.
        conversation_id: String,
        /// Keys "allow for this conversation" grants: Outpost's own value, new whenever
        /// the conversation or the assistant changes (never chosen by the assistant).
        grant_scope: String,
        /// The request.
        request: ToolUseRequest,
    },
    /// Stop a call in the executor.
    CancelTool(ToolUseCancel),
    /// Write to the store.
    Record(Record),
    /// Tell the UI.
    Ui(UiEvent),
    /// Leave the room and end the session.
    Leave {
        /// Why.
        reason: String,
    },
    /// Send a text stream (LiveKit Agents mode: user messages on `lk.chat`).
    SendText {
        /// Destination identity.
        to: String,
        /// The topic.
        topic: String,
        /// The text.
        text: String,
    },
    /// Answer an RPC call.
    RpcReply {
        /// The call.
        request_id: String,
        /// The payload, or the error.
        reply: Result<String, RpcFailure>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the link and the assistant to send hello.
    NeedHello,
    /// Hello sent at this time; waiting for the welcome.
    AwaitWelcome(Millis),
    /// Welcomed: the session is live.
    Welcomed,
    /// Over.
    Ended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallState {
    /// Requested, decided by nobody yet.
    Pending,
    /// Waiting for consent.
    AwaitingConsent,
    /// Running.
    Running,
    /// Declined `either` call: the server runs it.
    HandedToServer,
    /// Has its result.
    Finished,
}

#[derive(Debug, Clone)]
struct Call {
    conversation: ConversationId,
    tool_name: String,
    execution: Execution,
    state: CallState,
    running_logged: bool,
    /// Asked over RPC (LiveKit Agents mode): answered with an RPC reply.
    via_rpc: bool,
}

/// An assistant message being assembled from deltas. When a tool call arrives while it is
/// open, the text that follows goes into a new segment (its own message id, `ID~2`, `ID~3`,
/// ...) so that the UI and the history show text and tool cards in the order they happened.
#[derive(Debug, Default)]
struct DeltaBuf {
    last_seq: Option<u32>,
    /// The segments, oldest first.
    segments: Vec<Segment>,
    /// A tool call arrived after the last delta: the next delta starts a segment.
    split: bool,
}

/// One segment of a streamed message: its id, how many bytes its deltas brought, and the
/// first [`SEGMENT_TEXT_KEPT`] bytes of them (to tell a continued final text from a
/// rewritten one without holding an unbounded stream).
#[derive(Debug, Default)]
struct Segment {
    id: String,
    len: usize,
    said: String,
}

/// How much of each segment's streamed text the machine keeps.
const SEGMENT_TEXT_KEPT: usize = 64 * 1024;

impl DeltaBuf {
    /// The id the next delta of `message_id` goes to.
    fn segment_for_next(&mut self, message_id: &str) -> String {
        if self.segments.is_empty() || self.split {
            let id = if self.segments.is_empty() {
                message_id.to_owned()
            } else {
                format!("{message_id}~{}", self.segments.len() + 1)
            };
            self.segments.push(Segment {
                id,
                ..Segment::default()
            });
            self.split = false;
        }
        self.segments
            .last()
            .map_or_else(|| message_id.to_owned(), |s| s.id.clone())
    }
}

/// Splits a final text across the segments its deltas went to: each keeps the text its
/// deltas brought, the last takes the rest. When the final text does not continue what the
/// deltas said (the assistant rewrote it), it all goes to the first segment and the others
/// are emptied.
fn split_final(text: &str, segments: &[Segment]) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(segments.len());
    let mut rest = text;
    for (i, seg) in segments.iter().enumerate() {
        if i + 1 == segments.len() {
            out.push((seg.id.clone(), rest.to_owned()));
            break;
        }
        let part = rest
            .get(..seg.len)
            .filter(|p| p.starts_with(seg.said.as_str()));
        match part {
            Some(p) => {
                out.push((seg.id.clone(), p.to_owned()));
                rest = &rest[seg.len..];
            }
            None => {
                let mut all = vec![(segments[0].id.clone(), text.to_owned())];
                all.extend(segments[1..].iter().map(|s| (s.id.clone(), String::new())));
                return all;
            }
        }
    }
    out
}

/// The conversation state machine. See the module docs.
#[derive(Debug)]
pub struct Machine {
    config: MachineConfig,
    /// The protocol version of the live session (0 before a welcome).
    version: u32,
    /// The catalogue changed after the last hello and the assistant was not told yet.
    tools_unannounced: bool,
    link_up: bool,
    assistant: Option<String>,
    phase: Phase,
    /// The conversation the next hello asks for.
    wanted: Option<String>,
    /// The conversation of the live session.
    conversation: Option<String>,
    held: VecDeque<Message>,
    /// Results sent, newest last, with when; trimmed while the link is stable.
    sent_results: VecDeque<(Millis, ToolUseResult)>,
    /// Results to send again after the next welcome.
    resend: Vec<ToolUseResult>,
    calls: HashMap<String, Call>,
    call_order: VecDeque<String>,
    deltas: HashMap<String, DeltaBuf>,
    delta_order: VecDeque<String>,
    user_cancelled: HashSet<String>,
    lost_at: Option<Millis>,
    /// Bumped whenever grants must end (see [`Effect::RunTool::grant_scope`]).
    grant_epoch: u64,
    /// The assistant identity that welcomed the live conversation.
    welcomed_by: Option<String>,
    /// What the assistant speaks, once known.
    mode: Option<AssistantMode>,
    /// When the first hello to the present assistant went out (for Agents-mode detection).
    hello_since: Option<Millis>,
    agents: agents::AgentsState,
}

fn store_execution(e: Execution) -> store::Execution {
    match e {
        Execution::Server => store::Execution::Server,
        Execution::Client => store::Execution::Client,
        Execution::Either => store::Execution::Either,
    }
}

fn map_value(m: &outpost_protocol::Map) -> serde_json::Value {
    serde_json::Value::Object(m.clone())
}

impl Machine {
    /// A machine in its initial state (not joined).
    pub fn new(config: MachineConfig) -> Self {
        let wanted = config.conversation_id.clone();
        Self {
            config,
            link_up: false,
            assistant: None,
            phase: Phase::NeedHello,
            version: 0,
            tools_unannounced: false,
            wanted,
            conversation: None,
            held: VecDeque::new(),
            sent_results: VecDeque::new(),
            resend: Vec::new(),
            calls: HashMap::new(),
            call_order: VecDeque::new(),
            deltas: HashMap::new(),
            delta_order: VecDeque::new(),
            user_cancelled: HashSet::new(),
            lost_at: None,
            grant_epoch: 0,
            welcomed_by: None,
            mode: None,
            hello_since: None,
            agents: agents::AgentsState::default(),
        }
    }

    /// The current grant scope (see [`Effect::RunTool::grant_scope`]).
    pub fn grant_scope(&self) -> String {
        format!(
            "{}#{}",
            self.conversation.as_deref().unwrap_or_default(),
            self.grant_epoch
        )
    }

    /// Ends every "allow for this conversation" grant given so far.
    fn end_grants(&mut self) {
        self.grant_epoch += 1;
    }

    /// The live conversation, once welcomed.
    pub fn conversation_id(&self) -> Option<&str> {
        self.conversation.as_deref()
    }

    /// The assistant's identity, when present.
    pub fn assistant(&self) -> Option<&str> {
        self.assistant.as_deref()
    }

    /// True when messages go out at once (link up, assistant present, welcomed).
    pub fn is_ready(&self) -> bool {
        self.link_up && self.assistant.is_some() && self.phase == Phase::Welcomed
    }

    /// True once the session ended.
    pub fn is_ended(&self) -> bool {
        self.phase == Phase::Ended
    }

    /// Messages waiting for the session to be ready.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Handles one input at time `now`; returns what to do, in order.
    pub fn handle(&mut self, input: Input, now: Millis) -> Vec<Effect> {
        let mut fx = Fx::default();
        if self.phase == Phase::Ended {
            // Late executor results are still worth a record; nothing else matters.
            if let Input::Exec(ExecEvent::Result(r)) = input {
                self.finish_client_call(&mut fx, r, now, false);
            }
            return fx.0;
        }
        match input {
            Input::Joined { assistant } => {
                self.link_up = true;
                fx.ui(UiEvent::Connection {
                    state: LinkState::Connected,
                    detail: None,
                });
                if let Some(a) = assistant {
                    self.assistant = Some(a.clone());
                    fx.ui(UiEvent::AssistantPresence {
                        present: true,
                        identity: a,
                    });
                }
                self.maybe_hello(&mut fx, now);
            }
            Input::AssistantJoined { identity } => {
                let known = self.assistant.as_deref() == Some(identity.as_str());
                self.assistant = Some(identity.clone());
                // The room announces the assistant it found at join time once more after
                // `Joined` named it: that is no news, and saying "is here" twice confuses.
                if !known {
                    fx.ui(UiEvent::AssistantPresence {
                        present: true,
                        identity,
                    });
                    // A (re)joined assistant has a fresh session: greet it again. It is
                    // not the one the user granted anything to.
                    self.end_grants();
                    self.lose_session(now);
                    // While the link is down, "recent" is measured from the loss.
                    self.freeze_sent(self.lost_at.unwrap_or(now));
                }
                self.maybe_hello(&mut fx, now);
            }
            Input::AssistantLeft { identity } => {
                if self.assistant.as_deref() == Some(identity.as_str()) {
                    self.assistant = None;
                    self.end_grants();
                    self.lose_session(now);
                    // While the link is down, "recent" is measured from the loss.
                    self.freeze_sent(self.lost_at.unwrap_or(now));
                }
                fx.ui(UiEvent::AssistantPresence {
                    present: false,
                    identity,
                });
            }
            Input::Reconnecting { reason } => {
                self.link_up = false;
                self.lost_at = Some(now);
                self.record_status(&mut fx, now, "reconnecting", Some(reason.clone()));
                fx.ui(UiEvent::Connection {
                    state: LinkState::Reconnecting,
                    detail: Some(reason),
                });
            }
            Input::Reconnected {
                resumed,
                assistant_changed,
            } => {
                self.link_up = true;
                // LiveKit resends what the server did not acknowledge, and a server whose
                // assistant stayed relayed the rest: only a changed assistant may have
                // missed results.
                if assistant_changed {
                    let at = self.lost_at.unwrap_or(now);
                    self.freeze_sent(at);
                    self.end_grants();
                }
                self.lost_at = None;
                fx.ui(UiEvent::Connection {
                    state: LinkState::Reconnected,
                    detail: Some(if resumed { "resumed" } else { "rejoined" }.into()),
                });
                self.record_status(
                    &mut fx,
                    now,
                    "reconnected",
                    Some(if resumed { "resumed" } else { "rejoined" }.into()),
                );
                if resumed {
                    // Same server session: LiveKit delivered what was queued; carry on.
                    self.flush(&mut fx, now);
                } else {
                    self.rehello();
                    self.maybe_hello(&mut fx, now);
                }
            }
            Input::Disconnected { reason } => {
                self.link_up = false;
                fx.ui(UiEvent::Connection {
                    state: LinkState::Disconnected,
                    detail: Some(reason.clone()),
                });
                self.end(&mut fx, now, reason);
            }
            Input::Received { sender, bytes } => self.received(&mut fx, now, &sender, &bytes),
            Input::TooLarge { sender, size } => {
                if self.is_assistant(&sender) {
                    let err = DecodeError::TooLarge {
                        size,
                        max: outpost_protocol::MAX_MESSAGE_BYTES,
                    }
                    .to_error_message(None);
                    self.reject(&mut fx, now, err);
                }
            }
            Input::StreamFailed { sender, reason } => {
                if self.is_assistant(&sender) {
                    fx.ui(UiEvent::Error {
                        message: format!("a message stream from the assistant broke off: {reason}"),
                    });
                }
            }
            Input::Exec(ev) => self.exec(&mut fx, now, ev),
            Input::Command(cmd) => self.command(&mut fx, now, cmd),
            Input::AgentState { identity, state } => {
                self.agent_state(&mut fx, now, &identity, &state);
            }
            Input::Transcript {
                sender,
                segment_id,
                text,
                is_final,
                user_speech,
            } => {
                if user_speech {
                    self.user_transcript(&mut fx, now, &sender, &segment_id, &text, is_final);
                } else {
                    self.transcript(&mut fx, now, &sender, &segment_id, &text, is_final);
                }
            }
            Input::Rpc(call) => self.rpc(&mut fx, now, call),
            Input::ToolsChanged { tools, claims } => {
                self.tools_changed(&mut fx, tools, claims);
                self.announce_tools(&mut fx, now);
            }
            Input::Tick => {
                let waited = self
                    .hello_since
                    .is_some_and(|t| now - t >= self.config.agents_wait_ms);
                if waited && matches!(self.phase, Phase::AwaitWelcome(_)) {
                    let why = format!(
                        "no Outpost welcome within {} s",
                        self.config.agents_wait_ms / 1000
                    );
                    self.enter_agents_mode(&mut fx, now, &why);
                }
                if let Phase::AwaitWelcome(at) = self.phase {
                    if now - at >= self.config.hello_retry_ms {
                        self.phase = Phase::NeedHello;
                        self.maybe_hello(&mut fx, now);
                    }
                }
                self.rpc_deadlines(&mut fx, now);
                if self.link_up {
                    self.trim_sent(now);
                }
            }
        }
        fx.0
    }

    fn is_assistant(&self, sender: &str) -> bool {
        self.assistant.as_deref() == Some(sender)
    }

    /// The assistant's session is gone (it left or rejoined): hello again, and find out
    /// again what it speaks.
    fn lose_session(&mut self, _now: Millis) {
        if self.in_agents_mode() && self.phase == Phase::Welcomed {
            self.phase = Phase::NeedHello;
        }
        self.mode = None;
        self.hello_since = None;
        self.rehello();
    }

    /// After a full rejoin (ours or the assistant's) the next hello names the
    /// conversation we were in.
    fn rehello(&mut self) {
        if let Some(c) = &self.conversation {
            self.wanted = Some(c.clone());
        }
        if matches!(self.phase, Phase::Welcomed | Phase::AwaitWelcome(_)) {
            self.phase = Phase::NeedHello;
        }
    }

    /// Results sent recently may have been dropped: keep them for a resend.
    fn freeze_sent(&mut self, now: Millis) {
        let window = self.config.resend_window_ms;
        for (at, r) in self.sent_results.drain(..) {
            if now - at < window && !self.resend.iter().any(|x| x.id == r.id) {
                self.resend.push(r);
            }
        }
    }

    fn trim_sent(&mut self, now: Millis) {
        let window = self.config.resend_window_ms;
        while self
            .sent_results
            .front()
            .is_some_and(|(at, _)| now - *at >= window)
        {
            self.sent_results.pop_front();
        }
    }

    fn maybe_hello(&mut self, fx: &mut Fx, now: Millis) {
        if self.phase != Phase::NeedHello || !self.link_up {
            return;
        }
        let Some(to) = self.assistant.clone() else {
            return;
        };
        // The hello carries the catalogue as it is now.
        self.tools_unannounced = false;
        let mut hello = outpost_protocol::ClientHello::new(
            self.config.client_name.clone(),
            self.config.client_version.clone(),
            self.config.tools.clone(),
        );
        hello.conversation_id = self.wanted.clone();
        fx.0.push(Effect::Send {
            to,
            message: Message::ClientHello(hello),
        });
        self.phase = Phase::AwaitWelcome(now);
        if self.mode.is_none() && self.hello_since.is_none() {
            self.hello_since = Some(now);
        }
    }

    /// Sends now when ready, else holds.
    fn send(&mut self, fx: &mut Fx, now: Millis, message: Message) {
        if !self.is_ready() {
            self.held.push_back(message);
            return;
        }
        self.send_now(fx, now, message);
    }

    fn send_now(&mut self, fx: &mut Fx, now: Millis, message: Message) {
        let Some(to) = self.assistant.clone() else {
            self.held.push_back(message);
            return;
        };
        if self.in_agents_mode() {
            // Only what the user says has a place in LiveKit's conventions; tool answers
            // go back as RPC replies, never as messages.
            if let Message::UserMessage(u) = message {
                if let Some(c) = &self.conversation {
                    fx.record(Record::Message(store::NewMessage {
                        conversation_id: c.as_str().into(),
                        id: u.id.clone(),
                        role: store::Role::User,
                        text: u.text.clone(),
                        created_at: now,
                        completed_at: Some(now),
                    }));
                }
                fx.0.push(Effect::SendText {
                    to,
                    topic: CHAT_TOPIC.into(),
                    text: u.text,
                });
            }
            return;
        }
        match &message {
            Message::ToolUseResult(r) => {
                self.sent_results.push_back((now, r.clone()));
                if self.sent_results.len() > REMEMBERED_CALLS {
                    self.sent_results.pop_front();
                }
            }
            Message::UserMessage(u) => {
                if let Some(c) = &self.conversation {
                    fx.record(Record::Message(store::NewMessage {
                        conversation_id: c.as_str().into(),
                        id: u.id.clone(),
                        role: store::Role::User,
                        text: u.text.clone(),
                        created_at: now,
                        completed_at: Some(now),
                    }));
                }
            }
            _ => {}
        }
        fx.0.push(Effect::Send { to, message });
    }

    /// Errors go out at once when possible (also before the welcome); never held.
    fn send_error(&mut self, fx: &mut Fx, err: ErrorMessage) {
        if let (true, Some(to)) = (self.link_up, self.assistant.clone()) {
            fx.0.push(Effect::Send {
                to,
                message: Message::Error(err),
            });
        }
    }

    fn flush(&mut self, fx: &mut Fx, now: Millis) {
        if !self.is_ready() {
            return;
        }
        for r in std::mem::take(&mut self.resend) {
            // Still held? Then it goes out with the held messages, once.
            let held = self
                .held
                .iter()
                .any(|m| matches!(m, Message::ToolUseResult(h) if h.id == r.id));
            if !held {
                self.send_now(fx, now, Message::ToolUseResult(r));
            }
        }
        while let Some(m) = self.held.pop_front() {
            self.send_now(fx, now, m);
        }
    }

    fn end(&mut self, fx: &mut Fx, now: Millis, reason: String) {
        if self.phase == Phase::Ended {
            return;
        }
        if let Some(c) = &self.conversation {
            fx.record(Record::EndConversation {
                id: c.as_str().into(),
                at: now,
            });
        }
        self.phase = Phase::Ended;
        fx.ui(UiEvent::Ended { reason });
    }

    fn record_status(&self, fx: &mut Fx, now: Millis, status: &str, detail: Option<String>) {
        if let Some(c) = &self.conversation {
            fx.record(Record::Status(store::NewStatusChange {
                conversation_id: c.as_str().into(),
                at: now,
                status: status.into(),
                detail,
            }));
        }
    }

    fn record_protocol_error(&self, fx: &mut Fx, now: Millis, err: &ErrorMessage, dir: &str) {
        fx.record(Record::ProtocolError(store::NewProtocolError {
            conversation_id: self.conversation.as_deref().map(ConversationId::from),
            at: now,
            code: err.code.as_str().into(),
            message: err.message.clone(),
            detail: Some(format!(
                "{dir}; messageType {}; refId {}",
                err.message_type
                    .map_or_else(|| "-".into(), |t| t.to_string()),
                err.ref_id.as_deref().unwrap_or("-")
            )),
        }));
    }

    /// Answers a message we will not act on.
    fn reject(&mut self, fx: &mut Fx, now: Millis, err: ErrorMessage) {
        self.record_protocol_error(fx, now, &err, "sent");
        fx.ui(UiEvent::ProtocolError {
            direction: ErrorDirection::Sent,
            code: err.code.as_str().into(),
            message: err.message.clone(),
            ref_id: err.ref_id.clone(),
            fatal: err.fatal,
        });
        self.send_error(fx, err);
    }

    fn received(&mut self, fx: &mut Fx, now: Millis, sender: &str, bytes: &[u8]) {
        if !self.is_assistant(sender) {
            // PROTOCOL §1: only the assistant's messages count; others are not ours.
            return;
        }
        let msg = match outpost_protocol::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                let err = e.to_error_message(outpost_protocol::peek_id(bytes));
                if e.message_type() == Some(u32::from(outpost_protocol::MessageType::Error.code()))
                {
                    // A broken ErrorMessage is recorded, not answered: no error ping-pong.
                    self.record_protocol_error(fx, now, &err, "received broken ErrorMessage");
                    fx.ui(UiEvent::ProtocolError {
                        direction: ErrorDirection::Received,
                        code: err.code.as_str().into(),
                        message: err.message,
                        ref_id: err.ref_id,
                        fatal: false,
                    });
                } else {
                    self.reject(fx, now, err);
                }
                return;
            }
        };
        let ty = msg.message_type();
        if ty.direction() == Direction::ClientToServer {
            let err = ErrorMessage::unexpected(&msg, Role::Server, false);
            self.reject(fx, now, err);
            return;
        }
        let welcomed = self.phase == Phase::Welcomed;
        match msg {
            Message::Error(e) => self.error_received(fx, now, e),
            Message::ServerWelcome(w) => {
                if matches!(self.phase, Phase::AwaitWelcome(_)) || self.in_agents_mode() {
                    self.welcome(fx, now, w);
                } else {
                    let err =
                        ErrorMessage::unexpected(&Message::ServerWelcome(w), Role::Server, true);
                    self.reject(fx, now, err);
                }
            }
            other if !welcomed => {
                let err = ErrorMessage::unexpected(&other, Role::Server, true);
                self.reject(fx, now, err);
            }
            Message::AssistantDelta(d) => self.delta(fx, now, d),
            Message::AssistantMessage(m) => self.assistant_message(fx, now, m),
            Message::AssistantStatus(s) => self.status(fx, now, s),
            Message::ToolUseRequest(r) => self.request(fx, now, r),
            Message::ToolUseResult(r) => self.server_result(fx, now, r),
            Message::ToolUseCancel(c) => self.cancel(fx, c),
            Message::ToolUseProgress(p) => self.server_progress(fx, now, p),
            other => {
                let err = ErrorMessage::unexpected(&other, Role::Server, false);
                self.reject(fx, now, err);
            }
        }
    }

    fn error_received(&mut self, fx: &mut Fx, now: Millis, e: ErrorMessage) {
        self.record_protocol_error(fx, now, &e, "received");
        fx.ui(UiEvent::ProtocolError {
            direction: ErrorDirection::Received,
            code: e.code.as_str().into(),
            message: e.message.clone(),
            ref_id: e.ref_id.clone(),
            fatal: e.fatal,
        });
        if e.fatal {
            self.end(
                fx,
                now,
                format!("the assistant ended the session: {}", e.message),
            );
            fx.0.push(Effect::Leave { reason: e.message });
        }
    }

    fn welcome(&mut self, fx: &mut Fx, now: Millis, w: ServerWelcome) {
        let ours = MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION;
        if !ours.contains(&w.protocol_version) {
            let err =
                ErrorMessage::unsupported_version(ours, w.protocol_version..=w.protocol_version);
            let text = err.message.clone();
            self.reject(fx, now, err);
            self.end(fx, now, text.clone());
            fx.0.push(Effect::Leave { reason: text });
            return;
        }
        if let Some(old) = &self.conversation {
            if *old != w.conversation_id {
                fx.record(Record::EndConversation {
                    id: old.as_str().into(),
                    at: now,
                });
            }
        }
        if self.conversation.as_ref() != Some(&w.conversation_id)
            || self.welcomed_by != self.assistant
        {
            self.end_grants();
        }
        self.welcomed_by = self.assistant.clone();
        self.conversation = Some(w.conversation_id.clone());
        self.wanted = Some(w.conversation_id.clone());
        self.phase = Phase::Welcomed;
        self.version = w.protocol_version;
        self.hello_since = None;
        if self.mode != Some(AssistantMode::Outpost) {
            self.mode = Some(AssistantMode::Outpost);
            fx.ui(UiEvent::AssistantMode {
                mode: AssistantMode::Outpost,
                detail: format!("welcomed by {}", w.assistant_name),
            });
        }
        fx.record(Record::Conversation(store::NewConversation {
            id: w.conversation_id.as_str().into(),
            title: None,
            room: self.config.room.clone(),
            assistant_identity: self.assistant.clone(),
            started_at: now,
        }));
        self.record_status(
            fx,
            now,
            "session_started",
            Some(format!(
                "session {} with {} (protocol {})",
                w.session_id, w.assistant_name, w.protocol_version
            )),
        );
        fx.ui(UiEvent::SessionStarted {
            conversation_id: w.conversation_id,
            session_id: w.session_id,
            assistant_name: w.assistant_name,
            protocol_version: w.protocol_version,
            mode: AssistantMode::Outpost,
        });
        self.flush(fx, now);
        // The catalogue changed while the welcome was on its way.
        self.announce_tools(fx, now);
    }

    /// Tells an Outpost-protocol assistant (version 2 and later) the catalogue changed
    /// since its hello. A version 1 assistant learns it at the next hello; LiveKit Agents
    /// mode follows the RPC methods the session registers.
    fn announce_tools(&mut self, fx: &mut Fx, now: Millis) {
        if !self.tools_unannounced
            || self.phase != Phase::Welcomed
            || self.mode != Some(AssistantMode::Outpost)
            || self.version < 2
        {
            return;
        }
        self.tools_unannounced = false;
        let m = Message::ToolsChanged(outpost_protocol::ToolsChanged {
            tools: self.config.tools.clone(),
        });
        self.send(fx, now, m);
    }

    fn conv(&self) -> ConversationId {
        self.conversation.as_deref().unwrap_or_default().into()
    }

    fn delta(&mut self, fx: &mut Fx, now: Millis, d: AssistantDelta) {
        if !self.deltas.contains_key(&d.message_id) {
            if self.delta_order.len() >= MAX_OPEN_DELTAS {
                if let Some(old) = self.delta_order.pop_front() {
                    self.deltas.remove(&old);
                }
            }
            self.delta_order.push_back(d.message_id.clone());
        }
        let conversation_id = self.conv();
        let buf = self.deltas.entry(d.message_id.clone()).or_default();
        if buf.last_seq.is_some_and(|last| d.seq <= last) {
            // Already applied (a replay after a reconnect).
            return;
        }
        buf.last_seq = Some(d.seq);
        let segment = buf.segment_for_next(&d.message_id);
        if let Some(seg) = buf.segments.last_mut() {
            seg.len += d.delta.len();
            if seg.said.len() < SEGMENT_TEXT_KEPT {
                let room = SEGMENT_TEXT_KEPT - seg.said.len();
                let mut cut = d.delta.len().min(room);
                while !d.delta.is_char_boundary(cut) {
                    cut -= 1;
                }
                seg.said.push_str(&d.delta[..cut]);
            }
        }
        fx.record(Record::Delta(store::MessageDelta {
            conversation_id,
            id: segment.clone(),
            delta: d.delta.clone(),
            at: now,
            done: false,
        }));
        fx.ui(UiEvent::AssistantDelta {
            message_id: segment,
            seq: d.seq,
            delta: d.delta,
        });
    }

    fn assistant_message(&mut self, fx: &mut Fx, now: Millis, m: AssistantMessage) {
        let parts = match self.deltas.remove(&m.id) {
            Some(buf) => {
                self.delta_order.retain(|x| *x != m.id);
                if buf.segments.len() > 1 {
                    split_final(&m.text, &buf.segments)
                } else {
                    vec![(m.id.clone(), m.text.clone())]
                }
            }
            None => vec![(m.id.clone(), m.text.clone())],
        };
        for (id, text) in parts {
            fx.record(Record::Message(store::NewMessage {
                conversation_id: self.conv(),
                id: id.clone(),
                role: store::Role::Assistant,
                text: text.clone(),
                created_at: now,
                completed_at: Some(now),
            }));
            fx.ui(UiEvent::AssistantMessage {
                id,
                text,
                in_reply_to: m.in_reply_to.clone(),
            });
        }
    }

    /// A tool call arrived: text still streaming into an open message continues below it.
    fn split_open_messages(&mut self) {
        for buf in self.deltas.values_mut() {
            if !buf.segments.is_empty() {
                buf.split = true;
            }
        }
    }

    fn status(&mut self, fx: &mut Fx, now: Millis, s: AssistantStatus) {
        self.record_status(fx, now, s.state.as_str(), s.detail.clone());
        fx.ui(UiEvent::Status {
            state: s.state,
            tool_use_id: s.tool_use_id,
            detail: s.detail,
        });
    }

    fn remember_call(&mut self, id: &str, call: Call) {
        if self.call_order.len() >= REMEMBERED_CALLS {
            if let Some(old) = self.call_order.pop_front() {
                self.calls.remove(&old);
                self.user_cancelled.remove(&old);
            }
        }
        self.call_order.push_back(id.to_owned());
        self.calls.insert(id.to_owned(), call);
    }

    /// A new catalogue: the next hello, `outpost.list_tools` and the cards use it; an
    /// Outpost-protocol assistant of version 2 gets a ToolsChanged ([`Self::announce_tools`]);
    /// the session re-registers the RPC methods itself.
    fn tools_changed(
        &mut self,
        fx: &mut Fx,
        tools: Vec<ToolDescriptor>,
        claims: BTreeMap<String, ServerClaims>,
    ) {
        if tools == self.config.tools {
            return;
        }
        self.config.tools = tools;
        self.config.claims = claims;
        self.tools_unannounced = true;
        fx.ui(UiEvent::ToolsChanged {
            tools: self.config.tools.iter().map(|t| t.name.clone()).collect(),
        });
    }

    /// The MCP server behind `tool`, if the catalogue names one.
    fn server_of(&self, tool: &str) -> Option<String> {
        self.config
            .tools
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.server_name.clone())
    }

    fn request(&mut self, fx: &mut Fx, now: Millis, r: ToolUseRequest) {
        let conversation = self.conv();
        if let Some(known) = self.calls.get(&r.id) {
            // A duplicate never runs twice: the executor ignores it while the first is in
            // flight and resends the first result after (PROTOCOL §6.1). Server calls and
            // calls handed to the server have nothing to resend.
            if known.execution != Execution::Server && known.state != CallState::HandedToServer {
                fx.0.push(Effect::RunTool {
                    conversation_id: conversation.0,
                    grant_scope: self.grant_scope(),
                    request: r,
                });
            }
            return;
        }
        self.split_open_messages();
        fx.record(Record::Tool(store::ToolCallEvent::Initiated {
            conversation_id: conversation.clone(),
            id: r.id.clone(),
            message_id: Some(r.message_id.clone()),
            tool_name: r.tool_name.clone(),
            server_name: self.server_of(&r.tool_name).unwrap_or_default(),
            execution: store_execution(r.execution),
            arguments: map_value(&r.parameters),
            at: now,
        }));
        fx.ui(UiEvent::ToolCallRequested {
            id: r.id.clone(),
            message_id: r.message_id.clone(),
            tool_name: r.tool_name.clone(),
            server_name: self.server_of(&r.tool_name),
            claims: self.config.claims.get(&r.tool_name).copied(),
            execution: r.execution,
            parameters: r.parameters.clone(),
            timeout_ms: r.effective_timeout_ms(),
        });
        self.remember_call(
            &r.id,
            Call {
                conversation: conversation.clone(),
                tool_name: r.tool_name.clone(),
                execution: r.execution,
                state: CallState::Pending,
                running_logged: false,
                via_rpc: false,
            },
        );
        if r.execution != Execution::Server {
            fx.0.push(Effect::RunTool {
                conversation_id: conversation.0,
                grant_scope: self.grant_scope(),
                request: r,
            });
        }
    }

    fn cancel(&mut self, fx: &mut Fx, c: ToolUseCancel) {
        let effective = self.calls.get(&c.id).is_some_and(|call| {
            call.execution != Execution::Server
                && matches!(
                    call.state,
                    CallState::Pending | CallState::AwaitingConsent | CallState::Running
                )
        });
        fx.ui(UiEvent::ToolCallCancelRequested {
            id: c.id.clone(),
            reason: c.reason.clone(),
            effective,
        });
        if effective {
            fx.0.push(Effect::CancelTool(c));
        }
    }

    fn server_progress(&mut self, fx: &mut Fx, now: Millis, p: ToolUseProgress) {
        fx.ui(UiEvent::ToolCallProgress {
            id: p.id.clone(),
            state: p.state,
            detail: p.detail.clone(),
            by: Side::Server,
        });
        let Some(call) = self.calls.get_mut(&p.id) else {
            return;
        };
        let runs_on_server =
            call.execution == Execution::Server || call.state == CallState::HandedToServer;
        if !runs_on_server || call.state == CallState::Finished {
            return;
        }
        let conversation_id = call.conversation.clone();
        match p.state {
            ProgressState::AwaitingConsent if call.state != CallState::AwaitingConsent => {
                call.state = CallState::AwaitingConsent;
                fx.record(Record::Tool(store::ToolCallEvent::AwaitingConsent {
                    conversation_id,
                    id: p.id,
                    at: now,
                }));
            }
            ProgressState::Running if !call.running_logged => {
                call.running_logged = true;
                call.state = CallState::Running;
                fx.record(Record::Tool(store::ToolCallEvent::Running {
                    conversation_id,
                    id: p.id,
                    executed_by: store::Executor::Server,
                    at: now,
                }));
            }
            _ => {}
        }
    }

    fn server_result(&mut self, fx: &mut Fx, now: Millis, r: ToolUseResult) {
        let Some(call) = self.calls.get_mut(&r.id) else {
            fx.ui(finished_event(&r, "", Side::Server));
            return;
        };
        let runs_on_server =
            call.execution == Execution::Server || call.state == CallState::HandedToServer;
        if !runs_on_server || call.state == CallState::Finished {
            // Not the server's call, or a repeat: nothing to record.
            return;
        }
        call.state = CallState::Finished;
        let conversation_id = call.conversation.clone();
        let tool = call.tool_name.clone();
        fx.record(Record::Tool(final_event(
            conversation_id,
            &r,
            store::Executor::Server,
            now,
        )));
        fx.ui(finished_event(&r, &tool, Side::Server));
    }

    fn exec(&mut self, fx: &mut Fx, now: Millis, ev: ExecEvent) {
        match ev {
            ExecEvent::Result(r) => self.finish_client_call(fx, r, now, true),
            ExecEvent::Progress(p) => {
                if let Some(call) = self.calls.get_mut(&p.id) {
                    let conversation_id = call.conversation.clone();
                    match p.state {
                        ProgressState::AwaitingConsent => {
                            call.state = CallState::AwaitingConsent;
                            fx.record(Record::Tool(store::ToolCallEvent::AwaitingConsent {
                                conversation_id,
                                id: p.id.clone(),
                                at: now,
                            }));
                        }
                        ProgressState::Running => {
                            call.state = CallState::Running;
                            if !call.running_logged {
                                call.running_logged = true;
                                fx.record(Record::Tool(store::ToolCallEvent::Running {
                                    conversation_id,
                                    id: p.id.clone(),
                                    executed_by: store::Executor::Client,
                                    at: now,
                                }));
                            }
                        }
                    }
                }
                fx.ui(UiEvent::ToolCallProgress {
                    id: p.id.clone(),
                    state: p.state,
                    detail: p.detail.clone(),
                    by: Side::Client,
                });
                let rpc = self.calls.get(&p.id).is_some_and(|c| c.via_rpc);
                if !rpc {
                    self.send(fx, now, Message::ToolUseProgress(p));
                }
            }
            ExecEvent::Started { request_id } => {
                // The dispatcher reports nothing about a call after its result
                // (`DispatchEvent`'s order), so a known call is not finished here.
                if let Some(call) = self.calls.get_mut(&request_id) {
                    call.state = CallState::Running;
                    if !call.running_logged {
                        call.running_logged = true;
                        fx.record(Record::Tool(store::ToolCallEvent::Running {
                            conversation_id: call.conversation.clone(),
                            id: request_id,
                            executed_by: store::Executor::Client,
                            at: now,
                        }));
                    }
                }
            }
            ExecEvent::Decided {
                request_id,
                allowed,
                by,
                reason,
                decision,
            } => {
                let Some(call) = self.calls.get(&request_id) else {
                    return;
                };
                fx.record(Record::Consent(store::NewConsent {
                    conversation_id: call.conversation.clone(),
                    tool_call_id: Some(request_id),
                    tool_name: call.tool_name.clone(),
                    asked: reason,
                    outcome: if allowed {
                        store::Outcome::Allowed
                    } else {
                        store::Outcome::Denied
                    },
                    decision: decision.map(store_decision),
                    scope: None,
                    decided_by: store_decider(by),
                    asked_at: None,
                    decided_at: now,
                }));
            }
            ExecEvent::PolicyWriteFailed {
                request_id,
                decision,
                message,
            } => {
                let tool = self
                    .calls
                    .get(&request_id)
                    .map_or_else(String::new, |c| format!(" for {}", c.tool_name));
                let what = match decision {
                    Decision::AlwaysDeny => "Always deny",
                    _ => "Always allow",
                };
                fx.ui(UiEvent::Error {
                    message: format!(
                        "Your \"{what}\" answer{tool} applied to this call but could not be \
                         saved in the policy file, so Outpost will ask again next time: {message}"
                    ),
                });
            }
        }
    }

    /// A result from the executor: record, show, send (or hold).
    fn finish_client_call(&mut self, fx: &mut Fx, mut r: ToolUseResult, now: Millis, send: bool) {
        if self.user_cancelled.contains(&r.id) && r.error_code == Some(ToolErrorCode::Cancelled) {
            r = ToolUseResult::permission_denied(&r.id, "the user", "the user stopped this call");
        }
        if let Some(call) = self.calls.get_mut(&r.id) {
            let handed = call.execution == Execution::Either
                && r.error_code == Some(ToolErrorCode::UnknownTool);
            match call.state {
                CallState::Finished | CallState::HandedToServer => {}
                _ if handed => {
                    call.state = CallState::HandedToServer;
                    fx.ui(UiEvent::ToolCallHandedToServer {
                        id: r.id.clone(),
                        tool_name: call.tool_name.clone(),
                    });
                }
                _ => {
                    call.state = CallState::Finished;
                    let conversation_id = call.conversation.clone();
                    let tool = call.tool_name.clone();
                    let executed = if call.running_logged {
                        None
                    } else {
                        Some(store::Executor::Client)
                    };
                    let mut ev = final_event(conversation_id, &r, store::Executor::Client, now);
                    set_executed_by(&mut ev, executed);
                    fx.record(Record::Tool(ev));
                    fx.ui(finished_event(&r, &tool, Side::Client));
                }
            }
        }
        if self.calls.get(&r.id).is_some_and(|c| c.via_rpc) {
            if send {
                self.rpc_result(fx, &r);
            }
            return;
        }
        if send {
            self.send(fx, now, Message::ToolUseResult(r));
        }
    }

    fn command(&mut self, fx: &mut Fx, now: Millis, cmd: Command) {
        match cmd {
            Command::SendUserMessage { id, text } => {
                let queued = !self.is_ready();
                fx.ui(UiEvent::UserMessage {
                    id: id.clone(),
                    text: text.clone(),
                    queued,
                });
                self.send(fx, now, Message::UserMessage(UserMessage { id, text }));
            }
            Command::CancelTool { id } => {
                let running = self.calls.get(&id).is_some_and(|c| {
                    c.execution != Execution::Server
                        && matches!(
                            c.state,
                            CallState::Pending | CallState::AwaitingConsent | CallState::Running
                        )
                });
                if running {
                    self.user_cancelled.insert(id.clone());
                    fx.0.push(Effect::CancelTool(ToolUseCancel {
                        id,
                        reason: Some("stopped by the user".into()),
                    }));
                } else {
                    fx.ui(UiEvent::Error {
                        message: format!("no tool call {id} is running on this computer"),
                    });
                }
            }
            Command::SwitchConversation { conversation_id } => {
                self.end_grants();
                if let Some(old) = self.conversation.take() {
                    fx.record(Record::EndConversation {
                        id: old.as_str().into(),
                        at: now,
                    });
                }
                self.wanted = conversation_id;
                self.phase = Phase::NeedHello;
                self.maybe_hello(fx, now);
            }
            Command::Leave => {
                self.end(fx, now, "left the room".into());
                fx.0.push(Effect::Leave {
                    reason: "left the room".into(),
                });
            }
        }
    }
}

fn store_decision(d: Decision) -> store::Decision {
    match d {
        Decision::AllowOnce => store::Decision::AllowOnce,
        Decision::AllowForConversation => store::Decision::AllowForConversation,
        Decision::AlwaysAllow => store::Decision::AlwaysAllow,
        Decision::DenyOnce => store::Decision::DenyOnce,
        Decision::AlwaysDeny => store::Decision::AlwaysDeny,
    }
}

fn store_decider(by: Decider) -> store::DecidedBy {
    match by {
        Decider::Policy => store::DecidedBy::Policy,
        Decider::SecretsList => store::DecidedBy::SecretsList,
        Decider::User => store::DecidedBy::User,
        Decider::ConversationGrant => store::DecidedBy::ConversationGrant,
        Decider::ConsentTimeout => store::DecidedBy::ConsentTimeout,
        Decider::NoConsentUi => store::DecidedBy::NoConsentUi,
    }
}

fn final_event(
    conversation_id: ConversationId,
    r: &ToolUseResult,
    by: store::Executor,
    now: Millis,
) -> store::ToolCallEvent {
    if r.success {
        store::ToolCallEvent::Completed {
            conversation_id,
            id: r.id.clone(),
            result: r.result.as_ref().map(map_value),
            executed_by: Some(by),
            at: now,
        }
    } else {
        store::ToolCallEvent::Failed {
            conversation_id,
            id: r.id.clone(),
            code: r
                .error_code
                .as_ref()
                .map_or("execution_error", |c| c.as_str())
                .into(),
            message: r.error_message.clone().unwrap_or_default(),
            result: r.result.as_ref().map(map_value),
            executed_by: Some(by),
            at: now,
        }
    }
}

fn set_executed_by(ev: &mut store::ToolCallEvent, by: Option<store::Executor>) {
    match ev {
        store::ToolCallEvent::Completed { executed_by, .. }
        | store::ToolCallEvent::Failed { executed_by, .. } => *executed_by = by,
        _ => {}
    }
}

fn finished_event(r: &ToolUseResult, tool: &str, by: Side) -> UiEvent {
    UiEvent::ToolCallFinished {
        id: r.id.clone(),
        tool_name: tool.into(),
        success: r.success,
        result: r.result.clone(),
        error_code: r.error_code.as_ref().map(|c| c.as_str().into()),
        error_message: r.error_message.clone(),
        executed_by: by,
    }
}

#[derive(Default)]
struct Fx(Vec<Effect>);

impl Fx {
    fn ui(&mut self, ev: UiEvent) {
        self.0.push(Effect::Ui(ev));
    }
    fn record(&mut self, r: Record) {
        self.0.push(Effect::Record(r));
    }
}

/// The protocol code of an ErrorMessage effect, for tests and logs.
pub fn error_code(m: &Message) -> Option<ProtocolErrorCode> {
    match m {
        Message::Error(e) => Some(e.code.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use outpost_protocol::{AssistantState, ClientHello, Map, Value, encode};

    const A: &str = "assistant";

    fn machine() -> Machine {
        Machine::new(MachineConfig::new(Vec::new()))
    }

    fn bytes(m: impl Into<Message>) -> Vec<u8> {
        encode(&m.into()).unwrap()
    }

    fn recv(m: &mut Machine, msg: impl Into<Message>, now: Millis) -> Vec<Effect> {
        m.handle(
            Input::Received {
                sender: A.into(),
                bytes: bytes(msg),
            },
            now,
        )
    }

    fn sent(fx: &[Effect]) -> Vec<Message> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::Send { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    fn records(fx: &[Effect]) -> Vec<Record> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::Record(r) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// The UI events among the effects (also used by the other modules' tests).
    pub(super) fn uis(fx: &[Effect]) -> Vec<UiEvent> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::Ui(u) => Some(u.clone()),
                _ => None,
            })
            .collect()
    }

    fn welcome(conv: &str) -> ServerWelcome {
        ServerWelcome {
            protocol_version: 1,
            session_id: "s1".into(),
            conversation_id: conv.into(),
            assistant_name: "Helper".into(),
        }
    }

    fn hello_of(fx: &[Effect]) -> ClientHello {
        let hellos: Vec<ClientHello> = sent(fx)
            .into_iter()
            .filter_map(|m| match m {
                Message::ClientHello(h) => Some(h),
                _ => None,
            })
            .collect();
        assert_eq!(hellos.len(), 1, "expected one hello in {fx:?}");
        hellos.into_iter().next().unwrap()
    }

    /// Joined, assistant present, welcomed into conversation c1.
    fn live() -> Machine {
        let mut m = machine();
        let fx = m.handle(
            Input::Joined {
                assistant: Some(A.into()),
            },
            0,
        );
        hello_of(&fx);
        recv(&mut m, welcome("c1"), 10);
        assert!(m.is_ready());
        m
    }

    fn request(id: &str, execution: Execution) -> ToolUseRequest {
        ToolUseRequest {
            id: id.into(),
            message_id: "m1".into(),
            tool_name: "read_local_file".into(),
            execution,
            parameters: Map::new(),
            timeout_ms: None,
        }
    }

    fn ok(id: &str) -> ToolUseResult {
        let mut r = Map::new();
        r.insert("content".into(), Value::String("hi".into()));
        ToolUseResult::ok(id, r)
    }

    fn error_of(fx: &[Effect]) -> ErrorMessage {
        sent(fx)
            .into_iter()
            .find_map(|m| match m {
                Message::Error(e) => Some(e),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no ErrorMessage sent in {fx:?}"))
    }

    fn mcp_tool(name: &str) -> ToolDescriptor {
        ToolDescriptor {
            name: name.into(),
            description: "d".into(),
            parameters: Map::new(),
            result_schema: None,
            read_only: false,
            destructive: true,
            open_world: true,
            server_name: Some("srv".into()),
            timeout_ms: None,
        }
    }

    fn tools_changed_sent(fx: &[Effect]) -> Vec<Vec<String>> {
        sent(fx)
            .into_iter()
            .filter_map(|m| match m {
                Message::ToolsChanged(t) => Some(t.tools.into_iter().map(|t| t.name).collect()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_new_catalogue_reaches_a_version_2_assistant_and_the_cards() {
        let mut m = machine();
        let fx = m.handle(
            Input::Joined {
                assistant: Some(A.into()),
            },
            0,
        );
        hello_of(&fx);
        let mut w = welcome("c1");
        w.protocol_version = 2;
        recv(&mut m, w, 10);
        let mut claims = BTreeMap::new();
        claims.insert(
            "mcp__srv__x".to_owned(),
            ServerClaims {
                read_only: Some(true),
                ..ServerClaims::default()
            },
        );
        let fx = m.handle(
            Input::ToolsChanged {
                tools: vec![mcp_tool("mcp__srv__x")],
                claims,
            },
            20,
        );
        assert_eq!(
            tools_changed_sent(&fx),
            vec![vec!["mcp__srv__x".to_owned()]]
        );
        assert!(
            uis(&fx)
                .iter()
                .any(|u| matches!(u, UiEvent::ToolsChanged { tools } if tools == &["mcp__srv__x"]))
        );
        // The same catalogue again is no news.
        let fx = m.handle(
            Input::ToolsChanged {
                tools: vec![mcp_tool("mcp__srv__x")],
                claims: BTreeMap::new(),
            },
            21,
        );
        assert!(tools_changed_sent(&fx).is_empty());
        // A request for the MCP tool: the card and the record name the server.
        let mut req = request("t1", Execution::Client);
        req.tool_name = "mcp__srv__x".into();
        let fx = recv(&mut m, req, 30);
        assert!(uis(&fx).iter().any(|u| matches!(u,
            UiEvent::ToolCallRequested { server_name: Some(s), claims: Some(c), .. }
                if s == "srv" && c.read_only == Some(true))));
        assert!(records(&fx).iter().any(|r| matches!(r,
            Record::Tool(store::ToolCallEvent::Initiated { server_name, .. }) if server_name == "srv")));
    }

    #[test]
    fn a_version_1_assistant_learns_the_catalogue_at_its_next_hello_only() {
        let mut m = live();
        let fx = m.handle(
            Input::ToolsChanged {
                tools: vec![mcp_tool("mcp__srv__y")],
                claims: BTreeMap::new(),
            },
            20,
        );
        assert!(
            tools_changed_sent(&fx).is_empty(),
            "version 1 has no ToolsChanged"
        );
        let fx = m.handle(
            Input::Command(Command::SwitchConversation {
                conversation_id: None,
            }),
            30,
        );
        let h = hello_of(&fx);
        assert_eq!(
            h.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["mcp__srv__y"]
        );
    }

    #[test]
    fn a_change_while_the_welcome_is_on_its_way_is_sent_after_it() {
        let mut m = machine();
        let fx = m.handle(
            Input::Joined {
                assistant: Some(A.into()),
            },
            0,
        );
        assert!(hello_of(&fx).tools.is_empty());
        let fx = m.handle(
            Input::ToolsChanged {
                tools: vec![mcp_tool("mcp__srv__z")],
                claims: BTreeMap::new(),
            },
            5,
        );
        assert!(
            tools_changed_sent(&fx).is_empty(),
            "nothing before the welcome"
        );
        let mut w = welcome("c1");
        w.protocol_version = 2;
        let fx = recv(&mut m, w, 10);
        assert_eq!(
            tools_changed_sent(&fx),
            vec![vec!["mcp__srv__z".to_owned()]]
        );
    }

    #[test]
    fn hello_waits_for_link_and_assistant() {
        let mut m = machine();
        let fx = m.handle(Input::Joined { assistant: None }, 0);
        assert!(sent(&fx).is_empty(), "no hello without an assistant");
        let fx = m.handle(Input::AssistantJoined { identity: A.into() }, 1);
        let h = hello_of(&fx);
        assert_eq!(h.conversation_id, None);
        assert_eq!(h.protocol_version, PROTOCOL_VERSION);
        // The same assistant announced again does not cause a second hello.
        let fx = m.handle(Input::AssistantJoined { identity: A.into() }, 2);
        assert!(sent(&fx).is_empty());
    }

    #[test]
    fn an_assistant_found_at_join_and_announced_again_is_reported_once() {
        // The room reports the assistant in the join snapshot and again as an event.
        let mut m = machine();
        let mut fx = m.handle(
            Input::Joined {
                assistant: Some(A.into()),
            },
            0,
        );
        fx.extend(m.handle(Input::AssistantJoined { identity: A.into() }, 1));
        let here: Vec<UiEvent> = uis(&fx)
            .into_iter()
            .filter(|e| matches!(e, UiEvent::AssistantPresence { present: true, .. }))
            .collect();
        assert_eq!(here.len(), 1, "{here:?}");
        // After it left, its return is news again.
        let mut fx = m.handle(Input::AssistantLeft { identity: A.into() }, 2);
        fx.extend(m.handle(Input::AssistantJoined { identity: A.into() }, 3));
        let presence: Vec<UiEvent> = uis(&fx)
            .into_iter()
            .filter(|e| matches!(e, UiEvent::AssistantPresence { .. }))
            .collect();
        assert_eq!(presence.len(), 2, "{presence:?}");
    }

    #[test]
    fn welcome_starts_the_conversation_and_flushes_held_messages_in_order() {
        let mut m = machine();
        m.handle(
            Input::Joined {
                assistant: Some(A.into()),
            },
            0,
        );
        let fx = m.handle(
            Input::Command(Command::SendUserMessage {
                id: "u1".into(),
                text: "first".into(),
            }),
            1,
        );
        assert!(sent(&fx).is_empty(), "nothing but hello before the welcome");
        assert!(matches!(
            uis(&fx)[0],
            UiEvent::UserMessage { queued: true, .. }
        ));
        m.handle(
            Input::Command(Command::SendUserMessage {
                id: "u2".into(),
                text: "second".into(),
            }),
            2,
        );
        assert_eq!(m.held(), 2);
        let fx = recv(&mut m, welcome("c1"), 3);
        let ids: Vec<String> = sent(&fx)
            .into_iter()
            .map(|m| match m {
                Message::UserMessage(u) => u.id,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, ["u1", "u2"]);
        let recs = records(&fx);
        assert!(matches!(&recs[0], Record::Conversation(c) if c.id.as_str() == "c1"));
        assert!(
            recs.iter()
                .filter(|r| matches!(r, Record::Message(msg) if msg.role == store::Role::User))
                .count()
                == 2
        );
        assert!(uis(&fx).iter().any(|u| matches!(u, UiEvent::SessionStarted { conversation_id, .. } if conversation_id == "c1")));
        assert_eq!(m.conversation_id(), Some("c1"));
    }

    #[test]
    fn client_messages_from_the_server_are_unexpected() {
        let mut m = live();
        let fx = recv(
            &mut m,
            UserMessage {
                id: "x1".into(),
                text: "hi".into(),
            },
            20,
        );
        let e = error_of(&fx);
        assert_eq!(e.code, ProtocolErrorCode::UnexpectedMessage);
        assert_eq!(e.message, "UserMessage is not expected from the server");
        assert_eq!(e.ref_id.as_deref(), Some("x1"));
        assert!(
            matches!(&records(&fx)[0], Record::ProtocolError(p) if p.code == "unexpected_message")
        );
        let fx = recv(&mut m, ClientHello::new("x", "1", Vec::new()), 21);
        assert_eq!(
            error_of(&fx).message,
            "ClientHello is not expected from the server"
        );
    }

    #[test]
    fn messages_before_the_welcome_are_unexpected_and_not_acted_on() {
        let mut m = machine();
        m.handle(
            Input::Joined {
                assistant: Some(A.into()),
            },
            0,
        );
        let fx = recv(&mut m, request("t1", Execution::Client), 1);
        let e = error_of(&fx);
        assert_eq!(
            e.message,
            "ToolUseRequest is not expected from the server now"
        );
        assert_eq!(e.ref_id.as_deref(), Some("t1"));
        assert!(!fx.iter().any(|e| matches!(e, Effect::RunTool { .. })));
        // A welcome without a hello outstanding is unexpected too.
        let mut m = live();
        let fx = recv(&mut m, welcome("c2"), 30);
        assert_eq!(
            error_of(&fx).message,
            "ServerWelcome is not expected from the server now"
        );
        assert_eq!(m.conversation_id(), Some("c1"));
    }

    #[test]
    fn undecodable_bytes_get_the_codec_error_with_the_ref_id() {
        let mut m = live();
        // A ToolUseRequest without `execution`.
        let mut bad = bytes(request("t9", Execution::Client));
        let json = {
            let mut v = outpost_protocol::to_json(&outpost_protocol::decode(&bad).unwrap());
            v.as_object_mut().unwrap().remove("execution");
            v
        };
        bad = rmp_like(&json);
        let fx = m.handle(
            Input::Received {
                sender: A.into(),
                bytes: bad,
            },
            40,
        );
        let e = error_of(&fx);
        assert_eq!(e.code, ProtocolErrorCode::MissingField);
        assert_eq!(
            e.message,
            "ToolUseRequest is missing required field `execution`"
        );
        assert_eq!(e.ref_id.as_deref(), Some("t9"));
        assert_eq!(e.message_type, Some(6));
        assert!(!fx.iter().any(|e| matches!(e, Effect::RunTool { .. })));

        let fx = m.handle(
            Input::Received {
                sender: A.into(),
                bytes: vec![0x81, 0xa4],
            },
            41,
        );
        assert_eq!(error_of(&fx).code, ProtocolErrorCode::MalformedMessage);
    }

    /// Hand-written MessagePack for a JSON object of strings, ints and maps (enough here).
    fn rmp_like(v: &Value) -> Vec<u8> {
        fn put(out: &mut Vec<u8>, v: &Value) {
            match v {
                Value::Object(m) => {
                    out.push(0xde);
                    out.extend_from_slice(&u16::try_from(m.len()).unwrap().to_be_bytes());
                    for (k, v) in m {
                        put(out, &Value::String(k.clone()));
                        put(out, v);
                    }
                }
                Value::String(s) => {
                    out.push(0xda);
                    out.extend_from_slice(&u16::try_from(s.len()).unwrap().to_be_bytes());
                    out.extend_from_slice(s.as_bytes());
                }
                Value::Number(n) => {
                    out.push(0xcf);
                    out.extend_from_slice(&n.as_u64().unwrap().to_be_bytes());
                }
                Value::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
                Value::Null => out.push(0xc0),
                Value::Array(a) => {
                    out.push(0xdc);
                    out.extend_from_slice(&u16::try_from(a.len()).unwrap().to_be_bytes());
                    for x in a {
                        put(out, x);
                    }
                }
            }
        }
        let mut out = Vec::new();
        put(&mut out, v);
        out
    }

    #[test]
    fn broken_error_messages_are_recorded_not_answered() {
        let mut m = live();
        // type 1 without `message`.
        let raw = rmp_like(&serde_json::json!({"type": 1, "code": "internal_error"}));
        let fx = m.handle(
            Input::Received {
                sender: A.into(),
                bytes: raw,
            },
            50,
        );
        assert!(sent(&fx).is_empty(), "{fx:?}");
        assert!(matches!(&records(&fx)[0], Record::ProtocolError(_)));
    }

    #[test]
    fn other_participants_are_ignored() {
        let mut m = live();
        let fx = m.handle(
            Input::Received {
                sender: "mallory".into(),
                bytes: bytes(request("t1", Execution::Client)),
            },
            60,
        );
        assert!(fx.is_empty());
        let fx = m.handle(
            Input::Received {
                sender: "mallory".into(),
                bytes: vec![1, 2, 3],
            },
            61,
        );
        assert!(fx.is_empty(), "garbage from others is not answered either");
    }

    #[test]
    fn a_welcome_outside_our_versions_ends_the_session() {
        let mut m = machine();
        m.handle(
            Input::Joined {
                assistant: Some(A.into()),
            },
            0,
        );
        let mut w = welcome("c1");
        w.protocol_version = 7;
        let fx = recv(&mut m, w, 1);
        let e = error_of(&fx);
        assert_eq!(e.code, ProtocolErrorCode::UnsupportedVersion);
        assert!(e.fatal);
        assert_eq!(
            e.message,
            "no common protocol version: client speaks 1..=2, server speaks 7..=7"
        );
        assert!(fx.iter().any(|e| matches!(e, Effect::Leave { .. })));
        assert!(m.is_ended());
    }

    #[test]
    fn a_fatal_error_from_the_assistant_ends_the_session() {
        let mut m = live();
        let mut e = ErrorMessage::new(ProtocolErrorCode::InternalError, "model crashed");
        e.fatal = true;
        let fx = recv(&mut m, e, 70);
        assert!(fx.iter().any(|e| matches!(e, Effect::Leave { .. })));
        assert!(
            sent(&fx).is_empty(),
            "errors are never answered with errors"
        );
        assert!(
            records(&fx)
                .iter()
                .any(|r| matches!(r, Record::EndConversation { .. }))
        );
    }

    #[test]
    fn client_requests_run_once_and_duplicates_go_to_the_executor_without_a_second_record() {
        let mut m = live();
        let fx = recv(&mut m, request("t1", Execution::Client), 100);
        assert!(
            matches!(&records(&fx)[0], Record::Tool(store::ToolCallEvent::Initiated { id, .. }) if id == "t1")
        );
        assert_eq!(
            fx.iter()
                .filter(|e| matches!(e, Effect::RunTool { .. }))
                .count(),
            1
        );
        let fx = recv(&mut m, request("t1", Execution::Client), 101);
        assert!(records(&fx).is_empty(), "no second Initiated");
        assert_eq!(
            fx.iter()
                .filter(|e| matches!(e, Effect::RunTool { .. }))
                .count(),
            1,
            "the executor decides: ignore in flight, resend when finished"
        );
        let fx = m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 102);
        assert!(
            matches!(&records(&fx)[0], Record::Tool(store::ToolCallEvent::Completed { id, executed_by: Some(store::Executor::Client), .. }) if id == "t1")
        );
        assert_eq!(sent(&fx), vec![Message::ToolUseResult(ok("t1"))]);
        // The executor's resend of the same result for a later duplicate: sent, not recorded.
        let fx = m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 103);
        assert!(records(&fx).is_empty());
        assert_eq!(sent(&fx).len(), 1);
    }

    #[test]
    fn server_requests_are_shown_and_never_run() {
        let mut m = live();
        let fx = recv(&mut m, request("s1", Execution::Server), 100);
        assert!(!fx.iter().any(|e| matches!(e, Effect::RunTool { .. })));
        assert!(sent(&fx).is_empty());
        let fx = recv(
            &mut m,
            ToolUseProgress {
                id: "s1".into(),
                state: ProgressState::Running,
                detail: None,
            },
            101,
        );
        assert!(matches!(
            &records(&fx)[0],
            Record::Tool(store::ToolCallEvent::Running {
                executed_by: store::Executor::Server,
                ..
            })
        ));
        let fx = recv(&mut m, ok("s1"), 102);
        assert!(sent(&fx).is_empty(), "the client sends nothing back");
        assert!(matches!(
            &records(&fx)[0],
            Record::Tool(store::ToolCallEvent::Completed {
                executed_by: Some(store::Executor::Server),
                ..
            })
        ));
        assert!(uis(&fx).iter().any(|u| matches!(
            u,
            UiEvent::ToolCallFinished {
                executed_by: Side::Server,
                ..
            }
        )));
        // A cancel for a server call is not ours to act on.
        let fx = recv(
            &mut m,
            ToolUseCancel {
                id: "s1".into(),
                reason: None,
            },
            103,
        );
        assert!(!fx.iter().any(|e| matches!(e, Effect::CancelTool(_))));
    }

    #[test]
    fn declined_either_calls_are_handed_to_the_server() {
        let mut m = live();
        recv(&mut m, request("e1", Execution::Either), 100);
        let fx = m.handle(
            Input::Exec(ExecEvent::Result(ToolUseResult::unknown_tool(
                "e1",
                "read_local_file",
            ))),
            101,
        );
        assert!(records(&fx).is_empty(), "not final: the server runs it");
        assert_eq!(sent(&fx).len(), 1, "the unknown_tool answer goes out");
        assert!(
            uis(&fx)
                .iter()
                .any(|u| matches!(u, UiEvent::ToolCallHandedToServer { .. }))
        );
        let fx = recv(&mut m, ok("e1"), 102);
        assert!(matches!(
            &records(&fx)[0],
            Record::Tool(store::ToolCallEvent::Completed {
                executed_by: Some(store::Executor::Server),
                ..
            })
        ));
    }

    #[test]
    fn cancels_reach_the_executor_only_for_calls_in_flight() {
        let mut m = live();
        recv(&mut m, request("t1", Execution::Client), 100);
        let cancel = ToolUseCancel {
            id: "t1".into(),
            reason: Some("user moved on".into()),
        };
        let fx = recv(&mut m, cancel.clone(), 101);
        assert_eq!(
            fx.iter()
                .filter(|e| matches!(e, Effect::CancelTool(_)))
                .count(),
            1
        );
        m.handle(
            Input::Exec(ExecEvent::Result(ToolUseResult::cancelled("t1"))),
            102,
        );
        let fx = recv(&mut m, cancel, 103);
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::CancelTool(_))),
            "finished: ignored"
        );
        let fx = recv(
            &mut m,
            ToolUseCancel {
                id: "nope".into(),
                reason: None,
            },
            104,
        );
        assert!(!fx.iter().any(|e| matches!(e, Effect::CancelTool(_))));
        assert!(
            sent(&fx).is_empty(),
            "unknown ids are ignored, not answered"
        );
    }

    #[test]
    fn a_user_cancel_is_reported_as_the_users_denial() {
        let mut m = live();
        recv(&mut m, request("t1", Execution::Client), 100);
        let fx = m.handle(Input::Command(Command::CancelTool { id: "t1".into() }), 101);
        assert!(fx.iter().any(|e| matches!(e, Effect::CancelTool(_))));
        let fx = m.handle(
            Input::Exec(ExecEvent::Result(ToolUseResult::cancelled("t1"))),
            102,
        );
        let Message::ToolUseResult(r) = &sent(&fx)[0] else {
            panic!()
        };
        assert_eq!(r.error_code, Some(ToolErrorCode::PermissionDenied));
        assert_eq!(
            r.error_message.as_deref(),
            Some("Permission denied by the user: the user stopped this call")
        );
    }

    #[test]
    fn results_produced_while_disconnected_go_out_once_after_the_rejoin() {
        let mut m = live();
        recv(&mut m, request("t1", Execution::Client), 100);
        m.handle(
            Input::Reconnecting {
                reason: "link lost".into(),
            },
            200,
        );
        let fx = m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 300);
        assert!(sent(&fx).is_empty(), "held while the link is down");
        assert!(matches!(
            &records(&fx)[0],
            Record::Tool(store::ToolCallEvent::Completed { .. })
        ));
        // Full rejoin: hello again for the same conversation, result after the welcome.
        let fx = m.handle(
            Input::Reconnected {
                resumed: false,
                assistant_changed: false,
            },
            400,
        );
        assert_eq!(hello_of(&fx).conversation_id.as_deref(), Some("c1"));
        assert_eq!(sent(&fx).len(), 1, "only the hello before the welcome");
        let fx = recv(&mut m, welcome("c1"), 410);
        let results: Vec<_> = sent(&fx)
            .into_iter()
            .filter(|m| matches!(m, Message::ToolUseResult(_)))
            .collect();
        assert_eq!(results, vec![Message::ToolUseResult(ok("t1"))]);
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::RunTool { .. })),
            "never re-run"
        );
        // The assistant repeats the request after its own restart: the executor answers
        // from its memory; the machine does not record the call again.
        let fx = recv(&mut m, request("t1", Execution::Client), 420);
        assert!(records(&fx).is_empty());
    }

    #[test]
    fn results_sent_just_before_a_loss_are_sent_once_more_after_the_welcome() {
        let mut m = live();
        recv(&mut m, request("t1", Execution::Client), 100);
        recv(&mut m, request("t2", Execution::Client), 100);
        m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 1_000);
        m.handle(Input::Exec(ExecEvent::Result(ok("t2"))), 9_000);
        // t1 was sent 9 s before the loss (delivered long ago); t2 1 s before.
        m.handle(Input::Tick, 9_500);
        m.handle(Input::AssistantLeft { identity: A.into() }, 10_000);
        let fx = m.handle(Input::AssistantJoined { identity: A.into() }, 12_000);
        assert_eq!(hello_of(&fx).conversation_id.as_deref(), Some("c1"));
        let fx = recv(&mut m, welcome("c1"), 12_100);
        assert_eq!(sent(&fx), vec![Message::ToolUseResult(ok("t2"))]);
        // Once only: a later loss does not resend it again unless sent recently.
        m.handle(Input::Reconnecting { reason: "x".into() }, 30_000);
        m.handle(
            Input::Reconnected {
                resumed: false,
                assistant_changed: true,
            },
            31_000,
        );
        let fx = recv(&mut m, welcome("c1"), 31_100);
        assert!(sent(&fx).is_empty());
    }

    #[test]
    fn after_a_link_drop_with_the_same_assistant_results_are_not_sent_twice() {
        let mut m = live();
        recv(&mut m, request("t1", Execution::Client), 100);
        m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 1_000);
        // LiveKit noticed the loss 3 s later; it resends what SCTP had not acknowledged.
        m.handle(
            Input::Reconnecting {
                reason: "ping timeout".into(),
            },
            4_000,
        );
        let fx = m.handle(
            Input::Reconnected {
                resumed: false,
                assistant_changed: false,
            },
            9_000,
        );
        hello_of(&fx);
        let fx = recv(&mut m, welcome("c1"), 9_100);
        assert!(sent(&fx).is_empty(), "{fx:?}");
    }

    #[test]
    fn after_a_server_restart_recent_results_are_sent_again() {
        let mut m = live();
        recv(&mut m, request("t1", Execution::Client), 100);
        m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 1_000);
        m.handle(
            Input::Reconnecting {
                reason: "server gone".into(),
            },
            4_000,
        );
        // Ticks while the link is down do not age the results out.
        m.handle(Input::Tick, 8_000);
        m.handle(
            Input::Reconnected {
                resumed: false,
                assistant_changed: true,
            },
            9_000,
        );
        let fx = recv(&mut m, welcome("c1"), 9_100);
        assert_eq!(sent(&fx), vec![Message::ToolUseResult(ok("t1"))]);
    }

    #[test]
    fn a_resume_flushes_without_a_new_hello() {
        let mut m = live();
        m.handle(Input::Reconnecting { reason: "x".into() }, 100);
        m.handle(
            Input::Command(Command::SendUserMessage {
                id: "u1".into(),
                text: "hi".into(),
            }),
            110,
        );
        let fx = m.handle(
            Input::Reconnected {
                resumed: true,
                assistant_changed: false,
            },
            120,
        );
        let msgs = sent(&fx);
        assert_eq!(msgs.len(), 1);
        assert!(matches!(&msgs[0], Message::UserMessage(u) if u.id == "u1"));
    }

    #[test]
    fn deltas_replayed_after_a_reconnect_are_ignored_and_the_final_text_wins() {
        let mut m = live();
        let d = |seq: u32, text: &str| AssistantDelta {
            message_id: "a1".into(),
            seq,
            delta: text.into(),
        };
        assert_eq!(uis(&recv(&mut m, d(0, "Hel"), 1)).len(), 1);
        assert_eq!(uis(&recv(&mut m, d(1, "lo"), 2)).len(), 1);
        assert!(recv(&mut m, d(1, "lo"), 3).is_empty(), "replay ignored");
        assert_eq!(uis(&recv(&mut m, d(3, "!"), 4)).len(), 1, "gap tolerated");
        let fx = recv(
            &mut m,
            AssistantMessage {
                id: "a1".into(),
                text: "Hello!".into(),
                in_reply_to: None,
            },
            5,
        );
        assert!(
            matches!(&records(&fx)[0], Record::Message(msg) if msg.text == "Hello!" && msg.role == store::Role::Assistant)
        );
    }

    #[test]
    fn status_is_recorded_and_shown() {
        let mut m = live();
        let fx = recv(
            &mut m,
            AssistantStatus {
                state: AssistantState::UsingTool,
                tool_use_id: Some("t1".into()),
                detail: None,
            },
            5,
        );
        assert!(matches!(&records(&fx)[0], Record::Status(s) if s.status == "using_tool"));
        assert!(matches!(
            &uis(&fx)[0],
            UiEvent::Status {
                state: AssistantState::UsingTool,
                ..
            }
        ));
    }

    #[test]
    fn hello_is_repeated_when_no_welcome_comes() {
        let mut m = machine();
        m.handle(
            Input::Joined {
                assistant: Some(A.into()),
            },
            0,
        );
        assert!(sent(&m.handle(Input::Tick, 4_000)).is_empty());
        hello_of(&m.handle(Input::Tick, 5_000));
    }

    #[test]
    fn switching_conversations_sends_a_new_hello() {
        let mut m = live();
        let fx = m.handle(
            Input::Command(Command::SwitchConversation {
                conversation_id: Some("old".into()),
            }),
            100,
        );
        assert_eq!(hello_of(&fx).conversation_id.as_deref(), Some("old"));
        assert!(
            matches!(&records(&fx)[0], Record::EndConversation { id, .. } if id.as_str() == "c1")
        );
        assert!(!m.is_ready());
        recv(&mut m, welcome("old"), 110);
        assert_eq!(m.conversation_id(), Some("old"));
        let fx = m.handle(
            Input::Command(Command::SwitchConversation {
                conversation_id: None,
            }),
            120,
        );
        assert_eq!(hello_of(&fx).conversation_id, None);
    }

    #[test]
    fn oversized_streams_are_answered_with_message_too_large() {
        let mut m = live();
        let fx = m.handle(
            Input::TooLarge {
                sender: A.into(),
                size: 70_000_000,
            },
            1,
        );
        let e = error_of(&fx);
        assert_eq!(e.code, ProtocolErrorCode::MessageTooLarge);
        assert_eq!(
            e.message,
            "message of 70000000 bytes exceeds the limit of 67108864 bytes"
        );
    }

    /// Each decider is recorded as itself: a policy rule is not a user's "always" answer,
    /// and a consent timeout is not a policy decision.
    #[test]
    fn each_decider_is_recorded_as_itself() {
        let cases = [
            (false, Decider::Policy, None, store::DecidedBy::Policy),
            (true, Decider::Policy, None, store::DecidedBy::Policy),
            (
                false,
                Decider::SecretsList,
                None,
                store::DecidedBy::SecretsList,
            ),
            (
                true,
                Decider::ConversationGrant,
                None,
                store::DecidedBy::ConversationGrant,
            ),
            (
                false,
                Decider::ConsentTimeout,
                None,
                store::DecidedBy::ConsentTimeout,
            ),
            (
                false,
                Decider::NoConsentUi,
                None,
                store::DecidedBy::NoConsentUi,
            ),
            (
                true,
                Decider::User,
                Some(Decision::AllowForConversation),
                store::DecidedBy::User,
            ),
            (
                false,
                Decider::User,
                Some(Decision::AlwaysDeny),
                store::DecidedBy::User,
            ),
        ];
        for (i, (allowed, by, decision, want_by)) in cases.into_iter().enumerate() {
            let mut m = live();
            let id = format!("t{i}");
            recv(&mut m, request(&id, Execution::Client), 1);
            let fx = m.handle(
                Input::Exec(ExecEvent::Decided {
                    request_id: id.clone(),
                    allowed,
                    by,
                    reason: "why".into(),
                    decision,
                }),
                2,
            );
            let Record::Consent(c) = &records(&fx)[0] else {
                panic!("no consent record for {by:?}");
            };
            assert_eq!(c.decided_by, want_by, "{by:?}");
            assert_eq!(c.decision, decision.map(store_decision), "{by:?}");
            let outcome = if allowed {
                store::Outcome::Allowed
            } else {
                store::Outcome::Denied
            };
            assert_eq!(c.outcome, outcome, "{by:?}");
        }
    }

    #[test]
    fn a_failed_always_answer_is_shown_to_the_user() {
        let mut m = live();
        recv(&mut m, request("t1", Execution::Client), 1);
        let fx = m.handle(
            Input::Exec(ExecEvent::PolicyWriteFailed {
                request_id: "t1".into(),
                decision: Decision::AlwaysAllow,
                message: "read-only file system".into(),
            }),
            2,
        );
        assert!(
            uis(&fx)
                .iter()
                .any(|e| matches!(e, UiEvent::Error { message }
                if message.contains("Always allow") && message.contains("read-only file system"))),
            "{fx:?}"
        );
    }

    /// Text the assistant streams after a tool call shows below that call's card, live
    /// and in the history: the message continues in a new segment.
    #[test]
    fn text_after_a_tool_call_goes_below_its_card() {
        let mut m = live();
        let delta = |seq: u32, text: &str| AssistantDelta {
            message_id: "a1".into(),
            seq,
            delta: text.into(),
        };
        let mut fx = recv(&mut m, delta(0, "Let me read it. "), 1);
        fx.extend(recv(&mut m, request("t1", Execution::Client), 2));
        fx.extend(recv(&mut m, delta(1, "It says "), 3));
        fx.extend(recv(&mut m, delta(2, "hi."), 4));
        fx.extend(recv(
            &mut m,
            AssistantMessage {
                id: "a1".into(),
                text: "Let me read it. It says hi.".into(),
                in_reply_to: None,
            },
            5,
        ));
        let order: Vec<String> = uis(&fx)
            .into_iter()
            .filter_map(|e| match e {
                UiEvent::AssistantDelta {
                    message_id, delta, ..
                } => Some(format!("delta {message_id}: {delta}")),
                UiEvent::ToolCallRequested { id, .. } => Some(format!("card {id}")),
                UiEvent::AssistantMessage { id, text, .. } => Some(format!("final {id}: {text}")),
                _ => None,
            })
            .collect();
        assert_eq!(
            order,
            [
                "delta a1: Let me read it. ",
                "card t1",
                "delta a1~2: It says ",
                "delta a1~2: hi.",
                "final a1: Let me read it. ",
                "final a1~2: It says hi.",
            ]
        );
        // The history gets the same two messages; the second is created after the call.
        let stored: Vec<String> = records(&fx)
            .into_iter()
            .filter_map(|r| match r {
                Record::Delta(d) => Some(format!("delta {}", d.id)),
                Record::Tool(store::ToolCallEvent::Initiated { id, .. }) => {
                    Some(format!("call {id}"))
                }
                Record::Message(msg) => Some(format!("message {}: {}", msg.id, msg.text)),
                _ => None,
            })
            .collect();
        assert_eq!(
            stored,
            [
                "delta a1",
                "call t1",
                "delta a1~2",
                "delta a1~2",
                "message a1: Let me read it. ",
                "message a1~2: It says hi.",
            ]
        );
    }

    fn seg(id: &str, said: &str) -> Segment {
        Segment {
            id: id.into(),
            len: said.len(),
            said: said.into(),
        }
    }

    #[test]
    fn a_rewritten_final_text_goes_to_the_first_segment() {
        let parts = split_final(
            "Something else entirely",
            &[seg("a", "abcde"), seg("a~2", "fg")],
        );
        assert_eq!(
            parts,
            [
                ("a".to_owned(), "Something else entirely".to_owned()),
                ("a~2".to_owned(), String::new())
            ]
        );
        let parts = split_final("abcdefgh", &[seg("a", "abcde"), seg("a~2", "fg")]);
        assert_eq!(
            parts,
            [
                ("a".to_owned(), "abcde".to_owned()),
                ("a~2".to_owned(), "fgh".to_owned())
            ]
        );
    }

    fn scope_of(fx: &[Effect]) -> String {
        fx.iter()
            .find_map(|e| match e {
                Effect::RunTool { grant_scope, .. } => Some(grant_scope.clone()),
                _ => None,
            })
            .expect("a RunTool effect")
    }

    /// "Allow for this conversation" must not survive a new conversation that the
    /// assistant gives the old id, nor pass to another assistant.
    #[test]
    fn grant_scopes_change_with_the_conversation_and_the_assistant() {
        let mut m = live();
        let first = scope_of(&recv(&mut m, request("t1", Execution::Client), 1));
        assert_eq!(
            scope_of(&recv(&mut m, request("t2", Execution::Client), 2)),
            first,
            "same conversation, same assistant: same scope"
        );
        // New conversation; the assistant answers with the old id.
        m.handle(
            Input::Command(Command::SwitchConversation {
                conversation_id: None,
            }),
            3,
        );
        recv(&mut m, welcome("c1"), 4);
        let after_switch = scope_of(&recv(&mut m, request("t3", Execution::Client), 5));
        assert_ne!(after_switch, first);
        // Another agent takes over.
        m.handle(Input::AssistantLeft { identity: A.into() }, 6);
        m.handle(
            Input::AssistantJoined {
                identity: "agent-2".into(),
            },
            7,
        );
        let fx = m.handle(
            Input::Received {
                sender: "agent-2".into(),
                bytes: bytes(welcome("c1")),
            },
            8,
        );
        assert!(!fx.is_empty());
        let fx = m.handle(
            Input::Received {
                sender: "agent-2".into(),
                bytes: bytes(request("t4", Execution::Client)),
            },
            9,
        );
        let other = scope_of(&fx);
        assert_ne!(other, after_switch);
        assert_ne!(other, first);
    }

    #[test]
    fn leave_ends_and_records_the_end() {
        let mut m = live();
        let fx = m.handle(Input::Command(Command::Leave), 5);
        assert!(fx.iter().any(|e| matches!(e, Effect::Leave { .. })));
        assert!(matches!(&records(&fx)[0], Record::EndConversation { .. }));
        assert!(m.is_ended());
        // After the end, a late result is still recorded but not sent.
        let mut m = live();
        recv(&mut m, request("t1", Execution::Client), 1);
        m.handle(Input::Command(Command::Leave), 2);
        let fx = m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 3);
        assert!(sent(&fx).is_empty());
        assert_eq!(records(&fx).len(), 1);
    }
}
