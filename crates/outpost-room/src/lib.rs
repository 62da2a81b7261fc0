//! `outpost-room`: a small LiveKit-compatible room server for data and audio, for offline demos
//! and tests. Production deployments use LiveKit Cloud or `livekit-server`.
//!
//! It speaks LiveKit's signaling protocol (WebSocket `/rtc`, protobuf) to the official
//! SDKs, answers each client's publisher peer connection through `outpost-webrtc` (on
//! the pure-Rust `webrtc` crate), and relays every `DataPacket` a participant sends on
//! `_reliable` / `_lossy` to the other participants of its room. Opus audio tracks are
//! forwarded to every other participant's subscriber connection, like a small SFU
//! ([`media`]); video is refused. There is no single peer connection mode (`/rtc/v1`
//! answers 404, and the SDKs fall back to `/rtc`).
//!
//! Layout:
//! - [`server`]: HTTP routes, token checks, and the [`Server`] handle (start in-process
//!   on a bound listener, [`Server::shutdown`] to tell clients to leave and stop).
//! - `session`: one participant's session: its state and lifecycle, the signaling loop
//!   (join, timeouts, resume), the requests (offer/answer, trickle, ping, leave), its
//!   published and subscribed tracks, and its data-channel reader/writer tasks.
//! - [`room`]: rooms, participants, participant updates, and the relay.
//! - [`media`]: published audio tracks, `AddTrackRequest` checks, and the per-subscriber
//!   forwarding task.
//! - [`auth`]: key pairs, minting and verifying access tokens.
//! - [`proto`]: the only import site of `livekit_protocol` (types and codec).
//! - `wire`: the server's role on `outpost-webrtc`'s peer connections and data
//!   channels (we answer the publisher, offer the subscriber).
//! - [`cli`]: the `serve` / `token` command line (the binary is a thin `main`).
//! - [`tasks`]: counts the server's tasks so tests can prove none leak.
//! - [`tls`]: the `wss://` listener (rustls) and its certificate.
//!
//! Optional modes, all off by default (see [`Config`]): session resume
//! (`resume_window`), `subscriber_primary`, and TLS.

pub mod auth;
pub mod cli;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod media;
pub mod proto;
pub mod room;
pub mod server;
mod session;
mod shared;
pub mod tasks;
pub mod tls;
mod wire;

pub use auth::{Grant, Keys};
pub use error::{Error, Result};
pub use room::Stats;
pub use server::{Config, Server};
pub use tls::TlsIdentity;
pub use wire::{WireConfig, direct_pair_seconds};
