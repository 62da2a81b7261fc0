//! `outpost-core`: the session engine the desktop app and `outpost connect` are thin
//! shells over. It joins the LiveKit room (`outpost-livekit`), speaks the Outpost protocol
//! (`outpost-protocol`), runs the assistant's tool requests under the user's policy and
//! consent (`outpost-tools`, `outpost-policy`), records everything (`outpost-store`), and
//! emits typed [`UiEvent`]s.
//!
//! Layout:
//! - [`machine`]: the conversation state machine. Pure: [`Input`]s in, [`Effect`]s out,
//!   no IO, the current time passed in. Hello/welcome, direction and phase checks,
//!   held messages, result resends after a loss, tool-call lifecycle, store records.
//! - [`session`]: the IO around it: [`Core`] (store + policy + consent broker, shared),
//!   [`Session`] (one room connection: send messages, cancel, switch conversation, leave)
//!   and its event receiver.
//! - [`codec`]: packet or byte stream by size; incoming messages kept in sender order.
//! - `agents_io`: the IO of LiveKit Agents mode (docs/AGENTS.md): Outpost's RPC methods,
//!   transcription streams, the agent's state attribute, user text on `lk.chat`.
//! - [`executor`]: the only module that drives `outpost-tools` and `outpost-policy` (the
//!   machine and the events use only the policy's value types: [`Decision`], [`Decider`]).
//! - [`events`]: the UI events (`{"type": ..., "data": ...}`).
//! - [`pace`]: how often a session takes the MCP servers' tools again (coalesced, one
//!   catalogue queued for the assistant at a time).
//! - [`voice`]: voice without devices: the microphone track the caller feeds, the
//!   assistant's audio handed out, which tracks are ours (for transcripts of the user).
//!
//! ```no_run
//! # async fn demo() -> outpost_core::Result<()> {
//! use outpost_core::{ConnectOptions, Core, Credentials, ToolsConfig};
//! let core = Core::open(None, ToolsConfig::defaults())?;
//! let (session, mut events) = core
//!     .connect(ConnectOptions::new(Credentials::Token { url: "ws://…".into(), token: "…".into() }))
//!     .await?;
//! session.send_message("hello")?;
//! while let Some(ev) = events.recv().await {
//!     println!("{}", serde_json::to_string(&ev).unwrap_or_default());
//! }
//! # Ok(()) }
//! ```

mod agents_io;
pub mod codec;
mod error;
pub mod events;
pub mod executor;
pub mod machine;
pub mod pace;
pub mod session;
pub mod voice;

pub use error::{CoreError, Result};
pub use events::{
    AssistantMode, AttachmentInfo, ConsentPrompt, ErrorDirection, LinkState, Side, ToolCallStatus,
    UiEvent,
};
pub use executor::{
    McpRoots, Permissions, PolicySource, ToolsConfig, confirm_policy, mcp_gate, outpost_places,
};
pub use machine::{Command, Effect, ExecEvent, Input, Machine, MachineConfig, Record};
/// The audio types a voice caller handles.
pub use outpost_livekit::{AudioFrame, AudioStream, LocalAudioTrack};
pub use session::{ConnectOptions, Core, Credentials, Session, SessionEvents};
pub use voice::VoiceEvent;

/// The consent answers and deciders, as the policy defines them.
pub use outpost_policy::{Decider, Decision, FolderAccess, ServerClaims, WithdrawReason};
/// The protocol's closed sets the UI events carry.
pub use outpost_protocol::{AssistantState, Execution, ProgressState, ToolErrorCode};
/// The store types the history views use.
pub use outpost_store as store;
