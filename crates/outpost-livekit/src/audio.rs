//! Audio tracks: a local track fed with PCM frames (Opus-encoded and packetized
//! here), and remote audio tracks turned back into PCM frames (a small jitter buffer,
//! Opus decoding with packet-loss concealment).
//!
//! Everything runs at 48 kHz, Opus's native rate. No `webrtc` or `opus` type is
//! public: callers see [`LocalAudioTrack`], [`AudioStream`] and [`AudioFrame`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use outpost_webrtc::RtpPacket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};

/// The only sample rate of audio tracks: 48 kHz.
pub const SAMPLE_RATE: u32 = 48_000;
/// Samples per channel in one Opus packet we send (20 ms).
const FRAME_SAMPLES: usize = 960;
/// Opus payload type (what `outpost-webrtc` negotiates).
const PAYLOAD_TYPE: u8 = 111;
/// Largest Opus packet we produce.
const MAX_PACKET: usize = 4000;
/// Decoded frames a slow reader may leave unread before new ones are dropped (2 s).
const STREAM_QUEUE: usize = 100;

/// How to publish a local audio track.
#[derive(Debug, Clone)]
pub struct AudioSourceOptions {
    /// The track's name, as other participants see it.
    pub name: String,
    /// 1 (mono) or 2 (stereo, interleaved samples).
    pub channels: u16,
    /// Published muted: the `AddTrackRequest` says so, so the server and the others see
    /// it muted from the start and nothing is sent until [`LocalAudioTrack::set_muted`]
    /// unmutes it. Better than muting it right after publishing: that request reaches
    /// livekit-server as it applies the offer carrying the track, which can lose it
    /// (docs/LIVEKIT_CLIENT.md, "Mute").
    pub muted: bool,
}

impl Default for AudioSourceOptions {
    fn default() -> Self {
        Self {
            name: "microphone".into(),
            channels: 1,
            muted: false,
        }
    }
}

/// A block of decoded audio: 48 kHz, interleaved `channels`.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioFrame {
    /// Interleaved 16-bit samples.
    pub samples: Vec<i16>,
    /// Channels (the decoded streams are mono: 1).
    pub channels: u16,
    /// Always [`SAMPLE_RATE`].
    pub sample_rate: u32,
    /// True when this frame was made up by packet-loss concealment (the packet was
    /// lost or came too late).
    pub concealed: bool,
    /// Samples of time the sender skipped right before this frame, by its RTP clock
    /// (Opus DTX: in silence a sender sends one small packet every 400 ms, and
    /// livekit-server negotiates DTX with the official SDKs). A real-time player has
    /// already played that time as silence while it waited; a consumer that keeps a
    /// timeline (a recording, a transcriber) puts this much silence before the frame.
    pub skipped_before: usize,
}

/// Encoder state of a local track.
struct Encoding {
    encoder: opus::Encoder,
    pending: Vec<i16>,
    seq: u16,
    ts: u32,
    first: bool,
}

pub(crate) struct LocalShared {
    channels: u16,
    muted: AtomicBool,
    /// The connection's track; `None` after unpublish or a full rejoin (the new
    /// connections do not carry it).
    out: std::sync::Mutex<Option<outpost_webrtc::LocalAudioTrack>>,
    enc: tokio::sync::Mutex<Encoding>,
}

impl std::fmt::Debug for LocalShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalShared")
            .field("channels", &self.channels)
            .field("muted", &self.muted)
            .finish_non_exhaustive()
    }
}

impl LocalShared {
    pub(crate) fn new(channels: u16, muted: bool) -> Result<Self> {
        let ch = match channels {
            1 => opus::Channels::Mono,
            2 => opus::Channels::Stereo,
            n => {
                return Err(Error::InvalidArgument(format!(
                    "an audio track has 1 or 2 channels, not {n}"
                )));
            }
        };
        let mut encoder = opus::Encoder::new(SAMPLE_RATE, ch, opus::Application::Voip)
            .map_err(|e| Error::InvalidArgument(format!("Opus encoder: {e}")))?;
        // Matches the SDP's useinbandfec=1: a lost packet can be rebuilt from the next.
        let _ = encoder.set_inband_fec(true);
        let _ = encoder.set_packet_loss_perc(5);
        Ok(Self {
            channels,
            muted: AtomicBool::new(muted),
            out: std::sync::Mutex::new(None),
            enc: tokio::sync::Mutex::new(Encoding {
                encoder,
                pending: Vec::new(),
                seq: rand_u16(),
                ts: u32::from(rand_u16()) << 8,
                first: true,
            }),
        })
    }

    /// Whether we want the track muted (what [`LocalAudioTrack::set_muted`] last asked).
    pub(crate) fn is_muted(&self) -> bool {
        self.muted.load(Ordering::Relaxed)
    }

    /// Mutes or unmutes it here only (the server already has it so).
    pub(crate) fn set_muted_here(&self, muted: bool) {
        self.muted.store(muted, Ordering::Relaxed);
    }

    pub(crate) fn channels(&self) -> u16 {
        self.channels
    }

    pub(crate) fn set_out(&self, out: Option<outpost_webrtc::LocalAudioTrack>) {
        *outpost_sync::lock(&self.out) = out;
    }

    pub(crate) fn out(&self) -> Option<outpost_webrtc::LocalAudioTrack> {
        outpost_sync::lock(&self.out).clone()
    }
}

fn rand_u16() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(1);
    (h.finish() & 0xffff) as u16
}

/// What one of our tracks asks of the room engine.
#[derive(Debug)]
pub(crate) enum TrackRequest {
    /// Mute or unmute track `sid`.
    Mute {
        sid: String,
        muted: bool,
        done: tokio::sync::oneshot::Sender<Result<()>>,
    },
    /// Stop publishing track `sid`.
    Unpublish {
        sid: String,
        done: tokio::sync::oneshot::Sender<Result<()>>,
    },
}

/// The way from a track to the room engine (the room's command channel); false once the
/// engine stopped. The track knows no more of the engine than this.
pub(crate) type ToEngine = Arc<dyn Fn(TrackRequest) -> bool + Send + Sync>;

/// An audio track we publish. Feed it PCM with [`LocalAudioTrack::push_frame`] in
/// real time (e.g. 10 or 20 ms at a time); it is Opus-encoded in 20 ms packets.
#[derive(Clone)]
pub struct LocalAudioTrack {
    sid: String,
    shared: Arc<LocalShared>,
    engine: ToEngine,
}

impl std::fmt::Debug for LocalAudioTrack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalAudioTrack")
            .field("sid", &self.sid)
            .field("channels", &self.shared.channels)
            .finish_non_exhaustive()
    }
}

impl LocalAudioTrack {
    pub(crate) fn new(sid: String, shared: Arc<LocalShared>, engine: ToEngine) -> Self {
        Self {
            sid,
            shared,
            engine,
        }
    }

    /// Hands `request` to the room engine.
    fn ask(&self, request: TrackRequest) -> Result<()> {
        if (self.engine)(request) {
            Ok(())
        } else {
            Err(Error::Closed("the room engine stopped".into()))
        }
    }

    /// The track sid the server gave it.
    pub fn sid(&self) -> &str {
        &self.sid
    }

    /// Whether the track is muted.
    pub fn is_muted(&self) -> bool {
        self.shared.muted.load(Ordering::Relaxed)
    }

    /// Whether the track is still being sent (false after [`LocalAudioTrack::unpublish`],
    /// leaving, or a full rejoin: publish again then).
    pub fn is_published(&self) -> bool {
        self.shared.out().is_some()
    }

    /// Sends interleaved 16-bit PCM at 48 kHz with the track's channel count. Any
    /// length is accepted (a multiple of the channel count); samples are sent in
    /// 20 ms packets as they fill up. While muted, samples are dropped (the RTP clock
    /// keeps running). Fails with [`Error::Closed`] once the track is unpublished.
    pub async fn push_frame(&self, samples: &[i16]) -> Result<()> {
        let ch = usize::from(self.shared.channels);
        if samples.len() % ch != 0 {
            return Err(Error::InvalidArgument(format!(
                "{} samples is not a whole number of {ch}-channel frames",
                samples.len()
            )));
        }
        let Some(out) = self.shared.out() else {
            return Err(Error::Closed("the audio track is not published".into()));
        };
        let mut enc = self.shared.enc.lock().await;
        enc.pending.extend_from_slice(samples);
        let block = FRAME_SAMPLES * ch;
        while enc.pending.len() >= block {
            let frame: Vec<i16> = enc.pending.drain(..block).collect();
            let ts = enc.ts;
            enc.ts = enc.ts.wrapping_add(FRAME_SAMPLES as u32);
            if self.is_muted() {
                enc.first = true;
                continue;
            }
            let mut buf = vec![0u8; MAX_PACKET];
            let n = enc
                .encoder
                .encode(&frame, &mut buf)
                .map_err(|e| Error::Webrtc(format!("Opus encode: {e}")))?;
            buf.truncate(n);
            let packet = RtpPacket {
                payload_type: PAYLOAD_TYPE,
                sequence_number: enc.seq,
                timestamp: ts,
                ssrc: 0,
                marker: enc.first,
                payload: Bytes::from(buf),
                audio_level: Some(audio_level(&frame)),
            };
            enc.seq = enc.seq.wrapping_add(1);
            enc.first = false;
            // Before the answer is applied, or while the link is down, packets are
            // dropped like on any lossy link.
            if let Err(e) = out.write(&packet).await {
                tracing::trace!(track = %self.sid, "audio packet not sent: {e}");
            }
        }
        Ok(())
    }

    /// Sends 32-bit float PCM (-1.0 ..= 1.0) like [`LocalAudioTrack::push_frame`].
    pub async fn push_frame_f32(&self, samples: &[f32]) -> Result<()> {
        let ints: Vec<i16> = samples
            .iter()
            .map(|s| (s.clamp(-1.0, 1.0) * 32767.0) as i16)
            .collect();
        self.push_frame(&ints).await
    }

    /// Mutes or unmutes the track: the server is told (others see the track muted)
    /// and, while muted, nothing is sent.
    pub async fn set_muted(&self, muted: bool) -> Result<()> {
        self.shared.muted.store(muted, Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.ask(TrackRequest::Mute {
            sid: self.sid.clone(),
            muted,
            done: tx,
        })?;
        rx.await
            .unwrap_or_else(|_| Err(Error::Closed("the room closed".into())))
    }

    /// Stops publishing the track (the publisher connection is renegotiated without
    /// it; others see it unpublished).
    pub async fn unpublish(&self) -> Result<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.ask(TrackRequest::Unpublish {
            sid: self.sid.clone(),
            done: tx,
        })?;
        rx.await
            .unwrap_or_else(|_| Err(Error::Closed("the room closed".into())))
    }
}

/// Decoded audio of one remote track: 48 kHz mono [`AudioFrame`]s of 20 ms (or
/// whatever the sender's packets hold). Ends when the track is unsubscribed, its
/// publisher leaves, or the room disconnects or rejoins.
#[derive(Debug)]
pub struct AudioStream {
    rx: mpsc::Receiver<AudioFrame>,
}

impl AudioStream {
    /// The next frame, `None` once the track ended.
    pub async fn recv(&mut self) -> Option<AudioFrame> {
        self.rx.recv().await
    }
}

/// What the jitter buffer hands out next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The packet that was due.
    Packet(RtpPacket),
    /// The packet that was due is missing: conceal it, from the in-band FEC of the
    /// packet after it when that one is already here (its payload).
    Lost(Option<Bytes>),
}

/// Reorders RTP packets by sequence number. A missing packet is waited for until
/// `depth` newer packets are buffered (or the caller forces it out after a pause),
/// then reported [`Slot::Lost`]; packets older than what was handed out are dropped.
#[derive(Debug)]
pub(crate) struct JitterBuffer {
    depth: usize,
    /// Extended sequence number due next.
    next: Option<u64>,
    packets: BTreeMap<u64, RtpPacket>,
}

/// Most packets held (a sender far ahead resets the buffer).
const JITTER_CAP: usize = 64;
/// Most concealed packets in a row; a longer gap is skipped.
const MAX_CONCEAL: u64 = 5;

impl JitterBuffer {
    pub(crate) fn new(depth: usize) -> Self {
        Self {
            depth: depth.max(1),
            next: None,
            packets: BTreeMap::new(),
        }
    }

    /// Takes a packet in. Returns false when it was dropped (late or duplicate).
    pub(crate) fn push(&mut self, p: RtpPacket) -> bool {
        let next = *self
            .next
            .get_or_insert(u64::from(p.sequence_number) + (1 << 32));
        let delta = i64::from(p.sequence_number.wrapping_sub(next as u16) as i16);
        let ext = (next as i64 + delta) as u64;
        if ext < next || self.packets.contains_key(&ext) {
            return false;
        }
        if ext - next > JITTER_CAP as u64 * 4 || self.packets.len() >= JITTER_CAP {
            // The sender jumped far ahead or we fell far behind: start over there.
            self.packets.clear();
            self.next = Some(ext);
        }
        self.packets.insert(ext, p);
        true
    }

    /// The next slot, if one is due: the next packet when it is here, otherwise
    /// `Lost` once `depth` packets are waiting behind the gap (or at once with
    /// `force` and anything waiting). Gaps longer than a few packets are skipped
    /// after some concealment.
    pub(crate) fn pop(&mut self, force: bool) -> Option<Slot> {
        let next = self.next?;
        if let Some(p) = self.packets.remove(&next) {
            self.next = Some(next + 1);
            return Some(Slot::Packet(p));
        }
        let (&first, _) = self.packets.iter().next()?;
        if !(force || self.packets.len() >= self.depth) {
            return None;
        }
        // A long gap: conceal only its last MAX_CONCEAL packets.
        let lost = if first - next > MAX_CONCEAL {
            first - MAX_CONCEAL
        } else {
            next
        };
        self.next = Some(lost + 1);
        let fec = self.packets.get(&(lost + 1)).map(|p| p.payload.clone());
        Some(Slot::Lost(fec))
    }
}

/// The longest time the sender may skip for it to be reported as such; a longer jump of
/// the RTP clock (a sender that restarted) starts over.
const MAX_SILENCE_SAMPLES: usize = 2 * SAMPLE_RATE as usize;

/// Where the remote stream's RTP clock should be next, to find time the sender skipped.
#[derive(Debug, Default)]
struct PlayoutClock {
    /// RTP timestamp of the sample after the last one played, once known.
    next: Option<u32>,
}

impl PlayoutClock {
    /// Samples of time the sender skipped before the packet stamped `timestamp` (0 when
    /// it is on time, early, or so far ahead that the stream must have started over).
    fn gap_before(&self, timestamp: u32) -> usize {
        let Some(next) = self.next else {
            return 0;
        };
        let ahead = timestamp.wrapping_sub(next);
        match usize::try_from(ahead) {
            Ok(n) if n <= MAX_SILENCE_SAMPLES => n,
            _ => 0,
        }
    }

    /// `n` samples were played: decoded from the packet stamped `timestamp`, or
    /// concealed (`None`).
    fn played(&mut self, timestamp: Option<u32>, n: usize) {
        let n = u32::try_from(n).unwrap_or(0);
        self.next = match (timestamp, self.next) {
            (Some(ts), _) => Some(ts.wrapping_add(n)),
            (None, Some(next)) => Some(next.wrapping_add(n)),
            (None, None) => None,
        };
    }
}

/// Hands a frame to the stream's reader; false once the reader is gone. A reader that
/// is behind loses the frame rather than holding up the decoder.
fn send_frame(tx: &mpsc::Sender<AudioFrame>, frame: AudioFrame) -> bool {
    match tx.try_send(frame) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            tracing::debug!("audio stream reader is behind; frame dropped");
            true
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

/// Starts decoding a remote track into an [`AudioStream`]; the task ends with the
/// track (abort it to end it sooner).
pub(crate) fn spawn_receiver(track: outpost_webrtc::RemoteTrack) -> (AudioStream, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    let handle = tokio::spawn(async move {
        let mut decoder = match opus::Decoder::new(SAMPLE_RATE, opus::Channels::Mono) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("Opus decoder: {e}");
                return;
            }
        };
        let mut jb = JitterBuffer::new(3);
        let mut last_len = FRAME_SAMPLES;
        let mut clock = PlayoutClock::default();
        // Out of order or lost packets are given up on after this pause.
        let patience = Duration::from_millis(60);
        loop {
            let got = tokio::time::timeout(patience, track.recv()).await;
            let force = match got {
                Ok(Some(p)) => {
                    jb.push(p);
                    false
                }
                Ok(None) => break,
                Err(_) => true,
            };
            while let Some(slot) = jb.pop(force) {
                // Time the sender did not send (DTX) is told to the reader, not made up
                // here: a player has already played it as silence while waiting.
                let skipped_before = match &slot {
                    Slot::Packet(p) => clock.gap_before(p.timestamp),
                    Slot::Lost(_) => 0,
                };
                let mut out = vec![0i16; 5760];
                let (n, concealed) = match &slot {
                    Slot::Packet(p) => match decoder.decode(&p.payload, &mut out, false) {
                        Ok(n) => (n, false),
                        Err(e) => {
                            tracing::debug!("undecodable Opus packet: {e}");
                            (
                                decoder
                                    .decode(&[], &mut out[..last_len], false)
                                    .unwrap_or(0),
                                true,
                            )
                        }
                    },
                    // Opus rebuilds the lost frame from the next packet's in-band FEC
                    // (LBRR) when it carries some, and conceals it otherwise.
                    Slot::Lost(Some(next)) => (
                        decoder
                            .decode(next, &mut out[..last_len], true)
                            .or_else(|_| decoder.decode(&[], &mut out[..last_len], false))
                            .unwrap_or(0),
                        true,
                    ),
                    Slot::Lost(None) => (
                        decoder
                            .decode(&[], &mut out[..last_len], false)
                            .unwrap_or(0),
                        true,
                    ),
                };
                match &slot {
                    Slot::Packet(p) => clock.played(Some(p.timestamp), n),
                    Slot::Lost(_) => clock.played(None, n),
                }
                if n == 0 {
                    continue;
                }
                if !concealed {
                    last_len = n;
                }
                out.truncate(n);
                let frame = AudioFrame {
                    samples: out,
                    channels: 1,
                    sample_rate: SAMPLE_RATE,
                    concealed,
                    skipped_before,
                };
                if !send_frame(&tx, frame) {
                    return;
                }
            }
        }
    });
    (AudioStream { rx }, handle)
}

/// RFC 6464's level of a frame (interleaved samples): its RMS in -dBov, from 0 (full
/// scale) to 127 (silence). A full-scale sine is 3.
fn audio_level(frame: &[i16]) -> u8 {
    if frame.is_empty() {
        return 127;
    }
    let sum: f64 = frame
        .iter()
        .map(|&s| {
            let x = f64::from(s) / 32768.0;
            x * x
        })
        .sum();
    let rms = (sum / frame.len() as f64).sqrt();
    if rms <= 0.0 {
        return 127;
    }
    (-20.0 * rms.log10()).round().clamp(0.0, 127.0) as u8
}

#[cfg(test)]
impl AudioStream {
    /// A stream fed by the returned sender (unit tests).
    pub(crate) fn for_tests() -> (mpsc::Sender<AudioFrame>, Self) {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        (tx, Self { rx })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn pkt(seq: u16) -> RtpPacket {
        RtpPacket {
            payload_type: PAYLOAD_TYPE,
            sequence_number: seq,
            timestamp: u32::from(seq) * 960,
            ssrc: 1,
            marker: false,
            payload: Bytes::from(vec![seq as u8]),
            audio_level: None,
        }
    }

    fn seqs(jb: &mut JitterBuffer, force: bool) -> Vec<Option<u16>> {
        let mut out = Vec::new();
        while let Some(s) = jb.pop(force) {
            out.push(match s {
                Slot::Packet(p) => Some(p.sequence_number),
                Slot::Lost(_) => None,
            });
        }
        out
    }

    #[test]
    fn skipped_rtp_time_becomes_silence_and_jumps_start_over() {
        let mut c = PlayoutClock::default();
        assert_eq!(c.gap_before(1000), 0, "nothing played yet");
        c.played(Some(1000), 960);
        assert_eq!(c.gap_before(1960), 0, "on time");
        assert_eq!(c.gap_before(1000), 0, "early (a repeat)");
        // DTX: the next packet comes 400 ms of RTP time later.
        assert_eq!(c.gap_before(1960 + 19_200), 19_200);
        c.played(None, 960);
        assert_eq!(c.gap_before(2920), 0, "concealment counts as played");
        assert_eq!(c.gap_before(2920 + 3 * 48_000), 0, "beyond 2 s: start over");
        c.played(Some(u32::MAX - 100), 960);
        assert_eq!(c.gap_before(859), 0, "wraps around");
        assert_eq!(c.gap_before(859 + 960), 960);
    }

    #[test]
    fn in_order_packets_come_out_at_once() {
        let mut jb = JitterBuffer::new(3);
        for s in 10..13 {
            assert!(jb.push(pkt(s)));
            assert_eq!(seqs(&mut jb, false), vec![Some(s)]);
        }
    }

    #[test]
    fn reordered_packets_are_put_back_in_order() {
        let mut jb = JitterBuffer::new(3);
        jb.push(pkt(1));
        assert_eq!(seqs(&mut jb, false), vec![Some(1)]);
        jb.push(pkt(3));
        jb.push(pkt(4));
        assert_eq!(seqs(&mut jb, false), vec![], "2 is waited for");
        jb.push(pkt(2));
        assert_eq!(seqs(&mut jb, false), vec![Some(2), Some(3), Some(4)]);
        // A duplicate and a late packet are dropped.
        assert!(!jb.push(pkt(3)));
        assert!(!jb.push(pkt(0)));
        assert_eq!(seqs(&mut jb, false), vec![]);
    }

    #[test]
    fn a_lost_packet_is_concealed_once_enough_follow_or_on_force() {
        let mut jb = JitterBuffer::new(3);
        jb.push(pkt(100));
        seqs(&mut jb, false);
        jb.push(pkt(102));
        jb.push(pkt(103));
        assert_eq!(seqs(&mut jb, false), vec![]);
        jb.push(pkt(104));
        assert_eq!(
            seqs(&mut jb, false),
            vec![None, Some(102), Some(103), Some(104)]
        );
        // 105 lost, 106 arrives, then a pause: forced out, with 106's payload for FEC.
        jb.push(pkt(106));
        let mut probe = JitterBuffer::new(3);
        probe.push(pkt(105));
        probe.pop(false);
        probe.push(pkt(107));
        assert_eq!(
            probe.pop(true),
            Some(Slot::Lost(Some(Bytes::from(vec![107u8]))))
        );
        assert_eq!(seqs(&mut jb, true), vec![None, Some(106)]);
        // 101 arriving now is too late.
        assert!(!jb.push(pkt(101)));
    }

    #[test]
    fn wrap_around_long_gaps_and_jumps() {
        let mut jb = JitterBuffer::new(2);
        jb.push(pkt(65_534));
        jb.push(pkt(65_535));
        jb.push(pkt(0));
        assert_eq!(
            seqs(&mut jb, false),
            vec![Some(65_534), Some(65_535), Some(0)]
        );
        // 1..=19 lost: at most five are concealed.
        jb.push(pkt(20));
        jb.push(pkt(21));
        let out = seqs(&mut jb, false);
        assert_eq!(out.iter().filter(|s| s.is_none()).count(), 5);
        assert_eq!(&out[5..], &[Some(20), Some(21)]);
        // A jump far ahead restarts there.
        jb.push(pkt(30_000));
        assert_eq!(seqs(&mut jb, false), vec![Some(30_000)]);
    }

    #[test]
    fn opus_round_trip_and_concealment() {
        let shared = LocalShared::new(1, false).unwrap();
        assert!(LocalShared::new(3, false).is_err());
        let mut enc = shared.enc.try_lock().unwrap();
        let tone: Vec<i16> = (0..FRAME_SAMPLES)
            .map(|i| {
                let t = i as f64 / f64::from(SAMPLE_RATE);
                (10_000.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16
            })
            .collect();
        let mut buf = vec![0u8; MAX_PACKET];
        let n = enc.encoder.encode(&tone, &mut buf).unwrap();
        assert!(n > 0 && n < MAX_PACKET);
        let mut dec = opus::Decoder::new(SAMPLE_RATE, opus::Channels::Mono).unwrap();
        let mut out = vec![0i16; 5760];
        assert_eq!(dec.decode(&buf[..n], &mut out, false).unwrap(), 960);
        assert_eq!(dec.decode(&[], &mut out[..960], false).unwrap(), 960);
        // A lost frame rebuilt from the next packet's in-band FEC (what the receiver
        // does when the packet after a gap is already here).
        assert_eq!(dec.decode(&buf[..n], &mut out[..960], true).unwrap(), 960);
        // Garbage is an error, not a panic.
        let _ = dec.decode(&[0xff; 3], &mut out, false);
    }

    #[test]
    fn the_audio_level_is_the_frames_rms_in_dbov() {
        assert_eq!(audio_level(&[]), 127);
        assert_eq!(audio_level(&[0; 960]), 127);
        let sine = |amp: f64| -> Vec<i16> {
            (0..960)
                .map(|i| (amp * (i as f64 * 440.0 * std::f64::consts::TAU / 48_000.0).sin()) as i16)
                .collect()
        };
        assert_eq!(audio_level(&sine(32767.0)), 3);
        // 20 dB quieter.
        assert_eq!(audio_level(&sine(3276.7)), 23);
        assert_eq!(audio_level(&[1; 960]), 90);
    }
}
