//! The message catalogue: one struct per message type, camelCase on the wire.

mod attachment;
mod chat;
mod error;
pub(crate) mod session;
mod tool;

pub use attachment::{ATTACHMENTS_CAPABILITY, Attachment, sha256_hex};
pub use chat::{AssistantDelta, AssistantMessage, AssistantState, AssistantStatus, UserMessage};
pub use error::{ErrorMessage, ProtocolErrorCode, Role};
pub use session::{
    ClientHello, HistoryMessage, HistoryRole, ServerWelcome, ToolDescriptor, ToolsChanged,
};
pub use tool::{
    Execution, ProgressState, ToolErrorCode, ToolUseCancel, ToolUseProgress, ToolUseRequest,
    ToolUseResult,
};
