//! What the room handle and its engine share: the state the handle reads and the
//! engine writes ([`Shared`]: the send queue, the roster, the connection state and
//! path) and the commands the handle sends the engine ([`Command`]). It knows neither
//! the engine nor the RPC layer; both work over it.

use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, watch};

use crate::attributes::ProfileUpdate;
use crate::audio::{LocalShared, TrackRequest};
use crate::error::Result;
use crate::outbox::Outbox;
use crate::types::{ConnectionPath, ConnectionState, Participant};
use crate::wire::Channel;

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
    /// What one of our published tracks asks (mute, unpublish).
    Track(TrackRequest),
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
    /// The path ICE selected, read each time the link comes up.
    pub path: Mutex<ConnectionPath>,
}

#[cfg(test)]
impl Shared {
    /// A connected room whose local participant is `me` (sid `PA_me`), for unit tests.
    pub(crate) fn for_tests() -> Arc<Self> {
        let shared = Self::new(ConnectionState::Connected);
        shared.roster().local = Some(Participant {
            sid: "PA_me".into(),
            identity: "me".into(),
            name: String::new(),
            kind: crate::types::ParticipantKind::Standard,
            metadata: String::new(),
            attributes: std::collections::HashMap::new(),
            client_protocol: 0,
        });
        shared
    }
}

impl Shared {
    /// A room in `state` with an empty send queue and roster.
    pub(crate) fn new(state: ConnectionState) -> Arc<Self> {
        Arc::new(Self {
            outbox: Arc::new(Outbox::default()),
            state: watch::channel(state).0,
            roster: Mutex::default(),
            lossy: Mutex::default(),
            path: Mutex::default(),
        })
    }

    pub(crate) fn roster(&self) -> std::sync::MutexGuard<'_, Roster> {
        outpost_sync::lock(&self.roster)
    }

    /// The assistant's identity, while one is in the room.
    pub(crate) fn assistant_identity(&self) -> Option<String> {
        self.roster().assistant.as_ref().map(|a| a.identity.clone())
    }

    pub(crate) fn lossy(&self) -> Option<Channel> {
        outpost_sync::lock(&self.lossy).clone()
    }

    pub(crate) fn set_lossy(&self, ch: Option<Channel>) {
        *outpost_sync::lock(&self.lossy) = ch;
    }
}
