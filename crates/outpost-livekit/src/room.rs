//! The public room handle.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use crate::attributes::ProfileUpdate;
use crate::audio::{AudioSourceOptions, LocalAudioTrack, LocalShared};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::events::RoomEvent;
use crate::proto;
use crate::rpc::{PerformRpc, Rpc, RpcError, RpcInvocation};
use crate::shared::{Command, Shared};
use crate::streams::{CHUNK_SIZE, Sink, StreamKind, StreamOptions, StreamWriter};
use crate::token::{TokenEndpoint, TokenRequest, fetch_connection_details};
use crate::types::{ConnectionState, DataOptions, Participant};

pub use crate::options::RoomOptions;

/// Events from the room, in order. Unbounded: read them promptly.
pub type RoomEvents = mpsc::UnboundedReceiver<RoomEvent>;

/// A connection to a LiveKit room. Cheap to clone; the connection closes when
/// [`Room::leave`] is called or the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Room {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    rpc: Arc<Rpc>,
    cmd: mpsc::UnboundedSender<Command>,
    max_payload: usize,
    engine: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Room {
    /// Joins the room at `url` (`ws://`, `wss://`, `http(s)://`) with an access token.
    /// Returns once the data channel is open, or with an error saying why not:
    /// [`Error::Unauthorized`] for a refused token, [`Error::Unreachable`] when the
    /// server cannot be reached within [`RoomOptions::connect_timeout`],
    /// [`Error::NoPath`] (each network path tried and what came of it) when WebRTC does
    /// not come up.
    pub async fn connect(
        url: &str,
        token: &str,
        options: RoomOptions,
    ) -> Result<(Room, RoomEvents)> {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let shared = Shared::new(ConnectionState::Reconnecting);
        let rpc = Arc::new(Rpc::new(options.rpc_settings(), shared.clone()));
        crate::tls::install(url, &options.extra_root_ca_pem)?;
        let max_payload = options.max_packet_payload;
        let mut engine = Engine::new(
            url.to_owned(),
            token.to_owned(),
            options,
            rpc.clone(),
            events_tx,
            cmd_rx,
        );
        let (ready_tx, ready_rx) = oneshot::channel();
        engine.start(ready_tx).await?;
        let handle = tokio::spawn(engine.run());
        match ready_rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = handle.await;
                return Err(e);
            }
            Err(_) => return Err(Error::Closed("room engine stopped while connecting".into())),
        }
        let room = Room {
            inner: Arc::new(Inner {
                shared,
                rpc,
                cmd: cmd_tx,
                max_payload,
                engine: Mutex::new(Some(handle)),
            }),
        };
        Ok((room, events_rx))
    }

    /// Gets connection details from a token endpoint (see [`crate::token`]) and joins.
    pub async fn connect_with_endpoint(
        endpoint: &TokenEndpoint,
        request: &TokenRequest,
        options: RoomOptions,
    ) -> Result<(Room, RoomEvents)> {
        crate::tls::install(&endpoint.url, &options.extra_root_ca_pem)?;
        let details = fetch_connection_details(endpoint, request).await?;
        Room::connect(&details.server_url, &details.participant_token, options).await
    }

    /// Ourselves, as the server sees us (sid changes after a full rejoin).
    pub fn local_participant(&self) -> Option<Participant> {
        self.inner.shared.roster().local.clone()
    }

    /// The network path the room's traffic took when the link last came up: direct
    /// (UDP or ICE/TCP) or relayed by a TURN server, per peer connection.
    pub fn connection_path(&self) -> crate::types::ConnectionPath {
        outpost_sync::lock(&self.inner.shared.path).clone()
    }

    /// The other participants, in the order they joined.
    pub fn participants(&self) -> Vec<Participant> {
        self.inner.shared.roster().remote.clone()
    }

    /// The assistant, when present.
    pub fn assistant(&self) -> Option<Participant> {
        self.inner.shared.roster().assistant.clone()
    }

    /// Current connection state.
    pub fn connection_state(&self) -> ConnectionState {
        *self.inner.shared.state.borrow()
    }

    /// A watch on the connection state.
    pub fn watch_state(&self) -> watch::Receiver<ConnectionState> {
        self.inner.shared.state.subscribe()
    }

    /// Sends a data packet. Reliable packets are queued in order and survive a
    /// reconnect (sent once the link is back); this returns once the packet is
    /// queued. Lossy packets are dropped while reconnecting or when the channel's
    /// buffer is full.
    pub async fn send_data(&self, payload: impl Into<Vec<u8>>, options: DataOptions) -> Result<()> {
        let payload = self.checked_payload(payload.into())?;
        if options.reliable {
            self.queue_reliable(payload, options, None)
        } else {
            let identity = self.identity();
            if self.connection_state() == ConnectionState::Disconnected {
                return Err(Error::Closed("the room is disconnected".into()));
            }
            let Some(ch) = self.inner.shared.lossy() else {
                return Ok(());
            };
            let mut p = proto::user_packet(
                payload,
                options.topic,
                options.destination_identities,
                false,
            );
            p.participant_identity = identity;
            if let Err(e) = ch.try_send(&proto::encode_data_packet(&p)).await {
                tracing::debug!("lossy packet dropped: {e}");
            }
            Ok(())
        }
    }

    /// Sends a reliable packet and waits until it is handed to the transport.
    pub async fn send_data_and_wait(
        &self,
        payload: impl Into<Vec<u8>>,
        options: DataOptions,
    ) -> Result<()> {
        let payload = self.checked_payload(payload.into())?;
        let (tx, rx) = oneshot::channel();
        self.queue_reliable(payload, options, Some(tx))?;
        rx.await
            .map_err(|_| Error::Closed("send queue dropped".into()))?
    }

    /// `payload` if it fits in one packet.
    fn checked_payload(&self, payload: Vec<u8>) -> Result<Vec<u8>> {
        if payload.len() > self.inner.max_payload {
            return Err(Error::PayloadTooLarge {
                size: payload.len(),
                limit: self.inner.max_payload,
            });
        }
        Ok(payload)
    }

    /// Queues a reliable user packet; `done` hears when the transport took it.
    fn queue_reliable(
        &self,
        payload: Vec<u8>,
        options: DataOptions,
        done: Option<oneshot::Sender<Result<()>>>,
    ) -> Result<()> {
        let identity = self.identity();
        self.inner.shared.outbox.push(
            move |seq| {
                let mut p = proto::user_packet(
                    payload,
                    options.topic,
                    options.destination_identities,
                    true,
                );
                p.sequence = seq;
                p.participant_identity = identity;
                proto::encode_data_packet(&p)
            },
            done,
        )
    }

    fn sink(&self) -> Sink {
        Sink {
            outbox: self.inner.shared.outbox.clone(),
            identity: self.identity(),
        }
    }

    fn identity(&self) -> String {
        self.inner
            .shared
            .roster()
            .local
            .as_ref()
            .map(|l| l.identity.clone())
            .unwrap_or_default()
    }

    /// Opens a byte stream to write incrementally.
    pub fn stream_bytes(&self, options: StreamOptions) -> Result<StreamWriter> {
        StreamWriter::open(self.sink(), StreamKind::Bytes, options)
    }

    /// Opens a text stream to write incrementally.
    pub fn stream_text(&self, options: StreamOptions) -> Result<StreamWriter> {
        StreamWriter::open(self.sink(), StreamKind::Text, options)
    }

    /// Sends bytes as a byte stream; returns the stream id once everything is handed
    /// to the transport.
    pub async fn send_bytes(&self, data: &[u8], mut options: StreamOptions) -> Result<String> {
        options.total_length = Some(u64::try_from(data.len()).unwrap_or(u64::MAX));
        let mut w = self.stream_bytes(options)?;
        let id = w.id().to_owned();
        w.write(data).await?;
        w.close().await?;
        Ok(id)
    }

    /// Sends text as a text stream; returns the stream id.
    pub async fn send_text(&self, text: &str, mut options: StreamOptions) -> Result<String> {
        options.total_length = Some(u64::try_from(text.len()).unwrap_or(u64::MAX));
        let mut w = self.stream_text(options)?;
        let id = w.id().to_owned();
        w.write_text(text).await?;
        w.close().await?;
        Ok(id)
    }

    /// Sends a file as a byte stream named after the file; returns the stream id.
    pub async fn send_file(&self, path: &Path, mut options: StreamOptions) -> Result<String> {
        use tokio::io::AsyncReadExt as _;
        let io = |what: &str, error| Error::Io {
            what: format!("{what} {}", path.display()),
            error,
        };
        let mut file = tokio::fs::File::open(path)
            .await
            .map_err(|e| io("opening", e))?;
        let len = file.metadata().await.map_err(|e| io("reading", e))?.len();
        options.total_length = Some(len);
        if options.name.is_none() {
            options.name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        }
        let mut w = self.stream_bytes(options)?;
        let id = w.id().to_owned();
        let mut buf = vec![0u8; CHUNK_SIZE];
        loop {
            let n = file.read(&mut buf).await.map_err(|e| io("reading", e))?;
            if n == 0 {
                break;
            }
            w.write(&buf[..n]).await?;
        }
        w.close().await?;
        Ok(id)
    }

    /// Registers the handler for RPC `method` (replacing any earlier one). Each call
    /// is acknowledged at once and answered with what the handler returns, in the
    /// RPC version the call came in: a payload (for version 1 at most
    /// [`crate::rpc::MAX_PAYLOAD_BYTES`], or the caller gets
    /// `RESPONSE_PAYLOAD_TOO_LARGE`; version 2 has no limit) or an [`RpcError`]. The handler runs in its own
    /// task and is dropped at [`RpcInvocation::deadline`] (the caller's response
    /// timeout; the caller then gets `RESPONSE_TIMEOUT`), when the caller leaves, or
    /// when the room closes. Calls for methods without a handler get
    /// `UNSUPPORTED_METHOD`.
    pub fn register_rpc_method<F, Fut>(&self, method: impl Into<String>, handler: F)
    where
        F: Fn(RpcInvocation) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = std::result::Result<String, RpcError>> + Send + 'static,
    {
        self.inner
            .rpc
            .register(method.into(), crate::rpc::handler(handler));
    }

    /// The room's RPC method set (the one given in [`RoomOptions::rpc_methods`]):
    /// registering on it is registering on the room.
    pub fn rpc_methods(&self) -> crate::rpc::RpcMethods {
        self.inner.rpc.methods()
    }

    /// Removes the handler for `method`; later calls get `UNSUPPORTED_METHOD`.
    pub fn unregister_rpc_method(&self, method: &str) {
        self.inner.rpc.unregister(method);
    }

    /// Calls an RPC method on another participant and returns its response payload,
    /// or an [`RpcError`]: the remote handler's, or a built-in one
    /// (`REQUEST_PAYLOAD_TOO_LARGE` over version 1's limit, `CONNECTION_TIMEOUT` without an ack,
    /// `RESPONSE_TIMEOUT`, `RECIPIENT_DISCONNECTED`, `SEND_FAILED`,
    /// `UNSUPPORTED_SERVER` below server version 1.8.0, `APPLICATION_ERROR` when a
    /// version 2 response stream fails). Uses version 2 (no payload limit) when the
    /// destination advertised `client_protocol` ≥ 1 and [`RoomOptions::rpc_v2`] is on.
    pub async fn perform_rpc(&self, call: PerformRpc) -> std::result::Result<String, RpcError> {
        crate::rpc::perform(&self.inner.rpc, call).await
    }

    /// Merges `attributes` into our participant attributes (an empty value deletes its
    /// key). Returns once the server accepted it ([`Error::Refused`] when it did not,
    /// e.g. without the token grant `canUpdateOwnMetadata`); the others then get a
    /// participant update, and so do we
    /// ([`RoomEvent::ParticipantAttributesChanged`] for ourselves).
    pub async fn set_attributes(&self, attributes: HashMap<String, String>) -> Result<()> {
        self.update_profile(ProfileUpdate {
            attributes,
            ..ProfileUpdate::default()
        })
        .await
    }

    /// Sets our metadata. An empty string is ignored by the servers (it cannot clear
    /// metadata); see [`Room::set_attributes`] for when this returns.
    pub async fn set_metadata(&self, metadata: impl Into<String>) -> Result<()> {
        self.update_profile(ProfileUpdate {
            metadata: Some(metadata.into()),
            ..ProfileUpdate::default()
        })
        .await
    }

    /// Sets our display name (an empty one is ignored by the servers).
    pub async fn set_name(&self, name: impl Into<String>) -> Result<()> {
        self.update_profile(ProfileUpdate {
            name: Some(name.into()),
            ..ProfileUpdate::default()
        })
        .await
    }

    async fn update_profile(&self, update: ProfileUpdate) -> Result<()> {
        // The official SDKs give up after 5 s as well.
        const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
        let (tx, rx) = oneshot::channel();
        self.inner
            .cmd
            .send(Command::UpdateProfile(update, tx))
            .map_err(|_| Error::Closed("the room engine stopped".into()))?;
        match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(verdict)) => verdict,
            Ok(Err(_)) => Err(Error::Closed(
                "the room closed before the server answered".into(),
            )),
            Err(_) => Err(Error::Timeout {
                what: "the server to answer a participant update",
                after: REQUEST_TIMEOUT,
            }),
        }
    }

    /// Publishes a local audio track (Opus, 48 kHz) and returns it once the server
    /// confirmed it; feed it with [`LocalAudioTrack::push_frame`].
    pub async fn publish_audio(&self, options: AudioSourceOptions) -> Result<LocalAudioTrack> {
        const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
        let local = Arc::new(LocalShared::new(options.channels, options.muted)?);
        let (tx, rx) = oneshot::channel();
        self.inner
            .cmd
            .send(Command::PublishAudio {
                name: options.name,
                local: local.clone(),
                done: tx,
            })
            .map_err(|_| Error::Closed("the room engine stopped".into()))?;
        match tokio::time::timeout(PUBLISH_TIMEOUT, rx).await {
            Ok(Ok(Ok(sid))) => {
                let cmd = self.inner.cmd.clone();
                let engine = Arc::new(move |r| cmd.send(Command::Track(r)).is_ok());
                Ok(LocalAudioTrack::new(sid, local, engine))
            }
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(Error::Closed(
                "the room closed before the track was published".into(),
            )),
            Err(_) => Err(Error::Timeout {
                what: "the server to publish the audio track",
                after: PUBLISH_TIMEOUT,
            }),
        }
    }

    /// Leaves the room: waits (bounded) for queued packets to reach the server,
    /// tells the server, and closes everything. Idempotent.
    pub async fn leave(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.inner.cmd.send(Command::Leave(tx)).is_ok() {
            let _ = rx.await;
        }
        let handle = outpost_sync::lock(&self.inner.engine).take();
        if let Some(h) = handle {
            let _ = h.await;
        }
        Ok(())
    }
}
