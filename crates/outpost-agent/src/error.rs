//! The agent library's error type.

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model endpoint could not be reached or the connection broke.
    #[error("request to {url} failed: {source}")]
    Http {
        /// The endpoint.
        url: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The model endpoint answered with an error status.
    #[error("{url} answered {status}: {body}")]
    Status {
        /// The endpoint.
        url: String,
        /// HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The model's answer could not be used.
    #[error(transparent)]
    Llm(#[from] outpost_llm::Error),
    /// The event stream broke.
    #[error("event stream from {url} broke: {reason}")]
    Stream {
        /// The endpoint.
        url: String,
        /// Why.
        reason: String,
    },
    /// The stream ended before the provider said it was done.
    #[error("event stream from {0} ended before the response was complete")]
    Truncated(String),
    /// Bad configuration.
    #[error("configuration: {0}")]
    Config(String),
    /// The LiveKit connection failed.
    #[error(transparent)]
    Room(#[from] outpost_livekit::Error),
    /// A message could not be encoded.
    #[error(transparent)]
    Encode(#[from] outpost_protocol::EncodeError),
}
