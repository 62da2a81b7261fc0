//! Extra trusted root CAs for `wss://` signaling ([`crate::RoomOptions::extra_root_ca_pem`]).
//!
//! `livekit-signaling` opens its WebSocket through the process-wide transport of
//! `livekit-net`, whose built-in client trusts the webpki (Mozilla) roots only. To
//! trust a private CA (a self-hosted livekit-server, or a test server) we register our
//! own transport, once, the first time a room asks for extra roots: for `wss://` to a
//! host and port that a room registered roots for, it connects with rustls trusting
//! the webpki roots plus those; everything else goes to the built-in transport as
//! before. The extra roots are scoped to that host and port: they never make another
//! server trusted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, StreamExt as _};
use livekit_net::{Header, TransportError, WsClient, WsConnectResult, WsConnection};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::error::{Error, Result};

/// TLS client configurations by `host:port`.
type Configs = Mutex<HashMap<String, Arc<rustls::ClientConfig>>>;

fn configs() -> &'static Configs {
    static CONFIGS: OnceLock<Configs> = OnceLock::new();
    CONFIGS.get_or_init(Configs::default)
}

/// Whether our transport is the one `livekit-net` uses (set once).
static REGISTERED: OnceLock<bool> = OnceLock::new();

/// The `host:port` key of a `wss://` / `https://` URL; `None` for plain URLs.
fn tls_key(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "wss" | "https") {
        return None;
    }
    let host = parsed.host_str()?;
    Some(format!("{host}:{}", parsed.port().unwrap_or(443)))
}

/// Trusts the CA certificates in `pems` (in addition to the webpki roots) for
/// `wss://` connections to the host and port of `url`. Does nothing for `ws://`.
pub(crate) fn trust(url: &str, pems: &[String]) -> Result<()> {
    if pems.is_empty() {
        return Ok(());
    }
    let Some(key) = tls_key(url) else {
        return Ok(());
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut added = 0;
    for pem in pems {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| {
                Error::InvalidArgument(format!("extra_root_ca_pem: not a PEM certificate: {e}"))
            })?;
            roots.add(cert).map_err(|e| {
                Error::InvalidArgument(format!("extra_root_ca_pem: unusable CA certificate: {e}"))
            })?;
            added += 1;
        }
    }
    if added == 0 {
        return Err(Error::InvalidArgument(
            "extra_root_ca_pem: no CERTIFICATE block found".into(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::InvalidArgument(format!("TLS versions: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let registered = *REGISTERED.get_or_init(|| {
        if livekit_net::has_ws_client() {
            return false;
        }
        // What livekit-net would use without us (its built-in transport).
        let Some(fallback) = livekit_net::ws_client() else {
            return false;
        };
        livekit_net::set_ws_client(Arc::new(Transport { fallback }));
        true
    });
    if !registered {
        return Err(Error::InvalidArgument(
            "extra_root_ca_pem: another WebSocket transport is registered with livekit-net, \
             so extra root certificates cannot be applied"
                .into(),
        ));
    }
    configs()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.clone(), Arc::new(config));
    tracing::debug!(%key, added, "extra root CAs trusted");
    Ok(())
}

/// Our `livekit-net` WebSocket transport.
struct Transport {
    fallback: Arc<dyn WsClient>,
}

#[async_trait::async_trait]
impl WsClient for Transport {
    async fn connect(
        &self,
        url: String,
        headers: Vec<Header>,
        timeout_ms: u64,
    ) -> std::result::Result<WsConnectResult, TransportError> {
        let config = tls_key(&url).and_then(|k| {
            configs()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&k)
                .cloned()
        });
        let Some(config) = config else {
            return self.fallback.connect(url, headers, timeout_ms).await;
        };
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| TransportError::Connection(e.to_string()))?;
        for h in &headers {
            let name: tungstenite::http::HeaderName = h
                .name
                .parse()
                .map_err(|_| TransportError::Other(format!("bad header name {:?}", h.name)))?;
            let value = tungstenite::http::HeaderValue::from_str(&h.value)
                .map_err(|_| TransportError::Other("bad header value".into()))?;
            request.headers_mut().insert(name, value);
        }
        let connect = tokio_tungstenite::connect_async_tls_with_config(
            request,
            None,
            true,
            Some(Connector::Rustls(config)),
        );
        let (ws, _) = tokio::time::timeout(std::time::Duration::from_millis(timeout_ms), connect)
            .await
            .map_err(|_| TransportError::Timeout)?
            .map_err(|e| match e {
                tungstenite::Error::Http(resp) => TransportError::Http {
                    status: resp.status().as_u16(),
                },
                other => TransportError::Connection(other.to_string()),
            })?;
        let (writer, reader) = ws.split();
        Ok(WsConnectResult {
            connection: Arc::new(Connection {
                writer: tokio::sync::Mutex::new(writer),
                reader: tokio::sync::Mutex::new(reader),
            }),
        })
    }
}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// One WebSocket opened by [`Transport`]: binary frames only, as `livekit-net` expects.
struct Connection {
    writer: tokio::sync::Mutex<SplitSink<Ws, Message>>,
    reader: tokio::sync::Mutex<SplitStream<Ws>>,
}

#[async_trait::async_trait]
impl WsConnection for Connection {
    async fn send(&self, frame: Vec<u8>) -> std::result::Result<(), TransportError> {
        self.writer
            .lock()
            .await
            .send(Message::Binary(frame.into()))
            .await
            .map_err(|e| TransportError::Connection(e.to_string()))
    }

    async fn recv(&self) -> std::result::Result<Option<Vec<u8>>, TransportError> {
        let mut reader = self.reader.lock().await;
        loop {
            match reader.next().await {
                Some(Ok(Message::Binary(data))) => return Ok(Some(data.to_vec())),
                Some(Ok(Message::Ping(payload))) => {
                    let _ = self.writer.lock().await.send(Message::Pong(payload)).await;
                }
                Some(Ok(Message::Close(_))) | None => return Ok(None),
                // Signaling is binary; text, pongs and raw frames carry nothing for us.
                Some(Ok(_)) => {}
                // A peer that drops the connection without a close frame (or TLS
                // close_notify) has still closed it.
                Some(Err(
                    tungstenite::Error::ConnectionClosed
                    | tungstenite::Error::AlreadyClosed
                    | tungstenite::Error::Protocol(
                        tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
                    ),
                )) => return Ok(None),
                Some(Err(tungstenite::Error::Io(e)))
                    if e.kind() == std::io::ErrorKind::UnexpectedEof =>
                {
                    return Ok(None);
                }
                Some(Err(e)) => return Err(TransportError::Connection(e.to_string())),
            }
        }
    }

    async fn close(&self) {
        let _ = self.writer.lock().await.close().await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn keys_are_host_and_port_of_tls_urls() {
        assert_eq!(
            tls_key("wss://example.com").as_deref(),
            Some("example.com:443")
        );
        assert_eq!(
            tls_key("https://10.0.0.1:7880/x").as_deref(),
            Some("10.0.0.1:7880")
        );
        assert_eq!(tls_key("ws://10.0.0.1:7880"), None);
        assert_eq!(tls_key("not a url"), None);
    }

    #[test]
    fn bad_pem_is_refused_and_plain_urls_need_nothing() {
        let err = trust("wss://example.com", &["hello".into()]).unwrap_err();
        assert!(err.to_string().contains("no CERTIFICATE"), "{err}");
        trust("ws://example.com", &["hello".into()]).unwrap();
        trust("wss://example.com", &[]).unwrap();
    }
}
