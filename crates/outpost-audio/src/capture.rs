//! Microphone capture: one cpal input stream whose callback downmixes to mono, resamples
//! to 48 kHz when the device runs at another rate, measures the level and hands out
//! 10 ms frames on a bounded channel (a slow reader loses frames, the device thread
//! never waits).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cpal::traits::{DeviceTrait, StreamTrait};
use cpal::{FromSample, SampleFormat, SizedSample};
use tokio::sync::mpsc;

use crate::error::{AudioError, Result, open_error};
use crate::resample::MonoResampler;
use crate::{FRAME_SAMPLES, Health, SAMPLE_RATE, devices, level};

/// How to open the microphone.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    /// A device id from [`crate::list_devices`]; `None` = the system default.
    pub device: Option<String>,
    /// Run the device at this rate instead of 48 kHz (the frames handed out are still
    /// 48 kHz: they are resampled). `None` = 48 kHz when the device offers it.
    pub device_rate: Option<u32>,
    /// Remove the speaker's echo from each frame (before the level is measured and the
    /// frame handed out). The same canceller goes to the [`crate::Playback`] whose sound
    /// should be removed (see [`crate::PlaybackOptions::echo`]).
    pub echo: Option<crate::EchoCanceller>,
}

/// Errors in a row, with no audio between them, after which a stream counts as failed.
/// A transient error (such as the one PulseAudio's ALSA plugin reports as its stream
/// settles) comes alone; a stream killed under the plugin makes cpal's worker report the
/// same error about a million times a second.
pub(crate) const ERROR_STREAK: u64 = 1000;

/// Before a stream's first audio, how long a streak of errors must also have lasted to
/// fail it: a stream still being opened by a slow sound server gets the same I/O error
/// from the pulse plugin, over a thousand times in under 2 s (seen on a busy machine, its
/// first frame after 1.9 s), and then plays normally.
pub(crate) const SETTLING_STREAK_MS: u64 = 3_000;

/// State shared with the device callback.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The last frame's level (f32 bits).
    level: AtomicU32,
    /// Milliseconds since `start` at the last callback.
    last_ms: AtomicU64,
    start: Instant,
    failed: Mutex<Option<String>>,
    /// Frames dropped because the reader was slow.
    dropped: AtomicU64,
    /// Stream errors that did not end the stream (the first is logged as a warning).
    errors: AtomicU64,
    /// Errors since the last callback with audio (see [`ERROR_STREAK`]).
    streak: AtomicU64,
    /// Milliseconds since `start` at the first error of the current streak.
    streak_from_ms: AtomicU64,
    /// An error streak failed the stream (once).
    gave_up: AtomicBool,
    stopped: AtomicBool,
    /// "microphone" or "speaker", for the log.
    what: &'static str,
}

impl Shared {
    pub(crate) fn new(what: &'static str) -> Self {
        Self {
            what,
            level: AtomicU32::new(0),
            last_ms: AtomicU64::new(0),
            start: Instant::now(),
            failed: Mutex::new(None),
            dropped: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            streak: AtomicU64::new(0),
            streak_from_ms: AtomicU64::new(0),
            gave_up: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        }
    }

    pub(crate) fn touch(&self) {
        self.streak.store(0, Ordering::Relaxed);
        self.last_ms.store(self.now_ms().max(1), Ordering::Relaxed);
    }

    /// Milliseconds since `start`.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A stream error from the device. cpal's ALSA worker ends a stream only when the
    /// device is gone and keeps polling after any other error, so only that one fails
    /// the stream here. Any other error (an underrun, a reroute, or an I/O error that
    /// PulseAudio's ALSA plugin reports while its stream settles) is logged and the
    /// stream goes on; if it does not recover, its callbacks stop and [`Self::health`]
    /// reports it stalled within 2 s. A stream whose worker reports [`ERROR_STREAK`] errors
    /// in a row with no audio between them fails at once: that is the pulse plugin's
    /// stream killed under it (the device unplugged), and cpal's worker would otherwise
    /// spin on the error, a core busy, until the stream is dropped. Before the stream's
    /// first audio the streak must also have lasted [`SETTLING_STREAK_MS`]: a slow sound
    /// server opening the stream looks the same for a while.
    pub(crate) fn report(&self, e: &cpal::Error) {
        use cpal::ErrorKind as K;
        match e.kind() {
            K::DeviceNotAvailable => self.fail(e.to_string()),
            K::Xrun | K::DeviceChanged | K::RealtimeDenied => {
                tracing::debug!(stream = self.what, "audio stream glitch: {e}");
            }
            _ => {
                let now = self.now_ms();
                let streak = self.streak.fetch_add(1, Ordering::Relaxed) + 1;
                if streak == 1 {
                    self.streak_from_ms.store(now, Ordering::Relaxed);
                }
                let settling = self.last_ms.load(Ordering::Relaxed) == 0;
                let lasted = now.saturating_sub(self.streak_from_ms.load(Ordering::Relaxed));
                if streak >= ERROR_STREAK
                    && (!settling || lasted >= SETTLING_STREAK_MS)
                    && !self.gave_up.swap(true, Ordering::Relaxed)
                {
                    self.fail(format!("it keeps reporting errors: {e}"));
                }
                if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        stream = self.what,
                        "audio stream error (the stream goes on): {e}"
                    );
                } else {
                    tracing::debug!(
                        stream = self.what,
                        "audio stream error (the stream goes on): {e}"
                    );
                }
            }
        }
    }

    /// Errors that did not end the stream.
    pub(crate) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    pub(crate) fn fail(&self, why: String) {
        let mut f = outpost_sync::lock(&self.failed);
        if f.is_none() {
            tracing::warn!(stream = self.what, "audio stream failed: {why}");
            *f = Some(why);
        }
    }

    /// Running, stalled (no callback for 2 s once started, or never within 10 s), or failed.
    pub(crate) fn health(&self) -> Health {
        if let Some(f) = outpost_sync::lock(&self.failed).clone() {
            return Health::Failed(f);
        }
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_ms.load(Ordering::Relaxed);
        // Opening a device through a sound server can take seconds on a busy machine:
        // only a stream that never called back in 10 s counts as stalled.
        let stalled = if last == 0 {
            now > 10_000
        } else {
            now.saturating_sub(last) > 2_000
        };
        if stalled {
            Health::Stalled
        } else {
            Health::Running
        }
    }
}

/// The open microphone. Dropping it closes the device.
pub struct Capture {
    stream: cpal::Stream,
    shared: Arc<Shared>,
    device: String,
    rate: u32,
    channels: u16,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("device", &self.device)
            .field("rate", &self.rate)
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}

/// Picks the device's format: `rate` if it offers it (f32 first, then i16, mono first),
/// else its default format.
pub(crate) fn pick_config(
    ranges: Vec<cpal::SupportedStreamConfigRange>,
    default: std::result::Result<cpal::SupportedStreamConfig, cpal::Error>,
    rate: u32,
) -> std::result::Result<cpal::SupportedStreamConfig, cpal::Error> {
    let rank = |f: SampleFormat| match f {
        SampleFormat::F32 => 0,
        SampleFormat::I16 => 1,
        _ => 2,
    };
    let mut fits: Vec<_> = ranges
        .into_iter()
        .filter(|r| r.min_sample_rate() <= rate && rate <= r.max_sample_rate())
        .filter(|r| rank(r.sample_format()) < 2 && r.channels() > 0)
        .collect();
    fits.sort_by_key(|r| (rank(r.sample_format()), r.channels()));
    match fits.into_iter().next() {
        Some(r) => Ok(r.with_sample_rate(rate)),
        None => default,
    }
}

impl Capture {
    /// Opens the microphone and starts sending 10 ms mono 48 kHz frames to `frames`.
    pub fn start(opts: &CaptureOptions, frames: mpsc::Sender<Vec<f32>>) -> Result<Self> {
        let (device, name) = devices::find(opts.device.as_deref(), true)?;
        let no_default = |e: AudioError| match (&opts.device, e) {
            // The default device that cannot be reached: no microphone to speak of.
            (None, AudioError::DeviceNotFound(_)) => AudioError::NoInputDevice,
            (_, e) => e,
        };
        let want = opts.device_rate.unwrap_or(SAMPLE_RATE);
        let ranges = device
            .supported_input_configs()
            .map(Iterator::collect)
            .unwrap_or_default();
        let config = pick_config(ranges, device.default_input_config(), want)
            .map_err(|e| no_default(open_error(&name, &e)))?;
        let rate = config.sample_rate();
        let channels = config.channels();
        let shared = Arc::new(Shared::new("microphone"));
        let echo = opts.echo.clone();
        let stream = match config.sample_format() {
            SampleFormat::I16 => build::<i16>(&device, &config, &shared, frames, echo),
            SampleFormat::I32 => build::<i32>(&device, &config, &shared, frames, echo),
            SampleFormat::U8 => build::<u8>(&device, &config, &shared, frames, echo),
            SampleFormat::U16 => build::<u16>(&device, &config, &shared, frames, echo),
            SampleFormat::F64 => build::<f64>(&device, &config, &shared, frames, echo),
            _ => build::<f32>(&device, &config, &shared, frames, echo),
        }
        .map_err(|e| no_default(open_error(&name, &e)))?;
        stream
            .play()
            .map_err(|e| no_default(open_error(&name, &e)))?;
        tracing::info!(device = %name, rate, channels, "microphone open");
        Ok(Self {
            stream,
            shared,
            device: name,
            rate,
            channels,
        })
    }

    /// The input level of the last 10 ms, 0.0..=1.0 (see [`crate::level_of`]).
    pub fn level(&self) -> f32 {
        f32::from_bits(self.shared.level.load(Ordering::Relaxed))
    }

    /// Whether audio is still coming.
    pub fn health(&self) -> Health {
        self.shared.health()
    }

    /// The device's id (or `default`).
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The rate the device runs at.
    pub fn device_rate(&self) -> u32 {
        self.rate
    }

    /// The device's channel count (downmixed to mono here).
    pub fn device_channels(&self) -> u16 {
        self.channels
    }

    /// Stream errors the device reported that did not end the stream (e.g. the I/O error
    /// PulseAudio's ALSA plugin reports when its stream is killed under it; the stream
    /// then stalls and [`Self::health`] says so).
    pub fn stream_errors(&self) -> u64 {
        self.shared.errors()
    }

    /// Frames dropped because the reader did not keep up.
    pub fn dropped_frames(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Stops the device (also done on drop).
    pub fn stop(&self) {
        self.shared.stopped.store(true, Ordering::Relaxed);
        let _ = self.stream.pause();
    }
}

/// A whole number of milliseconds from the environment variable `key`, within
/// `range`; `default` when unset or out of range.
pub(crate) fn env_ms(key: &str, range: std::ops::RangeInclusive<u32>, default: u32) -> u32 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|v| range.contains(v))
        .unwrap_or(default)
}

/// The device period, `default_ms` (cpal double-buffers: two periods of buffer) where the
/// device says what it allows: the default of some backends (ALSA through PulseAudio) is
/// seconds long, which would delay everything. `OUTPOST_AUDIO_PERIOD_MS` (5..=100) sets
/// both directions (a longer one for a device that crackles). The speaker runs 10 ms
/// periods: through PulseAudio that took the devices' own share of mouth-to-ear from
/// about 50 to 33 ms (docs/BENCHMARKS.md, voice_bench). The microphone stays at 20 ms: at
/// 10 ms PulseAudio's ALSA plugin kept calling the capture callback after the sound
/// server had died (the microphone was never seen to stall: pulse_devices failed 4 runs
/// of 4), and under load it lost bursts in voice_bench.
pub(crate) fn buffer_size(
    config: &cpal::SupportedStreamConfig,
    default_ms: u32,
) -> cpal::BufferSize {
    let want = config.sample_rate() * env_ms("OUTPOST_AUDIO_PERIOD_MS", 5..=100, default_ms) / 1000;
    match config.buffer_size() {
        cpal::SupportedBufferSize::Range { min, max } if *min <= *max => {
            cpal::BufferSize::Fixed(want.clamp(*min, *max))
        }
        _ => cpal::BufferSize::Default,
    }
}

fn build<T>(
    device: &cpal::Device,
    config: &cpal::SupportedStreamConfig,
    shared: &Arc<Shared>,
    frames: mpsc::Sender<Vec<f32>>,
    mut echo: Option<crate::EchoCanceller>,
) -> std::result::Result<cpal::Stream, cpal::Error>
where
    T: SizedSample,
    f32: FromSample<T>,
{
    let channels = usize::from(config.channels()).max(1);
    let rate = config.sample_rate();
    let mut resampler = MonoResampler::new(rate, SAMPLE_RATE).map_err(|e| {
        cpal::Error::with_message(cpal::ErrorKind::UnsupportedConfig, e.to_string())
    })?;
    let mut mono: Vec<f32> = Vec::new();
    let mut at48: Vec<f32> = Vec::new();
    let cb_shared = shared.clone();
    let err_shared = shared.clone();
    let stream_config = cpal::StreamConfig {
        channels: config.channels(),
        sample_rate: rate,
        buffer_size: buffer_size(config, 20),
    };
    device.build_input_stream(
        stream_config,
        move |data: &[T], _: &cpal::InputCallbackInfo| {
            let s = &cb_shared;
            s.touch();
            if s.stopped.load(Ordering::Relaxed) {
                return;
            }
            mono.clear();
            mono.extend(data.chunks(channels).map(|frame| {
                frame
                    .iter()
                    .map(|x| <f32 as FromSample<T>>::from_sample_(*x))
                    .sum::<f32>()
                    / frame.len() as f32
            }));
            resampler.process(&mono, &mut at48);
            let whole = at48.len() / FRAME_SAMPLES * FRAME_SAMPLES;
            for frame in at48[..whole].chunks_mut(FRAME_SAMPLES) {
                if let Some(echo) = echo.as_mut() {
                    echo.capture(frame);
                }
                s.level
                    .store(level::level_of(frame).to_bits(), Ordering::Relaxed);
                match frames.try_send(frame.to_vec()) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        s.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    // Nobody reads any more: nothing to do until the stream is dropped.
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        s.stopped.store(true, Ordering::Relaxed);
                    }
                }
            }
            at48.drain(..whole);
        },
        move |e| err_shared.report(&e),
        None,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;

    fn io_error() -> cpal::Error {
        cpal::Error::with_message(cpal::ErrorKind::BackendError, "I/O error (5)")
    }

    /// A stream still being opened by a slow sound server gets a burst of I/O errors and
    /// then plays: the burst alone does not fail it.
    #[test]
    fn errors_while_a_stream_settles_do_not_fail_it_at_once() {
        let s = Shared::new("test");
        for _ in 0..3 * ERROR_STREAK {
            s.report(&io_error());
        }
        assert_eq!(s.health(), Health::Running);
        s.touch();
        assert_eq!(s.health(), Health::Running);
        assert_eq!(s.errors(), 3 * ERROR_STREAK);
    }

    /// Once audio has flowed, the streak fails the stream at once (the device unplugged).
    #[test]
    fn an_error_streak_after_audio_fails_the_stream() {
        let s = Shared::new("test");
        s.touch();
        for _ in 0..ERROR_STREAK - 1 {
            s.report(&io_error());
        }
        assert_eq!(s.health(), Health::Running);
        s.report(&io_error());
        assert!(
            matches!(s.health(), Health::Failed(ref why) if why.contains("keeps reporting errors")),
            "{:?}",
            s.health()
        );
    }

    /// Before any audio, a streak that has lasted [`SETTLING_STREAK_MS`] fails it.
    #[test]
    fn a_streak_that_outlasts_the_settling_fails_a_stream_that_never_played() {
        let mut s = Shared::new("test");
        s.start = Instant::now()
            .checked_sub(Duration::from_millis(2 * SETTLING_STREAK_MS))
            .unwrap();
        s.report(&io_error());
        // As if the streak had begun when the stream was opened.
        s.streak_from_ms.store(0, Ordering::Relaxed);
        for _ in 0..ERROR_STREAK {
            s.report(&io_error());
        }
        assert!(matches!(s.health(), Health::Failed(_)), "{:?}", s.health());
    }
}
