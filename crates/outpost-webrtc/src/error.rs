//! The crate's error type. It separates what the remote side got wrong (an SDP or a
//! candidate we cannot use) from failures of the local WebRTC stack, because the two
//! callers report them differently (a bad signal message versus a broken transport).

/// Everything that can go wrong in the WebRTC plumbing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An SDP or candidate from the remote side cannot be used; the text names it.
    #[error("bad remote input: {0}")]
    BadRemote(String),
    /// The local WebRTC stack failed; the text says at which step.
    #[error("webrtc: {0}")]
    Webrtc(String),
}

impl Error {
    /// Whether the remote side's input was at fault (not our stack).
    pub fn is_remote(&self) -> bool {
        matches!(self, Self::BadRemote(_))
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
