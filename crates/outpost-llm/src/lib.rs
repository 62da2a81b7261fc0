//! `outpost-llm`: the language-model side of tool calling, independent of any transport.
//!
//! An assistant asks its model for an answer; the model may call tools; the results go
//! back to the model. This crate holds the types and formats for that loop (seeds 002
//! and 004); `outpost-agent` does the HTTP and the protocol.
//!
//! Layout:
//! - [`call`]: [`ToolCall`] with typed argument getters, [`ToolResult`], conversion to
//!   and from the protocol's ToolUseResult.
//! - [`context`]: [`ToolExecutionContext`] (timeout, approval), [`TimedExecution`],
//!   [`ToolBatch`] (one turn's calls, run concurrently, results in call order).
//! - [`chat`]: the provider-neutral conversation ([`ChatMessage`]) and [`ModelTurn`].
//! - [`openai`] / [`anthropic`]: each provider's tool definitions, messages, responses
//!   and streamed chunks.
//! - [`accumulator`]: [`StreamEvent`]s, [`ToolCallAccumulator`], [`TurnAccumulator`].
//! - [`strict`]: the `{"tool_request": …}` format for models without native tools.
//! - `error`: [`ToolCallError`] (seed 002), [`ToolRequestError`] (seed 004), [`Error`].

pub mod accumulator;
pub mod anthropic;
pub mod call;
pub mod chat;
pub mod context;
mod error;
pub mod openai;
pub mod strict;

pub use accumulator::{StreamEvent, ToolCallAccumulator, ToolCallDelta, TurnAccumulator};
pub use call::{ToolCall, ToolResult, ToolResultContent};
pub use chat::{ChatMessage, ModelTurn};
pub use context::{TimedExecution, ToolBatch, ToolExecutionContext};
pub use error::{Error, Result, ToolCallError, ToolRequestError};

/// What the unit tests share.
#[cfg(test)]
mod test_support {
    use outpost_protocol::{Map, ToolDescriptor};
    use serde_json::Value;

    /// A read-only built-in tool taking the parameters `schema` describes (the members of
    /// a JSON object; anything else is no members).
    pub(crate) fn read_only_tool(name: &str, description: &str, schema: Value) -> ToolDescriptor {
        let parameters = match schema {
            Value::Object(members) => members,
            _ => Map::new(),
        };
        ToolDescriptor {
            read_only: true,
            ..ToolDescriptor::new(name, description, parameters)
        }
    }
}
