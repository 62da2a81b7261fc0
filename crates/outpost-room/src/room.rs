//! Rooms and the participants in them: membership, participant updates, and the
//! data relay between participants.
//!
//! A [`Registry`] maps room names to [`Room`]s. Rooms are created on first join and
//! removed `empty_timeout` after the last participant left. Each [`Participant`] owns a
//! bounded outbound queue per data channel kind; the relay pushes encoded packets
//! into the receivers' queues and a writer task per channel drains each queue in order,
//! which is what keeps every sender's reliable packets in order at every receiver.

use outpost_sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

use crate::auth::Grant;
use crate::media::PublishedTrack;
use crate::proto::{
    self, DisconnectReason, ParticipantInfo, ParticipantPermission, ParticipantUpdate, Reliability,
    RoomInfo, SubscriptionPermission, UpdateParticipantMetadata, participant_info,
    request_response, signal_response,
};
use crate::tasks::Tasks;

/// Longest participant name a client may set (livekit-server's default limit).
pub const MAX_NAME_LEN: usize = 256;
/// Largest metadata a client may set, in bytes (livekit-server's default limit).
pub const MAX_METADATA_SIZE: usize = 512 * 1024;
/// Largest attribute update a client may send, keys plus values, in bytes
/// (livekit-server's default limit).
pub const MAX_ATTRIBUTES_SIZE: usize = 64 * 1024;

/// Packets queued towards one receiver's data channel before the sender waits.
pub const RELIABLE_QUEUE: usize = 256;
/// Lossy packets queued before new ones are dropped.
pub const LOSSY_QUEUE: usize = 256;

/// An encoded `DataPacket`, shared by all receivers.
pub type Packet = Arc<Vec<u8>>;

/// A WebSocket on which a client asked to resume its session (handed to the session that
/// holds the participant).
pub struct ResumedSocket {
    pub(crate) socket: Box<axum::extract::ws::WebSocket>,
}

impl std::fmt::Debug for ResumedSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResumedSocket").finish_non_exhaustive()
    }
}

/// What a room (or the HTTP side) asks of a participant's session.
#[derive(Debug)]
pub enum Control {
    /// Send this signaling message.
    Signal(Box<proto::SignalResponse>),
    /// Tell the client to leave for this reason, then end the session.
    Kick(DisconnectReason),
    /// The client resumed the session (`reconnect=1`) on this new WebSocket.
    Resume(ResumedSocket),
    /// Another participant published this track: subscribe to it (if this
    /// participant subscribes automatically and may).
    Subscribe(Arc<PublishedTrack>),
    /// The track with this sid is gone: stop forwarding it and renegotiate it away.
    Unsubscribe(String),
}

/// One outbound queue towards a participant's data channel.
#[derive(Debug)]
struct Outbox {
    tx: mpsc::Sender<Packet>,
    rx: Mutex<Option<mpsc::Receiver<Packet>>>,
    /// Set once the channel is open and a writer drains the queue.
    open: AtomicBool,
}

impl Outbox {
    fn new(cap: usize) -> Self {
        let (tx, rx) = mpsc::channel(cap);
        Self {
            tx,
            rx: Mutex::new(Some(rx)),
            open: AtomicBool::new(false),
        }
    }
}

/// What a participant may change about itself after joining; starts as the token's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Display name.
    pub name: String,
    /// Metadata string.
    pub metadata: String,
    /// Attributes.
    pub attributes: HashMap<String, String>,
}

/// A participant as the room sees it.
#[derive(Debug)]
pub struct Participant {
    /// `PA_…` id.
    pub sid: String,
    /// What the token allows, including identity and the initial name, metadata and
    /// attributes (the current ones are in [`Participant::profile`]).
    pub grant: Grant,
    /// Client protocol the SDK announced (RPC v2 needs ≥ 1).
    pub client_protocol: i32,
    joined_at_ms: i64,
    profile: Mutex<Profile>,
    state: Mutex<i32>,
    version: AtomicU32,
    /// Highest `DataPacket.sequence` received from this participant on `_reliable`.
    last_reliable_seq: AtomicU32,
    control: mpsc::UnboundedSender<Control>,
    reliable: Outbox,
    lossy: Outbox,
    /// Tracks it publishes whose media has arrived, in publication order.
    tracks: Mutex<Vec<Arc<PublishedTrack>>>,
    /// Who may subscribe to its tracks (`SubscriptionPermission`); everyone until it
    /// says otherwise.
    subscribers: Mutex<Subscribers>,
}

/// Who may subscribe to a participant's tracks, as its last `SubscriptionPermission`
/// said (livekit-server's `UpTrackManager`: keyed by identity, `all_participants` wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Subscribers {
    /// Everyone (no permission sent, or `all_participants`).
    #[default]
    Everyone,
    /// These identities: all tracks (`None`) or the listed track sids.
    Only(HashMap<String, Option<Vec<String>>>),
}

impl Subscribers {
    /// Whether `identity` may subscribe to track `sid`.
    pub fn allow(&self, identity: &str, sid: &str) -> bool {
        match self {
            Self::Everyone => true,
            Self::Only(who) => match who.get(identity) {
                Some(None) => true,
                Some(Some(sids)) => sids.iter().any(|s| s == sid),
                None => false,
            },
        }
    }
}

impl Participant {
    /// A new participant whose session listens on `control`.
    pub fn new(
        grant: Grant,
        client_protocol: i32,
        control: mpsc::UnboundedSender<Control>,
    ) -> Self {
        let profile = Profile {
            name: grant.name.clone(),
            metadata: grant.metadata.clone(),
            attributes: grant.attributes.clone(),
        };
        Self {
            sid: format!("PA_{}", short_id()),
            grant,
            client_protocol,
            joined_at_ms: now_ms(),
            profile: Mutex::new(profile),
            state: Mutex::new(participant_info::State::Joined as i32),
            version: AtomicU32::new(0),
            last_reliable_seq: AtomicU32::new(0),
            control,
            reliable: Outbox::new(RELIABLE_QUEUE),
            lossy: Outbox::new(LOSSY_QUEUE),
            tracks: Mutex::new(Vec::new()),
            subscribers: Mutex::new(Subscribers::Everyone),
        }
    }

    /// Whether `identity` may subscribe to this participant's track `sid`.
    pub fn allows_subscriber(&self, identity: &str, sid: &str) -> bool {
        lock(&self.subscribers).allow(identity, sid)
    }

    /// The tracks it publishes.
    pub fn tracks(&self) -> Vec<Arc<PublishedTrack>> {
        lock(&self.tracks).clone()
    }

    /// One of its tracks by sid.
    pub fn track(&self, sid: &str) -> Option<Arc<PublishedTrack>> {
        lock(&self.tracks).iter().find(|t| t.sid == sid).cloned()
    }

    fn add_track(&self, track: Arc<PublishedTrack>) {
        lock(&self.tracks).push(track);
    }

    fn remove_track(&self, sid: &str) -> Option<Arc<PublishedTrack>> {
        let mut tracks = lock(&self.tracks);
        let at = tracks.iter().position(|t| t.sid == sid)?;
        Some(tracks.remove(at))
    }

    fn take_tracks(&self) -> Vec<Arc<PublishedTrack>> {
        std::mem::take(&mut *lock(&self.tracks))
    }

    /// Identity from the token.
    pub fn identity(&self) -> &str {
        &self.grant.identity
    }

    /// Marks the participant's state (JOINED, ACTIVE, DISCONNECTED).
    pub fn set_state(&self, state: participant_info::State) {
        *lock(&self.state) = state as i32;
    }

    /// The current name, metadata and attributes.
    pub fn profile(&self) -> Profile {
        lock(&self.profile).clone()
    }

    /// Applies an `UpdateParticipantMetadata` the participant sent about itself, as
    /// livekit-server does: refused without the `canUpdateOwnMetadata` grant or over
    /// the size limits; otherwise a non-empty name or metadata replaces the current
    /// one (an empty one leaves it as it is), and attributes merge into the current
    /// ones, an empty value deleting its key. Returns whether anything changed.
    pub fn update_profile(
        &self,
        update: &UpdateParticipantMetadata,
    ) -> Result<bool, (request_response::Reason, &'static str)> {
        use request_response::Reason;
        if !self.grant.can_update_own_metadata {
            return Err((
                Reason::NotAllowed,
                "does not have permission to update own metadata",
            ));
        }
        if update.name.len() > MAX_NAME_LEN {
            return Err((Reason::LimitExceeded, "exceeds name length limit"));
        }
        if update.metadata.len() > MAX_METADATA_SIZE {
            return Err((Reason::LimitExceeded, "exceeds metadata size limit"));
        }
        let attributes_size: usize = update
            .attributes
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum();
        if attributes_size > MAX_ATTRIBUTES_SIZE {
            return Err((Reason::LimitExceeded, "exceeds attributes size limit"));
        }
        let mut profile = lock(&self.profile);
        let before = profile.clone();
        if !update.name.is_empty() {
            profile.name.clone_from(&update.name);
        }
        if !update.metadata.is_empty() {
            profile.metadata.clone_from(&update.metadata);
        }
        for (k, v) in &update.attributes {
            if v.is_empty() {
                profile.attributes.remove(k);
            } else {
                profile.attributes.insert(k.clone(), v.clone());
            }
        }
        Ok(*profile != before)
    }

    /// The protobuf view other participants get.
    pub fn info(&self) -> ParticipantInfo {
        let joined_at_ms = self.joined_at_ms;
        let profile = self.profile();
        ParticipantInfo {
            sid: self.sid.clone(),
            identity: self.grant.identity.clone(),
            name: profile.name,
            metadata: profile.metadata,
            attributes: profile.attributes,
            state: *lock(&self.state),
            joined_at: joined_at_ms / 1000,
            joined_at_ms,
            version: self.version.fetch_add(1, Ordering::Relaxed) + 1,
            permission: Some(ParticipantPermission {
                can_subscribe: self.grant.can_subscribe,
                can_publish: self.grant.can_publish,
                can_publish_data: self.grant.can_publish_data,
                hidden: self.grant.hidden,
                can_update_metadata: self.grant.can_update_own_metadata,
                ..Default::default()
            }),
            client_protocol: self.client_protocol,
            kind: proto::participant_kind(&self.grant.kind),
            tracks: lock(&self.tracks).iter().map(|t| t.info()).collect(),
            ..Default::default()
        }
    }

    /// Sends a control message to the participant's session (ignored if it is gone).
    pub fn control(&self, msg: Control) {
        let _ = self.control.send(msg);
    }

    /// Sends a control message; gives it back if the session has ended.
    pub fn try_control(&self, msg: Control) -> Result<(), Control> {
        self.control.send(msg).map_err(|e| e.0)
    }

    /// Records the sequence number of a reliable packet from this participant.
    /// False when it is not newer than one already received: a replay (an SDK resends
    /// what it sent after the `last_message_seq` of a resume) to drop, as
    /// livekit-server does. Sequence 0 means "unnumbered" and always passes.
    pub fn accept_reliable_seq(&self, sequence: u32) -> bool {
        sequence == 0 || self.last_reliable_seq.fetch_max(sequence, Ordering::AcqRel) < sequence
    }

    /// Highest reliable sequence received (the resume's `last_message_seq`).
    pub fn last_reliable_seq(&self) -> u32 {
        self.last_reliable_seq.load(Ordering::Acquire)
    }

    /// Takes the receiving end of an outbound queue, for the channel's writer task.
    /// Marks the queue open: from now on reliable relays wait for room in it.
    pub fn take_outbox(&self, kind: Reliability) -> Option<mpsc::Receiver<Packet>> {
        let outbox = self.outbox(kind);
        let rx = lock(&outbox.rx).take();
        outbox.open.store(true, Ordering::Release);
        rx
    }

    fn outbox(&self, kind: Reliability) -> &Outbox {
        match kind {
            Reliability::Reliable => &self.reliable,
            Reliability::Lossy => &self.lossy,
        }
    }

    /// Queues a packet for this participant. Reliable packets wait for room once the
    /// channel is open (back-pressure to the sender); before that, and for lossy
    /// packets, a full queue drops the packet.
    async fn deliver(&self, kind: Reliability, packet: Packet) {
        let outbox = self.outbox(kind);
        if kind == Reliability::Reliable && outbox.open.load(Ordering::Acquire) {
            if outbox.tx.send(packet).await.is_err() {
                tracing::debug!(to = %self.grant.identity, "receiver gone; packet dropped");
            }
        } else if outbox.tx.try_send(packet).is_err() {
            tracing::debug!(to = %self.grant.identity, ?kind, "receiver queue full; packet dropped");
        }
    }
}

/// Sizes of the registry, for tests and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Open rooms.
    pub rooms: usize,
    /// Participants in all rooms.
    pub participants: usize,
    /// Server tasks still running (sessions, relays, timers).
    pub tasks: usize,
}

/// A room.
#[derive(Debug)]
pub struct Room {
    /// `RM_…` id.
    pub sid: String,
    /// Room name.
    pub name: String,
    created_ms: i64,
    empty_timeout: Duration,
    inner: Mutex<RoomInner>,
}

#[derive(Debug, Default)]
struct RoomInner {
    /// By identity.
    participants: HashMap<String, Arc<Participant>>,
    /// Bumped whenever the room becomes empty; an empty-timeout timer only closes
    /// the room if the generation it saw is still current.
    empty_generation: u64,
}

impl Room {
    /// The protobuf view of the room.
    pub fn info(&self) -> RoomInfo {
        let n = lock(&self.inner).participants.len();
        RoomInfo {
            sid: self.sid.clone(),
            name: self.name.clone(),
            empty_timeout: u32::try_from(self.empty_timeout.as_secs()).unwrap_or(u32::MAX),
            departure_timeout: 0,
            creation_time: self.created_ms / 1000,
            creation_time_ms: self.created_ms,
            num_participants: u32::try_from(n).unwrap_or(u32::MAX),
            ..Default::default()
        }
    }

    /// Everyone in the room.
    pub fn everyone(&self) -> Vec<Arc<Participant>> {
        lock(&self.inner).participants.values().cloned().collect()
    }

    /// The participant with session id `sid`, if it is in the room.
    pub fn by_sid(&self, sid: &str) -> Option<Arc<Participant>> {
        lock(&self.inner)
            .participants
            .values()
            .find(|p| p.sid == sid)
            .cloned()
    }

    /// `who` says who may subscribe to its tracks (a `SubscriptionPermission`; an entry
    /// naming only a session id is resolved to that participant's identity, one that
    /// names neither or an unknown sid is skipped, as livekit-server does). Everyone
    /// else's subscriptions to its tracks follow at once: the newly allowed are
    /// subscribed (with auto-subscribe), the no longer allowed unsubscribed.
    pub fn set_subscribers(&self, who: &Participant, perm: &SubscriptionPermission) {
        let subscribers = if perm.all_participants {
            Subscribers::Everyone
        } else {
            let mut allowed = HashMap::new();
            for t in &perm.track_permissions {
                let identity = if t.participant_identity.is_empty() {
                    match self.by_sid(&t.participant_sid) {
                        Some(p) => p.identity().to_owned(),
                        None => continue,
                    }
                } else {
                    t.participant_identity.clone()
                };
                let tracks = (!t.all_tracks).then(|| t.track_sids.clone());
                allowed.insert(identity, tracks);
            }
            Subscribers::Only(allowed)
        };
        *lock(&who.subscribers) = subscribers.clone();
        let tracks = who.tracks();
        for p in self.others(&who.sid) {
            for track in &tracks {
                p.control(if subscribers.allow(p.identity(), &track.sid) {
                    Control::Subscribe(track.clone())
                } else {
                    Control::Unsubscribe(track.sid.clone())
                });
            }
        }
    }

    /// Everyone in the room except `sid`.
    pub fn others(&self, sid: &str) -> Vec<Arc<Participant>> {
        lock(&self.inner)
            .participants
            .values()
            .filter(|p| p.sid != sid)
            .cloned()
            .collect()
    }

    /// Sends a participant update about `who` to everyone who can see it, `who`
    /// included (as livekit-server does: a client learns from its own info coming back
    /// that the room has been told about it); a hidden participant hears only of itself.
    pub fn announce(&self, who: &Participant) {
        let info = who.info();
        let to = if who.grant.hidden {
            self.everyone()
                .into_iter()
                .filter(|p| p.sid == who.sid)
                .collect()
        } else {
            self.everyone()
        };
        for p in to {
            p.control(Control::Signal(Box::new(proto::response(
                signal_response::Message::Update(ParticipantUpdate {
                    participants: vec![info.clone()],
                }),
            ))));
        }
    }

    /// `who` publishes `track` (its media arrived): everyone else sees it in a
    /// participant update, then is asked to subscribe (in that order on each session's
    /// control queue, so the SDKs know the publication before the offer carrying it).
    pub fn publish(&self, who: &Participant, track: Arc<PublishedTrack>) {
        who.add_track(track.clone());
        self.announce(who);
        for p in self.others(&who.sid) {
            p.control(Control::Subscribe(track.clone()));
        }
    }

    /// A subscriber can receive `track` (its answer bound it, its connection is up): the
    /// publisher is told once (`TrackSubscribed`, as a LiveKit server does). LiveKit
    /// Agents waits for it before it speaks on the track.
    pub fn subscribed(&self, track: &PublishedTrack) {
        if !track.first_subscription() {
            return;
        }
        let publisher = lock(&self.inner)
            .participants
            .values()
            .find(|p| p.sid == track.publisher_sid)
            .cloned();
        if let Some(p) = publisher {
            p.control(Control::Signal(Box::new(proto::response(
                signal_response::Message::TrackSubscribed(proto::TrackSubscribed {
                    track_sid: track.sid.clone(),
                }),
            ))));
        }
    }

    /// `who` stops publishing track `sid`: announced, and every subscriber drops it.
    /// Returns whether it was published.
    pub fn unpublish(&self, who: &Participant, sid: &str) -> bool {
        if who.remove_track(sid).is_none() {
            return false;
        }
        self.announce(who);
        for p in self.others(&who.sid) {
            p.control(Control::Unsubscribe(sid.to_owned()));
        }
        true
    }

    /// Relays an encoded packet from `from` to the other participants (or only to
    /// `destinations`, by identity, when it is not empty).
    pub async fn relay(
        &self,
        from: &str,
        kind: Reliability,
        destinations: &[String],
        packet: Packet,
    ) {
        let targets: Vec<Arc<Participant>> = {
            let inner = lock(&self.inner);
            if destinations.is_empty() {
                inner
                    .participants
                    .values()
                    .filter(|p| p.sid != from)
                    .cloned()
                    .collect()
            } else {
                destinations
                    .iter()
                    .filter_map(|id| inner.participants.get(id))
                    .filter(|p| p.sid != from)
                    .cloned()
                    .collect()
            }
        };
        for target in targets {
            target.deliver(kind, packet.clone()).await;
        }
    }
}

/// All rooms of a server.
#[derive(Debug)]
pub struct Registry {
    rooms: Mutex<HashMap<String, Arc<Room>>>,
    empty_timeout: Duration,
    tasks: Tasks,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

impl Registry {
    /// An empty registry whose rooms close `empty_timeout` after their last leave.
    /// Pending empty-room timers end early when `shutdown` turns true.
    pub fn new(
        empty_timeout: Duration,
        tasks: Tasks,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            rooms: Mutex::new(HashMap::new()),
            empty_timeout,
            tasks,
            shutdown,
        }
    }

    /// Adds a participant to its room (creating the room), replacing and kicking any
    /// participant with the same identity. Announces the join to the others.
    pub fn join(&self, participant: Arc<Participant>) -> Arc<Room> {
        let room = {
            let mut rooms = lock(&self.rooms);
            rooms
                .entry(participant.grant.room.clone())
                .or_insert_with(|| {
                    tracing::info!(room = %participant.grant.room, "room created");
                    Arc::new(Room {
                        sid: format!("RM_{}", short_id()),
                        name: participant.grant.room.clone(),
                        created_ms: now_ms(),
                        empty_timeout: self.empty_timeout,
                        inner: Mutex::new(RoomInner::default()),
                    })
                })
                .clone()
        };
        let replaced = lock(&room.inner)
            .participants
            .insert(participant.identity().to_owned(), participant.clone());
        if let Some(old) = replaced {
            tracing::info!(room = %room.name, identity = %old.identity(), "duplicate identity: new connection wins");
            old.set_state(participant_info::State::Disconnected);
            room.announce(&old);
            old.control(Control::Kick(DisconnectReason::DuplicateIdentity));
        }
        room.announce(&participant);
        room
    }

    /// The participant registered as `identity` in room `room`, if any.
    pub fn find(&self, room: &str, identity: &str) -> Option<(Arc<Room>, Arc<Participant>)> {
        let room = lock(&self.rooms).get(room).cloned()?;
        let p = lock(&room.inner).participants.get(identity).cloned()?;
        Some((room, p))
    }

    /// Removes a participant (if it is still the one registered under its identity),
    /// tells the others, and arms the empty-room timer when it was the last one.
    pub fn leave(self: &Arc<Self>, room: &Arc<Room>, participant: &Participant) {
        // Its tracks go whether or not it is still the registered one (a duplicate
        // identity replaced it): nobody may keep forwarding them.
        for track in participant.take_tracks() {
            for p in room.everyone() {
                if p.sid != participant.sid {
                    p.control(Control::Unsubscribe(track.sid.clone()));
                }
            }
        }
        let now_empty = {
            let mut inner = lock(&room.inner);
            let ours = inner
                .participants
                .get(participant.identity())
                .is_some_and(|p| p.sid == participant.sid);
            if !ours {
                return;
            }
            inner.participants.remove(participant.identity());
            if inner.participants.is_empty() {
                inner.empty_generation += 1;
                Some(inner.empty_generation)
            } else {
                None
            }
        };
        participant.set_state(participant_info::State::Disconnected);
        room.announce(participant);
        if let Some(generation) = now_empty {
            let registry = self.clone();
            let room = room.clone();
            let delay = self.empty_timeout;
            let mut shutdown = self.shutdown.clone();
            self.tasks.spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => registry.close_if_empty(&room, generation),
                    _ = shutdown.wait_for(|s| *s) => {}
                }
            });
        }
    }

    fn close_if_empty(&self, room: &Arc<Room>, generation: u64) {
        let mut rooms = lock(&self.rooms);
        let inner = lock(&room.inner);
        let same = rooms.get(&room.name).is_some_and(|r| Arc::ptr_eq(r, room));
        if same && inner.participants.is_empty() && inner.empty_generation == generation {
            rooms.remove(&room.name);
            tracing::info!(room = %room.name, "room closed (empty)");
        }
    }

    /// Every participant of every room.
    pub fn all_participants(&self) -> Vec<Arc<Participant>> {
        let rooms: Vec<Arc<Room>> = lock(&self.rooms).values().cloned().collect();
        rooms
            .iter()
            .flat_map(|r| {
                lock(&r.inner)
                    .participants
                    .values()
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Drops all rooms (server shutdown).
    pub fn clear(&self) {
        lock(&self.rooms).clear();
    }

    /// Room and participant counts.
    pub fn stats(&self) -> Stats {
        let rooms = lock(&self.rooms);
        Stats {
            rooms: rooms.len(),
            participants: rooms
                .values()
                .map(|r| lock(&r.inner).participants.len())
                .sum(),
            tasks: self.tasks.count(),
        }
    }

    /// Names and participant identities of the open rooms, sorted.
    pub fn snapshot(&self) -> Vec<(String, Vec<String>)> {
        let rooms = lock(&self.rooms);
        let mut out: Vec<(String, Vec<String>)> = rooms
            .values()
            .map(|r| {
                let mut ids: Vec<String> = lock(&r.inner).participants.keys().cloned().collect();
                ids.sort();
                (r.name.clone(), ids)
            })
            .collect();
        out.sort();
        out
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(crate) fn short_id() -> String {
    const ALPHABET: [char; 62] = [
        '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h',
        'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z',
        'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O', 'P', 'Q', 'R',
        'S', 'T', 'U', 'V', 'W', 'X', 'Y', 'Z',
    ];
    nanoid::nanoid!(12, &ALPHABET)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn never() -> tokio::sync::watch::Receiver<bool> {
        let (tx, rx) = tokio::sync::watch::channel(false);
        std::mem::forget(tx);
        rx
    }

    fn grant(room: &str, id: &str) -> Grant {
        Grant {
            room: room.into(),
            identity: id.into(),
            name: String::new(),
            metadata: String::new(),
            attributes: HashMap::new(),
            can_publish: true,
            can_subscribe: true,
            can_publish_data: true,
            hidden: false,
            can_update_own_metadata: true,
            kind: String::new(),
        }
    }

    fn attrs(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn profile_updates_merge_delete_and_check_the_grant_and_limits() {
        use request_response::Reason;
        let (tx, _rx) = mpsc::unbounded_channel();
        let p = Participant::new(
            Grant {
                name: "Bot".into(),
                metadata: "m0".into(),
                attributes: attrs(&[("keep", "1")]),
                ..grant("r", "bot")
            },
            1,
            tx,
        );
        let set = |attributes: HashMap<String, String>, metadata: &str, name: &str| {
            UpdateParticipantMetadata {
                attributes,
                metadata: metadata.into(),
                name: name.into(),
                request_id: 1,
            }
        };
        assert_eq!(
            p.update_profile(&set(attrs(&[("lk.agent.state", "thinking")]), "", "")),
            Ok(true)
        );
        let info = p.info();
        assert_eq!(
            info.attributes,
            attrs(&[("keep", "1"), ("lk.agent.state", "thinking")])
        );
        assert_eq!((info.name.as_str(), info.metadata.as_str()), ("Bot", "m0"));
        // The same values again change nothing; an empty value deletes its key.
        assert_eq!(
            p.update_profile(&set(attrs(&[("lk.agent.state", "thinking")]), "", "")),
            Ok(false)
        );
        assert_eq!(
            p.update_profile(&set(attrs(&[("lk.agent.state", "")]), "m1", "Bot 2")),
            Ok(true)
        );
        let info = p.info();
        assert_eq!(info.attributes, attrs(&[("keep", "1")]));
        assert_eq!(
            (info.name.as_str(), info.metadata.as_str()),
            ("Bot 2", "m1")
        );
        // Limits, as livekit-server's defaults.
        let big = "x".repeat(MAX_ATTRIBUTES_SIZE);
        assert_eq!(
            p.update_profile(&set(attrs(&[("k", &big)]), "", "")),
            Err((Reason::LimitExceeded, "exceeds attributes size limit"))
        );
        assert_eq!(
            p.update_profile(&set(HashMap::new(), "", &"n".repeat(MAX_NAME_LEN + 1))),
            Err((Reason::LimitExceeded, "exceeds name length limit"))
        );
        assert_eq!(p.info().attributes, attrs(&[("keep", "1")]));
        // Without the grant nothing changes.
        let (tx, _rx) = mpsc::unbounded_channel();
        let q = Participant::new(
            Grant {
                can_update_own_metadata: false,
                ..grant("r", "user")
            },
            1,
            tx,
        );
        assert_eq!(
            q.update_profile(&set(attrs(&[("a", "b")]), "", "")),
            Err((
                Reason::NotAllowed,
                "does not have permission to update own metadata"
            ))
        );
        assert!(q.info().attributes.is_empty());
    }

    #[test]
    fn agent_kind_reaches_participant_info() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let p = Participant::new(
            Grant {
                kind: "agent".into(),
                ..grant("r", "assistant")
            },
            1,
            tx,
        );
        assert_eq!(p.info().kind, participant_info::Kind::Agent as i32);
        let (tx, _rx) = mpsc::unbounded_channel();
        let p = Participant::new(grant("r", "user"), 1, tx);
        assert_eq!(p.info().kind, participant_info::Kind::Standard as i32);
    }

    fn participant(room: &str, id: &str) -> (Arc<Participant>, mpsc::UnboundedReceiver<Control>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(Participant::new(grant(room, id), 1, tx)), rx)
    }

    #[test]
    fn reliable_replays_are_refused_and_unnumbered_packets_pass() {
        let (p, _rx) = participant("r", "a");
        assert!(p.accept_reliable_seq(1));
        assert!(p.accept_reliable_seq(2));
        assert!(!p.accept_reliable_seq(2), "a replay");
        assert!(!p.accept_reliable_seq(1), "an older packet");
        assert!(p.accept_reliable_seq(0) && p.accept_reliable_seq(0));
        assert!(p.accept_reliable_seq(10));
        assert_eq!(p.last_reliable_seq(), 10);
    }

    /// Issue 30, finding 5: a publisher's subscription permissions are enforced: the
    /// others are told to subscribe or unsubscribe as they change, by identity or by sid.
    #[tokio::test]
    async fn subscription_permissions_decide_who_gets_a_publishers_tracks() {
        use crate::proto::{TrackInfo, TrackType};
        let reg = Arc::new(Registry::new(
            Duration::from_secs(5),
            Tasks::default(),
            never(),
        ));
        let (app, _r0) = participant("r", "app");
        let (bot, mut r1) = participant("r", "bot");
        let (eve, mut r2) = participant("r", "eve");
        let room = reg.join(app.clone());
        reg.join(bot.clone());
        reg.join(eve.clone());
        let mic = PublishedTrack::new(
            &app.sid,
            "c",
            "c",
            TrackInfo {
                sid: "TR_mic".into(),
                r#type: TrackType::Audio as i32,
                ..Default::default()
            },
        );
        room.publish(&app, mic);
        let told = |rx: &mut mpsc::UnboundedReceiver<Control>| -> Vec<String> {
            let mut out = Vec::new();
            while let Ok(c) = rx.try_recv() {
                match c {
                    Control::Subscribe(t) => out.push(format!("+{}", t.sid)),
                    Control::Unsubscribe(sid) => out.push(format!("-{sid}")),
                    _ => {}
                }
            }
            out
        };
        assert_eq!(told(&mut r1), ["+TR_mic"]);
        assert_eq!(told(&mut r2), ["+TR_mic"]);
        assert!(
            app.allows_subscriber("eve", "TR_mic"),
            "everyone by default"
        );
        let only = |identity: &str, sid: &str| SubscriptionPermission {
            all_participants: false,
            track_permissions: vec![proto::TrackPermission {
                participant_identity: identity.into(),
                participant_sid: sid.into(),
                all_tracks: true,
                ..Default::default()
            }],
        };
        room.set_subscribers(&app, &only("bot", ""));
        assert_eq!(told(&mut r1), ["+TR_mic"]);
        assert_eq!(told(&mut r2), ["-TR_mic"]);
        assert!(!app.allows_subscriber("eve", "TR_mic"));
        // By session id, resolved to the identity; an unknown sid allows nobody.
        room.set_subscribers(&app, &only("", &eve.sid));
        assert!(app.allows_subscriber("eve", "TR_mic") && !app.allows_subscriber("bot", "TR_mic"));
        room.set_subscribers(&app, &only("", "PA_nobody"));
        assert!(!app.allows_subscriber("eve", "TR_mic") && !app.allows_subscriber("bot", "TR_mic"));
        room.set_subscribers(
            &app,
            &SubscriptionPermission {
                all_participants: true,
                track_permissions: Vec::new(),
            },
        );
        assert!(app.allows_subscriber("eve", "TR_mic"));
    }

    #[tokio::test]
    async fn rooms_are_isolated_and_close_after_empty_timeout() {
        let reg = Arc::new(Registry::new(
            Duration::from_millis(50),
            Tasks::default(),
            never(),
        ));
        let (a, _ra) = participant("r1", "a");
        let (b, _rb) = participant("r2", "b");
        let r1 = reg.join(a.clone());
        let r2 = reg.join(b.clone());
        assert_eq!(reg.stats().rooms, 2);
        assert!(r1.others(&a.sid).is_empty());
        r1.relay(&a.sid, Reliability::Reliable, &[], Arc::new(vec![1]))
            .await;
        assert!(
            b.take_outbox(Reliability::Reliable)
                .unwrap()
                .try_recv()
                .is_err()
        );
        reg.leave(&r1, &a);
        reg.leave(&r2, &b);
        assert_eq!(reg.stats().participants, 0);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(reg.stats().rooms, 0);
        assert_eq!(reg.stats().tasks, 0);
    }

    #[tokio::test]
    async fn rejoin_within_timeout_keeps_room() {
        let reg = Arc::new(Registry::new(
            Duration::from_millis(100),
            Tasks::default(),
            never(),
        ));
        let (a, _ra) = participant("r", "a");
        let room = reg.join(a.clone());
        reg.leave(&room, &a);
        let (a2, _ra2) = participant("r", "a");
        let room2 = reg.join(a2.clone());
        assert_eq!(room.sid, room2.sid);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(reg.stats().rooms, 1);
    }

    #[tokio::test]
    async fn duplicate_identity_kicks_old() {
        let reg = Arc::new(Registry::new(
            Duration::from_secs(1),
            Tasks::default(),
            never(),
        ));
        let (old, mut rold) = participant("r", "a");
        let (watcher, mut rw) = participant("r", "w");
        reg.join(watcher.clone());
        let room = reg.join(old.clone());
        let (new, _rnew) = participant("r", "a");
        reg.join(new.clone());
        // The old session first hears of itself (its own join), then is kicked.
        let mut kicked = false;
        while let Ok(c) = rold.try_recv() {
            match c {
                Control::Signal(_) => {}
                Control::Kick(DisconnectReason::DuplicateIdentity) => kicked = true,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(kicked);
        // Old session cleanup must not remove the new participant.
        reg.leave(&room, &old);
        assert_eq!(
            reg.snapshot(),
            vec![("r".to_string(), vec!["a".to_string(), "w".to_string()])]
        );
        // Watcher saw: itself join, old joined, old disconnected, new joined.
        let mut states = vec![];
        while let Ok(Control::Signal(s)) = rw.try_recv() {
            if let Some(signal_response::Message::Update(u)) = s.message {
                states.push((u.participants[0].sid.clone(), u.participants[0].state));
            }
        }
        let d = participant_info::State::Disconnected as i32;
        let j = participant_info::State::Joined as i32;
        assert_eq!(
            states,
            vec![
                (watcher.sid.clone(), j),
                (old.sid.clone(), j),
                (old.sid.clone(), d),
                (new.sid.clone(), j)
            ]
        );
    }

    #[tokio::test]
    async fn destinations_limit_receivers_and_order_is_kept() {
        let reg = Arc::new(Registry::new(
            Duration::from_secs(1),
            Tasks::default(),
            never(),
        ));
        let (a, _ra) = participant("r", "a");
        let (b, _rb) = participant("r", "b");
        let (c, _rc) = participant("r", "c");
        let room = reg.join(a.clone());
        reg.join(b.clone());
        reg.join(c.clone());
        let mut b_rx = b.take_outbox(Reliability::Reliable).unwrap();
        let mut c_rx = c.take_outbox(Reliability::Reliable).unwrap();
        for i in 0..10u8 {
            room.relay(
                &a.sid,
                Reliability::Reliable,
                &["b".to_string()],
                Arc::new(vec![i]),
            )
            .await;
        }
        for i in 0..10u8 {
            assert_eq!(*b_rx.recv().await.unwrap(), vec![i]);
        }
        assert!(c_rx.try_recv().is_err());
    }
}
