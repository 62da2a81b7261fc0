//! The crate's errors: [`ToolCallError`] (seed 002: what can go wrong with one tool call),
//! [`ToolRequestError`] (seed 004: why a model's text is not a valid `tool_request`), and
//! [`Error`], which wraps both and adds provider-format faults.

use outpost_protocol::ToolErrorCode;

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with one tool call (seed 002).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolCallError {
    /// The arguments are not valid JSON, not an object, or an argument has the wrong type.
    #[error("invalid arguments for tool '{tool}': {reason}")]
    InvalidArguments {
        /// Tool name.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A required argument is absent.
    #[error("missing required argument '{argument}' for tool '{tool}'")]
    MissingArgument {
        /// Tool name.
        tool: String,
        /// Argument name.
        argument: String,
    },
    /// No tool of that name exists.
    #[error("tool '{0}' not found")]
    ToolNotFound(String),
    /// The tool ran and failed.
    #[error("tool execution failed: {0}")]
    ExecutionFailed(String),
    /// The tool ran past its time limit (milliseconds).
    #[error("tool execution timed out after {0}ms")]
    Timeout(u64),
    /// The user, a policy or an approval callback refused the call.
    #[error("tool execution denied: {0}")]
    Denied(String),
}

impl ToolCallError {
    /// The ToolUseResult `errorCode` (seed 001) that reports this error on the wire.
    pub fn protocol_code(&self) -> ToolErrorCode {
        match self {
            Self::InvalidArguments { .. } | Self::MissingArgument { .. } => {
                ToolErrorCode::InvalidParameters
            }
            Self::ToolNotFound(_) => ToolErrorCode::UnknownTool,
            Self::ExecutionFailed(_) => ToolErrorCode::ExecutionError,
            Self::Timeout(_) => ToolErrorCode::Timeout,
            Self::Denied(_) => ToolErrorCode::PermissionDenied,
        }
    }
}

/// Why a model's message is not an acceptable `{"tool_request": …}` (seed 004).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolRequestError {
    /// The message is empty or only whitespace.
    #[error("the message is empty")]
    Empty,
    /// The JSON is wrapped in a Markdown code fence.
    #[error("the tool request is wrapped in a Markdown code fence; send the bare JSON object only")]
    MarkdownFence,
    /// Text before the JSON object.
    #[error("text before the JSON object: {0:?}; the tool request must be the whole message")]
    TextBefore(String),
    /// Text after the JSON object.
    #[error("text after the JSON object: {0:?}; the tool request must be the whole message")]
    TextAfter(String),
    /// The JSON ends early.
    #[error("partial JSON: the message ends inside the object (line {line}, column {column})")]
    Partial {
        /// 1-based line where the input ended.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// The text is not JSON.
    #[error("invalid JSON at line {line}, column {column}: {reason}")]
    InvalidJson {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's explanation.
        reason: String,
    },
    /// Valid JSON of the wrong shape (missing or extra keys, wrong types, empty name).
    #[error("not a tool request: {0}")]
    Shape(String),
}

/// Errors of this crate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A tool call's own error.
    #[error(transparent)]
    ToolCall(#[from] ToolCallError),
    /// A strict `tool_request` message was rejected.
    #[error("rejected tool request: {0}")]
    ToolRequest(#[from] ToolRequestError),
    /// A provider's JSON did not have the documented shape.
    #[error("unexpected {provider} format: {what}")]
    Format {
        /// `openai` or `anthropic`.
        provider: &'static str,
        /// What was wrong, and where.
        what: String,
    },
    /// The provider reported an error inside a response or stream.
    #[error("{provider} reported an error: {message}")]
    Provider {
        /// `openai` or `anthropic`.
        provider: &'static str,
        /// The provider's error text (type and message).
        message: String,
    },
    /// A streamed tool call ended without a required part.
    #[error("streamed tool call #{index} has no {missing}")]
    IncompleteToolCall {
        /// The provider's index for the call.
        index: usize,
        /// `id` or `name`.
        missing: &'static str,
    },
    /// A batch received a result for a call it does not hold, or a second result.
    #[error("batch: {0}")]
    Batch(String),
}

impl Error {
    /// `provider`'s JSON did not have the documented shape: `what` was wrong, and where.
    pub(crate) fn format(provider: &'static str, what: impl Into<String>) -> Error {
        Error::Format {
            provider,
            what: what.into(),
        }
    }

    /// `provider` reported an error with `message` (its type and text).
    pub(crate) fn provider(provider: &'static str, message: String) -> Error {
        Error::Provider { provider, message }
    }
}
