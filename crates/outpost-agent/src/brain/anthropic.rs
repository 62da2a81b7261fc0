//! The Anthropic messages API (`POST {base}/v1/messages`) with tools, streamed as
//! server-sent events or read whole.

use async_trait::async_trait;
use serde_json::{Value, json};

use outpost_llm::{ModelTurn, StreamEvent, TurnAccumulator, anthropic};

use super::{Brain, BrainRequest, Deltas, http};
use crate::error::Result;

/// The API version header the request format follows.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Settings of the Anthropic endpoint.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// Base URL without the version path, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// `x-api-key`.
    pub api_key: String,
    /// `max_tokens` of each response.
    pub max_tokens: u32,
    /// Stream with SSE (default) or read one JSON answer.
    pub stream: bool,
}

/// The Anthropic brain.
#[derive(Debug, Clone)]
pub struct AnthropicBrain {
    client: reqwest::Client,
    config: AnthropicConfig,
}

impl AnthropicBrain {
    /// A brain for `config`.
    pub fn new(config: AnthropicConfig) -> Self {
        Self {
            client: reqwest::Client::new(),
            config,
        }
    }

    /// The exact request body for a request.
    pub fn body(&self, request: BrainRequest<'_>) -> Result<Value> {
        let (system, messages) = anthropic::messages(request.history)?;
        let mut body = json!({
            "model": self.config.model,
            "max_tokens": self.config.max_tokens,
            "messages": messages,
            "stream": self.config.stream,
        });
        if let Some(s) = system {
            body["system"] = Value::String(s);
        }
        if !request.tools.is_empty() {
            body["tools"] = Value::Array(anthropic::tool_definitions(request.tools));
        }
        Ok(body)
    }
}

#[async_trait]
impl Brain for AnthropicBrain {
    fn assistant_name(&self) -> String {
        format!("Outpost assistant ({})", self.config.model)
    }

    async fn respond(&self, request: BrainRequest<'_>, deltas: &Deltas) -> Result<ModelTurn> {
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let body = self.body(request)?;
        let headers = [
            ("x-api-key", self.config.api_key.clone()),
            ("anthropic-version", ANTHROPIC_VERSION.to_owned()),
        ];
        let resp = http::post(&self.client, &url, &headers, &body).await?;
        if !self.config.stream {
            let turn = anthropic::parse_response(&http::json(&url, resp).await?)?;
            if !turn.text.is_empty() {
                let _ = deltas.send(turn.text.clone());
            }
            return Ok(turn);
        }
        let mut parser = anthropic::StreamParser::new();
        let mut acc = TurnAccumulator::new();
        http::events(&url, resp, |_, data| {
            for ev in parser.parse_data(data, &mut acc)? {
                let done = ev == StreamEvent::Done;
                if let Some(text) = acc.apply(ev)? {
                    let _ = deltas.send(text);
                }
                if done {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .await?;
        Ok(acc.finish()?)
    }
}
