//! Outpost's microphone and speaker, behind one small interface that knows nothing of
//! the UI or of LiveKit.
//!
//! Everything the rest of Outpost sees is 48 kHz mono `f32` in 10 ms frames
//! ([`SAMPLE_RATE`], [`FRAME_SAMPLES`]): [`Capture`] opens an input device and hands
//! out such frames (downmixed, resampled when the device runs at another rate) together
//! with an input level; [`Playback`] takes such frames and plays them on an output
//! device (resampled and spread over its channels). [`list_devices`] names the devices
//! a user can choose. Failures are [`AudioError`]s a person can act on (no input
//! device, the device is gone, access denied), and a stream that dies later reports it
//! through [`Health`].
//!
//! For open mic, an [`EchoCanceller`] shared by the two removes the speaker's sound from
//! the microphone (WebRTC's audio processing: the speaker's callback feeds it what it
//! plays, the microphone's callback runs each frame through it).
//!
//! Layout: `devices` (listing and lookup on cpal's default host), `capture`,
//! `playback`, `echo` (the canceller), `resample` (a streaming mono resampler on rubato), `level` (the meter),
//! `error`. On Linux cpal talks to ALSA, which reaches PulseAudio and PipeWire through
//! their ALSA plugins; the tests drive the real code through a PulseAudio null sink and
//! its monitor source.

mod capture;
mod devices;
mod echo;
mod error;
mod level;
mod playback;
pub mod playout;
mod resample;

pub use capture::{Capture, CaptureOptions};
pub use devices::{DeviceInfo, Devices, list_devices};
pub use echo::EchoCanceller;
pub use error::{AudioError, Result};
pub use level::level_of;
pub use playback::{Playback, PlaybackOptions};
pub use resample::MonoResampler;

/// The only rate the rest of Outpost deals in (Opus's native rate).
pub const SAMPLE_RATE: u32 = 48_000;
/// Samples in one frame handed out by [`Capture`]: 10 ms at [`SAMPLE_RATE`].
pub const FRAME_SAMPLES: usize = 480;

/// How a running stream is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Audio is flowing.
    Running,
    /// The device has not called back for a while (e.g. the sound server stopped).
    Stalled,
    /// The device reported an error; the stream is no use any more (open it again).
    Failed(String),
}
