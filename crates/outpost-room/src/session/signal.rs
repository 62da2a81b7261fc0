//! The signal loop: joining (peer connections, the join response, what the others
//! already publish), then one loop over the client's WebSocket frames, the room's
//! control messages, the peer connections' events and a clock (ping and connect
//! timeouts, the resume window) until one of them ends the session; and the socket's
//! own life: lost (detach), resumed (a new socket), and the goodbye at the end. Each
//! request the client sends is handled in `requests`.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{End, Flow, Lost, Session, Sink, Stream, send};
use crate::proto::{
    self, DisconnectReason, JoinResponse, ParticipantUpdate, ReconnectResponse, RoomUpdate,
    SignalTarget, TrickleRequest, participant_info, signal_response,
};
use crate::room::Control;
use crate::wire::{Role, WireEvent};

/// Participant updates held for a detached client (beyond this the oldest are
/// dropped; the full participant list sent on resume still tells the truth).
const MAX_HELD_UPDATES: usize = 1024;

/// How often the loop checks its clocks (ping timeout, resume window, connect timeout).
const TICK: Duration = Duration::from_millis(250);

impl Session {
    /// Joins, then serves the client until the session ends, and tells the client how
    /// it ended (when its socket is still there).
    pub(super) async fn drive(
        &mut self,
        socket: WebSocket,
        mut ctl_rx: mpsc::UnboundedReceiver<Control>,
        mut wire_rx: mpsc::UnboundedReceiver<WireEvent>,
    ) -> End {
        let (sink, stream) = socket.split();
        self.sink = Some(sink);
        let mut stream = Some(stream);
        if let Err(end) = self.join().await {
            return end;
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
        let mut tick = tokio::time::interval(TICK);
        let end = loop {
            let flow = tokio::select! {
                frame = next_frame(&mut stream) => self.on_frame(frame, &mut stream).await,
                ctl = ctl_rx.recv() => self.on_control(ctl, &mut stream).await,
                ev = wire_rx.recv() => self.on_wire(ev, &mut stream).await,
                _ = tick.tick() => self.on_tick(started, &mut stream),
                _ = shutdown.changed() => Flow::Break(End::Leave(DisconnectReason::ServerShutdown)),
            };
            if let Flow::Break(end) = flow {
                break end;
            }
        };
        self.farewell(&end).await;
        end
    }

    /// Creates the peer connections, sends the join response, offers the subscriber
    /// connection when it is primary, and subscribes to the tracks already published
    /// (a late joiner saw them in the join). `Err` says how the session ends when one
    /// of these fails.
    async fn join(&mut self) -> Result<(), End> {
        if let Err(e) = self.create_peers().await {
            tracing::error!("cannot create peer connection: {e}");
            let _ = self.say(&proto::leave(DisconnectReason::JoinFailure)).await;
            return Err(End::Quiet("peer connection setup failed"));
        }
        let cfg = &self.shared.config;
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
            return Err(End::Quiet("socket closed before join response"));
        }
        if self.subscriber.is_some() {
            // As livekit-server does when the subscriber is primary: offer it right
            // after the join, with our data channels in it.
            if let Err(e) = self.offer_subscriber(false).await {
                tracing::error!("cannot offer the subscriber connection: {e}");
                let _ = self.say(&proto::leave(DisconnectReason::JoinFailure)).await;
                return Err(End::Quiet("subscriber offer failed"));
            }
        }
        for other in self.room.others(&self.participant.sid) {
            if other.grant.hidden {
                continue;
            }
            for track in other.tracks() {
                if self.subscribe(track).await.is_err() {
                    return Err(End::Quiet("socket closed while subscribing"));
                }
            }
        }
        Ok(())
    }

    /// One frame of the client's WebSocket, or its end.
    async fn on_frame(
        &mut self,
        frame: Option<Result<Message, axum::Error>>,
        stream: &mut Option<Stream>,
    ) -> Flow {
        let msg = match frame {
            None => return self.lost("socket closed", stream),
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                let reason = format!("websocket error: {e}");
                if self.shared.config.resume_window.is_zero() {
                    return Flow::Break(End::Close(1009, reason));
                }
                close_with(self.sink.as_mut(), 1009, &reason).await;
                return self.lost("websocket error", stream);
            }
        };
        self.last_seen = Instant::now();
        let bytes = match msg {
            Message::Binary(b) => b,
            Message::Close(_) => return self.lost("client closed socket", stream),
            Message::Text(_) => {
                return Flow::Break(End::Close(
                    1003,
                    "text frames are not LiveKit signaling; send binary protobuf".into(),
                ));
            }
            Message::Ping(_) | Message::Pong(_) => return Flow::Continue(()),
        };
        let req = match proto::decode_signal_request(&bytes) {
            Ok(r) => r,
            Err(e) => {
                return Flow::Break(End::Close(
                    1007,
                    format!("malformed SignalRequest ({} bytes): {e}", bytes.len()),
                ));
            }
        };
        let Some(req) = req.message else {
            return Flow::Continue(());
        };
        match self.handle(req).await {
            Ok(flow) => flow,
            Err(e) => self.lost_by(e, stream),
        }
    }

    /// What the room asks of this session.
    async fn on_control(&mut self, ctl: Option<Control>, stream: &mut Option<Stream>) -> Flow {
        let step = match ctl {
            Some(Control::Signal(resp)) if self.sink.is_none() => {
                self.hold(*resp);
                Ok(())
            }
            Some(Control::Signal(resp)) => self.say(&resp).await,
            Some(Control::Kick(reason)) => return Flow::Break(End::Leave(reason)),
            Some(Control::Resume(r)) => self.resume(*r.socket, stream).await,
            Some(Control::Subscribe(track)) => self.subscribe(track).await,
            Some(Control::Unsubscribe(sid)) => self.unsubscribe(&sid).await,
            None => return Flow::Break(End::Quiet("room dropped session")),
        };
        match step {
            Ok(()) => Flow::Continue(()),
            Err(e) => self.lost_by(e, stream),
        }
    }

    /// What the peer connections report.
    async fn on_wire(&mut self, ev: Option<WireEvent>, stream: &mut Option<Stream>) -> Flow {
        let step = match ev {
            Some(WireEvent::LocalCandidate(role, json)) => self.trickle(role, json).await,
            Some(WireEvent::Connected(role)) => {
                self.peer_connected(role);
                Ok(())
            }
            Some(WireEvent::Down(role, why)) => {
                tracing::info!(identity = %self.participant.identity(), ?role, "{why}");
                return Flow::Break(End::Leave(DisconnectReason::MediaFailure));
            }
            Some(WireEvent::Channel(role, kind, dc)) => {
                self.start_channel(role, kind, dc);
                Ok(())
            }
            Some(WireEvent::Track(track)) => {
                self.track_arrived(track);
                Ok(())
            }
            Some(WireEvent::TrackEnded(sid)) => self.unpublish(&sid, "its media ended").await,
            None => return Flow::Break(End::Quiet("peer connection gone")),
        };
        match step {
            Ok(()) => Flow::Continue(()),
            Err(e) => self.lost_by(e, stream),
        }
    }

    /// The clock: the client went quiet past the ping timeout, stayed away past the
    /// resume window, or never connected its primary connection in time.
    fn on_tick(&mut self, started: Instant, stream: &mut Option<Stream>) -> Flow {
        let shared = self.shared.clone();
        let cfg = &shared.config;
        if self.sink.is_some() && self.last_seen.elapsed() > cfg.ping_timeout {
            if let Flow::Break(end) = self.lost("ping timeout", stream) {
                return Flow::Break(end);
            }
        }
        if self
            .detached_at
            .is_some_and(|t| t.elapsed() > cfg.resume_window)
        {
            return Flow::Break(End::Quiet("not resumed within the resume window"));
        }
        if !self.connected && started.elapsed() > cfg.connect_timeout {
            return Flow::Break(End::Leave(DisconnectReason::ConnectionTimeout));
        }
        Flow::Continue(())
    }

    /// Sends one of our ICE candidates to the client.
    async fn trickle(&mut self, role: Role, candidate_init: String) -> Result<(), Lost> {
        let target = match role {
            Role::Publisher => SignalTarget::Publisher,
            Role::Subscriber => SignalTarget::Subscriber,
        };
        let t = TrickleRequest {
            candidate_init,
            target: target as i32,
            r#final: false,
        };
        // Candidates gathered while detached are stale by the time the client is back
        // (it restarts ICE), so they are not held.
        self.say(&proto::response(signal_response::Message::Trickle(t)))
            .await
    }

    /// A peer connection is up; the primary one makes the participant active.
    fn peer_connected(&mut self, role: Role) {
        if role == Role::Subscriber {
            self.subscriber_connected();
        }
        if role == self.primary() && !self.connected {
            self.connected = true;
            self.participant.set_state(participant_info::State::Active);
            self.room.announce(&self.participant);
        }
    }

    /// Keeps a participant update for a detached client (the oldest goes beyond
    /// [`MAX_HELD_UPDATES`]).
    fn hold(&mut self, update: proto::SignalResponse) {
        if self.held.len() >= MAX_HELD_UPDATES {
            self.held.pop_front();
        }
        self.held.push_back(update);
    }

    /// The client cannot be talked to (`why`): the signal connection counts as lost.
    fn lost_by(&mut self, why: Lost, stream: &mut Option<Stream>) -> Flow {
        tracing::debug!(identity = %self.participant.identity(), "{why}");
        self.lost(why.as_str(), stream)
    }

    /// The socket is gone. Without a resume window that ends the session; with one,
    /// the session detaches and waits for the client to come back.
    fn lost(&mut self, why: &'static str, stream: &mut Option<Stream>) -> Flow {
        if self.shared.config.resume_window.is_zero() {
            return Flow::Break(End::Quiet(why));
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
        Flow::Continue(())
    }

    /// Tells the client how the session ended, when its socket is still there.
    async fn farewell(&mut self, end: &End) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        match end {
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

    /// Attaches a resumed client's socket, as livekit-server resumes: a
    /// `ReconnectResponse` (with the last reliable sequence we received, so the SDK
    /// resends only what we lack), what was held while detached, the full participant
    /// list and the room, then an ICE restart of the subscriber connection if there is
    /// one (the client restarts its publisher itself).
    async fn resume(&mut self, socket: WebSocket, stream: &mut Option<Stream>) -> Result<(), Lost> {
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
        self.offer_subscriber(true).await.inspect_err(|e| {
            tracing::warn!(identity = %self.participant.identity(), "subscriber ICE restart: {e}");
        })
    }
}

async fn next_frame(stream: &mut Option<Stream>) -> Option<Result<Message, axum::Error>> {
    match stream {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
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
