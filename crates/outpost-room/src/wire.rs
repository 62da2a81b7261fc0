//! WebRTC transport: the peer connections of a participant and their `_reliable` /
//! `_lossy` data channels. The client's "publisher" connection is one we answer (the
//! client offers and creates the channels); with `subscriber_primary`, the
//! "subscriber" connection is one we offer, with channels we create.
//!
//! This is the only module that imports `webrtc` (and its `rtc` core, for the two
//! setting types `webrtc` does not re-export). The rest of the crate sees plain SDP
//! strings, candidate JSON strings and byte messages.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::sync::mpsc;
use webrtc::data_channel::{DataChannel, DataChannelEvent, RTCDataChannelInit};
use webrtc::peer_connection::{
    PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCConfigurationBuilder,
    RTCIceCandidateInit, RTCPeerConnectionIceEvent, RTCPeerConnectionState, RTCSessionDescription,
    SettingEngineBuilder,
};

use crate::error::{Error, Result};
use crate::proto::Reliability;

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

/// The Tokio runtime of `webrtc`, except that UDP sockets get large kernel buffers.
///
/// With the default receive buffer (~200 KiB) a burst from an SDK's SCTP sender
/// overflows the socket and the kernel drops datagrams (`RcvbufErrors` in
/// /proc/net/snmp); SCTP then treats that as congestion and throughput collapses.
#[derive(Debug)]
struct BigBufferRuntime {
    inner: webrtc::runtime::TokioRuntime,
    buffer: usize,
}

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

impl webrtc::runtime::Runtime for BigBufferRuntime {
    fn spawn(&self, future: BoxFuture<'static, ()>) -> Box<dyn webrtc::runtime::JoinHandle> {
        self.inner.spawn(future)
    }

    fn spawn_reactor(
        &self,
        pool_size: usize,
        future: BoxFuture<'static, ()>,
    ) -> Box<dyn webrtc::runtime::JoinHandle> {
        self.inner.spawn_reactor(pool_size, future)
    }

    fn wrap_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> std::io::Result<Arc<dyn webrtc::runtime::AsyncUdpSocket>> {
        let sock = socket2::SockRef::from(&socket);
        // The kernel caps these at net.core.{r,w}mem_max; a smaller buffer still works.
        if let Err(e) = sock.set_recv_buffer_size(self.buffer) {
            tracing::debug!("SO_RCVBUF {}: {e}", self.buffer);
        }
        if let Err(e) = sock.set_send_buffer_size(self.buffer) {
            tracing::debug!("SO_SNDBUF {}: {e}", self.buffer);
        }
        self.inner.wrap_udp_socket(socket)
    }

    fn wrap_tcp_listener(
        &self,
        listener: std::net::TcpListener,
    ) -> std::io::Result<Arc<dyn webrtc::runtime::AsyncTcpListener>> {
        self.inner.wrap_tcp_listener(listener)
    }

    fn connect_tcp<'a>(
        &'a self,
        remote: std::net::SocketAddr,
    ) -> BoxFuture<'a, std::io::Result<Arc<dyn webrtc::runtime::AsyncTcpStream>>> {
        self.inner.connect_tcp(remote)
    }

    fn resolve_host<'a>(
        &'a self,
        host: &'a str,
    ) -> BoxFuture<'a, std::io::Result<Vec<std::net::SocketAddr>>> {
        self.inner.resolve_host(host)
    }

    fn now(&self) -> std::time::Instant {
        self.inner.now()
    }

    fn sleep(&self, duration: std::time::Duration) -> BoxFuture<'static, ()> {
        self.inner.sleep(duration)
    }

    fn interval(&self, period: std::time::Duration) -> Box<dyn webrtc::runtime::AsyncInterval> {
        self.inner.interval(period)
    }

    fn block_on(&self, future: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>>) {
        self.inner.block_on(future)
    }

    fn name(&self) -> &'static str {
        "tokio+bigbuf"
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
    /// The connection failed or was closed.
    Down(Role, &'static str),
    /// A data channel LiveKit uses is open: one the client opened on its publisher
    /// connection, or one we created on the subscriber connection.
    Channel(Role, Reliability, DataChannelHandle),
}

/// A data channel the client opened: read with [`DataChannelHandle::recv`], write with
/// [`DataChannelHandle::send`]. Cloning shares the channel.
#[derive(Clone)]
pub struct DataChannelHandle {
    dc: Arc<dyn DataChannel>,
}

impl std::fmt::Debug for DataChannelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataChannelHandle")
            .field("id", &self.dc.id())
            .finish()
    }
}

impl DataChannelHandle {
    /// Next binary or text message; `None` once the channel has closed.
    pub async fn recv(&self) -> Option<BytesMut> {
        loop {
            match self.dc.poll().await? {
                DataChannelEvent::OnMessage(msg) => return Some(msg.data),
                DataChannelEvent::OnClose => return None,
                _ => {}
            }
        }
    }

    /// Waits until a channel we created opens; false if it closed first.
    pub async fn opened(&self) -> bool {
        loop {
            match self.dc.poll().await {
                Some(DataChannelEvent::OnOpen) => return true,
                Some(DataChannelEvent::OnClose) | None => return false,
                Some(_) => {}
            }
        }
    }

    /// Sends one message; waits while the channel's send buffer is over its limit.
    pub async fn send(&self, data: &[u8]) -> Result<()> {
        self.dc
            .send(BytesMut::from(data))
            .await
            .map_err(|e| Error::Webrtc(format!("data channel send: {e}")))
    }
}

struct Handler {
    role: Role,
    events: mpsc::UnboundedSender<WireEvent>,
    /// The `a=mid` of the answer's application section, used in outgoing candidates.
    mid: Arc<std::sync::Mutex<String>>,
}

#[async_trait::async_trait]
impl PeerConnectionEventHandler for Handler {
    async fn on_ice_candidate(&self, event: RTCPeerConnectionIceEvent) {
        let Ok(init) = event.candidate.to_json() else {
            return;
        };
        let mid = self
            .mid
            .lock()
            .map(|m| m.clone())
            .unwrap_or_else(|_| "0".to_owned());
        let json = serde_json::json!({
            "candidate": init.candidate,
            "sdpMid": mid,
            "sdpMLineIndex": 0,
        });
        let _ = self
            .events
            .send(WireEvent::LocalCandidate(self.role, json.to_string()));
    }

    async fn on_connection_state_change(&self, state: RTCPeerConnectionState) {
        let event = match state {
            RTCPeerConnectionState::Connected => WireEvent::Connected(self.role),
            RTCPeerConnectionState::Failed => WireEvent::Down(self.role, "peer connection failed"),
            RTCPeerConnectionState::Closed => WireEvent::Down(self.role, "peer connection closed"),
            _ => return,
        };
        let _ = self.events.send(event);
    }

    async fn on_data_channel(&self, dc: Arc<dyn DataChannel>) {
        if self.role == Role::Subscriber {
            // Clients do not open channels on the connection we offer; ours are
            // reported by the session once they open.
            return;
        }
        let label = dc.label().await.unwrap_or_default();
        let reliability = match label.as_str() {
            "_reliable" => Reliability::Reliable,
            "_lossy" => Reliability::Lossy,
            other => {
                tracing::debug!(label = other, "ignoring data channel LiveKit does not use");
                return;
            }
        };
        let _ = self.events.send(WireEvent::Channel(
            self.role,
            reliability,
            DataChannelHandle { dc },
        ));
    }
}

/// The server side of one of a client's peer connections.
pub struct Peer {
    pc: Arc<dyn PeerConnection>,
    mid: Arc<std::sync::Mutex<String>>,
    role: Role,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl Peer {
    /// Creates the peer connection; its events arrive on `events`, tagged `role`.
    pub async fn new(
        config: &WireConfig,
        role: Role,
        events: mpsc::UnboundedSender<WireEvent>,
    ) -> Result<Self> {
        let loopback = config.udp_ip.is_loopback();
        let settings = SettingEngineBuilder::new()
            // mDNS would open a multicast socket, which fails (ENODEV) inside a bare
            // network namespace; LiveKit servers hand out plain IP candidates anyway.
            .with_multicast_dns_mode(rtc::ice::mdns::MulticastDnsMode::Disabled)
            .with_include_loopback_candidate(loopback)
            .with_sctp_max_message_size(
                rtc::peer_connection::configuration::setting_engine::SctpMaxMessageSize::Bounded(
                    config.sctp_max_message_size,
                ),
            )
            .with_sctp_max_receive_buffer_size(config.sctp_receive_buffer)
            .build();
        let mid = Arc::new(std::sync::Mutex::new("0".to_owned()));
        let handler = Arc::new(Handler {
            role,
            events,
            mid: mid.clone(),
        });
        let mut builder = PeerConnectionBuilder::new()
            .with_configuration(RTCConfigurationBuilder::new().build())
            .with_setting_engine(settings)
            .with_handler(handler);
        if config.udp_socket_buffer > 0 {
            builder = builder.with_runtime(Arc::new(BigBufferRuntime {
                inner: webrtc::runtime::TokioRuntime,
                buffer: config.udp_socket_buffer,
            }));
        }
        let pc = builder
            .with_udp_addrs(vec![std::net::SocketAddr::new(config.udp_ip, 0)])
            .with_data_channel_send_buffer_limit(config.send_buffer_limit)
            .build()
            .await
            .map_err(|e| Error::Webrtc(format!("create peer connection: {e}")))?;
        Ok(Self {
            pc: Arc::new(pc),
            mid,
            role,
        })
    }

    /// Creates LiveKit's `_reliable` (ordered, reliable) and `_lossy` (unordered, no
    /// retransmits) channels on a connection we offer, as livekit-server does on the
    /// subscriber connection when it is primary. They open after negotiation.
    pub async fn create_channels(&self) -> Result<Vec<(Reliability, DataChannelHandle)>> {
        let reliable = RTCDataChannelInit {
            ordered: true,
            ..Default::default()
        };
        let lossy = RTCDataChannelInit {
            ordered: false,
            max_retransmits: Some(0),
            ..Default::default()
        };
        let mut out = Vec::new();
        for (label, kind, init) in [
            ("_reliable", Reliability::Reliable, reliable),
            ("_lossy", Reliability::Lossy, lossy),
        ] {
            let dc = self
                .pc
                .create_data_channel(label, Some(init))
                .await
                .map_err(|e| Error::Webrtc(format!("create data channel {label}: {e}")))?;
            out.push((kind, DataChannelHandle { dc }));
        }
        Ok(out)
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
        let sdp = offer.sdp.clone();
        self.pc
            .set_local_description(offer)
            .await
            .map_err(|e| Error::Webrtc(format!("set local offer: {e}")))?;
        let sdp = self
            .pc
            .local_description()
            .await
            .map(|d| d.sdp)
            .unwrap_or(sdp);
        if let Some(mid) = application_mid(&sdp) {
            if let Ok(mut m) = self.mid.lock() {
                *m = mid;
            }
        }
        Ok(sdp)
    }

    /// Applies the client's answer to our offer.
    pub async fn apply_answer(&self, sdp: String) -> Result<()> {
        let answer = RTCSessionDescription::answer(sdp)
            .map_err(|e| Error::BadSignal(format!("answer SDP: {e}")))?;
        self.pc
            .set_remote_description(answer)
            .await
            .map_err(|e| Error::BadSignal(format!("set remote answer: {e}")))
    }

    /// Applies the client's offer and returns our answer SDP. A later offer (an ICE
    /// restart after a resume) renegotiates the same connection.
    pub async fn answer(&self, offer_sdp: String) -> Result<String> {
        if let Some(mid) = application_mid(&offer_sdp) {
            if let Ok(mut m) = self.mid.lock() {
                *m = mid;
            }
        }
        let offer_sdp = drop_rejected_ice_credentials(&offer_sdp);
        let offer = RTCSessionDescription::offer(offer_sdp)
            .map_err(|e| Error::BadSignal(format!("offer SDP: {e}")))?;
        self.pc
            .set_remote_description(offer)
            .await
            .map_err(|e| Error::BadSignal(format!("set remote offer: {e}")))?;
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
        let sdp = self
            .pc
            .local_description()
            .await
            .map(|d| d.sdp)
            .unwrap_or(sdp);
        Ok(move_candidates_out_of_rejected_sections(&sdp))
    }

    /// Adds a remote candidate given as LiveKit's candidate JSON.
    pub async fn add_candidate(&self, json: &str) -> Result<()> {
        let init: RTCIceCandidateInit = serde_json::from_str(json)
            .map_err(|e| Error::BadSignal(format!("candidate JSON {json:?}: {e}")))?;
        if init.candidate.is_empty() {
            // End-of-candidates marker.
            return Ok(());
        }
        if is_tcp_candidate(&init.candidate) {
            // We only listen on UDP; dialling the client's TCP candidates just fails.
            return Ok(());
        }
        self.pc
            .add_ice_candidate(init)
            .await
            .map_err(|e| Error::BadSignal(format!("add candidate: {e}")))
    }

    /// Closes the connection and its channels.
    pub async fn close(&self) {
        if let Err(e) = self.pc.close().await {
            tracing::debug!("closing peer connection: {e}");
        }
    }
}

/// Whether an ICE candidate line uses TCP (`candidate:<foundation> <component> tcp …`).
pub(crate) fn is_tcp_candidate(candidate: &str) -> bool {
    candidate
        .split_whitespace()
        .nth(2)
        .is_some_and(|t| t.eq_ignore_ascii_case("tcp"))
}

/// Removes `a=ice-ufrag` / `a=ice-pwd` from rejected (port 0) media sections.
///
/// In an ICE-restart offer libwebrtc (the official SDKs) gives each rejected section
/// credentials of its own, while only the bundled sections carry the new ones.
/// `webrtc` 0.21 compares the credentials of every section that is not `inactive`
/// and refuses the offer as conflicting, although rejected sections take no part in
/// ICE. Without their credentials it reads the bundle's.
pub(crate) fn drop_rejected_ice_credentials(sdp: &str) -> String {
    let mut out = String::with_capacity(sdp.len());
    let mut rejected = false;
    for line in sdp.split_inclusive('\n') {
        let bare = line.trim_end();
        if let Some(m) = bare.strip_prefix("m=") {
            rejected = m.split_whitespace().nth(1) == Some("0");
        } else if rejected && (bare.starts_with("a=ice-ufrag:") || bare.starts_with("a=ice-pwd:")) {
            continue;
        }
        out.push_str(line);
    }
    out
}

/// Moves `a=candidate` lines out of rejected (port 0) media sections into the first
/// accepted one.
///
/// After an ICE restart `webrtc` 0.21 writes the candidates it already gathered into
/// the answer's first media section, which is a rejected audio section when the offer
/// came from libwebrtc. libwebrtc then ignores them, and the restarted session has no
/// candidates from us.
pub(crate) fn move_candidates_out_of_rejected_sections(sdp: &str) -> String {
    let mut sections: Vec<(bool, Vec<&str>)> = vec![(false, Vec::new())];
    let mut moved = Vec::new();
    for line in sdp.split_inclusive('\n') {
        let bare = line.trim_end();
        if let Some(m) = bare.strip_prefix("m=") {
            sections.push((m.split_whitespace().nth(1) == Some("0"), vec![line]));
            continue;
        }
        let Some((rejected, lines)) = sections.last_mut() else {
            continue;
        };
        if *rejected && bare.starts_with("a=candidate:") {
            moved.push(line);
        } else {
            lines.push(line);
        }
    }
    if moved.is_empty() {
        return sdp.to_owned();
    }
    let mut out = String::with_capacity(sdp.len());
    let mut placed = false;
    for (i, (rejected, lines)) in sections.iter().enumerate() {
        for line in lines {
            out.push_str(line);
        }
        if i > 0 && !rejected && !placed {
            for line in &moved {
                out.push_str(line);
            }
            placed = true;
        }
    }
    out
}

/// The `a=mid` of the first `m=application` section of an SDP, if any.
pub(crate) fn application_mid(sdp: &str) -> Option<String> {
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

/// Baseline for benchmarks: pushes `total` bytes in `chunk`-byte messages over an
/// ordered data channel from a plain `webrtc` offerer straight into a [`Peer`] (publisher role)
/// configured like the server's (no signaling, no relay, no SDK), on loopback.
/// Returns the seconds from the first send until the last byte arrived.
pub async fn direct_pair_seconds(config: &WireConfig, total: usize, chunk: usize) -> Result<f64> {
    struct Offerer {
        candidates: mpsc::UnboundedSender<String>,
    }
    #[async_trait::async_trait]
    impl PeerConnectionEventHandler for Offerer {
        async fn on_ice_candidate(&self, event: RTCPeerConnectionIceEvent) {
            if let Ok(init) = event.candidate.to_json() {
                let json = serde_json::json!({"candidate": init.candidate, "sdpMid": "0", "sdpMLineIndex": 0});
                let _ = self.candidates.send(json.to_string());
            }
        }
    }
    let w = |e: webrtc::error::Error| Error::Webrtc(e.to_string());
    let mut config = config.clone();
    config.udp_ip = IpAddr::from([127, 0, 0, 1]);
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let answerer = Peer::new(&config, Role::Publisher, ev_tx).await?;
    let (cand_tx, mut cand_rx) = mpsc::unbounded_channel();
    let settings = SettingEngineBuilder::new()
        .with_multicast_dns_mode(rtc::ice::mdns::MulticastDnsMode::Disabled)
        .with_include_loopback_candidate(true)
        .build();
    let offerer = PeerConnectionBuilder::new()
        .with_configuration(RTCConfigurationBuilder::new().build())
        .with_setting_engine(settings)
        .with_handler(Arc::new(Offerer {
            candidates: cand_tx,
        }))
        .with_udp_addrs(vec!["127.0.0.1:0".to_owned()])
        .with_data_channel_send_buffer_limit(config.send_buffer_limit)
        .build()
        .await
        .map_err(w)?;
    let dc = offerer
        .create_data_channel("_reliable", None)
        .await
        .map_err(w)?;
    let offer = offerer.create_offer(None).await.map_err(w)?;
    offerer
        .set_local_description(offer.clone())
        .await
        .map_err(w)?;
    let answer = answerer.answer(offer.sdp).await?;
    offerer
        .set_remote_description(RTCSessionDescription::answer(answer).map_err(w)?)
        .await
        .map_err(w)?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
    let mut incoming = None;
    while incoming.is_none() {
        tokio::select! {
            Some(c) = cand_rx.recv() => answerer.add_candidate(&c).await?,
            Some(ev) = ev_rx.recv() => match ev {
                WireEvent::LocalCandidate(_, c) => {
                    let init: RTCIceCandidateInit = serde_json::from_str(&c)
                        .map_err(|e| Error::Webrtc(e.to_string()))?;
                    offerer.add_ice_candidate(init).await.map_err(w)?;
                }
                WireEvent::Channel(_, _, handle) => incoming = Some(handle),
                _ => {}
            },
            _ = tokio::time::sleep_until(deadline) => return Err(Error::Webrtc("direct pair did not connect".into())),
        }
    }
    while let Some(ev) = dc.poll().await {
        if matches!(ev, DataChannelEvent::OnOpen) {
            break;
        }
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
        dc.send(BytesMut::from(&payload[..n])).await.map_err(w)?;
        sent += n;
    }
    let got = reader.await.map_err(|e| Error::Webrtc(e.to_string()))?;
    let secs = started.elapsed().as_secs_f64();
    let _ = offerer.close().await;
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

    #[test]
    fn tcp_candidates_are_recognised() {
        assert!(is_tcp_candidate(
            "candidate:1 1 tcp 1518280447 10.0.0.2 9 typ host tcptype active"
        ));
        assert!(!is_tcp_candidate(
            "candidate:1 1 udp 2122260223 10.0.0.2 5000 typ host"
        ));
        assert!(!is_tcp_candidate("garbage"));
    }

    #[test]
    fn rejected_sections_lose_their_ice_credentials() {
        let sdp = "v=0\r\na=group:BUNDLE 1\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=ice-ufrag:old\r\na=ice-pwd:oldpwd\r\na=mid:0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=ice-ufrag:new\r\na=ice-pwd:newpwd\r\na=mid:1\r\n";
        let out = drop_rejected_ice_credentials(sdp);
        assert!(!out.contains("old"), "{out}");
        assert!(out.contains("a=ice-ufrag:new\r\n") && out.contains("a=ice-pwd:newpwd\r\n"));
        assert!(out.contains("m=audio 0 ") && out.contains("a=mid:0\r\n"));
        // Nothing rejected: unchanged.
        let plain = "v=0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=ice-ufrag:x\r\n";
        assert_eq!(drop_rejected_ice_credentials(plain), plain);
    }

    #[test]
    fn candidates_leave_rejected_sections() {
        let sdp = "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 0\r\na=mid:7\r\na=candidate:1 1 udp 1 10.0.0.1 5 typ host\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:13\r\na=ice-ufrag:u\r\n";
        let out = move_candidates_out_of_rejected_sections(sdp);
        assert_eq!(
            out,
            "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 0\r\na=mid:7\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:13\r\na=ice-ufrag:u\r\na=candidate:1 1 udp 1 10.0.0.1 5 typ host\r\n"
        );
        let plain = "v=0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=candidate:1 1 udp 1 10.0.0.1 5 typ host\r\n";
        assert_eq!(move_candidates_out_of_rejected_sections(plain), plain);
    }

    #[test]
    fn finds_application_mid() {
        let sdp = "v=0\r\nm=audio 9 UDP 0\r\na=mid:0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\n";
        assert_eq!(application_mid(sdp).as_deref(), Some("1"));
        assert_eq!(application_mid("v=0\r\n"), None);
    }
}
