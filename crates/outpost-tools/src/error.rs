//! The crate's error type. Every variant maps onto one seed 001 error code.

use outpost_protocol::{Map, ToolUseResult};

/// Why a tool call did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The parameters do not fit the tool's schema; the text names the field.
    #[error("invalid parameters: {0}")]
    InvalidParameters(String),
    /// The tool ran and failed, maybe with partial output.
    #[error("{message}")]
    Execution {
        /// What went wrong, with the input concerned.
        message: String,
        /// Output produced before the failure.
        partial: Option<Map>,
    },
    /// Something refused the call: the policy, the user or a safety rule.
    #[error("permission denied by {by}: {reason}")]
    Refused {
        /// Who refused.
        by: String,
        /// Why.
        reason: String,
    },
    /// The call was cancelled or ran out of time while running.
    #[error("cancelled")]
    Cancelled,
    /// A tool could not be registered (programming error in a tool's spec).
    #[error("cannot register tool '{tool}': {message}")]
    Registry {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
}

impl ToolError {
    /// An execution error without partial output.
    pub fn exec(message: impl Into<String>) -> Self {
        Self::Execution {
            message: message.into(),
            partial: None,
        }
    }

    /// A refusal by a safety rule of the executor itself.
    pub fn refused(reason: impl Into<String>) -> Self {
        Self::Refused {
            by: "Outpost's file safety rules".into(),
            reason: reason.into(),
        }
    }

    /// The seed 001 result for this error.
    pub fn to_result(&self, id: &str, tool: &str) -> ToolUseResult {
        match self {
            Self::InvalidParameters(problem) => {
                ToolUseResult::invalid_parameters(id, tool, problem)
            }
            Self::Execution { message, partial } => {
                ToolUseResult::execution_error(id, message.clone(), partial.clone())
            }
            Self::Refused { by, reason } => ToolUseResult::permission_denied(id, by, reason),
            Self::Cancelled => ToolUseResult::cancelled(id),
            Self::Registry { message, .. } => {
                ToolUseResult::execution_error(id, message.clone(), None)
            }
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = ToolError> = std::result::Result<T, E>;
