//! `outpost-livekit`: a pure-Rust LiveKit client for data and audio, the app's link
//! to the assistant. It behaves like the official SDKs on the wire, so it works with
//! LiveKit Cloud, `livekit-server` and `outpost-room`.
//!
//! Built on LiveKit's official `livekit-protocol` (types), `livekit-signaling` (the
//! WebSocket signal client: URL, v1→v0 fallback, validate, keep-alive, resume) and
//! `outpost-webrtc` (peer connections and SCTP data channels on the pure-Rust `webrtc`
//! crate, shared with `outpost-room`).
//!
//! ```no_run
//! # async fn demo() -> outpost_livekit::Result<()> {
//! use outpost_livekit::{DataOptions, Room, RoomEvent, RoomOptions};
//! let (room, mut events) = Room::connect("wss://example.livekit.cloud", "TOKEN",
//!     RoomOptions::default().assistant("assistant")).await?;
//! room.send_data(b"hello".to_vec(), DataOptions::topic("chat")).await?;
//! while let Some(ev) = events.recv().await {
//!     if let RoomEvent::Data(msg) = ev { /* … */ let _ = msg; }
//! }
//! room.leave().await?;
//! # Ok(()) }
//! ```
//!
//! Layout:
//! - [`room`]: the public [`Room`] handle and [`RoomOptions`].
//! - `engine`: the per-room task: signaling, peer connections, participants,
//!   incoming packets, and reconnects (resume, then full rejoins with backoff).
//! - `outbox`: the ordered reliable send queue that survives reconnects.
//! - [`streams`]: LiveKit data streams (header / 15 000-byte chunks / trailer).
//! - [`text`]: text stream readers that yield text as it arrives.
//! - [`rpc`]: LiveKit RPC (version 1 packets, version 2 over data streams): method
//!   handlers and `perform_rpc`.
//! - `attributes`: participant name/metadata/attribute changes as events.
//! - [`token`]: token endpoints (LiveKit's token-server convention).
//! - [`audio`]: audio tracks: [`LocalAudioTrack`] (PCM in, Opus RTP out) and
//!   [`AudioStream`] (RTP in, jitter buffer, Opus decode with concealment, PCM out).
//! - [`types`]: participants, messages, events.
//! - `signal`: adapter over `livekit-signaling`.
//! - `tls`: extra trusted root CAs for `wss://` (a `livekit-net` WebSocket transport).
//! - `proto`: the only import site of `livekit_protocol` (and `prost`), besides the
//!   hidden `fuzzing` module (entry points for the cargo-fuzz targets in `/fuzz`).
//! - `wire`: the client's role on `outpost-webrtc` (we offer the publisher and answer
//!   the subscriber) and what connection events mean for the engine.
//!
//! Not implemented: video, single peer connection mode (`/rtc/v1`; the
//! signal client falls back to `/rtc` like the official SDKs), data streams version 2
//! (`client_protocol` 2), end-to-end encryption, compressed streams.

pub mod audio;
pub mod error;
pub mod events;
#[doc(hidden)]
pub mod fuzzing;
pub mod room;
pub mod rpc;
pub mod streams;
pub mod text;
pub mod token;
pub mod types;

mod attributes;
mod engine;
mod options;
mod outbox;
mod proto;
mod shared;
mod signal;
mod tls;
mod wire;

pub use audio::{AudioFrame, AudioSourceOptions, AudioStream, LocalAudioTrack};
pub use error::{Error, Result};
pub use events::RoomEvent;
pub use options::RoomOptions;
pub use room::{Room, RoomEvents};
pub use rpc::{PerformRpc, RpcError, RpcErrorCode, RpcInvocation, RpcMethods};
pub use streams::{StreamInfo, StreamKind, StreamOptions, StreamReader, StreamWriter};
pub use text::TextStreamReader;
pub use token::{ConnectionDetails, EndpointMethod, TokenEndpoint, TokenRequest, mint_dev_token};
pub use types::{
    ConnectionPath, ConnectionState, DataMessage, DataOptions, DisconnectReason, Participant,
    ParticipantKind, PathKind, RpcCallers, SelectedPath, StreamSenders, TrackInfo,
    TrackSubscribers,
};
