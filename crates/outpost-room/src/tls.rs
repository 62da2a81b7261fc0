//! TLS for the signaling listener (`wss://`), with rustls (ring provider).
//!
//! [`TlsIdentity`] holds the certificate chain and key from PEM. The listener accepts
//! TCP connections and runs each TLS handshake in its own counted task, with a
//! deadline, so a client that stalls its handshake delays nobody else.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

use crate::error::{Error, Result};
use crate::tasks::Tasks;

/// Deadline for one client's TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for the HTTP server to take them.
const ACCEPT_QUEUE: usize = 64;

/// The server's certificate chain and private key.
#[derive(Clone)]
pub struct TlsIdentity {
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity").finish_non_exhaustive()
    }
}

impl TlsIdentity {
    /// From PEM: a certificate chain (leaf first) and a PKCS#8, PKCS#1 or SEC1 key.
    pub fn from_pem(cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<Self> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Tls(format!("certificate PEM: {e}")))?;
        if chain.is_empty() {
            return Err(Error::Tls("no CERTIFICATE in the certificate PEM".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| Error::Tls(format!("private key PEM: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(format!("TLS versions: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| Error::Tls(format!("certificate and key do not fit: {e}")))?;
        // The HTTP side speaks HTTP/1.1 only (WebSocket upgrades).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// From PEM files (see [`TlsIdentity::from_pem`]).
    pub fn from_pem_files(cert_chain: &Path, key: &Path) -> Result<Self> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| Error::Io {
                what: format!("reading {}", p.display()),
                source,
            })
        };
        Self::from_pem(&read(cert_chain)?, &read(key)?)
            .map_err(|e| Error::Tls(format!("{} / {}: {e}", cert_chain.display(), key.display())))
    }
}

/// A listener that hands out connections whose TLS handshake completed.
#[derive(Debug)]
pub(crate) struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The acceptor stopped (shutdown): the server stops asking soon.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// Starts accepting on `listener`; stops when `shutdown` turns true.
pub(crate) fn listen(
    listener: TcpListener,
    addr: SocketAddr,
    identity: &TlsIdentity,
    tasks: &Tasks,
    mut shutdown: watch::Receiver<bool>,
) -> TlsListener {
    let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
    let acceptor = TlsAcceptor::from(identity.config.clone());
    let handshakes = tasks.clone();
    tasks.spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: back off and retry.
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = stopped(&mut shutdown) => break,
            };
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            let mut stop = shutdown.clone();
            handshakes.spawn(async move {
                let handshake = async {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::info!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => tracing::info!(%peer, "TLS handshake timed out"),
                    }
                };
                tokio::select! {
                    () = handshake => {}
                    () = stopped(&mut stop) => {}
                }
            });
        }
    });
    TlsListener { rx, addr }
}

/// Resolves once `shutdown` is true (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}
