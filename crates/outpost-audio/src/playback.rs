//! Playback: 48 kHz mono frames in, resampled to the device's rate on the caller's
//! thread and queued; the cpal output callback takes from the queue, copies each sample
//! to every channel, and plays silence when the queue runs dry. The queue is capped (a
//! stalled device must not grow memory or latency without bound): beyond the cap the
//! oldest audio is dropped. Below the cap, [`crate::playout::Playout`] keeps a late burst
//! from leaving a standing delay for the rest of the call.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cpal::traits::{DeviceTrait, StreamTrait};
use cpal::{FromSample, SampleFormat, SizedSample};

use crate::capture::{Shared, buffer_size, pick_config};
use crate::error::{Result, open_error};
use crate::resample::MonoResampler;
use crate::{Health, SAMPLE_RATE, devices, level};

/// How to open the output device.
#[derive(Debug, Clone, Default)]
pub struct PlaybackOptions {
    /// A device id from [`crate::list_devices`]; `None` = the system default.
    pub device: Option<String>,
    /// Run the device at this rate instead of 48 kHz (input is still 48 kHz).
    pub device_rate: Option<u32>,
    /// Feed what the device plays (at 48 kHz) to this canceller as its far-end
    /// reference; the [`crate::Capture`] given the same canceller removes it.
    pub echo: Option<crate::EchoCanceller>,
}

/// Audio waiting for the device, at the device's rate.
#[derive(Debug)]
struct Queue {
    samples: Mutex<VecDeque<f32>>,
    cap: usize,
    /// The level of what was played last (f32 bits).
    level: AtomicU32,
    dropped: AtomicU64,
    /// Samples the playout target cut (standing delay).
    cut: AtomicU64,
}

/// The open output device. Dropping it closes the device.
pub struct Playback {
    stream: cpal::Stream,
    queue: Arc<Queue>,
    shared: Arc<Shared>,
    resampler: Mutex<MonoResampler>,
    device: String,
    rate: u32,
    channels: u16,
}

impl std::fmt::Debug for Playback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Playback")
            .field("device", &self.device)
            .field("rate", &self.rate)
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}

impl Playback {
    /// Opens the output device; it plays silence until [`Playback::push`] is called.
    pub fn start(opts: &PlaybackOptions) -> Result<Self> {
        let (device, name) = devices::find(opts.device.as_deref(), false)?;
        let want = opts.device_rate.unwrap_or(SAMPLE_RATE);
        let ranges = device
            .supported_output_configs()
            .map(Iterator::collect)
            .unwrap_or_default();
        let config = pick_config(ranges, device.default_output_config(), want)
            .map_err(|e| open_error(&name, &e))?;
        let rate = config.sample_rate();
        let channels = config.channels();
        let queue = Arc::new(Queue {
            samples: Mutex::new(VecDeque::with_capacity(rate as usize)),
            // One second of audio at most.
            cap: rate as usize,
            level: AtomicU32::new(0),
            dropped: AtomicU64::new(0),
            cut: AtomicU64::new(0),
        });
        let shared = Arc::new(Shared::new("speaker"));
        // The reference goes to the canceller at 48 kHz: back from the device's rate.
        let echo = match opts.echo.clone() {
            Some(e) if rate != SAMPLE_RATE => {
                Some((e, Some(MonoResampler::new(rate, SAMPLE_RATE)?)))
            }
            Some(e) => Some((e, None)),
            None => None,
        };
        let stream = match config.sample_format() {
            SampleFormat::I16 => build::<i16>(&device, &config, &queue, &shared, echo),
            SampleFormat::I32 => build::<i32>(&device, &config, &queue, &shared, echo),
            SampleFormat::U8 => build::<u8>(&device, &config, &queue, &shared, echo),
            SampleFormat::U16 => build::<u16>(&device, &config, &queue, &shared, echo),
            SampleFormat::F64 => build::<f64>(&device, &config, &queue, &shared, echo),
            _ => build::<f32>(&device, &config, &queue, &shared, echo),
        }
        .map_err(|e| open_error(&name, &e))?;
        stream.play().map_err(|e| open_error(&name, &e))?;
        let resampler = Mutex::new(MonoResampler::new(SAMPLE_RATE, rate)?);
        tracing::info!(device = %name, rate, channels, "speaker open");
        Ok(Self {
            stream,
            queue,
            shared,
            resampler,
            device: name,
            rate,
            channels,
        })
    }

    /// Queues 48 kHz mono audio (-1.0..=1.0) for playing.
    pub fn push(&self, samples: &[f32]) {
        let mut out = Vec::with_capacity(samples.len() * self.rate as usize / 48_000 + 8);
        outpost_sync::lock(&self.resampler).process(samples, &mut out);
        let mut q = outpost_sync::lock(&self.queue.samples);
        q.extend(out);
        let over = q.len().saturating_sub(self.queue.cap);
        if over > 0 {
            q.drain(..over);
            self.queue.dropped.fetch_add(over as u64, Ordering::Relaxed);
        }
    }

    /// Queues 48 kHz mono 16-bit audio (as LiveKit's decoder hands it out).
    pub fn push_i16(&self, samples: &[i16]) {
        let f: Vec<f32> = samples.iter().map(|s| f32::from(*s) / 32768.0).collect();
        self.push(&f);
    }

    /// Audio queued and not yet handed to the device, in milliseconds.
    pub fn queued_ms(&self) -> u64 {
        let n = outpost_sync::lock(&self.queue.samples).len();
        n as u64 * 1000 / u64::from(self.rate.max(1))
    }

    /// Audio cut so far as standing delay (see [`crate::playout`]), in milliseconds.
    pub fn cut_ms(&self) -> u64 {
        self.queue.cut.load(Ordering::Relaxed) * 1000 / u64::from(self.rate.max(1))
    }

    /// The level of what the device played last, 0.0..=1.0.
    pub fn level(&self) -> f32 {
        f32::from_bits(self.queue.level.load(Ordering::Relaxed))
    }

    /// Whether the device is still taking audio.
    pub fn health(&self) -> Health {
        self.shared.health()
    }

    /// Stream errors the device reported that did not end the stream (see
    /// [`crate::Capture::stream_errors`]).
    pub fn stream_errors(&self) -> u64 {
        self.shared.errors()
    }

    /// The device's id (or `default`).
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The rate the device runs at.
    pub fn device_rate(&self) -> u32 {
        self.rate
    }

    /// Drops whatever is queued (e.g. the assistant was interrupted).
    pub fn clear(&self) {
        outpost_sync::lock(&self.queue.samples).clear();
    }

    /// Stops the device (also done on drop).
    pub fn stop(&self) {
        let _ = self.stream.pause();
    }
}

fn build<T>(
    device: &cpal::Device,
    config: &cpal::SupportedStreamConfig,
    queue: &Arc<Queue>,
    shared: &Arc<Shared>,
    mut echo: Option<(crate::EchoCanceller, Option<MonoResampler>)>,
) -> std::result::Result<cpal::Stream, cpal::Error>
where
    T: SizedSample + FromSample<f32>,
{
    let mut at48: Vec<f32> = Vec::new();
    let channels = usize::from(config.channels()).max(1);
    let q = queue.clone();
    let cb_shared = shared.clone();
    let err_shared = shared.clone();
    let mut played: Vec<f32> = Vec::new();
    let mut playout = crate::playout::Playout::new(config.sample_rate());
    let stream_config = cpal::StreamConfig {
        channels: config.channels(),
        sample_rate: config.sample_rate(),
        buffer_size: buffer_size(config, 10),
    };
    device.build_output_stream(
        stream_config,
        move |data: &mut [T], _: &cpal::OutputCallbackInfo| {
            cb_shared.touch();
            played.clear();
            {
                let mut samples = outpost_sync::lock(&q.samples);
                let cut = playout.before_callback(&mut samples, data.len() / channels);
                if cut > 0 {
                    q.cut.fetch_add(cut as u64, Ordering::Relaxed);
                }
                for frame in data.chunks_mut(channels) {
                    let s = samples.pop_front().unwrap_or(0.0).clamp(-1.0, 1.0);
                    played.push(s);
                    let v = T::from_sample(s);
                    for slot in frame {
                        *slot = v;
                    }
                }
            }
            q.level
                .store(level::level_of(&played).to_bits(), Ordering::Relaxed);
            match echo.as_mut() {
                Some((e, Some(r))) => {
                    at48.clear();
                    r.process(&played, &mut at48);
                    e.render(&at48);
                }
                Some((e, None)) => e.render(&played),
                None => {}
            }
        },
        move |e| err_shared.report(&e),
        None,
    )
}
