//! Typed events for the UI: everything a front end (the Tauri app, `outpost connect`)
//! shows. Serialized as `{"type": "...", "data": {...}}` with camelCase fields, so the
//! web UI can switch on `type`.

use outpost_policy::{Decision, ServerClaims, WithdrawReason};
use outpost_protocol::{AssistantState, Execution, ProgressState, ToolErrorCode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which side of the protocol did something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Outpost, on this machine.
    Client,
    /// The assistant.
    Server,
}

/// The link to the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkState {
    /// Joined the room.
    Connected,
    /// Lost the link; LiveKit is resuming or rejoining.
    Reconnecting,
    /// Back after a loss.
    Reconnected,
    /// Gone for good.
    Disconnected,
}

/// What the assistant speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum AssistantMode {
    /// The Outpost protocol (docs/PROTOCOL.md): hello, welcome, ToolUseRequest.
    Outpost,
    /// LiveKit Agents' conventions (docs/AGENTS.md): `lk.chat`, `lk.transcription`,
    /// `lk.agent.state`, tools over RPC.
    LivekitAgents,
}

impl AssistantMode {
    /// How the mode is named to people.
    pub fn label(self) -> &'static str {
        match self {
            Self::Outpost => "Outpost protocol",
            Self::LivekitAgents => "LiveKit Agents",
        }
    }
}

/// Whether a protocol error was received from the assistant or sent to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorDirection {
    /// The assistant reported a fault (ErrorMessage received).
    Received,
    /// Outpost rejected something the assistant sent (ErrorMessage sent).
    Sent,
}

/// Where a tool call stands. The machine decides it ([`crate::Machine`]) and every tool-call
/// event carries it; the app, the CLI and the UI show it as given and never work it out
/// again from a result's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ToolCallStatus {
    /// Arrived; nothing decided yet.
    Initiated,
    /// Waiting for the user's answer.
    AwaitingConsent,
    /// Running.
    Running,
    /// Succeeded.
    Completed,
    /// Failed while running, or was refused for a reason other than permission.
    Error,
    /// Ran out of time.
    Timeout,
    /// Refused by the policy or the user.
    Denied,
    /// Cancelled.
    Cancelled,
}

impl ToolCallStatus {
    /// The status a result leads to: the one place a failure's code becomes a status (the
    /// machine decides with it; the store keeps what it decided).
    pub fn of_result(success: bool, code: Option<&ToolErrorCode>) -> Self {
        if success {
            return Self::Completed;
        }
        match code {
            Some(ToolErrorCode::Timeout) => Self::Timeout,
            Some(ToolErrorCode::PermissionDenied) => Self::Denied,
            Some(ToolErrorCode::Cancelled) => Self::Cancelled,
            _ => Self::Error,
        }
    }

    /// Whether the call has ended.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            Self::Initiated | Self::AwaitingConsent | Self::Running
        )
    }
}

/// The store's spelling of a status: the same closed set, word for word, so a stored call
/// reads back as the machine left it.
impl From<ToolCallStatus> for crate::store::CallStatus {
    fn from(s: ToolCallStatus) -> Self {
        match s {
            ToolCallStatus::Initiated => Self::Initiated,
            ToolCallStatus::AwaitingConsent => Self::AwaitingConsent,
            ToolCallStatus::Running => Self::Running,
            ToolCallStatus::Completed => Self::Completed,
            ToolCallStatus::Error => Self::Error,
            ToolCallStatus::Timeout => Self::Timeout,
            ToolCallStatus::Denied => Self::Denied,
            ToolCallStatus::Cancelled => Self::Cancelled,
        }
    }
}

impl From<crate::store::CallStatus> for ToolCallStatus {
    fn from(s: crate::store::CallStatus) -> Self {
        use crate::store::CallStatus as S;
        match s {
            S::Initiated => Self::Initiated,
            S::AwaitingConsent => Self::AwaitingConsent,
            S::Running => Self::Running,
            S::Completed => Self::Completed,
            S::Error => Self::Error,
            S::Timeout => Self::Timeout,
            S::Denied => Self::Denied,
            S::Cancelled => Self::Cancelled,
        }
    }
}

/// A consent question for the user, with everything needed to decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsentPrompt {
    /// Answer with this id ([`crate::Session::answer_consent`]).
    pub consent_id: String,
    /// The tool call concerned.
    pub request_id: String,
    /// The tool.
    pub tool: String,
    /// The MCP server that provides the tool; absent for a built-in tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// What the tool does, as its catalogue entry says.
    #[serde(default)]
    pub description: String,
    /// For an MCP tool: the server's claims about it (MCP annotations). Claims, shown as
    /// such; they granted nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<ServerClaims>,
    /// The call's parameters exactly as received.
    pub parameters: Map<String, Value>,
    /// One line saying what will happen.
    pub summary: String,
    /// The resolved paths the call touches.
    pub paths: Vec<String>,
    /// The folder a "for this conversation" or "always" answer covers.
    pub folder: Option<String>,
    /// Why the question is asked.
    pub reason: String,
    /// Whether the tool can change or delete data.
    pub destructive: bool,
    /// The answers to offer.
    pub options: Vec<Decision>,
    /// How long the question stays open.
    pub expires_in_ms: u64,
}

/// A file the user gave the assistant, as the UI shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentInfo {
    /// Attachment id.
    pub id: String,
    /// The file's name.
    pub name: String,
    /// Its media type.
    pub mime_type: String,
    /// Its length in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    content = "data",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum UiEvent {
    /// The link changed state.
    Connection {
        /// The new state.
        state: LinkState,
        /// Why, when known.
        detail: Option<String>,
    },
    /// The network path the link took when it came up (again): `direct (UDP)`, `direct
    /// (TCP)` or `relayed (TURN/TLS)`, say; `relayed` when a TURN server carries it.
    NetworkPath {
        /// For people.
        path: String,
        /// Whether a TURN server relays the traffic.
        relayed: bool,
    },
    /// The assistant joined or left the room.
    AssistantPresence {
        /// In the room now.
        present: bool,
        /// Its identity.
        identity: String,
    },
    /// Outpost found out what the assistant speaks (shown with the session).
    AssistantMode {
        /// The mode.
        mode: AssistantMode,
        /// How Outpost found out.
        detail: String,
    },
    /// The assistant welcomed us: a conversation is active.
    SessionStarted {
        /// The conversation.
        conversation_id: String,
        /// This hello/welcome exchange.
        session_id: String,
        /// What to call the assistant.
        assistant_name: String,
        /// The negotiated version (0 in LiveKit Agents mode).
        protocol_version: u32,
        /// What the assistant speaks.
        mode: AssistantMode,
        /// Whether the assistant takes files and images (LiveKit Agents mode, or an
        /// Outpost-protocol welcome listing `attachments`).
        attachments: bool,
    },
    /// The user said something (shown at once; `queued` until the session is ready).
    UserMessage {
        /// Message id.
        id: String,
        /// Text.
        text: String,
        /// Held until the assistant is present and has welcomed us.
        queued: bool,
        /// The files given with it.
        attachments: Vec<AttachmentInfo>,
    },
    /// What the user said aloud, as the agent transcribed it (`lk.transcription` of the
    /// user's microphone track): interim text is replaced by later text of the same id;
    /// the final text is also in the history as a user message.
    UserTranscript {
        /// The segment id (`lk.segment_id`), also the stored message's id.
        id: String,
        /// The text so far.
        text: String,
        /// Whether the agent finished this segment.
        is_final: bool,
    },
    /// A piece of an assistant message.
    AssistantDelta {
        /// The message it belongs to.
        message_id: String,
        /// Its position.
        seq: u32,
        /// Text to append.
        delta: String,
    },
    /// A complete assistant message (replaces what deltas assembled).
    AssistantMessage {
        /// Message id.
        id: String,
        /// Full text (Markdown).
        text: String,
        /// The user message it answers.
        in_reply_to: Option<String>,
    },
    /// The assistant's state.
    Status {
        /// What it is doing.
        state: AssistantState,
        /// With `using_tool`: the call waited on.
        tool_use_id: Option<String>,
        /// Free text.
        detail: Option<String>,
    },
    /// The assistant asked for a tool call.
    ToolCallRequested {
        /// Call id.
        id: String,
        /// The assistant message behind it.
        message_id: String,
        /// Tool.
        tool_name: String,
        /// The MCP server that provides the tool; absent for a built-in tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_name: Option<String>,
        /// For an MCP tool: what its server claims about it (never a permission).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claims: Option<ServerClaims>,
        /// Who runs it.
        execution: Execution,
        /// Parameters as received.
        parameters: Map<String, Value>,
        /// The timeout that applies.
        timeout_ms: u32,
    },
    /// The tools on offer changed (an MCP server's list did).
    ToolsChanged {
        /// Every tool's name, in catalogue order.
        tools: Vec<String>,
    },
    /// A call is waiting for consent or running.
    ToolCallProgress {
        /// Call id.
        id: String,
        /// Waiting for consent or running, as reported.
        state: ProgressState,
        /// The call's status after the report (a server may report consent after running;
        /// the status stays running then). For a call the machine never saw: the report's.
        status: ToolCallStatus,
        /// Free text.
        detail: Option<String>,
        /// Who reported it.
        by: Side,
    },
    /// Outpost declined an `either` call; the assistant runs it itself.
    ToolCallHandedToServer {
        /// Call id.
        id: String,
        /// Tool.
        tool_name: String,
    },
    /// A call has its result.
    ToolCallFinished {
        /// Call id.
        id: String,
        /// Tool (empty when the call was never seen).
        tool_name: String,
        /// Success.
        success: bool,
        /// The call's final status.
        status: ToolCallStatus,
        /// The result (or partial output).
        result: Option<Map<String, Value>>,
        /// Failure code.
        error_code: Option<ToolErrorCode>,
        /// Failure text.
        error_message: Option<String>,
        /// Who ran it.
        executed_by: Side,
    },
    /// The assistant asked to stop a call.
    ToolCallCancelRequested {
        /// Call id.
        id: String,
        /// Its reason.
        reason: Option<String>,
        /// False when the call was unknown or already finished (the cancel is ignored).
        effective: bool,
    },
    /// Ask the user (only when a consent UI is attached).
    ConsentRequested(ConsentPrompt),
    /// Stop showing a consent question.
    ConsentWithdrawn {
        /// The question.
        consent_id: String,
        /// Why.
        reason: WithdrawReason,
    },
    /// A protocol-level fault, either way.
    ProtocolError {
        /// Received from or sent to the assistant.
        direction: ErrorDirection,
        /// Error code.
        code: String,
        /// Text.
        message: String,
        /// The offending message's id.
        ref_id: Option<String>,
        /// The sender leaves the session.
        fatal: bool,
    },
    /// A local problem (store, sending) the user should know about.
    Error {
        /// What went wrong.
        message: String,
    },
    /// The session is over.
    Ended {
        /// Why.
        reason: String,
        /// Outpost left as asked ([`crate::Session::leave`], or the session was dropped);
        /// false when the link, the server or the assistant ended it.
        asked: bool,
    },
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn events_are_tagged_with_camel_case_fields() {
        let ev = UiEvent::ToolCallHandedToServer {
            id: "t1".into(),
            tool_name: "web_search".into(),
        };
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "tool_call_handed_to_server",
                               "data": {"id": "t1", "toolName": "web_search"}})
        );
        let back: UiEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, ev);
    }
}
