//! One participant's signaling session: the WebSocket loop that joins the room,
//! answers the publisher offer, trickles candidates, keeps the ping clock, relays the
//! participant's data channels, and cleans everything up when any of that ends.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::auth::Grant;
use crate::proto::{
    self, DisconnectReason, JoinResponse, Pong, Reliability, ServerInfo, SessionDescription,
    SignalTarget, TrickleRequest, participant_info, server_info, signal_request, signal_response,
};
use crate::room::{Control, Participant, Room};
use crate::server::Shared;
use crate::wire::{DataChannelHandle, Publisher, WireEvent};

/// How long a participant that asked to leave keeps relaying what is still in flight.
const LEAVE_GRACE: Duration = Duration::from_millis(300);

/// Candidates buffered before the offer arrives.
const MAX_EARLY_CANDIDATES: usize = 64;

/// Why a session ended.
#[derive(Debug)]
enum End {
    /// Tell the client to leave with this reason.
    Leave(DisconnectReason),
    /// Close the socket with a close frame (bad input).
    Close(u16, String),
    /// The client is gone or asked to leave; nothing to say.
    Quiet(&'static str),
}

impl End {
    fn reason(&self) -> String {
        match self {
            End::Leave(r) => format!("told to leave: {}", r.as_str_name()),
            End::Close(code, why) => format!("closed ({code}): {why}"),
            End::Quiet(why) => (*why).to_owned(),
        }
    }
}

/// Runs a session to its end.
pub(crate) async fn run(
    shared: Arc<Shared>,
    socket: WebSocket,
    grant: Grant,
    client_protocol: i32,
) {
    let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
    let participant = Arc::new(Participant::new(grant, client_protocol, ctl_tx));
    let room = shared.registry.join(participant.clone());
    tracing::info!(room = %room.name, identity = %participant.identity(), sid = %participant.sid, "participant joined");
    let mut session = Session {
        shared: shared.clone(),
        participant: participant.clone(),
        room: room.clone(),
        publisher: None,
        early_candidates: Vec::new(),
        answered: false,
        connected: false,
        tasks: Vec::new(),
    };
    let end = session.drive(socket, ctl_rx).await;
    tracing::info!(room = %room.name, identity = %participant.identity(), sid = %participant.sid, reason = %end.reason(), "participant left");
    if matches!(end, End::Quiet("client left")) {
        // A client that sends data and then leaves at once would otherwise lose the
        // packets still crossing SCTP while its Leave overtook them on the WebSocket.
        tokio::time::sleep(LEAVE_GRACE).await;
    }
    shared.registry.leave(&room, &participant);
    session.teardown().await;
}

struct Session {
    shared: Arc<Shared>,
    participant: Arc<Participant>,
    room: Arc<Room>,
    publisher: Option<Publisher>,
    early_candidates: Vec<String>,
    answered: bool,
    connected: bool,
    tasks: Vec<JoinHandle<()>>,
}

impl Session {
    async fn drive(
        &mut self,
        socket: WebSocket,
        mut ctl_rx: mpsc::UnboundedReceiver<Control>,
    ) -> End {
        let (mut sink, mut stream) = socket.split();
        let cfg = self.shared.config.clone();
        let (wire_tx, mut wire_rx) = mpsc::unbounded_channel();
        let publisher = match Publisher::new(&cfg.wire, wire_tx).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("cannot create peer connection: {e}");
                let _ = send(&mut sink, &proto::leave(DisconnectReason::JoinFailure)).await;
                return End::Quiet("peer connection setup failed");
            }
        };
        self.publisher = Some(publisher);

        let join = JoinResponse {
            room: Some(self.room.info()),
            participant: Some(self.participant.info()),
            other_participants: self
                .room
                .others(&self.participant.sid)
                .iter()
                .filter(|p| !p.grant.hidden)
                .map(|p| p.info())
                .collect(),
            server_version: proto::SERVER_VERSION.to_owned(),
            ice_servers: Vec::new(),
            subscriber_primary: false,
            ping_timeout: secs_i32(cfg.ping_timeout),
            ping_interval: secs_i32(cfg.ping_interval),
            server_info: Some(ServerInfo {
                edition: server_info::Edition::Standard as i32,
                version: proto::SERVER_VERSION.to_owned(),
                protocol: proto::PROTOCOL_VERSION,
                region: "local".to_owned(),
                node_id: self.shared.node_id.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        if send(
            &mut sink,
            &proto::response(signal_response::Message::Join(join)),
        )
        .await
        .is_err()
        {
            return End::Quiet("socket closed before join response");
        }

        let mut shutdown = self.shared.shutdown.subscribe();
        if *shutdown.borrow_and_update() {
            let _ = send(&mut sink, &proto::leave(DisconnectReason::ServerShutdown)).await;
            return End::Quiet("server shutting down");
        }
        let mut last_seen = Instant::now();
        let started = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let end = loop {
            tokio::select! {
                msg = stream.next() => {
                    let Some(msg) = msg else { break End::Quiet("socket closed") };
                    let msg = match msg {
                        Ok(m) => m,
                        Err(e) => break End::Close(1009, format!("websocket error: {e}")),
                    };
                    last_seen = Instant::now();
                    let bytes = match msg {
                        Message::Binary(b) => b,
                        Message::Close(_) => break End::Quiet("client closed socket"),
                        Message::Text(_) => break End::Close(1003, "text frames are not LiveKit signaling; send binary protobuf".into()),
                        Message::Ping(_) | Message::Pong(_) => continue,
                    };
                    let req = match proto::decode_signal_request(&bytes) {
                        Ok(r) => r,
                        Err(e) => break End::Close(1007, format!("malformed SignalRequest ({} bytes): {e}", bytes.len())),
                    };
                    let Some(req) = req.message else { continue };
                    match self.handle(req, &mut sink).await {
                        Ok(None) => {}
                        Ok(Some(end)) => break end,
                        Err(()) => break End::Quiet("socket write failed"),
                    }
                }
                ctl = ctl_rx.recv() => match ctl {
                    Some(Control::Signal(resp)) => {
                        let resp = *resp;
                        if send(&mut sink, &resp).await.is_err() { break End::Quiet("socket write failed") }
                    }
                    Some(Control::Kick(reason)) => break End::Leave(reason),
                    None => break End::Quiet("room dropped session"),
                },
                ev = wire_rx.recv() => match ev {
                    Some(WireEvent::LocalCandidate(json)) => {
                        let t = TrickleRequest { candidate_init: json, target: SignalTarget::Publisher as i32, r#final: false };
                        if send(&mut sink, &proto::response(signal_response::Message::Trickle(t))).await.is_err() {
                            break End::Quiet("socket write failed");
                        }
                    }
                    Some(WireEvent::Connected) => {
                        self.connected = true;
                        self.participant.set_state(participant_info::State::Active);
                        self.room.announce(&self.participant);
                    }
                    Some(WireEvent::Down(why)) => {
                        tracing::info!(identity = %self.participant.identity(), "{why}");
                        break End::Leave(DisconnectReason::MediaFailure);
                    }
                    Some(WireEvent::Channel(kind, dc)) => self.start_channel(kind, dc),
                    None => break End::Quiet("peer connection gone"),
                },
                _ = tick.tick() => {
                    if last_seen.elapsed() > cfg.ping_timeout {
                        break End::Quiet("ping timeout");
                    }
                    if !self.connected && started.elapsed() > cfg.connect_timeout {
                        break End::Leave(DisconnectReason::ConnectionTimeout);
                    }
                }
                _ = shutdown.changed() => break End::Leave(DisconnectReason::ServerShutdown),
            }
        };
        match &end {
            End::Leave(reason) => {
                let _ = send(&mut sink, &proto::leave(*reason)).await;
                let _ = sink.send(Message::Close(None)).await;
            }
            End::Close(code, reason) => {
                let reason: String = reason.chars().take(120).collect();
                let _ = sink
                    .send(Message::Close(Some(CloseFrame {
                        code: *code,
                        reason: reason.into(),
                    })))
                    .await;
            }
            End::Quiet(_) => {
                let _ = sink.send(Message::Close(None)).await;
            }
        }
        end
    }

    /// Handles one request. `Ok(Some(end))` ends the session; `Err` means the socket died.
    async fn handle(
        &mut self,
        req: signal_request::Message,
        sink: &mut futures::stream::SplitSink<WebSocket, Message>,
    ) -> Result<Option<End>, ()> {
        use signal_request::Message as M;
        match req {
            M::Offer(offer) => {
                let Some(publisher) = &self.publisher else {
                    return Ok(None);
                };
                match publisher.answer(offer.sdp).await {
                    Ok(sdp) => {
                        self.answered = true;
                        let answer = SessionDescription {
                            r#type: "answer".to_owned(),
                            sdp,
                            id: offer.id,
                            ..Default::default()
                        };
                        send(
                            sink,
                            &proto::response(signal_response::Message::Answer(answer)),
                        )
                        .await?;
                        for c in std::mem::take(&mut self.early_candidates) {
                            if let Err(e) = publisher.add_candidate(&c).await {
                                tracing::warn!(identity = %self.participant.identity(), "early candidate: {e}");
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(identity = %self.participant.identity(), "offer refused: {e}");
                        return Ok(Some(End::Close(1007, format!("offer refused: {e}"))));
                    }
                }
            }
            M::Trickle(t) => {
                if t.target != SignalTarget::Publisher as i32 {
                    // We never offer a subscriber connection, so there is nothing to add to.
                    return Ok(None);
                }
                if self.answered {
                    if let Some(publisher) = &self.publisher {
                        if let Err(e) = publisher.add_candidate(&t.candidate_init).await {
                            tracing::warn!(identity = %self.participant.identity(), "candidate: {e}");
                        }
                    }
                } else if self.early_candidates.len() < MAX_EARLY_CANDIDATES {
                    self.early_candidates.push(t.candidate_init);
                } else {
                    tracing::warn!(identity = %self.participant.identity(), "too many candidates before the offer; dropped");
                }
            }
            M::Leave(_) => return Ok(Some(End::Quiet("client left"))),
            M::Ping(ts) => {
                let _ = ts;
                send(
                    sink,
                    &proto::response(signal_response::Message::Pong(crate::room::now_ms())),
                )
                .await?;
            }
            M::PingReq(p) => {
                let pong = Pong {
                    last_ping_timestamp: p.timestamp,
                    timestamp: crate::room::now_ms(),
                };
                send(
                    sink,
                    &proto::response(signal_response::Message::PongResp(pong)),
                )
                .await?;
            }
            other => {
                tracing::debug!(kind = proto::request_kind(&other), "ignored signal request");
            }
        }
        Ok(None)
    }

    /// Starts the reader (relay into the room) and writer (drain our queue) of a channel.
    fn start_channel(&mut self, kind: Reliability, dc: DataChannelHandle) {
        tracing::debug!(identity = %self.participant.identity(), ?kind, "data channel open");
        if let Some(mut rx) = self.participant.take_outbox(kind) {
            let writer = dc.clone();
            self.tasks.push(self.shared.tasks.spawn(async move {
                while let Some(packet) = rx.recv().await {
                    if let Err(e) = writer.send(&packet).await {
                        tracing::debug!("writer stops: {e}");
                        break;
                    }
                }
            }));
        }
        let room = self.room.clone();
        let me = self.participant.clone();
        self.tasks.push(self.shared.tasks.spawn(async move {
            while let Some(bytes) = dc.recv().await {
                let mut packet = match proto::decode_data_packet(&bytes) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(from = %me.identity(), "dropping malformed DataPacket ({} bytes): {e}", bytes.len());
                        continue;
                    }
                };
                if !me.grant.can_publish_data {
                    continue;
                }
                let destinations = proto::stamp_sender(&mut packet, me.identity(), &me.sid);
                tracing::trace!(from = %me.identity(), kind = proto::packet_kind(&packet), "relay");
                let encoded = Arc::new(proto::encode_data_packet(&packet));
                room.relay(&me.sid, kind, &destinations, encoded).await;
            }
        }));
    }

    async fn teardown(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        if let Some(p) = self.publisher.take() {
            p.close().await;
        }
    }
}

async fn send(
    sink: &mut futures::stream::SplitSink<WebSocket, Message>,
    msg: &proto::SignalResponse,
) -> Result<(), ()> {
    sink.send(Message::Binary(proto::encode_signal_response(msg).into()))
        .await
        .map_err(|_| ())
}

fn secs_i32(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}
