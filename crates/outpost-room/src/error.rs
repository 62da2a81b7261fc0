//! Errors of the room server.

/// Everything that can go wrong in the room server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An access token was refused; the text says why (sent back with HTTP 401).
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// A key pair argument is not `KEY:SECRET` with both parts non-empty.
    #[error("bad key pair {0:?}: expected KEY:SECRET")]
    BadKeys(String),
    /// Minting a token failed.
    #[error("cannot mint token: {0}")]
    Token(String),
    /// A client sent a signaling message we cannot use.
    #[error("bad signal message: {0}")]
    BadSignal(String),
    /// A TLS certificate or key cannot be used.
    #[error("tls: {0}")]
    Tls(String),
    /// The WebRTC stack failed.
    #[error("webrtc: {0}")]
    Webrtc(String),
    /// Binding or serving the listener failed.
    #[error("io on {what}: {source}")]
    Io {
        /// What we were doing.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
