//! Voice in a session, without any audio device: the session publishes the microphone
//! track the caller feeds (outpost-livekit encodes it), hands the assistant's decoded
//! audio tracks to the caller, tells when a published track was lost (a full rejoin: the
//! caller publishes again), and remembers which tracks are ours so transcriptions of them
//! (`lk.transcribed_track_id`) are shown as the user's speech. The devices live in
//! `outpost-audio`; the desktop app joins the two (`outpost-desktop::voice`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use outpost_livekit::AudioStream;

/// What a voice caller hears from the session.
#[derive(Debug)]
#[non_exhaustive]
pub enum VoiceEvent {
    /// The assistant's audio track arrived: 48 kHz mono PCM frames. The stream ends
    /// when the track does.
    AssistantAudio {
        /// The track's sid.
        track_sid: String,
        /// Its decoded audio.
        stream: AudioStream,
    },
    /// One of our published tracks is no longer sent: after a full rejoin (publish the
    /// microphone again), or because the server unpublished it (`by_server`: publishing
    /// again is refused while our permission is gone).
    LocalTrackLost {
        /// The lost track's sid.
        sid: String,
        /// The server unpublished it.
        by_server: bool,
    },
}

/// The sids of the tracks this session published (shared with the transcript readers).
#[derive(Debug, Clone, Default)]
pub struct LocalTracks(Arc<Mutex<HashSet<String>>>);

impl LocalTracks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `sid` is one of ours.
    pub fn contains(&self, sid: &str) -> bool {
        self.lock().contains(sid)
    }

    pub(crate) fn insert(&self, sid: &str) {
        self.lock().insert(sid.to_owned());
    }
}
