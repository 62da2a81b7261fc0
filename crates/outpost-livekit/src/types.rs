//! Public value types: participants, received data, options.

use std::collections::HashMap;

/// What kind of participant someone is, as the server reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParticipantKind {
    /// A regular client (apps, SDK peers).
    Standard,
    /// An agent (LiveKit Agents, or any token minted with kind `agent`).
    Agent,
    /// Ingress, egress, SIP, connector, bridge and unknown kinds.
    Other(i32),
}

/// A participant of the room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// Server-assigned session id (`PA_…`); changes when the participant rejoins.
    pub sid: String,
    /// Identity from the access token; stable across rejoins.
    pub identity: String,
    /// Display name.
    pub name: String,
    /// Kind.
    pub kind: ParticipantKind,
    /// Metadata string from the token or the server API.
    pub metadata: String,
    /// Participant attributes.
    pub attributes: HashMap<String, String>,
    /// The `client_protocol` its SDK advertised when it joined (as the server relays it
    /// in `ParticipantInfo`): 0 = RPC version 1 only, 1 = RPC version 2 over data
    /// streams, 2 = also data streams version 2. Calls to it use RPC version 2 when
    /// this is at least 1.
    pub client_protocol: i32,
}

/// A user data packet received from another participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataMessage {
    /// Sender identity (empty when the server sent it).
    pub sender_identity: String,
    /// Sender session id.
    pub sender_sid: String,
    /// Topic, if the sender gave one.
    pub topic: Option<String>,
    /// Payload bytes.
    pub payload: Vec<u8>,
    /// Whether it came over the reliable channel.
    pub reliable: bool,
}

/// How to send a data packet.
#[derive(Debug, Clone)]
pub struct DataOptions {
    /// Reliable and ordered (default) or lossy.
    pub reliable: bool,
    /// Topic.
    pub topic: Option<String>,
    /// Recipients by identity; empty means everyone else in the room.
    pub destination_identities: Vec<String>,
}

impl Default for DataOptions {
    fn default() -> Self {
        Self {
            reliable: true,
            topic: None,
            destination_identities: Vec::new(),
        }
    }
}

impl DataOptions {
    /// Reliable, with a topic.
    pub fn topic(topic: impl Into<String>) -> Self {
        Self {
            topic: Some(topic.into()),
            ..Self::default()
        }
    }

    /// Adds a recipient.
    #[must_use]
    pub fn to(mut self, identity: impl Into<String>) -> Self {
        self.destination_identities.push(identity.into());
        self
    }
}

/// The state of the connection to the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Joined, peer connection up.
    Connected,
    /// Lost the link; resuming or rejoining.
    Reconnecting,
    /// Gone for good (left, refused, or out of reconnect attempts).
    Disconnected,
}

/// Why the client is disconnected for good.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// [`crate::Room::leave`] was called.
    ClientLeft,
    /// The server told us to leave, with its reason name (e.g. `SERVER_SHUTDOWN`,
    /// `PARTICIPANT_REMOVED`, `DUPLICATE_IDENTITY`).
    ServerRequest(String),
    /// Every reconnect attempt failed; the last error.
    ReconnectFailed(String),
    /// Something else broke beyond repair.
    Error(String),
}

impl std::fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DisconnectReason::ClientLeft => f.write_str("left the room"),
            DisconnectReason::ServerRequest(r) => write!(f, "server asked us to leave: {r}"),
            DisconnectReason::ReconnectFailed(e) => write!(f, "reconnecting failed: {e}"),
            DisconnectReason::Error(e) => write!(f, "{e}"),
        }
    }
}

/// A track a remote participant publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackInfo {
    /// Track sid (`TR_…`).
    pub sid: String,
    /// Its name.
    pub name: String,
    /// Whether it is muted.
    pub muted: bool,
    /// Audio (true) or video (false; never subscribed by this client).
    pub audio: bool,
}

/// Whose incoming data streams the client accepts (see
/// [`crate::RoomOptions::stream_senders`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamSenders {
    /// Every participant's, as the official SDKs do (each still within the
    /// per-sender and room-wide limits).
    #[default]
    Anyone,
    /// Only the assistant's (see [`crate::RoomOptions::assistant_identity`]): a stream
    /// from anyone else is dropped at its header, with no event, no slot and no
    /// buffering; its chunks and trailer are ignored. The sender is the session that
    /// sent the header (its sid), not the identity it names: a stream the assistant
    /// sends on our behalf (LiveKit Agents' transcript of the user's speech) is the
    /// assistant's, with [`crate::StreamInfo::on_behalf_of`] set; one another agent
    /// sends in our name is dropped.
    Assistant,
}

/// Who may call our RPC methods (see [`crate::RoomOptions::rpc_callers`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RpcCallers {
    /// Every participant, as the official SDKs allow (within the per-caller and
    /// room-wide limits on calls in progress).
    #[default]
    Anyone,
    /// Only the assistant (see [`crate::RoomOptions::assistant_identity`]) as the room
    /// knows it when the request (a version 1 packet, or a version 2 stream's header)
    /// arrives. Anyone else is answered with [`crate::RoomOptions::rpc_refusal`] at
    /// once, at most a few times a second per caller, reported as
    /// [`crate::RoomEvent::RpcRefused`], and nothing of a version 2 request stream is read:
    /// it takes no stream slot and its chunks are dropped.
    Assistant,
}

/// Who may subscribe to the tracks we publish (see
/// [`crate::RoomOptions::track_subscribers`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrackSubscribers {
    /// Every participant, as the official SDKs allow by default.
    #[default]
    Anyone,
    /// Only the assistant (see [`crate::RoomOptions::assistant_identity`]), by
    /// identity; nobody while there is none. The server is told with LiveKit's
    /// subscription permissions (`SubscriptionPermission`, `all_participants` false)
    /// from the join on, again whenever the assistant changes and after every rejoin,
    /// and refuses (or ends) anyone else's subscription.
    Assistant,
}

pub use outpost_webrtc::{PathKind, SelectedPath};

/// The network path of the room's traffic, as ICE selected it on each peer connection
/// ([`crate::Room::connection_path`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionPath {
    /// What we send on (the publisher connection).
    pub publisher: Option<SelectedPath>,
    /// What the server sends on (the subscriber connection), once the server has
    /// offered it.
    pub subscriber: Option<SelectedPath>,
}

impl ConnectionPath {
    /// Whether a TURN server relays either connection.
    pub fn is_relayed(&self) -> bool {
        self.kinds().iter().any(|k| k.is_relayed())
    }

    fn kinds(&self) -> Vec<PathKind> {
        [&self.publisher, &self.subscriber]
            .into_iter()
            .flatten()
            .map(|p| p.kind)
            .collect()
    }

    /// For people: `direct (UDP)`, `direct (TCP)`, `relayed (TURN/TLS)`; both
    /// connections named when they differ (`direct (UDP out, TCP in)`); `unknown`
    /// before ICE has selected a path.
    pub fn describe(&self) -> String {
        let how = if self.is_relayed() {
            "relayed"
        } else {
            "direct"
        };
        match (&self.publisher, &self.subscriber) {
            (None, None) => "unknown".to_owned(),
            (Some(p), Some(s)) if p.kind != s.kind => {
                format!("{how} ({} out, {} in)", p.kind, s.kind)
            }
            (Some(p), _) | (None, Some(p)) => format!("{how} ({})", p.kind),
        }
    }
}
