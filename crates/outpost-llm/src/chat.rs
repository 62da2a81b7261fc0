//! A provider-neutral conversation: what the providers' message lists are built from.

use serde::{Deserialize, Serialize};

use crate::call::{ToolCall, ToolResult};

/// One message of a conversation with a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    /// Instructions for the model.
    System {
        /// The instructions.
        text: String,
    },
    /// Something the user said.
    User {
        /// The text.
        text: String,
    },
    /// The model's answer: text, tool calls, or both.
    Assistant {
        /// The text (may be empty when the model only called tools).
        text: String,
        /// The tool calls, in the model's order.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The result.
        result: ToolResult,
    },
}

impl ChatMessage {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::System { text: text.into() }
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::User { text: text.into() }
    }

    /// An assistant message with text only.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::Assistant {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }

    /// A tool result message.
    pub fn tool(result: ToolResult) -> Self {
        Self::Tool { result }
    }
}

impl ToolResult {
    /// This result as a conversation message.
    pub fn to_message(&self) -> ChatMessage {
        ChatMessage::tool(self.clone())
    }
}

/// What a model produced in one response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelTurn {
    /// The text.
    pub text: String,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// The provider's stop reason (`stop`, `tool_calls`, `end_turn`, `tool_use`, …).
    pub stop_reason: Option<String>,
}
