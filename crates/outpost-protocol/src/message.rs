//! The [`Message`] enum: one variant per wire type, with its numeric code and direction.

use crate::error::FieldError;
use crate::types::*;
use crate::validate::Validate;
use outpost_enum::closed_enum;

/// Who may send a message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Only the assistant (server) sends it.
    ServerToClient,
    /// Only the app (client) sends it.
    ClientToServer,
    /// Either side sends it.
    Both,
}

closed_enum! {
    #[ts_if_feature]
    /// The numeric `type` of every message, by name. Names are the Rust type names.
    pub enum MessageType {
        /// 1: protocol-level fault.
        Error => "ErrorMessage",
        /// 2: client's opening message.
        ClientHello => "ClientHello",
        /// 3: server's answer to hello.
        ServerWelcome => "ServerWelcome",
        /// 4: the user said something.
        UserMessage => "UserMessage",
        /// 5: a complete assistant message.
        AssistantMessage => "AssistantMessage",
        /// 6: run a tool (seed 000).
        ToolUseRequest => "ToolUseRequest",
        /// 7: a tool's outcome (seed 001).
        ToolUseResult => "ToolUseResult",
        /// 8: a streamed piece of an assistant message.
        AssistantDelta => "AssistantDelta",
        /// 9: the assistant's state changed.
        AssistantStatus => "AssistantStatus",
        /// 10: stop a tool call.
        ToolUseCancel => "ToolUseCancel",
        /// 11: a tool call is awaiting consent or running.
        ToolUseProgress => "ToolUseProgress",
        /// 12 (version 2): the client's tool catalogue changed.
        ToolsChanged => "ToolsChanged",
        /// 13 (capability `attachments`): a file the user gives the assistant.
        Attachment => "Attachment",
    }
}

impl MessageType {
    /// The numeric wire code.
    pub fn code(self) -> u8 {
        match self {
            Self::Error => 1,
            Self::ClientHello => 2,
            Self::ServerWelcome => 3,
            Self::UserMessage => 4,
            Self::AssistantMessage => 5,
            Self::ToolUseRequest => 6,
            Self::ToolUseResult => 7,
            Self::AssistantDelta => 8,
            Self::AssistantStatus => 9,
            Self::ToolUseCancel => 10,
            Self::ToolUseProgress => 11,
            Self::ToolsChanged => 12,
            Self::Attachment => 13,
        }
    }

    /// The type for a numeric wire code, if this version knows it.
    pub fn from_code(code: u64) -> Option<Self> {
        Some(match code {
            1 => Self::Error,
            2 => Self::ClientHello,
            3 => Self::ServerWelcome,
            4 => Self::UserMessage,
            5 => Self::AssistantMessage,
            6 => Self::ToolUseRequest,
            7 => Self::ToolUseResult,
            8 => Self::AssistantDelta,
            9 => Self::AssistantStatus,
            10 => Self::ToolUseCancel,
            11 => Self::ToolUseProgress,
            12 => Self::ToolsChanged,
            13 => Self::Attachment,
            _ => return None,
        })
    }

    /// Who may send it.
    pub fn direction(self) -> Direction {
        match self {
            Self::Error | Self::ToolUseResult | Self::ToolUseProgress => Direction::Both,
            Self::ClientHello | Self::UserMessage | Self::ToolsChanged | Self::Attachment => {
                Direction::ClientToServer
            }
            Self::ServerWelcome
            | Self::AssistantMessage
            | Self::ToolUseRequest
            | Self::AssistantDelta
            | Self::AssistantStatus
            | Self::ToolUseCancel => Direction::ServerToClient,
        }
    }

    /// Every type this version knows, in code order.
    pub fn all() -> impl Iterator<Item = Self> {
        (1..=13).filter_map(Self::from_code)
    }
}

/// One protocol message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Message {
    /// Type 1.
    Error(ErrorMessage),
    /// Type 2.
    ClientHello(ClientHello),
    /// Type 3.
    ServerWelcome(ServerWelcome),
    /// Type 4.
    UserMessage(UserMessage),
    /// Type 5.
    AssistantMessage(AssistantMessage),
    /// Type 6.
    ToolUseRequest(ToolUseRequest),
    /// Type 7.
    ToolUseResult(ToolUseResult),
    /// Type 8.
    AssistantDelta(AssistantDelta),
    /// Type 9.
    AssistantStatus(AssistantStatus),
    /// Type 10.
    ToolUseCancel(ToolUseCancel),
    /// Type 11.
    ToolUseProgress(ToolUseProgress),
    /// Type 12 (version 2).
    ToolsChanged(ToolsChanged),
    /// Type 13 (capability `attachments`).
    Attachment(Attachment),
}

/// Calls `$f` on the body of any message variant.
macro_rules! with_body {
    ($msg:expr, $b:ident => $f:expr) => {
        match $msg {
            Message::Error($b) => $f,
            Message::ClientHello($b) => $f,
            Message::ServerWelcome($b) => $f,
            Message::UserMessage($b) => $f,
            Message::AssistantMessage($b) => $f,
            Message::ToolUseRequest($b) => $f,
            Message::ToolUseResult($b) => $f,
            Message::AssistantDelta($b) => $f,
            Message::AssistantStatus($b) => $f,
            Message::ToolUseCancel($b) => $f,
            Message::ToolUseProgress($b) => $f,
            Message::ToolsChanged($b) => $f,
            Message::Attachment($b) => $f,
        }
    };
}
pub(crate) use with_body;

impl Message {
    /// The message's type.
    pub fn message_type(&self) -> MessageType {
        match self {
            Self::Error(_) => MessageType::Error,
            Self::ClientHello(_) => MessageType::ClientHello,
            Self::ServerWelcome(_) => MessageType::ServerWelcome,
            Self::UserMessage(_) => MessageType::UserMessage,
            Self::AssistantMessage(_) => MessageType::AssistantMessage,
            Self::ToolUseRequest(_) => MessageType::ToolUseRequest,
            Self::ToolUseResult(_) => MessageType::ToolUseResult,
            Self::AssistantDelta(_) => MessageType::AssistantDelta,
            Self::AssistantStatus(_) => MessageType::AssistantStatus,
            Self::ToolUseCancel(_) => MessageType::ToolUseCancel,
            Self::ToolUseProgress(_) => MessageType::ToolUseProgress,
            Self::ToolsChanged(_) => MessageType::ToolsChanged,
            Self::Attachment(_) => MessageType::Attachment,
        }
    }

    /// The id a reply would refer to (`id`, or `messageId` for deltas), if the type has one.
    pub fn id(&self) -> Option<&str> {
        match self {
            Self::UserMessage(m) => Some(&m.id),
            Self::AssistantMessage(m) => Some(&m.id),
            Self::ToolUseRequest(m) => Some(&m.id),
            Self::ToolUseResult(m) => Some(&m.id),
            Self::AssistantDelta(m) => Some(&m.message_id),
            Self::ToolUseCancel(m) => Some(&m.id),
            Self::ToolUseProgress(m) => Some(&m.id),
            Self::Attachment(m) => Some(&m.id),
            Self::Error(_)
            | Self::ClientHello(_)
            | Self::ServerWelcome(_)
            | Self::AssistantStatus(_)
            | Self::ToolsChanged(_) => None,
        }
    }

    /// Checks every rule of docs/PROTOCOL.md; [`encode`](crate::encode) calls this first.
    pub fn validate(&self) -> Result<(), FieldError> {
        with_body!(self, b => b.validate())
    }
}

macro_rules! from_body {
    ($($variant:ident),+) => {
        $(impl From<$variant> for Message {
            fn from(b: $variant) -> Self {
                Message::$variant(b)
            }
        })+
    };
}
from_body!(
    ClientHello,
    ServerWelcome,
    UserMessage,
    AssistantMessage,
    ToolUseRequest,
    ToolUseResult,
    AssistantDelta,
    AssistantStatus,
    ToolUseCancel,
    ToolUseProgress,
    ToolsChanged,
    Attachment
);

impl From<ErrorMessage> for Message {
    fn from(b: ErrorMessage) -> Self {
        Message::Error(b)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_unique() {
        let codes: Vec<u8> = MessageType::all().map(MessageType::code).collect();
        assert_eq!(codes, (1..=13).collect::<Vec<u8>>());
        for t in MessageType::all() {
            assert_eq!(MessageType::from_code(t.code().into()), Some(t));
        }
        assert_eq!(MessageType::from_code(0), None);
        assert_eq!(MessageType::from_code(14), None);
    }

    #[test]
    fn seed_types_keep_their_numbers() {
        assert_eq!(MessageType::Error.code(), 1);
        assert_eq!(MessageType::ToolUseRequest.code(), 6);
        assert_eq!(MessageType::ToolUseResult.code(), 7);
    }
}
