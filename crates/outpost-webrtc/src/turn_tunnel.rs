//! TURN over TCP and TLS, under `webrtc` 0.21's TURN client, which speaks UDP only.
//!
//! `webrtc`'s relayer skips every `turns:` URL and every `?transport=tcp` one. LiveKit
//! hands out `turns:<domain>:443?transport=tcp` for networks that let nothing but TLS
//! on 443 through, so Outpost carries those itself, below the relayer, where `webrtc`
//! offers a public seam (its `Runtime`):
//!
//! - [`Relays::rewrite`] turns each such URL into `turn:<synthetic name>:<port>?transport=udp`
//!   (same credentials), remembering the real server. The name resolves (through
//!   [`Relays::resolve`], called from the runtime's `resolve_host`) to a synthetic
//!   address in 192.0.2.0/24 (TEST-NET-1, never routed), one per server.
//! - [`TunnelSocket`] wraps each UDP socket `webrtc` binds. A datagram to a synthetic
//!   address never reaches the kernel: it is written to a TCP or TLS stream to the real
//!   server, opened on first use, one per (socket, server), so each TURN allocation keeps
//!   its own 5-tuple as RFC 8656 wants. STUN and ChannelData messages delimit themselves
//!   on a stream (ChannelData is padded to 4 bytes, which `rtc-turn` always does), and the
//!   server's messages are split with `rtc`'s `TurnStreamDecoder` and handed back as
//!   datagrams from the synthetic address. Everything else goes to the real socket.
//! - `rtc-turn` still believes it is on UDP and retransmits unanswered requests; on a
//!   stream those repeats would reach the server twice (a second Allocate with the same
//!   transaction can be answered 437), so a request already sent is not sent again.
//!
//! What the relayer then does is unchanged: it allocates a UDP relay on the server, and
//! its relay candidates, permissions and channel bindings ride the stream.

use std::collections::{HashMap, VecDeque};
use std::io::IoSliceMut;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;
use webrtc::runtime::{AsyncUdpSocket, RecvMeta, Transmit};

use crate::ice::{IceServer, PathKind};
use crate::relay_flush::RelayFlush;

/// How the tunnel reaches a TURN server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamKind {
    Tcp,
    Tls,
}

/// A TURN server reached over a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// Host name or address as the URL names it (and TLS verifies).
    pub host: String,
    pub port: u16,
    pub kind: StreamKind,
    /// The address `webrtc` sends this server's datagrams to.
    pub synthetic: SocketAddr,
}

impl Target {
    fn name(&self) -> String {
        synthetic_name(self.synthetic)
    }
}

/// The synthetic host name of a synthetic address.
fn synthetic_name(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V4(v4) => format!("outpost-relay-{}.invalid", v4.octets()[3]),
        IpAddr::V6(_) => "outpost-relay.invalid".to_owned(),
    }
}

/// Whether `ip` is in the synthetic range.
fn is_synthetic(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v4) if v4.octets()[..3] == [192, 0, 2])
}

/// The TURN servers one peer connection reaches over streams, and how.
#[derive(Debug, Default)]
pub(crate) struct Relays {
    targets: Mutex<Vec<Target>>,
    /// Relayed addresses the servers allocated through a stream (seen in their Allocate
    /// answers), and over what: how to tell a relay candidate's path (`webrtc` does not
    /// keep the URL a local candidate was gathered through).
    relayed: Mutex<HashMap<SocketAddr, StreamKind>>,
}

/// A TURN URL taken apart: `turn:` / `turns:`, host, port, transport.
#[derive(Debug, PartialEq, Eq)]
struct TurnUrl {
    secure: bool,
    host: String,
    port: u16,
    tcp: bool,
}

fn parse_turn_url(url: &str) -> Option<TurnUrl> {
    let (secure, rest) = if let Some(r) = url.strip_prefix("turns:") {
        (true, r)
    } else {
        (false, url.strip_prefix("turn:")?)
    };
    let (hostport, query) = rest.split_once('?').unwrap_or((rest, ""));
    let transport = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("transport="))
        .map(str::to_ascii_lowercase);
    // turns: is TLS over TCP unless it says udp (DTLS, which nothing here speaks).
    let tcp = match transport.as_deref() {
        Some("tcp") => true,
        Some("udp") => false,
        None => secure,
        Some(_) => return None,
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        (h.to_owned(), after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (hostport.to_owned(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None if secure => 5349,
        None => 3478,
    };
    if host.is_empty() {
        return None;
    }
    Some(TurnUrl {
        secure,
        host,
        port,
        tcp,
    })
}

/// The TURN servers in `servers` by how they are reached (`host:port`).
pub(crate) fn turn_servers(servers: &[IceServer]) -> Vec<(PathKind, String)> {
    servers
        .iter()
        .flat_map(|s| s.urls.iter())
        .filter_map(|u| parse_turn_url(u))
        .filter_map(|u| {
            let kind = match (u.secure, u.tcp) {
                (true, true) => PathKind::TurnTls,
                (false, true) => PathKind::TurnTcp,
                (false, false) => PathKind::TurnUdp,
                // TURN over DTLS: nothing here speaks it.
                (true, false) => return None,
            };
            let host = if u.host.contains(':') {
                format!("[{}]", u.host)
            } else {
                u.host
            };
            Some((kind, format!("{host}:{}", u.port)))
        })
        .collect()
}

impl Relays {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Target>> {
        outpost_sync::lock(&self.targets)
    }

    /// `servers` with every TURN URL over TCP or TLS replaced by a UDP URL naming a
    /// synthetic host this tunnel serves.
    pub(crate) fn rewrite(&self, servers: &[IceServer]) -> Vec<IceServer> {
        servers
            .iter()
            .map(|s| IceServer {
                urls: s.urls.iter().map(|u| self.rewrite_url(u)).collect(),
                ..s.clone()
            })
            .collect()
    }

    fn rewrite_url(&self, url: &str) -> String {
        let Some(parsed) = parse_turn_url(url) else {
            return url.to_owned();
        };
        if !parsed.tcp {
            return url.to_owned();
        }
        let kind = if parsed.secure {
            StreamKind::Tls
        } else {
            StreamKind::Tcp
        };
        let mut targets = self.lock();
        let existing = targets
            .iter()
            .find(|t| t.host == parsed.host && t.port == parsed.port && t.kind == kind)
            .cloned();
        let target = match existing {
            Some(t) => t,
            None => {
                let n = u8::try_from(targets.len() + 1).unwrap_or(u8::MAX);
                let t = Target {
                    host: parsed.host,
                    port: parsed.port,
                    kind,
                    synthetic: SocketAddr::new(Ipv4Addr::new(192, 0, 2, n).into(), parsed.port),
                };
                targets.push(t.clone());
                t
            }
        };
        tracing::debug!(url, via = ?target.kind, "TURN server reached through the tunnel");
        format!("turn:{}:{}?transport=udp", target.name(), target.port)
    }

    /// The synthetic addresses of `host:port` when it is a synthetic name.
    pub(crate) fn resolve(&self, host: &str) -> Option<Vec<SocketAddr>> {
        let (name, port) = host.rsplit_once(':')?;
        let port: u16 = port.parse().ok()?;
        self.lock()
            .iter()
            .find(|t| t.name() == name && t.port == port)
            .map(|t| vec![t.synthetic])
    }

    /// The server behind a synthetic address.
    pub(crate) fn target(&self, addr: SocketAddr) -> Option<Target> {
        if !is_synthetic(addr.ip()) {
            return None;
        }
        self.lock().iter().find(|t| t.synthetic == addr).cloned()
    }

    /// How the relay candidate with relayed address `addr` reaches its TURN server:
    /// over a stream when a stream's Allocate answer named it, else over UDP.
    pub(crate) fn kind_of_relay(&self, addr: SocketAddr) -> PathKind {
        let kind = outpost_sync::lock(&self.relayed).get(&addr).copied();
        match kind {
            Some(StreamKind::Tls) => PathKind::TurnTls,
            Some(StreamKind::Tcp) => PathKind::TurnTcp,
            None => PathKind::TurnUdp,
        }
    }

    /// Notes the relayed address in `msg` when it is a successful Allocate answer.
    fn note_allocation(&self, msg: &[u8], kind: StreamKind) {
        // Allocate success response: method 0x003, class success.
        if msg.len() < 20 || msg[..2] != [0x01, 0x03] {
            return;
        }
        let mut m = rtc::stun::message::Message::new();
        m.raw = msg.to_vec();
        if m.decode().is_err() {
            return;
        }
        let mut relayed = rtc::turn::proto::relayaddr::RelayedAddress::default();
        use rtc::stun::message::Getter as _;
        if relayed.get_from(&m).is_ok() {
            let mut map = outpost_sync::lock(&self.relayed);
            if map.len() < 64 {
                map.insert(SocketAddr::new(relayed.ip, relayed.port), kind);
            }
        }
    }
}

/// What happened to the tunnel's streams, for a report of the paths tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelFailure {
    /// `TURN/TCP` or `TURN/TLS`.
    pub kind: PathKind,
    /// `host:port`.
    pub server: String,
    /// Why, in one sentence.
    pub reason: String,
}

/// Failures of one peer connection's tunnel, newest last (bounded).
#[derive(Debug, Default)]
pub(crate) struct Failures(Mutex<VecDeque<TunnelFailure>>);

impl Failures {
    fn push(&self, f: TunnelFailure) {
        let mut q = outpost_sync::lock(&self.0);
        if q.len() >= 16 {
            q.pop_front();
        }
        q.push_back(f);
    }

    pub(crate) fn all(&self) -> Vec<TunnelFailure> {
        outpost_sync::lock(&self.0).iter().cloned().collect()
    }
}

/// What the tunnel needs besides the socket: the servers, whom to trust, where to note
/// failures. Shared by every socket of one peer connection.
#[derive(Debug)]
pub(crate) struct TunnelConfig {
    pub relays: Arc<Relays>,
    /// Extra CA certificates (PEM) for TURN over TLS, beside the system's store.
    pub tls_roots: Vec<String>,
    pub failures: Arc<Failures>,
}

/// Messages from servers waiting for `poll_recv`, at most this many.
const INBOUND_LIMIT: usize = 1024;
/// Datagrams waiting to be written to one stream, at most this many (then they are
/// dropped, as a full UDP socket buffer would).
const OUTBOUND_LIMIT: usize = 512;
/// How long a STUN request's transaction id is remembered to drop retransmits.
const REQUEST_MEMORY: Duration = Duration::from_secs(60);
/// A failed stream is not opened again sooner than this.
const REDIAL_AFTER: Duration = Duration::from_secs(2);
/// Connect (and TLS handshake) deadline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct State {
    streams: HashMap<SocketAddr, Stream>,
    inbound: VecDeque<(SocketAddr, Vec<u8>)>,
    requests: SentRequests,
}

#[derive(Debug)]
struct Stream {
    tx: mpsc::Sender<Vec<u8>>,
    task: tokio::task::JoinHandle<()>,
    started: Instant,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Set once a stream was opened: until then receiving takes no lock (outpost-room's
    /// sockets, and every client connection without TURN over TCP or TLS, never open one).
    active: std::sync::atomic::AtomicBool,
    /// The receiving task, woken when a stream queues a message.
    waker: futures::task::AtomicWaker,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        outpost_sync::lock(&self.state)
    }
}

/// A UDP socket whose datagrams to synthetic TURN addresses travel over streams.
#[derive(Debug)]
pub(crate) struct TunnelSocket {
    real: Arc<dyn AsyncUdpSocket>,
    config: Arc<TunnelConfig>,
    shared: Arc<Shared>,
    /// The connection's extra driver passes while relayed (`relay_flush`), which this
    /// socket's sends inform and its receives carry out.
    flush: Arc<RelayFlush>,
}

impl TunnelSocket {
    pub(crate) fn new(
        real: Arc<dyn AsyncUdpSocket>,
        config: Arc<TunnelConfig>,
        flush: Arc<RelayFlush>,
    ) -> Self {
        Self {
            real,
            config,
            shared: Arc::new(Shared::default()),
            flush,
        }
    }

    fn send_tunnelled(&self, target: &Target, data: &[u8]) {
        let now = Instant::now();
        let mut state = self.shared.lock();
        let request = request_id(data);
        if let Some(id) = &request {
            if state.requests.contains(id, now) {
                tracing::trace!("dropping a retransmitted TURN request on a stream");
                return;
            }
        }
        let alive = state
            .streams
            .get(&target.synthetic)
            .is_some_and(|s| !s.task.is_finished());
        if !alive {
            if let Some(dead) = state.streams.get(&target.synthetic) {
                if now.duration_since(dead.started) < REDIAL_AFTER {
                    return;
                }
            }
            self.shared
                .active
                .store(true, std::sync::atomic::Ordering::Release);
            let (tx, rx) = mpsc::channel(OUTBOUND_LIMIT);
            let task = tokio::spawn(run_stream(
                target.clone(),
                self.config.clone(),
                rx,
                Arc::downgrade(&self.shared),
            ));
            state.streams.insert(
                target.synthetic,
                Stream {
                    tx,
                    task,
                    started: now,
                },
            );
        }
        let queued = state
            .streams
            .get(&target.synthetic)
            .is_some_and(|s| s.tx.try_send(data.to_vec()).is_ok());
        match (queued, request) {
            (true, Some(id)) => state.requests.insert(id, now),
            (true, None) => {}
            (false, _) => {
                tracing::debug!(server = %target.host, "TURN stream backlog full; datagram dropped");
            }
        }
    }
}

impl Drop for TunnelSocket {
    fn drop(&mut self) {
        for (_, s) in self.shared.lock().streams.drain() {
            s.task.abort();
        }
    }
}

/// The transaction id of a STUN request (`None` for indications, responses and
/// ChannelData, which are never repeats).
fn request_id(data: &[u8]) -> Option<[u8; 12]> {
    // STUN: first two bits 0, magic cookie at 4..8; the class bits (0x0110) are 0 for
    // a request.
    if data.len() < 20 || data[0] & 0xc0 != 0 || data[4..8] != [0x21, 0x12, 0xa4, 0x42] {
        return None;
    }
    if u16::from_be_bytes([data[0], data[1]]) & 0x0110 != 0 {
        return None;
    }
    let mut id = [0u8; 12];
    id.copy_from_slice(&data[8..20]);
    Some(id)
}

/// Requests sent on streams in the last [`REQUEST_MEMORY`] (bounded).
#[derive(Debug, Default)]
struct SentRequests(VecDeque<([u8; 12], Instant)>);

impl SentRequests {
    fn contains(&mut self, id: &[u8; 12], now: Instant) -> bool {
        while self
            .0
            .front()
            .is_some_and(|(_, at)| now.duration_since(*at) > REQUEST_MEMORY)
        {
            self.0.pop_front();
        }
        self.0.iter().any(|(known, _)| known == id)
    }

    fn insert(&mut self, id: [u8; 12], now: Instant) {
        if self.0.len() >= 256 {
            self.0.pop_front();
        }
        self.0.push_back((id, now));
    }
}

/// Opens the stream to `target` and carries messages both ways until it ends.
async fn run_stream(
    target: Target,
    config: Arc<TunnelConfig>,
    mut rx: mpsc::Receiver<Vec<u8>>,
    shared: Weak<Shared>,
) {
    let kind = match target.kind {
        StreamKind::Tcp => PathKind::TurnTcp,
        StreamKind::Tls => PathKind::TurnTls,
    };
    let server = format!("{}:{}", target.host, target.port);
    let fail = |reason: String| {
        tracing::info!(%server, via = %kind, %reason, "TURN stream failed");
        config.failures.push(TunnelFailure {
            kind,
            server: server.clone(),
            reason,
        });
    };
    let opened = tokio::time::timeout(CONNECT_TIMEOUT, open(&target, &config.tls_roots)).await;
    let stream = match opened {
        Ok(Ok(s)) => s,
        Ok(Err(reason)) => return fail(reason),
        Err(_) => return fail(format!("no answer within {CONNECT_TIMEOUT:?}")),
    };
    tracing::debug!(%server, via = %kind, "TURN stream open");
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut decoder = rtc::shared::turn_framing::TurnStreamDecoder::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            msg = rx.recv() => {
                let Some(first) = msg else { return };
                // Everything queued goes out in one write.
                let mut out = first;
                while let Ok(more) = rx.try_recv() {
                    out.extend_from_slice(&more);
                }
                let written = async {
                    writer.write_all(&out).await?;
                    writer.flush().await
                };
                if let Err(e) = written.await {
                    return fail(format!("writing: {e}"));
                }
            }
            n = reader.read(&mut buf) => {
                let n = match n {
                    Ok(0) => return fail("the server closed the connection".into()),
                    Ok(n) => n,
                    Err(e) => return fail(format!("reading: {e}")),
                };
                decoder.extend_from_slice(&buf[..n]);
                let Some(shared) = shared.upgrade() else { return };
                let mut state = shared.lock();
                loop {
                    match decoder.next_message() {
                        Ok(Some(m)) => {
                            config.relays.note_allocation(&m, target.kind);
                            if state.inbound.len() < INBOUND_LIMIT {
                                state.inbound.push_back((target.synthetic, m));
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            drop(state);
                            return fail(format!("the server sent something that is not TURN: {e}"));
                        }
                    }
                }
                drop(state);
                shared.waker.wake();
            }
        }
    }
}

/// A connected stream to a TURN server: plain TCP or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

async fn open(target: &Target, tls_roots: &[String]) -> Result<Box<dyn Io>, String> {
    let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let _ = tcp.set_nodelay(true);
    if target.kind == StreamKind::Tcp {
        return Ok(Box::new(tcp));
    }
    let config = outpost_tls::client_config(tls_roots).map_err(|e| e.to_string())?;
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from(target.host.clone())
        .map_err(|e| format!("{:?} is no TLS server name: {e}", target.host))?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| outpost_tls::explain(&e).unwrap_or_else(|| format!("TLS: {e}")))?;
    Ok(Box::new(tls))
}

impl AsyncUdpSocket for TunnelSocket {
    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.real.local_addr()
    }

    fn poll_send(
        &self,
        cx: &mut Context<'_>,
        transmit: &Transmit<'_>,
    ) -> Poll<std::io::Result<usize>> {
        self.flush.sent(transmit.contents);
        let Some(target) = self.config.relays.target(transmit.destination) else {
            return self.real.poll_send(cx, transmit);
        };
        // One datagram per segment (this socket reports no GSO, so there is one).
        let step = transmit
            .segment_size
            .filter(|s| *s > 0)
            .unwrap_or(transmit.contents.len().max(1));
        for datagram in transmit.contents.chunks(step) {
            self.send_tunnelled(&target, datagram);
        }
        Poll::Ready(Ok(transmit.contents.len()))
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<std::io::Result<usize>> {
        if self.flush.take(cx) {
            // A transient error: the driver takes another pass of its loop.
            return Poll::Ready(Err(std::io::ErrorKind::Interrupted.into()));
        }
        // Registered before looking, so a message queued after the look wakes us.
        self.shared.waker.register(cx.waker());
        if self
            .shared
            .active
            .load(std::sync::atomic::Ordering::Acquire)
        {
            let mut state = self.shared.lock();
            if let (Some((from, msg)), Some(buf), Some(m)) = (
                state.inbound.pop_front(),
                bufs.first_mut(),
                meta.first_mut(),
            ) {
                let n = msg.len().min(buf.len());
                buf[..n].copy_from_slice(&msg[..n]);
                let mut filled = RecvMeta::default();
                filled.addr = from;
                filled.len = n;
                filled.stride = n.max(1);
                *m = filled;
                return Poll::Ready(Ok(1));
            }
        }
        self.real.poll_recv(cx, bufs, meta)
    }

    fn max_gso_segments(&self) -> usize {
        1
    }

    fn max_gro_segments(&self) -> usize {
        self.real.max_gro_segments()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn turn_urls_parse() {
        assert_eq!(
            parse_turn_url("turns:turn.example.com:443?transport=tcp"),
            Some(TurnUrl {
                secure: true,
                host: "turn.example.com".into(),
                port: 443,
                tcp: true
            })
        );
        assert_eq!(
            parse_turn_url("turn:10.0.0.1:3478?transport=udp").map(|u| u.tcp),
            Some(false)
        );
        assert_eq!(
            parse_turn_url("turns:h").map(|u| (u.port, u.tcp)),
            Some((5349, true))
        );
        assert_eq!(
            parse_turn_url("turn:h").map(|u| (u.port, u.tcp)),
            Some((3478, false))
        );
        assert_eq!(
            parse_turn_url("turn:[::1]:3479?transport=tcp").map(|u| (u.host, u.port)),
            Some(("::1".to_owned(), 3479))
        );
        for bad in [
            "stun:h:1",
            "turn:",
            "turn:h:x",
            "turn:h:1?transport=sctp",
            "turns",
        ] {
            assert_eq!(parse_turn_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn stream_urls_are_rewritten_to_synthetic_udp_ones() {
        let relays = Relays::default();
        let servers = vec![IceServer {
            urls: vec![
                "turn:10.0.0.1:3478?transport=udp".into(),
                "turns:turn.example.com:443?transport=tcp".into(),
                "turn:10.0.0.1:3478?transport=tcp".into(),
                "stun:10.0.0.1:3478".into(),
            ],
            username: "u".into(),
            credential: "c".into(),
        }];
        let out = relays.rewrite(&servers);
        assert_eq!(out[0].username, "u");
        assert_eq!(out[0].urls[0], "turn:10.0.0.1:3478?transport=udp");
        assert_eq!(
            out[0].urls[1],
            "turn:outpost-relay-1.invalid:443?transport=udp"
        );
        assert_eq!(
            out[0].urls[2],
            "turn:outpost-relay-2.invalid:3478?transport=udp"
        );
        assert_eq!(out[0].urls[3], "stun:10.0.0.1:3478");
        // The same server again (fresh credentials after a resume): the same name.
        assert_eq!(relays.rewrite(&servers), out);

        let addr = relays.resolve("outpost-relay-1.invalid:443").unwrap()[0];
        assert_eq!(addr, "192.0.2.1:443".parse::<SocketAddr>().unwrap());
        let t = relays.target(addr).unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.kind),
            ("turn.example.com", 443, StreamKind::Tls)
        );
        assert!(relays.resolve("outpost-relay-1.invalid:444").is_none());
        assert!(relays.resolve("example.com:443").is_none());
        assert!(relays.target("10.0.0.1:3478".parse().unwrap()).is_none());
        // An Allocate answer through the TLS stream names the relayed address.
        let relayed: SocketAddr = "10.0.0.1:30001".parse().unwrap();
        let mut answer = rtc::stun::message::Message::new();
        answer.typ = rtc::stun::message::MessageType::new(
            rtc::stun::message::METHOD_ALLOCATE,
            rtc::stun::message::CLASS_SUCCESS_RESPONSE,
        );
        answer.new_transaction_id().unwrap();
        answer.write_header();
        use rtc::stun::message::Setter as _;
        rtc::turn::proto::relayaddr::RelayedAddress {
            ip: relayed.ip(),
            port: relayed.port(),
        }
        .add_to(&mut answer)
        .unwrap();
        assert_eq!(relays.kind_of_relay(relayed), PathKind::TurnUdp);
        relays.note_allocation(&answer.raw, StreamKind::Tls);
        assert_eq!(relays.kind_of_relay(relayed), PathKind::TurnTls);
        assert_eq!(
            relays.kind_of_relay("10.0.0.1:30002".parse().unwrap()),
            PathKind::TurnUdp
        );
    }

    #[test]
    fn only_stun_requests_have_a_transaction_to_remember() {
        let mut req = vec![0x00, 0x03, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
        req.extend_from_slice(&[9; 12]);
        assert_eq!(request_id(&req), Some([9; 12]));
        let mut sent = SentRequests::default();
        let now = Instant::now();
        assert!(!sent.contains(&[9; 12], now));
        sent.insert([9; 12], now);
        assert!(sent.contains(&[9; 12], now));
        assert!(!sent.contains(&[9; 12], now + REQUEST_MEMORY + Duration::from_secs(1)));
        // An indication (Send, 0x0016), a success response and ChannelData have none.
        let mut ind = req.clone();
        ind[1] = 0x16;
        assert_eq!(request_id(&ind), None);
        let mut ok = req.clone();
        ok[0] = 0x01;
        assert_eq!(request_id(&ok), None);
        assert_eq!(request_id(&[0x40, 0x00, 0x00, 0x01, 7, 0, 0, 0]), None);
        assert_eq!(request_id(&req[..19]), None);
    }
}
