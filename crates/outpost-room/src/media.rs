//! Published audio tracks and the forwarding of their RTP, like a small SFU.
//!
//! A participant's `AddTrackRequest` becomes a pending [`TrackInfo`] (answered with
//! `TrackPublishedResponse`); when the publisher's next offer carries its media section
//! (before any of its audio, as livekit-server does), the session makes it a
//! [`PublishedTrack`], which the room announces in the participant's
//! `ParticipantInfo.tracks` and offers to every other participant; its packets are
//! forwarded from the first one that arrives. Each
//! subscriber session adds a local track per published track to its subscriber
//! connection (server-side renegotiation) and runs one [`forward`] task that copies
//! packets from the track's broadcast queue onto it.
//!
//! The publisher never waits for a subscriber: the queue holds about a second of
//! audio, and a subscriber that falls further behind skips ahead (the receiver's
//! jitter buffer conceals the gap). A new subscription starts at the newest packet,
//! and a subscriber more than [`MAX_BEHIND`] packets behind skips the older ones:
//! packets are never sent in a late burst (a receiver would play them out late or
//! time-compress them). Only Opus audio is accepted; video publications
//! are refused (`RequestResponse` UNSUPPORTED_TYPE) and video sections of an offer are
//! rejected.

use std::sync::{Arc, Mutex};

use outpost_webrtc::{LocalAudioTrack, Rewriter, RtpPacket};
use tokio::sync::broadcast;

use crate::proto::{AddTrackRequest, TrackInfo, TrackSource, TrackType, request_response};
use outpost_sync::lock;

/// Packets queued per published track for its subscribers (50 × 20 ms = 1 s).
pub const FORWARD_QUEUE: usize = 50;

/// Most packets a subscriber's forwarding may be behind its publisher before older
/// ones are skipped (25 × 20 ms): a stall of the server shorter than that is still
/// delivered, late, for the receiver's jitter buffer to absorb; a longer one would
/// only add delay. (10 was tried: on this shared machine under load ~35 the
/// forwarding tasks were starved for longer and skipping turned that delay into loss.)
pub const MAX_BEHIND: usize = 25;

/// Tracks a participant may have announced but not yet sent media for.
pub const MAX_PENDING_TRACKS: usize = 8;

/// The message a client gets when it tries to publish video.
pub const VIDEO_REFUSED: &str =
    "outpost-room forwards audio only; video tracks are not supported (see docs/ROOM.md)";

/// A track a participant publishes and the room forwards.
#[derive(Debug)]
pub struct PublishedTrack {
    /// `TR_…` id.
    pub sid: String,
    /// The client's id for it (`AddTrackRequest.cid`).
    pub cid: String,
    /// The track id of its `a=msid` on the publisher connection (the SDKs use the
    /// cid); a renegotiated offer that stops sending it unpublishes the track.
    pub media_id: String,
    /// The publisher's participant sid.
    pub publisher_sid: String,
    info: Mutex<TrackInfo>,
    packets: broadcast::Sender<RtpPacket>,
    /// Set when the first subscriber subscribed (the publisher was told).
    had_subscriber: std::sync::atomic::AtomicBool,
}

impl PublishedTrack {
    /// A track of publisher `publisher_sid` described by `info` (with its sid).
    pub fn new(publisher_sid: &str, cid: &str, media_id: &str, info: TrackInfo) -> Arc<Self> {
        let (packets, _) = broadcast::channel(FORWARD_QUEUE);
        Arc::new(Self {
            sid: info.sid.clone(),
            cid: cid.to_owned(),
            media_id: media_id.to_owned(),
            publisher_sid: publisher_sid.to_owned(),
            info: Mutex::new(info),
            packets,
            had_subscriber: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// True the first time it is called: the track's first subscription.
    pub fn first_subscription(&self) -> bool {
        !self
            .had_subscriber
            .swap(true, std::sync::atomic::Ordering::Relaxed)
    }

    /// The `TrackInfo` participants see.
    pub fn info(&self) -> TrackInfo {
        lock(&self.info).clone()
    }

    /// Sets the muted flag; true when it changed.
    pub fn set_muted(&self, muted: bool) -> bool {
        let mut info = lock(&self.info);
        let changed = info.muted != muted;
        info.muted = muted;
        changed
    }

    /// The `a=msid` stream id subscribers get: `<participant sid>|<track sid>`, which
    /// is how LiveKit's SDKs tell whose track arrived.
    pub fn stream_id(&self) -> String {
        format!("{}|{}", self.publisher_sid, self.sid)
    }

    /// Hands a packet to every subscriber (dropped when there is none).
    pub fn forward(&self, packet: RtpPacket) {
        let _ = self.packets.send(packet);
    }

    /// A queue of the packets forwarded from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<RtpPacket> {
        self.packets.subscribe()
    }
}

/// The `TrackInfo` for a client's `AddTrackRequest`, with a fresh sid, or why it is
/// refused.
pub fn track_info_for(
    req: &AddTrackRequest,
    sid: String,
    can_publish: bool,
) -> Result<TrackInfo, (request_response::Reason, &'static str)> {
    use request_response::Reason;
    if !can_publish {
        return Err((Reason::NotAllowed, "does not have permission to publish"));
    }
    if req.r#type != TrackType::Audio as i32 {
        return Err((Reason::UnsupportedType, VIDEO_REFUSED));
    }
    if req.cid.is_empty() {
        return Err((Reason::InvalidRequest, "AddTrackRequest without a cid"));
    }
    let source = TrackSource::try_from(req.source).unwrap_or(TrackSource::Unknown);
    Ok(TrackInfo {
        sid,
        r#type: TrackType::Audio as i32,
        name: req.name.clone(),
        muted: req.muted,
        source: source as i32,
        mime_type: outpost_webrtc::media::OPUS_MIME.to_owned(),
        // RED is not negotiated here: the answer keeps Opus only.
        disable_red: true,
        encryption: req.encryption,
        stream: req.stream.clone(),
        audio_features: req.audio_features.clone(),
        ..Default::default()
    })
}

/// Copies a published track's packets onto a subscriber's local track, once `may_send`
/// says so (the subscriber's answer bound the track and its connection is up), until
/// the track is unpublished (the queue closes) or the task is aborted (unsubscribe). A
/// subscriber that lags skips the packets it missed.
pub async fn forward(
    mut rx: broadcast::Receiver<RtpPacket>,
    local: LocalAudioTrack,
    mut may_send: tokio::sync::watch::Receiver<bool>,
    track_sid: String,
) {
    // Every field spelled out: `..ForwardStats::default()` would make (and drop, so
    // log) a second, empty record.
    let mut stats = ForwardStats {
        track_sid,
        sent: 0,
        failed: 0,
        skipped: 0,
        stale: 0,
    };
    // What is queued meanwhile is skipped (Lagged) rather than sent late.
    if may_send.wait_for(|go| *go).await.is_err() {
        return;
    }
    let mut rewriter = Rewriter::new();
    loop {
        match rx.recv().await {
            Ok(packet) => {
                // Stale packets are skipped, never sent late in a burst: before the
                // first one goes out, everything queued while the subscription was
                // set up (up to the queue's second: a receiver would take it as a
                // second of backlog and play it out late, or time-compress it); later,
                // whatever is more than MAX_BEHIND packets behind the publisher.
                let behind = rx.len();
                if (stats.sent == 0 && behind > 0) || behind > MAX_BEHIND {
                    stats.stale += 1;
                    continue;
                }
                let packet = rewriter.rewrite(packet);
                // Fails once the connection has closed.
                match local.write(&packet).await {
                    Ok(()) => stats.sent += 1,
                    Err(e) => {
                        stats.failed += 1;
                        if stats.failed == 1 {
                            tracing::debug!(track = %stats.track_sid, "forwarded packet not sent: {e}");
                        }
                    }
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                // Counted only once the connection is up: before, skipping is the point.
                if stats.sent > 0 {
                    stats.skipped += n;
                }
            }
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}

/// What one forwarding task did, logged when it ends (also when aborted).
#[derive(Debug)]
struct ForwardStats {
    track_sid: String,
    sent: u64,
    failed: u64,
    skipped: u64,
    /// Packets passed over because newer ones were queued behind them.
    stale: u64,
}

impl Drop for ForwardStats {
    fn drop(&mut self) {
        if self.skipped > 0 {
            tracing::info!(track = %self.track_sid, sent = self.sent, not_sent = self.failed, skipped = self.skipped, stale = self.stale, "forwarding ended; the subscriber lagged");
        } else if self.sent == 0 || self.failed > 0 {
            // Worth seeing in a test's log: a subscriber that was sent nothing, or
            // packets the connection refused.
            tracing::info!(track = %self.track_sid, sent = self.sent, not_sent = self.failed, stale = self.stale, "forwarding ended");
        } else {
            tracing::debug!(track = %self.track_sid, sent = self.sent, not_sent = self.failed, stale = self.stale, "forwarding ended");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn req(kind: TrackType) -> AddTrackRequest {
        AddTrackRequest {
            cid: "TR_local".into(),
            name: "mic".into(),
            r#type: kind as i32,
            source: TrackSource::Microphone as i32,
            ..Default::default()
        }
    }

    #[test]
    fn audio_is_accepted_with_the_opus_mime_type() {
        let info = track_info_for(&req(TrackType::Audio), "TR_x".into(), true).unwrap();
        assert_eq!(info.sid, "TR_x");
        assert_eq!(info.r#type, TrackType::Audio as i32);
        assert_eq!(info.source, TrackSource::Microphone as i32);
        assert_eq!(info.mime_type, "audio/opus");
        assert_eq!(info.name, "mic");
    }

    #[test]
    fn video_and_missing_rights_are_refused_with_a_reason() {
        let (reason, msg) =
            track_info_for(&req(TrackType::Video), "TR_x".into(), true).unwrap_err();
        assert_eq!(reason, request_response::Reason::UnsupportedType);
        assert!(msg.contains("audio only"));
        let (reason, _) = track_info_for(&req(TrackType::Audio), "TR_x".into(), false).unwrap_err();
        assert_eq!(reason, request_response::Reason::NotAllowed);
        let mut no_cid = req(TrackType::Audio);
        no_cid.cid.clear();
        let (reason, _) = track_info_for(&no_cid, "TR_x".into(), true).unwrap_err();
        assert_eq!(reason, request_response::Reason::InvalidRequest);
        // An unknown type number is not audio either.
        let mut odd = req(TrackType::Audio);
        odd.r#type = 99;
        assert!(track_info_for(&odd, "TR_x".into(), true).is_err());
    }

    #[test]
    fn the_stream_id_names_publisher_and_track() {
        let t = PublishedTrack::new(
            "PA_p",
            "c",
            "c",
            TrackInfo {
                sid: "TR_t".into(),
                ..Default::default()
            },
        );
        assert_eq!(t.stream_id(), "PA_p|TR_t");
        assert!(t.set_muted(true));
        assert!(!t.set_muted(true));
        assert!(t.info().muted);
    }
}
