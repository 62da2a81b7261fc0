//! Command-line flags (each also readable from an environment variable) and what they
//! build: the brain and the room connection. With no flags at all the agent joins
//! `ws://127.0.0.1:7880`, room `outpost-demo`, with `outpost-room`'s dev keys and the
//! scripted brain: exactly what the local demo needs.

use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::brain::Brain;
use crate::brain::anthropic::{AnthropicBrain, AnthropicConfig};
use crate::brain::json::JsonBrain;
use crate::brain::openai::{OpenAiBrain, OpenAiConfig};
use crate::brain::scripted::ScriptedBrain;
use crate::error::{Error, Result};
use crate::session::AgentConfig;

/// Which brain answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BrainKind {
    /// The offline demo: deterministic, not an AI.
    Scripted,
    /// OpenAI-compatible chat completions with native tools (OpenAI, Ollama, llama.cpp, vLLM).
    Openai,
    /// The Anthropic messages API.
    Anthropic,
    /// Strict-JSON tool requests over an OpenAI-compatible endpoint, for plain models.
    Json,
}

/// The reference Outpost assistant: joins a LiveKit room and answers the Outpost app.
#[derive(Debug, Clone, Parser)]
#[command(name = "outpost-agent", version)]
pub struct Cli {
    /// LiveKit server URL (ws://, wss://, http(s)://).
    #[arg(long, env = "OUTPOST_URL", default_value = "ws://127.0.0.1:7880")]
    pub url: String,
    /// Access token; without it the agent mints one from --keys and --room.
    #[arg(long, env = "OUTPOST_AGENT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// API key pair used to mint the agent's token (default: outpost-room's dev pair).
    #[arg(
        long,
        env = "OUTPOST_KEYS",
        value_name = "KEY:SECRET",
        default_value = "devkey:secret",
        hide_env_values = true
    )]
    pub keys: String,
    /// Room to join when minting a token.
    #[arg(long, env = "OUTPOST_ROOM", default_value = "outpost-demo")]
    pub room: String,
    /// The agent's participant identity when minting a token.
    #[arg(long, env = "OUTPOST_AGENT_IDENTITY", default_value = "outpost-agent")]
    pub identity: String,
    /// Which brain answers.
    #[arg(long, env = "OUTPOST_BRAIN", value_enum, default_value = "scripted")]
    pub brain: BrainKind,
    /// Model name (openai default gpt-4o-mini, anthropic default claude-sonnet-4-5).
    #[arg(long, env = "OUTPOST_MODEL")]
    pub model: Option<String>,
    /// Model endpoint base URL (openai/json default https://api.openai.com/v1, e.g.
    /// http://127.0.0.1:11434/v1 for Ollama; anthropic default https://api.anthropic.com).
    #[arg(long, env = "OUTPOST_BASE_URL")]
    pub base_url: Option<String>,
    /// Read whole answers instead of streaming them.
    #[arg(long)]
    pub no_stream: bool,
    /// max_tokens for the Anthropic API.
    #[arg(long, default_value_t = 4096)]
    pub max_tokens: u32,
    /// Replace the default system prompt.
    #[arg(long, env = "OUTPOST_SYSTEM_PROMPT")]
    pub system_prompt: Option<String>,
    /// Pause between streamed words of the scripted brain, in ms.
    #[arg(long, default_value_t = 25)]
    pub scripted_delay_ms: u64,
    /// Extra wait after a client tool's timeoutMs before the agent cancels it, in ms.
    #[arg(long, default_value_t = 2000)]
    pub result_grace_ms: u64,
    /// Keep trying to join for this long (the room server may still be starting), in s.
    #[arg(long, default_value_t = 30)]
    pub join_timeout_secs: u64,
    /// Leave when standard input reaches its end: a parent that keeps the other end of a
    /// pipe open ties the agent's life to its own, even if it crashes.
    #[arg(long)]
    pub exit_on_stdin_close: bool,
}

impl Cli {
    /// The brain these flags describe. API keys come from `OPENAI_API_KEY` and
    /// `ANTHROPIC_API_KEY` (never flags, so they stay out of process lists).
    pub fn build_brain(&self) -> Result<Arc<dyn Brain>> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let openai = || OpenAiConfig {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| "https://api.openai.com/v1".into()),
            model: self.model.clone().unwrap_or_else(|| "gpt-4o-mini".into()),
            api_key: env("OPENAI_API_KEY"),
            stream: !self.no_stream,
        };
        Ok(match self.brain {
            BrainKind::Scripted => Arc::new(ScriptedBrain::new(Duration::from_millis(
                self.scripted_delay_ms,
            ))),
            BrainKind::Openai => Arc::new(OpenAiBrain::new(openai())),
            BrainKind::Json => Arc::new(JsonBrain::new(openai())),
            BrainKind::Anthropic => Arc::new(AnthropicBrain::new(AnthropicConfig {
                base_url: self
                    .base_url
                    .clone()
                    .unwrap_or_else(|| "https://api.anthropic.com".into()),
                model: self
                    .model
                    .clone()
                    .unwrap_or_else(|| "claude-sonnet-4-5".into()),
                api_key: env("ANTHROPIC_API_KEY").ok_or_else(|| {
                    Error::Config(
                        "--brain anthropic needs ANTHROPIC_API_KEY in the environment".into(),
                    )
                })?,
                max_tokens: self.max_tokens,
                stream: !self.no_stream,
            })),
        })
    }

    /// The protocol server's settings.
    pub fn agent_config(&self) -> AgentConfig {
        let mut c = AgentConfig {
            result_grace: Duration::from_millis(self.result_grace_ms),
            ..AgentConfig::default()
        };
        if let Some(p) = &self.system_prompt {
            c.system_prompt = p.clone();
        }
        c
    }

    /// The access token: `--token`, or one minted from `--keys` for `--room` with
    /// participant kind `agent`, so apps find the assistant without configuration.
    pub fn token(&self, display_name: &str) -> Result<String> {
        if let Some(t) = &self.token {
            return Ok(t.clone());
        }
        let (key, secret) = self
            .keys
            .split_once(':')
            .filter(|(k, s)| !k.is_empty() && !s.is_empty())
            .ok_or_else(|| Error::Config("--keys must be KEY:SECRET".into()))?;
        livekit_token::AccessToken::with_api_key(key, secret)
            .with_identity(&self.identity)
            .with_name(display_name)
            .with_kind("agent")
            .with_ttl(Duration::from_secs(24 * 3600))
            .with_grants(livekit_token::VideoGrants {
                room_join: true,
                room: self.room.clone(),
                ..Default::default()
            })
            .to_jwt()
            .map_err(|e| Error::Config(format!("minting a token: {e}")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn defaults_need_no_configuration() {
        let cli = Cli::try_parse_from(["outpost-agent"]).unwrap();
        assert_eq!(cli.url, "ws://127.0.0.1:7880");
        assert_eq!(cli.brain, BrainKind::Scripted);
        let brain = cli.build_brain().unwrap();
        assert_eq!(brain.assistant_name(), "Outpost demo (scripted, not an AI)");
        let jwt = cli.token("Outpost demo").unwrap();
        let claims = livekit_token::TokenVerifier::with_api_key("devkey", "secret")
            .verify(&jwt)
            .unwrap();
        assert_eq!(claims.kind, "agent");
        assert_eq!(claims.sub, "outpost-agent");
        assert_eq!(claims.video.room, "outpost-demo");
        assert!(claims.video.room_join);
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(Cli::try_parse_from(["outpost-agent", "--brain", "magic"]).is_err());
        let cli = Cli::try_parse_from(["outpost-agent", "--keys", "nocolon"]).unwrap();
        assert!(
            cli.token("x")
                .unwrap_err()
                .to_string()
                .contains("KEY:SECRET")
        );
        let cli = Cli::try_parse_from(["outpost-agent", "--token", "abc"]).unwrap();
        assert_eq!(cli.token("x").unwrap(), "abc");
    }
}
