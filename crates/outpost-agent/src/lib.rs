//! `outpost-agent`: the reference Outpost assistant. It joins a LiveKit room as an agent
//! participant, speaks the Outpost protocol (docs/PROTOCOL.md) as the server, and answers
//! each user message by running the tool loop: model → tool calls → server tools run
//! here, client tools requested from the app → results fed back → final answer.
//!
//! Layout:
//! - [`config`]: command-line flags and environment.
//! - [`brain`]: the [`brain::Brain`] trait and its four implementations: OpenAI-compatible
//!   chat completions, Anthropic messages, strict-JSON mode for plain models, and the
//!   scripted demo brain.
//! - [`tools`]: the tools the agent runs itself (calculator, clock).
//! - [`link`]: Outpost messages over an `outpost-livekit` room (packets, or byte streams
//!   above `MAX_PACKET_BYTES`).
//! - [`session`]: one protocol session per app: hello/welcome, turns, tool requests in the
//!   three execution modes, timeouts and cancels.
//! - [`run`]: the program: join (with retries), serve, leave.
//! - `error`: [`Error`].

pub mod brain;
pub mod config;
mod error;
pub mod link;
pub mod run;
pub mod session;
pub mod tools;

pub use error::{Error, Result};
