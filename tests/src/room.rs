//! `outpost-room` in tests: a server process inside a [`NetNs`], the official-SDK
//! scripts run next to it, and a minimal Rust signaling client.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::{SinkExt as _, StreamExt as _};
use outpost_room::proto::{
    self, JoinResponse, SignalRequest, SignalResponse, signal_request, signal_response,
};
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest as _};

use crate::netns::NetNs;
use crate::proc::Proc;
use crate::python;

/// An `outpost-room serve` process inside a namespace, killed on drop.
#[derive(Debug)]
pub struct RoomProcess {
    /// The process.
    pub proc: Proc,
    /// `ws://IP:PORT`.
    pub url: String,
}

impl RoomProcess {
    /// Starts `bin serve --bind <ns.server_ip>:7880 <extra…>` in `ns` and waits until it listens.
    pub fn start(ns: &NetNs, bin: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let bind = format!("{}:7880", ns.server_ip);
        let mut cmd = ns.command(bin);
        cmd.args(["serve", "--bind", &bind]).args(extra);
        let mut proc = Proc::spawn("outpost-room", cmd)?;
        proc.wait_for_line("listening on", Duration::from_secs(10))?;
        Ok(Self {
            proc,
            url: format!("ws://{bind}"),
        })
    }
}

/// Runs `tests/py/<script>` with the venv python inside `ns` against `server`, and
/// returns the JSON lines it printed. Fails with its stderr and the server's log.
pub fn run_script(
    ns: &NetNs,
    server: &RoomProcess,
    script: &str,
    env: &[(&str, &str)],
    timeout: Duration,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let py = python::python()?;
    let mut cmd = ns.command(&py);
    cmd.arg(python::scripts_dir().join(script))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &server.url)
        .env(
            "LK_TIMEOUT",
            timeout.as_secs().saturating_sub(5).max(5).to_string(),
        )
        .env("PYTHONWARNINGS", "ignore");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let proc = Proc::spawn(script, cmd)?;
    let what = script.to_owned();
    let (status, out, err) = proc.finish(timeout)?;
    if !status.success() {
        bail!(
            "{what} failed ({status}); stdout:\n{out}\nstderr:\n{err}\n--- server log ---\n{}",
            server.proc.stderr()
        );
    }
    let lines: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if lines.is_empty() {
        bail!("{what} printed no result line; stdout:\n{out}");
    }
    Ok(lines)
}

/// A bare signaling client speaking LiveKit's protobuf over WebSocket.
#[derive(Debug)]
pub struct SignalClient {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

/// Why a connection attempt failed.
#[derive(Debug)]
pub enum ConnectFailure {
    /// The server answered the upgrade with this HTTP status and body.
    Http(u16, String),
    /// Anything else.
    Other(anyhow::Error),
}

impl SignalClient {
    /// Connects to `<url>/rtc` with `token` and waits for the join response.
    pub async fn join(url: &str, token: &str) -> Result<(Self, JoinResponse), ConnectFailure> {
        let mut client = Self::connect(url, token).await?;
        let first = client
            .recv(Duration::from_secs(5))
            .await
            .map_err(ConnectFailure::Other)?;
        match first.message {
            Some(signal_response::Message::Join(j)) => Ok((client, j)),
            other => Err(ConnectFailure::Other(anyhow::anyhow!(
                "first message was not join: {other:?}"
            ))),
        }
    }

    /// Opens the WebSocket without waiting for anything.
    pub async fn connect(url: &str, token: &str) -> Result<Self, ConnectFailure> {
        Self::connect_with(url, token, "", None).await
    }

    /// Opens the WebSocket with `extra_query` appended to the query string (e.g.
    /// `&reconnect=1&sid=PA_…`) and, for `wss://`, this TLS connector.
    pub async fn connect_with(
        url: &str,
        token: &str,
        extra_query: &str,
        tls: Option<tokio_tungstenite::Connector>,
    ) -> Result<Self, ConnectFailure> {
        let mut req = format!("{url}/rtc?protocol=15&auto_subscribe=0&sdk=rust-test{extra_query}")
            .into_client_request()
            .map_err(|e| ConnectFailure::Other(e.into()))?;
        let auth = format!("Bearer {token}").parse().map_err(
            |e: tungstenite::http::header::InvalidHeaderValue| ConnectFailure::Other(e.into()),
        )?;
        req.headers_mut().insert("Authorization", auth);
        match tokio_tungstenite::connect_async_tls_with_config(req, None, false, tls).await {
            Ok((ws, _)) => Ok(Self { ws }),
            Err(tungstenite::Error::Http(resp)) => {
                let body = resp
                    .body()
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                Err(ConnectFailure::Http(resp.status().as_u16(), body))
            }
            Err(e) => Err(ConnectFailure::Other(e.into())),
        }
    }

    /// Sends a request.
    pub async fn send(&mut self, msg: signal_request::Message) -> anyhow::Result<()> {
        let req: SignalRequest = proto::request(msg);
        self.send_raw(proto::encode_signal_request(&req)).await
    }

    /// Sends arbitrary bytes as one binary frame.
    pub async fn send_raw(&mut self, bytes: Vec<u8>) -> anyhow::Result<()> {
        self.ws.send(Message::Binary(bytes.into())).await?;
        Ok(())
    }

    /// Next signaling message (skipping control frames); errors on close or timeout.
    pub async fn recv(&mut self, timeout: Duration) -> anyhow::Result<SignalResponse> {
        loop {
            let msg = tokio::time::timeout(timeout, self.ws.next())
                .await
                .context("timed out waiting for a signal message")?
                .context("socket closed")??;
            match msg {
                Message::Binary(b) => return Ok(proto::decode_signal_response(&b)?),
                Message::Close(frame) => bail!("socket closed by server: {frame:?}"),
                _ => continue,
            }
        }
    }

    /// Reads until the server closes the socket; returns every message seen and the
    /// close frame's code and reason, if any.
    pub async fn drain_until_close(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<(Vec<SignalResponse>, Option<(u16, String)>)> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let next = tokio::time::timeout(left, self.ws.next())
                .await
                .context("timed out waiting for the server to close")?;
            match next {
                None => return Ok((seen, None)),
                Some(Err(_)) => return Ok((seen, None)),
                Some(Ok(Message::Binary(b))) => seen.push(proto::decode_signal_response(&b)?),
                Some(Ok(Message::Close(f))) => {
                    return Ok((seen, f.map(|f| (u16::from(f.code), f.reason.to_string()))));
                }
                Some(Ok(_)) => {}
            }
        }
    }
}
