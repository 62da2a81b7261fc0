//! How to connect: [`RoomOptions`], what the room handle and its engine are built with.

use std::time::Duration;

use crate::rpc::{RpcError, RpcMethods, RpcSettings};
use crate::types::{RpcCallers, StreamSenders, TrackSubscribers};

/// Connection settings. `Default` suits LiveKit Cloud, livekit-server and outpost-room.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RoomOptions {
    /// Identity of the assistant to watch for; `None` = the first participant of
    /// kind AGENT.
    pub assistant_identity: Option<String>,
    /// Deadline for each signaling connection attempt (WebSocket + join response).
    pub connect_timeout: Duration,
    /// Deadline for the peer connection to come up after joining.
    pub peer_connection_timeout: Duration,
    /// Full rejoin attempts after a lost link before giving up.
    pub reconnect_attempts: u32,
    /// Incoming data streams larger than this are cut off with an error.
    pub stream_receive_cap: u64,
    /// Whose incoming data streams are accepted: everyone's (default) or only the
    /// assistant's.
    pub stream_senders: StreamSenders,
    /// Incoming streams one participant may have open at once; more are refused
    /// (their reader yields an error).
    pub max_streams_per_sender: usize,
    /// Incoming streams open at once across all participants. The assistant's streams
    /// are accepted beyond it (up to `max_streams_per_sender`), so other participants
    /// cannot crowd the assistant out.
    pub max_open_streams: usize,
    /// An incoming stream that receives no chunk for this long is dropped: its slot is
    /// freed and its reader gets an error. `Duration::ZERO` turns this off.
    pub stream_idle_timeout: Duration,
    /// Largest payload [`crate::Room::send_data`] accepts (LiveKit recommends ≤ 15 KiB;
    /// larger payloads belong in data streams).
    pub max_packet_payload: usize,
    /// Per-channel bound on bytes handed to SCTP and not yet acknowledged.
    pub send_buffer_limit: usize,
    /// How long [`crate::Room::leave`] waits for queued packets to reach the server.
    pub leave_flush_timeout: Duration,
    /// PEM CA certificates to trust for this server's `wss://` signaling, in addition
    /// to the built-in webpki (Mozilla) roots: for a self-hosted server with a private
    /// CA. Each string may hold several certificates. Trust is scoped to the URL's
    /// host and port. Empty by default.
    pub extra_root_ca_pem: Vec<String>,
    /// RPC methods answered from the moment the room is joined (more can be added
    /// later with [`crate::Room::register_rpc_method`]). Empty by default.
    pub rpc_methods: RpcMethods,
    /// Speak RPC version 2 (payloads in data streams, no 15 KiB limit): advertise
    /// `client_protocol` 1 so that peers call us with it, and call peers that
    /// advertise it with it. On by default; off, we advertise 0 and use version 1
    /// only, as clients without it do. Version 1 requests are answered either way.
    pub rpc_v2: bool,
    /// Who may call our RPC methods: anyone (default, as the official SDKs), or only
    /// the assistant ([`RpcCallers::Assistant`]).
    pub rpc_callers: RpcCallers,
    /// The answer a refused caller gets (see [`RpcCallers::Assistant`]).
    pub rpc_refusal: RpcError,
    /// Largest RPC version 2 payload read, in bytes: a request stream we answer and the
    /// response stream of a call we made. A header announcing more is refused before a
    /// byte is read (`REQUEST_PAYLOAD_TOO_LARGE` / `RESPONSE_PAYLOAD_TOO_LARGE`), and a
    /// stream that brings more is dropped. LiveKit's SDKs set no RPC limit for version 2
    /// (only their 5 GB data-stream cap); default [`crate::rpc::DEFAULT_MAX_V2_PAYLOAD_BYTES`].
    pub rpc_max_v2_payload: usize,
    /// Who may subscribe to the tracks we publish: anyone (default) or only the
    /// assistant ([`TrackSubscribers::Assistant`], LiveKit's subscription permissions).
    pub track_subscribers: TrackSubscribers,
    /// Subscribe to every remote track (audio arrives as
    /// [`crate::RoomEvent::AudioTrackSubscribed`]). Off by default: a data-only client
    /// decodes nothing.
    pub auto_subscribe: bool,
    /// Subscribe to the assistant's audio tracks even without `auto_subscribe`. On by
    /// default: a LiveKit Agents voice agent does not speak, nor send the text of what it
    /// says (that is paced by its audio), until its frontend subscribes to its voice, so a
    /// client that shows only the text must still subscribe. Drop the stream of
    /// [`crate::RoomEvent::AudioTrackSubscribed`] to discard the audio.
    pub subscribe_to_assistant: bool,
}

impl Default for RoomOptions {
    fn default() -> Self {
        Self {
            assistant_identity: None,
            connect_timeout: Duration::from_secs(5),
            peer_connection_timeout: Duration::from_secs(15),
            reconnect_attempts: 10,
            stream_receive_cap: 5_000_000_000,
            stream_senders: StreamSenders::Anyone,
            max_streams_per_sender: 16,
            max_open_streams: 64,
            stream_idle_timeout: Duration::from_secs(60),
            max_packet_payload: 15 * 1024,
            send_buffer_limit: 4 * 1024 * 1024,
            leave_flush_timeout: Duration::from_secs(2),
            extra_root_ca_pem: Vec::new(),
            rpc_methods: RpcMethods::default(),
            rpc_v2: true,
            rpc_callers: RpcCallers::Anyone,
            rpc_refusal: RpcError::new(
                crate::rpc::RpcErrorCode::ApplicationError.code(),
                "only the assistant may call this participant's methods",
                None,
            ),
            rpc_max_v2_payload: crate::rpc::DEFAULT_MAX_V2_PAYLOAD_BYTES,
            auto_subscribe: false,
            subscribe_to_assistant: true,
            track_subscribers: TrackSubscribers::Anyone,
        }
    }
}

impl RoomOptions {
    /// What the RPC layer is built from.
    pub(crate) fn rpc_settings(&self) -> RpcSettings {
        RpcSettings {
            methods: self.rpc_methods.clone(),
            v2: self.rpc_v2,
            callers: self.rpc_callers,
            refusal: self.rpc_refusal.clone(),
            max_v2_payload: self.rpc_max_v2_payload,
        }
    }

    /// Watches for the assistant with this identity.
    #[must_use]
    pub fn assistant(mut self, identity: impl Into<String>) -> Self {
        self.assistant_identity = Some(identity.into());
        self
    }

    /// Accepts incoming data streams from the assistant only (see
    /// [`StreamSenders::Assistant`]).
    #[must_use]
    pub fn streams_from_assistant_only(mut self) -> Self {
        self.stream_senders = StreamSenders::Assistant;
        self
    }

    /// Answers RPC calls from the assistant only (see [`RpcCallers::Assistant`]).
    #[must_use]
    pub fn rpc_from_assistant_only(mut self) -> Self {
        self.rpc_callers = RpcCallers::Assistant;
        self
    }

    /// Also trusts the CA certificate(s) in `pem` for the server's `wss://` URL
    /// (see [`RoomOptions::extra_root_ca_pem`]).
    #[must_use]
    pub fn trust_root_ca_pem(mut self, pem: impl Into<String>) -> Self {
        self.extra_root_ca_pem.push(pem.into());
        self
    }
}
