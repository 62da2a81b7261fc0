//! WebRTC transport: the publisher peer connection (we offer, we create `_reliable`
//! and `_lossy`), the subscriber peer connection (the server offers and may open its
//! own channels), their trickled candidates, and data channel I/O.
//!
//! The only module that imports `webrtc` (and its sans-IO core `rtc`, for the two
//! settings `webrtc` does not re-export). The rest of the crate sees SDP strings,
//! candidate JSON strings and byte messages.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, watch};
use webrtc::data_channel::{DataChannel, DataChannelEvent, RTCDataChannelInit};
use webrtc::peer_connection::{
    PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCConfigurationBuilder,
    RTCIceCandidateInit, RTCIceServer, RTCPeerConnectionIceEvent, RTCPeerConnectionState,
    RTCSessionDescription, SettingEngineBuilder,
};

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
    /// The connection failed, or went from connected to disconnected/closed.
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
}

struct Handler {
    epoch: u64,
    role: Role,
    events: mpsc::UnboundedSender<WireEvent>,
    mid: Arc<std::sync::Mutex<String>>,
    was_connected: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl PeerConnectionEventHandler for Handler {
    async fn on_ice_candidate(&self, event: RTCPeerConnectionIceEvent) {
        let Ok(init) = event.candidate.to_json() else {
            return;
        };
        let mid = init.sdp_mid.clone().unwrap_or_else(|| {
            self.mid
                .lock()
                .map(|m| m.clone())
                .unwrap_or_else(|_| "0".to_owned())
        });
        let json = serde_json::json!({
            "candidate": init.candidate,
            "sdpMid": mid,
            "sdpMLineIndex": init.sdp_mline_index.unwrap_or(0),
        });
        let _ = self.events.send(WireEvent::Candidate {
            epoch: self.epoch,
            role: self.role,
            json: json.to_string(),
        });
    }

    async fn on_connection_state_change(&self, state: RTCPeerConnectionState) {
        use std::sync::atomic::Ordering;
        tracing::debug!(role = ?self.role, epoch = self.epoch, ?state, "peer connection state");
        let event = match state {
            RTCPeerConnectionState::Connected => {
                self.was_connected.store(true, Ordering::Relaxed);
                WireEvent::Connected {
                    epoch: self.epoch,
                    role: self.role,
                }
            }
            RTCPeerConnectionState::Failed => WireEvent::Down {
                epoch: self.epoch,
                role: self.role,
                why: "peer connection failed",
            },
            RTCPeerConnectionState::Disconnected | RTCPeerConnectionState::Closed
                if self.was_connected.load(Ordering::Relaxed) =>
            {
                WireEvent::Down {
                    epoch: self.epoch,
                    role: self.role,
                    why: "peer connection disconnected",
                }
            }
            _ => return,
        };
        let _ = self.events.send(event);
    }

    async fn on_data_channel(&self, dc: Arc<dyn DataChannel>) {
        let label = dc.label().await.unwrap_or_default();
        let reliable = match label.as_str() {
            "_reliable" => true,
            "_lossy" => false,
            other => {
                tracing::debug!(
                    label = other,
                    "ignoring a data channel LiveKit does not use"
                );
                return;
            }
        };
        let channel = Channel::start(dc, reliable, self.epoch, self.events.clone());
        let _ = self.events.send(WireEvent::RemoteChannel {
            epoch: self.epoch,
            channel,
        });
    }
}

/// One peer connection.
pub(crate) struct Transport {
    pc: Arc<dyn PeerConnection>,
    role: Role,
    epoch: u64,
    events: mpsc::UnboundedSender<WireEvent>,
    mid: Arc<std::sync::Mutex<String>>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("role", &self.role)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Creates a peer connection; its events go to `events`.
    pub(crate) async fn new(
        role: Role,
        epoch: u64,
        config: &WireConfig,
        events: mpsc::UnboundedSender<WireEvent>,
    ) -> Result<Self> {
        let settings = SettingEngineBuilder::new()
            // mDNS opens a multicast socket, which fails (ENODEV) in a bare network
            // namespace, and LiveKit servers never hand out mDNS candidates.
            .with_multicast_dns_mode(rtc::ice::mdns::MulticastDnsMode::Disabled)
            .with_include_loopback_candidate(config.loopback)
            .build();
        let ice_servers = config
            .ice_servers
            .iter()
            .map(|(urls, username, credential)| RTCIceServer {
                urls: urls.clone(),
                username: username.clone(),
                credential: credential.clone(),
            })
            .collect();
        let mid = Arc::new(std::sync::Mutex::new("0".to_owned()));
        let handler = Arc::new(Handler {
            epoch,
            role,
            events: events.clone(),
            mid: mid.clone(),
            was_connected: std::sync::atomic::AtomicBool::new(false),
        });
        let mut udp: Vec<SocketAddr> = vec![SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0)];
        if config.loopback {
            udp.push(SocketAddr::new(IpAddr::from([127, 0, 0, 1]), 0));
        }
        let pc = PeerConnectionBuilder::new()
            .with_configuration(
                RTCConfigurationBuilder::new()
                    .with_ice_servers(ice_servers)
                    .build(),
            )
            .with_setting_engine(settings)
            .with_handler(handler)
            .with_udp_addrs(udp)
            .with_data_channel_send_buffer_limit(config.send_buffer_limit)
            .build()
            .await
            .map_err(|e| Error::Webrtc(format!("create {role:?} peer connection: {e}")))?;
        Ok(Self {
            pc: Arc::new(pc),
            role,
            epoch,
            events,
            mid,
        })
    }

    /// Creates one of LiveKit's data channels on this (publisher) connection.
    pub(crate) async fn create_channel(&self, reliable: bool) -> Result<Channel> {
        let (label, init) = if reliable {
            (
                "_reliable",
                RTCDataChannelInit {
                    ordered: true,
                    ..Default::default()
                },
            )
        } else {
            (
                "_lossy",
                RTCDataChannelInit {
                    ordered: false,
                    max_retransmits: Some(0),
                    ..Default::default()
                },
            )
        };
        let dc = self
            .pc
            .create_data_channel(label, Some(init))
            .await
            .map_err(|e| Error::Webrtc(format!("create data channel {label}: {e}")))?;
        Ok(Channel::start(
            dc,
            reliable,
            self.epoch,
            self.events.clone(),
        ))
    }

    /// Creates and applies an offer; returns its SDP.
    pub(crate) async fn offer(&self, ice_restart: bool) -> Result<String> {
        let options = rtc::peer_connection::configuration::RTCOfferOptions { ice_restart };
        let offer = self
            .pc
            .create_offer(Some(options))
            .await
            .map_err(|e| Error::Webrtc(format!("create offer: {e}")))?;
        self.pc
            .set_local_description(offer.clone())
            .await
            .map_err(|e| Error::Webrtc(format!("set local offer: {e}")))?;
        let sdp = self
            .pc
            .local_description()
            .await
            .map(|d| d.sdp)
            .unwrap_or(offer.sdp);
        self.remember_mid(&sdp);
        Ok(sdp)
    }

    /// Applies the server's answer to our offer.
    pub(crate) async fn apply_answer(&self, sdp: String) -> Result<()> {
        let answer = RTCSessionDescription::answer(sdp)
            .map_err(|e| Error::Signal(format!("answer SDP: {e}")))?;
        self.pc
            .set_remote_description(answer)
            .await
            .map_err(|e| Error::Signal(format!("apply answer: {e}")))
    }

    /// Applies the server's offer and returns our answer.
    pub(crate) async fn answer(&self, offer_sdp: String) -> Result<String> {
        self.remember_mid(&offer_sdp);
        let offer = RTCSessionDescription::offer(offer_sdp)
            .map_err(|e| Error::Signal(format!("offer SDP: {e}")))?;
        self.pc
            .set_remote_description(offer)
            .await
            .map_err(|e| Error::Signal(format!("apply offer: {e}")))?;
        let answer = self
            .pc
            .create_answer(None)
            .await
            .map_err(|e| Error::Webrtc(format!("create answer: {e}")))?;
        let sdp = answer.sdp.clone();
        self.pc
            .set_local_description(answer)
            .await
            .map_err(|e| Error::Webrtc(format!("set local answer: {e}")))?;
        Ok(self
            .pc
            .local_description()
            .await
            .map(|d| d.sdp)
            .unwrap_or(sdp))
    }

    /// Whether a remote description is set (candidates can be added).
    pub(crate) async fn has_remote_description(&self) -> bool {
        self.pc.remote_description().await.is_some()
    }

    /// Adds a remote candidate given as LiveKit's candidate JSON.
    pub(crate) async fn add_candidate(&self, json: &str) -> Result<()> {
        let init: RTCIceCandidateInit = serde_json::from_str(json)
            .map_err(|e| Error::Signal(format!("candidate JSON {json:?}: {e}")))?;
        if init.candidate.is_empty() {
            return Ok(()); // end-of-candidates
        }
        if is_tcp_candidate(&init.candidate) {
            return Ok(()); // we only gather UDP
        }
        self.pc
            .add_ice_candidate(init)
            .await
            .map_err(|e| Error::Signal(format!("add candidate: {e}")))
    }

    /// Closes the connection and its channels.
    pub(crate) async fn close(&self) {
        if let Err(e) = self.pc.close().await {
            tracing::debug!(role = ?self.role, "closing peer connection: {e}");
        }
    }

    fn remember_mid(&self, sdp: &str) {
        if let Some(mid) = application_mid(sdp) {
            if let Ok(mut m) = self.mid.lock() {
                *m = mid;
            }
        }
    }
}

/// A data channel: messages are read by a background task into [`WireEvent::Message`];
/// writes go through [`Channel::send`]. Cloning shares the channel.
#[derive(Clone)]
pub(crate) struct Channel {
    dc: Arc<dyn DataChannel>,
    open: watch::Receiver<bool>,
    /// `_reliable` or `_lossy`.
    pub(crate) reliable: bool,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("reliable", &self.reliable)
            .finish_non_exhaustive()
    }
}

impl Channel {
    fn start(
        dc: Arc<dyn DataChannel>,
        reliable: bool,
        epoch: u64,
        events: mpsc::UnboundedSender<WireEvent>,
    ) -> Self {
        let (open_tx, open) = watch::channel(false);
        let reader = dc.clone();
        tokio::spawn(async move {
            // A channel handed to on_data_channel is already open.
            let mut opened = false;
            while let Some(ev) = reader.poll().await {
                match ev {
                    DataChannelEvent::OnOpen => {
                        opened = true;
                        let _ = open_tx.send(true);
                        let _ = events.send(WireEvent::Opened { epoch });
                    }
                    DataChannelEvent::OnMessage(msg) => {
                        if !opened {
                            opened = true;
                            let _ = open_tx.send(true);
                        }
                        let ev = WireEvent::Message {
                            reliable,
                            data: msg.data.freeze(),
                        };
                        if events.send(ev).is_err() {
                            break;
                        }
                    }
                    DataChannelEvent::OnClose => break,
                    _ => {}
                }
            }
        });
        Self { dc, open, reliable }
    }

    /// Whether the channel has opened.
    pub(crate) fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Waits until the channel's send buffer has room.
    pub(crate) async fn writable(&self) -> Result<()> {
        self.dc
            .writable()
            .await
            .map_err(|e| Error::Webrtc(format!("data channel: {e}")))
    }

    /// Hands one message to SCTP.
    pub(crate) async fn send(&self, data: &[u8]) -> Result<()> {
        self.dc
            .send(BytesMut::from(data))
            .await
            .map_err(|e| Error::Webrtc(format!("data channel send: {e}")))
    }

    /// Hands one message to SCTP unless the send buffer is full (then drops it).
    pub(crate) async fn try_send(&self, data: &[u8]) -> Result<()> {
        self.dc
            .try_send(BytesMut::from(data))
            .await
            .map_err(|e| Error::Webrtc(format!("data channel send: {e}")))
    }

    /// Bytes handed to [`Channel::send`] that SCTP has not acknowledged yet.
    pub(crate) async fn outstanding_bytes(&self) -> Result<usize> {
        self.dc
            .outstanding_bytes()
            .await
            .map_err(|e| Error::Webrtc(format!("data channel: {e}")))
    }
}

/// Whether an ICE candidate line uses TCP.
fn is_tcp_candidate(candidate: &str) -> bool {
    candidate
        .split_whitespace()
        .nth(2)
        .is_some_and(|t| t.eq_ignore_ascii_case("tcp"))
}

/// The `a=mid` of the first `m=application` section of an SDP.
fn application_mid(sdp: &str) -> Option<String> {
    let mut in_app = false;
    for line in sdp.lines() {
        let line = line.trim_end();
        if let Some(m) = line.strip_prefix("m=") {
            in_app = m.starts_with("application");
        } else if in_app {
            if let Some(mid) = line.strip_prefix("a=mid:") {
                return Some(mid.to_owned());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn candidate_helpers() {
        assert!(is_tcp_candidate(
            "candidate:1 1 tcp 1518280447 10.0.0.2 9 typ host tcptype active"
        ));
        assert!(!is_tcp_candidate(
            "candidate:1 1 udp 2122260223 10.0.0.2 5000 typ host"
        ));
        let sdp = "v=0\r\nm=audio 9 UDP 0\r\na=mid:0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\n";
        assert_eq!(application_mid(sdp).as_deref(), Some("1"));
        assert_eq!(application_mid("v=0\r\n"), None);
    }
}
