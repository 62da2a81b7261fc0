//! OpenAI-compatible chat completions (`POST {base}/chat/completions`) with native tools,
//! streamed as server-sent events or read whole. Works with OpenAI, Ollama
//! (`http://127.0.0.1:11434/v1`), llama.cpp's server and vLLM.

use async_trait::async_trait;
use serde_json::{Value, json};

use outpost_llm::{ModelTurn, StreamEvent, TurnAccumulator, openai};

use super::{Brain, BrainRequest, Deltas, http};
use crate::error::Result;

/// Settings of an OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL including the version path, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Bearer token; `None` for local servers that need none.
    pub api_key: Option<String>,
    /// Stream with SSE (default) or read one JSON answer.
    pub stream: bool,
}

/// A chat-completions client, shared by [`OpenAiBrain`] and the strict-JSON brain.
#[derive(Debug, Clone)]
pub struct ChatCompletions {
    client: reqwest::Client,
    config: OpenAiConfig,
}

/// How streamed text reaches the caller.
pub(crate) enum Live<'a> {
    /// Every piece as it comes.
    All(&'a Deltas),
    /// Held back while it may still be a JSON tool request (strict-JSON mode).
    UnlessJson(&'a Deltas),
}

impl ChatCompletions {
    /// A client for `config`.
    pub fn new(config: OpenAiConfig) -> Self {
        Self {
            client: reqwest::Client::new(),
            config,
        }
    }

    /// The model name.
    pub fn model(&self) -> &str {
        &self.config.model
    }

    fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        )
    }

    /// The exact request body for `messages` and `tools`.
    pub fn body(&self, messages: Vec<Value>, tools: Vec<Value>) -> Value {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "stream": self.config.stream,
        });
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        body
    }

    pub(crate) async fn complete(
        &self,
        messages: Vec<Value>,
        tools: Vec<Value>,
        live: Live<'_>,
    ) -> Result<ModelTurn> {
        let url = self.url();
        let body = self.body(messages, tools);
        let headers: Vec<(&str, String)> = self
            .config
            .api_key
            .iter()
            .map(|k| ("authorization", format!("Bearer {k}")))
            .collect();
        let resp = http::post(&self.client, &url, &headers, &body).await?;
        if !self.config.stream {
            let turn = openai::parse_response(&http::json(&url, resp).await?)?;
            let tx = match live {
                Live::All(tx) | Live::UnlessJson(tx) => tx,
            };
            let hold = matches!(live, Live::UnlessJson(_)) && looks_like_json(&turn.text);
            if !turn.text.is_empty() && !hold {
                let _ = tx.send(turn.text.clone());
            }
            return Ok(turn);
        }
        let mut acc = TurnAccumulator::new();
        let mut held = String::new();
        let mut holding: Option<bool> = None;
        http::events(&url, resp, |_, data| {
            for ev in openai::parse_stream_data(data)? {
                let done = ev == StreamEvent::Done;
                if let Some(text) = acc.apply(ev)? {
                    match live {
                        Live::All(tx) => {
                            let _ = tx.send(text);
                        }
                        Live::UnlessJson(tx) => {
                            held.push_str(&text);
                            if holding.is_none() && !held.trim_start().is_empty() {
                                holding = Some(looks_like_json(&held));
                                if holding == Some(false) {
                                    let _ = tx.send(std::mem::take(&mut held));
                                }
                            } else if holding == Some(false) {
                                let _ = tx.send(std::mem::take(&mut held));
                            }
                        }
                    }
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

/// Whether text starts like a JSON object or a fenced block (strict-JSON mode holds it).
pub(crate) fn looks_like_json(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with('{') || t.starts_with('`')
}

/// The OpenAI-compatible brain with native tool calling.
#[derive(Debug, Clone)]
pub struct OpenAiBrain {
    api: ChatCompletions,
}

impl OpenAiBrain {
    /// A brain for `config`.
    pub fn new(config: OpenAiConfig) -> Self {
        Self {
            api: ChatCompletions::new(config),
        }
    }
}

#[async_trait]
impl Brain for OpenAiBrain {
    fn assistant_name(&self) -> String {
        format!("Outpost assistant ({})", self.api.model())
    }

    async fn respond(&self, request: BrainRequest<'_>, deltas: &Deltas) -> Result<ModelTurn> {
        self.api
            .complete(
                openai::messages(request.history),
                openai::tool_definitions(request.tools),
                Live::All(deltas),
            )
            .await
    }
}
