//! Voice in a session, without any audio device: the session publishes the microphone
//! track the caller feeds (outpost-livekit encodes it), hands the assistant's decoded
//! audio tracks to the caller, tells when a published track was lost (a full rejoin: the
//! caller publishes again), and remembers which tracks are ours so transcriptions of them
//! (`lk.transcribed_track_id`) are shown as the user's speech. The devices live in
//! `outpost-audio`; the desktop app joins the two (`outpost-desktop::voice`).

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
    /// The server muted one of our tracks (the room's operator): it sends nothing until
    /// the user unmutes it.
    LocalTrackMutedByServer {
        /// The track's sid.
        sid: String,
    },
}

/// Tells whether a track of ours is still published.
type Published = Arc<dyn Fn() -> bool + Send + Sync>;

/// The tracks this session publishes now (shared with the transcript readers): a
/// transcription names one of them to be the user's speech. A track that is no longer
/// published (voice turned off, the microphone published again after a rejoin) is
/// forgotten, so its id no longer makes anything the user's words.
#[derive(Clone, Default)]
pub struct LocalTracks(Arc<Mutex<Vec<(String, Published)>>>);

impl std::fmt::Debug for LocalTracks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sids: Vec<String> = self.lock().iter().map(|(s, _)| s.clone()).collect();
        f.debug_tuple("LocalTracks").field(&sids).finish()
    }
}

impl LocalTracks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Published)>> {
        outpost_sync::lock(&self.0)
    }

    /// Whether `sid` is one of ours, published now.
    pub fn contains(&self, sid: &str) -> bool {
        let mut tracks = self.lock();
        tracks.retain(|(_, published)| published());
        tracks.iter().any(|(s, _)| s == sid)
    }

    /// Remembers our track `sid` while `published` says it is.
    pub(crate) fn insert(&self, sid: &str, published: impl Fn() -> bool + Send + Sync + 'static) {
        let mut tracks = self.lock();
        tracks.retain(|(_, p)| p());
        tracks.push((sid.to_owned(), Arc::new(published)));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Issue 30 ("also to check"): the ids of our tracks were never forgotten, so after
    /// voice was turned off a transcription naming the old microphone still passed for
    /// the user's words.
    #[test]
    fn a_track_no_longer_published_is_forgotten() {
        let tracks = LocalTracks::default();
        let on = Arc::new(AtomicBool::new(true));
        let flag = on.clone();
        tracks.insert("TR_mic", move || flag.load(Ordering::SeqCst));
        assert!(tracks.contains("TR_mic"));
        assert!(!tracks.contains("TR_other"));
        on.store(false, Ordering::SeqCst);
        assert!(!tracks.contains("TR_mic"));
        assert!(tracks.lock().is_empty(), "pruned");
    }
}
