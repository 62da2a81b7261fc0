//! Strict-JSON mode for models without native tool calling (seed 004). The model is told
//! the format in the system prompt and must answer either in plain text or with exactly
//! `{"tool_request": {"name": …, "arguments": {…}}}` as its whole message. Results go back
//! as `{"tool_result": …}` user messages, but only for the request that is pending:
//! orphan results are left out of the prompt.
//!
//! A message that tries to be a request but breaks the rules (text around it, a Markdown
//! fence, partial or invalid JSON) is not executed: the model is told exactly what was
//! wrong and asked again, up to [`RETRIES`] times.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde_json::Value;

use outpost_llm::strict::{self, Output, ToolRequest, ToolRequestTracker};
use outpost_llm::{ChatMessage, ModelTurn, ToolCall, openai};

use super::openai::{ChatCompletions, Live, OpenAiConfig};
use super::{Brain, BrainRequest, Deltas};
use crate::error::Result;

/// How often a rejected tool request is sent back for correction.
pub const RETRIES: usize = 2;

/// The strict-JSON brain.
#[derive(Debug)]
pub struct JsonBrain {
    api: ChatCompletions,
    next_id: AtomicU64,
}

impl JsonBrain {
    /// A brain over the OpenAI-compatible endpoint `config` (sent without `tools`).
    pub fn new(config: OpenAiConfig) -> Self {
        Self {
            api: ChatCompletions::new(config),
            next_id: AtomicU64::new(1),
        }
    }
}

/// The plain-model conversation for `request`: instructions first, tool calls as their
/// JSON text, results as `tool_result` user messages while their request is pending.
pub fn prompt(request: BrainRequest<'_>) -> Vec<ChatMessage> {
    let mut system = String::new();
    let mut out = Vec::new();
    let mut tracker = ToolRequestTracker::new();
    for m in request.history {
        match m {
            ChatMessage::System { text } => {
                system.push_str(text);
                system.push_str("\n\n");
            }
            ChatMessage::User { .. } => out.push(m.clone()),
            ChatMessage::Assistant { text, tool_calls } => match tool_calls.first() {
                // One request at a time: the format has no way to ask for two.
                Some(call) => {
                    tracker.request(&call.id, &call.name);
                    let req = ToolRequest {
                        name: call.name.clone(),
                        arguments: call.arguments_map().unwrap_or_default(),
                    };
                    out.push(ChatMessage::assistant(req.to_json_text()));
                }
                None => out.push(ChatMessage::assistant(text.clone())),
            },
            ChatMessage::Tool { result } => {
                if let Some(p) = tracker.accept_result(&result.tool_call_id) {
                    out.push(ChatMessage::user(strict::tool_result_message(
                        &p.name,
                        result.success,
                        &result.text(),
                    )));
                }
            }
        }
    }
    system.push_str(&strict::instructions(request.tools));
    out.insert(0, ChatMessage::system(system));
    out
}

#[async_trait]
impl Brain for JsonBrain {
    fn assistant_name(&self) -> String {
        format!("Outpost assistant ({}, JSON tools)", self.api.model())
    }

    async fn respond(&self, request: BrainRequest<'_>, deltas: &Deltas) -> Result<ModelTurn> {
        let mut messages = prompt(request);
        let mut last_error = None;
        for _ in 0..=RETRIES {
            let turn = self
                .api
                .complete(
                    openai::messages(&messages),
                    Vec::new(),
                    Live::UnlessJson(deltas),
                )
                .await?;
            match strict::classify(&turn.text) {
                Output::Text(text) => {
                    return Ok(ModelTurn {
                        text,
                        ..ModelTurn::default()
                    });
                }
                Output::ToolRequest(req) => {
                    let n = self.next_id.fetch_add(1, Ordering::Relaxed);
                    return Ok(ModelTurn {
                        text: String::new(),
                        tool_calls: vec![ToolCall::from_value(
                            format!("json_{n}"),
                            req.name,
                            &Value::Object(req.arguments),
                        )],
                        stop_reason: turn.stop_reason,
                    });
                }
                Output::Rejected(e) => {
                    tracing::warn!(error = %e, "model sent an invalid tool request");
                    messages.push(ChatMessage::assistant(turn.text));
                    messages.push(ChatMessage::user(format!(
                        "Your last message was rejected: {e}. Answer again, either in plain \
                         text or with exactly one tool_request JSON object as the whole message."
                    )));
                    last_error = Some(e);
                }
            }
        }
        let text = match last_error {
            Some(e) => format!("(The model kept sending invalid tool requests: {e})"),
            None => "(The model gave no answer.)".to_owned(),
        };
        let _ = deltas.send(text.clone());
        Ok(ModelTurn {
            text,
            ..ModelTurn::default()
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use outpost_llm::ToolResult;

    #[test]
    fn prompt_keeps_only_results_of_pending_requests() {
        let call = ToolCall::new("c1", "clock", "{}");
        let history = vec![
            ChatMessage::system("You are helpful."),
            ChatMessage::user("time?"),
            // An orphan: no request is pending yet.
            ChatMessage::tool(ToolResult::success("c0", "clock", "stale")),
            ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![call],
            },
            ChatMessage::tool(ToolResult::success("c1", "clock", "12:00")),
            // A second result for the same request: also an orphan.
            ChatMessage::tool(ToolResult::success("c1", "clock", "13:00")),
        ];
        let p = prompt(BrainRequest {
            history: &history,
            tools: &[],
        });
        assert_eq!(p.len(), 4, "{p:#?}");
        let ChatMessage::System { text } = &p[0] else {
            panic!("no system prompt")
        };
        assert!(text.starts_with("You are helpful.\n\n"));
        assert!(text.contains("tool_request"));
        assert_eq!(
            p[2],
            ChatMessage::assistant(r#"{"tool_request":{"name":"clock","arguments":{}}}"#)
        );
        assert_eq!(
            p[3],
            ChatMessage::user(
                r#"{"tool_result":{"name":"clock","success":true,"content":"12:00"}}"#
            )
        );
    }
}
