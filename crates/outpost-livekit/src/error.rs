//! The crate's error type.
//!
//! Each message is a whole sentence with its cause, shown as is; a variant that puts its
//! cause in the message does not also return it from `source()`, so printing the error
//! chain (`{:#}`) never repeats a cause.

use std::time::Duration;

/// Everything that can go wrong talking to a LiveKit server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server URL cannot be used (bad syntax, unsupported scheme).
    #[error("bad server URL {url:?}: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server refused the access token (HTTP 401/403 on `/rtc`), with its reason.
    #[error("the server refused the access token ({status}): {reason}")]
    Unauthorized {
        /// HTTP status.
        status: u16,
        /// The server's explanation.
        reason: String,
    },
    /// The server could not be reached or did not finish the signaling handshake in time.
    #[error("cannot reach LiveKit server at {url}: {reason}")]
    Unreachable {
        /// The URL tried.
        url: String,
        /// Why it failed.
        reason: String,
    },
    /// Signaling failed after the WebSocket was open.
    #[error("signaling: {0}")]
    Signal(String),
    /// The peer connection could not be set up or failed.
    #[error("WebRTC: {0}")]
    Webrtc(String),
    /// Timed out waiting for something.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What we waited for.
        what: &'static str,
        /// How long.
        after: Duration,
    },
    /// The signal connection worked but no network path for media and data did in time
    /// (a network that blocks UDP, TCP to the server's ICE port and its TURN servers, or
    /// a TURN/TLS certificate refused): each path tried and what came of it.
    #[error("no network path to the LiveKit server worked within {after:?}: {}", tried.join("; "))]
    NoPath {
        /// How long the client waited.
        after: Duration,
        /// One line per kind of path: `UDP to 10.0.0.1:7882: no answer to 12 connectivity
        /// checks`, `TURN/TLS to turn.example:443: the server's certificate was refused: …`.
        tried: Vec<String>,
    },
    /// The token endpoint failed or answered something unusable.
    #[error("token endpoint {url}: {reason}")]
    TokenEndpoint {
        /// Endpoint URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A parameter given by the caller is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A payload is larger than a single data packet may carry; use a data stream.
    #[error("payload of {size} bytes exceeds the {limit}-byte packet limit; use a data stream")]
    PayloadTooLarge {
        /// Payload size.
        size: usize,
        /// Limit.
        limit: usize,
    },
    /// An incoming data stream broke a rule (too large, out of order, cancelled...).
    #[error("data stream {stream_id}: {reason}")]
    Stream {
        /// Stream id.
        stream_id: String,
        /// What happened.
        reason: String,
    },
    /// An incoming data stream is larger than this client takes: its header announced
    /// more, or more arrived. The stream is dropped.
    #[error("data stream {stream_id} is larger than the {cap}-byte receive cap")]
    StreamTooLarge {
        /// Stream id.
        stream_id: String,
        /// The cap, in bytes.
        cap: u64,
    },
    /// The server refused a request (e.g. `NOT_ALLOWED` to change our own attributes
    /// without the token grant `canUpdateOwnMetadata`, `LIMIT_EXCEEDED`).
    #[error("the server refused the request: {reason} ({message})")]
    Refused {
        /// The server's reason name.
        reason: String,
        /// Its explanation.
        message: String,
    },
    /// The room is closed (left, or disconnected for good).
    #[error("the room connection is closed: {0}")]
    Closed(String),
    /// Local I/O failed (reading a file to send).
    #[error("{what}: {error}")]
    Io {
        /// What we were doing.
        what: String,
        /// The OS error (part of the message, so not a `source()`).
        error: std::io::Error,
    },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
