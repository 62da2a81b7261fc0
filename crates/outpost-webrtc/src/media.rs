//! Audio tracks: the one codec we negotiate (Opus), remote tracks we read RTP from,
//! local tracks we write RTP to, and the rewrite that lets one stream of packets be
//! forwarded onto another sender (`outpost-room`'s forwarding).
//!
//! Only audio exists here. A peer built with [`crate::PeerConfig::audio`] negotiates
//! Opus (48 kHz, stereo in SDP as RFC 7587 requires, in-band FEC); without a video codec
//! registered, `webrtc` rejects video sections (port 0) in its answers.
//!
//! The rest of the workspace sees [`RtpPacket`], a plain copy of what matters in an
//! RTP packet, never `webrtc`'s types.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use bytes::Bytes;
use rtc::media_stream::MediaStreamTrack;
use rtc::peer_connection::configuration::media_engine::{MIME_TYPE_OPUS, MediaEngine};
use rtc::rtp_transceiver::rtp_sender::{
    RTCRtpCodec, RTCRtpCodecParameters, RTCRtpCodingParameters, RTCRtpEncodingParameters,
    RTCRtpHeaderExtensionCapability, RtpCodecKind,
};
use webrtc::media_stream::track_local::TrackLocal;
use webrtc::media_stream::track_local::static_rtp::TrackLocalStaticRTP;
use webrtc::media_stream::track_remote::{TrackRemote, TrackRemoteEvent};
use webrtc::rtp_transceiver::RtpSender;

use crate::error::{Error, Result};

/// The payload type our offers give Opus (libwebrtc's choice too).
pub const OPUS_PAYLOAD_TYPE: u8 = 111;
/// Opus's RTP clock rate.
pub const OPUS_CLOCK_RATE: u32 = 48_000;
/// The MIME type LiveKit's `TrackInfo.mime_type` carries for Opus.
pub const OPUS_MIME: &str = "audio/opus";

/// What kind of media a remote track carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    /// Audio.
    Audio,
    /// Video (never negotiated here, reported so callers can say so).
    Video,
}

/// One RTP packet, as much of it as forwarding needs. Header extensions are not kept:
/// their ids belong to the connection they arrived on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtpPacket {
    /// RTP payload type.
    pub payload_type: u8,
    /// Sequence number.
    pub sequence_number: u16,
    /// RTP timestamp (48 kHz for Opus).
    pub timestamp: u32,
    /// Synchronization source.
    pub ssrc: u32,
    /// Marker bit (start of a talk spurt for audio).
    pub marker: bool,
    /// The payload (one Opus packet).
    pub payload: Bytes,
    /// The sound level of what the packet carries, in -dBov (0 is the loudest, 127
    /// silence), sent in RFC 6464's audio-level header extension when the other side
    /// negotiated it: what a LiveKit server computes active speakers from. `None`
    /// sends no extension; packets received do not report it.
    pub audio_level: Option<u8>,
}

impl RtpPacket {
    fn from_rtp(p: rtc::rtp::Packet) -> Self {
        Self {
            payload_type: p.header.payload_type,
            sequence_number: p.header.sequence_number,
            timestamp: p.header.timestamp,
            ssrc: p.header.ssrc,
            marker: p.header.marker,
            payload: p.payload,
            audio_level: None,
        }
    }

    fn to_rtp(&self) -> rtc::rtp::Packet {
        rtc::rtp::Packet {
            header: rtc::rtp::header::Header {
                version: 2,
                marker: self.marker,
                payload_type: self.payload_type,
                sequence_number: self.sequence_number,
                timestamp: self.timestamp,
                ssrc: self.ssrc,
                ..Default::default()
            },
            payload: self.payload.clone(),
        }
    }
}

/// One media section that sends: its kind (`audio`, `video`, …) and the track id of
/// its `a=msid:<stream> <track>` (if any).
fn sending_sections(sdp: &str) -> Vec<(String, Option<String>)> {
    struct Section {
        kind: String,
        live: bool,
        sends: bool,
        track: Option<String>,
    }
    let mut sections: Vec<Section> = Vec::new();
    for line in sdp.lines() {
        let line = line.trim_end();
        if let Some(m) = line.strip_prefix("m=") {
            let mut parts = m.split_whitespace();
            let kind = parts.next().unwrap_or_default().to_owned();
            let live = parts.next().is_some_and(|port| port != "0");
            sections.push(Section {
                kind,
                live,
                // sendrecv is the default direction.
                sends: true,
                track: None,
            });
        } else if let Some(s) = sections.last_mut() {
            match line {
                "a=recvonly" | "a=inactive" => s.sends = false,
                "a=sendrecv" | "a=sendonly" => s.sends = true,
                _ => {
                    if let Some(t) = line
                        .strip_prefix("a=msid:")
                        .and_then(|msid| msid.split_whitespace().nth(1))
                    {
                        s.track = Some(t.to_owned());
                    }
                }
            }
        }
    }
    sections
        .into_iter()
        .filter(|s| s.live && s.sends && s.kind != "application")
        .map(|s| (s.kind, s.track))
        .collect()
}

/// The track ids (from `a=msid:<stream> <track>`) of the audio sections of an SDP that
/// send media: not rejected (port 0) and `sendrecv` or `sendonly` (the default when
/// no direction is given). A publisher's renegotiated offer that no longer lists a
/// track has stopped sending it.
pub fn sending_track_ids(sdp: &str) -> Vec<String> {
    sending_sections(sdp)
        .into_iter()
        .filter(|(kind, _)| kind == "audio")
        .filter_map(|(_, track)| track)
        .collect()
}

/// Whether an SDP sends video: a video section that is not rejected and not
/// `recvonly` / `inactive`.
pub fn sends_video(sdp: &str) -> bool {
    sending_sections(sdp)
        .iter()
        .any(|(kind, _)| kind == "video")
}

/// The media engine of a peer that carries audio: Opus only.
pub(crate) fn audio_media_engine() -> Result<MediaEngine> {
    let mut engine = MediaEngine::default();
    engine
        .register_codec(
            RTCRtpCodecParameters {
                rtp_codec: opus_codec(),
                payload_type: OPUS_PAYLOAD_TYPE,
            },
            RtpCodecKind::Audio,
        )
        .map_err(|e| Error::Webrtc(format!("register Opus: {e}")))?;
    engine
        .register_header_extension(
            RTCRtpHeaderExtensionCapability {
                uri: AUDIO_LEVEL_URI.to_owned(),
            },
            RtpCodecKind::Audio,
            None,
        )
        .map_err(|e| Error::Webrtc(format!("register the audio level extension: {e}")))?;
    Ok(engine)
}

/// RFC 6464's audio level header extension (client to mixer).
pub(crate) const AUDIO_LEVEL_URI: &str = "urn:ietf:params:rtp-hdrext:ssrc-audio-level";

/// The id `sdp` gives the audio level extension (`a=extmap:<id>[/dir] <uri>`), if it
/// negotiated one that fits the one-byte header form (1–14).
pub(crate) fn audio_level_id(sdp: &str) -> Option<u8> {
    sdp.lines().find_map(|line| {
        let rest = line.trim_end().strip_prefix("a=extmap:")?;
        let (id, rest) = rest.split_once(' ')?;
        let uri = rest.split_whitespace().next()?;
        let id: u8 = id.split('/').next()?.parse().ok()?;
        (uri == AUDIO_LEVEL_URI && (1..=14).contains(&id)).then_some(id)
    })
}

fn opus_codec() -> RTCRtpCodec {
    RTCRtpCodec {
        mime_type: MIME_TYPE_OPUS.to_owned(),
        clock_rate: OPUS_CLOCK_RATE,
        channels: 2,
        sdp_fmtp_line: "minptime=10;useinbandfec=1".to_owned(),
        rtcp_feedback: Vec::new(),
    }
}

/// A fresh, non-zero SSRC.
fn new_ssrc() -> u32 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let v = (h.finish() & 0xffff_ffff) as u32;
    v.max(1)
}

/// A track the other side sends us. Read its packets with [`RemoteTrack::recv`].
#[derive(Clone)]
pub struct RemoteTrack {
    inner: Arc<dyn TrackRemote>,
    kind: MediaKind,
    track_id: String,
    stream_id: String,
}

impl std::fmt::Debug for RemoteTrack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTrack")
            .field("kind", &self.kind)
            .field("track_id", &self.track_id)
            .field("stream_id", &self.stream_id)
            .finish()
    }
}

impl RemoteTrack {
    pub(crate) async fn new(inner: Arc<dyn TrackRemote>) -> Self {
        let kind = match inner.kind().await {
            RtpCodecKind::Video => MediaKind::Video,
            _ => MediaKind::Audio,
        };
        let track_id = inner.track_id().await;
        let stream_id = inner.stream_id().await;
        Self {
            inner,
            kind,
            track_id,
            stream_id,
        }
    }

    /// Audio or video.
    pub fn kind(&self) -> MediaKind {
        self.kind
    }

    /// The track id of the sender's `a=msid` (LiveKit's SDKs put the client track id,
    /// `AddTrackRequest.cid`, there).
    pub fn track_id(&self) -> &str {
        &self.track_id
    }

    /// The stream id of the sender's `a=msid`.
    pub fn stream_id(&self) -> &str {
        &self.stream_id
    }

    /// The next RTP packet; `None` once the track has ended (the sender removed it, or
    /// the connection closed).
    pub async fn recv(&self) -> Option<RtpPacket> {
        loop {
            match self.inner.poll().await? {
                TrackRemoteEvent::OnRtpPacket(p) => return Some(RtpPacket::from_rtp(p)),
                TrackRemoteEvent::OnEnded => return None,
                other => tracing::trace!(track = %self.track_id, "remote track event {other:?}"),
            }
        }
    }
}

/// An audio track we send: packets written to it go out with its own SSRC and the
/// Opus payload type, once the connection has negotiated it.
#[derive(Clone)]
pub struct LocalAudioTrack {
    track: Arc<TrackLocalStaticRTP>,
    pub(crate) sender: Arc<dyn RtpSender>,
    ssrc: u32,
    /// The audio level extension's negotiated id on this connection (0: none yet).
    level_id: Arc<AtomicU8>,
}

impl std::fmt::Debug for LocalAudioTrack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalAudioTrack")
            .field("ssrc", &self.ssrc)
            .finish_non_exhaustive()
    }
}

impl LocalAudioTrack {
    /// A new local track named `stream_id` / `track_id` in the SDP's `a=msid`, not yet
    /// on a connection.
    pub(crate) fn build(stream_id: &str, track_id: &str) -> (Arc<TrackLocalStaticRTP>, u32) {
        let ssrc = new_ssrc();
        let track = MediaStreamTrack::new(
            stream_id.to_owned(),
            track_id.to_owned(),
            track_id.to_owned(),
            RtpCodecKind::Audio,
            vec![RTCRtpEncodingParameters {
                rtp_coding_parameters: RTCRtpCodingParameters {
                    ssrc: Some(ssrc),
                    ..Default::default()
                },
                active: true,
                codec: opus_codec(),
                ..Default::default()
            }],
        );
        (Arc::new(TrackLocalStaticRTP::new(track)), ssrc)
    }

    pub(crate) fn new(
        track: Arc<TrackLocalStaticRTP>,
        sender: Arc<dyn RtpSender>,
        ssrc: u32,
        level_id: Arc<AtomicU8>,
    ) -> Self {
        Self {
            track,
            sender,
            ssrc,
            level_id,
        }
    }

    /// The SSRC packets go out with.
    pub fn ssrc(&self) -> u32 {
        self.ssrc
    }

    /// Sends one packet: its SSRC and payload type are replaced by ours; sequence
    /// number and timestamp are sent as given (see [`Rewriter`]). Fails while the
    /// track is not negotiated yet, and after the connection closed.
    pub async fn write(&self, packet: &RtpPacket) -> Result<()> {
        let mut p = packet.to_rtp();
        p.header.ssrc = self.ssrc;
        p.header.payload_type = OPUS_PAYLOAD_TYPE;
        let id = self.level_id.load(Ordering::Relaxed);
        if let (Some(level), 1..=14) = (packet.audio_level, id) {
            p.header.extension = true;
            p.header.extension_profile = rtc::rtp::header::EXTENSION_PROFILE_ONE_BYTE;
            // The V bit (voice activity) is left clear: the level alone is what
            // servers read.
            p.header
                .set_extension(id, Bytes::copy_from_slice(&[level.min(127)]))
                .map_err(|e| Error::Webrtc(format!("audio level extension: {e}")))?;
        }
        self.track
            .write_rtp(p)
            .await
            .map_err(|e| Error::Webrtc(format!("write RTP: {e}")))
    }
}

/// Rewrites the sequence numbers and timestamps of one forwarded stream so the
/// receiver sees one continuous stream: the first packet keeps its numbers, and when
/// the source changes (a new SSRC: the publisher renegotiated or restarted its
/// sender), numbering continues from the last packet sent instead of jumping. Gaps
/// in the source (lost packets) stay gaps, so the receiver's jitter buffer can conceal
/// them.
#[derive(Debug, Default, Clone)]
pub struct Rewriter {
    state: Option<RewriteState>,
}

#[derive(Debug, Clone, Copy)]
struct RewriteState {
    source_ssrc: u32,
    seq_offset: u16,
    ts_offset: u32,
    last_seq: u16,
    last_ts: u32,
}

/// 20 ms at 48 kHz: the timestamp step assumed across a source change.
const FRAME_TICKS: u32 = 960;

impl Rewriter {
    /// A rewriter that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The packet as it is to be sent.
    pub fn rewrite(&mut self, mut packet: RtpPacket) -> RtpPacket {
        let state = match self.state {
            Some(s) if s.source_ssrc == packet.ssrc => s,
            Some(s) => RewriteState {
                source_ssrc: packet.ssrc,
                seq_offset: s
                    .last_seq
                    .wrapping_add(1)
                    .wrapping_sub(packet.sequence_number),
                ts_offset: s
                    .last_ts
                    .wrapping_add(FRAME_TICKS)
                    .wrapping_sub(packet.timestamp),
                ..s
            },
            None => RewriteState {
                source_ssrc: packet.ssrc,
                seq_offset: 0,
                ts_offset: 0,
                last_seq: packet.sequence_number,
                last_ts: packet.timestamp,
            },
        };
        packet.sequence_number = packet.sequence_number.wrapping_add(state.seq_offset);
        packet.timestamp = packet.timestamp.wrapping_add(state.ts_offset);
        // Remember the newest packet (by sequence, allowing for wrap-around), not a
        // late one that arrived out of order.
        let newer = packet.sequence_number.wrapping_sub(state.last_seq) < 0x8000;
        self.state = Some(RewriteState {
            last_seq: if newer {
                packet.sequence_number
            } else {
                state.last_seq
            },
            last_ts: if newer {
                packet.timestamp
            } else {
                state.last_ts
            },
            ..state
        });
        packet
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn pkt(ssrc: u32, seq: u16, ts: u32) -> RtpPacket {
        RtpPacket {
            payload_type: 96,
            sequence_number: seq,
            timestamp: ts,
            ssrc,
            marker: false,
            payload: Bytes::from_static(b"x"),
            audio_level: None,
        }
    }

    #[test]
    fn the_audio_level_id_is_read_from_the_answer() {
        let sdp = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=extmap:2 urn:ietf:params:rtp-hdrext:sdes:mid\r\na=extmap:1/sendrecv urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n";
        assert_eq!(audio_level_id(sdp), Some(1));
        assert_eq!(
            audio_level_id("a=extmap:3 urn:ietf:params:rtp-hdrext:ssrc-audio-level vad=on\n"),
            Some(3)
        );
        // Not negotiated, or an id the one-byte form cannot carry.
        assert_eq!(
            audio_level_id("a=extmap:2 urn:ietf:params:rtp-hdrext:sdes:mid\r\n"),
            None
        );
        assert_eq!(
            audio_level_id("a=extmap:15 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n"),
            None
        );
    }

    #[test]
    fn one_source_passes_unchanged_with_its_gaps() {
        let mut r = Rewriter::new();
        for (seq, ts) in [(10u16, 1000u32), (11, 1960), (13, 3880)] {
            let out = r.rewrite(pkt(7, seq, ts));
            assert_eq!((out.sequence_number, out.timestamp), (seq, ts));
        }
    }

    #[test]
    fn a_new_source_continues_the_numbering() {
        let mut r = Rewriter::new();
        r.rewrite(pkt(1, 100, 5000));
        r.rewrite(pkt(1, 101, 5960));
        let out = r.rewrite(pkt(2, 40_000, 9));
        assert_eq!(out.sequence_number, 102);
        assert_eq!(out.timestamp, 5960 + 960);
        let out = r.rewrite(pkt(2, 40_001, 969));
        assert_eq!(out.sequence_number, 103);
        assert_eq!(out.timestamp, 5960 + 1920);
    }

    #[test]
    fn wrap_around_and_reordering_keep_the_newest_as_reference() {
        let mut r = Rewriter::new();
        r.rewrite(pkt(1, 65_535, u32::MAX - 100));
        r.rewrite(pkt(1, 0, 859));
        // A late packet from before the wrap does not become the reference.
        let late = r.rewrite(pkt(1, 65_534, u32::MAX - 1060));
        assert_eq!(late.sequence_number, 65_534);
        let out = r.rewrite(pkt(9, 5, 5));
        assert_eq!(out.sequence_number, 1);
        assert_eq!(out.timestamp, 859 + 960);
    }

    #[test]
    fn sending_tracks_are_read_from_live_audio_sections() {
        let sdp = "v=0\r\n\
m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\na=sendonly\r\na=msid:s TR_a\r\n\
m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:1\r\na=recvonly\r\na=msid:s TR_b\r\n\
m=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=mid:2\r\na=sendonly\r\na=msid:s TR_c\r\n\
m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:3\r\na=sendonly\r\na=msid:s TR_v\r\n\
m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:4\r\na=msid:- TR_d\r\n\
m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:5\r\n";
        assert_eq!(sending_track_ids(sdp), vec!["TR_a", "TR_d"]);
        assert!(sends_video(sdp));
        assert!(!sends_video("m=video 0 UDP 96\r\nm=audio 9 UDP 111\r\n"));
        assert!(!sends_video("m=video 9 UDP 96\r\na=recvonly\r\n"));
        assert!(sending_track_ids("").is_empty());
        assert!(sending_track_ids("m=\r\na=msid:\r\na=msid:x\r\n").is_empty());
    }

    #[test]
    fn ssrcs_are_not_zero_and_differ() {
        let a = new_ssrc();
        let b = new_ssrc();
        assert!(a != 0 && b != 0);
        assert_ne!(a, b);
    }
}
