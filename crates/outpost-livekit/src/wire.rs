//! The client's side of the WebRTC transport, on `outpost-webrtc`: the publisher peer
//! connection (we offer, we create `_reliable` and `_lossy`), the subscriber peer
//! connection (the server offers and may open its own channels), and what their
//! events mean for the engine.
//!
//! The rest of the crate sees SDP strings, candidate JSON strings and byte messages.

use std::net::IpAddr;

use bytes::Bytes;
use outpost_webrtc::{
    ChannelEvent, ChannelKind, DataChannel, IceServer, Peer, PeerConfig, PeerEvent,
};
use tokio::sync::{mpsc, watch};

use crate::error::{Error, Result};

/// Which of the two LiveKit peer connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Client offers; carries what we send.
    Publisher,
    /// Server offers; carries what the server sends when it uses it.
    Subscriber,
}

/// Something that happened on a peer connection of generation `epoch` (a rejoin makes
/// new connections with a new generation, so late events of old ones can be ignored).
#[derive(Debug)]
pub(crate) enum WireEvent {
    /// A local ICE candidate as LiveKit's `{candidate, sdpMid, sdpMLineIndex}` JSON.
    Candidate {
        epoch: u64,
        role: Role,
        json: String,
    },
    /// The connection reached `connected`.
    Connected { epoch: u64, role: Role },
    /// The connection failed, or lost contact after being connected.
    Down {
        epoch: u64,
        role: Role,
        why: &'static str,
    },
    /// The remote side opened a data channel (server-created channels on the
    /// subscriber connection).
    RemoteChannel { epoch: u64, channel: Channel },
    /// One of our channels opened.
    Opened { epoch: u64 },
    /// The subscriber connection carries a remote media track.
    RemoteTrack {
        epoch: u64,
        track: outpost_webrtc::RemoteTrack,
    },
    /// A message arrived on a channel.
    Message { reliable: bool, data: Bytes },
}

/// Transport settings.
#[derive(Debug, Clone)]
pub(crate) struct WireConfig {
    /// Whether to gather loopback candidates (server on a loopback address).
    pub loopback: bool,
    /// Per-channel bound on bytes handed to SCTP but not yet acknowledged.
    pub send_buffer_limit: usize,
    /// ICE servers from the join response: (urls, username, credential).
    pub ice_servers: Vec<(Vec<String>, String, String)>,
    /// Relayed candidates only (the server's `client_configuration.force_relay`).
    pub relay_only: bool,
    /// CA certificates (PEM) trusted for TURN over TLS besides the system's store.
    pub tls_roots: Vec<String>,
}

fn ice_servers(servers: &[(Vec<String>, String, String)]) -> Vec<IceServer> {
    servers
        .iter()
        .map(|(urls, username, credential)| IceServer {
            urls: urls.clone(),
            username: username.clone(),
            credential: credential.clone(),
        })
        .collect()
}

impl From<outpost_webrtc::Error> for Error {
    fn from(e: outpost_webrtc::Error) -> Self {
        // What the server sent is a signaling problem; the rest is our transport.
        if e.is_remote() {
            Error::Signal(e.to_string())
        } else {
            Error::Webrtc(e.to_string())
        }
    }
}

/// One peer connection.
pub(crate) struct Transport {
    peer: Peer,
    role: Role,
    epoch: u64,
    events: mpsc::UnboundedSender<WireEvent>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("role", &self.role)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// Turns a peer connection's event into the engine's.
fn on_peer_event(epoch: u64, role: Role, events: &mpsc::UnboundedSender<WireEvent>, ev: PeerEvent) {
    let ev = match ev {
        PeerEvent::LocalCandidate(json) => WireEvent::Candidate { epoch, role, json },
        PeerEvent::Connected => WireEvent::Connected { epoch, role },
        // The client acts on a lost contact at once instead of waiting for ICE to
        // give up (~25 s): a resume restarts ICE and keeps the session.
        PeerEvent::Disconnected => WireEvent::Down {
            epoch,
            role,
            why: "peer connection disconnected",
        },
        PeerEvent::Failed => WireEvent::Down {
            epoch,
            role,
            why: "peer connection failed",
        },
        PeerEvent::RemoteChannel(dc) => WireEvent::RemoteChannel {
            epoch,
            channel: Channel::start(dc, epoch, events.clone()),
        },
        PeerEvent::RemoteTrack(track) => WireEvent::RemoteTrack { epoch, track },
        other => {
            tracing::debug!(?role, "ignoring peer event {other:?}");
            return;
        }
    };
    let _ = events.send(ev);
}

impl Transport {
    /// Creates a peer connection; its events go to `events`.
    pub(crate) async fn new(
        role: Role,
        epoch: u64,
        config: &WireConfig,
        events: mpsc::UnboundedSender<WireEvent>,
    ) -> Result<Self> {
        let mut bind = vec![IpAddr::from([0, 0, 0, 0])];
        if config.loopback {
            // webrtc 0.21 expands the wildcard to the interfaces without loopback, so a
            // server on loopback needs a socket of its own.
            bind.push(IpAddr::from([127, 0, 0, 1]));
        }
        let peer_config = PeerConfig {
            bind,
            ice_servers: ice_servers(&config.ice_servers),
            relay_only: config.relay_only,
            tls_roots: config.tls_roots.clone(),
            send_buffer_limit: config.send_buffer_limit,
            audio: true,
            // ICE over TCP as the official SDKs do: where UDP is blocked (and after
            // UDP failures, when livekit-server offers TCP candidates only) the
            // server's passive ICE/TCP port is dialled.
            ice_tcp: true,
            ..PeerConfig::default()
        };
        let tx = events.clone();
        let peer = Peer::new(&peer_config, move |ev| on_peer_event(epoch, role, &tx, ev))
            .await
            .map_err(|e| Error::Webrtc(format!("create {role:?} peer connection: {e}")))?;
        Ok(Self {
            peer,
            role,
            epoch,
            events,
        })
    }

    /// Creates one of LiveKit's data channels on this (publisher) connection.
    pub(crate) async fn create_channel(&self, reliable: bool) -> Result<Channel> {
        let kind = if reliable {
            ChannelKind::Reliable
        } else {
            ChannelKind::Lossy
        };
        let dc = self.peer.create_data_channel(kind).await?;
        Ok(Channel::start(dc, self.epoch, self.events.clone()))
    }

    /// Adds an audio track we send (offered at the next negotiation).
    pub(crate) async fn add_audio_track(
        &self,
        stream_id: &str,
        track_id: &str,
    ) -> Result<outpost_webrtc::LocalAudioTrack> {
        Ok(self.peer.add_audio_track(stream_id, track_id).await?)
    }

    /// Stops sending a track (removed at the next negotiation).
    pub(crate) async fn remove_track(&self, track: &outpost_webrtc::LocalAudioTrack) -> Result<()> {
        Ok(self.peer.remove_track(track).await?)
    }

    /// Creates and applies an offer; returns its SDP.
    pub(crate) async fn offer(&self, ice_restart: bool) -> Result<String> {
        Ok(self.peer.offer(ice_restart).await?)
    }

    /// Applies the server's answer to our offer.
    pub(crate) async fn apply_answer(&self, sdp: String) -> Result<()> {
        Ok(self.peer.apply_answer(sdp).await?)
    }

    /// Applies the server's offer and returns our answer.
    pub(crate) async fn answer(&self, offer_sdp: String) -> Result<String> {
        Ok(self.peer.answer(offer_sdp).await?)
    }

    /// Whether a remote description is set (candidates can be added).
    pub(crate) async fn has_remote_description(&self) -> bool {
        self.peer.has_remote_description().await
    }

    /// Adds a remote candidate given as LiveKit's candidate JSON.
    pub(crate) async fn add_candidate(&self, json: &str) -> Result<()> {
        Ok(self.peer.add_candidate(json).await?)
    }

    /// New STUN/TURN servers, used from the next ICE restart on.
    pub(crate) async fn set_ice_servers(
        &self,
        servers: &[(Vec<String>, String, String)],
    ) -> Result<()> {
        Ok(self.peer.set_ice_servers(&ice_servers(servers)).await?)
    }

    /// How each kind of network path has fared on this connection.
    pub(crate) async fn path_report(&self) -> Vec<outpost_webrtc::PathAttempt> {
        self.peer.path_report().await
    }

    /// The path ICE selected, once it has.
    pub(crate) async fn selected_path(&self) -> Option<outpost_webrtc::SelectedPath> {
        self.peer.selected_path().await
    }

    /// Closes the connection and its channels.
    pub(crate) async fn close(&self) {
        self.peer.close().await;
    }
}

/// A data channel: messages are read by a background task into [`WireEvent::Message`];
/// writes go through [`Channel::send`]. Cloning shares the channel.
#[derive(Clone, Debug)]
pub(crate) struct Channel {
    dc: DataChannel,
    open: watch::Receiver<bool>,
}

impl Channel {
    fn start(dc: DataChannel, epoch: u64, events: mpsc::UnboundedSender<WireEvent>) -> Self {
        let reliable = dc.kind() == ChannelKind::Reliable;
        let (open_tx, open) = watch::channel(false);
        let reader = dc.clone();
        tokio::spawn(async move {
            // A channel the server opened arrives open and reports no Open; its first
            // message shows it.
            let mut opened = false;
            loop {
                match reader.next_event().await {
                    ChannelEvent::Open => {
                        opened = true;
                        let _ = open_tx.send(true);
                        let _ = events.send(WireEvent::Opened { epoch });
                    }
                    ChannelEvent::Message(data) => {
                        if !opened {
                            opened = true;
                            let _ = open_tx.send(true);
                        }
                        if events.send(WireEvent::Message { reliable, data }).is_err() {
                            break;
                        }
                    }
                    ChannelEvent::Closed => break,
                }
            }
        });
        Self { dc, open }
    }

    /// Whether the channel has opened.
    pub(crate) fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Waits until the channel's send buffer has room.
    pub(crate) async fn writable(&self) -> Result<()> {
        Ok(self.dc.writable().await?)
    }

    /// Hands one message to SCTP.
    pub(crate) async fn send(&self, data: &[u8]) -> Result<()> {
        Ok(self.dc.send(data).await?)
    }

    /// Hands one message to SCTP unless the send buffer is full (then fails at once,
    /// and the message is not sent).
    pub(crate) async fn try_send(&self, data: &[u8]) -> Result<()> {
        Ok(self.dc.try_send(data).await?)
    }

    /// Bytes handed to [`Channel::send`] that SCTP has not acknowledged yet.
    pub(crate) async fn outstanding_bytes(&self) -> Result<usize> {
        Ok(self.dc.outstanding_bytes().await?)
    }
}
