//! The session engine: one task per room that owns the signal connection and the
//! peer connections, turns what arrives into [`RoomEvent`]s, and recovers from lost
//! links (resume first, then full rejoins with backoff).
//!
//! The room handle talks to it only through the shared state ([`Shared`]: the send
//! queue, the roster, the connection state) and a command channel (leave).
//!
//! This module holds the actor: its state, its event loop and the phases of a link
//! (connecting, connected, backoff, closed). One `impl Engine` per seam beside it:
//! `signalling` (join, resume, signal messages), `transports` (peer connections,
//! ICE, negotiation, the reliable writer), `data` (data packets, replay dedup,
//! holding packets of senders not announced yet), `participants` (the roster and the
//! assistant), `media` (audio tracks, ours and the others').

mod data;
mod media;
mod participants;
mod signalling;
mod transports;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::audio::{LocalShared, TrackRequest};
use crate::error::{Error, Result};
use crate::events::RoomEvent;
use crate::options::RoomOptions;
use crate::proto::{
    self, JoinResponse, LeaveRequest, ReconnectReason, leave_request, signal_request,
};
use crate::rpc::Rpc;
use crate::shared::{Command, Shared};
use crate::signal::{self, Signal};
use crate::streams::{Limits, Receivers};
use crate::types::{ConnectionState, DisconnectReason, TrackInfo};
use crate::wire::{Channel, Transport, WireEvent};

use data::{HOLD_FOR, Held};
use media::{PendingTrack, UnownedAudio};

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
    rpc: Arc<Rpc>,
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
    /// Our tracks the server has listed in our own participant info since they were
    /// published (or since it said it could not find one to mute): see
    /// [`Engine::check_our_mutes`].
    tracks_listed: HashSet<String>,
    /// Mute states to tell the server again, found by [`Engine::check_our_mutes`].
    mute_again: Vec<(String, bool)>,
    /// The tracks each remote participant publishes, by identity.
    published: HashMap<String, Vec<TrackInfo>>,
    /// Decoding tasks of subscribed remote tracks, by track sid.
    receivers_audio: HashMap<String, JoinHandle<()>>,
    /// Streams and RPC requests from sessions no participant update has named yet, and
    /// whatever those sessions sent after them, oldest first (with an assistant-only
    /// rule on, see [`Engine::hold`]).
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

impl Engine {
    pub(crate) fn new(
        url: String,
        token: String,
        opts: RoomOptions,
        rpc: Arc<Rpc>,
        events: mpsc::UnboundedSender<RoomEvent>,
        cmd_rx: mpsc::UnboundedReceiver<Command>,
    ) -> Self {
        // One room state: the one the RPC layer works over.
        let shared = rpc.shared().clone();
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
            rpc,
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
            tracks_listed: HashSet::new(),
            mute_again: Vec::new(),
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
                    Some(Command::Track(TrackRequest::Mute { sid, muted, done })) => {
                        let verdict = match self.link.as_ref() {
                            Some(link) if self.local_tracks.contains_key(&sid) => {
                                link.signal
                                    .send(proto::mute_track(&sid, muted))
                                    .await;
                                Ok(())
                            }
                            Some(_) => Err(Error::Closed(format!("track {sid} is not published"))),
                            None => Err(Error::Closed("not connected to the room".into())),
                        };
                        let _ = done.send(verdict);
                    }
                    Some(Command::Track(TrackRequest::Unpublish { sid, done })) => {
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
                    let after = self.opts.peer_connection_timeout;
                    self.fail_first_connect(ready, &why, Error::NoPath { after, tried })
                        .await;
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

    /// The first connect failed: the room closes for good and its caller hears `error`.
    async fn fail_first_connect(
        &mut self,
        ready: oneshot::Sender<Result<()>>,
        why: &str,
        error: Error,
    ) {
        self.teardown(false).await;
        self.shared.outbox.close(why);
        self.phase = Phase::Closed;
        self.shared
            .state
            .send_replace(ConnectionState::Disconnected);
        let _ = ready.send(Err(error));
    }

    /// The link is lost: tell the caller, try to resume (when `resume` and the link
    /// had been up), otherwise tear it down and schedule a rejoin.
    async fn lost(&mut self, why: String, resume: bool) {
        if matches!(self.phase, Phase::Closed | Phase::Backoff { .. }) {
            return;
        }
        if let Some(ready) = self.ready.take() {
            // Still in the first connect: no reconnecting, just fail.
            self.fail_first_connect(ready, &why, Error::Signal(why.clone()))
                .await;
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
        self.rpc.close();
        self.requests.clear();
        self.phase = Phase::Closed;
        self.shared
            .state
            .send_replace(ConnectionState::Disconnected);
        self.emit(RoomEvent::Disconnected { reason });
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
