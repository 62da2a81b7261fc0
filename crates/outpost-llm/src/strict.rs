//! Tool calling for models without native tool support (seed 004): the model answers
//! with exactly `{"tool_request": {"name": "<tool>", "arguments": {…}}}` as its whole
//! message, and results come back as `{"tool_result": {…}}` user messages.
//!
//! - [`parse_tool_request`] accepts only that object as the entire message (surrounding
//!   whitespace aside). Text before or after it, Markdown fences, partial JSON, invalid
//!   JSON, extra or duplicate keys and non-object arguments are rejected with a
//!   [`ToolRequestError`] that says which.
//! - [`classify`] tells a plain answer from a tool-request attempt.
//! - [`ToolRequestTracker`] honours a tool result only while a request is pending;
//!   orphan results are ignored.
//! - [`instructions`] is the system prompt that teaches a model the format.

use serde::Deserialize;
use serde_json::{Value, json};

use outpost_protocol::{MAX_NAME_BYTES, Map, ToolDescriptor};

use crate::error::ToolRequestError;

/// A parsed `tool_request`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    pub arguments: Map,
}

impl ToolRequest {
    /// The exact JSON text a model is expected to produce for this request.
    pub fn to_json_text(&self) -> String {
        json!({"tool_request": {"name": self.name, "arguments": self.arguments}}).to_string()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    tool_request: Inner,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Inner {
    name: String,
    arguments: Map,
}

fn snippet(s: &str) -> String {
    let s = s.trim();
    let mut p: String = s.chars().take(40).collect();
    if p.len() < s.len() {
        p.push('…');
    }
    p
}

/// Parses a whole model message as a `tool_request`.
pub fn parse_tool_request(message: &str) -> Result<ToolRequest, ToolRequestError> {
    let text = message.trim();
    if text.is_empty() {
        return Err(ToolRequestError::Empty);
    }
    let start = text.find('{').unwrap_or(text.len());
    let before = &text[..start];
    if !before.is_empty() {
        if before.contains("```") {
            return Err(ToolRequestError::MarkdownFence);
        }
        if start == text.len() {
            // No object at all: say what the JSON parser thinks of the text.
            return Err(json_error(text, &serde_json::from_str::<Value>(text).err()));
        }
        return Err(ToolRequestError::TextBefore(snippet(before)));
    }
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        None => return Err(ToolRequestError::Empty),
        Some(Err(e)) => return Err(json_error(text, &Some(e))),
        Some(Ok(_)) => {}
    }
    let end = stream.byte_offset();
    let after = &text[end..];
    if !after.trim().is_empty() {
        if after.contains("```") {
            return Err(ToolRequestError::MarkdownFence);
        }
        return Err(ToolRequestError::TextAfter(snippet(after)));
    }
    let env: Envelope = serde_json::from_str(&text[..end])
        .map_err(|e| ToolRequestError::Shape(strip_position(&e.to_string())))?;
    let name = env.tool_request.name;
    if name.trim().is_empty() {
        return Err(ToolRequestError::Shape("`name` is empty".into()));
    }
    if name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(ToolRequestError::Shape(format!(
            "`name` must be at most {MAX_NAME_BYTES} bytes without control characters"
        )));
    }
    Ok(ToolRequest {
        name,
        arguments: env.tool_request.arguments,
    })
}

fn strip_position(s: &str) -> String {
    match s.find(" at line ") {
        Some(i) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

fn json_error(text: &str, e: &Option<serde_json::Error>) -> ToolRequestError {
    match e {
        Some(e) if e.is_eof() => ToolRequestError::Partial {
            line: e.line(),
            column: e.column(),
        },
        Some(e) => ToolRequestError::InvalidJson {
            line: e.line(),
            column: e.column(),
            reason: strip_position(&e.to_string()),
        },
        None => ToolRequestError::Shape(format!("expected a JSON object, got {:?}", snippet(text))),
    }
}

/// What a model's message is, in strict-JSON mode.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// An answer for the user.
    Text(String),
    /// A valid tool request.
    ToolRequest(ToolRequest),
    /// An attempt at a tool request that breaks the rules.
    Rejected(ToolRequestError),
}

/// Classifies a whole message: anything that starts with `{` (after whitespace) or
/// mentions `"tool_request"` is an attempt and must parse strictly; the rest is text.
pub fn classify(message: &str) -> Output {
    let t = message.trim_start();
    let attempt = t.starts_with('{')
        || t.starts_with("```") && t.contains('{')
        || message.contains("\"tool_request\"");
    if !attempt {
        return Output::Text(message.to_owned());
    }
    match parse_tool_request(message) {
        Ok(r) => Output::ToolRequest(r),
        Err(e) => Output::Rejected(e),
    }
}

/// The request awaiting its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRequest {
    /// Our id for the request.
    pub id: String,
    /// The tool's name.
    pub name: String,
}

/// Tracks the one outstanding `tool_request` of a strict-JSON conversation.
#[derive(Debug, Default, Clone)]
pub struct ToolRequestTracker {
    pending: Option<PendingRequest>,
}

impl ToolRequestTracker {
    /// No request pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks a request as pending (replacing any earlier one, whose result is then an
    /// orphan).
    pub fn request(&mut self, id: impl Into<String>, name: impl Into<String>) {
        self.pending = Some(PendingRequest {
            id: id.into(),
            name: name.into(),
        });
    }

    /// The pending request, if any.
    pub fn pending(&self) -> Option<&PendingRequest> {
        self.pending.as_ref()
    }

    /// A tool result arrived for `id`. It is honoured (returning the request it answers,
    /// which is no longer pending) only when that request is the pending one; any other
    /// result is an orphan and is ignored (`None`).
    pub fn accept_result(&mut self, id: &str) -> Option<PendingRequest> {
        if self.pending.as_ref().is_some_and(|p| p.id == id) {
            self.pending.take()
        } else {
            None
        }
    }

    /// Forgets the pending request.
    pub fn clear(&mut self) {
        self.pending = None;
    }
}

/// The user message that gives a model a tool's result.
pub fn tool_result_message(name: &str, success: bool, content: &str) -> String {
    json!({"tool_result": {"name": name, "success": success, "content": content}}).to_string()
}

/// System instructions teaching a model the format, listing `tools` with their schemas.
pub fn instructions(tools: &[ToolDescriptor]) -> String {
    let mut s = String::from(
        "You can use tools. To use one, reply with exactly one JSON object and nothing else \
         (no prose, no Markdown, no code fences):\n\
         {\"tool_request\": {\"name\": \"<tool name>\", \"arguments\": {<arguments>}}}\n\
         The arguments must match the tool's JSON Schema. You will then receive a user \
         message {\"tool_result\": {\"name\": …, \"success\": …, \"content\": …}}. Ask for \
         one tool at a time. When you have what you need, answer the user in plain text.\n\
         \nTools:\n",
    );
    for t in tools {
        s.push_str(&format!(
            "- {}: {}\n  arguments schema: {}\n",
            t.name,
            t.description,
            Value::Object(t.parameters.clone())
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const GOOD: &str =
        r#"{"tool_request": {"name": "lookup_weather", "arguments": {"city": "Lisbon"}}}"#;

    #[test]
    fn accepts_the_exact_format() {
        let r = parse_tool_request(GOOD).unwrap();
        assert_eq!(r.name, "lookup_weather");
        assert_eq!(r.arguments["city"], "Lisbon");
        let spaced = format!("\n  {GOOD}\n");
        assert_eq!(
            parse_tool_request(&spaced).unwrap(),
            r,
            "surrounding whitespace is not text"
        );
        assert_eq!(parse_tool_request(&r.to_json_text()).unwrap(), r);
        let empty_args = r#"{"tool_request":{"name":"clock","arguments":{}}}"#;
        assert!(parse_tool_request(empty_args).unwrap().arguments.is_empty());
    }

    #[test]
    fn rejects_surrounding_text() {
        assert_eq!(
            parse_tool_request(&format!("Sure! {GOOD}")).unwrap_err(),
            ToolRequestError::TextBefore("Sure!".into())
        );
        assert_eq!(
            parse_tool_request(&format!("{GOOD} Let me know.")).unwrap_err(),
            ToolRequestError::TextAfter("Let me know.".into())
        );
        assert!(matches!(
            parse_tool_request(&format!("{GOOD}{GOOD}")).unwrap_err(),
            ToolRequestError::TextAfter(_)
        ));
    }

    #[test]
    fn rejects_markdown_fences() {
        for fenced in [
            format!("```json\n{GOOD}\n```"),
            format!("```\n{GOOD}\n```"),
            format!("Here:\n```json\n{GOOD}\n```"),
        ] {
            assert_eq!(
                parse_tool_request(&fenced).unwrap_err(),
                ToolRequestError::MarkdownFence,
                "{fenced}"
            );
        }
    }

    #[test]
    fn rejects_partial_and_invalid_json() {
        let partial = &GOOD[..GOOD.len() - 3];
        assert!(matches!(
            parse_tool_request(partial).unwrap_err(),
            ToolRequestError::Partial { line: 1, .. }
        ));
        let e = parse_tool_request(r#"{"tool_request": {name: "x"}}"#).unwrap_err();
        assert!(
            matches!(
                e,
                ToolRequestError::InvalidJson {
                    line: 1,
                    column: 19,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("invalid JSON at line 1, column 19: key must be a string"),
            "{e}"
        );
        assert!(matches!(
            parse_tool_request("just words").unwrap_err(),
            ToolRequestError::InvalidJson { .. }
        ));
        assert_eq!(
            parse_tool_request("  \n").unwrap_err(),
            ToolRequestError::Empty
        );
    }

    #[test]
    fn rejects_wrong_shapes() {
        for (bad, needle) in [
            (r#"[1]"#, "expected a JSON object"),
            (
                r#"{"tool_call": {"name": "x", "arguments": {}}}"#,
                "unknown field `tool_call`",
            ),
            (
                r#"{"tool_request": {"name": "x"}}"#,
                "missing field `arguments`",
            ),
            (
                r#"{"tool_request": {"name": "x", "arguments": []}}"#,
                "invalid type: sequence",
            ),
            (
                r#"{"tool_request": {"name": "x", "arguments": "{}"}}"#,
                "invalid type: string",
            ),
            (
                r#"{"tool_request": {"name": 5, "arguments": {}}}"#,
                "invalid type: integer",
            ),
            (
                r#"{"tool_request": {"name": "x", "arguments": {}, "why": 1}}"#,
                "unknown field `why`",
            ),
            (
                r#"{"tool_request": {"name": "x", "name": "y", "arguments": {}}}"#,
                "duplicate field `name`",
            ),
            (
                r#"{"tool_request": {"name": " ", "arguments": {}}}"#,
                "`name` is empty",
            ),
            (
                r#"{"tool_request": {"name": "a\nb", "arguments": {}}}"#,
                "control characters",
            ),
            (
                r#"{"tool_request": {"name": "x", "arguments": {}}, "extra": true}"#,
                "unknown field `extra`",
            ),
        ] {
            let e = parse_tool_request(bad).unwrap_err();
            let shown = format!("{e:?} {e}");
            assert!(shown.contains(needle), "{bad}: {shown}");
        }
    }

    #[test]
    fn classify_tells_text_from_attempts() {
        assert_eq!(classify("It is 18°C."), Output::Text("It is 18°C.".into()));
        assert!(matches!(classify(GOOD), Output::ToolRequest(_)));
        assert!(matches!(
            classify(&format!("ok {GOOD}")),
            Output::Rejected(ToolRequestError::TextBefore(_))
        ));
        assert!(matches!(
            classify("{\"tool_request\": {"),
            Output::Rejected(ToolRequestError::Partial { .. })
        ));
        assert!(matches!(
            classify(&format!("```json\n{GOOD}\n```")),
            Output::Rejected(ToolRequestError::MarkdownFence)
        ));
    }

    #[test]
    fn results_only_while_pending() {
        let mut t = ToolRequestTracker::new();
        assert_eq!(t.accept_result("r1"), None, "orphan: nothing pending");
        t.request("r1", "clock");
        assert_eq!(t.pending().unwrap().name, "clock");
        assert_eq!(t.accept_result("r0"), None, "orphan: another id");
        assert_eq!(t.accept_result("r1").unwrap().name, "clock");
        assert_eq!(t.accept_result("r1"), None, "a second result is an orphan");
        t.request("r2", "a");
        t.request("r3", "b");
        assert_eq!(t.accept_result("r2"), None, "superseded request");
        t.clear();
        assert_eq!(t.accept_result("r3"), None);
    }

    #[test]
    fn instructions_and_result_messages() {
        let tools = [crate::test_support::read_only_tool(
            "clock",
            "Current time",
            json!({"type": "object"}),
        )];
        let s = instructions(&tools);
        assert!(s.contains("{\"tool_request\": {\"name\": \"<tool name>\""));
        assert!(s.contains("- clock: Current time\n  arguments schema: {\"type\":\"object\"}"));
        let m: Value = serde_json::from_str(&tool_result_message("clock", true, "12:00")).unwrap();
        assert_eq!(
            m,
            json!({"tool_result": {"name": "clock", "success": true, "content": "12:00"}})
        );
    }
}
