//! The machine's inputs and effects: what happened, and what the caller must do.

use std::collections::BTreeMap;

use outpost_policy::{Decider, Decision, ServerClaims};
use outpost_protocol::{
    Attachment, HistoryMessage, Message, ToolDescriptor, ToolUseCancel, ToolUseProgress,
    ToolUseRequest, ToolUseResult,
};
use outpost_store as store;
use outpost_store::{ConversationId, Millis};
use serde::{Deserialize, Serialize};

use crate::events::UiEvent;

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
    /// In LiveKit Agents mode, how long chat waits for the agent to say it is up
    /// (`lk.agent.state` past "initializing": its session reads `lk.chat` only from then
    /// on, and drops what came before) before it is sent anyway.
    pub agent_ready_wait_ms: i64,
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
            agent_ready_wait_ms: 15_000,
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
        /// Files to give it first (their `messageId` is `id`); refused with an error, and
        /// nothing sent, when the assistant does not take them.
        attachments: Vec<Attachment>,
    },
    /// Stop a tool call running on this machine.
    CancelTool {
        /// The call.
        id: String,
    },
    /// Start a new conversation (`None`) or continue another one: sends a new hello (in
    /// LiveKit Agents mode, opens it at once).
    SwitchConversation {
        /// The conversation to continue.
        conversation_id: Option<String>,
        /// What was said in it so far, oldest first (from the history): the next hello
        /// carries it, for an assistant that no longer holds the conversation. Empty for
        /// a new conversation.
        history: Vec<HistoryMessage>,
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
        /// The text that arrived since the stream's last input (appended to what the
        /// segment says).
        text: String,
        /// The stream's first input: the segment starts over (an agent that refines a
        /// segment sends it again with the same id; the later text replaces it).
        first: bool,
        /// The stream ended: the segment says what it has now.
        is_final: bool,
        /// The segment transcribes the user's own microphone track (its
        /// `lk.transcribed_track_id` is one of ours): the user's speech, not the
        /// assistant's.
        user_speech: bool,
    },
    /// An RPC call to one of Outpost's methods.
    Rpc(RpcCall),
    /// The room refused an RPC call because its caller is not the assistant (the
    /// caller was answered there, before its payload was read).
    RpcRefused {
        /// Who called.
        caller: String,
        /// The method it called.
        method: String,
    },
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
    /// A file the user gave the assistant.
    Attachment(store::NewAttachment),
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
    /// LiveKit Agents mode: send a file as a byte stream (images on `images`, LiveKit's
    /// convention; other files on `files`).
    SendBytes(ByteStream),
    /// LiveKit Agents mode: answer an `outpost.conversation` call with the stored
    /// messages of this conversation (the caller reads the store).
    ReadConversation {
        /// The call.
        request_id: String,
        /// The conversation to read.
        conversation_id: String,
    },
    /// Answer an RPC call.
    RpcReply {
        /// The call.
        request_id: String,
        /// The payload, or the error.
        reply: Result<String, RpcFailure>,
    },
}

/// A file for the agent, as one LiveKit byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteStream {
    /// Destination identity.
    pub to: String,
    /// The topic.
    pub topic: String,
    /// The stream's name (the file name).
    pub name: String,
    /// Its MIME type.
    pub mime_type: String,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Header attributes.
    pub attributes: Vec<(String, String)>,
}

/// An RPC call from a participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcCall {
    /// LiveKit's request id (also the tool call's id).
    pub request_id: String,
    /// Who called.
    pub caller: String,
    /// The method: a tool name, [`LIST_TOOLS`](super::LIST_TOOLS),
    /// [`READ_RESULT`](super::READ_RESULT) or [`CONVERSATION`](super::CONVERSATION).
    pub method: String,
    /// The payload (JSON for Outpost's methods).
    pub payload: String,
    /// How long the caller waits for the answer, from now.
    pub response_timeout_ms: u64,
}

/// An RPC error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcFailure {
    /// LiveKit's error code.
    pub code: u32,
    /// Text for people.
    pub message: String,
    /// JSON: `{"code": <seed error code>, "message": ..., "result": <partial result>}`.
    pub data: Option<String>,
}
