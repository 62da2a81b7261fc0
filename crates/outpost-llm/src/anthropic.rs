//! Anthropic messages API tool format: tool definitions (`input_schema`), `tool_use` and
//! `tool_result` content blocks, whole responses, and streamed events
//! (`content_block_start` / `input_json_delta` / `content_block_stop`, …).

use serde_json::{Value, json};

use outpost_protocol::ToolDescriptor;

use crate::accumulator::{StreamEvent, ToolCallDelta, TurnAccumulator};
use crate::call::{ToolCall, ToolResult};
use crate::chat::{ChatMessage, ModelTurn};
use crate::error::{Error, Result};
use crate::openai::preview;

const PROVIDER: &str = "anthropic";

fn format_err(what: impl Into<String>) -> Error {
    Error::format(PROVIDER, what)
}

/// `{"name","description","input_schema"}` for a tool.
pub fn tool_definition(tool: &ToolDescriptor) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.parameters,
    })
}

/// Definitions for every tool.
pub fn tool_definitions(tools: &[ToolDescriptor]) -> Vec<Value> {
    tools.iter().map(tool_definition).collect()
}

/// A `tool_use` content block. The arguments must be a JSON object.
pub fn tool_use_block(call: &ToolCall) -> Result<Value> {
    Ok(json!({
        "type": "tool_use",
        "id": call.id,
        "name": call.name,
        "input": Value::Object(call.arguments_map()?),
    }))
}

/// A `tool_result` content block.
pub fn tool_result_block(result: &ToolResult) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": result.tool_call_id,
        "content": result.text(),
        "is_error": !result.success,
    })
}

/// The request's `system` text and `messages` array for a conversation. System messages
/// are joined into `system`; consecutive tool results share one user message, as the API
/// requires all results of a turn in the next user message.
pub fn messages(history: &[ChatMessage]) -> Result<(Option<String>, Vec<Value>)> {
    let mut system: Vec<&str> = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    let flush = |results: &mut Vec<Value>, out: &mut Vec<Value>| {
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(results)}));
        }
    };
    for m in history {
        match m {
            ChatMessage::Tool { result } => {
                results.push(tool_result_block(result));
                continue;
            }
            ChatMessage::System { text } => system.push(text),
            ChatMessage::User { text } => {
                flush(&mut results, &mut out);
                out.push(json!({"role": "user", "content": text}));
            }
            ChatMessage::Assistant { text, tool_calls } => {
                flush(&mut results, &mut out);
                if tool_calls.is_empty() {
                    out.push(json!({"role": "assistant", "content": text}));
                } else {
                    let mut blocks = Vec::new();
                    if !text.is_empty() {
                        blocks.push(json!({"type": "text", "text": text}));
                    }
                    for c in tool_calls {
                        blocks.push(tool_use_block(c)?);
                    }
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
        }
    }
    flush(&mut results, &mut out);
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    Ok((system, out))
}

fn provider_error(body: &Value) -> Option<Error> {
    if body.get("type").and_then(Value::as_str) != Some("error") && body.get("error").is_none() {
        return None;
    }
    let e = body.get("error").unwrap_or(&Value::Null);
    let ty = e.get("type").and_then(Value::as_str).unwrap_or("error");
    let msg = e.get("message").and_then(Value::as_str).unwrap_or("");
    Some(Error::provider(PROVIDER, format!("{ty}: {msg}")))
}

fn get_str<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format_err(format!("{at} has no string `{key}`")))
}

fn get_index(v: &Value, at: &str) -> Result<usize> {
    v.get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .ok_or_else(|| format_err(format!("{at} has no `index`")))
}

/// A whole (non-streamed) messages response.
pub fn parse_response(body: &Value) -> Result<ModelTurn> {
    if let Some(e) = provider_error(body) {
        return Err(e);
    }
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| format_err("response has no content array"))?;
    let mut turn = ModelTurn {
        stop_reason: body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        ..ModelTurn::default()
    };
    for (i, block) in content.iter().enumerate() {
        let at = format!("content[{i}]");
        match get_str(block, "type", &at)? {
            "text" => turn.text.push_str(get_str(block, "text", &at)?),
            "tool_use" => {
                let input = block
                    .get("input")
                    .filter(|v| v.is_object())
                    .ok_or_else(|| format_err(format!("{at}.input is not an object")))?;
                turn.tool_calls.push(ToolCall::from_value(
                    get_str(block, "id", &at)?,
                    get_str(block, "name", &at)?,
                    input,
                ));
            }
            // Thinking and other block kinds carry nothing for the conversation here.
            _ => {}
        }
    }
    Ok(turn)
}

/// Parses streamed events into [`StreamEvent`]s. Keeps the one piece of state the
/// format needs: which block indexes are tool calls (only those end in
/// [`StreamEvent::ToolCallEnd`]).
#[derive(Debug, Default)]
pub struct StreamParser {
    tool_blocks: std::collections::HashSet<usize>,
}

impl StreamParser {
    /// A parser for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// The events in one SSE `data:` payload (the event name is also inside the JSON as
    /// `type`). `acc` receives the whole `input` of a `tool_use` block start.
    pub fn parse_data(
        &mut self,
        data: &str,
        acc: &mut TurnAccumulator,
    ) -> Result<Vec<StreamEvent>> {
        let ev: Value = serde_json::from_str(data).map_err(|e| {
            format_err(format!("stream event is not JSON ({e}): {}", preview(data)))
        })?;
        self.parse_event(&ev, acc)
    }

    /// The events in one parsed stream event.
    pub fn parse_event(
        &mut self,
        ev: &Value,
        acc: &mut TurnAccumulator,
    ) -> Result<Vec<StreamEvent>> {
        let ty = get_str(ev, "type", "stream event")?;
        let mut out = Vec::new();
        match ty {
            "error" => {
                return Err(provider_error(ev).unwrap_or_else(|| format_err("error event")));
            }
            "content_block_start" => {
                let index = get_index(ev, ty)?;
                let block = ev
                    .get("content_block")
                    .ok_or_else(|| format_err("content_block_start has no content_block"))?;
                match get_str(block, "type", "content_block")? {
                    "tool_use" => {
                        self.tool_blocks.insert(index);
                        out.push(StreamEvent::ToolCall(ToolCallDelta {
                            index,
                            id: Some(get_str(block, "id", "content_block")?.to_owned()),
                            name: Some(get_str(block, "name", "content_block")?.to_owned()),
                            arguments_delta: String::new(),
                        }));
                        if let Some(input) = block
                            .get("input")
                            .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
                        {
                            acc.set_initial_arguments(index, input);
                        }
                    }
                    "text" => {
                        let t = block.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() {
                            out.push(StreamEvent::Text(t.to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = get_index(ev, ty)?;
                let delta = ev
                    .get("delta")
                    .ok_or_else(|| format_err("content_block_delta has no delta"))?;
                match get_str(delta, "type", "delta")? {
                    "text_delta" => out.push(StreamEvent::Text(
                        get_str(delta, "text", "text_delta")?.to_owned(),
                    )),
                    "input_json_delta" => {
                        if !self.tool_blocks.contains(&index) {
                            return Err(format_err(format!(
                                "input_json_delta for block {index}, which is not a tool_use block"
                            )));
                        }
                        out.push(StreamEvent::ToolCall(ToolCallDelta {
                            index,
                            id: None,
                            name: None,
                            arguments_delta: get_str(delta, "partial_json", "input_json_delta")?
                                .to_owned(),
                        }));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = get_index(ev, ty)?;
                if self.tool_blocks.remove(&index) {
                    out.push(StreamEvent::ToolCallEnd(index));
                }
            }
            "message_delta" => {
                if let Some(r) = ev
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    out.push(StreamEvent::Stop(r.to_owned()));
                }
            }
            "message_stop" => out.push(StreamEvent::Done),
            // message_start, ping and event kinds added later carry nothing we need.
            _ => {}
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tool_definitions_use_input_schema() {
        let d = ToolDescriptor {
            timeout_ms: Some(2000),
            ..crate::test_support::read_only_tool("calculator", "Math", json!({"type": "object"}))
        };
        assert_eq!(
            tool_definitions(&[d]),
            [
                json!({"name": "calculator", "description": "Math", "input_schema": {"type": "object"}})
            ]
        );
    }

    #[test]
    fn conversation_groups_tool_results() {
        let history = vec![
            ChatMessage::system("one"),
            ChatMessage::system("two"),
            ChatMessage::user("go"),
            ChatMessage::Assistant {
                text: "Checking.".into(),
                tool_calls: vec![
                    ToolCall::new("toolu_1", "a", r#"{"x":1}"#),
                    ToolCall::new("toolu_2", "b", ""),
                ],
            },
            ChatMessage::tool(ToolResult::success("toolu_1", "a", "A")),
            ChatMessage::tool(ToolResult::error("toolu_2", "b", "nope")),
            ChatMessage::assistant("Done."),
        ];
        let (system, msgs) = messages(&history).unwrap();
        assert_eq!(system.as_deref(), Some("one\n\ntwo"));
        assert_eq!(
            msgs,
            [
                json!({"role": "user", "content": "go"}),
                json!({"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "a", "input": {"x": 1}},
                    {"type": "tool_use", "id": "toolu_2", "name": "b", "input": {}},
                ]}),
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Error: nope", "is_error": true},
                ]}),
                json!({"role": "assistant", "content": "Done."}),
            ]
        );
        let bad = vec![ChatMessage::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall::new("t", "a", "[1]")],
        }];
        assert!(messages(&bad).is_err(), "tool_use input must be an object");
    }

    #[test]
    fn whole_response() {
        let body = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": "I'll read it."},
                {"type": "tool_use", "id": "toolu_9", "name": "read_local_file", "input": {"filePath": "/a"}}
            ]
        });
        let t = parse_response(&body).unwrap();
        assert_eq!(t.text, "I'll read it.");
        assert_eq!(t.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            t.tool_calls,
            [ToolCall::new(
                "toolu_9",
                "read_local_file",
                r#"{"filePath":"/a"}"#
            )]
        );

        let err = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(
            parse_response(&err).unwrap_err().to_string(),
            "anthropic reported an error: overloaded_error: Overloaded"
        );
        for bad in [
            json!({}),
            json!({"content": [{"type": "tool_use", "id": "x", "name": "y", "input": "s"}]}),
            json!({"content": [{"type": "text"}]}),
            json!({"content": [{}]}),
        ] {
            assert!(
                matches!(parse_response(&bad), Err(Error::Format { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn stream_accumulates_text_and_tool_use() {
        let events = [
            r#"{"type":"message_start","message":{"id":"msg_1","content":[]}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading "}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"now."}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_local_file","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"filePath\": \"/a"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"}"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"current_time","input":{}}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}"#,
            r#"{"type":"message_stop"}"#,
        ];
        let mut p = StreamParser::new();
        let mut acc = TurnAccumulator::new();
        for e in events {
            for ev in p.parse_data(e, &mut acc).unwrap() {
                acc.apply(ev).unwrap();
            }
        }
        assert!(acc.is_done());
        let t = acc.finish().unwrap();
        assert_eq!(t.text, "Reading now.");
        assert_eq!(t.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            t.tool_calls,
            [
                ToolCall::new("toolu_1", "read_local_file", r#"{"filePath": "/a"}"#),
                ToolCall::new("toolu_2", "current_time", "{}"),
            ]
        );
    }

    #[test]
    fn bad_stream_events() {
        let mut p = StreamParser::new();
        let mut acc = TurnAccumulator::new();
        assert!(matches!(
            p.parse_data(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
                &mut acc
            ),
            Err(Error::Provider { .. })
        ));
        for bad in [
            "nope",
            r#"{"no":"type"}"#,
            r#"{"type":"content_block_start","content_block":{"type":"text"}}"#,
            r#"{"type":"content_block_delta","index":5,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"x"}}"#,
        ] {
            assert!(
                matches!(p.parse_data(bad, &mut acc), Err(Error::Format { .. })),
                "{bad}"
            );
        }
    }
}
