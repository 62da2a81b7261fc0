//! The async runtime `webrtc` runs on: its Tokio runtime, with two changes made at the
//! seams it offers. UDP sockets get large kernel buffers when asked
//! ([`crate::PeerConfig::udp_socket_buffer`]), and every UDP socket is wrapped in a
//! [`TunnelSocket`] so TURN servers reached over TCP or TLS work under `webrtc`'s
//! UDP-only TURN client (see `turn_tunnel`); their synthetic host names resolve here.

use std::sync::Arc;

use crate::relay_flush::RelayFlush;
use crate::turn_tunnel::{TunnelConfig, TunnelSocket};

/// `webrtc`'s Tokio runtime plus socket buffers and the TURN tunnel.
#[derive(Debug)]
pub(crate) struct OutpostRuntime {
    pub(crate) inner: webrtc::runtime::TokioRuntime,
    /// Requested SO_RCVBUF and SO_SNDBUF, bytes; 0 keeps the system's.
    ///
    /// With the default receive buffer (~200 KiB) a burst from an SDK's SCTP sender
    /// overflows the socket and the kernel drops datagrams (`RcvbufErrors` in
    /// /proc/net/snmp); SCTP then treats that as congestion and throughput collapses.
    pub(crate) buffer: usize,
    pub(crate) tunnel: Arc<TunnelConfig>,
    /// Extra driver passes while relayed (`relay_flush`): sleeps mark a pass's end.
    pub(crate) flush: Arc<RelayFlush>,
}

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

impl webrtc::runtime::Runtime for OutpostRuntime {
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
        if self.buffer > 0 {
            let sock = socket2::SockRef::from(&socket);
            // The kernel caps these at net.core.{r,w}mem_max; a smaller buffer still works.
            if let Err(e) = sock.set_recv_buffer_size(self.buffer) {
                tracing::debug!("SO_RCVBUF {}: {e}", self.buffer);
            }
            if let Err(e) = sock.set_send_buffer_size(self.buffer) {
                tracing::debug!("SO_SNDBUF {}: {e}", self.buffer);
            }
        }
        let real = self.inner.wrap_udp_socket(socket)?;
        Ok(Arc::new(TunnelSocket::new(
            real,
            self.tunnel.clone(),
            self.flush.clone(),
        )))
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
        match self.tunnel.relays.resolve(host) {
            Some(addrs) => Box::pin(async move { Ok(addrs) }),
            None => self.inner.resolve_host(host),
        }
    }

    fn now(&self) -> std::time::Instant {
        self.inner.now()
    }

    fn sleep(&self, duration: std::time::Duration) -> BoxFuture<'static, ()> {
        // The driver asks for its wait after each pass of its loop. (A data channel's
        // send also sleeps while its buffer is full; that only costs a spare pass.)
        self.flush.pass_done(std::time::Instant::now());
        self.inner.sleep(duration)
    }

    fn interval(&self, period: std::time::Duration) -> Box<dyn webrtc::runtime::AsyncInterval> {
        self.inner.interval(period)
    }

    fn block_on(&self, future: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>>) {
        self.inner.block_on(future)
    }

    fn name(&self) -> &'static str {
        "tokio+outpost"
    }
}
