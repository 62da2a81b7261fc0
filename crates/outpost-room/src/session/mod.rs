//! One participant's signaling session: the WebSocket loop that joins the room,
//! negotiates the peer connections, trickles candidates, keeps the ping clock, relays
//! the participant's data channels, and cleans everything up when any of that ends.
//!
//! With a resume window (`Config::resume_window`), losing the WebSocket does not end
//! the session: the peer connections and the relay stay up, participant updates are
//! held, and a `reconnect=1` request for the same participant hands the session a new
//! socket ([`resume`]). The session ends if none comes within the window.
//!
//! Here: the session's state ([`Session`]), its start and end ([`run`], `teardown`) and
//! how it writes to its client ([`Lost`] says why it could not). `signal`: the loop and
//! the socket's life (join, events, clock, detach, resume, goodbye); `requests`: what
//! each `SignalRequest` does; `media`: the tracks it publishes and subscribes to;
//! `data`: its data channels' relay tasks.

mod data;
mod media;
mod requests;
mod signal;

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use outpost_webrtc::LocalAudioTrack;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::auth::Grant;
use crate::media::PublishedTrack;
use crate::proto::{
    self, DisconnectReason, LeaveRequest, ServerInfo, TrackInfo, leave_request, server_info,
    signal_response,
};
use crate::room::{Control, Participant, ResumedSocket, Room};
use crate::shared::Shared;
use crate::wire::{Peer, Role, WireEvent};

/// How long a participant that asked to leave keeps relaying what is still in flight.
const LEAVE_GRACE: Duration = Duration::from_millis(300);

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

/// What the signal loop does after one event: go on, or end the session this way.
type Flow = ControlFlow<End>;

/// Why a step that talks to the client could not finish. Either way the session
/// treats its signal connection as lost: it detaches (with a resume window) or ends.
#[derive(Debug, thiserror::Error)]
enum Lost {
    /// Writing to the client's WebSocket failed.
    #[error("socket write failed: {0}")]
    Write(#[source] axum::Error),
    /// Offering the subscriber connection (renegotiation, ICE restart) failed.
    #[error("subscriber offer failed: {0}")]
    Offer(#[source] crate::Error),
}

impl Lost {
    /// The reason a session that ends for it gives.
    fn as_str(&self) -> &'static str {
        match self {
            Lost::Write(_) => "socket write failed",
            Lost::Offer(_) => "subscriber offer failed",
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
    /// Set once the track is bound and the subscriber connection is up: the forwarding
    /// task sends nothing before.
    deliver: tokio::sync::watch::Sender<bool>,
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
    async fn say(&mut self, msg: &proto::SignalResponse) -> Result<(), Lost> {
        match self.sink.as_mut() {
            Some(sink) => send(sink, msg).await.map_err(Lost::Write),
            None => Ok(()),
        }
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

async fn send(sink: &mut Sink, msg: &proto::SignalResponse) -> Result<(), axum::Error> {
    sink.send(Message::Binary(proto::encode_signal_response(msg).into()))
        .await
}
