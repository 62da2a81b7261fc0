//! The crate's error type: what went wrong with which device, in words a person can act on.

/// Everything that can go wrong opening or running an audio device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AudioError {
    /// The system has no input device (no microphone, or no sound server to reach it).
    #[error("no microphone was found")]
    NoInputDevice,
    /// The system has no output device.
    #[error("no speaker or headphones were found")]
    NoOutputDevice,
    /// The chosen device is not there (unplugged, renamed).
    #[error("the audio device {0:?} is not available")]
    DeviceNotFound(String),
    /// The system refused access to the device.
    #[error("access to {device:?} was denied: {reason}")]
    PermissionDenied {
        /// The device.
        device: String,
        /// What the system said.
        reason: String,
    },
    /// The device exists but could not be opened (busy, unsupported format, ...).
    #[error("could not open {device:?}: {reason}")]
    OpenFailed {
        /// The device.
        device: String,
        /// What the system said.
        reason: String,
    },
    /// The echo canceller (WebRTC's audio processing library) could not be set up.
    #[error("echo cancellation is not available: {0}")]
    EchoCanceller(String),
    /// The audio system itself failed (e.g. it could not list devices).
    #[error("the audio system failed: {0}")]
    Host(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, AudioError>;

/// Maps cpal's error for opening `device` to ours.
pub(crate) fn open_error(device: &str, e: &cpal::Error) -> AudioError {
    use cpal::ErrorKind as K;
    let reason = e.to_string();
    tracing::info!(device, "the audio device could not be opened: {reason}");
    match e.kind() {
        K::PermissionDenied => AudioError::PermissionDenied {
            device: device.to_string(),
            reason,
        },
        K::DeviceNotAvailable => AudioError::DeviceNotFound(device.to_string()),
        _ => AudioError::OpenFailed {
            device: device.to_string(),
            reason,
        },
    }
}
