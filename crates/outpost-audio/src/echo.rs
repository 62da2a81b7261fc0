//! Echo cancellation for open mic: WebRTC's audio processing module (the system library
//! `webrtc-audio-processing` 0.3, through the `webrtc-audio-processing` crate).
//!
//! One [`EchoCanceller`] is shared by a [`crate::Playback`] and a [`crate::Capture`]
//! (clones share the same processor): the speaker's output callback hands it what it
//! actually sends to the device (the far-end reference, at 48 kHz: resampled back when
//! the device runs at another rate), and the microphone's callback runs every 10 ms
//! frame through it before the level is measured and the frame handed out. The delay
//! between the two is estimated by the module itself (delay-agnostic mode with the
//! extended filter), so no device latency has to be known.
//!
//! Configuration: the echo canceller (AEC, moderate non-linear suppression: the
//! default's balance between suppressing residual echo and letting double talk through)
//! and a high-pass filter (removes DC and rumble; nearly free). No noise suppression: the
//! module's suppressor takes any steady sound for noise (it cut a 440 Hz tone on the
//! microphone by 13 dB within 4 s: see the tests), which would change what the voice
//! tests and a user playing music send, and voice agents do their own noise handling. No
//! automatic gain control: the meter and the far end hear the microphone's own level.
//!
//! A failing call into the library never panics: the frame goes on unprocessed, the
//! error is logged once and kept ([`EchoCanceller::last_error`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use webrtc_audio_processing as apm;

use crate::error::{AudioError, Result};
use crate::{FRAME_SAMPLES, SAMPLE_RATE};

/// The module's frame: 10 ms at 48 kHz, the same as ours.
const _: () = assert!(apm::NUM_SAMPLES_PER_FRAME as usize == FRAME_SAMPLES);
const _: () = assert!(SAMPLE_RATE == 48_000);

#[derive(Debug, Default)]
struct State {
    enabled: AtomicBool,
    /// Far-end frames given to the module.
    rendered: AtomicU64,
    /// Microphone frames run through the module.
    captured: AtomicU64,
    /// Calls into the module that failed (the frame went on unprocessed).
    errors: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// WebRTC echo cancellation between one speaker and one microphone. Cheap to clone;
/// clones share the processor.
#[derive(Clone)]
pub struct EchoCanceller {
    processor: apm::Processor,
    state: Arc<State>,
    /// Far-end samples not yet a whole frame (per clone: only the speaker's clone uses it).
    pending: Vec<f32>,
}

impl std::fmt::Debug for EchoCanceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EchoCanceller")
            .field("enabled", &self.enabled())
            .field("rendered", &self.state.rendered.load(Ordering::Relaxed))
            .field("captured", &self.state.captured.load(Ordering::Relaxed))
            .field("errors", &self.state.errors.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl EchoCanceller {
    /// Creates the processor (mono in, mono reference, 48 kHz), enabled.
    pub fn new() -> Result<Self> {
        let init = apm::InitializationConfig {
            num_capture_channels: 1,
            num_render_channels: 1,
            ..apm::InitializationConfig::default()
        };
        let mut processor = apm::Processor::new(&init).map_err(|e| {
            AudioError::EchoCanceller(format!("could not create the audio processor: {e}"))
        })?;
        processor.set_config(apm::Config {
            echo_cancellation: Some(apm::EchoCancellation {
                suppression_level: apm::EchoCancellationSuppressionLevel::Moderate,
                enable_extended_filter: true,
                enable_delay_agnostic: true,
                stream_delay_ms: None,
            }),
            enable_high_pass_filter: true,
            ..apm::Config::default()
        });
        let state = State {
            enabled: AtomicBool::new(true),
            ..State::default()
        };
        Ok(Self {
            processor,
            state: Arc::new(state),
            pending: Vec::with_capacity(FRAME_SAMPLES * 4),
        })
    }

    /// Turns processing on or off at once (for every clone). While off, microphone
    /// frames pass unchanged and the reference is not fed; turned on again, the
    /// canceller re-adapts within a few seconds.
    pub fn set_enabled(&self, on: bool) {
        self.state.enabled.store(on, Ordering::Relaxed);
    }

    /// Whether processing is on.
    pub fn enabled(&self) -> bool {
        self.state.enabled.load(Ordering::Relaxed)
    }

    /// Feeds far-end audio (48 kHz mono, any length): what the speaker is playing now.
    /// Whole 10 ms frames go to the module; the rest waits for the next call.
    pub fn render(&mut self, samples: &[f32]) {
        if !self.enabled() {
            self.pending.clear();
            return;
        }
        self.pending.extend(samples.iter().map(|s| sane(*s)));
        let whole = self.pending.len() / FRAME_SAMPLES * FRAME_SAMPLES;
        let mut at = 0;
        while at < whole {
            let frame = &mut self.pending[at..at + FRAME_SAMPLES];
            let r = self.processor.process_render_frame(frame);
            self.count(&self.state.rendered, r);
            at += FRAME_SAMPLES;
        }
        self.pending.drain(..whole);
    }

    /// Runs one microphone frame ([`FRAME_SAMPLES`] samples at 48 kHz) through the
    /// canceller in place. Another length, or a failing module, leaves it unchanged.
    pub fn capture(&mut self, frame: &mut [f32]) {
        if !self.enabled() {
            return;
        }
        if frame.len() != FRAME_SAMPLES {
            self.failed(format!(
                "a microphone frame of {} samples (not {FRAME_SAMPLES})",
                frame.len()
            ));
            return;
        }
        for s in frame.iter_mut() {
            *s = sane(*s);
        }
        let r = self.processor.process_capture_frame(frame);
        self.count(&self.state.captured, r);
    }

    /// Microphone frames processed so far.
    pub fn captured_frames(&self) -> u64 {
        self.state.captured.load(Ordering::Relaxed)
    }

    /// Far-end frames fed so far.
    pub fn rendered_frames(&self) -> u64 {
        self.state.rendered.load(Ordering::Relaxed)
    }

    /// How many calls into the module failed, and the last failure.
    pub fn last_error(&self) -> Option<(u64, String)> {
        let n = self.state.errors.load(Ordering::Relaxed);
        let e = outpost_sync::lock(&self.state.last_error).clone();
        e.map(|e| (n, e))
    }

    /// The module's current estimate of the echo path delay in ms, when it has one.
    pub fn delay_ms(&self) -> Option<i32> {
        self.processor.get_stats().delay_median_ms
    }

    fn count(&self, ok: &AtomicU64, r: std::result::Result<(), apm::Error>) {
        match r {
            Ok(()) => {
                ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.failed(format!("the echo canceller failed: {e}")),
        }
    }

    fn failed(&self, why: String) {
        if self.state.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!("{why} (audio passes unprocessed)");
        }
        *outpost_sync::lock(&self.state.last_error) = Some(why);
    }
}

/// A sample the module can take: NaN and infinities (which would poison its filters for
/// good) become silence, the rest is clipped to -1.0..=1.0.
fn sane(s: f32) -> f32 {
    if s.is_finite() {
        s.clamp(-1.0, 1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_frame_of_the_wrong_length_is_an_error_not_a_panic() {
        let mut e = EchoCanceller::new().unwrap();
        let mut short = vec![0.1f32; 100];
        e.capture(&mut short);
        assert!(short.iter().all(|s| *s == 0.1));
        let (n, why) = e.last_error().unwrap();
        assert_eq!(n, 1);
        assert!(why.contains("100 samples"), "{why}");
        let mut long = vec![0.1f32; FRAME_SAMPLES + 1];
        e.capture(&mut long);
        assert_eq!(e.last_error().unwrap().0, 2);
        assert_eq!(e.captured_frames(), 0);
    }

    #[test]
    fn the_reference_is_cut_into_whole_frames() {
        let mut e = EchoCanceller::new().unwrap();
        e.render(&[0.0; 300]);
        assert_eq!(e.rendered_frames(), 0);
        e.render(&[0.0; 700]);
        assert_eq!(e.rendered_frames(), 2);
        assert_eq!(e.pending.len(), 40);
        e.render(&[]);
        assert_eq!(e.rendered_frames(), 2);
        assert!(e.last_error().is_none());
    }

    #[test]
    fn off_passes_audio_unchanged_and_on_processes_it() {
        let mut e = EchoCanceller::new().unwrap();
        let clone = e.clone();
        clone.set_enabled(false);
        assert!(!e.enabled());
        let mut f: Vec<f32> = (0..FRAME_SAMPLES)
            .map(|i| (i as f32 * 0.05).sin() * 0.3)
            .collect();
        let orig = f.clone();
        e.capture(&mut f);
        assert_eq!(f, orig);
        e.render(&orig);
        assert_eq!(e.rendered_frames(), 0);
        clone.set_enabled(true);
        for _ in 0..5 {
            e.render(&orig);
            let mut g = orig.clone();
            e.capture(&mut g);
            assert!(g.iter().all(|s| s.is_finite()));
        }
        assert_eq!(e.captured_frames(), 5);
        assert_eq!(e.rendered_frames(), 5);
        assert!(e.last_error().is_none());
    }

    /// Near-end audio with nothing playing is not echo: a steady tone (as the voice tests
    /// play into the microphone) and speech-like bursts pass at their level.
    #[test]
    fn the_microphone_alone_passes_at_its_level() {
        let mut e = EchoCanceller::new().unwrap();
        let tone: Vec<f32> = (0..48_000 * 5)
            .map(|i| 0.4 * (2.0 * std::f32::consts::PI * 440.0 * i as f32 / 48_000.0).sin())
            .collect();
        let mut out = Vec::new();
        for f in tone.chunks(FRAME_SAMPLES) {
            e.render(&[0.0; FRAME_SAMPLES]);
            let mut g = f.to_vec();
            e.capture(&mut g);
            out.extend(g);
        }
        let rms = |x: &[f32]| (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt();
        let (a, b) = (rms(&tone[48_000 * 4..]), rms(&out[48_000 * 4..]));
        assert!(b > a * 0.7, "the last second: {b} out of {a}");
    }

    #[test]
    fn odd_samples_do_not_break_it() {
        let mut e = EchoCanceller::new().unwrap();
        let mut f = vec![f32::NAN; FRAME_SAMPLES];
        f[1] = f32::INFINITY;
        f[2] = 1e30;
        e.render(&f);
        e.capture(&mut f);
        assert!(f.iter().all(|s| s.is_finite()));
        for _ in 0..20 {
            let mut g: Vec<f32> = (0..FRAME_SAMPLES)
                .map(|i| (i as f32 * 0.1).sin() * 0.2)
                .collect();
            e.render(&g.clone());
            e.capture(&mut g);
            assert!(g.iter().all(|s| s.is_finite() && s.abs() <= 1.0), "{g:?}");
        }
        assert!(e.last_error().is_none());
    }
}
