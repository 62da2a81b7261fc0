//! A TCP forwarder whose connections a test can cut: put it between a client and the
//! room server's signaling port, and [`CutProxy::cut`] drops the client's signaling
//! WebSocket while its peer connections (UDP, straight to the server) stay up. New
//! connections after a cut are forwarded as usual, so the client can resume.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A forwarder running on its own thread inside a network namespace; stopped on drop.
#[derive(Debug)]
pub struct CutProxy {
    addr: SocketAddr,
    cut: watch::Sender<u64>,
    accepted: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CutProxy {
    /// Listens on `listen` inside namespace `ns` (port 0 picks one) and forwards every
    /// connection to `upstream`.
    pub fn start(ns: &str, listen: SocketAddr, upstream: SocketAddr) -> anyhow::Result<Self> {
        let path = format!("/var/run/netns/{ns}");
        let (cut, _) = watch::channel(0u64);
        let cut_tx = cut.clone();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<SocketAddr>>();
        let thread = std::thread::Builder::new()
            .name(format!("cutproxy-{ns}"))
            .spawn(move || {
                let setup = || -> anyhow::Result<(tokio::runtime::Runtime, TcpListener)> {
                    let fd = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
                    nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
                        .with_context(|| format!("setns into {path} (needs root)"))?;
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let listener = rt.block_on(TcpListener::bind(listen))?;
                    Ok((rt, listener))
                };
                let (rt, listener) = match setup() {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(listener.local_addr().map_err(Into::into));
                rt.block_on(async move {
                    let serve = async {
                        while let Ok((client, _)) = listener.accept().await {
                            counter.fetch_add(1, Ordering::Relaxed);
                            let mut cut = cut_tx.subscribe();
                            tokio::spawn(async move {
                                let Ok(mut server) = TcpStream::connect(upstream).await else {
                                    return;
                                };
                                let mut client = client;
                                tokio::select! {
                                    _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                                    _ = cut.changed() => {}
                                }
                                // Dropping both sockets closes both connections.
                            });
                        }
                    };
                    tokio::select! {
                        () = serve => {}
                        _ = stop_rx => {}
                    }
                });
            })?;
        let addr = ready_rx
            .recv()
            .context("the proxy thread died while starting")??;
        Ok(Self {
            addr,
            cut,
            accepted,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://ADDR` (or `wss://` with `tls`).
    pub fn url(&self, tls: bool) -> String {
        format!("{}://{}", if tls { "wss" } else { "ws" }, self.addr)
    }

    /// Closes every connection open now (later ones are unaffected).
    pub fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
