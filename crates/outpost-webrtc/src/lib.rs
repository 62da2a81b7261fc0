//! `outpost-webrtc`: the WebRTC plumbing shared by the LiveKit client
//! (`outpost-livekit`) and the local room server (`outpost-room`), on the pure-Rust
//! `webrtc` crate (0.21). It is the only crate that imports `webrtc` and its sans-IO
//! core `rtc`; the rest of the workspace sees SDP strings, LiveKit's candidate JSON,
//! byte messages and plain RTP packets.
//!
//! Layout:
//! - [`peer`]: [`Peer`], one peer connection: building it from a [`PeerConfig`],
//!   offer/answer, remote candidates, and the [`PeerEvent`]s it reports.
//! - [`channel`]: LiveKit's two data channels ([`ChannelKind`]) and the
//!   [`DataChannel`] handle that reads and writes one.
//! - [`media`]: audio. [`PeerConfig::audio`] negotiates Opus (and nothing else: video
//!   sections are rejected); [`Peer::add_audio_track`] / [`Peer::remove_track`] send a
//!   [`LocalAudioTrack`], remote tracks arrive as [`PeerEvent::RemoteTrack`], and
//!   [`Rewriter`] keeps a forwarded stream's numbering continuous.
//! - `sdp`: SDP and candidate text, including the rewrites that let `webrtc` 0.21
//!   talk to libwebrtc after an ICE restart.
//! - `runtime`: `webrtc`'s Tokio runtime with large UDP socket buffers and the TURN
//!   tunnel's sockets and names.
//! - `turn_tunnel`: TURN over TCP and TLS under `webrtc`'s UDP-only TURN client.
//! - `relay_flush`: extra passes of `webrtc`'s driver loop while relayed, so packets
//!   for a TURN path do not wait in its relayer for the next timer.
//! - `paths`: what became of each kind of path ([`PathAttempt`]), for a user whose
//!   connection found none.
//! - [`error`]: the crate's [`Error`], which tells bad remote input from local failures.
//!
//! Roles stay with the callers: the client offers its publisher connection and answers
//! the subscriber; the room server answers the client's publisher and offers the
//! subscriber. Each caller's `wire.rs` turns [`PeerEvent`]s into its own events and
//! decides what a state change means for its session.

pub mod channel;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
mod ice;
pub mod media;
mod paths;
pub mod peer;
mod relay_flush;
mod runtime;
mod sdp;
mod turn_tunnel;

pub use channel::{ChannelEvent, ChannelKind, DataChannel};
pub use error::{Error, Result};
pub use media::{LocalAudioTrack, MediaKind, RemoteTrack, Rewriter, RtpPacket};
pub use paths::PathAttempt;
pub use peer::{IceServer, PathKind, Peer, PeerConfig, PeerEvent, SelectedPath};
pub use turn_tunnel::TunnelFailure;
