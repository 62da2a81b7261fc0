//! The server's side of the WebRTC transport, on `outpost-webrtc`: a participant's
//! peer connections and their `_reliable` / `_lossy` data channels. The client's
//! "publisher" connection is one we answer (the client offers and creates the
//! channels); with `subscriber_primary`, the "subscriber" connection is one we offer,
//! with channels we create. This module says what each connection's events mean for
//! the session.
//!
//! The rest of the crate sees plain SDP strings, candidate JSON strings and byte
//! messages.

use std::net::IpAddr;

use outpost_webrtc::{ChannelKind, LocalAudioTrack, PeerConfig, PeerEvent, RemoteTrack};
use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::proto::Reliability;

/// A data channel of a participant: read with `recv`, write with `send`. Cloning
/// shares the channel.
pub use outpost_webrtc::DataChannel as DataChannelHandle;

/// Transport settings shared by all peer connections of a server.
#[derive(Debug, Clone)]
pub struct WireConfig {
    /// Address the server's ICE host candidates bind to (port chosen per connection).
    pub udp_ip: IpAddr,
    /// SCTP `max-message-size` announced in answers.
    pub sctp_max_message_size: u32,
    /// SCTP receive window (a_rwnd), bytes.
    pub sctp_receive_buffer: u32,
    /// Per data channel bound on bytes queued but not yet acknowledged; `send` waits
    /// above it, which turns a slow receiver into back-pressure on the sender.
    pub send_buffer_limit: usize,
    /// Kernel send and receive buffer of each UDP socket, bytes (0 = system default).
    /// With the default (~200 KiB) a burst from an SDK's SCTP sender overflows the
    /// socket, and SCTP takes the drops for congestion.
    pub udp_socket_buffer: usize,
}

impl Default for WireConfig {
    fn default() -> Self {
        Self {
            udp_ip: IpAddr::from([127, 0, 0, 1]),
            sctp_max_message_size: 65_536,
            sctp_receive_buffer: 4 * 1024 * 1024,
            send_buffer_limit: 128 * 1024,
            udp_socket_buffer: 4 * 1024 * 1024,
        }
    }
}

impl WireConfig {
    fn peer_config(&self) -> PeerConfig {
        PeerConfig {
            bind: vec![self.udp_ip],
            ice_servers: Vec::new(),
            send_buffer_limit: self.send_buffer_limit,
            sctp_max_message_size: Some(self.sctp_max_message_size),
            sctp_receive_buffer: Some(self.sctp_receive_buffer),
            udp_socket_buffer: self.udp_socket_buffer,
            audio: true,
            // UDP only: webrtc 0.21 has no shared ICE/TCP port to offer clients.
            ..PeerConfig::default()
        }
    }
}

impl From<outpost_webrtc::Error> for Error {
    fn from(e: outpost_webrtc::Error) -> Self {
        // What the client sent is a bad signal message; the rest is our stack.
        if e.is_remote() {
            Error::BadSignal(e.to_string())
        } else {
            Error::Webrtc(e.to_string())
        }
    }
}

/// Which of a participant's two peer connections (LiveKit's names, seen from the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The client offers and creates the channels; carries what the client sends.
    Publisher,
    /// We offer and create the channels (`subscriber_primary`); carries what we send.
    Subscriber,
}

/// Something that happened on a participant's peer connection.
#[derive(Debug)]
pub enum WireEvent {
    /// A local ICE candidate, as the JSON `{candidate, sdpMid, sdpMLineIndex}` LiveKit's
    /// `TrickleRequest.candidateInit` carries.
    LocalCandidate(Role, String),
    /// The connection reached `connected`.
    Connected(Role),
    /// The connection failed.
    Down(Role, &'static str),
    /// A data channel LiveKit uses is open: one the client opened on its publisher
    /// connection, or one we created on the subscriber connection.
    Channel(Role, Reliability, DataChannelHandle),
    /// The client sends a media track on its publisher connection.
    Track(RemoteTrack),
    /// The media of the published track with this sid ended (the reader stopped).
    TrackEnded(String),
}

fn reliability(kind: ChannelKind) -> Reliability {
    match kind {
        ChannelKind::Reliable => Reliability::Reliable,
        ChannelKind::Lossy => Reliability::Lossy,
    }
}

/// Turns a peer connection's event into the session's.
fn on_peer_event(role: Role, events: &mpsc::UnboundedSender<WireEvent>, ev: PeerEvent) {
    let ev = match ev {
        PeerEvent::LocalCandidate(json) => WireEvent::LocalCandidate(role, json),
        PeerEvent::Connected => WireEvent::Connected(role),
        // Not the end: the client may be resuming and about to restart ICE. If contact
        // does not come back, ICE reports Failed.
        PeerEvent::Disconnected => {
            tracing::debug!(?role, "peer connection lost contact; waiting for ICE");
            return;
        }
        PeerEvent::Failed => WireEvent::Down(role, "peer connection failed"),
        PeerEvent::RemoteChannel(dc) if role == Role::Publisher => {
            WireEvent::Channel(role, reliability(dc.kind()), dc)
        }
        // Clients do not open channels on the connection we offer; ours are reported
        // by the session once they open.
        PeerEvent::RemoteChannel(_) => return,
        PeerEvent::RemoteTrack(track) if role == Role::Publisher => WireEvent::Track(track),
        PeerEvent::RemoteTrack(track) => {
            tracing::debug!(?track, "ignoring a track on the subscriber connection");
            return;
        }
        other => {
            tracing::debug!(?role, "ignoring peer event {other:?}");
            return;
        }
    };
    let _ = events.send(ev);
}

/// The server side of one of a client's peer connections.
#[derive(Debug)]
pub struct Peer {
    peer: outpost_webrtc::Peer,
    role: Role,
}

impl Peer {
    /// Creates the peer connection; its events arrive on `events`, tagged `role`.
    pub async fn new(
        config: &WireConfig,
        role: Role,
        events: mpsc::UnboundedSender<WireEvent>,
    ) -> Result<Self> {
        let peer = outpost_webrtc::Peer::new(&config.peer_config(), move |ev| {
            on_peer_event(role, &events, ev)
        })
        .await?;
        Ok(Self { peer, role })
    }

    /// Creates LiveKit's `_reliable` (ordered, reliable) and `_lossy` (unordered, no
    /// retransmits) channels on a connection we offer, as livekit-server does on the
    /// subscriber connection when it is primary. They open after negotiation.
    pub async fn create_channels(&self) -> Result<Vec<(Reliability, DataChannelHandle)>> {
        let mut out = Vec::new();
        for kind in [ChannelKind::Reliable, ChannelKind::Lossy] {
            let dc = self.peer.create_data_channel(kind).await?;
            out.push((reliability(kind), dc));
        }
        Ok(out)
    }

    /// Adds an audio track we forward (offered at the next negotiation).
    pub async fn add_audio_track(
        &self,
        stream_id: &str,
        track_id: &str,
    ) -> Result<LocalAudioTrack> {
        Ok(self.peer.add_audio_track(stream_id, track_id).await?)
    }

    /// Stops sending a track (renegotiate to tell the client).
    pub async fn remove_track(&self, track: &LocalAudioTrack) -> Result<()> {
        Ok(self.peer.remove_track(track).await?)
    }

    /// Creates and applies an offer (with new ICE credentials when `ice_restart`);
    /// returns its SDP.
    pub async fn offer(&self, ice_restart: bool) -> Result<String> {
        Ok(self.peer.offer(ice_restart).await?)
    }

    /// Applies the client's answer to our offer.
    pub async fn apply_answer(&self, sdp: String) -> Result<()> {
        Ok(self.peer.apply_answer(sdp).await?)
    }

    /// Applies the client's offer and returns our answer SDP. A later offer (an ICE
    /// restart after a resume) renegotiates the same connection.
    pub async fn answer(&self, offer_sdp: String) -> Result<String> {
        Ok(self.peer.answer(offer_sdp).await?)
    }

    /// Adds a remote candidate given as LiveKit's candidate JSON.
    pub async fn add_candidate(&self, json: &str) -> Result<()> {
        Ok(self.peer.add_candidate(json).await?)
    }

    /// Closes the connection and its channels.
    pub async fn close(&self) {
        tracing::debug!(role = ?self.role, "closing peer connection");
        self.peer.close().await;
    }
}

/// Baseline for benchmarks: pushes `total` bytes in `chunk`-byte messages over an
/// ordered data channel from a plain offerer straight into a [`Peer`] (publisher role)
/// configured like the server's (no signaling, no relay, no SDK), on loopback.
/// Returns the seconds from the first send until the last byte arrived.
pub async fn direct_pair_seconds(config: &WireConfig, total: usize, chunk: usize) -> Result<f64> {
    let mut config = config.clone();
    config.udp_ip = IpAddr::from([127, 0, 0, 1]);
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let answerer = Peer::new(&config, Role::Publisher, ev_tx).await?;
    let (cand_tx, mut cand_rx) = mpsc::unbounded_channel();
    // The offerer stands for an SDK: webrtc's own SCTP and socket defaults.
    let offerer = outpost_webrtc::Peer::new(
        &PeerConfig {
            bind: vec![config.udp_ip],
            send_buffer_limit: config.send_buffer_limit,
            ..PeerConfig::default()
        },
        move |ev| {
            if let PeerEvent::LocalCandidate(c) = ev {
                let _ = cand_tx.send(c);
            }
        },
    )
    .await?;
    let dc = offerer.create_data_channel(ChannelKind::Reliable).await?;
    let offer = offerer.offer(false).await?;
    let answer = answerer.answer(offer).await?;
    offerer.apply_answer(answer).await?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
    let mut incoming = None;
    while incoming.is_none() {
        tokio::select! {
            Some(c) = cand_rx.recv() => answerer.add_candidate(&c).await?,
            Some(ev) = ev_rx.recv() => match ev {
                WireEvent::LocalCandidate(_, c) => offerer.add_candidate(&c).await?,
                WireEvent::Channel(_, _, handle) => incoming = Some(handle),
                _ => {}
            },
            _ = tokio::time::sleep_until(deadline) => return Err(Error::Webrtc("direct pair did not connect".into())),
        }
    }
    if !dc.opened().await {
        return Err(Error::Webrtc("direct pair: the channel closed".into()));
    }
    let Some(incoming) = incoming else {
        return Err(Error::Webrtc("no channel".into()));
    };
    let reader = tokio::spawn(async move {
        let mut got = 0usize;
        while got < total {
            match incoming.recv().await {
                Some(m) => got += m.len(),
                None => break,
            }
        }
        got
    });
    let started = std::time::Instant::now();
    let payload = vec![7u8; chunk];
    let mut sent = 0usize;
    while sent < total {
        let n = chunk.min(total - sent);
        dc.send(&payload[..n]).await?;
        sent += n;
    }
    let got = reader.await.map_err(|e| Error::Webrtc(e.to_string()))?;
    let secs = started.elapsed().as_secs_f64();
    offerer.close().await;
    answerer.close().await;
    if got < total {
        return Err(Error::Webrtc(format!(
            "direct pair delivered {got} of {total} bytes"
        )));
    }
    Ok(secs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_benchmark_baseline_delivers_every_byte() {
        let secs = direct_pair_seconds(&WireConfig::default(), 256 * 1024, 15_000)
            .await
            .unwrap();
        assert!(secs > 0.0 && secs < 20.0, "{secs}");
    }
}
