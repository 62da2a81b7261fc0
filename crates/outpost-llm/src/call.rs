//! [`ToolCall`] (a model asked for a tool) and [`ToolResult`] (what came of it), with the
//! typed argument getters of seed 002 and conversion to and from the protocol's
//! ToolUseResult.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use outpost_protocol::{Map, ToolErrorCode, ToolUseResult};

use crate::error::ToolCallError;

/// A tool call requested by a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (`call_…`, `toolu_…`), echoed with the result.
    pub id: String,
    /// Name of the tool.
    pub name: String,
    /// Arguments as a JSON text, exactly as the model produced them.
    pub arguments: String,
}

impl ToolCall {
    /// A tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// A tool call whose arguments are given as a JSON value.
    pub fn from_value(id: impl Into<String>, name: impl Into<String>, arguments: &Value) -> Self {
        Self::new(id, name, arguments.to_string())
    }

    fn invalid(&self, reason: impl Into<String>) -> ToolCallError {
        ToolCallError::InvalidArguments {
            tool: self.name.clone(),
            reason: reason.into(),
        }
    }

    fn missing(&self, key: &str) -> ToolCallError {
        ToolCallError::MissingArgument {
            tool: self.name.clone(),
            argument: key.to_owned(),
        }
    }

    /// The arguments as JSON. Empty (or all-whitespace) arguments mean "no arguments" and
    /// parse as `{}`: streaming providers send nothing at all for argument-less calls.
    pub fn parse_arguments(&self) -> Result<Value, ToolCallError> {
        if self.arguments.trim().is_empty() {
            return Ok(Value::Object(Map::new()));
        }
        serde_json::from_str(&self.arguments).map_err(|e| self.invalid(e.to_string()))
    }

    /// The arguments deserialized into `T`.
    pub fn parse_arguments_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolCallError> {
        serde_json::from_value(self.parse_arguments()?).map_err(|e| self.invalid(e.to_string()))
    }

    /// The arguments as a JSON object (the shape of a ToolUseRequest's `parameters`).
    pub fn arguments_map(&self) -> Result<Map, ToolCallError> {
        match self.parse_arguments()? {
            Value::Object(m) => Ok(m),
            other => Err(self.invalid(format!(
                "arguments must be a JSON object, got {}",
                kind_of(&other)
            ))),
        }
    }

    fn get(&self, key: &str) -> Result<Option<Value>, ToolCallError> {
        let mut args = self.arguments_map()?;
        Ok(args.remove(key).filter(|v| !v.is_null()))
    }

    fn typed<T>(
        &self,
        key: &str,
        want: &str,
        f: impl FnOnce(&Value) -> Option<T>,
    ) -> Result<Option<T>, ToolCallError> {
        match self.get(key)? {
            None => Ok(None),
            Some(v) => f(&v).map(Some).ok_or_else(|| {
                self.invalid(format!(
                    "argument '{key}' must be {want}, got {}",
                    kind_of(&v)
                ))
            }),
        }
    }

    /// A required string argument.
    pub fn get_string(&self, key: &str) -> Result<String, ToolCallError> {
        self.get_string_opt(key)?.ok_or_else(|| self.missing(key))
    }

    /// An optional string argument (absent or null gives `None`).
    pub fn get_string_opt(&self, key: &str) -> Result<Option<String>, ToolCallError> {
        self.typed(key, "a string", |v| v.as_str().map(str::to_owned))
    }

    /// A required integer argument.
    pub fn get_int(&self, key: &str) -> Result<i64, ToolCallError> {
        self.get_int_opt(key)?.ok_or_else(|| self.missing(key))
    }

    /// An optional integer argument.
    pub fn get_int_opt(&self, key: &str) -> Result<Option<i64>, ToolCallError> {
        self.typed(key, "an integer", Value::as_i64)
    }

    /// A required number argument (integers are accepted).
    pub fn get_f64(&self, key: &str) -> Result<f64, ToolCallError> {
        self.typed(key, "a number", Value::as_f64)?
            .ok_or_else(|| self.missing(key))
    }

    /// A required boolean argument.
    pub fn get_bool(&self, key: &str) -> Result<bool, ToolCallError> {
        self.typed(key, "a boolean", Value::as_bool)?
            .ok_or_else(|| self.missing(key))
    }

    /// An optional boolean argument with a default.
    pub fn get_bool_or(&self, key: &str, default: bool) -> Result<bool, ToolCallError> {
        Ok(self
            .typed(key, "a boolean", Value::as_bool)?
            .unwrap_or(default))
    }
}

pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What a tool produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum ToolResultContent {
    /// Plain text.
    Text(String),
    /// Structured JSON.
    Json(Value),
    /// An error description.
    Error(String),
}

impl ToolResultContent {
    /// The text a model is shown: text as is, JSON compact, errors prefixed with `Error: `.
    pub fn as_text(&self) -> String {
        match self {
            Self::Text(s) => s.clone(),
            Self::Json(v) => v.to_string(),
            Self::Error(e) => format!("Error: {e}"),
        }
    }
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolCall::id`] this answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// What it produced.
    pub content: ToolResultContent,
    /// Whether it ran successfully.
    pub success: bool,
    /// How long it took, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_time_ms: Option<u64>,
}

impl ToolResult {
    /// A successful text result.
    pub fn success(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Self::with_content(
            tool_call_id,
            name,
            ToolResultContent::Text(content.into()),
            true,
        )
    }

    /// A successful JSON result.
    pub fn success_json(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        value: Value,
    ) -> Self {
        Self::with_content(tool_call_id, name, ToolResultContent::Json(value), true)
    }

    /// A failed result.
    pub fn error(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        error: impl Into<String>,
    ) -> Self {
        Self::with_content(
            tool_call_id,
            name,
            ToolResultContent::Error(error.into()),
            false,
        )
    }

    /// A failed result for `call` from a [`ToolCallError`].
    pub fn from_error(call: &ToolCall, error: &ToolCallError) -> Self {
        Self::error(&call.id, &call.name, error.to_string())
    }

    fn with_content(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: ToolResultContent,
        success: bool,
    ) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            name: name.into(),
            content,
            success,
            execution_time_ms: None,
        }
    }

    /// Sets the measured execution time.
    #[must_use]
    pub fn with_execution_time(mut self, ms: u64) -> Self {
        self.execution_time_ms = Some(ms);
        self
    }

    /// The text a model is shown for this result.
    pub fn text(&self) -> String {
        self.content.as_text()
    }

    /// The result of `call` as reported by a protocol ToolUseResult. Failures keep their
    /// machine code in the text (`timeout: Tool execution exceeded …`) so the model can
    /// tell a denial from a timeout.
    pub fn from_protocol(call: &ToolCall, result: &ToolUseResult) -> Self {
        if result.success {
            let value = result
                .result
                .clone()
                .map(Value::Object)
                .unwrap_or(Value::Null);
            Self::success_json(&call.id, &call.name, value)
        } else {
            let code = result
                .error_code
                .as_ref()
                .map_or("execution_error", ToolErrorCode::as_str);
            let message = result.error_message.as_deref().unwrap_or("the tool failed");
            Self::error(&call.id, &call.name, format!("{code}: {message}"))
        }
    }

    /// This result as a protocol ToolUseResult answering request `request_id`. Text
    /// results become `{"text": …}`, non-object JSON `{"value": …}`; errors keep
    /// `code` (default `execution_error`).
    pub fn to_protocol(&self, request_id: &str, code: Option<ToolErrorCode>) -> ToolUseResult {
        match &self.content {
            ToolResultContent::Json(Value::Object(m)) if self.success => {
                ToolUseResult::ok(request_id, m.clone())
            }
            ToolResultContent::Json(v) if self.success => {
                let mut m = Map::new();
                m.insert("value".into(), v.clone());
                ToolUseResult::ok(request_id, m)
            }
            ToolResultContent::Text(t) if self.success => {
                let mut m = Map::new();
                m.insert("text".into(), Value::String(t.clone()));
                ToolUseResult::ok(request_id, m)
            }
            other => ToolUseResult::failure(
                request_id,
                code.unwrap_or(ToolErrorCode::ExecutionError),
                match other {
                    ToolResultContent::Error(e) | ToolResultContent::Text(e) => e.clone(),
                    ToolResultContent::Json(v) => v.to_string(),
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn call(args: &str) -> ToolCall {
        ToolCall::new("call_1", "read_local_file", args)
    }

    #[test]
    fn getters_read_typed_arguments() {
        let c = call(r#"{"filePath":"/tmp/a","max":5,"big":1.5,"hidden":true,"n":null}"#);
        assert_eq!(c.get_string("filePath").unwrap(), "/tmp/a");
        assert_eq!(c.get_string_opt("nope").unwrap(), None);
        assert_eq!(
            c.get_string_opt("n").unwrap(),
            None,
            "null counts as absent"
        );
        assert_eq!(c.get_int("max").unwrap(), 5);
        assert_eq!(c.get_int_opt("nope").unwrap(), None);
        assert_eq!(c.get_f64("big").unwrap(), 1.5);
        assert_eq!(c.get_f64("max").unwrap(), 5.0);
        assert!(c.get_bool("hidden").unwrap());
        assert!(!c.get_bool_or("other", false).unwrap());
        assert!(c.get_bool_or("hidden", false).unwrap());
    }

    #[test]
    fn getters_name_the_missing_or_mistyped_argument() {
        let c = call(r#"{"filePath": 3, "flag": "yes"}"#);
        assert_eq!(
            c.get_string("filePath").unwrap_err().to_string(),
            "invalid arguments for tool 'read_local_file': argument 'filePath' must be a string, got a number"
        );
        assert_eq!(
            c.get_int("max").unwrap_err(),
            ToolCallError::MissingArgument {
                tool: "read_local_file".into(),
                argument: "max".into()
            }
        );
        assert!(matches!(
            c.get_bool_or("flag", true),
            Err(ToolCallError::InvalidArguments { .. })
        ));
        assert!(matches!(
            c.get_int("flag"),
            Err(ToolCallError::InvalidArguments { .. })
        ));
    }

    #[test]
    fn bad_json_and_non_objects_are_invalid_arguments() {
        for bad in [r#"{"filePath": "#, "not json", "[1,2]", "42"] {
            let err = call(bad).get_string("filePath").unwrap_err();
            assert!(
                matches!(err, ToolCallError::InvalidArguments { .. }),
                "{bad}: {err}"
            );
        }
        assert_eq!(call("   ").arguments_map().unwrap(), Map::new());
        assert_eq!(call("[1]").parse_arguments().unwrap(), json!([1]));
    }

    #[test]
    fn parse_arguments_as_a_struct() {
        #[derive(Deserialize, PartialEq, Debug)]
        struct P {
            a: u8,
        }
        assert_eq!(
            call(r#"{"a":7}"#).parse_arguments_as::<P>().unwrap(),
            P { a: 7 }
        );
        assert!(call(r#"{"a":700}"#).parse_arguments_as::<P>().is_err());
    }

    #[test]
    fn results_render_for_models() {
        let ok = ToolResult::success_json("c", "t", json!({"answer": 42}));
        assert_eq!(ok.text(), r#"{"answer":42}"#);
        let err = ToolResult::error("c", "t", "boom").with_execution_time(7);
        assert_eq!(err.text(), "Error: boom");
        assert!(!err.success);
        assert_eq!(err.execution_time_ms, Some(7));
        let back: ToolResult = serde_json::from_str(&serde_json::to_string(&err).unwrap()).unwrap();
        assert_eq!(back, err);
    }

    #[test]
    fn protocol_round_trip_keeps_codes() {
        let c = call("{}");
        let denied = ToolUseResult::permission_denied("r1", "the user", "no");
        let r = ToolResult::from_protocol(&c, &denied);
        assert!(!r.success);
        assert_eq!(
            r.text(),
            "Error: permission_denied: Permission denied by the user: no"
        );

        let mut m = Map::new();
        m.insert("content".into(), json!("hi"));
        let r = ToolResult::from_protocol(&c, &ToolUseResult::ok("r1", m.clone()));
        assert_eq!(r.content, ToolResultContent::Json(Value::Object(m.clone())));
        assert_eq!(r.to_protocol("r1", None), ToolUseResult::ok("r1", m));

        let t = ToolResult::success("c", "t", "plain").to_protocol("r2", None);
        assert_eq!(t.result.unwrap()["text"], "plain");
        let n = ToolResult::success_json("c", "t", json!(3)).to_protocol("r3", None);
        assert_eq!(n.result.unwrap()["value"], 3);
        let e = ToolResult::error("c", "t", "late").to_protocol("r4", Some(ToolErrorCode::Timeout));
        assert_eq!(e.error_code, Some(ToolErrorCode::Timeout));
        assert_eq!(e.error_message.as_deref(), Some("late"));
    }

    #[test]
    fn error_codes_map_to_the_protocol() {
        assert_eq!(
            ToolCallError::Timeout(5).protocol_code(),
            ToolErrorCode::Timeout
        );
        assert_eq!(
            ToolCallError::Denied("x".into()).protocol_code(),
            ToolErrorCode::PermissionDenied
        );
        assert_eq!(
            ToolCallError::ToolNotFound("x".into()).protocol_code(),
            ToolErrorCode::UnknownTool
        );
    }
}
