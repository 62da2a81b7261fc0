//! One peer connection: how it is built (bind addresses, ICE servers, SCTP and socket
//! settings), offer/answer with the `webrtc` 0.21 workarounds, remote candidates, and
//! the events it reports (local candidates, connection state, remote data channels).
//!
//! Which side offers, which channels are opened by whom and what a state change means
//! for the session are the caller's business (the client's and the room server's
//! `wire.rs`); this module only reports facts.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use webrtc::data_channel::DataChannel as RawDataChannel;
use webrtc::peer_connection::{
    PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCConfigurationBuilder,
    RTCIceServer, RTCIceTransportPolicy, RTCPeerConnectionIceEvent, RTCPeerConnectionState,
    RTCSessionDescription, SettingEngineBuilder,
};

use webrtc::media_stream::track_local::TrackLocal;
use webrtc::media_stream::track_remote::TrackRemote;

use crate::channel::{ChannelKind, DataChannel};
use crate::error::{Error, Result};
use crate::media::{LocalAudioTrack, RemoteTrack};
use crate::runtime::OutpostRuntime;
use crate::sdp::{self, CandidateSection};
use crate::turn_tunnel::{Failures, Relays, TunnelConfig};

pub use crate::ice::{IceServer, PathKind};

/// How to build a peer connection.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Addresses ICE host candidates bind to (each on a port of its own). A loopback
    /// address among them also turns on loopback candidates, which `webrtc` leaves out
    /// by default.
    pub bind: Vec<IpAddr>,
    /// Host candidates over UDP (a socket per bind address). Off only in tests that
    /// need a TCP-only side.
    pub ice_udp: bool,
    /// ICE over TCP (RFC 6544): a listener per bind address (a passive candidate, and
    /// an active one), and the other side's passive candidates are dialled. This is how
    /// a client reaches livekit-server's ICE/TCP port (7881) where UDP is blocked. Off:
    /// remote TCP candidates are skipped.
    pub ice_tcp: bool,
    /// STUN/TURN servers.
    pub ice_servers: Vec<IceServer>,
    /// Relayed candidates only (the W3C `iceTransportPolicy: "relay"`): no host or
    /// server-reflexive candidates are gathered, so every path goes through a TURN
    /// server. livekit-server asks for it (`client_configuration.force_relay`) once it
    /// has fallen back to TURN/TLS.
    pub relay_only: bool,
    /// CA certificates (PEM) to trust for TURN over TLS besides the system's store.
    pub tls_roots: Vec<String>,
    /// Per data channel bound on bytes queued but not yet acknowledged; `send` waits
    /// above it.
    pub send_buffer_limit: usize,
    /// SCTP `max-message-size` to announce; `None` keeps `webrtc`'s default.
    pub sctp_max_message_size: Option<u32>,
    /// SCTP receive window (a_rwnd), bytes; `None` keeps `webrtc`'s default.
    pub sctp_receive_buffer: Option<u32>,
    /// Kernel send and receive buffer of each UDP socket, bytes (0 = system default).
    pub udp_socket_buffer: usize,
    /// Negotiate audio (Opus; [`crate::media`]). Off: every media section is
    /// rejected, as a data-only peer does.
    pub audio: bool,
}

impl Default for PeerConfig {
    fn default() -> Self {
        Self {
            bind: vec![IpAddr::from([127, 0, 0, 1])],
            ice_udp: true,
            ice_tcp: false,
            ice_servers: Vec::new(),
            relay_only: false,
            tls_roots: Vec::new(),
            send_buffer_limit: 128 * 1024,
            sctp_max_message_size: None,
            sctp_receive_buffer: None,
            udp_socket_buffer: 0,
            audio: false,
        }
    }
}

impl std::fmt::Display for PathKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The network path a connected peer connection uses: its selected candidate pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedPath {
    /// Direct or relayed, and over what.
    pub kind: PathKind,
    /// Our candidate, `address:port` (for a relay: the address the TURN server relays
    /// from).
    pub local: String,
    /// The other side's candidate, `address:port`.
    pub remote: String,
}

/// Something that happened on a peer connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum PeerEvent {
    /// A local ICE candidate to trickle, as LiveKit's candidate JSON
    /// `{candidate, sdpMid, sdpMLineIndex}` (the section is the local description's
    /// bundle section).
    LocalCandidate(String),
    /// The connection reached `connected` (again, after a `Disconnected`).
    Connected,
    /// A connected connection lost contact with the other side. ICE may still recover
    /// (back to `Connected`); if it does not, `Failed` follows (after about 25 s with
    /// `webrtc` 0.21's defaults).
    Disconnected,
    /// The connection failed for good.
    Failed,
    /// The other side opened one of LiveKit's data channels (others are ignored). It
    /// is already open.
    RemoteChannel(DataChannel),
    /// The other side sends a media track (only with [`PeerConfig::audio`]).
    RemoteTrack(RemoteTrack),
}

/// Where a peer connection's events go. Called on `webrtc`'s tasks; it must not block.
type Sink = Box<dyn Fn(PeerEvent) + Send + Sync>;

struct Handler {
    sink: Sink,
    section: Arc<Mutex<CandidateSection>>,
    was_connected: AtomicBool,
}

#[async_trait::async_trait]
impl PeerConnectionEventHandler for Handler {
    async fn on_ice_candidate(&self, event: RTCPeerConnectionIceEvent) {
        let init = match event.candidate.to_json() {
            Ok(init) => init,
            Err(e) => {
                tracing::debug!("local candidate not signalled: {e}");
                return;
            }
        };
        // webrtc 0.21 sets sdpMid to "" and sdpMLineIndex to 0 on every local
        // candidate; the section comes from our own description instead.
        let section = self
            .section
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone());
        (self.sink)(PeerEvent::LocalCandidate(sdp::candidate_json(
            &init.candidate,
            &section,
        )));
    }

    async fn on_connection_state_change(&self, state: RTCPeerConnectionState) {
        tracing::debug!(?state, "peer connection state");
        let event = match state {
            RTCPeerConnectionState::Connected => {
                self.was_connected.store(true, Ordering::Relaxed);
                PeerEvent::Connected
            }
            RTCPeerConnectionState::Disconnected if self.was_connected.load(Ordering::Relaxed) => {
                PeerEvent::Disconnected
            }
            RTCPeerConnectionState::Failed => PeerEvent::Failed,
            // `Closed` comes only from our own `close()` in webrtc 0.21 (rtc's
            // `update_connection_state(is_closed)`; a remote DTLS close leaves the
            // state at `connected`), so the owner already knows. New, connecting:
            // nothing to act on.
            _ => return,
        };
        (self.sink)(event);
    }

    async fn on_track(&self, track: Arc<dyn TrackRemote>) {
        let track = RemoteTrack::new(track).await;
        tracing::debug!(?track, "remote track");
        (self.sink)(PeerEvent::RemoteTrack(track));
    }

    async fn on_data_channel(&self, dc: Arc<dyn RawDataChannel>) {
        let label = dc.label().await.unwrap_or_default();
        match ChannelKind::from_label(&label) {
            Some(kind) => (self.sink)(PeerEvent::RemoteChannel(DataChannel::new(dc, kind))),
            None => tracing::debug!(label, "ignoring a data channel LiveKit does not use"),
        }
    }
}

/// `webrtc`'s configuration for these ICE servers and policy.
fn ice_configuration(
    servers: &[IceServer],
    relay_only: bool,
) -> webrtc::peer_connection::RTCConfiguration {
    let servers = servers
        .iter()
        .map(|s| RTCIceServer {
            urls: s.urls.clone(),
            username: s.username.clone(),
            credential: s.credential.clone(),
        })
        .collect();
    RTCConfigurationBuilder::new()
        .with_ice_servers(servers)
        .with_ice_transport_policy(if relay_only {
            RTCIceTransportPolicy::Relay
        } else {
            RTCIceTransportPolicy::All
        })
        .build()
}

/// One peer connection. Dropping it does not close it; call [`Peer::close`].
pub struct Peer {
    pc: Arc<dyn PeerConnection>,
    /// The section local candidates are signalled for, updated with each local
    /// description before it is applied (candidates are gathered from then on).
    section: Arc<Mutex<CandidateSection>>,
    /// Whether remote TCP candidates are used ([`PeerConfig::ice_tcp`]).
    ice_tcp: bool,
    /// [`PeerConfig::relay_only`], kept for [`Peer::set_ice_servers`].
    relay_only: bool,
    /// TURN servers reached over TCP or TLS (the tunnel's table).
    relays: Arc<Relays>,
    /// What went wrong on the tunnel's streams.
    failures: Arc<Failures>,
    /// The STUN/TURN servers as given (before the tunnel's rewrite).
    ice_servers: Mutex<Vec<IceServer>>,
    /// The audio level extension's id in the last answer to our offer (0: none), which
    /// our audio tracks send with.
    audio_level_id: Arc<AtomicU8>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("section", &self.section)
            .finish_non_exhaustive()
    }
}

impl Peer {
    /// Creates a peer connection; its events go to `on_event`, which is called on
    /// `webrtc`'s tasks and must not block (send them on a channel).
    pub async fn new(
        config: &PeerConfig,
        on_event: impl Fn(PeerEvent) + Send + Sync + 'static,
    ) -> Result<Self> {
        let loopback = config.bind.iter().any(IpAddr::is_loopback);
        let mut settings = SettingEngineBuilder::new()
            // mDNS opens a multicast socket, which fails (ENODEV) inside a bare network
            // namespace, and LiveKit hands out plain IP candidates anyway.
            .with_multicast_dns_mode(rtc::ice::mdns::MulticastDnsMode::Disabled)
            .with_include_loopback_candidate(loopback);
        if let Some(size) = config.sctp_max_message_size {
            settings = settings.with_sctp_max_message_size(
                rtc::peer_connection::configuration::setting_engine::SctpMaxMessageSize::Bounded(
                    size,
                ),
            );
        }
        if let Some(size) = config.sctp_receive_buffer {
            settings = settings.with_sctp_max_receive_buffer_size(size);
        }
        let relays = Arc::new(Relays::default());
        let failures = Arc::new(Failures::default());
        let section = Arc::new(Mutex::new(CandidateSection::default()));
        let handler = Arc::new(Handler {
            sink: Box::new(on_event),
            section: section.clone(),
            was_connected: AtomicBool::new(false),
        });
        let mut builder = PeerConnectionBuilder::new()
            .with_configuration(ice_configuration(
                &relays.rewrite(&config.ice_servers),
                config.relay_only,
            ))
            .with_setting_engine(settings.build())
            .with_handler(handler);
        if config.audio {
            let engine = crate::media::audio_media_engine()?;
            // Sender and receiver reports: the minimum RTCP a libwebrtc peer expects
            // of a media sender and receiver.
            let registry =
                rtc::peer_connection::configuration::interceptor_registry::configure_rtcp_reports(
                    rtc::interceptor::Registry::new(),
                );
            builder = builder
                .with_media_engine(engine)
                .with_interceptor_registry(registry);
        }
        builder = builder.with_runtime(Arc::new(OutpostRuntime {
            inner: webrtc::runtime::TokioRuntime,
            buffer: config.udp_socket_buffer,
            tunnel: Arc::new(TunnelConfig {
                relays: relays.clone(),
                tls_roots: config.tls_roots.clone(),
                failures: failures.clone(),
            }),
            flush: Arc::default(),
        }));
        let addrs: Vec<SocketAddr> = config
            .bind
            .iter()
            .map(|ip| SocketAddr::new(*ip, 0))
            .collect();
        if config.ice_udp {
            builder = builder.with_udp_addrs(addrs.clone());
        }
        if config.ice_tcp {
            // A listener of its own per connection: webrtc 0.21 has no shared TCP port
            // (mux), so the passive candidate's port is ephemeral. What matters for
            // LiveKit is the active side: dialling the server's passive candidates.
            builder = builder.with_tcp_addrs(addrs);
        }
        let pc = builder
            .with_data_channel_send_buffer_limit(config.send_buffer_limit)
            .build()
            .await
            .map_err(|e| Error::Webrtc(format!("create peer connection: {e}")))?;
        Ok(Self {
            pc: Arc::new(pc),
            section,
            ice_tcp: config.ice_tcp,
            relay_only: config.relay_only,
            relays,
            failures,
            ice_servers: Mutex::new(config.ice_servers.clone()),
            audio_level_id: Arc::default(),
        })
    }

    /// Creates one of LiveKit's data channels; it opens after negotiation
    /// ([`crate::ChannelEvent::Open`]).
    pub async fn create_data_channel(&self, kind: ChannelKind) -> Result<DataChannel> {
        let dc = self
            .pc
            .create_data_channel(kind.label(), Some(kind.init()))
            .await
            .map_err(|e| Error::Webrtc(format!("create data channel {}: {e}", kind.label())))?;
        Ok(DataChannel::new(dc, kind))
    }

    /// Adds an audio track we send, named `stream_id` / `track_id` in `a=msid`; it is
    /// offered at the next negotiation. Needs [`PeerConfig::audio`].
    pub async fn add_audio_track(
        &self,
        stream_id: &str,
        track_id: &str,
    ) -> Result<LocalAudioTrack> {
        let (track, ssrc) = LocalAudioTrack::build(stream_id, track_id);
        // A transceiver of its own, never one an unpublished track left: `add_track`
        // reuses those (the spec allows it only for a sender that never sent), and
        // livekit-server, seeing a new track and SSRC on a section that carried another,
        // now and then failed to find the section ("could not get mid for track") and
        // never published the track. Unpublished sections stay in the SDP, inactive,
        // as with the official SDKs.
        let transceiver = self
            .pc
            .add_transceiver_from_track(track.clone() as Arc<dyn TrackLocal>, None)
            .await
            .map_err(|e| Error::Webrtc(format!("add audio track {track_id}: {e}")))?;
        let sender = transceiver
            .sender()
            .await
            .map_err(|e| Error::Webrtc(format!("add audio track {track_id}: {e}")))?
            .ok_or_else(|| Error::Webrtc(format!("add audio track {track_id}: no sender")))?;
        Ok(LocalAudioTrack::new(
            track,
            sender,
            ssrc,
            self.audio_level_id.clone(),
        ))
    }

    /// Stops sending a track added with [`Peer::add_audio_track`]; the next
    /// negotiation tells the other side.
    pub async fn remove_track(&self, track: &LocalAudioTrack) -> Result<()> {
        self.pc
            .remove_track(&track.sender)
            .await
            .map_err(|e| Error::Webrtc(format!("remove track: {e}")))
    }

    /// Creates and applies an offer (with new ICE credentials when `ice_restart`);
    /// returns its SDP.
    pub async fn offer(&self, ice_restart: bool) -> Result<String> {
        let options = rtc::peer_connection::configuration::RTCOfferOptions { ice_restart };
        let offer = self
            .pc
            .create_offer(Some(options))
            .await
            .map_err(|e| Error::Webrtc(format!("create offer: {e}")))?;
        self.remember_section(&offer.sdp);
        let sdp = offer.sdp.clone();
        self.pc
            .set_local_description(offer)
            .await
            .map_err(|e| Error::Webrtc(format!("set local offer: {e}")))?;
        Ok(self
            .pc
            .local_description()
            .await
            .map(|d| d.sdp)
            .unwrap_or(sdp))
    }

    /// Applies the other side's answer to our offer.
    pub async fn apply_answer(&self, sdp: String) -> Result<()> {
        let answer = RTCSessionDescription::answer(sdp::drop_rejected_ice_credentials(&sdp))
            .map_err(|e| Error::BadRemote(format!("answer SDP: {e}")))?;
        self.pc
            .set_remote_description(answer)
            .await
            .map_err(|e| Error::BadRemote(format!("apply answer: {e}")))?;
        self.audio_level_id.store(
            crate::media::audio_level_id(&sdp).unwrap_or(0),
            Ordering::Relaxed,
        );
        Ok(())
    }

    /// Applies the other side's offer and returns our answer SDP. A later offer (an ICE
    /// restart) renegotiates the same connection.
    pub async fn answer(&self, offer_sdp: String) -> Result<String> {
        // Our answer mirrors the offer's sections, so the offer names the section for
        // candidates gathered before the answer exists; the answer refines it below.
        self.remember_section(&offer_sdp);
        let offer = RTCSessionDescription::offer(sdp::drop_rejected_ice_credentials(&offer_sdp))
            .map_err(|e| Error::BadRemote(format!("offer SDP: {e}")))?;
        self.pc
            .set_remote_description(offer)
            .await
            .map_err(|e| Error::BadRemote(format!("apply offer: {e}")))?;
        let answer = self
            .pc
            .create_answer(None)
            .await
            .map_err(|e| Error::Webrtc(format!("create answer: {e}")))?;
        self.remember_section(&answer.sdp);
        let sdp = answer.sdp.clone();
        self.pc
            .set_local_description(answer)
            .await
            .map_err(|e| Error::Webrtc(format!("set local answer: {e}")))?;
        let sdp = self
            .pc
            .local_description()
            .await
            .map(|d| d.sdp)
            .unwrap_or(sdp);
        Ok(sdp::move_candidates_out_of_rejected_sections(&sdp))
    }

    /// Whether a remote description is set (remote candidates can be added).
    pub async fn has_remote_description(&self) -> bool {
        self.pc.remote_description().await.is_some()
    }

    /// Adds a remote candidate given as LiveKit's candidate JSON. The end-of-candidates
    /// marker is accepted and skipped; so are TCP candidates without
    /// [`PeerConfig::ice_tcp`] (`webrtc` would dial them with nothing to pair them
    /// with) and `tcptype active` ones (they dial us; nothing to do with them).
    pub async fn add_candidate(&self, json: &str) -> Result<()> {
        let Some(init) = sdp::parse_remote_candidate(json, self.ice_tcp)? else {
            return Ok(());
        };
        self.pc
            .add_ice_candidate(init)
            .await
            .map_err(|e| Error::BadRemote(format!("add candidate: {e}")))
    }

    /// Replaces the STUN/TURN servers (LiveKit hands out new TURN credentials with each
    /// resume). They are used from the next ICE gathering on: the next ICE restart.
    pub async fn set_ice_servers(&self, servers: &[IceServer]) -> Result<()> {
        *outpost_sync::lock(&self.ice_servers) = servers.to_vec();
        self.pc
            .set_configuration(ice_configuration(
                &self.relays.rewrite(servers),
                self.relay_only,
            ))
            .await
            .map_err(|e| Error::Webrtc(format!("set ICE servers: {e}")))
    }

    /// The path the connection uses now (its selected candidate pair); `None` before
    /// ICE has selected one, or on a connection without data channels.
    pub async fn selected_path(&self) -> Option<SelectedPath> {
        use rtc::peer_connection::transport::{RTCIceCandidateType, RTCIceProtocol};
        let sctp = self.pc.sctp().await?;
        let pair = sctp
            .transport()
            .ice_transport()
            .get_selected_candidate_pair()
            .await
            .ok()??;
        let (local, remote) = (pair.local(), pair.remote());
        let tcp = local.protocol == RTCIceProtocol::Tcp;
        let kind = match (local.typ == RTCIceCandidateType::Relay, tcp) {
            (true, _) => match format!("{}:{}", local.address, local.port).parse() {
                Ok(addr) => self.relays.kind_of_relay(addr),
                Err(_) => PathKind::TurnUdp,
            },
            (false, true) => PathKind::Tcp,
            (false, false) => PathKind::Udp,
        };
        Some(SelectedPath {
            kind,
            local: format!("{}:{}", local.address, local.port),
            remote: format!("{}:{}", remote.address, remote.port),
        })
    }

    /// How each kind of path this connection could take has fared so far (UDP, TCP,
    /// TURN over UDP, TCP, TLS): the servers it was tried against and what happened, for
    /// telling a user why nothing got through.
    pub async fn path_report(&self) -> Vec<crate::paths::PathAttempt> {
        use rtc::peer_connection::transport::{RTCIceCandidateType, RTCIceTcpCandidateType};
        use webrtc::peer_connection::{RTCStatsReportEntry as E, StatsSelector};
        let report = self
            .pc
            .get_stats(std::time::Instant::now(), StatsSelector::None)
            .await;
        let mut facts = crate::paths::Facts {
            failures: self.failures.all(),
            ..Default::default()
        };
        for entry in report.iter() {
            match entry {
                E::LocalCandidate(c) => {
                    let addr = format!("{}:{}", c.address.as_deref().unwrap_or(""), c.port);
                    let kind = if c.candidate_type == RTCIceCandidateType::Relay {
                        match addr.parse() {
                            Ok(a) => self.relays.kind_of_relay(a),
                            Err(_) => PathKind::TurnUdp,
                        }
                    } else if c.protocol.eq_ignore_ascii_case("tcp") {
                        PathKind::Tcp
                    } else {
                        PathKind::Udp
                    };
                    // A pair names its local candidate by the candidate's own id; the
                    // stats entry's id carries a type prefix.
                    let id = c.stats.id.as_str();
                    facts.locals.push(crate::paths::Local {
                        id: id
                            .strip_prefix("RTCLocalIceCandidate_")
                            .unwrap_or(id)
                            .to_owned(),
                        kind,
                    });
                }
                E::RemoteCandidate(c) if c.candidate_type != RTCIceCandidateType::Relay => {
                    let addr = format!("{}:{}", c.address.as_deref().unwrap_or(""), c.port);
                    if !c.protocol.eq_ignore_ascii_case("tcp") {
                        facts.remote_udp.push(addr);
                    } else if c.tcp_type == RTCIceTcpCandidateType::Passive {
                        facts.remote_tcp.push(addr);
                    }
                }
                E::IceCandidatePair(p) => facts.pairs.push(crate::paths::Pair {
                    local_id: p.local_candidate_id.clone(),
                    succeeded: p.state
                        == rtc::statistics::stats::ice_candidate_pair::RTCStatsIceCandidatePairState::Succeeded,
                    requests: p.requests_sent,
                }),
                _ => {}
            }
        }
        let servers = outpost_sync::lock(&self.ice_servers).clone();
        facts.turn = crate::turn_tunnel::turn_servers(&servers);
        crate::paths::judge(&facts)
    }

    /// Why streams to TURN servers over TCP or TLS failed (newest last, at most 16):
    /// what to tell a user whose connection found no path.
    pub fn relay_failures(&self) -> Vec<crate::turn_tunnel::TunnelFailure> {
        self.failures.all()
    }

    /// Closes the connection and its channels.
    pub async fn close(&self) {
        if let Err(e) = self.pc.close().await {
            tracing::debug!("closing peer connection: {e}");
        }
    }

    fn remember_section(&self, local_sdp: &str) {
        if let Some(found) = sdp::candidate_section(local_sdp) {
            *outpost_sync::lock(&self.section) = found;
        }
    }
}
