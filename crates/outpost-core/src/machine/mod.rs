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
//!
//! Layout: `io` (the inputs and effects), `calls` (the tool-call lifecycle), `agents`
//! (LiveKit Agents mode), `tests`; this module keeps the machine's state, the session's
//! phases and the messages.

mod agents;
mod calls;
mod io;
#[cfg(test)]
mod tests;

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
    CHAT_TOPIC, CONVERSATION, CONVERSATION_TOPIC, FILES_TOPIC, IMAGES_TOPIC, LIST_TOOLS,
    MAX_SEGMENT_BYTES, MESSAGE_ATTRIBUTE, READ_RESULT, RPC_APPLICATION_ERROR, RPC_PAYLOAD_LIMIT,
    SHA256_ATTRIBUTE,
};
pub use io::{
    ByteStream, Command, Effect, ExecEvent, Input, MachineConfig, Record, RpcCall, RpcFailure,
};

use crate::events::{AssistantMode, ErrorDirection, LinkState, Side, ToolCallStatus, UiEvent};

/// Calls remembered (for duplicates, results from the server, store lifecycle).
pub const REMEMBERED_CALLS: usize = 10_000;
/// Assistant messages being assembled from deltas at once.
pub const MAX_OPEN_DELTAS: usize = 1_000;

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

#[derive(Debug, Clone)]
struct Call {
    conversation: ConversationId,
    tool_name: String,
    execution: Execution,
    /// Where the call stands: the status every tool-call event carries.
    status: ToolCallStatus,
    /// A declined `either` call: the server runs it (its status follows the server's
    /// reports).
    handed: bool,
    running_logged: bool,
    /// Asked over RPC (LiveKit Agents mode): answered with an RPC reply.
    via_rpc: bool,
}

impl Call {
    /// Still to be answered on this computer: neither finished nor handed to the server.
    fn open_here(&self) -> bool {
        !self.handed && !self.status.is_final()
    }
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
    /// What was said in `wanted` before, for the next hello (a conversation continued from
    /// the history); sent once, dropped at the welcome.
    earlier: Vec<outpost_protocol::HistoryMessage>,
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
    /// The optional message types the welcoming assistant reads (ServerWelcome).
    capabilities: Vec<String>,
    /// When the first hello to the present assistant went out (for Agents-mode detection).
    hello_since: Option<Millis>,
    agents: agents::AgentsState,
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
            earlier: Vec::new(),
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
            capabilities: Vec::new(),
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

    /// Whether the assistant takes files and images: a LiveKit agent (byte streams), or an
    /// Outpost-protocol assistant whose welcome listed `attachments`.
    pub fn accepts_attachments(&self) -> bool {
        match self.mode {
            Some(AssistantMode::LivekitAgents) => true,
            Some(AssistantMode::Outpost) => self
                .capabilities
                .iter()
                .any(|c| c == outpost_protocol::ATTACHMENTS_CAPABILITY),
            _ => false,
        }
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
                self.end(&mut fx, now, reason, false);
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
                first,
                is_final,
                user_speech,
            } => {
                let piece = agents::Piece {
                    segment_id: &segment_id,
                    text: &text,
                    first,
                    is_final,
                };
                if user_speech {
                    self.user_transcript(&mut fx, now, &sender, piece);
                } else {
                    self.transcript(&mut fx, now, &sender, piece);
                }
            }
            Input::Rpc(call) => self.rpc(&mut fx, now, call),
            Input::RpcRefused { caller, method } => {
                self.rpc_refused(&mut fx, now, &caller, &method, None);
            }
            Input::ToolsChanged { tools, claims } => {
                self.tools_changed(&mut fx, tools, claims);
                self.announce_tools(&mut fx, now);
            }
            Input::Tick => {
                if self.in_agents_mode() && !self.held.is_empty() {
                    self.flush(&mut fx, now);
                }
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
                self.flush_refusals(&mut fx, now, false);
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
        if hello.conversation_id.is_some() {
            hello.history.clone_from(&self.earlier);
        }
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
        if !self.can_send(now) {
            self.held.push_back(message);
            return;
        }
        self.send_now(fx, now, message);
    }

    /// Ready, and in LiveKit Agents mode the agent reads chat by now.
    fn can_send(&mut self, now: Millis) -> bool {
        self.is_ready() && (!self.in_agents_mode() || self.agent_takes_chat(now))
    }

    fn send_now(&mut self, fx: &mut Fx, now: Millis, message: Message) {
        let Some(to) = self.assistant.clone() else {
            self.held.push_back(message);
            return;
        };
        if let Message::Attachment(a) = &message {
            if !self.accepts_attachments() {
                // Held across a change of assistant that does not take files.
                fx.ui(UiEvent::Error {
                    message: format!("the assistant does not take files; {} was not sent", a.name),
                });
                return;
            }
            self.record_attachment(fx, now, a);
        }
        if self.in_agents_mode() {
            if let Message::Attachment(a) = message {
                let bytes = a.bytes().unwrap_or_default();
                let topic = if a.mime_type.starts_with("image/") {
                    IMAGES_TOPIC
                } else {
                    FILES_TOPIC
                };
                fx.0.push(Effect::SendBytes(io::ByteStream {
                    to,
                    topic: topic.into(),
                    name: a.name,
                    mime_type: a.mime_type,
                    bytes,
                    attributes: vec![
                        (SHA256_ATTRIBUTE.into(), a.sha256),
                        (MESSAGE_ATTRIBUTE.into(), a.message_id),
                    ],
                }));
                return;
            }
            // Only what the user says has a place in LiveKit's conventions; tool answers
            // go back as RPC replies, never as messages.
            if let Message::UserMessage(u) = message {
                self.record_user_message(fx, now, &u);
                // Files sent without words: `lk.chat` would make an empty turn of them.
                if !u.text.trim().is_empty() {
                    if self.agents.awaiting_reply.len() >= REMEMBERED_CALLS {
                        self.agents.awaiting_reply.pop_front();
                    }
                    self.agents.awaiting_reply.push_back(u.id.clone());
                    fx.0.push(Effect::SendText {
                        to,
                        topic: CHAT_TOPIC.into(),
                        text: u.text,
                    });
                }
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
                self.record_user_message(fx, now, u);
            }
            _ => {}
        }
        fx.0.push(Effect::Send { to, message });
    }

    /// Records what the user said in the conversation, if there is one yet. Done when the
    /// message is typed and again when it goes out (the store keeps the first time and
    /// order): a message held for the agent is in the history even if the session ends
    /// before it could go.
    fn record_user_message(&self, fx: &mut Fx, now: Millis, u: &UserMessage) {
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

    /// Records a file as sent: what describes it, and the bytes of a small image.
    fn record_attachment(&self, fx: &mut Fx, now: Millis, a: &outpost_protocol::Attachment) {
        let Some(c) = &self.conversation else {
            return;
        };
        let small_image =
            a.mime_type.starts_with("image/") && a.size <= store::MAX_ATTACHMENT_DATA as u64;
        fx.record(Record::Attachment(store::NewAttachment {
            conversation_id: c.as_str().into(),
            id: a.id.clone(),
            message_id: a.message_id.clone(),
            name: a.name.clone(),
            mime_type: a.mime_type.clone(),
            size: a.size,
            sha256: a.sha256.clone(),
            data: small_image.then(|| a.bytes().ok()).flatten(),
            sent_at: now,
        }));
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
        if !self.can_send(now) {
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

    fn end(&mut self, fx: &mut Fx, now: Millis, reason: String, asked: bool) {
        if self.phase == Phase::Ended {
            return;
        }
        self.flush_refusals(fx, now, true);
        if let Some(c) = &self.conversation {
            fx.record(Record::EndConversation {
                id: c.as_str().into(),
                at: now,
            });
        }
        self.phase = Phase::Ended;
        fx.ui(UiEvent::Ended { reason, asked });
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
                false,
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
            self.end(fx, now, text.clone(), false);
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
        if !self.earlier.is_empty() && self.wanted.as_ref() != Some(&w.conversation_id) {
            // The user picked a stored conversation; the assistant opened another one.
            fx.ui(UiEvent::Error {
                message: format!(
                    "{} did not continue the conversation you picked; it started a new one",
                    w.assistant_name
                ),
            });
        }
        self.earlier.clear();
        self.capabilities.clone_from(&w.capabilities);
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
            attachments: self.accepts_attachments(),
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

    fn command(&mut self, fx: &mut Fx, now: Millis, cmd: Command) {
        match cmd {
            Command::SendUserMessage {
                id,
                text,
                attachments,
            } => {
                if !attachments.is_empty() && !self.accepts_attachments() {
                    fx.ui(UiEvent::Error {
                        message: "the assistant does not take files or images; nothing was sent"
                            .into(),
                    });
                    return;
                }
                let queued = !self.can_send(now);
                fx.ui(UiEvent::UserMessage {
                    id: id.clone(),
                    text: text.clone(),
                    queued,
                    attachments: attachments.iter().map(attachment_info).collect(),
                });
                // The files go first, so the assistant has them when it reads the words.
                for a in attachments {
                    self.send(fx, now, Message::Attachment(a));
                }
                let message = UserMessage { id, text };
                if queued {
                    self.record_user_message(fx, now, &message);
                }
                self.send(fx, now, Message::UserMessage(message));
            }
            Command::CancelTool { id } => {
                let running = self
                    .calls
                    .get(&id)
                    .is_some_and(|c| c.execution != Execution::Server && c.open_here());
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
            Command::SwitchConversation {
                conversation_id,
                history,
            } => {
                self.end_grants();
                if let Some(old) = self.conversation.take() {
                    fx.record(Record::EndConversation {
                        id: old.as_str().into(),
                        at: now,
                    });
                }
                self.wanted = conversation_id;
                self.earlier = history;
                if self.in_agents_mode() && self.phase == Phase::Welcomed {
                    // LiveKit's conventions have no hello: Outpost opens the conversation.
                    self.open_agents_conversation(fx, now, "the user switched conversations");
                    return;
                }
                self.phase = Phase::NeedHello;
                self.maybe_hello(fx, now);
            }
            Command::Leave => {
                self.end(fx, now, "left the room".into(), true);
                fx.0.push(Effect::Leave {
                    reason: "left the room".into(),
                });
            }
        }
    }
}

/// What the UI shows of an attachment.
fn attachment_info(a: &outpost_protocol::Attachment) -> crate::events::AttachmentInfo {
    crate::events::AttachmentInfo {
        id: a.id.clone(),
        name: a.name.clone(),
        mime_type: a.mime_type.clone(),
        size: a.size,
        sha256: a.sha256.clone(),
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
