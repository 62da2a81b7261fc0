//! Codec errors. Each maps onto one wire [`ErrorCode`](crate::ProtocolErrorCode) with an exact
//! message text (see [`DecodeError::to_error_message`]).

use crate::MessageType;
use crate::types::{ErrorMessage, ProtocolErrorCode};

/// A field that failed validation, with the reason in plain words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}` {reason}")]
pub struct FieldError {
    /// camelCase wire name of the field, dotted for nested fields (`tools[2].name`).
    pub field: String,
    /// What is wrong with it, e.g. "must not be empty".
    pub reason: String,
}

impl FieldError {
    /// A field error for `field` with `reason`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Why a byte buffer is not a valid Outpost message.
///
/// [`DecodeError::Incomplete`] means "need more bytes" (the buffer ends inside a value);
/// every other variant means the bytes are malformed or invalid and more bytes won't help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The buffer ends in the middle of a value.
    #[error("truncated message: the input ends inside a value")]
    Incomplete,
    /// The buffer is larger than [`MAX_MESSAGE_BYTES`](crate::MAX_MESSAGE_BYTES).
    #[error("message of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Size of the offending input.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The bytes are not a well-formed Outpost MessagePack message.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// Well-formed MessagePack, but bytes follow the message.
    #[error("malformed message: {0} trailing bytes after the message")]
    TrailingBytes(usize),
    /// The message has no `type` key.
    #[error("missing field `type`")]
    MissingType,
    /// The message's `type` is not one this version knows.
    #[error("unknown message type {0}")]
    UnknownType(u64),
    /// A required field is absent.
    #[error("{ty} is missing required field `{field}`")]
    MissingField {
        /// The message type being decoded.
        ty: MessageType,
        /// camelCase wire name of the field.
        field: String,
    },
    /// A field is present but its value is not acceptable.
    #[error("{ty} has an invalid {error}")]
    InvalidField {
        /// The message type being decoded.
        ty: MessageType,
        /// Which field and why.
        error: FieldError,
    },
}

impl DecodeError {
    /// The protocol error code a receiver answers this failure with.
    pub fn code(&self) -> ProtocolErrorCode {
        match self {
            Self::Incomplete | Self::Malformed(_) | Self::TrailingBytes(_) => {
                ProtocolErrorCode::MalformedMessage
            }
            Self::TooLarge { .. } => ProtocolErrorCode::MessageTooLarge,
            Self::MissingType | Self::MissingField { .. } => ProtocolErrorCode::MissingField,
            Self::UnknownType(_) => ProtocolErrorCode::UnknownType,
            Self::InvalidField { .. } => ProtocolErrorCode::InvalidField,
        }
    }

    /// The message type the failure concerns, when the `type` key was readable.
    pub fn message_type(&self) -> Option<u32> {
        match self {
            Self::UnknownType(t) => u32::try_from(*t).ok(),
            Self::MissingField { ty, .. } | Self::InvalidField { ty, .. } => Some(ty.code().into()),
            _ => None,
        }
    }

    /// The ErrorMessage (type 1) a receiver sends back for this failure.
    ///
    /// `ref_id` is the offending message's `id` when the receiver could read it.
    pub fn to_error_message(&self, ref_id: Option<String>) -> ErrorMessage {
        ErrorMessage {
            code: self.code(),
            message: self.to_string(),
            message_type: self.message_type(),
            ref_id,
            fatal: false,
        }
    }
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The message breaks a validation rule; nothing was encoded.
    #[error("{ty} has an invalid {error}")]
    Invalid {
        /// The message type being encoded.
        ty: MessageType,
        /// Which field and why.
        error: FieldError,
    },
    /// The encoded message would exceed [`MAX_MESSAGE_BYTES`](crate::MAX_MESSAGE_BYTES).
    #[error("encoded message of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Size of the encoded message.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The serializer failed (a bug in a type's Serialize impl).
    #[error("could not serialize {ty}: {reason}")]
    Serialize {
        /// The message type being encoded.
        ty: MessageType,
        /// What the serializer reported.
        reason: String,
    },
}

/// Result alias for decoding.
pub type Result<T, E = DecodeError> = std::result::Result<T, E>;
