//! The async runtime `webrtc` runs on: its Tokio runtime, except that UDP sockets get
//! large kernel buffers. Used when [`crate::PeerConfig::udp_socket_buffer`] is set.

use std::sync::Arc;

/// The Tokio runtime of `webrtc`, except that UDP sockets get large kernel buffers.
///
/// With the default receive buffer (~200 KiB) a burst from an SDK's SCTP sender
/// overflows the socket and the kernel drops datagrams (`RcvbufErrors` in
/// /proc/net/snmp); SCTP then treats that as congestion and throughput collapses.
#[derive(Debug)]
pub(crate) struct BigBufferRuntime {
    pub(crate) inner: webrtc::runtime::TokioRuntime,
    /// Requested SO_RCVBUF and SO_SNDBUF, bytes.
    pub(crate) buffer: usize,
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
