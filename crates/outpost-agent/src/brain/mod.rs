//! Brains: whatever decides what the assistant says and which tools it calls.
//!
//! Every brain takes the conversation and the tool catalogue, streams text pieces into a
//! channel as they come, and returns the whole [`ModelTurn`]. The session runs the tools
//! and calls the brain again with the results, until a turn has no tool calls.
//!
//! - [`openai::OpenAiBrain`]: OpenAI-compatible chat completions with native tools and
//!   SSE streaming (OpenAI, Ollama, llama.cpp server, vLLM).
//! - [`anthropic::AnthropicBrain`]: the Anthropic messages API with SSE streaming.
//! - [`json::JsonBrain`]: strict-JSON tool requests (seed 004) for models without native
//!   tool calling, over an OpenAI-compatible endpoint.
//! - [`scripted::ScriptedBrain`]: the offline demo and test brain; not a model.

use async_trait::async_trait;
use tokio::sync::mpsc;

use outpost_llm::{ChatMessage, ModelTurn, ToolCall};
use outpost_protocol::ToolDescriptor;

use crate::error::Result;

pub mod anthropic;
mod http;
pub mod json;
pub mod openai;
pub mod scripted;

/// Where a brain sends text pieces as they are produced.
pub type Deltas = mpsc::UnboundedSender<String>;

/// What a brain is asked.
#[derive(Debug, Clone, Copy)]
pub struct BrainRequest<'a> {
    /// The conversation so far, starting with the system prompt.
    pub history: &'a [ChatMessage],
    /// The tools it may call.
    pub tools: &'a [ToolDescriptor],
}

/// A source of assistant turns.
#[async_trait]
pub trait Brain: Send + Sync + std::fmt::Debug {
    /// What the app calls the assistant (ServerWelcome `assistantName`).
    fn assistant_name(&self) -> String;

    /// Produces the next turn, streaming its text into `deltas`.
    async fn respond(&self, request: BrainRequest<'_>, deltas: &Deltas) -> Result<ModelTurn>;

    /// A timeout for this call other than the tool's usual one, if the brain wants one.
    fn timeout_hint(&self, _call: &ToolCall) -> Option<u32> {
        None
    }
}
