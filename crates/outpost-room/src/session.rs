//! One participant's signaling session: the WebSocket loop that joins the room,
//! negotiates the peer connections, trickles candidates, keeps the ping clock, relays
//! the participant's data channels, and cleans everything up when any of that ends.
//!
//! With a resume window (`Config::resume_window`), losing the WebSocket does not end
//! the session: the peer connections and the relay stay up, participant updates are
//! held, and a `reconnect=1` request for the same participant hands the session a new
//! socket ([`resume`]). The session ends if none comes within the window.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::auth::Grant;
use crate::media::{self, PublishedTrack};
use crate::proto::{
    self, AddTrackRequest, DisconnectReason, JoinResponse, LeaveRequest, MuteTrackRequest,
    ParticipantUpdate, Pong, ReconnectResponse, Reliability, RequestResponse, RoomUpdate,
    ServerInfo, SessionDescription, SignalTarget, TrackInfo, TrackPublishedResponse,
    TrackUnpublishedResponse, TrickleRequest, UpdateParticipantMetadata, leave_request,
    participant_info, request_response, server_info, signal_request, signal_response,
};
use crate::room::ResumedSocket;
use crate::room::{Control, Participant, Room};
use crate::shared::Shared;
use crate::wire::{DataChannelHandle, Peer, Role, WireEvent};
use outpost_webrtc::{LocalAudioTrack, MediaKind, RemoteTrack};

/// How long a participant that asked to leave keeps relaying what is still in flight.
const LEAVE_GRACE: Duration = Duration::from_millis(300);

/// Candidates buffered before the matching description arrives.
const MAX_EARLY_CANDIDATES: usize = 64;

/// Participant updates held for a detached client (beyond this the oldest are
/// dropped; the full participant list sent on resume still tells the truth).
const MAX_HELD_UPDATES: usize = 1024;

type Sink = SplitSink<WebSocket, Message>;
type Stream = SplitStream<WebSocket>;

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
    auto_subscribe: bool,
) {
    let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
    let participant = Arc::new(Participant::new(grant, client_protocol, ctl_tx));
    let room = shared.registry.join(participant.clone());
    tracing::info!(room = %room.name, identity = %participant.identity(), sid = %participant.sid, "participant joined");
    let (wire_tx, wire_rx) = mpsc::unbounded_channel();
    let mut session = Session {
        shared: shared.clone(),
        participant: participant.clone(),
        room: room.clone(),
        wire_tx,
        publisher: None,
        subscriber: None,
        early_candidates: Vec::new(),
        sub_candidates: Vec::new(),
        answered: false,
        sub_answered: false,
        offer_id: 0,
        connected: false,
        tasks: Vec::new(),
        sink: None,
        held: VecDeque::new(),
        last_seen: Instant::now(),
        detached_at: None,
        auto_subscribe,
        pending_tracks: Vec::new(),
        awaiting_media: Vec::new(),
        subscriptions: HashMap::new(),
        sub_offer_outstanding: false,
        sub_renegotiate: false,
        sub_connected: tokio::sync::watch::channel(false).0,
    };
    let end = session.drive(socket, ctl_rx, wire_rx).await;
    tracing::info!(room = %room.name, identity = %participant.identity(), sid = %participant.sid, reason = %end.reason(), "participant left");
    if matches!(end, End::Quiet("client left")) {
        // A client that sends data and then leaves at once would otherwise lose the
        // packets still crossing SCTP while its Leave overtook them on the WebSocket.
        tokio::time::sleep(LEAVE_GRACE).await;
    }
    shared.registry.leave(&room, &participant);
    session.teardown().await;
}

/// Serves a `reconnect=1` request: hands the socket to the participant's live
/// session, or, when there is none (it ended, or the sid does not match), tells the
/// client to reconnect in full, as livekit-server does (`LeaveRequest` with action
/// RECONNECT, reason STATE_MISMATCH).
pub(crate) async fn resume(shared: Arc<Shared>, socket: WebSocket, grant: Grant, sid: String) {
    let found = shared
        .registry
        .find(&grant.room, &grant.identity)
        .filter(|(_, p)| sid.is_empty() || p.sid == sid);
    let socket = match found {
        Some((_, p)) => match p.try_control(Control::Resume(ResumedSocket {
            socket: Box::new(socket),
        })) {
            Ok(()) => return,
            Err(Control::Resume(r)) => *r.socket,
            Err(_) => return,
        },
        None => socket,
    };
    tracing::info!(room = %grant.room, identity = %grant.identity, %sid, "resume refused: no live session; asking for a full reconnect");
    let (mut sink, _stream) = socket.split();
    let leave = proto::response(signal_response::Message::Leave(LeaveRequest {
        can_reconnect: true,
        reason: DisconnectReason::StateMismatch as i32,
        action: leave_request::Action::Reconnect as i32,
        regions: None,
    }));
    let _ = send(&mut sink, &leave).await;
    let _ = sink.send(Message::Close(None)).await;
}

struct Session {
    shared: Arc<Shared>,
    participant: Arc<Participant>,
    room: Arc<Room>,
    wire_tx: mpsc::UnboundedSender<WireEvent>,
    /// The client's publisher connection (it offers).
    publisher: Option<Peer>,
    /// The subscriber connection we offer (only with `subscriber_primary`).
    subscriber: Option<Peer>,
    early_candidates: Vec<String>,
    sub_candidates: Vec<String>,
    answered: bool,
    sub_answered: bool,
    offer_id: u32,
    /// The primary connection is up.
    connected: bool,
    tasks: Vec<JoinHandle<()>>,
    /// The WebSocket's sending half; `None` while detached (waiting for a resume).
    sink: Option<Sink>,
    /// Participant updates that arrived while detached.
    held: VecDeque<proto::SignalResponse>,
    last_seen: Instant,
    detached_at: Option<Instant>,
    /// Subscribe to the others' tracks (the join's `auto_subscribe`, default on).
    auto_subscribe: bool,
    /// Tracks announced with `AddTrackRequest` that no offer has carried yet:
    /// (cid, info with its sid).
    pending_tracks: Vec<(String, TrackInfo)>,
    /// Tracks published when an offer carried them (as livekit-server does), whose
    /// media has not arrived yet: their reader starts with the first packet.
    awaiting_media: Vec<Arc<PublishedTrack>>,
    /// The others' tracks we forward to this client, by track sid.
    subscriptions: HashMap<String, Subscription>,
    /// An offer on the subscriber connection awaits its answer.
    sub_offer_outstanding: bool,
    /// The subscriber's tracks changed while an offer was outstanding: offer again
    /// once it is answered.
    sub_renegotiate: bool,
    /// The subscriber connection is up (forwarding waits for it: before DTLS is
    /// done there are no keys to encrypt with).
    sub_connected: tokio::sync::watch::Sender<bool>,
}

/// One forwarded track on this client's subscriber connection.
struct Subscription {
    local: LocalAudioTrack,
    task: JoinHandle<()>,
    track: Arc<PublishedTrack>,
    /// A subscriber offer with this track has gone out.
    offered: bool,
    /// The client answered an offer with this track: it is bound to its receiver.
    bound: bool,
}

async fn next_frame(stream: &mut Option<Stream>) -> Option<Result<Message, axum::Error>> {
    match stream {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

impl Session {
    fn primary(&self) -> Role {
        if self.shared.config.subscriber_primary {
            Role::Subscriber
        } else {
            Role::Publisher
        }
    }

    fn server_info(&self) -> ServerInfo {
        ServerInfo {
            edition: server_info::Edition::Standard as i32,
            version: proto::SERVER_VERSION.to_owned(),
            protocol: proto::PROTOCOL_VERSION,
            region: "local".to_owned(),
            node_id: self.shared.node_id.clone(),
            ..Default::default()
        }
    }

    /// Sends on the socket if there is one. `Err` means the write failed.
    async fn say(&mut self, msg: &proto::SignalResponse) -> Result<(), ()> {
        match self.sink.as_mut() {
            Some(sink) => send(sink, msg).await,
            None => Ok(()),
        }
    }

    /// The socket is gone. Without a resume window that ends the session; with one,
    /// the session detaches and waits for the client to come back.
    fn lost(&mut self, why: &'static str, stream: &mut Option<Stream>) -> Option<End> {
        if self.shared.config.resume_window.is_zero() {
            return Some(End::Quiet(why));
        }
        tracing::info!(
            identity = %self.participant.identity(),
            sid = %self.participant.sid,
            window = ?self.shared.config.resume_window,
            "signal connection lost ({why}); waiting for the client to resume"
        );
        // Dropping both halves drops the socket, which closes the connection.
        self.sink = None;
        *stream = None;
        self.detached_at = Some(Instant::now());
        None
    }

    async fn drive(
        &mut self,
        socket: WebSocket,
        mut ctl_rx: mpsc::UnboundedReceiver<Control>,
        mut wire_rx: mpsc::UnboundedReceiver<WireEvent>,
    ) -> End {
        let (sink, stream) = socket.split();
        self.sink = Some(sink);
        let mut stream = Some(stream);
        let cfg = self.shared.config.clone();
        if let Err(e) = self.create_peers().await {
            tracing::error!("cannot create peer connection: {e}");
            let _ = self.say(&proto::leave(DisconnectReason::JoinFailure)).await;
            return End::Quiet("peer connection setup failed");
        }

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
            subscriber_primary: cfg.subscriber_primary,
            ping_timeout: secs_i32(cfg.ping_timeout),
            ping_interval: secs_i32(cfg.ping_interval),
            server_info: Some(self.server_info()),
            ..Default::default()
        };
        if self
            .say(&proto::response(signal_response::Message::Join(join)))
            .await
            .is_err()
        {
            return End::Quiet("socket closed before join response");
        }
        if self.subscriber.is_some() {
            // As livekit-server does when the subscriber is primary: offer it right
            // after the join, with our data channels in it.
            if let Err(e) = self.offer_subscriber(false).await {
                tracing::error!("cannot offer the subscriber connection: {e}");
                let _ = self.say(&proto::leave(DisconnectReason::JoinFailure)).await;
                return End::Quiet("subscriber offer failed");
            }
        }

        // A late joiner gets the tracks already published (it saw them in the join).
        for other in self.room.others(&self.participant.sid) {
            if other.grant.hidden {
                continue;
            }
            for track in other.tracks() {
                if self.subscribe(track).await.is_err() {
                    return End::Quiet("socket closed while subscribing");
                }
            }
        }

        let mut shutdown = self.shared.shutdown.subscribe();
        if *shutdown.borrow_and_update() {
            let _ = self
                .say(&proto::leave(DisconnectReason::ServerShutdown))
                .await;
            return End::Quiet("server shutting down");
        }
        self.last_seen = Instant::now();
        let started = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let end = loop {
            tokio::select! {
                msg = next_frame(&mut stream) => {
                    let msg = match msg {
                        None => match self.lost("socket closed", &mut stream) {
                            Some(end) => break end,
                            None => continue,
                        },
                        Some(Ok(m)) => m,
                        Some(Err(e)) => {
                            let reason = format!("websocket error: {e}");
                            if cfg.resume_window.is_zero() {
                                break End::Close(1009, reason);
                            }
                            close_with(self.sink.as_mut(), 1009, &reason).await;
                            match self.lost("websocket error", &mut stream) {
                                Some(end) => break end,
                                None => continue,
                            }
                        }
                    };
                    self.last_seen = Instant::now();
                    let bytes = match msg {
                        Message::Binary(b) => b,
                        Message::Close(_) => match self.lost("client closed socket", &mut stream) {
                            Some(end) => break end,
                            None => continue,
                        },
                        Message::Text(_) => break End::Close(1003, "text frames are not LiveKit signaling; send binary protobuf".into()),
                        Message::Ping(_) | Message::Pong(_) => continue,
                    };
                    let req = match proto::decode_signal_request(&bytes) {
                        Ok(r) => r,
                        Err(e) => break End::Close(1007, format!("malformed SignalRequest ({} bytes): {e}", bytes.len())),
                    };
                    let Some(req) = req.message else { continue };
                    match self.handle(req).await {
                        Ok(None) => {}
                        Ok(Some(end)) => break end,
                        Err(()) => match self.lost("socket write failed", &mut stream) {
                            Some(end) => break end,
                            None => continue,
                        },
                    }
                }
                ctl = ctl_rx.recv() => match ctl {
                    Some(Control::Signal(resp)) => {
                        if self.sink.is_none() {
                            if self.held.len() >= MAX_HELD_UPDATES {
                                self.held.pop_front();
                            }
                            self.held.push_back(*resp);
                        } else if self.say(&resp).await.is_err() {
                            if let Some(end) = self.lost("socket write failed", &mut stream) { break end }
                        }
                    }
                    Some(Control::Kick(reason)) => break End::Leave(reason),
                    Some(Control::Resume(r)) => {
                        if self.resume(*r.socket, &mut stream).await.is_err() {
                            if let Some(end) = self.lost("socket write failed", &mut stream) { break end }
                        }
                    }
                    Some(Control::Subscribe(track)) => {
                        if self.subscribe(track).await.is_err() {
                            if let Some(end) = self.lost("socket write failed", &mut stream) { break end }
                        }
                    }
                    Some(Control::Unsubscribe(sid)) => {
                        if self.unsubscribe(&sid).await.is_err() {
                            if let Some(end) = self.lost("socket write failed", &mut stream) { break end }
                        }
                    }
                    None => break End::Quiet("room dropped session"),
                },
                ev = wire_rx.recv() => match ev {
                    Some(WireEvent::LocalCandidate(role, json)) => {
                        let target = match role {
                            Role::Publisher => SignalTarget::Publisher,
                            Role::Subscriber => SignalTarget::Subscriber,
                        };
                        let t = TrickleRequest { candidate_init: json, target: target as i32, r#final: false };
                        // Candidates gathered while detached are stale by the time the
                        // client is back (it restarts ICE), so they are not held.
                        if self.say(&proto::response(signal_response::Message::Trickle(t))).await.is_err() {
                            if let Some(end) = self.lost("socket write failed", &mut stream) { break end }
                        }
                    }
                    Some(WireEvent::Connected(role)) => {
                        if role == Role::Subscriber {
                            self.sub_connected.send_replace(true);
                            self.tell_subscribed();
                        }
                        if role == self.primary() && !self.connected {
                            self.connected = true;
                            self.participant.set_state(participant_info::State::Active);
                            self.room.announce(&self.participant);
                        }
                    }
                    Some(WireEvent::Down(role, why)) => {
                        tracing::info!(identity = %self.participant.identity(), ?role, "{why}");
                        break End::Leave(DisconnectReason::MediaFailure);
                    }
                    Some(WireEvent::Channel(role, kind, dc)) => self.start_channel(role, kind, dc),
                    Some(WireEvent::Track(track)) => self.track_arrived(track),
                    Some(WireEvent::TrackEnded(sid)) => {
                        if self.unpublish(&sid, "its media ended").await.is_err() {
                            if let Some(end) = self.lost("socket write failed", &mut stream) { break end }
                        }
                    }
                    None => break End::Quiet("peer connection gone"),
                },
                _ = tick.tick() => {
                    if self.sink.is_some() && self.last_seen.elapsed() > cfg.ping_timeout {
                        if let Some(end) = self.lost("ping timeout", &mut stream) { break end }
                    }
                    if self.detached_at.is_some_and(|t| t.elapsed() > cfg.resume_window) {
                        break End::Quiet("not resumed within the resume window");
                    }
                    if !self.connected && started.elapsed() > cfg.connect_timeout {
                        break End::Leave(DisconnectReason::ConnectionTimeout);
                    }
                }
                _ = shutdown.changed() => break End::Leave(DisconnectReason::ServerShutdown),
            }
        };
        if let Some(sink) = self.sink.as_mut() {
            match &end {
                End::Leave(reason) => {
                    let _ = send(sink, &proto::leave(*reason)).await;
                    let _ = sink.send(Message::Close(None)).await;
                }
                End::Close(code, reason) => close_with(Some(sink), *code, reason).await,
                End::Quiet(_) => {
                    let _ = sink.send(Message::Close(None)).await;
                }
            }
        }
        end
    }

    /// Creates the publisher connection (answered when the client offers) and, with
    /// `subscriber_primary`, the subscriber connection with our data channels.
    async fn create_peers(&mut self) -> crate::Result<()> {
        let cfg = &self.shared.config;
        self.publisher = Some(Peer::new(&cfg.wire, Role::Publisher, self.wire_tx.clone()).await?);
        if !cfg.subscriber_primary {
            return Ok(());
        }
        let subscriber = Peer::new(&cfg.wire, Role::Subscriber, self.wire_tx.clone()).await?;
        for (kind, dc) in subscriber.create_channels().await? {
            let events = self.wire_tx.clone();
            self.tasks.push(self.shared.tasks.spawn(async move {
                if dc.opened().await {
                    let _ = events.send(WireEvent::Channel(Role::Subscriber, kind, dc));
                }
            }));
        }
        self.subscriber = Some(subscriber);
        Ok(())
    }

    /// Sends an offer for the subscriber connection (an ICE restart after a resume).
    async fn offer_subscriber(&mut self, ice_restart: bool) -> crate::Result<()> {
        let Some(sub) = &self.subscriber else {
            return Ok(());
        };
        let sdp = sub.offer(ice_restart).await?;
        tracing::trace!(identity = %self.participant.identity(), ice_restart, %sdp, "subscriber offer");
        self.sub_answered = false;
        self.sub_offer_outstanding = true;
        self.offer_id += 1;
        for s in self.subscriptions.values_mut() {
            s.offered = true;
        }
        let offer = SessionDescription {
            r#type: "offer".to_owned(),
            sdp,
            id: self.offer_id,
            ..Default::default()
        };
        self.say(&proto::response(signal_response::Message::Offer(offer)))
            .await
            .map_err(|()| crate::Error::Webrtc("socket closed while offering".into()))
    }

    /// Attaches a resumed client's socket, as livekit-server resumes: a
    /// `ReconnectResponse` (with the last reliable sequence we received, so the SDK
    /// resends only what we lack), what was held while detached, the full participant
    /// list and the room, then an ICE restart of the subscriber connection if there is
    /// one (the client restarts its publisher itself).
    async fn resume(&mut self, socket: WebSocket, stream: &mut Option<Stream>) -> Result<(), ()> {
        if let Some(mut old) = self.sink.take() {
            // The client gave up on a socket we still thought alive.
            let _ = old.send(Message::Close(None)).await;
        }
        let (sink, st) = socket.split();
        self.sink = Some(sink);
        *stream = Some(st);
        let away = self.detached_at.take().map(|t| t.elapsed());
        self.last_seen = Instant::now();
        tracing::info!(
            room = %self.room.name,
            identity = %self.participant.identity(),
            sid = %self.participant.sid,
            ?away,
            last_message_seq = self.participant.last_reliable_seq(),
            "session resumed"
        );
        let reconnect = ReconnectResponse {
            ice_servers: Vec::new(),
            client_configuration: None,
            server_info: Some(self.server_info()),
            last_message_seq: self.participant.last_reliable_seq(),
        };
        self.say(&proto::response(signal_response::Message::Reconnect(
            reconnect,
        )))
        .await?;
        while let Some(held) = self.held.pop_front() {
            self.say(&held).await?;
        }
        let me = &self.participant.sid;
        let everyone = ParticipantUpdate {
            participants: self
                .room
                .everyone()
                .iter()
                .filter(|p| &p.sid == me || !p.grant.hidden)
                .map(|p| p.info())
                .collect(),
        };
        self.say(&proto::response(signal_response::Message::Update(everyone)))
            .await?;
        let room = RoomUpdate {
            room: Some(self.room.info()),
        };
        self.say(&proto::response(signal_response::Message::RoomUpdate(room)))
            .await?;
        if let Err(e) = self.offer_subscriber(true).await {
            tracing::warn!(identity = %self.participant.identity(), "subscriber ICE restart: {e}");
            return Err(());
        }
        Ok(())
    }

    /// Handles one request. `Ok(Some(end))` ends the session; `Err` means the socket died.
    async fn handle(&mut self, req: signal_request::Message) -> Result<Option<End>, ()> {
        use signal_request::Message as M;
        tracing::trace!(identity = %self.participant.identity(), kind = proto::request_kind(&req), "signal request");
        match req {
            M::Offer(offer) => {
                tracing::trace!(identity = %self.participant.identity(), sdp = %offer.sdp, "publisher offer");
                // A published track whose section no longer sends (the SDK removed
                // its sender to unpublish) is unpublished.
                let sending = outpost_webrtc::media::sending_track_ids(&offer.sdp);
                let stopped: Vec<String> = self
                    .participant
                    .tracks()
                    .into_iter()
                    .filter(|t| !sending.contains(&t.media_id))
                    .map(|t| t.sid.clone())
                    .collect();
                if outpost_webrtc::media::sends_video(&offer.sdp) {
                    tracing::warn!(identity = %self.participant.identity(), "the publisher offer sends video; {}", media::VIDEO_REFUSED);
                }
                let Some(publisher) = &self.publisher else {
                    return Ok(None);
                };
                match publisher.answer(offer.sdp).await {
                    Ok(sdp) => {
                        tracing::trace!(identity = %self.participant.identity(), %sdp, "publisher answer");
                        self.answered = true;
                        let answer = SessionDescription {
                            r#type: "answer".to_owned(),
                            sdp,
                            id: offer.id,
                            ..Default::default()
                        };
                        let candidates = std::mem::take(&mut self.early_candidates);
                        self.say(&proto::response(signal_response::Message::Answer(answer)))
                            .await?;
                        if let Some(publisher) = &self.publisher {
                            for c in candidates {
                                if let Err(e) = publisher.add_candidate(&c).await {
                                    tracing::warn!(identity = %self.participant.identity(), "early candidate: {e}");
                                }
                            }
                        }
                        for sid in stopped {
                            self.unpublish(&sid, "its sender was removed").await?;
                        }
                        self.publish_offered(&sending);
                    }
                    Err(e) => {
                        tracing::warn!(identity = %self.participant.identity(), "offer refused: {e}");
                        return Ok(Some(End::Close(1007, format!("offer refused: {e}"))));
                    }
                }
            }
            M::Answer(answer) => {
                let Some(sub) = &self.subscriber else {
                    tracing::debug!(identity = %self.participant.identity(), "answer without a subscriber offer; ignored");
                    return Ok(None);
                };
                tracing::trace!(identity = %self.participant.identity(), sdp = %answer.sdp, "subscriber answer");
                if let Err(e) = sub.apply_answer(answer.sdp).await {
                    tracing::warn!(identity = %self.participant.identity(), "subscriber answer refused: {e}");
                    return Ok(Some(End::Close(1007, format!("answer refused: {e}"))));
                }
                self.sub_answered = true;
                self.sub_offer_outstanding = false;
                for s in self.subscriptions.values_mut() {
                    s.bound |= s.offered;
                }
                self.tell_subscribed();
                for c in std::mem::take(&mut self.sub_candidates) {
                    if let Err(e) = sub.add_candidate(&c).await {
                        tracing::warn!(identity = %self.participant.identity(), "early subscriber candidate: {e}");
                    }
                }
                if std::mem::take(&mut self.sub_renegotiate) {
                    self.renegotiate_subscriber().await?;
                }
            }
            M::Trickle(t) if t.target == SignalTarget::Subscriber as i32 => {
                let Some(sub) = &self.subscriber else {
                    // No subscriber connection was offered: nothing to add to.
                    return Ok(None);
                };
                if self.sub_answered {
                    if let Err(e) = sub.add_candidate(&t.candidate_init).await {
                        tracing::warn!(identity = %self.participant.identity(), "subscriber candidate: {e}");
                    }
                } else if self.sub_candidates.len() < MAX_EARLY_CANDIDATES {
                    self.sub_candidates.push(t.candidate_init);
                }
            }
            M::Trickle(t) => {
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
            M::UpdateMetadata(update) => self.update_metadata(update).await?,
            M::AddTrack(req) => self.add_track(req).await?,
            M::Mute(req) => self.mute(&req).await?,
            M::SubscriptionPermission(perm) => {
                tracing::info!(identity = %self.participant.identity(), all = perm.all_participants, allowed = ?perm.track_permissions.iter().map(|t| (&t.participant_identity, &t.participant_sid)).collect::<Vec<_>>(), "subscription permission");
                self.room.set_subscribers(&self.participant, &perm);
            }
            M::Subscription(s) => {
                // Explicit subscriptions (a client that joined with auto_subscribe off
                // asks for the tracks it wants, as livekit-server lets it).
                tracing::debug!(identity = %self.participant.identity(), tracks = ?s.track_sids, subscribe = s.subscribe, "UpdateSubscription");
                for sid in s.track_sids.iter().take(media::MAX_PENDING_TRACKS) {
                    if s.subscribe {
                        let track = self
                            .room
                            .others(&self.participant.sid)
                            .iter()
                            .find_map(|p| p.track(sid));
                        if let Some(track) = track {
                            self.subscribe_to(track, true).await?;
                        }
                    } else {
                        self.unsubscribe(sid).await?;
                    }
                }
            }
            M::Leave(_) => return Ok(Some(End::Quiet("client left"))),
            M::Ping(ts) => {
                let _ = ts;
                self.say(&proto::response(signal_response::Message::Pong(
                    crate::room::now_ms(),
                )))
                .await?;
            }
            M::PingReq(p) => {
                let pong = Pong {
                    last_ping_timestamp: p.timestamp,
                    timestamp: crate::room::now_ms(),
                };
                self.say(&proto::response(signal_response::Message::PongResp(pong)))
                    .await?;
            }
            other => {
                tracing::debug!(kind = proto::request_kind(&other), "ignored signal request");
            }
        }
        Ok(None)
    }

    /// The client changes its own name, metadata or attributes. As livekit-server
    /// does: the change goes to everyone in a `ParticipantUpdate` (the sender
    /// included, first, so its SDK has the new values when its request completes),
    /// then the sender gets a `RequestResponse` carrying its request id, which is what
    /// the SDKs' `set_attributes` / `set_metadata` / `set_name` wait for.
    async fn update_metadata(&mut self, update: UpdateParticipantMetadata) -> Result<(), ()> {
        let (reason, message) = match self.participant.update_profile(&update) {
            Ok(changed) => {
                if changed {
                    let me = self.participant.info();
                    self.say(&proto::response(signal_response::Message::Update(
                        ParticipantUpdate {
                            participants: vec![me],
                        },
                    )))
                    .await?;
                    self.room.announce(&self.participant);
                }
                (request_response::Reason::Ok, "")
            }
            Err((reason, message)) => {
                tracing::info!(identity = %self.participant.identity(), ?reason, message, "metadata update refused");
                (reason, message)
            }
        };
        let response = RequestResponse {
            request_id: update.request_id,
            reason: reason as i32,
            message: message.to_owned(),
            request: Some(proto::request_response::Request::UpdateMetadata(update)),
        };
        self.say(&proto::response(signal_response::Message::RequestResponse(
            response,
        )))
        .await
    }

    /// `AddTrackRequest`: an audio track gets its sid and a `TrackPublishedResponse`
    /// (what the SDK's `publish_track` waits for, before it offers the media); it is
    /// published when an offer carries its media section (before any audio, as
    /// livekit-server does), or failing a match when its media arrives. Anything else
    /// is refused with a
    /// `RequestResponse` saying why (video: UNSUPPORTED_TYPE).
    async fn add_track(&mut self, req: AddTrackRequest) -> Result<(), ()> {
        let sid = format!("TR_{}", crate::room::short_id());
        let refused = if self.pending_tracks.len() >= media::MAX_PENDING_TRACKS {
            Err((
                request_response::Reason::LimitExceeded,
                "too many tracks awaiting media",
            ))
        } else if self.pending_tracks.iter().any(|(cid, _)| *cid == req.cid)
            || self.participant.tracks().iter().any(|t| t.cid == req.cid)
        {
            Err((
                request_response::Reason::DuplicateHandle,
                "a track with this cid is already published",
            ))
        } else {
            media::track_info_for(&req, sid, self.participant.grant.can_publish)
        };
        match refused {
            Ok(info) => {
                tracing::info!(identity = %self.participant.identity(), cid = %req.cid, sid = %info.sid, name = %info.name, "audio track announced");
                self.pending_tracks.push((req.cid.clone(), info.clone()));
                let published = TrackPublishedResponse {
                    cid: req.cid,
                    track: Some(info),
                };
                self.say(&proto::response(signal_response::Message::TrackPublished(
                    published,
                )))
                .await
            }
            Err((reason, message)) => {
                tracing::warn!(identity = %self.participant.identity(), cid = %req.cid, kind = req.r#type, ?reason, "track refused: {message}");
                let response = RequestResponse {
                    request_id: 0,
                    reason: reason as i32,
                    message: message.to_owned(),
                    request: Some(request_response::Request::AddTrack(req)),
                };
                self.say(&proto::response(signal_response::Message::RequestResponse(
                    response,
                )))
                .await
            }
        }
    }

    /// A publisher offer was applied: each pending track whose media section it now
    /// sends is published (announced to everyone, subscribed by the others) at once,
    /// before its first packet, as livekit-server does (its `OnTrack` fires from the
    /// SDP). A section is matched to its `AddTrackRequest` by the track id of its
    /// `a=msid` (the SDKs use the cid), else, when one section and one request are
    /// left unmatched, to each other. What stays unmatched is published when its
    /// media arrives ([`Self::track_arrived`]).
    fn publish_offered(&mut self, sending: &[String]) {
        let known: Vec<String> = self
            .participant
            .tracks()
            .iter()
            .map(|t| t.media_id.clone())
            .collect();
        let mut new: Vec<&String> = sending.iter().filter(|id| !known.contains(id)).collect();
        new.dedup();
        let mut unmatched = Vec::new();
        for id in new {
            match self.pending_tracks.iter().position(|(cid, _)| cid == id) {
                Some(at) => {
                    self.publish_pending(at, id);
                }
                None => unmatched.push(id),
            }
        }
        if let ([id], 1) = (unmatched.as_slice(), self.pending_tracks.len()) {
            self.publish_pending(0, id);
        }
    }

    /// Publishes pending track `at`, whose media will carry the track id `media_id`.
    fn publish_pending(&mut self, at: usize, media_id: &str) -> Arc<PublishedTrack> {
        let (cid, info) = self.pending_tracks.remove(at);
        let track = PublishedTrack::new(&self.participant.sid, &cid, media_id, info);
        tracing::info!(identity = %self.participant.identity(), sid = %track.sid, "audio track published");
        self.awaiting_media.push(track.clone());
        self.room.publish(&self.participant, track.clone());
        track
    }

    /// Media arrived on the publisher connection: the published track it belongs to
    /// (matched by the track id of its `a=msid`, else the only one awaiting media) or,
    /// when no offer's section was matched to it, the pending track (same rules) is
    /// published now; a task forwards its packets until it ends.
    fn track_arrived(&mut self, remote: RemoteTrack) {
        if remote.kind() == MediaKind::Video {
            tracing::warn!(identity = %self.participant.identity(), ?remote, "{}", media::VIDEO_REFUSED);
            return;
        }
        let id = remote.track_id();
        let awaiting = self
            .awaiting_media
            .iter()
            .position(|t| t.media_id == id)
            .or_else(|| {
                let pending = self.pending_tracks.iter().any(|(cid, _)| cid == id);
                (!pending && self.awaiting_media.len() == 1).then_some(0)
            });
        let track = if let Some(at) = awaiting {
            self.awaiting_media.remove(at)
        } else {
            let at = self
                .pending_tracks
                .iter()
                .position(|(cid, _)| cid == id)
                .or((self.pending_tracks.len() == 1).then_some(0));
            let Some(at) = at else {
                tracing::warn!(identity = %self.participant.identity(), ?remote, "media for a track that was not announced with AddTrackRequest; ignored");
                return;
            };
            let track = self.publish_pending(at, id);
            self.awaiting_media.retain(|t| t.sid != track.sid);
            track
        };
        tracing::debug!(identity = %self.participant.identity(), sid = %track.sid, "audio track media arrived");
        let events = self.wire_tx.clone();
        self.tasks.push(self.shared.tasks.spawn(async move {
            while let Some(packet) = remote.recv().await {
                track.forward(packet);
            }
            let _ = events.send(WireEvent::TrackEnded(track.sid.clone()));
        }));
    }

    /// Stops publishing one of this client's tracks; the client hears of it
    /// (`TrackUnpublishedResponse`), the others see it go.
    async fn unpublish(&mut self, sid: &str, why: &str) -> Result<(), ()> {
        self.awaiting_media.retain(|t| t.sid != sid);
        if !self.room.unpublish(&self.participant, sid) {
            return Ok(());
        }
        tracing::info!(identity = %self.participant.identity(), %sid, "audio track unpublished: {why}");
        self.say(&proto::response(
            signal_response::Message::TrackUnpublished(TrackUnpublishedResponse {
                track_sid: sid.to_owned(),
            }),
        ))
        .await
    }

    /// `MuteTrackRequest` for one of this client's tracks: the flag goes to everyone
    /// else in a participant update (the SDKs fire track muted / unmuted from it).
    async fn mute(&mut self, req: &MuteTrackRequest) -> Result<(), ()> {
        if let Some(track) = self.participant.track(&req.sid) {
            if track.set_muted(req.muted) {
                tracing::debug!(identity = %self.participant.identity(), sid = %req.sid, muted = req.muted, "track mute");
                self.room.announce(&self.participant);
            }
        } else if let Some((_, info)) = self
            .pending_tracks
            .iter_mut()
            .find(|(_, i)| i.sid == req.sid)
        {
            info.muted = req.muted;
        } else {
            tracing::debug!(identity = %self.participant.identity(), sid = %req.sid, "mute for an unknown track; ignored");
        }
        Ok(())
    }

    /// Forwards another participant's track to this client: a local track on the
    /// subscriber connection (created on first use), a forwarding task, and a new
    /// offer. `Err` only when the socket died.
    async fn subscribe(&mut self, track: Arc<PublishedTrack>) -> Result<(), ()> {
        self.subscribe_to(track, false).await
    }

    /// Forwards `track` to this client: asked for (`explicit`, an `UpdateSubscription`)
    /// or because it joined with auto_subscribe.
    async fn subscribe_to(&mut self, track: Arc<PublishedTrack>, explicit: bool) -> Result<(), ()> {
        if !(self.auto_subscribe || explicit)
            || !self.participant.grant.can_subscribe
            || track.publisher_sid == self.participant.sid
            || self.subscriptions.contains_key(&track.sid)
        {
            return Ok(());
        }
        let allowed = self
            .room
            .by_sid(&track.publisher_sid)
            .is_some_and(|p| p.allows_subscriber(self.participant.identity(), &track.sid));
        if !allowed {
            // As livekit-server: the subscriber is told it may not have this track.
            tracing::info!(identity = %self.participant.identity(), track = %track.sid, "not subscribed: the publisher's subscription permissions leave this participant out");
            let update = proto::SubscriptionPermissionUpdate {
                participant_sid: track.publisher_sid.clone(),
                track_sid: track.sid.clone(),
                allowed: false,
            };
            return self
                .say(&proto::response(
                    signal_response::Message::SubscriptionPermissionUpdate(update),
                ))
                .await;
        }
        if self.subscriber.is_none() {
            match Peer::new(
                &self.shared.config.wire,
                Role::Subscriber,
                self.wire_tx.clone(),
            )
            .await
            {
                Ok(peer) => self.subscriber = Some(peer),
                Err(e) => {
                    tracing::warn!(identity = %self.participant.identity(), "cannot create the subscriber connection: {e}");
                    return Ok(());
                }
            }
        }
        let Some(sub) = &self.subscriber else {
            return Ok(());
        };
        let local = match sub.add_audio_track(&track.stream_id(), &track.sid).await {
            Ok(local) => local,
            Err(e) => {
                tracing::warn!(identity = %self.participant.identity(), track = %track.sid, "cannot subscribe: {e}");
                return Ok(());
            }
        };
        tracing::info!(identity = %self.participant.identity(), track = %track.sid, "subscribed");
        let task = self.shared.tasks.spawn(media::forward(
            track.subscribe(),
            local.clone(),
            self.sub_connected.subscribe(),
            track.sid.clone(),
        ));
        self.subscriptions.insert(
            track.sid.clone(),
            Subscription {
                local,
                task,
                track,
                offered: false,
                bound: false,
            },
        );
        self.renegotiate_subscriber().await
    }

    /// Tells the publishers of the tracks this client can now receive (its answer bound
    /// them and its subscriber connection is up) that they have a subscriber, as
    /// livekit-server does (`TrackSubscribed` on the down track's bind-and-connected,
    /// once per track; not for hidden participants): a publisher that waits for it
    /// before it speaks (LiveKit Agents) is not heard from before it can be.
    fn tell_subscribed(&self) {
        if !*self.sub_connected.borrow() || self.participant.grant.hidden {
            return;
        }
        for s in self.subscriptions.values() {
            if s.bound {
                // Only the track's first subscriber reaches its publisher.
                self.room.subscribed(&s.track);
            }
        }
    }

    /// Stops forwarding a track to this client and renegotiates it away.
    async fn unsubscribe(&mut self, sid: &str) -> Result<(), ()> {
        let Some(sub) = self.subscriptions.remove(sid) else {
            return Ok(());
        };
        sub.task.abort();
        if let Some(peer) = &self.subscriber {
            if let Err(e) = peer.remove_track(&sub.local).await {
                tracing::debug!(identity = %self.participant.identity(), track = %sid, "remove track: {e}");
            }
        }
        tracing::info!(identity = %self.participant.identity(), track = %sid, "unsubscribed");
        self.renegotiate_subscriber().await
    }

    /// Offers the subscriber connection again (its tracks changed), or, when an offer
    /// is still unanswered, once it is answered.
    async fn renegotiate_subscriber(&mut self) -> Result<(), ()> {
        if self.subscriber.is_none() {
            return Ok(());
        }
        if self.sub_offer_outstanding || self.sink.is_none() {
            self.sub_renegotiate = true;
            return Ok(());
        }
        if let Err(e) = self.offer_subscriber(false).await {
            tracing::warn!(identity = %self.participant.identity(), "subscriber renegotiation: {e}");
            return Err(());
        }
        Ok(())
    }

    /// Starts the reader (relay into the room) of a channel and, when it is on the
    /// primary connection, the writer (drain our queue into it).
    fn start_channel(&mut self, role: Role, kind: Reliability, dc: DataChannelHandle) {
        tracing::debug!(identity = %self.participant.identity(), ?role, ?kind, "data channel open");
        if role == self.primary() {
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
                if kind == Reliability::Reliable && !me.accept_reliable_seq(packet.sequence) {
                    tracing::debug!(from = %me.identity(), seq = packet.sequence, "dropping a replayed reliable packet");
                    continue;
                }
                let destinations = proto::stamp_sender(
                    &mut packet,
                    me.identity(),
                    &me.sid,
                    me.grant.kind == "agent",
                );
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
        for (_, sub) in self.subscriptions.drain() {
            sub.task.abort();
        }
        if let Some(p) = self.publisher.take() {
            p.close().await;
        }
        if let Some(p) = self.subscriber.take() {
            p.close().await;
        }
    }
}

async fn send(sink: &mut Sink, msg: &proto::SignalResponse) -> Result<(), ()> {
    sink.send(Message::Binary(proto::encode_signal_response(msg).into()))
        .await
        .map_err(|_| ())
}

async fn close_with(sink: Option<&mut Sink>, code: u16, reason: &str) {
    let Some(sink) = sink else { return };
    let reason: String = reason.chars().take(120).collect();
    let _ = sink
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        })))
        .await;
}

fn secs_i32(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}
