//! Whom `wss://` signaling and `https://` token endpoints trust: the system's
//! certificate store plus the CAs a room adds ([`crate::RoomOptions::extra_root_ca_pem`]),
//! through `outpost-tls`, as TURN over TLS does.
//!
//! `livekit-signaling` opens its WebSocket, and asks `/rtc/validate`, through the
//! process-wide transports of `livekit-net`, whose built-in clients trust the webpki
//! (Mozilla) roots only: a CA a company installs on its machines (the Debian way,
//! `update-ca-certificates`) would be refused. So outpost-livekit registers its own
//! WebSocket and HTTP transports, once, the first time a room connects: `wss://` and
//! `https://` verify with a fresh `outpost_tls::client_config` per connection (a CA
//! added to or removed from the system is seen by the next one), plus the extra CAs a
//! room registered for that host and port; they are scoped to it and never make another
//! server trusted. Plain `ws://` goes to `livekit-net`'s built-in transport; plain
//! `http://` to a client without TLS. A refused certificate fails with one sentence
//! (`outpost_tls::explain`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, StreamExt as _};
use livekit_net::{
    Header, HttpClient, HttpMethod, HttpResponse, TransportError, WsClient, WsConnectResult,
    WsConnection,
};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::error::{Error, Result};

/// Extra CA certificates (PEM) by `host:port`.
type Extras = Mutex<HashMap<String, Vec<String>>>;

fn extras() -> &'static Extras {
    static EXTRAS: OnceLock<Extras> = OnceLock::new();
    EXTRAS.get_or_init(Extras::default)
}

/// Whether our transports are the ones `livekit-net` uses (set once).
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

/// The TLS configuration for a connection to `url`: the system's store plus the extra
/// CAs registered for its host and port.
fn config_for(url: &str) -> std::result::Result<Arc<outpost_tls::rustls::ClientConfig>, String> {
    let extra = tls_key(url)
        .and_then(|k| outpost_sync::lock(extras()).get(&k).cloned())
        .unwrap_or_default();
    outpost_tls::client_config(&extra).map_err(|e| e.to_string())
}

/// Makes `wss://` and `https://` to the host and port of `url` trust the system's
/// store plus the CA certificates in `pems`, registering outpost-livekit's transports
/// with `livekit-net` the first time.
pub(crate) fn install(url: &str, pems: &[String]) -> Result<()> {
    if !pems.is_empty() {
        outpost_tls::parse_pems(pems)
            .map_err(|e| Error::InvalidArgument(format!("extra_root_ca_pem: {e}")))?;
    }
    let registered = *REGISTERED.get_or_init(|| {
        if livekit_net::has_ws_client() || livekit_net::has_http_client() {
            return false;
        }
        // What livekit-net would use without us (its built-in transport).
        let Some(fallback) = livekit_net::ws_client() else {
            return false;
        };
        livekit_net::set_ws_client(Arc::new(Transport { fallback }));
        livekit_net::set_http_client(Arc::new(Http));
        true
    });
    if !registered {
        if !pems.is_empty() {
            return Err(Error::InvalidArgument(
                "extra_root_ca_pem: another WebSocket transport is registered with livekit-net, \
                 so extra root certificates cannot be applied"
                    .into(),
            ));
        }
        tracing::debug!("another livekit-net transport is registered; it decides whom to trust");
        return Ok(());
    }
    let Some(key) = tls_key(url) else {
        return Ok(());
    };
    if !pems.is_empty() {
        tracing::debug!(%key, "extra root CAs trusted");
    }
    outpost_sync::lock(extras()).insert(key, pems.to_vec());
    Ok(())
}

/// Our `livekit-net` HTTP transport (`https://` verified as above).
struct Http;

#[async_trait::async_trait]
impl HttpClient for Http {
    async fn request(
        &self,
        method: HttpMethod,
        url: String,
        headers: Vec<Header>,
        body: Option<Vec<u8>>,
    ) -> std::result::Result<HttpResponse, TransportError> {
        let mut builder = reqwest::Client::builder();
        if url.starts_with("https://") {
            let config = config_for(&url).map_err(TransportError::Other)?;
            builder = builder.use_preconfigured_tls((*config).clone());
        }
        let client = builder
            .build()
            .map_err(|e| TransportError::Other(e.to_string()))?;
        let mut req = match method {
            HttpMethod::Get => client.get(&url),
            HttpMethod::Post => client.post(&url),
        };
        for h in &headers {
            req = req.header(&h.name, &h.value);
        }
        if let Some(body) = body {
            req = req.body(body);
        }
        let res = req.send().await.map_err(|e| {
            TransportError::Connection(outpost_tls::explain(&e).unwrap_or_else(|| chain(&e)))
        })?;
        let status = res.status().as_u16();
        let headers = res
            .headers()
            .iter()
            .filter_map(|(n, v)| {
                v.to_str().ok().map(|v| Header {
                    name: n.as_str().to_owned(),
                    value: v.to_owned(),
                })
            })
            .collect();
        let body = res
            .bytes()
            .await
            .map_err(|e| TransportError::Other(e.to_string()))?
            .to_vec();
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
}

/// An error and its sources, as one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
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
        if tls_key(&url).is_none() {
            return self.fallback.connect(url, headers, timeout_ms).await;
        }
        let config = config_for(&url).map_err(TransportError::Other)?;
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
                other => TransportError::Connection(
                    outpost_tls::explain(&other).unwrap_or_else(|| other.to_string()),
                ),
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
        let err = install("wss://example.com", &["hello".into()]).unwrap_err();
        assert!(err.to_string().contains("no CERTIFICATE"), "{err}");
        install("ws://example.com", &[]).unwrap();
        install("wss://example.com", &[]).unwrap();
        assert!(config_for("wss://example.com").is_ok());
    }
}
