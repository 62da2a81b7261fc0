//! Requests an MCP server sends to the host: roots, elicitation and sampling.
//!
//! The host answers `roots/list` itself from the list its caller gives (Outpost passes the
//! user's allowed folders, split around what the policy denies: `outpost-policy`'s roots).
//! It never answers elicitation or sampling by itself: it asks the caller's
//! [`ServerRequests`]. [`DefaultRequests`] declines every elicitation and refuses every
//! sampling request with a clear error.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{McpError, Result};

/// A root offered to servers (an MCP `Root`): a `file://` URI and a display name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// `file://` URI of the folder.
    pub uri: String,
    /// Display name.
    pub name: Option<String>,
}

impl Root {
    /// The root for an absolute folder path, named after its last component.
    pub fn from_path(path: &Path) -> Result<Self> {
        let url = url::Url::from_directory_path(path).map_err(|()| {
            McpError::invalid(
                "root",
                format!("'{}' is not an absolute path", path.display()),
            )
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .or_else(|| Some(path.display().to_string()));
        Ok(Self {
            uri: url.to_string(),
            name,
        })
    }
}

/// An elicitation request: the server asks the user for input.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElicitationRequest {
    /// A form: `requested_schema` is the JSON Schema (an object of primitive properties)
    /// of the answer.
    Form {
        /// What the server asks, to show the user.
        message: String,
        /// The schema of the answer.
        requested_schema: Value,
    },
    /// The server asks the user to open a URL.
    Url {
        /// What the server asks, to show the user.
        message: String,
        /// The URL.
        url: String,
        /// The server's id for this elicitation (empty when absent).
        elicitation_id: String,
    },
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// Accepted, with the form's content (absent for URL elicitation).
    Accept(Option<Map<String, Value>>),
    /// Declined: the server may continue without the information.
    Decline,
    /// Dismissed without a choice.
    Cancel,
}

/// The refusal sent for sampling requests by [`DefaultRequests`].
pub const SAMPLING_REFUSED: &str = "Outpost does not answer sampling requests from MCP servers: \
     a server may not use the user's assistant as its language model";

/// What the host does with requests only a person (or the assistant) could answer.
#[async_trait::async_trait]
pub trait ServerRequests: Send + Sync + std::fmt::Debug + 'static {
    /// Answers an elicitation request from `server`. The default declines.
    async fn elicit(&self, server: &str, request: ElicitationRequest) -> ElicitationAnswer {
        let _ = (server, request);
        ElicitationAnswer::Decline
    }

    /// Answers a `sampling/createMessage` request from `server` (`params` as on the wire;
    /// the answer is a `CreateMessageResult` as on the wire). An `Err` is sent to the
    /// server as a JSON-RPC error with that message. The default refuses.
    async fn sample(&self, server: &str, params: Value) -> Result<Value, String> {
        let _ = (server, params);
        Err(SAMPLING_REFUSED.to_owned())
    }
}

/// Declines every elicitation and refuses every sampling request.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultRequests;

impl ServerRequests for DefaultRequests {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_from_path() {
        let r = Root::from_path(Path::new("/home/u/My Docs")).ok();
        assert_eq!(
            r,
            Some(Root {
                uri: "file:///home/u/My%20Docs/".into(),
                name: Some("My Docs".into())
            })
        );
        assert!(Root::from_path(Path::new("relative")).is_err());
    }
}
