//! The types of ui/CONTRACT.md, as the web UI reads them: camelCase fields, `{type, data}`
//! events, epoch-millisecond times. Their TypeScript is generated from these types
//! ([`typescript`], ts-rs) into `ui/src/lib/generated/contract.ts`, which `backend.ts`
//! re-exports; `tests/contract_ts.rs` fails when that file is stale (rewrite it with
//! `OUTPOST_WRITE_CONTRACT=1 cargo test -p outpost-desktop --test contract_ts`).
//!
//! Closed sets are enums, the same enum from the core (or the protocol, or the policy)
//! to the TypeScript union where one exists: `Decision`, `AssistantMode`, `AssistantState`,
//! `ExecutionMode` (the protocol's `Execution`), `ToolProgressState` (its `ProgressState`),
//! `ToolCallStatus` (the machine's), `WithdrawnReason` (the consent broker's),
//! `FolderAccess`, `AuthMode` (the settings file's).
//! Open sets stay strings: a tool call's `errorCode` (seed 001 allows custom codes) and an
//! `error` event's `code`.

use outpost_enum::closed_enum;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

/// A consent answer: the policy's own enum, spelled `allow_once`, `allow_for_conversation`,
/// `always_allow`, `deny_once`, `always_deny` on the wire.
pub use outpost_core::Decision;

/// What the assistant speaks (`outpost` or `livekit_agents`).
pub use outpost_core::AssistantMode;

/// What the assistant is doing (AssistantStatus `state`, docs/PROTOCOL.md).
pub use outpost_core::AssistantState;

/// Who runs a tool (ToolUseRequest `execution`): the protocol's `Execution`.
pub use outpost_core::Execution as ExecutionMode;

/// Where a tool call stands, as the core's machine decided it: cards copy it.
pub use outpost_core::ToolCallStatus;

/// Why a consent question closed: the consent broker's reason.
pub use outpost_core::WithdrawReason as WithdrawnReason;

/// `ToolProgress` `state`: the protocol's `ProgressState`.
pub use outpost_core::ProgressState as ToolProgressState;

/// `FolderScope` `access`: the policy's own.
pub use outpost_core::FolderAccess;

/// `ConnectionSettings` `authMode`: the settings file's own.
pub use crate::settings::AuthMode;

/// What an MCP server claims about its tool (MCP annotations), camelCase; shown as the
/// server's claims, never a permission.
pub use outpost_core::ServerClaims;

/// Epoch milliseconds.
pub type Millis = i64;

/// A JSON object (an elicitation form's content).
pub type JsonObject = Map<String, Value>;

/// Link state shown in the status bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionStatus {
    /// Not connected.
    Disconnected,
    /// Joining.
    Connecting,
    /// In the room.
    Connected,
    /// Lost the link; trying again.
    Reconnecting,
    /// Gave up or refused.
    Failed,
}

/// `ConnectionEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ConnectionEvent {
    /// The state.
    pub state: ConnectionStatus,
    /// Why, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Reconnect attempt number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// While connected: the network path, `direct (UDP)`, `direct (TCP)`, `relayed
    /// (TURN/TLS)`...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// While connected: whether a TURN server relays the traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relayed: Option<bool>,
}

/// `SessionInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct SessionInfo {
    /// The conversation.
    pub conversation_id: String,
    /// The hello/welcome exchange.
    pub session_id: String,
    /// What to call the assistant.
    pub assistant_name: String,
    /// What the assistant speaks: `outpost` or `livekit_agents`.
    pub mode: AssistantMode,
    /// Whether it takes files and images (a LiveKit agent: byte streams; an Outpost
    /// assistant that announced `attachments`).
    pub attachments: bool,
}

/// `StatusEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct StatusEvent {
    /// What the assistant is doing.
    pub state: AssistantState,
    /// The call waited on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Free text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `ToolCallRecord`: one tool card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ToolCallRecord {
    /// Call id.
    pub id: String,
    /// The assistant message behind it.
    pub message_id: String,
    /// Tool.
    pub tool_name: String,
    /// Who runs it.
    pub execution: ExecutionMode,
    /// Parameters as received.
    pub parameters: Map<String, Value>,
    /// MCP server, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// What the MCP server claims about the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<ServerClaims>,
    /// Effective timeout.
    pub timeout_ms: u32,
    /// Where the call stands (the core's status, copied).
    pub status: ToolCallStatus,
    /// When it arrived.
    pub initiated_at: Millis,
    /// When consent was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaiting_consent_at: Option<Millis>,
    /// When it started running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running_at: Option<Millis>,
    /// When it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Millis>,
    /// Result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Failure code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Failure text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Who ran it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executed_by: Option<ExecutedBy>,
    /// Progress text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Hint: changes nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Hint: may change or delete data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Hint: reaches outside the machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// `TranscriptEntry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TranscriptEntry {
    /// A user message.
    User {
        /// Id.
        id: String,
        /// Text.
        text: String,
        /// When.
        at: Millis,
        /// Said aloud (the agent's transcript of it), still growing or final; absent for
        /// typed messages.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        speech: Option<SpeechText>,
        /// The files given with it (absent when none).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[ts(as = "Option<Vec<AttachmentView>>", optional)]
        attachments: Vec<AttachmentView>,
    },
    /// An assistant message (Markdown).
    Assistant {
        /// Id.
        id: String,
        /// Text.
        text: String,
        /// When.
        at: Millis,
        /// The user message it answers.
        #[serde(rename = "inReplyTo", skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        in_reply_to: Option<String>,
    },
    /// A tool card.
    Tool {
        /// The call.
        call: Box<ToolCallRecord>,
    },
}

/// `ConsentRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ConsentRequest {
    /// Answer with this.
    pub consent_id: String,
    /// The call.
    pub request_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// Tool.
    pub tool: String,
    /// MCP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// The tool's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What the MCP server claims about the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<ServerClaims>,
    /// Execution mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionMode>,
    /// The full parameters.
    pub parameters: Map<String, Value>,
    /// One line.
    pub summary: String,
    /// Resolved paths.
    pub paths: Vec<String>,
    /// What a broader answer covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Why asked.
    pub reason: String,
    /// Answers to offer.
    pub options: Vec<Decision>,
    /// Time left when sent.
    pub expires_in_ms: u64,
    /// Hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// `SessionSnapshot`, the answer of `session_subscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SessionSnapshot {
    /// False until a connection or the demo is set up.
    pub configured: bool,
    /// Link.
    pub connection: ConnectionEvent,
    /// Assistant state.
    pub status: StatusEvent,
    /// The live session.
    pub session: Option<SessionInfo>,
    /// The live conversation so far.
    pub transcript: Vec<TranscriptEntry>,
    /// Open consent questions, oldest first.
    pub pending_consents: Vec<ConsentRequest>,
}

/// One event on the UI channel (`UiEvent` of backend.ts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
#[ts(rename = "UiEvent")]
pub enum AppEvent {
    /// Link state.
    Connection(ConnectionEvent),
    /// After each welcome.
    Session(SessionInfo),
    /// Assistant state.
    Status(StatusEvent),
    /// A user message.
    UserMessage(UserMessage),
    /// A piece of an assistant message.
    AssistantDelta(AssistantDelta),
    /// A whole assistant message.
    AssistantMessage(AssistantMessage),
    /// A tool call arrived.
    ToolInitiated(ToolInitiated),
    /// A call is awaiting consent or running.
    ToolProgress(ToolProgress),
    /// A call ended.
    ToolResult(ToolResult),
    /// Ask the user.
    ConsentRequest(ConsentRequest),
    /// Stop asking.
    ConsentWithdrawn(ConsentWithdrawn),
    /// A fault worth telling.
    Error(ErrorEvent),
    /// An MCP server asks the user to fill in a form.
    Elicitation(ElicitationEvent),
    /// The form is no longer open (answered, timed out, the server gone).
    ElicitationClosed(ElicitationClosed),
    /// What the user said aloud, as the agent transcribed it (replaces earlier text of
    /// the same id).
    UserTranscript(UserTranscript),
    /// Voice changed state (on/off, mode, mute, talking, a device's state).
    Voice(VoiceStatus),
    /// The input and output levels, about ten times a second while voice is on.
    VoiceLevel(VoiceLevel),
    /// The chat now shows a stored conversation the user continues (History → Continue):
    /// its transcript replaces the one on screen.
    Conversation(ConversationOpened),
    /// The files that go with the next message changed (added, removed, sent).
    Attachments(StagedAttachments),
    /// The system-wide shortcut brought the window forward.
    Raised(Raised),
}

/// `conversation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ConversationOpened {
    /// The conversation; the next `session` event with this id keeps the transcript.
    pub conversation_id: String,
    /// Its messages and tool cards so far.
    pub transcript: Vec<TranscriptEntry>,
}

/// Whether a transcript of speech may still change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum SpeechText {
    /// The agent may still revise it.
    Interim,
    /// The agent's final text (also in the history).
    Final,
}

/// `user_transcript`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct UserTranscript {
    /// The segment id (the message id once final).
    pub id: String,
    /// The text so far.
    pub text: String,
    /// Interim or final.
    pub speech: SpeechText,
    /// When the segment began.
    pub at: Millis,
}

/// How the microphone is opened to the assistant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum VoiceMode {
    /// Sent only while the talk key or button is held.
    #[default]
    PushToTalk,
    /// Sent all the time (needs headphones: there is no echo cancellation).
    OpenMic,
}

/// The state of one audio device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum DeviceState {
    /// Not in use (voice is off).
    Off,
    /// Open and working.
    Ready,
    /// Could not be opened, or failed while in use (see `error`).
    Failed,
}

/// One device's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct DeviceStatus {
    /// Off, ready or failed.
    pub state: DeviceState,
    /// The device in use (its id), when open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Why it failed, in words for the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `VoiceStatus`: everything the mic button and its neighbours show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct VoiceStatus {
    /// Voice is on (the devices are open or were tried).
    pub on: bool,
    /// Push-to-talk or open mic.
    pub mode: VoiceMode,
    /// Muted by the user: nothing is sent whatever the mode.
    pub muted: bool,
    /// The talk key or button is held.
    pub talking: bool,
    /// The microphone track is live right now (on, not muted, open mic or held).
    pub transmitting: bool,
    /// The microphone.
    pub input: DeviceStatus,
    /// The speaker or headphones.
    pub output: DeviceStatus,
    /// The "Echo cancellation" setting (saved; on by default).
    pub echo_cancellation: bool,
    /// The speaker's sound is being removed from the microphone right now (the setting
    /// is on and the canceller runs). Off with open mic: headphones are needed.
    pub echo_cancelling: bool,
}

/// `voice_level`: 0.0 (silence) to 1.0 (full scale), on a decibel scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct VoiceLevel {
    /// The microphone's level (shown even while muted, so the user sees it works).
    pub input: f32,
    /// What is playing (the assistant speaking).
    pub output: f32,
}

/// One audio device to choose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AudioDevice {
    /// Its id (saved in the settings).
    pub id: String,
    /// A name to show.
    pub name: String,
    /// The system's default.
    pub is_default: bool,
}

/// `AudioDevices`: what there is and what is chosen (`None` = the system default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct AudioDevices {
    /// Microphones.
    pub inputs: Vec<AudioDevice>,
    /// Speakers and headphones.
    pub outputs: Vec<AudioDevice>,
    /// The chosen microphone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// The chosen output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Why the list is empty or incomplete, when the system said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `voice_control`'s argument: what to change (absent fields stay).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct VoiceControl {
    /// Mute or unmute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub muted: Option<bool>,
    /// Switch the mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<VoiceMode>,
    /// The talk key or button went down (true) or up (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talking: Option<bool>,
    /// Turn echo cancellation on or off (saved in the settings; applies at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo_cancellation: Option<bool>,
}

/// `elicitation`: an MCP server's `elicitation/create` (form mode), shown as a form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ElicitationEvent {
    /// Answer with this (`mcp_elicitation_answer`).
    pub id: String,
    /// The server that asks.
    pub server: String,
    /// What it asks, in its words.
    pub message: String,
    /// The JSON Schema of the answer: an object of primitive properties (empty for a URL
    /// request).
    pub schema: Map<String, Value>,
    /// URL mode: the server asks the user to open this URL (a sign-in, a payment) instead
    /// of filling a form. Shown in full; opened only if the user chooses to (then the
    /// answer is `accept`, with no content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// `elicitation_closed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ElicitationClosed {
    /// The form.
    pub id: String,
}

/// `UserMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct UserMessage {
    /// Id.
    pub id: String,
    /// Text.
    pub text: String,
    /// When.
    pub at: Millis,
    /// The files given with it (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<AttachmentView>>", optional)]
    pub attachments: Vec<AttachmentView>,
}

/// A file given to the assistant (or about to be): exactly what is sent of it, and the
/// image itself where the UI may show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct AttachmentView {
    /// Id.
    pub id: String,
    /// The file's name (no folders).
    pub name: String,
    /// Its media type.
    pub mime_type: String,
    /// Its length in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
    /// An image as a `data:` URL: every staged image; in the transcript and the history
    /// only images up to 256 KiB (their bytes are kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// `attachments`: the files that go with the next message, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct StagedAttachments {
    /// The files.
    pub items: Vec<AttachmentView>,
}

/// `AssistantDelta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct AssistantDelta {
    /// The message.
    pub message_id: String,
    /// Position.
    pub seq: u32,
    /// Text to append.
    pub delta: String,
}

/// `AssistantMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct AssistantMessage {
    /// Id.
    pub id: String,
    /// Markdown.
    pub text: String,
    /// The user message it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// When.
    pub at: Millis,
}

/// `ToolInitiated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ToolInitiated {
    /// Call id.
    pub id: String,
    /// Assistant message.
    pub message_id: String,
    /// Tool.
    pub tool_name: String,
    /// Execution mode.
    pub execution: ExecutionMode,
    /// Parameters.
    pub parameters: Map<String, Value>,
    /// MCP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// What the MCP server claims about the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<ServerClaims>,
    /// Effective timeout.
    pub timeout_ms: u32,
    /// When.
    pub at: Millis,
    /// Hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// `ToolProgress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ToolProgress {
    /// Call id.
    pub id: String,
    /// Waiting for consent or running, as reported.
    pub state: ToolProgressState,
    /// The call's status after the report (the core's).
    pub status: ToolCallStatus,
    /// Free text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When.
    pub at: Millis,
}

/// `ToolResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ToolResult {
    /// Call id.
    pub id: String,
    /// Success.
    pub success: bool,
    /// The call's final status (the core's).
    pub status: ToolCallStatus,
    /// Result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Failure code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Failure text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Who ran it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executed_by: Option<ExecutedBy>,
    /// When.
    pub at: Millis,
}

/// `consent_withdrawn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ConsentWithdrawn {
    /// The question.
    pub consent_id: String,
    /// Why.
    pub reason: WithdrawnReason,
}

/// `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ErrorEvent {
    /// Code.
    pub code: String,
    /// A sentence.
    pub message: String,
    /// The session ended because of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fatal: Option<bool>,
}

/// `Settings['connection']`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ConnectionSettings {
    /// A fixed token or a token endpoint.
    pub auth_mode: AuthMode,
    /// `ws(s)://` URL.
    pub livekit_url: String,
    /// Token endpoint URL.
    pub token_endpoint: String,
    /// Room.
    pub room: String,
    /// This app's identity.
    pub identity: String,
    /// The LiveKit Agents agent to dispatch by name (token endpoint or API key); empty:
    /// agents dispatched automatically.
    #[serde(default)]
    pub agent_name: String,
    /// API key (`apiKey` mode, local development).
    #[serde(default)]
    pub api_key: String,
    /// Read-only: a token is in the keyring.
    #[serde(default)]
    pub has_token: bool,
    /// Read-only: the API key's secret is in the keyring.
    #[serde(default)]
    pub has_api_secret: bool,
}

/// `FolderScope`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct FolderScope {
    /// Absolute or `~/` path.
    pub path: String,
    /// Allowed or denied.
    pub access: FolderAccess,
    /// Tools it applies to; absent = all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// `NotificationSettings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct NotificationSettings {
    /// Master switch.
    pub enabled: bool,
    /// When consent is needed.
    pub on_consent: bool,
    /// When a long task finishes.
    pub on_long_task: bool,
    /// What counts as long.
    pub long_task_secs: u32,
}

/// `Settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct Settings {
    /// Connection.
    pub connection: ConnectionSettings,
    /// Consent timeout.
    pub consent_timeout_secs: u64,
    /// Folder scopes (policy `[[folders]]`).
    pub folders: Vec<FolderScope>,
    /// Notifications.
    pub notifications: NotificationSettings,
    /// 0 = forever.
    pub retention_days: u32,
    /// The policy file was changed outside Outpost to allow more than the user confirmed:
    /// what it would allow (not in force until `settings_trust_policy`). Ignored by
    /// `settings_set`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_unconfirmed: Option<String>,
}

/// `SystemSettings`: how Outpost lives on the desktop (Settings → Desktop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct SystemSettings {
    /// Closing the window keeps the session running in the tray icon (consent questions
    /// then arrive as notifications and in the tray); off: closing the window quits.
    pub keep_in_tray: bool,
    /// Start Outpost at login (an XDG autostart entry; off by default).
    pub start_at_login: bool,
    /// Where that entry is (read-only; empty when there is no home folder).
    pub autostart_file: String,
    /// The system-wide shortcut (Settings → Voice): held with voice on in push-to-talk, the
    /// microphone is live; pressed otherwise, Outpost comes forward with the message box
    /// focused. An accelerator like `Ctrl+Alt+Space`; empty = off.
    pub shortcut: String,
    /// Whether the shortcut works system-wide, in plain words (read-only): bound through
    /// the desktop portal's GlobalShortcuts (Wayland) or an X11 key grab, or why not (no
    /// portal and no X11 display, or held by another program).
    pub shortcut_status: String,
    /// The shortcut is registered and works in every window (read-only).
    pub shortcut_active: bool,
}

/// `raised`: the system-wide shortcut brought Outpost forward; the chat's message box takes
/// the focus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct Raised {
    /// What to focus: `composer`.
    pub focus: String,
}

/// `ConnectionTestResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ConnectionTestResult {
    /// Whether the join worked.
    pub ok: bool,
    /// Plain words.
    pub message: String,
    /// Join time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
}

/// `ToolInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ToolInfo {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// MCP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// What the MCP server claims about the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<ServerClaims>,
    /// JSON Schema.
    pub parameters: Map<String, Value>,
    /// Offered in the hello.
    pub enabled: bool,
    /// The rule.
    pub rule: ToolRule,
    /// Hint.
    pub read_only: bool,
    /// Hint.
    pub destructive: bool,
    /// Hint.
    pub open_world: bool,
}

/// `McpServerInfo`: one server of `mcp.toml` and how it is doing (Settings → Tool servers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct McpServerInfo {
    /// Its name (`mcp__NAME__tool`).
    pub name: String,
    /// How Outpost talks to it.
    pub transport: McpTransport,
    /// The command and its arguments, or the URL.
    pub target: String,
    /// Started at connect.
    pub enabled: bool,
    /// How it is doing.
    pub status: McpServerStatus,
    /// Tools it offers now.
    pub tool_count: u32,
    /// The MCP revision it speaks while it runs (`2026-07-28`, `2025-11-25`...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Why it last failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// A stderr log exists (`mcp_servers_log`).
    pub has_log: bool,
    /// The server's rule in the policy (`[mcp_servers]`): every tool of it runs without
    /// asking, asks (the default), or never runs; a rule for one tool (`[tools]`) wins.
    pub rule: ToolRule,
    /// What a stdio server may touch (its sandbox): as it runs in the live session, else
    /// as it would start now. Absent for an HTTP server (it runs elsewhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<McpSandboxInfo>,
    /// An HTTP server's OAuth sign-in (docs/MCP.md, "Signing in"); absent for stdio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sign_in: Option<McpSignIn>,
}

/// `McpSandboxInfo`: what a stdio server may touch, as Outpost plans its sandbox
/// (docs/MCP.md, "The sandbox").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct McpSandboxInfo {
    /// Sandboxed, not sandboxed, or not started (no sandbox here, no consent yet).
    pub state: McpSandboxState,
    /// One line: what it may read and write, the network (as in the consent dialog).
    pub summary: String,
    /// Why it runs unsandboxed or is not started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The places of its own it may reach (besides the system's programs and libraries,
    /// parts of /etc, /proc, /dev/null and a private temporary folder).
    pub grants: Vec<McpSandboxGrant>,
    /// Whether it may use the network.
    pub network: bool,
    /// Why the network is on or off.
    pub network_why: String,
    /// What was asked for but left out, and why (a secret inside a folder, a folder the
    /// policy denies, a launcher's cache that holds something denied).
    pub left_out: Vec<String>,
    /// What this computer's kernel cannot hold.
    pub limits: Vec<String>,
}

/// `McpSandboxGrant`: one place a sandboxed server may reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct McpSandboxGrant {
    /// The folder (and what is below it) or file.
    pub path: String,
    /// Read, or read and write.
    pub access: McpAccess,
    /// Why it is reachable.
    pub kind: McpGrantKind,
    /// A few words on why.
    pub why: String,
}

/// `McpServerDraft`: a server to add (the settings form, or an import's review step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct McpServerDraft {
    /// Its name.
    pub name: String,
    /// A stdio server's program (empty for an HTTP server).
    #[serde(default)]
    pub command: String,
    /// Its arguments, as they are (no shell).
    #[serde(default)]
    pub args: Vec<String>,
    /// An HTTP server's URL (empty for a stdio server).
    #[serde(default)]
    pub url: String,
    /// Environment variables (stdio) or headers (HTTP) by name. Every value goes to the
    /// system keyring (`mcp.toml` keeps its name and a reference) and comes back empty,
    /// by name only, unless its name is in `plain`.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Names in `env` whose values are not secret: written into `mcp.toml` as they are
    /// and shown in the form.
    #[serde(default)]
    pub plain: Vec<String>,
    /// A stdio server's working directory (empty: the app's).
    #[serde(default)]
    pub cwd: String,
    /// Start it at connect.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A stdio server's sandbox: on (the default), if-available, off.
    #[serde(default = "sandbox_on")]
    pub sandbox: McpSandboxMode,
    /// A stdio server's network: auto (on for launchers such as npx and uvx), on, off.
    #[serde(default = "network_auto")]
    pub network: McpNetwork,
    /// How a stdio server may use the policy's allowed folders.
    #[serde(default = "folders_read_write")]
    pub folders: McpFolderAccess,
    /// More folders (or files) it may read (absolute, or starting with `~/`).
    #[serde(default)]
    pub read: Vec<String>,
    /// More folders (or files) it may read and write.
    #[serde(default)]
    pub write: Vec<String>,
    /// Given back, never read: what the server would touch with these settings
    /// (`mcp_servers_get`, `mcp_servers_import_preview`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<McpSandboxInfo>,
}

fn yes() -> bool {
    true
}

fn sandbox_on() -> McpSandboxMode {
    McpSandboxMode::On
}

fn network_auto() -> McpNetwork {
    McpNetwork::Auto
}

fn folders_read_write() -> McpFolderAccess {
    McpFolderAccess::ReadWrite
}

/// `McpToolInfo`: one tool of a server and its rule (Settings → Tool servers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct McpToolInfo {
    /// The server's name for it (what `tools/call` takes).
    pub name: String,
    /// Its name in Outpost's catalogue (`mcp__SERVER__TOOL`), the key of its rule under
    /// `[tools]` in policy.toml.
    pub outpost_name: String,
    /// Display title, if the server gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the server says it does.
    pub description: String,
    /// What the server claims about it (MCP annotations): shown, never a permission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<ServerClaims>,
    /// Its own rule (`[tools]`); absent when it follows its server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<ToolRule>,
    /// The rule it runs under: `deny` at the tool or its server wins, then its own rule,
    /// then its server's, then ask.
    pub effective: ToolRule,
    /// The server offers it now; false for a rule in policy.toml whose tool the server
    /// does not list (renamed, or gone).
    pub offered: bool,
}

/// `McpServerTools`: a server's tools with their rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct McpServerTools {
    /// The server.
    pub server: String,
    /// Its rule (`[mcp_servers]`), which a tool without its own rule follows.
    pub server_rule: ToolRule,
    /// Its tools: those it offers, then rules for tools it does not offer.
    pub tools: Vec<McpToolInfo>,
    /// Why the list could not be read (the server did not start); the tools are then
    /// only those with a rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// `McpImportPreview`: what an import would add, for the review step; nothing runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct McpImportPreview {
    /// The servers that can be added (`enabled` as the file had it); the user picks.
    pub servers: Vec<McpServerDraft>,
    /// One sentence per entry left out (bad shape, a name already configured, ...).
    pub skipped: Vec<String>,
}

/// `RememberedDecision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct RememberedDecision {
    /// Revoke with this.
    pub id: String,
    /// Tool.
    pub tool: String,
    /// What was remembered.
    pub decision: RememberedKind,
    /// Folder covered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Conversation (for conversation grants).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// When.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Millis>,
}

/// `ConversationSummary`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ConversationSummary {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Assistant.
    pub assistant_name: String,
    /// Start.
    pub started_at: Millis,
    /// Last activity.
    pub updated_at: Millis,
    /// Messages.
    pub message_count: u64,
    /// Tool calls.
    pub tool_call_count: u64,
}

/// `SearchHit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct SearchHit {
    /// A message or a tool call.
    pub kind: SearchHitKind,
    /// Conversation.
    pub conversation_id: String,
    /// Message or call id.
    pub id: String,
    /// When.
    pub at: Millis,
    /// Title of the conversation.
    pub conversation_title: String,
    /// Tool, for calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Marked snippet.
    pub snippet: String,
}

/// `ConversationDetail`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ConversationDetail {
    /// Summary.
    pub summary: ConversationSummary,
    /// Read-only transcript.
    pub transcript: Vec<TranscriptEntry>,
}

/// `ExportResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct ExportResult {
    /// Where.
    pub path: String,
    /// Size.
    pub bytes: u64,
}

/// `AboutInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields)]
pub struct AboutInfo {
    /// The app.
    pub app_version: String,
    /// outpost-core.
    pub core_version: String,
    /// Protocol.
    pub protocol_version: u32,
    /// Data directory.
    pub data_dir: String,
    /// Policy file.
    pub policy_file: String,
}

closed_enum! {
    #[ts]
    /// Who ran a tool call.
    pub enum ExecutedBy {
        /// Outpost.
        Client => "client",
        /// The assistant.
        Server => "server",
    }
}

closed_enum! {
    #[ts]
    /// `McpServerInfo` `transport`.
    pub enum McpTransport {
        /// A child process on stdin/stdout.
        Stdio => "stdio",
        /// Streamable HTTP.
        Http => "http",
    }
}

closed_enum! {
    #[ts]
    /// `McpServerInfo` `signIn`: an HTTP server's OAuth sign-in.
    pub enum McpSignIn {
        /// Tokens are stored (they are used at its start).
        SignedIn => "signed_in",
        /// None stored; the server has not asked for one (it may not use OAuth).
        NotSignedIn => "not_signed_in",
        /// It answered 401 and none is stored: the user must sign in.
        Needed => "needed",
        /// The stored sign-in stopped working (revoked, expired): sign in again.
        Again => "again",
    }
}

closed_enum! {
    #[ts]
    /// `McpServerInfo` `status`.
    pub enum McpServerStatus {
        /// Connected, its tools offered.
        Running => "running",
        /// Being started (at connect, or after `set_enabled`).
        Starting => "starting",
        /// Failed; waiting to restart.
        Crashed => "crashed",
        /// No session, or stopped.
        Stopped => "stopped",
        /// Turned off in `mcp.toml`.
        Disabled => "disabled",
        /// Added or changed in `mcp.toml` outside Outpost: not started until the user
        /// confirms it (`mcp_servers_trust`).
        Unconfirmed => "unconfirmed",
        /// Not started: this computer's kernel cannot sandbox it and the user has not
        /// agreed to run it unsandboxed (`sandbox: if_available`).
        NoSandbox => "no_sandbox",
    }
}

closed_enum! {
    #[ts]
    /// `McpSandboxInfo` `state`.
    pub enum McpSandboxState {
        /// In its sandbox: it reaches only its grants.
        Sandboxed => "sandboxed",
        /// Not sandboxed: it can reach everything the user can.
        Unsandboxed => "unsandboxed",
        /// Not started: no sandbox here and no consent to run without one.
        Refused => "refused",
    }
}

closed_enum! {
    #[ts]
    /// `McpSandboxGrant` `access`.
    pub enum McpAccess {
        /// Read (and run programs from it).
        Read => "read",
        /// Read, write, create, delete.
        ReadWrite => "read_write",
    }
}

closed_enum! {
    #[ts]
    /// `McpSandboxGrant` `kind`.
    pub enum McpGrantKind {
        /// The server's own program, derived from its command.
        Program => "program",
        /// A launcher's cache (npx's `~/.npm`, uvx's `~/.cache/uv`).
        Launcher => "launcher",
        /// Its working folder.
        WorkingFolder => "working_folder",
        /// One of the policy's allowed folders.
        AllowedFolder => "allowed_folder",
        /// `read` or `write` in its settings.
        Extra => "extra",
    }
}

closed_enum! {
    #[ts]
    /// `McpServerDraft` `sandbox`.
    pub enum McpSandboxMode {
        /// Sandboxed; not started where the kernel cannot sandbox.
        On => "on",
        /// Sandboxed where the kernel can; unsandboxed where it cannot (the user agreed).
        IfAvailable => "if_available",
        /// Never sandboxed.
        Off => "off",
    }
}

closed_enum! {
    #[ts]
    /// `McpServerDraft` `network`.
    pub enum McpNetwork {
        /// On for launchers that download packages (npx, uvx...), off otherwise.
        Auto => "auto",
        /// On.
        On => "on",
        /// Off.
        Off => "off",
    }
}

closed_enum! {
    #[ts]
    /// `McpServerDraft` `folders`.
    pub enum McpFolderAccess {
        /// Read and write the allowed folders.
        ReadWrite => "read_write",
        /// Read them only.
        Read => "read",
        /// Not at all.
        None => "none",
    }
}

closed_enum! {
    #[ts]
    /// A tool's rule.
    pub enum ToolRule {
        /// Runs without asking.
        Allow => "allow",
        /// Asks each time.
        Ask => "ask",
        /// Never runs.
        Deny => "deny",
    }
}

closed_enum! {
    #[ts]
    /// A remembered answer.
    pub enum RememberedKind {
        /// Always run.
        AlwaysAllow => "always_allow",
        /// Never run.
        AlwaysDeny => "always_deny",
        /// Run during one conversation.
        AllowForConversation => "allow_for_conversation",
    }
}

closed_enum! {
    #[ts]
    /// How a form from an MCP server is answered (`mcp_elicitation_answer`).
    pub enum ElicitationAction {
        /// Send the form's content.
        Accept => "accept",
        /// Say no.
        Decline => "decline",
        /// Dismiss without an answer.
        Cancel => "cancel",
    }
}

closed_enum! {
    #[ts]
    /// `history_export`'s `format`.
    pub enum ExportFormat {
        /// JSON.
        Json => "json",
        /// Markdown.
        Markdown => "markdown",
    }
}

closed_enum! {
    #[ts]
    /// What a search hit is.
    pub enum SearchHitKind {
        /// A message.
        Message => "message",
        /// A tool call.
        ToolCall => "tool_call",
    }
}

/// The app's commands: src-tauri/commands.txt, the one list (the app's build script makes
/// their permissions and handler from it; the UI gets it through [`typescript`]).
pub fn commands() -> Vec<&'static str> {
    include_str!("../../../src-tauri/commands.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The TypeScript of every contract type, in one module: what
/// `ui/src/lib/generated/contract.ts` must contain.
pub fn typescript() -> String {
    let cfg = ts_rs::Config::new().with_large_int("number");
    let mut out = String::from(
        "// Generated from crates/outpost-desktop/src/contract.rs by ts-rs. Do not edit:\n\
         // OUTPOST_WRITE_CONTRACT=1 cargo test -p outpost-desktop --test contract_ts\n",
    );
    macro_rules! decl {
        ($($t:ty),+ $(,)?) => {
            $(
                out.push('\n');
                out.push_str("export ");
                out.push_str(&<$t as TS>::decl(&cfg));
                out.push('\n');
            )+
        };
    }
    decl!(
        Value,
        Decision,
        AssistantMode,
        ServerClaims,
        AssistantState,
        ExecutionMode,
        ExecutedBy,
        ToolCallStatus,
        ToolProgressState,
        WithdrawnReason,
        AuthMode,
        FolderAccess,
        ToolRule,
        RememberedKind,
        SearchHitKind,
        ExportFormat,
        ConnectionStatus,
        ConnectionEvent,
        SessionInfo,
        StatusEvent,
        ToolCallRecord,
        TranscriptEntry,
        ConsentRequest,
        SessionSnapshot,
        AppEvent,
        UserMessage,
        AttachmentView,
        StagedAttachments,
        AssistantDelta,
        AssistantMessage,
        ToolInitiated,
        ToolProgress,
        ToolResult,
        ConsentWithdrawn,
        ErrorEvent,
        ElicitationEvent,
        ElicitationClosed,
        ElicitationAction,
        SpeechText,
        UserTranscript,
        VoiceMode,
        DeviceState,
        DeviceStatus,
        VoiceStatus,
        VoiceLevel,
        AudioDevice,
        AudioDevices,
        VoiceControl,
        ConnectionSettings,
        FolderScope,
        NotificationSettings,
        Settings,
        ConnectionTestResult,
        SystemSettings,
        Raised,
        ToolInfo,
        McpTransport,
        McpSignIn,
        McpServerStatus,
        McpSandboxState,
        McpAccess,
        McpGrantKind,
        McpSandboxMode,
        McpNetwork,
        McpFolderAccess,
        McpSandboxGrant,
        McpSandboxInfo,
        McpServerInfo,
        McpServerDraft,
        McpToolInfo,
        McpServerTools,
        McpImportPreview,
        RememberedDecision,
        ConversationSummary,
        SearchHit,
        ConversationDetail,
        ConversationOpened,
        ExportResult,
        AboutInfo,
    );
    out.push_str(
        "\n/** Every app command (src-tauri/commands.txt, the one list), in order. */\n\
         export const COMMAND_NAMES = [\n",
    );
    for name in commands() {
        out.push_str(&format!("  '{name}',\n"));
    }
    out.push_str("] as const;\n\n/** An app command's name. */\nexport type AppCommand = (typeof COMMAND_NAMES)[number];\n");
    out
}
