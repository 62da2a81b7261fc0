//! The tools the agent runs itself (`execution: "server"`, or `either` when the app has
//! a tool of the same name and declines it):
//!
//! - `calculator`: arithmetic with the evalexpr crate (the same engine as the app's
//!   calculator, so `either` gives the same answer whoever runs it);
//! - `server_calculator`: the same, but only ever on the server;
//! - `current_time`: the server's clock, in its zone or a named IANA zone.

use std::time::Duration;

use serde_json::{Value, json};

use outpost_llm::{ToolCall, ToolCallError};
use outpost_protocol::{Map, ToolDescriptor};

/// Longest expression accepted, in bytes.
const MAX_EXPRESSION_BYTES: usize = 1_000;
/// Deepest parenthesis nesting accepted.
const MAX_NESTING: usize = 64;

/// The agent's own tools.
#[derive(Debug, Clone)]
pub struct ServerTools {
    tools: Vec<ToolDescriptor>,
}

impl Default for ServerTools {
    fn default() -> Self {
        Self::new()
    }
}

fn schema(v: Value) -> Map {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn descriptor(name: &str, description: &str, parameters: Value, timeout_ms: u32) -> ToolDescriptor {
    ToolDescriptor {
        read_only: true,
        timeout_ms: Some(timeout_ms),
        ..ToolDescriptor::new(name, description, schema(parameters))
    }
}

impl ServerTools {
    /// The built-in set.
    pub fn new() -> Self {
        let expr = json!({
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (2 + 3) * 4 / 7"}},
            "required": ["expression"],
            "additionalProperties": false
        });
        Self {
            tools: vec![
                descriptor(
                    "calculator",
                    "Evaluate an arithmetic expression: + - * / % ^, comparisons, min, max, \
                     floor, round, math::sqrt and more.",
                    expr.clone(),
                    2_000,
                ),
                descriptor(
                    "server_calculator",
                    "Evaluate an arithmetic expression on the assistant's server (never on \
                     the user's computer).",
                    expr,
                    2_000,
                ),
                descriptor(
                    "current_time",
                    "The current date and time on the assistant's server, optionally in an \
                     IANA time zone such as Europe/Lisbon.",
                    json!({
                        "type": "object",
                        "properties": {"timeZone": {"type": "string"}},
                        "additionalProperties": false
                    }),
                    1_000,
                ),
            ],
        }
    }

    /// Their descriptions, for the model.
    pub fn descriptors(&self) -> &[ToolDescriptor] {
        &self.tools
    }

    /// Whether the agent has a tool of this name.
    pub fn has(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name)
    }

    /// The timeout the agent uses for its own tool.
    pub fn timeout_ms(&self, name: &str) -> Option<u32> {
        self.tools
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.timeout_ms)
    }

    /// Runs `call` within `timeout`.
    pub async fn run(&self, call: &ToolCall, timeout: Duration) -> Result<Value, ToolCallError> {
        let work = async {
            match call.name.as_str() {
                "calculator" | "server_calculator" => calculate(call),
                "current_time" => current_time(call),
                other => Err(ToolCallError::ToolNotFound(other.to_owned())),
            }
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(ToolCallError::Timeout(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            )),
        }
    }
}

fn calculate(call: &ToolCall) -> Result<Value, ToolCallError> {
    let expression = call.get_string("expression")?;
    let invalid = |reason: String| ToolCallError::InvalidArguments {
        tool: call.name.clone(),
        reason,
    };
    if expression.len() > MAX_EXPRESSION_BYTES {
        return Err(invalid(format!(
            "expression: longer than {MAX_EXPRESSION_BYTES} bytes"
        )));
    }
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in expression.chars() {
        match c {
            '(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_NESTING {
        return Err(invalid(format!(
            "expression: nested deeper than {MAX_NESTING} parentheses"
        )));
    }
    let value = evalexpr::eval(&expression).map_err(|e| {
        ToolCallError::ExecutionFailed(format!("Cannot evaluate '{expression}': {e}"))
    })?;
    let answer = match value {
        evalexpr::Value::Int(i) => json!(i),
        evalexpr::Value::Float(f) if f.is_finite() => json!(f),
        evalexpr::Value::Float(f) => {
            return Err(ToolCallError::ExecutionFailed(format!(
                "'{expression}' is not a finite number ({f})"
            )));
        }
        evalexpr::Value::Boolean(b) => json!(b),
        evalexpr::Value::String(s) => json!(s),
        other => json!(other.to_string()),
    };
    Ok(json!({"expression": expression, "answer": answer, "evaluatedBy": "server"}))
}

fn current_time(call: &ToolCall) -> Result<Value, ToolCallError> {
    let zone = call.get_string_opt("timeZone")?;
    let tz = match &zone {
        Some(name) => {
            jiff::tz::TimeZone::get(name).map_err(|e| ToolCallError::InvalidArguments {
                tool: call.name.clone(),
                reason: format!("timeZone: unknown time zone '{name}': {e}"),
            })?
        }
        None => jiff::tz::TimeZone::system(),
    };
    let now = jiff::Timestamp::now();
    let zoned = now.to_zoned(tz);
    Ok(json!({
        "iso": zoned.to_string(),
        "timeZone": zoned.time_zone().iana_name().unwrap_or("local"),
        "unixMs": now.as_millisecond(),
        "evaluatedBy": "server",
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall::from_value("c1", name, &args)
    }

    #[tokio::test]
    async fn calculator_answers_and_refuses_bad_input() {
        let t = ServerTools::new();
        let d = Duration::from_secs(1);
        let r = t
            .run(&call("calculator", json!({"expression": "6 * 7"})), d)
            .await
            .unwrap();
        assert_eq!(r["answer"], 42);
        let r = t
            .run(
                &call("server_calculator", json!({"expression": "1 / 4.0"})),
                d,
            )
            .await
            .unwrap();
        assert_eq!(r["answer"], 0.25);
        let e = t
            .run(&call("calculator", json!({"expression": "2 +"})), d)
            .await
            .unwrap_err();
        assert!(matches!(e, ToolCallError::ExecutionFailed(_)), "{e}");
        let e = t.run(&call("calculator", json!({})), d).await.unwrap_err();
        assert!(matches!(e, ToolCallError::MissingArgument { .. }), "{e}");
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        let e = t
            .run(&call("calculator", json!({"expression": deep})), d)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("nested deeper"), "{e}");
        let long = "1+".repeat(600) + "1";
        assert!(
            t.run(&call("calculator", json!({"expression": long})), d)
                .await
                .is_err()
        );
        let e = t.run(&call("nope", json!({})), d).await.unwrap_err();
        assert_eq!(e, ToolCallError::ToolNotFound("nope".into()));
    }

    #[tokio::test]
    async fn clock_reads_zones() {
        let t = ServerTools::new();
        let d = Duration::from_secs(1);
        let r = t
            .run(&call("current_time", json!({"timeZone": "UTC"})), d)
            .await
            .unwrap();
        assert!(r["iso"].as_str().unwrap().ends_with("[UTC]"), "{r}");
        assert!(r["unixMs"].as_i64().unwrap() > 1_600_000_000_000);
        let e = t
            .run(
                &call("current_time", json!({"timeZone": "Mars/Olympus"})),
                d,
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("unknown time zone"), "{e}");
        assert!(t.has("current_time") && !t.has("read_local_file"));
        assert_eq!(t.timeout_ms("calculator"), Some(2000));
        assert_eq!(t.descriptors().len(), 3);
    }
}
