//! Tool calls (seeds 000 and 001): ToolUseRequest, ToolUseResult with its error codes,
//! ToolUseProgress and ToolUseCancel.

use serde::{Deserialize, Serialize};

use crate::Map;
use crate::error::FieldError;
use crate::limits::DEFAULT_TIMEOUT_MS;
use crate::open_enum::open_enum;
use crate::validate::{self, Validate};
use outpost_enum::closed_enum;

closed_enum! {
    #[ts_if_feature]
    /// Who runs a tool (seed 000). REQUIRED on every ToolUseRequest; any other value is
    /// rejected.
    #[cfg_attr(feature = "ts", ts(rename = "ExecutionMode"))]
    pub enum Execution {
        /// The server runs it; the client only shows it and MUST NOT run it.
        Server => "server",
        /// The client MUST run it and answer exactly once.
        Client => "client",
        /// Whoever can: the client runs it when it supports and permits it, and otherwise
        /// answers `unknown_tool` at once so the server runs it.
        Either => "either",
    }
}

/// Type 6: a request to run a tool (seed 000). Server → client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseRequest {
    /// NanoID; the ToolUseResult carries the same id.
    pub id: String,
    /// The AssistantMessage that triggered this tool use.
    pub message_id: String,
    /// The tool to run, e.g. "read_local_file".
    pub tool_name: String,
    /// Who runs it.
    pub execution: Execution,
    /// The tool's parameters; checked against the tool's schema by the executor.
    pub parameters: Map,
    /// Maximum run time in milliseconds; absent means [`DEFAULT_TIMEOUT_MS`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "validate::de_timeout"
    )]
    pub timeout_ms: Option<u32>,
}

impl ToolUseRequest {
    /// The timeout that applies: `timeoutMs`, or the 30 s default.
    pub fn effective_timeout_ms(&self) -> u32 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }
}

impl Validate for ToolUseRequest {
    fn check(&self, values_scanned: bool) -> Result<(), FieldError> {
        validate::id("id", &self.id)?;
        validate::id("messageId", &self.message_id)?;
        validate::name("toolName", &self.tool_name)?;
        if let Some(ms) = self.timeout_ms {
            validate::timeout("timeoutMs", ms.into())?;
        }
        if !values_scanned {
            validate::map_value("parameters", &self.parameters, 2)?;
        }
        Ok(())
    }
}

open_enum! {
    /// `errorCode` of a failed ToolUseResult (seed 001). Custom codes are allowed and kept.
    pub enum ToolErrorCode {
        /// The client does not know or support the tool.
        UnknownTool => "unknown_tool",
        /// The tool ran past `timeoutMs`.
        Timeout => "timeout",
        /// The tool failed while running.
        ExecutionError => "execution_error",
        /// The parameters do not match the tool's schema.
        InvalidParameters => "invalid_parameters",
        /// The user or the user's policy did not allow the call.
        PermissionDenied => "permission_denied",
        /// A ToolUseCancel stopped the call.
        Cancelled => "cancelled",
    }
}

/// Type 7: the outcome of a tool call (seed 001). Client → server for client tools,
/// server → client for server tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseResult {
    /// The ToolUseRequest this answers.
    pub id: String,
    /// Whether the tool ran and produced a result.
    pub success: bool,
    /// The tool's output; on failure, optional partial output or diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Map>,
    /// Machine-readable failure code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ToolErrorCode>,
    /// Human-readable failure description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

impl ToolUseResult {
    /// A successful result.
    pub fn ok(id: impl Into<String>, result: Map) -> Self {
        Self {
            id: id.into(),
            success: true,
            result: Some(result),
            error_code: None,
            error_message: None,
        }
    }

    /// A failed result with `code` and `message`.
    pub fn failure(id: impl Into<String>, code: ToolErrorCode, message: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            success: false,
            result: None,
            error_code: Some(code),
            error_message: Some(message.into()),
        }
    }

    /// `unknown_tool` with seed 000's exact text.
    pub fn unknown_tool(id: impl Into<String>, tool_name: &str) -> Self {
        Self::failure(
            id,
            ToolErrorCode::UnknownTool,
            format!("Tool '{tool_name}' is not supported by this client"),
        )
    }

    /// `timeout` with seed 000's exact text.
    pub fn timeout(id: impl Into<String>, timeout_ms: u32) -> Self {
        Self::failure(
            id,
            ToolErrorCode::Timeout,
            format!("Tool execution exceeded timeout of {timeout_ms}ms"),
        )
    }

    /// `invalid_parameters`: `problem` names the field and what is wrong with it.
    pub fn invalid_parameters(id: impl Into<String>, tool_name: &str, problem: &str) -> Self {
        Self::failure(
            id,
            ToolErrorCode::InvalidParameters,
            format!("Invalid parameters for tool '{tool_name}': {problem}"),
        )
    }

    /// `execution_error`, with partial output when there is some.
    pub fn execution_error(
        id: impl Into<String>,
        message: impl Into<String>,
        partial: Option<Map>,
    ) -> Self {
        Self {
            result: partial,
            ..Self::failure(id, ToolErrorCode::ExecutionError, message)
        }
    }

    /// `permission_denied`: `by` says who denied ("the user", "your policy", "the consent
    /// timeout") and `reason` why.
    pub fn permission_denied(id: impl Into<String>, by: &str, reason: &str) -> Self {
        Self::failure(
            id,
            ToolErrorCode::PermissionDenied,
            format!("Permission denied by {by}: {reason}"),
        )
    }

    /// `cancelled`, after a ToolUseCancel.
    pub fn cancelled(id: impl Into<String>) -> Self {
        Self::failure(
            id,
            ToolErrorCode::Cancelled,
            "Tool execution was cancelled by the server",
        )
    }
}

impl Validate for ToolUseResult {
    fn check(&self, values_scanned: bool) -> Result<(), FieldError> {
        validate::id("id", &self.id)?;
        if let Some(code) = &self.error_code {
            validate::name("errorCode", code.as_str())?;
        }
        if let (Some(result), false) = (&self.result, values_scanned) {
            validate::map_value("result", result, 2)?;
        }
        Ok(())
    }
}

/// Type 10: the server no longer wants a tool call's result. Server → client.
///
/// The client stops the tool if it is still waiting for consent or running, and answers
/// the request exactly once (`cancelled`). A cancel for a finished or unknown id is ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseCancel {
    /// The ToolUseRequest to cancel.
    pub id: String,
    /// Why, for the UI and logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Validate for ToolUseCancel {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        validate::id("id", &self.id)
    }
}

closed_enum! {
    #[ts_if_feature]
    /// Where a tool call stands before its result.
    #[cfg_attr(feature = "ts", ts(rename = "ToolProgressState"))]
    pub enum ProgressState {
        /// The client is asking the user for permission; the timeout is not running.
        AwaitingConsent => "awaiting_consent",
        /// The tool is running; the timeout is running.
        Running => "running",
    }
}

/// Type 11: a tool call changed state before finishing, so the other side knows why a result
/// has not come yet. Sent by whoever runs the tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseProgress {
    /// The ToolUseRequest concerned.
    pub id: String,
    /// Its new state.
    pub state: ProgressState,
    /// Free text for the UI, e.g. "Waiting for you to allow reading notes.txt".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Validate for ToolUseProgress {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        validate::id("id", &self.id)
    }
}
