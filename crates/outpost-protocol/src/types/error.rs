//! ErrorMessage (protocol-level faults, either way) with its codes, and the roles that
//! report them.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::open_enum::open_enum;
use crate::validate::{self, Validate};

open_enum! {
    /// Protocol-level fault codes carried by [`ErrorMessage`]. Tool failures never use these:
    /// they travel as a failed [`ToolUseResult`](crate::ToolUseResult) (seed 001).
    pub enum ProtocolErrorCode {
        /// The bytes are not a well-formed Outpost message (truncated, trailing bytes,
        /// invalid UTF-8, too deep, not a map, binary or extension values).
        MalformedMessage => "malformed_message",
        /// The message is larger than the receiver accepts.
        MessageTooLarge => "message_too_large",
        /// The `type` is not one the receiver knows.
        UnknownType => "unknown_type",
        /// A required field (or `type`) is absent.
        MissingField => "missing_field",
        /// A field has an unacceptable value.
        InvalidField => "invalid_field",
        /// Hello and welcome found no protocol version both sides speak.
        UnsupportedVersion => "unsupported_version",
        /// A valid message arrived where it makes no sense: wrong direction, or before hello.
        UnexpectedMessage => "unexpected_message",
        /// The sender hit a fault of its own.
        InternalError => "internal_error",
    }
}

/// Type 1: a protocol-level fault, sent by either side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorMessage {
    /// Machine-readable code.
    pub code: ProtocolErrorCode,
    /// Human-readable description; the exact texts are listed in docs/PROTOCOL.md.
    pub message: String,
    /// The `type` of the offending message, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_type: Option<u32>,
    /// The `id` of the offending message, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_id: Option<String>,
    /// True when the sender is about to leave the session because of this fault.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fatal: bool,
}

impl ErrorMessage {
    /// A non-fatal error with `code` and `message`.
    pub fn new(code: ProtocolErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            message_type: None,
            ref_id: None,
            fatal: false,
        }
    }
}

/// Which side of the protocol sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The assistant.
    Server,
    /// The Outpost app.
    Client,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Client => "client",
        }
    }
}

impl ErrorMessage {
    /// `unsupported_version` (fatal): hello and welcome share no version.
    pub fn unsupported_version(
        client: std::ops::RangeInclusive<crate::Version>,
        server: std::ops::RangeInclusive<crate::Version>,
    ) -> Self {
        Self {
            fatal: true,
            message_type: Some(crate::MessageType::ClientHello.code().into()),
            ..Self::new(
                ProtocolErrorCode::UnsupportedVersion,
                format!(
                    "no common protocol version: client speaks {}..={}, server speaks {}..={}",
                    client.start(),
                    client.end(),
                    server.start(),
                    server.end()
                ),
            )
        }
    }

    /// `unexpected_message`: a valid message from the wrong side (`early == false`) or
    /// before hello/welcome (`early == true`).
    pub fn unexpected(msg: &crate::Message, from: Role, early: bool) -> Self {
        let ty = msg.message_type();
        Self {
            message_type: Some(ty.code().into()),
            ref_id: msg.id().map(str::to_owned),
            ..Self::new(
                ProtocolErrorCode::UnexpectedMessage,
                format!(
                    "{ty} is not expected from the {}{}",
                    from.as_str(),
                    if early { " now" } else { "" }
                ),
            )
        }
    }
}

impl Validate for ErrorMessage {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        validate::name("code", self.code.as_str())?;
        if let Some(r) = &self.ref_id {
            validate::id("refId", r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::{Message, UserMessage};

    #[test]
    fn documented_texts() {
        let e = ErrorMessage::unsupported_version(1..=1, 2..=3);
        assert_eq!(
            e.message,
            "no common protocol version: client speaks 1..=1, server speaks 2..=3"
        );
        assert!(e.fatal);
        let msg = Message::UserMessage(UserMessage {
            id: "u1".into(),
            text: "hi".into(),
        });
        let e = ErrorMessage::unexpected(&msg, Role::Server, false);
        assert_eq!(e.message, "UserMessage is not expected from the server");
        assert_eq!(e.ref_id.as_deref(), Some("u1"));
        let e = ErrorMessage::unexpected(&msg, Role::Client, true);
        assert_eq!(e.message, "UserMessage is not expected from the client now");
        assert_eq!(e.code, ProtocolErrorCode::UnexpectedMessage);
    }
}
