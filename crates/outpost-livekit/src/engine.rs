//! The session engine: one task per room that owns the signal connection and the
//! peer connections, turns what arrives into [`RoomEvent`]s, and recovers from lost
//! links (resume first, then full rejoins with backoff).
//!
//! The room handle talks to it only through the shared state ([`Shared`]: the send
//! queue, the roster, the connection state) and a command channel (leave).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::RoomOptions;
use crate::attributes::{ProfileUpdate, profile_events};
use crate::audio::LocalShared;
use crate::error::{Error, Result};
use crate::outbox::{self, Outbox};
use crate::proto::{
    self, JoinResponse, LeaveRequest, ParticipantInfo, ReconnectReason, SessionDescription,
    SignalTarget, TrickleRequest, data_packet, leave_request, signal_request, signal_response,
};
use crate::signal::{self, Signal};
use crate::streams::{Limits, Receivers};
use crate::types::{
    ConnectionState, DisconnectReason, Participant, ParticipantKind, RoomEvent, StreamSenders,
    TrackInfo, TrackSubscribers,
};
use crate::wire::{Channel, Role, Transport, WireConfig, WireEvent};

/// Commands from the room handle.
#[derive(Debug)]
pub(crate) enum Command {
    /// Leave cleanly; answer when done.
    Leave(oneshot::Sender<()>),
    /// Change our own name, metadata or attributes; answer with the server's verdict.
    UpdateProfile(ProfileUpdate, oneshot::Sender<Result<()>>),
    /// Publish an audio track; answer with its sid once the server confirmed it and
    /// the publisher connection was renegotiated.
    PublishAudio {
        name: String,
        local: Arc<LocalShared>,
        done: oneshot::Sender<Result<String>>,
    },
    /// Mute or unmute our track `sid`.
    MuteTrack {
        sid: String,
        muted: bool,
        done: oneshot::Sender<Result<()>>,
    },
    /// Stop publishing our track `sid`.
    UnpublishTrack {
        sid: String,
        done: oneshot::Sender<Result<()>>,
    },
}

/// A track we asked the server to publish, waiting for its `TrackPublishedResponse`.
struct PendingTrack {
    local: Arc<LocalShared>,
    out: outpost_webrtc::LocalAudioTrack,
    done: oneshot::Sender<Result<String>>,
}

/// Who is in the room.
#[derive(Debug, Default)]
pub(crate) struct Roster {
    pub local: Option<Participant>,
    /// Remote participants in the order they joined.
    pub remote: Vec<Participant>,
    pub assistant: Option<Participant>,
}

/// State the room handle reads and the engine writes.
#[derive(Debug)]
pub(crate) struct Shared {
    pub outbox: Arc<Outbox>,
    pub state: watch::Sender<ConnectionState>,
    pub roster: Mutex<Roster>,
    pub lossy: Mutex<Option<Channel>>,
    pub rpc: crate::rpc::Rpc,
    /// The path ICE selected, read each time the link comes up.
    pub path: Mutex<crate::types::ConnectionPath>,
}

#[cfg(test)]
impl Shared {
    /// A connected room whose local participant is `me` (sid `PA_me`), for unit tests.
    pub(crate) fn for_tests() -> Arc<Self> {
        Self::for_tests_with(crate::rpc::Rpc::default())
    }

    /// The same, with this RPC state.
    pub(crate) fn for_tests_with(rpc: crate::rpc::Rpc) -> Arc<Self> {
        let shared = Arc::new(Self {
            outbox: Arc::new(Outbox::default()),
            state: watch::channel(ConnectionState::Connected).0,
            roster: Mutex::default(),
            lossy: Mutex::default(),
            rpc,
            path: Mutex::default(),
        });
        shared.roster().local = Some(Participant {
            sid: "PA_me".into(),
            identity: "me".into(),
            name: String::new(),
            kind: ParticipantKind::Standard,
            metadata: String::new(),
            attributes: HashMap::new(),
            client_protocol: 0,
        });
        shared
    }
}

impl Shared {
    pub(crate) fn roster(&self) -> std::sync::MutexGuard<'_, Roster> {
        self.roster.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn lossy(&self) -> Option<Channel> {
        self.lossy.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_lossy(&self, ch: Option<Channel>) {
        *self.lossy.lock().unwrap_or_else(|p| p.into_inner()) = ch;
    }
}

/// One signal connection with its peer connections.
struct Link {
    signal: Signal,
    events: signal::Events,
    join: JoinResponse,
    publisher: Transport,
    subscriber: Option<Transport>,
    reliable: Channel,
    lossy: Channel,
    remote_channels: Vec<Channel>,
    pub_candidates: Vec<String>,
    sub_candidates: Vec<String>,
    pub_connected: bool,
    sub_connected: bool,
    answered: bool,
    writer: Option<(JoinHandle<()>, watch::Sender<bool>)>,
    offer_id: u32,
    /// The id of our publisher offer the server has not answered yet: a new offer waits
    /// for that answer (`offer_again`), and an answer with another id is stale.
    awaiting_answer: Option<u32>,
    /// Tracks changed while an offer was out: offer again once it is answered.
    offer_again: bool,
    /// The assistant's tracks we asked the server for (`subscribe_to_assistant`).
    subscribed: std::collections::HashSet<String>,
    /// Of those, the ones whose request is still to be sent.
    to_subscribe: Vec<String>,
    /// Signal events read out of the queue after a resume, handled before newer ones.
    held_signal: std::collections::VecDeque<signal::Event>,
    /// Whether the others have been told we are here (see [`Engine::announced`]).
    announced: bool,
    /// When to stop waiting for that and send anyway.
    announce_deadline: Option<Instant>,
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the peer connection (and channel) to come up.
    Connecting {
        deadline: Instant,
        /// After a resume: when to restart ICE again if the connection is not up yet.
        ice_retry: Option<Instant>,
    },
    Connected,
    /// Waiting before the next rejoin attempt.
    Backoff {
        until: Instant,
        last_error: String,
    },
    Closed,
}

/// How long reliable data waits after connecting for the server to announce us to the
/// room (livekit-server batches the news of a participant that publishes no track every
/// 3 s) before it is sent anyway.
const ANNOUNCE_WAIT: Duration = Duration::from_secs(4);

/// After a resume, how long to wait for the peer connection before restarting ICE again.
const ICE_RETRY: Duration = Duration::from_secs(3);

/// Delay before rejoin attempt `n` (0-based): 300 ms doubling up to 7 s, as the
/// official engine does.
pub(crate) fn backoff(n: u32) -> Duration {
    let ms = 300u64.saturating_mul(1u64 << n.min(10));
    Duration::from_millis(ms.min(7_000))
}

pub(crate) struct Engine {
    url: String,
    token: String,
    opts: RoomOptions,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<RoomEvent>,
    cmd_rx: mpsc::UnboundedReceiver<Command>,
    wire_tx: mpsc::UnboundedSender<WireEvent>,
    wire_rx: mpsc::UnboundedReceiver<WireEvent>,
    epoch: u64,
    link: Option<Link>,
    phase: Phase,
    attempts: u32,
    outage: bool,
    resuming: bool,
    /// What the next resume tells the server it follows: a failed peer connection
    /// (livekit-server then counts a short-lived connection towards its TCP/TLS
    /// fallback, as it does for the official SDKs) or a lost signal connection.
    resume_reason: ReconnectReason,
    receivers: Receivers,
    /// Last reliable sequence seen per sender sid, to drop replays after a resume.
    recv_seq: HashMap<String, u32>,
    /// Our permissions as the server last told them (publish, publish data, subscribe).
    permission: Option<(bool, bool, bool)>,
    ready: Option<oneshot::Sender<Result<()>>>,
    /// Our signal requests waiting for the server's `RequestResponse`, by request id.
    requests: HashMap<u32, oneshot::Sender<Result<()>>>,
    next_request_id: u32,
    /// Our audio tracks waiting for the server, by client id.
    pending_tracks: HashMap<String, PendingTrack>,
    /// Our published audio tracks, by sid.
    local_tracks: HashMap<String, Arc<LocalShared>>,
    /// The tracks each remote participant publishes, by identity.
    published: HashMap<String, Vec<TrackInfo>>,
    /// Decoding tasks of subscribed remote tracks, by track sid.
    receivers_audio: HashMap<String, JoinHandle<()>>,
    /// Streams and RPC requests from sessions no participant update has named yet,
    /// oldest first (with an assistant-only rule on, see [`Engine::hold`]).
    held: Vec<Held>,
    /// Whom the server was last told may subscribe to our tracks (with
    /// [`TrackSubscribers::Assistant`]): `Some(None)` nobody, `None` not told yet on
    /// this connection.
    permitted: Option<Option<String>>,
    /// Subscribed audio whose publisher no participant update has named yet, oldest
    /// first: told to the application once one does, never before (a hidden
    /// participant's tracks are offered without it ever being announced).
    unowned_audio: Vec<UnownedAudio>,
}

/// How long packets of a session no participant update has named are held.
/// livekit-server sends the news of participants without tracks on a 3 s ticker, so a
/// newcomer's update can come almost 3 s after its first data, later on a busy server.
const HOLD_FOR: Duration = Duration::from_secs(5);
/// Sessions whose packets are held at once; a packet of another is not held.
const MAX_HELD_SESSIONS: usize = 8;
/// Bytes held per session; what comes beyond it is dropped.
const MAX_HELD_BYTES: usize = 256 * 1024;

/// Data packets of one session not yet in the roster, in arrival order.
struct Held {
    sid: String,
    since: Instant,
    packets: Vec<(bool, Vec<u8>)>,
    bytes: usize,
}

/// Audio tracks of unknown publishers held at once; the oldest goes beyond it.
const MAX_UNOWNED_AUDIO: usize = 8;

/// A subscribed audio track waiting for its publisher to be named.
struct UnownedAudio {
    sid: String,
    /// The publisher's sid, from the track's stream id (`<participant sid>|<track sid>`).
    stream_sid: String,
    stream: crate::audio::AudioStream,
}

impl Engine {
    pub(crate) fn new(
        url: String,
        token: String,
        opts: RoomOptions,
        shared: Arc<Shared>,
        events: mpsc::UnboundedSender<RoomEvent>,
        cmd_rx: mpsc::UnboundedReceiver<Command>,
    ) -> Self {
        let (wire_tx, wire_rx) = mpsc::unbounded_channel();
        let receivers = Receivers::new(Limits {
            cap: opts.stream_receive_cap,
            per_sender: opts.max_streams_per_sender,
            total: opts.max_open_streams,
            idle: opts.stream_idle_timeout,
        });
        Self {
            url,
            token,
            opts,
            shared,
            events,
            cmd_rx,
            wire_tx,
            wire_rx,
            epoch: 0,
            link: None,
            phase: Phase::Closed,
            attempts: 0,
            outage: false,
            resuming: false,
            resume_reason: ReconnectReason::RrSignalDisconnected,
            receivers,
            recv_seq: HashMap::new(),
            permission: None,
            ready: None,
            requests: HashMap::new(),
            next_request_id: 0,
            pending_tracks: HashMap::new(),
            local_tracks: HashMap::new(),
            published: HashMap::new(),
            receivers_audio: HashMap::new(),
            unowned_audio: Vec::new(),
            held: Vec::new(),
            permitted: None,
        }
    }

    /// First join; the caller then spawns [`Engine::run`] and waits on `ready`.
    pub(crate) async fn start(&mut self, ready: oneshot::Sender<Result<()>>) -> Result<()> {
        self.join().await?;
        self.ready = Some(ready);
        Ok(())
    }

    fn emit(&self, ev: RoomEvent) {
        let _ = self.events.send(ev);
    }

    /// Opens a signal connection and a publisher peer connection and sends the offer.
    async fn join(&mut self) -> Result<()> {
        self.epoch += 1;
        let (signal, join, events) = Signal::connect(
            &self.url,
            &self.token,
            self.opts.connect_timeout,
            self.opts.auto_subscribe,
            if self.opts.rpc_v2 {
                crate::rpc::CLIENT_PROTOCOL_RPC_V2
            } else {
                0
            },
        )
        .await?;
        let config = self.wire_config(&join);
        let built = async {
            let publisher =
                Transport::new(Role::Publisher, self.epoch, &config, self.wire_tx.clone()).await?;
            let reliable = publisher.create_channel(true).await?;
            let lossy = publisher.create_channel(false).await?;
            let sdp = publisher.offer(false).await?;
            Ok::<_, Error>((publisher, reliable, lossy, sdp))
        }
        .await;
        let (publisher, reliable, lossy, sdp) = match built {
            Ok(b) => b,
            Err(e) => {
                signal.close().await;
                return Err(e);
            }
        };
        signal
            .send(signal_request::Message::Offer(SessionDescription {
                r#type: "offer".into(),
                sdp,
                id: 1,
                ..Default::default()
            }))
            .await;
        tracing::info!(
            url = %self.url,
            sid = %join.participant.as_ref().map(|p| p.sid.as_str()).unwrap_or(""),
            subscriber_primary = join.subscriber_primary,
            "joined; negotiating"
        );
        let local = join.participant.as_ref().map(proto::participant);
        self.shared.roster().local = local;
        self.permission = join.participant.as_ref().and_then(proto::permission);
        self.shared
            .rpc
            .set_server_version(join.server_info.as_ref().map(|i| i.version.clone()));
        if proto::force_relay(&join) {
            tracing::info!("the server asks for relayed (TURN) connections only");
        }
        let others = join.other_participants.clone();
        self.link = Some(Link {
            signal,
            events,
            join,
            publisher,
            subscriber: None,
            reliable,
            lossy,
            remote_channels: Vec::new(),
            pub_candidates: Vec::new(),
            sub_candidates: Vec::new(),
            pub_connected: false,
            sub_connected: false,
            answered: false,
            writer: None,
            offer_id: 1,
            awaiting_answer: Some(1),
            offer_again: false,
            subscribed: std::collections::HashSet::new(),
            to_subscribe: Vec::new(),
            held_signal: std::collections::VecDeque::new(),
            announced: false,
            announce_deadline: None,
        });
        self.replace_roster(&others);
        // Before any track of ours can be published on this connection, the server
        // learns who may subscribe to them.
        self.permitted = None;
        self.sync_subscription_permission().await;
        self.phase = Phase::Connecting {
            deadline: Instant::now() + self.opts.peer_connection_timeout,
            ice_retry: None,
        };
        Ok(())
    }

    /// The event loop; returns when the room is closed for good.
    pub(crate) async fn run(mut self) {
        loop {
            if matches!(self.phase, Phase::Closed) {
                break;
            }
            let timer = match &self.phase {
                Phase::Connecting {
                    deadline,
                    ice_retry,
                } => Some(ice_retry.map_or(*deadline, |r| r.min(*deadline))),
                Phase::Backoff { until, .. } => Some(*until),
                Phase::Connected => self.link.as_ref().and_then(|l| l.announce_deadline),
                Phase::Closed => None,
            };
            tokio::select! {
                cmd = self.cmd_rx.recv() => match cmd {
                    Some(Command::Leave(done)) => {
                        self.leave().await;
                        let _ = done.send(());
                    }
                    Some(Command::UpdateProfile(update, done)) => {
                        self.update_profile(update, done).await;
                    }
                    Some(Command::PublishAudio { name, local, done }) => {
                        self.publish_audio(name, local, done).await;
                    }
                    Some(Command::MuteTrack { sid, muted, done }) => {
                        let verdict = match self.link.as_ref() {
                            Some(link) if self.local_tracks.contains_key(&sid) => {
                                link.signal
                                    .send(signal_request::Message::Mute(proto::mute_track(&sid, muted)))
                                    .await;
                                Ok(())
                            }
                            Some(_) => Err(Error::Closed(format!("track {sid} is not published"))),
                            None => Err(Error::Closed("not connected to the room".into())),
                        };
                        let _ = done.send(verdict);
                    }
                    Some(Command::UnpublishTrack { sid, done }) => {
                        let _ = done.send(self.unpublish(&sid).await);
                    }
                    None => self.leave().await,
                },
                ev = next_signal(&mut self.link) => {
                    self.on_signal(ev).await;
                    self.send_subscriptions().await;
                }
                Some(ev) = self.wire_rx.recv() => self.on_wire(ev).await,
                _ = sleep_until(timer) => self.on_timer().await,
                _ = sleep_until(self.receivers.next_expiry()) => {
                    self.receivers.expire(Instant::now());
                }
                _ = sleep_until(self.held.first().map(|h| h.since + HOLD_FOR)) => {
                    self.release_held(Instant::now());
                }
            }
        }
        tracing::debug!("room engine stopped");
    }

    async fn on_signal(&mut self, ev: Option<signal::Event>) {
        use signal_response::Message as M;
        let msg = match ev {
            Some(signal::Event::Message(m)) => *m,
            Some(signal::Event::Close(why)) => {
                self.lost(format!("signal connection lost: {why}"), true)
                    .await;
                return;
            }
            None => {
                self.lost("signal connection lost".into(), true).await;
                return;
            }
        };
        match msg {
            M::Answer(sd) => self.on_publisher_answer(sd).await,
            M::Offer(sd) => self.on_subscriber_offer(sd).await,
            M::Trickle(t) => self.on_trickle(t).await,
            M::Update(u) => {
                self.update_roster(&u.participants);
                self.sync_subscription_permission().await;
            }
            M::Leave(l) => self.on_leave(l).await,
            M::RefreshToken(t) => self.token = t,
            M::RequestResponse(r) => {
                if let Some(cid) = proto::refused_add_track(&r) {
                    // livekit-server refuses a track (no permission to publish, a source
                    // not allowed, an unsupported type) with request id 0.
                    let cid = cid.to_owned();
                    self.refuse_track(
                        &cid,
                        Error::Refused {
                            reason: proto::request_reason_name(r.reason),
                            message: r.message,
                        },
                    )
                    .await;
                    return;
                }
                if let Some(done) = self.requests.remove(&r.request_id) {
                    let verdict = if r.reason == proto::request_response::Reason::Ok as i32 {
                        Ok(())
                    } else {
                        Err(Error::Refused {
                            reason: proto::request_reason_name(r.reason),
                            message: r.message,
                        })
                    };
                    let _ = done.send(verdict);
                }
            }
            M::TrackPublished(r) => self.on_track_published(r.cid, r.track.map(|t| t.sid)).await,
            M::TrackUnpublished(r) => self.on_server_unpublished(&r.track_sid).await,
            M::Join(_) | M::Reconnect(_) => {}
            _ => {}
        }
    }

    /// Sends an `UpdateParticipantMetadata`; `done` gets the server's `RequestResponse`.
    async fn update_profile(&mut self, update: ProfileUpdate, done: oneshot::Sender<Result<()>>) {
        let Some(link) = self.link.as_ref() else {
            let _ = done.send(Err(Error::Closed("not connected to the room".into())));
            return;
        };
        self.next_request_id = self.next_request_id.wrapping_add(1).max(1);
        let id = self.next_request_id;
        // Requests nobody waits for any more (timed out) are dropped here.
        self.requests.retain(|_, tx| !tx.is_closed());
        self.requests.insert(id, done);
        link.signal
            .send(signal_request::Message::UpdateMetadata(update.request(id)))
            .await;
    }

    async fn on_subscriber_offer(&mut self, sd: SessionDescription) {
        let epoch = self.epoch;
        let Some(config) = self.link.as_ref().map(|l| self.wire_config(&l.join)) else {
            return;
        };
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if link.subscriber.is_none() {
            match Transport::new(Role::Subscriber, epoch, &config, self.wire_tx.clone()).await {
                Ok(t) => link.subscriber = Some(t),
                Err(e) => {
                    tracing::warn!("subscriber peer connection: {e}");
                    return;
                }
            }
        }
        let Some(sub) = link.subscriber.as_ref() else {
            return;
        };
        match sub.answer(sd.sdp).await {
            Ok(sdp) => {
                link.signal
                    .send(signal_request::Message::Answer(SessionDescription {
                        r#type: "answer".into(),
                        sdp,
                        id: sd.id,
                        ..Default::default()
                    }))
                    .await;
                for c in std::mem::take(&mut link.sub_candidates) {
                    if let Err(e) = sub.add_candidate(&c).await {
                        tracing::debug!("early subscriber candidate: {e}");
                    }
                }
            }
            Err(e) => tracing::warn!("subscriber offer: {e}"),
        }
    }

    async fn on_trickle(&mut self, t: TrickleRequest) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let subscriber = t.target == SignalTarget::Subscriber as i32;
        let transport = if subscriber {
            link.subscriber.as_ref()
        } else {
            Some(&link.publisher)
        };
        match transport {
            Some(tr) if tr.has_remote_description().await => {
                if let Err(e) = tr.add_candidate(&t.candidate_init).await {
                    tracing::debug!("remote candidate: {e}");
                }
            }
            _ => {
                let buf = if subscriber {
                    &mut link.sub_candidates
                } else {
                    &mut link.pub_candidates
                };
                if buf.len() < 128 {
                    buf.push(t.candidate_init);
                }
            }
        }
    }

    async fn on_leave(&mut self, l: LeaveRequest) {
        let reason = proto::disconnect_reason_name(l.reason);
        match leave_request::Action::try_from(l.action) {
            Ok(leave_request::Action::Resume) => {
                self.resume_reason = ReconnectReason::RrUnknown;
                self.lost(format!("server asked to resume ({reason})"), true)
                    .await;
            }
            Ok(leave_request::Action::Reconnect) => {
                self.lost(format!("server asked to reconnect ({reason})"), false)
                    .await;
            }
            _ if l.can_reconnect => {
                self.lost(format!("server asked to reconnect ({reason})"), false)
                    .await;
            }
            _ => {
                self.disconnect(DisconnectReason::ServerRequest(reason))
                    .await;
            }
        }
    }

    async fn on_wire(&mut self, ev: WireEvent) {
        match ev {
            WireEvent::Message { reliable, data, .. } => self.on_data(reliable, &data),
            WireEvent::Candidate { epoch, role, json } if epoch == self.epoch => {
                if let Some(link) = &self.link {
                    let target = match role {
                        Role::Publisher => SignalTarget::Publisher,
                        Role::Subscriber => SignalTarget::Subscriber,
                    };
                    link.signal
                        .send(signal_request::Message::Trickle(TrickleRequest {
                            candidate_init: json,
                            target: target as i32,
                            r#final: false,
                        }))
                        .await;
                }
            }
            WireEvent::Connected { epoch, role } if epoch == self.epoch => {
                if let Some(link) = self.link.as_mut() {
                    match role {
                        Role::Publisher => link.pub_connected = true,
                        Role::Subscriber => link.sub_connected = true,
                    }
                }
                self.check_ready().await;
            }
            WireEvent::Opened { epoch } if epoch == self.epoch => self.check_ready().await,
            WireEvent::Down { epoch, role, why } if epoch == self.epoch => {
                if let Some(link) = self.link.as_mut() {
                    match role {
                        Role::Publisher => link.pub_connected = false,
                        Role::Subscriber => link.sub_connected = false,
                    }
                }
                if matches!(self.phase, Phase::Connected) {
                    self.resume_reason = match role {
                        Role::Publisher => ReconnectReason::RrPublisherFailed,
                        Role::Subscriber => ReconnectReason::RrSubscriberFailed,
                    };
                    self.lost(format!("{role:?} {why}"), true).await;
                }
            }
            WireEvent::RemoteTrack { epoch, track } if epoch == self.epoch => {
                self.on_remote_track(track);
            }
            WireEvent::RemoteChannel { epoch, channel } if epoch == self.epoch => {
                if let Some(link) = self.link.as_mut() {
                    link.remote_channels.push(channel);
                }
            }
            _ => {}
        }
    }

    /// Moves from `Connecting` to `Connected` once the publisher (and, when the
    /// server says it is primary, the subscriber) is up and `_reliable` is open.
    async fn check_ready(&mut self) {
        if !matches!(self.phase, Phase::Connecting { .. }) {
            return;
        }
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let sub_ok = !link.join.subscriber_primary || link.sub_connected;
        if !(link.pub_connected && sub_ok && link.reliable.is_open()) {
            return;
        }
        if self.resuming {
            link.signal.resumed().await;
        }
        self.shared.set_lossy(Some(link.lossy.clone()));
        let path = crate::types::ConnectionPath {
            publisher: link.publisher.selected_path().await,
            subscriber: match &link.subscriber {
                Some(sub) => sub.selected_path().await,
                None => None,
            },
        };
        tracing::info!(path = %path.describe(), publisher = ?path.publisher, subscriber = ?path.subscriber, "network path");
        *self.shared.path.lock().unwrap_or_else(|p| p.into_inner()) = path;
        if link.announced {
            self.start_writer();
        } else {
            link.announce_deadline = Some(Instant::now() + ANNOUNCE_WAIT);
        }
        self.phase = Phase::Connected;
        self.attempts = 0;
        self.shared.state.send_replace(ConnectionState::Connected);
        tracing::info!(resumed = self.resuming, "connected");
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Ok(()));
        } else if self.outage {
            self.outage = false;
            self.emit(RoomEvent::Reconnected {
                resumed: self.resuming,
            });
        }
        self.resuming = false;
    }

    /// Starts the reliable writer on the link's `_reliable` channel (once per link).
    fn start_writer(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        link.announce_deadline = None;
        if link.writer.is_some() {
            return;
        }
        let (stop_tx, stop_rx) = watch::channel(false);
        let handle = tokio::spawn(outbox::writer(
            self.shared.outbox.clone(),
            link.reliable.clone(),
            stop_rx,
        ));
        link.writer = Some((handle, stop_tx));
    }

    /// The server has told the room about us: our own `ParticipantInfo` came back in a
    /// participant update (livekit-server sends a batch to everyone, us included), or the
    /// assistant sent us something. Until then the others may not know our identity, and
    /// the official SDKs hand our user packets to their apps with no sender
    /// (livekit-server announces a participant that publishes no track up to 3 s after
    /// it joined), so reliable data waits in the outbox for this, or for
    /// [`ANNOUNCE_WAIT`] at most.
    fn announced(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if link.announced {
            return;
        }
        link.announced = true;
        if matches!(self.phase, Phase::Connected) {
            tracing::debug!("the room knows us now; sending");
            self.start_writer();
        }
    }

    async fn on_timer(&mut self) {
        if matches!(self.phase, Phase::Connected) {
            // The only timer while connected: stop waiting for our announcement.
            if self
                .link
                .as_ref()
                .is_some_and(|l| l.announce_deadline.is_some_and(|d| d <= Instant::now()))
            {
                tracing::info!(
                    "the server did not echo our participant info within {ANNOUNCE_WAIT:?}; sending anyway"
                );
                if let Some(link) = self.link.as_mut() {
                    link.announced = true;
                }
                self.start_writer();
            }
            return;
        }
        if let Phase::Connecting {
            deadline,
            ice_retry: Some(retry),
        } = self.phase
        {
            let now = Instant::now();
            if now < deadline && now >= retry {
                // The ICE restart of a resume found no path (the network may still be
                // down, and an ICE agent stops checking a path that failed): restart
                // again, until the peer connection timeout gives up on the session.
                self.phase = Phase::Connecting {
                    deadline,
                    ice_retry: Some(now + ICE_RETRY),
                };
                if let Some(link) = self.link.as_mut() {
                    tracing::info!("the peer connection is not back yet; restarting ICE again");
                    if let Err(e) = Self::send_offer(link, true).await {
                        tracing::info!("ICE restart offer failed: {e}");
                    }
                }
                return;
            }
        }
        match std::mem::replace(&mut self.phase, Phase::Closed) {
            Phase::Connecting { .. } => {
                self.phase = Phase::Connected; // so `lost` treats it as a live link
                let tried = self.paths_tried().await;
                let why = format!(
                    "peer connection not up within {:?} (tried {})",
                    self.opts.peer_connection_timeout,
                    tried.join("; ")
                );
                tracing::info!(%why, "no network path");
                if let Some(ready) = self.ready.take() {
                    self.teardown(false).await;
                    self.shared.outbox.close(&why);
                    self.phase = Phase::Closed;
                    self.shared
                        .state
                        .send_replace(ConnectionState::Disconnected);
                    let _ = ready.send(Err(Error::NoPath {
                        after: self.opts.peer_connection_timeout,
                        tried,
                    }));
                    return;
                }
                self.lost(why, false).await;
            }
            Phase::Backoff { last_error, .. } => {
                self.attempts += 1;
                if self.attempts > self.opts.reconnect_attempts {
                    self.disconnect(DisconnectReason::ReconnectFailed(last_error))
                        .await;
                    return;
                }
                tracing::info!(attempt = self.attempts, "rejoining");
                match self.join().await {
                    Ok(()) => {}
                    Err(e) if signal::is_permanent(&e) => {
                        self.disconnect(DisconnectReason::ReconnectFailed(e.to_string()))
                            .await;
                    }
                    Err(e) => {
                        tracing::info!(attempt = self.attempts, "rejoin failed: {e}");
                        self.phase = Phase::Backoff {
                            until: Instant::now() + backoff(self.attempts),
                            last_error: e.to_string(),
                        };
                    }
                }
            }
            other => self.phase = other,
        }
    }

    /// The link is lost: tell the caller, try to resume (when `resume` and the link
    /// had been up), otherwise tear it down and schedule a rejoin.
    async fn lost(&mut self, why: String, resume: bool) {
        if matches!(self.phase, Phase::Closed | Phase::Backoff { .. }) {
            return;
        }
        if self.ready.is_some() {
            // Still in the first connect: no reconnecting, just fail.
            let ready = self.ready.take();
            self.teardown(false).await;
            self.shared.outbox.close(&why);
            self.phase = Phase::Closed;
            self.shared
                .state
                .send_replace(ConnectionState::Disconnected);
            if let Some(ready) = ready {
                let _ = ready.send(Err(Error::Signal(why)));
            }
            return;
        }
        let was_connected = matches!(self.phase, Phase::Connected);
        tracing::info!(%why, resume, "link lost");
        if !self.outage {
            self.outage = true;
            self.shared
                .state
                .send_replace(ConnectionState::Reconnecting);
            self.emit(RoomEvent::Reconnecting {
                reason: why.clone(),
            });
        }
        // What SCTP acknowledged, read now while the channel may still tell: by the time
        // a full rejoin tears the link down it is often gone (the server closed it), and
        // everything still counted in flight would then be sent twice.
        if let Some(link) = self.link.as_ref() {
            if let Ok(o) = link.reliable.outstanding_bytes().await {
                self.shared.outbox.trim(o);
            }
        }
        self.stop_writer().await;
        self.shared.set_lossy(None);
        // The server may ask for full rejoins only (`client_configuration.resume_connection`).
        let resume_allowed = self
            .link
            .as_ref()
            .is_none_or(|l| proto::resume_allowed(&l.join));
        // A resumed session still waiting for its peer connection is resumed again when
        // the server asks (livekit-server sends Leave RESUME when its side of ICE fails:
        // its second failure within a minute is what moves the session to ICE/TCP).
        if resume && resume_allowed && (was_connected || self.resuming) && self.try_resume().await {
            return;
        }
        // A full rejoin follows: whatever comes up next is not the resumed session.
        self.resuming = false;
        self.teardown(true).await;
        self.receivers
            .abort_all("the link was lost during the stream (rejoined)");
        self.phase = Phase::Backoff {
            until: Instant::now() + backoff(self.attempts),
            last_error: why,
        };
    }

    /// Resume: new WebSocket with `reconnect=1`, then an ICE restart of the publisher.
    async fn try_resume(&mut self) -> bool {
        let Some(link) = self.link.as_mut() else {
            return false;
        };
        let limit = self.opts.connect_timeout + Duration::from_secs(2);
        let reason = std::mem::replace(
            &mut self.resume_reason,
            ReconnectReason::RrSignalDisconnected,
        );
        let resp = tokio::time::timeout(limit, link.signal.resume(&self.url, reason)).await;
        let resp = match resp {
            Ok(Ok(resp)) => {
                tracing::info!(
                    last_message_seq = resp.last_message_seq,
                    reason = reason.as_str_name(),
                    "session resumed"
                );
                // The server has the session back: what livekit-signaling holds during a
                // resume (its pings among them) goes out now. Held until the peer
                // connection is up, the pings let a slow ICE restart trip the server's
                // ping timeout and end the resumed session.
                link.signal.resumed().await;
                // Closing the old WebSocket (still open when it was the peer connection
                // that failed) made its reader report "stream closed" into the same
                // event queue: that is not the new connection's end. Its other messages
                // are kept, in order.
                while let Ok(ev) = link.events.try_recv() {
                    match ev {
                        signal::Event::Close(why) => {
                            tracing::debug!(%why, "the replaced signal connection closed");
                        }
                        other => link.held_signal.push_back(other),
                    }
                }
                resp
            }
            Ok(Err(e)) => {
                tracing::info!("resume refused, rejoining: {e}");
                return false;
            }
            Err(_) => {
                tracing::info!("resume timed out, rejoining");
                return false;
            }
        };
        if !Self::follow_reconnect_directives(link, resp).await {
            return false;
        }
        // The ICE restart offer carries the tracks as they are now: any offer still due
        // is part of it, and the answer to an older one is stale.
        if let Err(e) = Self::send_offer(link, true).await {
            tracing::info!("ICE restart offer failed, rejoining: {e}");
            return false;
        }
        self.resuming = true;
        self.phase = Phase::Connecting {
            deadline: Instant::now() + self.opts.peer_connection_timeout,
            ice_retry: Some(Instant::now() + ICE_RETRY),
        };
        self.check_ready().await;
        true
    }

    /// What a `ReconnectResponse` asks of the resumed session: its ICE servers (LiveKit
    /// hands out fresh TURN credentials) are used from the ICE restart on; a change of
    /// `client_configuration.force_relay` needs peer connections built for it, so the
    /// session is rejoined instead (false). The link's join response keeps the latest
    /// of both, for a subscriber connection made later.
    async fn follow_reconnect_directives(link: &mut Link, resp: proto::ReconnectResponse) -> bool {
        let relay_before = proto::force_relay(&link.join);
        if let Some(conf) = resp.client_configuration {
            link.join.client_configuration = Some(conf);
        }
        let relay_now = proto::force_relay(&link.join);
        if relay_now != relay_before {
            tracing::info!(
                relay_only = relay_now,
                "the server changed whether to connect through a TURN relay only; rejoining with new peer connections"
            );
            return false;
        }
        if resp.ice_servers.is_empty() || resp.ice_servers == link.join.ice_servers {
            return true;
        }
        link.join.ice_servers = resp.ice_servers;
        let servers = ice_servers(&link.join);
        for t in std::iter::once(&link.publisher).chain(link.subscriber.as_ref()) {
            if let Err(e) = t.set_ice_servers(&servers).await {
                tracing::info!("new ICE servers not taken ({e}); rejoining");
                return false;
            }
        }
        tracing::debug!(
            servers = servers.len(),
            "ICE servers from the reconnect response"
        );
        true
    }

    /// What became of each kind of network path on the link's peer connections: the
    /// publisher's, then what only the subscriber tried.
    async fn paths_tried(&self) -> Vec<String> {
        let Some(link) = self.link.as_ref() else {
            return Vec::new();
        };
        let mut paths = link.publisher.path_report().await;
        if let Some(sub) = &link.subscriber {
            for p in sub.path_report().await {
                match paths.iter_mut().find(|q| q.kind == p.kind) {
                    Some(q) if p.worked && !q.worked => *q = p,
                    Some(_) => {}
                    None => paths.push(p),
                }
            }
        }
        paths.iter().map(ToString::to_string).collect()
    }

    /// Transport settings for a link with this join response.
    fn wire_config(&self, join: &JoinResponse) -> WireConfig {
        WireConfig {
            loopback: host_is_loopback(&self.url),
            send_buffer_limit: self.opts.send_buffer_limit,
            ice_servers: ice_servers(join),
            relay_only: proto::force_relay(join),
            tls_roots: self.opts.extra_root_ca_pem.clone(),
        }
    }

    async fn stop_writer(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if let Some((handle, stop)) = link.writer.take() {
            let _ = stop.send(true);
            let abort = handle.abort_handle();
            if tokio::time::timeout(Duration::from_secs(3), handle)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }

    /// Closes the link. With `requeue`, packets SCTP did not acknowledge go back to
    /// the send queue for the next link.
    async fn teardown(&mut self, requeue: bool) {
        self.stop_writer().await;
        for (_, task) in self.receivers_audio.drain() {
            task.abort();
        }
        self.unowned_audio.clear();
        for (cid, p) in self.pending_tracks.drain() {
            p.local.set_out(None);
            let _ = p.done.send(Err(Error::Closed(format!(
                "the link was lost before track {cid} was published"
            ))));
        }
        let ended: Vec<String> = self.local_tracks.keys().cloned().collect();
        for (_, local) in self.local_tracks.drain() {
            local.set_out(None);
        }
        if requeue {
            for sid in ended {
                self.emit(RoomEvent::LocalTrackUnpublished {
                    sid,
                    by_server: false,
                });
            }
        }
        let Some(link) = self.link.take() else { return };
        if requeue {
            let outstanding = link.reliable.outstanding_bytes().await.ok();
            let n = self.shared.outbox.requeue_unacked(outstanding);
            tracing::info!(
                ?outstanding,
                requeued = n,
                "unacknowledged packets requeued"
            );
        }
        let _ = tokio::time::timeout(Duration::from_secs(3), link.signal.close()).await;
        link.publisher.close().await;
        if let Some(sub) = &link.subscriber {
            sub.close().await;
        }
    }

    async fn leave(&mut self) {
        if matches!(self.phase, Phase::Closed) {
            return;
        }
        let connected = matches!(self.phase, Phase::Connected);
        if let (true, Some(link)) = (connected, self.link.as_ref()) {
            // Let queued packets reach the server before we say goodbye.
            let deadline = Instant::now() + self.opts.leave_flush_timeout;
            while Instant::now() < deadline {
                let idle = self.shared.outbox.pending_len() == 0
                    && link.reliable.outstanding_bytes().await.unwrap_or(0) == 0;
                if idle {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            #[allow(deprecated)]
            link.signal
                .send(signal_request::Message::Leave(LeaveRequest {
                    can_reconnect: false,
                    reason: proto::DisconnectReason::ClientInitiated as i32,
                    action: leave_request::Action::Disconnect as i32,
                    regions: None,
                }))
                .await;
        }
        self.close_for_good(DisconnectReason::ClientLeft).await;
    }

    async fn disconnect(&mut self, reason: DisconnectReason) {
        tracing::info!(%reason, "disconnected");
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Err(Error::Closed(reason.to_string())));
        }
        self.close_for_good(reason).await;
    }

    async fn close_for_good(&mut self, reason: DisconnectReason) {
        self.teardown(false).await;
        self.shared.outbox.close(&reason.to_string());
        self.shared.set_lossy(None);
        self.receivers.abort_all("the room connection closed");
        self.held.clear();
        self.shared.rpc.close();
        self.requests.clear();
        self.phase = Phase::Closed;
        self.shared
            .state
            .send_replace(ConnectionState::Disconnected);
        self.emit(RoomEvent::Disconnected { reason });
    }

    fn on_data(&mut self, reliable: bool, bytes: &[u8]) {
        self.on_data_now(reliable, bytes, true);
    }

    /// Handles one data packet; with `may_hold`, one that must wait for its sender to be
    /// named is held instead (see [`Engine::hold`]).
    fn on_data_now(&mut self, reliable: bool, bytes: &[u8], may_hold: bool) {
        let mut packet = match proto::decode_data_packet(bytes) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(
                    "dropping malformed data packet ({} bytes): {e}",
                    bytes.len()
                );
                return;
            }
        };
        if may_hold && self.hold(&packet, reliable, bytes) {
            return;
        }
        if reliable && packet.sequence > 0 && !packet.participant_sid.is_empty() {
            let last = self
                .recv_seq
                .entry(packet.participant_sid.clone())
                .or_insert(0);
            if packet.sequence <= *last {
                tracing::debug!(seq = packet.sequence, "dropping replayed packet");
                return;
            }
            *last = packet.sequence;
        }
        if !packet.participant_sid.is_empty()
            && self
                .shared
                .roster()
                .assistant
                .as_ref()
                .is_some_and(|a| a.sid == packet.participant_sid)
        {
            // The assistant knows us (it found us to send this, say an RPC call that
            // waits for our ack): nothing it gets from us now arrives from no one.
            self.announced();
        }
        let Some(value) = packet.value.take() else {
            return;
        };
        match value {
            data_packet::Value::User(u) => {
                let msg = proto::data_message(&packet, u, reliable);
                self.emit(RoomEvent::Data(msg));
            }
            data_packet::Value::StreamHeader(h) => {
                let Some((sender, on_behalf_of)) =
                    self.stream_sender(&packet.participant_identity, &packet.participant_sid)
                else {
                    tracing::debug!(stream = %h.stream_id, sid = %packet.participant_sid, "ignoring a data stream on our behalf from a participant we do not know");
                    return;
                };
                let sender = sender.as_str();
                let assistant = self
                    .shared
                    .roster()
                    .assistant
                    .as_ref()
                    .is_some_and(|a| a.identity == sender);
                if h.topic == crate::rpc::REQUEST_TOPIC || h.topic == crate::rpc::RESPONSE_TOPIC {
                    // RPC version 2: the RPC layer decides at the header who may call and
                    // how much it reads, before the stream takes a slot or a byte.
                    let refused = crate::rpc::on_stream_header(
                        &self.shared,
                        &mut self.receivers,
                        sender,
                        assistant,
                        h,
                        Instant::now(),
                    );
                    self.refused(refused);
                    return;
                }
                if !assistant && self.opts.stream_senders == StreamSenders::Assistant {
                    // Dropped at the header: no slot, no event; its chunks and trailer
                    // find no stream and are ignored. (A stream the assistant sends on
                    // our behalf, a transcript of our speech, is the assistant's.)
                    tracing::debug!(stream = %h.stream_id, from = %sender, "ignoring a data stream from a participant other than the assistant");
                    return;
                }
                let mut reader = self
                    .receivers
                    .on_header(sender, assistant, h, Instant::now());
                reader.info.on_behalf_of = on_behalf_of;
                self.emit(RoomEvent::StreamOpened(reader));
            }
            data_packet::Value::StreamChunk(c) => {
                self.receivers
                    .on_chunk(&packet.participant_identity, c, Instant::now());
            }
            data_packet::Value::StreamTrailer(t) => {
                self.receivers.on_trailer(&packet.participant_identity, t);
            }
            data_packet::Value::RpcRequest(r) => {
                let refused = crate::rpc::on_request(&self.shared, &packet.participant_identity, r);
                self.refused(refused);
            }
            data_packet::Value::RpcAck(a) => {
                self.shared.rpc.on_ack(&packet.participant_identity, a)
            }
            data_packet::Value::RpcResponse(r) => {
                self.shared.rpc.on_response(&packet.participant_identity, r);
            }
            _ => tracing::debug!("ignoring a data packet kind this client does not handle"),
        }
    }

    /// Holds `packet` when whether its sender is the assistant matters and cannot be told
    /// yet: a stream or an RPC request from a session no participant update has named.
    /// livekit-server announces a newcomer in a batched update that can come a second or
    /// more after its first data (seen against v1.13.5: 1.4 s), so an agent that calls or
    /// speaks at once would be taken for a stranger. Held packets are handled in order once
    /// an update names their session, or as they are when [`HOLD_FOR`] passes (a hidden
    /// participant is never named). Bounded: [`MAX_HELD_SESSIONS`] sessions,
    /// [`MAX_HELD_BYTES`] each; beyond that packets are handled at once. True when held.
    fn hold(&mut self, packet: &proto::DataPacket, reliable: bool, bytes: &[u8]) -> bool {
        let strict = self.opts.stream_senders == StreamSenders::Assistant
            || self.opts.rpc_callers == crate::types::RpcCallers::Assistant;
        let sid = packet.participant_sid.as_str();
        let kind = matches!(
            packet.value,
            Some(
                data_packet::Value::StreamHeader(_)
                    | data_packet::Value::StreamChunk(_)
                    | data_packet::Value::StreamTrailer(_)
                    | data_packet::Value::RpcRequest(_)
            )
        );
        if !strict || !kind || sid.is_empty() {
            return false;
        }
        {
            let roster = self.shared.roster();
            let known = roster.remote.iter().any(|p| p.sid == sid)
                || roster.local.as_ref().is_some_and(|l| l.sid == sid);
            if known {
                return false;
            }
        }
        let at = match self.held.iter().position(|h| h.sid == sid) {
            Some(i) => i,
            None if self.held.len() < MAX_HELD_SESSIONS => {
                tracing::debug!(%sid, "data from a session not announced yet; held");
                self.held.push(Held {
                    sid: sid.to_owned(),
                    since: Instant::now(),
                    packets: Vec::new(),
                    bytes: 0,
                });
                self.held.len() - 1
            }
            None => return false,
        };
        let h = &mut self.held[at];
        if h.bytes + bytes.len() > MAX_HELD_BYTES {
            tracing::debug!(%sid, "too much data from a session not announced yet; dropped");
            return true;
        }
        h.bytes += bytes.len();
        h.packets.push((reliable, bytes.to_vec()));
        true
    }

    /// Handles the held packets of sessions the roster now names, and those held for
    /// [`HOLD_FOR`] by `now`.
    fn release_held(&mut self, now: Instant) {
        let ready: Vec<Held> = {
            let roster = self.shared.roster();
            let (ready, wait) = std::mem::take(&mut self.held).into_iter().partition(|h| {
                now.saturating_duration_since(h.since) >= HOLD_FOR
                    || roster.remote.iter().any(|p| p.sid == h.sid)
            });
            self.held = wait;
            ready
        };
        for h in ready {
            for (reliable, bytes) in h.packets {
                self.on_data_now(reliable, &bytes, false);
            }
        }
    }

    /// Who really sent a stream header that names `claimed` and came from session `sid`.
    /// Every server stamps the sender's session id on each packet, but livekit-server
    /// leaves the identity an agent puts on a text stream it sends on someone else's
    /// behalf (LiveKit Agents' transcript of the user's speech), while its chunks and
    /// trailer carry the agent's own identity. So the session id decides: the sender is
    /// the participant with that sid, and `claimed` is whom it speaks for when it differs.
    /// `None` for a stream on our behalf from a session we do not know (it cannot be
    /// told apart from anyone's).
    fn stream_sender(&self, claimed: &str, sid: &str) -> Option<(String, Option<String>)> {
        let roster = self.shared.roster();
        match roster
            .remote
            .iter()
            .find(|p| !sid.is_empty() && p.sid == sid)
        {
            Some(p) if p.identity == claimed => Some((claimed.to_owned(), None)),
            Some(p) => Some((p.identity.clone(), Some(claimed.to_owned()))),
            None if roster.local.as_ref().is_some_and(|l| l.identity == claimed) => None,
            None => Some((claimed.to_owned(), None)),
        }
    }

    fn refused(&self, refused: Option<crate::rpc::Refused>) {
        if let Some(crate::rpc::Refused { caller, method }) = refused {
            self.emit(RoomEvent::RpcRefused { caller, method });
        }
    }

    fn is_local(&self, info: &ParticipantInfo) -> bool {
        let roster = self.shared.roster();
        roster
            .local
            .as_ref()
            .is_some_and(|l| l.sid == info.sid || l.identity == info.identity)
    }

    /// Applies a participant update.
    fn update_roster(&mut self, infos: &[ParticipantInfo]) {
        let mut events = Vec::new();
        let mut track_updates = Vec::new();
        for info in infos {
            if !self.is_local(info) {
                let tracks = if proto::is_disconnected(info) {
                    Vec::new()
                } else {
                    proto::tracks(info)
                };
                track_updates.push((proto::participant(info), tracks));
            }
            if self.is_local(info) {
                // Our own name, metadata and attributes as the server now has them.
                if !proto::is_disconnected(info) {
                    self.announced();
                    let permission = proto::permission(info);
                    if permission != self.permission {
                        if let Some((can_publish, can_publish_data, can_subscribe)) = permission {
                            tracing::info!(
                                can_publish,
                                can_publish_data,
                                can_subscribe,
                                "the server changed our permissions"
                            );
                            if self.permission.is_some() {
                                events.push(RoomEvent::LocalPermissionsChanged {
                                    can_publish,
                                    can_publish_data,
                                    can_subscribe,
                                });
                            }
                        }
                        self.permission = permission;
                    }
                    let mut roster = self.shared.roster();
                    if let Some(local) = roster.local.as_mut() {
                        let new = proto::participant(info);
                        events.extend(profile_events(local, &new));
                        *local = new;
                    }
                }
                continue;
            }
            let p = proto::participant(info);
            let mut roster = self.shared.roster();
            let pos = roster.remote.iter().position(|r| r.identity == p.identity);
            if proto::is_disconnected(info) {
                if let Some(i) = pos {
                    if roster.remote[i].sid == p.sid || p.sid.is_empty() {
                        let gone = roster.remote.remove(i);
                        drop(roster);
                        self.receivers
                            .abort_from_participant(&gone, "the sender left mid-stream");
                        self.shared.rpc.participant_left(&gone.identity);
                        events.push(RoomEvent::ParticipantLeft(gone));
                    }
                }
            } else if let Some(i) =
                pos.filter(|&i| !p.sid.is_empty() && roster.remote[i].sid != p.sid)
            {
                // The same identity with a new session: livekit-server tells clients of
                // protocol 12 and up only of the new one (identity-based reconnection),
                // so the old session's leave is ours to conclude.
                let gone = std::mem::replace(&mut roster.remote[i], p.clone());
                drop(roster);
                self.receivers
                    .abort_from_participant(&gone, "the sender left mid-stream");
                self.shared.rpc.participant_left(&gone.identity);
                events.push(RoomEvent::ParticipantLeft(gone));
                events.push(RoomEvent::ParticipantJoined(p));
            } else if let Some(i) = pos {
                events.extend(profile_events(&roster.remote[i], &p));
                // Keep the assistant's copy current before anyone hears of the change.
                if roster
                    .assistant
                    .as_ref()
                    .is_some_and(|a| a.identity == p.identity)
                {
                    roster.assistant = Some(p.clone());
                }
                roster.remote[i] = p;
            } else {
                roster.remote.push(p.clone());
                events.push(RoomEvent::ParticipantJoined(p));
            }
        }
        for (p, tracks) in track_updates {
            self.diff_tracks(p, tracks, &mut events);
        }
        for ev in events {
            self.emit(ev);
        }
        self.update_assistant();
        self.adopt_audio();
        self.want_assistant_audio();
        self.release_held(Instant::now());
    }

    /// After a (re)join: the join response's list is the truth.
    fn replace_roster(&mut self, infos: &[ParticipantInfo]) {
        let fresh: Vec<Participant> = infos
            .iter()
            .filter(|i| !proto::is_disconnected(i))
            .map(proto::participant)
            .collect();
        let mut events = Vec::new();
        {
            let mut roster = self.shared.roster();
            let local_identity = roster.local.as_ref().map(|l| l.identity.clone());
            let fresh: Vec<Participant> = fresh
                .into_iter()
                .filter(|p| Some(&p.identity) != local_identity.as_ref())
                .collect();
            for old in &roster.remote {
                if !fresh.iter().any(|p| p.identity == old.identity) {
                    events.push(RoomEvent::ParticipantLeft(old.clone()));
                }
            }
            for p in &fresh {
                match roster.remote.iter().find(|o| o.identity == p.identity) {
                    Some(old) => events.extend(profile_events(old, p)),
                    None => events.push(RoomEvent::ParticipantJoined(p.clone())),
                }
            }
            if let Some(a) = roster.assistant.as_mut() {
                if let Some(p) = fresh.iter().find(|p| p.identity == a.identity) {
                    *a = p.clone();
                }
            }
            roster.remote = fresh;
        }
        let mut track_updates: Vec<(Participant, Vec<TrackInfo>)> = events
            .iter()
            .filter_map(|ev| match ev {
                RoomEvent::ParticipantLeft(p) => Some((p.clone(), Vec::new())),
                _ => None,
            })
            .collect();
        for info in infos {
            if !proto::is_disconnected(info) && !self.is_local(info) {
                track_updates.push((proto::participant(info), proto::tracks(info)));
            }
        }
        for (p, tracks) in track_updates {
            self.diff_tracks(p, tracks, &mut events);
        }
        for ev in events {
            if let RoomEvent::ParticipantLeft(p) = &ev {
                self.receivers
                    .abort_from_participant(p, "the sender left mid-stream");
                self.shared.rpc.participant_left(&p.identity);
            }
            self.emit(ev);
        }
        self.update_assistant();
        self.adopt_audio();
        self.want_assistant_audio();
        self.release_held(Instant::now());
    }

    /// Track events for a participant whose tracks are now `tracks`.
    fn diff_tracks(&mut self, p: Participant, tracks: Vec<TrackInfo>, events: &mut Vec<RoomEvent>) {
        let old = self.published.remove(&p.identity).unwrap_or_default();
        for t in &old {
            if !tracks.iter().any(|n| n.sid == t.sid) {
                if let Some(task) = self.receivers_audio.remove(&t.sid) {
                    task.abort();
                }
                self.unowned_audio.retain(|u| u.sid != t.sid);
                events.push(RoomEvent::TrackUnpublished {
                    participant: p.clone(),
                    track: t.clone(),
                });
            }
        }
        for t in &tracks {
            match old.iter().find(|o| o.sid == t.sid) {
                None => events.push(RoomEvent::TrackPublished {
                    participant: p.clone(),
                    track: t.clone(),
                }),
                Some(o) if o.muted != t.muted => events.push(RoomEvent::TrackMuted {
                    participant: p.clone(),
                    track: t.clone(),
                }),
                Some(_) => {}
            }
        }
        if !tracks.is_empty() {
            self.published.insert(p.identity.clone(), tracks);
        }
    }

    /// A remote track arrived on the subscriber connection: decode it (audio only).
    fn on_remote_track(&mut self, track: outpost_webrtc::RemoteTrack) {
        if track.kind() != outpost_webrtc::MediaKind::Audio {
            tracing::debug!(track = %track.track_id(), "ignoring a video track");
            return;
        }
        let sid = track.track_id().to_owned();
        let stream_sid = track.stream_id().split('|').next().unwrap_or("").to_owned();
        let (stream, task) = crate::audio::spawn_receiver(track);
        if let Some(old) = self.receivers_audio.insert(sid.clone(), task) {
            old.abort();
        }
        self.unowned_audio.retain(|u| u.sid != sid);
        self.unowned_audio.push(UnownedAudio {
            sid,
            stream_sid,
            stream,
        });
        self.adopt_audio();
        if self.unowned_audio.len() > MAX_UNOWNED_AUDIO {
            let old = self.unowned_audio.remove(0);
            tracing::info!(track = %old.sid, "dropping audio whose publisher was never named");
            if let Some(task) = self.receivers_audio.remove(&old.sid) {
                task.abort();
            }
        }
    }

    /// The publisher of `sid` (whose stream names `stream_sid`), when the room knows it:
    /// from the participant updates' track lists, else by session id.
    fn audio_owner(&self, sid: &str, stream_sid: &str) -> Option<Participant> {
        let owner = self
            .published
            .iter()
            .find(|(_, ts)| ts.iter().any(|t| t.sid == sid))
            .map(|(identity, _)| identity.clone());
        let roster = self.shared.roster();
        roster
            .remote
            .iter()
            .find(|p| {
                Some(&p.identity) == owner.as_ref()
                    || (!stream_sid.is_empty() && p.sid == stream_sid)
            })
            .cloned()
    }

    /// Tells the application about the held audio tracks whose publisher is now known.
    /// One that stays unknown (a hidden participant's, or media that came before the
    /// participant update) is never reported as anyone's.
    fn adopt_audio(&mut self) {
        let mut i = 0;
        while i < self.unowned_audio.len() {
            let u = &self.unowned_audio[i];
            let Some(participant) = self.audio_owner(&u.sid, &u.stream_sid) else {
                tracing::debug!(track = %u.sid, "audio of a publisher not named yet; held");
                i += 1;
                continue;
            };
            let u = self.unowned_audio.remove(i);
            tracing::info!(track = %u.sid, from = %participant.identity, "audio track subscribed");
            self.emit(RoomEvent::AudioTrackSubscribed {
                participant,
                track_sid: u.sid,
                stream: u.stream,
            });
        }
    }

    /// Adds our audio track to the publisher connection and asks the server to
    /// publish it; `done` is answered when the server confirms it.
    async fn publish_audio(
        &mut self,
        name: String,
        local: Arc<LocalShared>,
        done: oneshot::Sender<Result<String>>,
    ) {
        self.pending_tracks.retain(|_, p| !p.done.is_closed());
        let Some(link) = self.link.as_ref() else {
            let _ = done.send(Err(Error::Closed("not connected to the room".into())));
            return;
        };
        let cid = format!("TR_{}", nanoid::nanoid!(12));
        let stream_id = self
            .shared
            .roster()
            .local
            .as_ref()
            .map(|l| format!("{}|{cid}", l.sid))
            .unwrap_or_else(|| cid.clone());
        let out = match link.publisher.add_audio_track(&stream_id, &cid).await {
            Ok(o) => o,
            Err(e) => {
                let _ = done.send(Err(e));
                return;
            }
        };
        let stereo = local.channels() == 2;
        link.signal
            .send(signal_request::Message::AddTrack(proto::add_audio_track(
                &cid, &name, stereo,
            )))
            .await;
        self.pending_tracks
            .insert(cid, PendingTrack { local, out, done });
    }

    /// The server unpublished our track `sid` (our permission to publish was revoked, or
    /// the operator removed it): it stops being sent and leaves the publisher.
    async fn on_server_unpublished(&mut self, sid: &str) {
        let Some(local) = self.local_tracks.remove(sid) else {
            return;
        };
        tracing::info!(track = %sid, "the server unpublished our track");
        let out = local.out();
        local.set_out(None);
        if let (Some(link), Some(out)) = (self.link.as_ref(), out) {
            if let Err(e) = link.publisher.remove_track(&out).await {
                tracing::debug!("removing the unpublished track: {e}");
            }
        }
        if let Err(e) = self.renegotiate().await {
            tracing::debug!("renegotiating after the server's unpublish: {e}");
        }
        self.emit(RoomEvent::LocalTrackUnpublished {
            sid: sid.to_owned(),
            by_server: true,
        });
    }

    /// The server refused our track `cid`: it leaves the publisher and its caller hears why.
    async fn refuse_track(&mut self, cid: &str, why: Error) {
        let Some(pending) = self.pending_tracks.remove(cid) else {
            tracing::debug!(%cid, "a refusal for a track we are not waiting for: {why}");
            return;
        };
        tracing::info!(%cid, "the server refused our track: {why}");
        if let Some(link) = self.link.as_ref() {
            if let Err(e) = link.publisher.remove_track(&pending.out).await {
                tracing::debug!("removing the refused track: {e}");
            }
        }
        let _ = pending.done.send(Err(why));
    }

    /// The server published our track `cid` as `sid`: renegotiate so it is sent.
    async fn on_track_published(&mut self, cid: String, sid: Option<String>) {
        let Some(pending) = self.pending_tracks.remove(&cid) else {
            tracing::debug!(%cid, "TrackPublished for a track we did not ask for");
            return;
        };
        let Some(sid) = sid.filter(|s| !s.is_empty()) else {
            let _ = pending.done.send(Err(Error::Signal(format!(
                "the server confirmed track {cid} without a sid"
            ))));
            return;
        };
        pending.local.set_out(Some(pending.out));
        self.local_tracks.insert(sid.clone(), pending.local);
        let verdict = self.renegotiate().await.map(|()| sid);
        let _ = pending.done.send(verdict);
    }

    /// Stops sending our track `sid` and renegotiates.
    async fn unpublish(&mut self, sid: &str) -> Result<()> {
        let Some(local) = self.local_tracks.remove(sid) else {
            return Err(Error::Closed(format!("track {sid} is not published")));
        };
        let out = local.out();
        local.set_out(None);
        let Some(link) = self.link.as_ref() else {
            return Ok(());
        };
        if let Some(out) = out {
            link.publisher.remove_track(&out).await?;
        }
        self.renegotiate().await
    }

    /// Sends a new publisher offer (tracks added or removed), or, while the last one is
    /// unanswered, notes that one is due: offers go out one at a time, as the official
    /// SDKs send them, since an answer to an older offer cannot be applied to a newer one.
    async fn renegotiate(&mut self) -> Result<()> {
        let Some(link) = self.link.as_mut() else {
            return Err(Error::Closed("not connected to the room".into()));
        };
        if link.awaiting_answer.is_some() {
            link.offer_again = true;
            return Ok(());
        }
        Self::send_offer(link, false).await
    }

    async fn send_offer(link: &mut Link, ice_restart: bool) -> Result<()> {
        let sdp = link.publisher.offer(ice_restart).await?;
        link.offer_id += 1;
        link.awaiting_answer = Some(link.offer_id);
        link.offer_again = false;
        link.signal
            .send(signal_request::Message::Offer(SessionDescription {
                r#type: "offer".into(),
                sdp,
                id: link.offer_id,
                ..Default::default()
            }))
            .await;
        Ok(())
    }

    /// The server's answer to our publisher offer. One that names an older offer than the
    /// last we sent is stale and ignored (livekit-server answers every offer, in order).
    async fn on_publisher_answer(&mut self, sd: SessionDescription) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        match link.awaiting_answer {
            Some(id) if sd.id != 0 && sd.id != id => {
                tracing::debug!(
                    answer = sd.id,
                    awaiting = id,
                    "ignoring the answer to an older offer"
                );
                return;
            }
            None if link.answered => {
                tracing::debug!(answer = sd.id, "ignoring an answer to no offer of ours");
                return;
            }
            _ => {}
        }
        if let Err(e) = link.publisher.apply_answer(sd.sdp).await {
            tracing::warn!("publisher answer: {e}");
            self.lost(format!("bad publisher answer: {e}"), false).await;
            return;
        }
        link.answered = true;
        link.awaiting_answer = None;
        for c in std::mem::take(&mut link.pub_candidates) {
            if let Err(e) = link.publisher.add_candidate(&c).await {
                tracing::debug!("early publisher candidate: {e}");
            }
        }
        if link.offer_again {
            if let Err(e) = Self::send_offer(link, false).await {
                tracing::warn!("publisher offer: {e}");
                self.lost(format!("publisher offer failed: {e}"), false)
                    .await;
            }
        }
    }

    /// Notes the assistant's audio tracks we have not asked the server for yet (with
    /// `auto_subscribe` off and `subscribe_to_assistant` on); the event loop sends the
    /// request ([`Engine::send_subscriptions`]).
    fn want_assistant_audio(&mut self) {
        if self.opts.auto_subscribe || !self.opts.subscribe_to_assistant {
            return;
        }
        let Some(assistant) = self.shared.roster().assistant.clone() else {
            return;
        };
        let Some(link) = self.link.as_mut() else {
            return;
        };
        for t in self
            .published
            .get(&assistant.identity)
            .into_iter()
            .flatten()
        {
            if t.audio && link.subscribed.insert(t.sid.clone()) {
                link.to_subscribe.push(t.sid.clone());
            }
        }
    }

    /// Sends the subscriptions [`Engine::want_assistant_audio`] noted.
    async fn send_subscriptions(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if link.to_subscribe.is_empty() {
            return;
        }
        let tracks = std::mem::take(&mut link.to_subscribe);
        tracing::debug!(?tracks, "subscribing to the assistant's audio");
        link.signal
            .send(signal_request::Message::Subscription(proto::subscription(
                tracks, true,
            )))
            .await;
    }

    /// Tells the server who may subscribe to our tracks, when it changed (with
    /// [`TrackSubscribers::Assistant`]: the assistant only, by identity).
    async fn sync_subscription_permission(&mut self) {
        if self.opts.track_subscribers != TrackSubscribers::Assistant {
            return;
        }
        let assistant = self
            .shared
            .roster()
            .assistant
            .as_ref()
            .map(|a| a.identity.clone());
        if self.permitted.as_ref() == Some(&assistant) {
            return;
        }
        let Some(link) = self.link.as_ref() else {
            return;
        };
        tracing::info!(subscriber = ?assistant, "only the assistant may subscribe to our tracks");
        link.signal
            .send(signal_request::Message::SubscriptionPermission(
                proto::subscription_permission(Some(assistant.as_deref())),
            ))
            .await;
        self.permitted = Some(assistant);
    }

    fn update_assistant(&mut self) {
        let (old, new) = {
            let mut roster = self.shared.roster();
            let new = match &self.opts.assistant_identity {
                Some(id) => roster.remote.iter().find(|p| &p.identity == id).cloned(),
                None => {
                    let current = roster.assistant.as_ref().and_then(|a| {
                        roster
                            .remote
                            .iter()
                            .find(|p| p.identity == a.identity)
                            .cloned()
                    });
                    current.or_else(|| {
                        roster
                            .remote
                            .iter()
                            .find(|p| p.kind == ParticipantKind::Agent)
                            .cloned()
                    })
                }
            };
            let old = std::mem::replace(&mut roster.assistant, new.clone());
            (old, new)
        };
        let same = match (&old, &new) {
            // A new session of the same identity is a new assistant: its hello, grants
            // and tool calls start over.
            (Some(a), Some(b)) => a.identity == b.identity && a.sid == b.sid,
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        if let Some(old) = old {
            self.emit(RoomEvent::AssistantLeft(old));
        }
        if let Some(new) = new {
            self.emit(RoomEvent::AssistantJoined(new));
        }
    }
}

async fn next_signal(link: &mut Option<Link>) -> Option<signal::Event> {
    match link {
        Some(l) => match l.held_signal.pop_front() {
            Some(ev) => Some(ev),
            None => l.events.recv().await,
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Whether the server URL's host is a loopback address (then loopback ICE
/// candidates are needed).
/// The join response's ICE servers as the wire takes them: (urls, username, credential).
fn ice_servers(join: &JoinResponse) -> Vec<(Vec<String>, String, String)> {
    join.ice_servers
        .iter()
        .map(|s| (s.urls.clone(), s.username.clone(), s.credential.clone()))
        .collect()
}

fn host_is_loopback(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(authority)
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn backoff_grows_to_seven_seconds() {
        assert_eq!(backoff(0), Duration::from_millis(300));
        assert_eq!(backoff(1), Duration::from_millis(600));
        assert_eq!(backoff(5), Duration::from_millis(7000));
        assert_eq!(backoff(40), Duration::from_millis(7000));
    }

    fn engine(opts: RoomOptions) -> (Engine, mpsc::UnboundedReceiver<RoomEvent>) {
        let (events, rx) = mpsc::unbounded_channel();
        let (_cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let shared = Shared::for_tests_with(crate::rpc::Rpc::from_options(&opts));
        let e = Engine::new("ws://x".into(), "t".into(), opts, shared, events, cmd_rx);
        (e, rx)
    }

    fn info(identity: &str, sid: &str, agent: bool, gone: bool) -> ParticipantInfo {
        use crate::proto::participant_info::{Kind, State};
        ParticipantInfo {
            identity: identity.into(),
            sid: sid.into(),
            kind: if agent {
                Kind::Agent as i32
            } else {
                Kind::Standard as i32
            },
            state: if gone {
                State::Disconnected as i32
            } else {
                State::Active as i32
            },
            ..Default::default()
        }
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<RoomEvent>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(ev) = rx.try_recv() {
            out.push(match ev {
                RoomEvent::ParticipantJoined(p) => format!("joined {}", p.identity),
                RoomEvent::ParticipantLeft(p) => format!("left {}", p.identity),
                RoomEvent::AssistantJoined(p) => format!("assistant {}", p.identity),
                RoomEvent::AssistantLeft(p) => format!("assistant gone {}", p.identity),
                other => format!("{other:?}"),
            });
        }
        out
    }

    #[test]
    fn first_agent_is_the_assistant_until_it_leaves() {
        let (mut e, mut rx) = engine(RoomOptions::default());
        e.update_roster(&[
            info("me", "PA_me", false, false),
            info("user", "PA_u", false, false),
        ]);
        assert_eq!(drain(&mut rx), vec!["joined user"]);
        e.update_roster(&[
            info("bot1", "PA_1", true, false),
            info("bot2", "PA_2", true, false),
        ]);
        assert_eq!(
            drain(&mut rx),
            vec!["joined bot1", "joined bot2", "assistant bot1"]
        );
        // A stale disconnect for an older sid of bot1 changes nothing.
        e.update_roster(&[info("bot1", "PA_old", true, true)]);
        assert!(drain(&mut rx).is_empty());
        e.update_roster(&[info("bot1", "PA_1", true, true)]);
        assert_eq!(
            drain(&mut rx),
            vec!["left bot1", "assistant gone bot1", "assistant bot2"]
        );
        // A rejoin's participant list: bot2 stays (no events), user is gone.
        e.replace_roster(&[info("bot2", "PA_2b", true, false)]);
        assert_eq!(drain(&mut rx), vec!["left user"]);
    }

    #[test]
    fn configured_identity_wins_over_kind() {
        let (mut e, mut rx) = engine(RoomOptions::default().assistant("helper"));
        e.update_roster(&[info("bot", "PA_b", true, false)]);
        assert_eq!(drain(&mut rx), vec!["joined bot"]);
        e.update_roster(&[info("helper", "PA_h", false, false)]);
        assert_eq!(drain(&mut rx), vec!["joined helper", "assistant helper"]);
    }

    #[test]
    fn malformed_and_replayed_packets_are_dropped() {
        let (mut e, mut rx) = engine(RoomOptions::default());
        e.on_data(true, &[0xff, 0xff, 0xff]);
        let mut p = proto::user_packet(b"x".to_vec(), None, Vec::new(), true);
        p.sequence = 5;
        p.participant_sid = "PA_b".into();
        p.participant_identity = "bob".into();
        let bytes = proto::encode_data_packet(&p);
        e.on_data(true, &bytes);
        e.on_data(true, &bytes);
        let events = drain(&mut rx);
        assert_eq!(events.len(), 1, "{events:?}");
    }

    /// A stream packet from `from` as the server relays it.
    fn stream_bytes(from: &str, value: data_packet::Value) -> Vec<u8> {
        let mut p = proto::stream_packet(value, Vec::new());
        p.participant_identity = from.into();
        proto::encode_data_packet(&p)
    }

    fn header_from(from: &str, id: &str) -> Vec<u8> {
        let h = proto::stream_header(
            proto::HeaderFields {
                stream_id: id.into(),
                topic: "t".into(),
                mime_type: "application/octet-stream".into(),
                total_length: None,
                attributes: HashMap::new(),
                byte_name: Some("f".into()),
            },
            0,
        );
        stream_bytes(from, h)
    }

    fn opened(rx: &mut mpsc::UnboundedReceiver<RoomEvent>) -> Vec<crate::StreamReader> {
        let mut out = Vec::new();
        while let Ok(ev) = rx.try_recv() {
            if let RoomEvent::StreamOpened(r) = ev {
                out.push(r);
            }
        }
        out
    }

    #[tokio::test]
    async fn streams_are_tied_to_their_sender_and_filtered_to_the_assistant() {
        // Default: everyone's streams, but a chunk or trailer with the id of another
        // sender's stream does not touch it.
        let (mut e, mut rx) = engine(RoomOptions::default());
        e.update_roster(&[info("bot", "PA_b", true, false)]);
        e.on_data(true, &header_from("bot", "s"));
        e.on_data(
            true,
            &stream_bytes(
                "mallory",
                proto::stream_chunk("s".into(), 0, b"evil".to_vec()),
            ),
        );
        e.on_data(
            true,
            &stream_bytes("mallory", proto::stream_trailer("s".into(), String::new())),
        );
        e.on_data(
            true,
            &stream_bytes("bot", proto::stream_chunk("s".into(), 0, b"good".to_vec())),
        );
        e.on_data(
            true,
            &stream_bytes("bot", proto::stream_trailer("s".into(), String::new())),
        );
        let mut readers = opened(&mut rx);
        assert_eq!(readers.len(), 1);
        assert_eq!(readers.remove(0).read_all().await.unwrap(), b"good");

        // Assistant only: another participant's stream is dropped at its header.
        let (mut e, mut rx) = engine(RoomOptions::default().streams_from_assistant_only());
        e.update_roster(&[
            info("bot", "PA_b", true, false),
            info("carol", "PA_c", false, false),
        ]);
        for i in 0..100 {
            e.on_data(true, &header_from("carol", &format!("c{i}")));
            e.on_data(
                true,
                &stream_bytes(
                    "carol",
                    proto::stream_chunk(format!("c{i}"), 0, vec![0; 1000]),
                ),
            );
        }
        assert!(opened(&mut rx).is_empty());
        assert_eq!(e.receivers.open_count(), 0, "no slot, no buffering");
        e.on_data(true, &header_from("bot", "b"));
        e.on_data(
            true,
            &stream_bytes("bot", proto::stream_trailer("b".into(), String::new())),
        );
        let readers = opened(&mut rx);
        assert_eq!(readers.len(), 1);
        assert_eq!(readers[0].info.sender_identity, "bot");
    }

    /// The callers of the refused RPC calls reported so far.
    fn refused_callers(rx: &mut mpsc::UnboundedReceiver<RoomEvent>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .filter_map(|ev| match ev {
                RoomEvent::RpcRefused { caller, .. } => Some(caller),
                _ => None,
            })
            .collect()
    }

    /// A text stream header as livekit-server relays one an agent sent in `claimed`'s name:
    /// the identity it put there, the session id of whoever really sent it.
    fn header_in_name(claimed: &str, sid: &str, id: &str, topic: &str) -> Vec<u8> {
        let h = proto::stream_header(
            proto::HeaderFields {
                stream_id: id.into(),
                topic: topic.into(),
                mime_type: "text/plain".into(),
                total_length: None,
                attributes: HashMap::from([
                    ("lk.rpc_request_id".to_owned(), format!("R{id}")),
                    (
                        "lk.rpc_request_method".to_owned(),
                        "outpost.list_tools".to_owned(),
                    ),
                    ("lk.rpc_request_version".to_owned(), "2".to_owned()),
                ]),
                byte_name: None,
            },
            0,
        );
        let mut p = proto::stream_packet(h, Vec::new());
        p.participant_identity = claimed.into();
        p.participant_sid = sid.into();
        proto::encode_data_packet(&p)
    }

    /// Issue 30 ("also to check"): on livekit-server any agent may send a text stream
    /// header in another participant's name; only the session id tells who sent it. A
    /// transcript in our name counts as the assistant's only when the assistant sent it,
    /// and nobody passes for the assistant by naming it.
    #[test]
    fn a_stream_in_someone_elses_name_is_its_real_senders() {
        let (mut e, mut rx) = engine(
            RoomOptions::default()
                .streams_from_assistant_only()
                .rpc_from_assistant_only(),
        );
        e.update_roster(&[
            info("bot", "PA_b", true, false),
            info("eve", "PA_e", true, false),
        ]);
        drain(&mut rx);
        // The assistant's transcript of our speech: the assistant's, in our name; its
        // chunks carry the assistant's identity.
        e.on_data(
            true,
            &header_in_name("me", "PA_b", "t1", "lk.transcription"),
        );
        e.on_data(
            true,
            &stream_bytes(
                "bot",
                proto::stream_chunk("t1".into(), 0, b"hello".to_vec()),
            ),
        );
        let readers = opened(&mut rx);
        assert_eq!(readers.len(), 1);
        assert_eq!(readers[0].info.sender_identity, "bot");
        assert_eq!(readers[0].info.on_behalf_of.as_deref(), Some("me"));
        // Another agent in our name, or in the assistant's; a session we do not know.
        e.on_data(
            true,
            &header_in_name("me", "PA_e", "t2", "lk.transcription"),
        );
        e.on_data(
            true,
            &header_in_name("bot", "PA_e", "t3", "lk.transcription"),
        );
        e.on_data(
            true,
            &header_in_name("me", "PA_x", "t4", "lk.transcription"),
        );
        assert!(opened(&mut rx).is_empty());
        assert_eq!(
            e.receivers.open_count(),
            1,
            "only the assistant's took a slot"
        );
        // An RPC request stream in the assistant's name is eve's, and refused.
        e.on_data(
            true,
            &header_in_name("bot", "PA_e", "r1", crate::rpc::REQUEST_TOPIC),
        );
        assert_eq!(refused_callers(&mut rx), ["eve"]);
    }

    /// A packet as the server relays it from session `sid` of `identity`.
    fn from_session(identity: &str, sid: &str, value: data_packet::Value) -> Vec<u8> {
        let mut p = proto::stream_packet(value, Vec::new());
        p.participant_identity = identity.into();
        p.participant_sid = sid.into();
        proto::encode_data_packet(&p)
    }

    /// livekit-server announced a newcomer 1.4 s after its first data (seen against
    /// v1.13.5): an agent that speaks or calls at once is not taken for a stranger. Its
    /// packets wait until the update names it; a session never named is handled as it is
    /// once the wait is over.
    #[tokio::test]
    async fn packets_of_a_session_not_announced_yet_wait_for_the_update() {
        let (mut e, mut rx) = engine(
            RoomOptions::default()
                .streams_from_assistant_only()
                .rpc_from_assistant_only(),
        );
        e.shared.rpc.register(
            "outpost.list_tools".into(),
            crate::rpc::handler(|_inv: crate::RpcInvocation| async move { Ok("{}".into()) }),
        );
        e.on_data(
            true,
            &header_in_name("bot", "PA_b", "t1", "lk.transcription"),
        );
        e.on_data(
            true,
            &from_session(
                "bot",
                "PA_b",
                proto::stream_chunk("t1".into(), 0, b"hi".to_vec()),
            ),
        );
        let call = proto::RpcRequest {
            id: "r1".into(),
            method: "outpost.list_tools".into(),
            payload: "{}".into(),
            version: 1,
            ..Default::default()
        };
        e.on_data(
            true,
            &from_session("bot", "PA_b", data_packet::Value::RpcRequest(call.clone())),
        );
        e.on_data(
            true,
            &from_session("eve", "PA_e", data_packet::Value::RpcRequest(call)),
        );
        assert!(drain(&mut rx).is_empty(), "nothing before the update");
        assert_eq!(e.shared.outbox.pending_len(), 0, "no answer yet");
        e.update_roster(&[info("bot", "PA_b", true, false)]);
        let events: Vec<RoomEvent> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        let stream = events.iter().find_map(|ev| match ev {
            RoomEvent::StreamOpened(r) => Some(r.info.sender_identity.clone()),
            _ => None,
        });
        assert_eq!(stream.as_deref(), Some("bot"), "{events:?}");
        assert!(
            !events
                .iter()
                .any(|ev| matches!(ev, RoomEvent::RpcRefused { .. })),
            "the assistant's call is not refused: {events:?}"
        );
        assert_eq!(
            e.shared.outbox.pending_len(),
            1,
            "the assistant's call is acked"
        );
        // Eve is never announced: after the wait her call is handled, and refused.
        e.release_held(Instant::now() + HOLD_FOR);
        assert_eq!(refused_callers(&mut rx), ["eve"]);
        assert!(e.held.is_empty());
    }

    /// Issue 30, finding 4: audio whose publisher no participant update names (a hidden
    /// participant's) is never reported, so nobody can take it for the assistant's; audio
    /// that merely came before the update is reported once the update names its owner.
    #[test]
    fn audio_is_reported_only_once_its_publisher_is_named() {
        let (mut e, mut rx) = engine(RoomOptions::default());
        e.update_roster(&[info("bot", "PA_b", true, false)]);
        drain(&mut rx);
        for (sid, owner) in [("TR_hidden", "PA_eve"), ("TR_early", "PA_c")] {
            let (_tx, stream) = crate::audio::AudioStream::for_tests();
            e.unowned_audio.push(UnownedAudio {
                sid: sid.into(),
                stream_sid: owner.into(),
                stream,
            });
        }
        e.adopt_audio();
        e.update_roster(&[info("bot", "PA_b", true, false)]);
        let subscribed = |rx: &mut mpsc::UnboundedReceiver<RoomEvent>| -> Vec<(String, String)> {
            let mut out = Vec::new();
            while let Ok(ev) = rx.try_recv() {
                if let RoomEvent::AudioTrackSubscribed {
                    participant,
                    track_sid,
                    ..
                } = ev
                {
                    out.push((participant.identity, track_sid));
                }
            }
            out
        };
        assert!(subscribed(&mut rx).is_empty());
        e.update_roster(&[info("carol", "PA_c", false, false)]);
        assert_eq!(
            subscribed(&mut rx),
            vec![("carol".to_owned(), "TR_early".to_owned())]
        );
        assert_eq!(
            e.unowned_audio.len(),
            1,
            "the hidden publisher's stays held"
        );
    }

    #[test]
    fn loopback_hosts() {
        assert!(host_is_loopback("ws://127.0.0.1:7880"));
        assert!(host_is_loopback("ws://localhost:7880/x"));
        assert!(host_is_loopback("wss://[::1]:443"));
        assert!(!host_is_loopback("wss://example.livekit.cloud"));
        assert!(!host_is_loopback("ws://10.1.2.3:7880"));
    }
}
