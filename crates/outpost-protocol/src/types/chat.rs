//! Chat messages: what the user says, what the assistant says (whole or streamed), and the
//! assistant's state.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::validate::{self, Validate};
use outpost_enum::closed_enum;

/// Type 4: something the user said. Client → server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// NanoID of this message.
    pub id: String,
    /// The text, as typed (or transcribed).
    pub text: String,
}

impl Validate for UserMessage {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        validate::id("id", &self.id)
    }
}

/// Type 5: a complete assistant message. Server → client.
///
/// When deltas (type 8) were streamed for the same `id`, this message ends the stream and its
/// `text` is authoritative: receivers replace what they assembled from deltas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// NanoID of this message; ToolUseRequest.messageId refers to it.
    pub id: String,
    /// The full text.
    pub text: String,
    /// The user message this answers, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
}

impl Validate for AssistantMessage {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        validate::id("id", &self.id)?;
        if let Some(r) = &self.in_reply_to {
            validate::id("inReplyTo", r)?;
        }
        Ok(())
    }
}

/// Type 8: a piece of an assistant message still being generated. Server → client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantDelta {
    /// The id the final AssistantMessage will carry.
    pub message_id: String,
    /// 0 for the first delta of a message, then +1 each; lets a receiver spot gaps.
    pub seq: u32,
    /// Text to append.
    pub delta: String,
}

impl Validate for AssistantDelta {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        validate::id("messageId", &self.message_id)
    }
}

closed_enum! {
    #[ts_if_feature]
    /// What the assistant is doing, for the UI's state indicator.
    pub enum AssistantState {
        /// Waiting for the user.
        Idle => "idle",
        /// Taking in the user's input (voice assistants).
        Listening => "listening",
        /// Generating an answer.
        Thinking => "thinking",
        /// Delivering an answer.
        Speaking => "speaking",
        /// Waiting on a tool call.
        UsingTool => "using_tool",
    }
}

/// Type 9: the assistant's state changed. Server → client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantStatus {
    /// The new state.
    pub state: AssistantState,
    /// With `using_tool`: the ToolUseRequest id being waited on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Free text for the UI, e.g. "Searching your notes".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Validate for AssistantStatus {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        if let Some(id) = &self.tool_use_id {
            validate::id("toolUseId", id)?;
        }
        Ok(())
    }
}
