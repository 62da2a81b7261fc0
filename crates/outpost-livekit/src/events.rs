//! What happens in the room, as the application hears it: [`RoomEvent`]. Beside the
//! plain values of [`crate::types`] it carries what is read as it arrives (a data
//! stream's reader, a remote track's audio).

use std::collections::HashMap;

use crate::audio::AudioStream;
use crate::streams::StreamReader;
use crate::types::{DataMessage, DisconnectReason, Participant, TrackInfo};

/// Something that happened in the room. Delivered in order on the event channel.
#[derive(Debug)]
#[non_exhaustive]
pub enum RoomEvent {
    /// A participant joined (or was already there when we rejoined and is new to us).
    ParticipantJoined(Participant),
    /// A participant left.
    ParticipantLeft(Participant),
    /// The assistant (see [`crate::RoomOptions::assistant_identity`]) is in the room.
    AssistantJoined(Participant),
    /// The assistant left.
    AssistantLeft(Participant),
    /// A participant's attributes changed (another participant's, or ours once the
    /// server confirmed it). [`Participant::attributes`] holds all of them now.
    ParticipantAttributesChanged {
        /// The participant, as it is now.
        participant: Participant,
        /// The keys that changed with their new values; a removed key has `""`.
        changed: HashMap<String, String>,
    },
    /// A participant's metadata changed.
    ParticipantMetadataChanged {
        /// The participant, as it is now.
        participant: Participant,
        /// The metadata before.
        old_metadata: String,
    },
    /// A participant's display name changed.
    ParticipantNameChanged {
        /// The participant, as it is now.
        participant: Participant,
        /// The name before.
        old_name: String,
    },
    /// A user data packet arrived.
    Data(DataMessage),
    /// Another participant opened a data stream to us; read it from the reader.
    StreamOpened(StreamReader),
    /// The link was lost; the client is resuming or rejoining. Sends are queued.
    Reconnecting {
        /// What was lost.
        reason: String,
    },
    /// The link is back. `resumed` is true when the session was resumed (same sid),
    /// false after a full rejoin (new sid, participants re-announced).
    Reconnected {
        /// Whether the session was resumed rather than rejoined.
        resumed: bool,
    },
    /// A remote participant published a track (or had it when we joined).
    TrackPublished {
        /// Whose.
        participant: Participant,
        /// The track.
        track: TrackInfo,
    },
    /// A remote participant's track is gone (unpublished, or the participant left).
    TrackUnpublished {
        /// Whose.
        participant: Participant,
        /// The track as it was.
        track: TrackInfo,
    },
    /// A remote participant muted or unmuted a track.
    TrackMuted {
        /// Whose.
        participant: Participant,
        /// The track, as it is now.
        track: TrackInfo,
    },
    /// Audio of a remote track arrives: read decoded PCM from `stream`. Dropping the
    /// stream drops the audio (the track stays subscribed).
    AudioTrackSubscribed {
        /// Whose: a participant a participant update named as the track's publisher.
        /// Audio that arrives before that update is held until it comes; audio whose
        /// publisher is never named (a hidden participant's) is never reported.
        participant: Participant,
        /// The track sid.
        track_sid: String,
        /// Decoded 48 kHz mono audio.
        stream: AudioStream,
    },
    /// One of our tracks stopped being published without [`crate::LocalAudioTrack::unpublish`]:
    /// after a full rejoin the new connection does not carry it (publish again), or the
    /// server unpublished it (`by_server`: our permission to publish was taken away, or
    /// the room's operator removed it; publishing again is refused while that lasts).
    LocalTrackUnpublished {
        /// The track's sid.
        sid: String,
        /// The server unpublished it (rather than a rejoin dropping it).
        by_server: bool,
    },
    /// The server muted one of our tracks (the room's operator, through its API): it is
    /// muted here too ([`crate::LocalAudioTrack::is_muted`]), so nothing of it is sent
    /// until it is unmuted. The server asking to unmute one is never followed: a
    /// microphone is unmuted only by its user (the server is told it stays muted).
    LocalTrackMutedByServer {
        /// The track's sid.
        sid: String,
    },
    /// The server changed what we may do in the room (our `ParticipantPermission`).
    LocalPermissionsChanged {
        /// We may publish tracks.
        can_publish: bool,
        /// We may send data (packets, streams, RPC): without it the server drops what
        /// we send.
        can_publish_data: bool,
        /// We may subscribe to tracks.
        can_subscribe: bool,
    },
    /// A participant other than the assistant called one of our RPC methods and was
    /// refused before anything of its payload was read (only with
    /// [`crate::RpcCallers::Assistant`]). One event per refused call; the answers to a caller
    /// that keeps calling are rate-limited, the events are not, so a consumer can count.
    RpcRefused {
        /// Who called (stamped by the server).
        caller: String,
        /// The method it called, cut to [`crate::rpc::MAX_REFUSED_METHOD_BYTES`].
        method: String,
    },
    /// The connection is closed for good.
    Disconnected {
        /// Why.
        reason: DisconnectReason,
    },
}
