//! OpenAI chat-completions tool format, also spoken by Ollama, llama.cpp's server and
//! vLLM: tool definitions, messages (assistant `tool_calls`, `role: "tool"` results),
//! whole responses, and streamed `chat.completion.chunk`s.

use serde_json::{Value, json};

use outpost_protocol::ToolDescriptor;

use crate::accumulator::{StreamEvent, ToolCallDelta};
use crate::call::{ToolCall, ToolResult};
use crate::chat::{ChatMessage, ModelTurn};
use crate::error::{Error, Result};

const PROVIDER: &str = "openai";

fn format_err(what: impl Into<String>) -> Error {
    Error::format(PROVIDER, what)
}

/// `{"type":"function","function":{"name","description","parameters"}}` for a tool.
pub fn tool_definition(tool: &ToolDescriptor) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
    })
}

/// Definitions for every tool.
pub fn tool_definitions(tools: &[ToolDescriptor]) -> Vec<Value> {
    tools.iter().map(tool_definition).collect()
}

/// A tool call as it appears in an assistant message's `tool_calls`.
pub fn tool_call_json(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    })
}

/// `{"role":"tool","tool_call_id","content"}` for a result.
pub fn tool_result_message(result: &ToolResult) -> Value {
    json!({
        "role": "tool",
        "tool_call_id": result.tool_call_id,
        "content": result.text(),
    })
}

/// The `messages` array for a conversation.
pub fn messages(history: &[ChatMessage]) -> Vec<Value> {
    history
        .iter()
        .map(|m| match m {
            ChatMessage::System { text } => json!({"role": "system", "content": text}),
            ChatMessage::User { text } => json!({"role": "user", "content": text}),
            ChatMessage::Assistant { text, tool_calls } if tool_calls.is_empty() => {
                json!({"role": "assistant", "content": text})
            }
            ChatMessage::Assistant { text, tool_calls } => json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text.clone()) },
                "tool_calls": tool_calls.iter().map(tool_call_json).collect::<Vec<_>>(),
            }),
            ChatMessage::Tool { result } => tool_result_message(result),
        })
        .collect()
}

/// The provider's error object, if `body` is one.
fn provider_error(body: &Value) -> Option<Error> {
    let e = body.get("error")?;
    let message = match e {
        Value::String(s) => s.clone(),
        other => {
            let msg = other.get("message").and_then(Value::as_str).unwrap_or("");
            let ty = other
                .get("type")
                .or_else(|| other.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("error");
            format!("{ty}: {msg}")
        }
    };
    Some(Error::provider(PROVIDER, message))
}

fn str_field<'a>(v: &'a Value, key: &str, at: &str) -> Result<Option<&'a str>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format_err(format!("{at}.{key} is not a string"))),
    }
}

/// Tool calls from an assistant `message` object.
pub fn tool_calls_from_message(message: &Value) -> Result<Vec<ToolCall>> {
    let Some(calls) = message.get("tool_calls").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let calls = calls
        .as_array()
        .ok_or_else(|| format_err("message.tool_calls is not an array"))?;
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = format!("tool_calls[{i}]");
            let f = c
                .get("function")
                .ok_or_else(|| format_err(format!("{at} has no function")))?;
            let id =
                str_field(c, "id", &at)?.ok_or_else(|| format_err(format!("{at} has no id")))?;
            let name = str_field(f, "name", &at)?
                .ok_or_else(|| format_err(format!("{at}.function has no name")))?;
            // Some servers send the arguments as an object instead of a JSON string.
            let arguments = match f.get("arguments") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(Value::String(s)) => s.clone(),
                Some(v @ Value::Object(_)) => v.to_string(),
                Some(_) => {
                    return Err(format_err(format!(
                        "{at}.function.arguments is neither a string nor an object"
                    )));
                }
            };
            Ok(ToolCall::new(id, name, arguments))
        })
        .collect()
}

/// A whole (non-streamed) chat-completion response.
pub fn parse_response(body: &Value) -> Result<ModelTurn> {
    if let Some(e) = provider_error(body) {
        return Err(e);
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| format_err("response has no choices[0]"))?;
    let message = choice
        .get("message")
        .ok_or_else(|| format_err("choices[0] has no message"))?;
    Ok(ModelTurn {
        text: str_field(message, "content", "message")?
            .unwrap_or_default()
            .to_owned(),
        tool_calls: tool_calls_from_message(message)?,
        stop_reason: str_field(choice, "finish_reason", "choices[0]")?.map(str::to_owned),
    })
}

/// The events in one SSE `data:` payload of a streamed response. `[DONE]` gives
/// [`StreamEvent::Done`]; chunks without choices (usage) give nothing.
pub fn parse_stream_data(data: &str) -> Result<Vec<StreamEvent>> {
    if data.trim() == "[DONE]" {
        return Ok(vec![StreamEvent::Done]);
    }
    let chunk: Value = serde_json::from_str(data)
        .map_err(|e| format_err(format!("stream chunk is not JSON ({e}): {}", preview(data))))?;
    parse_stream_chunk(&chunk)
}

/// The events in one parsed `chat.completion.chunk`.
pub fn parse_stream_chunk(chunk: &Value) -> Result<Vec<StreamEvent>> {
    if let Some(e) = provider_error(chunk) {
        return Err(e);
    }
    let mut out = Vec::new();
    let Some(choice) = chunk
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return Ok(out);
    };
    if let Some(delta) = choice.get("delta") {
        if let Some(t) = str_field(delta, "content", "delta")?.filter(|t| !t.is_empty()) {
            out.push(StreamEvent::Text(t.to_owned()));
        }
        if let Some(calls) = delta.get("tool_calls").filter(|v| !v.is_null()) {
            let calls = calls
                .as_array()
                .ok_or_else(|| format_err("delta.tool_calls is not an array"))?;
            for (pos, c) in calls.iter().enumerate() {
                let at = format!("delta.tool_calls[{pos}]");
                // `index` is required by OpenAI; some servers omit it when there is one call.
                let index = match c.get("index") {
                    None => pos,
                    Some(v) => v
                        .as_u64()
                        .and_then(|i| usize::try_from(i).ok())
                        .ok_or_else(|| format_err(format!("{at}.index is not an index")))?,
                };
                let f = c.get("function").unwrap_or(&Value::Null);
                let arguments_delta = match f.get("arguments") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(v @ Value::Object(_)) => v.to_string(),
                    Some(_) => {
                        return Err(format_err(format!(
                            "{at}.function.arguments is not a string"
                        )));
                    }
                };
                out.push(StreamEvent::ToolCall(ToolCallDelta {
                    index,
                    id: str_field(c, "id", &at)?.map(str::to_owned),
                    name: str_field(f, "name", &at)?.map(str::to_owned),
                    arguments_delta,
                }));
            }
        }
    }
    if let Some(r) = str_field(choice, "finish_reason", "choices[0]")? {
        out.push(StreamEvent::Stop(r.to_owned()));
    }
    Ok(out)
}

pub(crate) fn preview(s: &str) -> String {
    let mut p: String = s.chars().take(80).collect();
    if p.len() < s.len() {
        p.push('…');
    }
    p
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::accumulator::TurnAccumulator;

    fn descriptor() -> ToolDescriptor {
        crate::test_support::read_only_tool(
            "read_local_file",
            "Read a file",
            json!({"type": "object", "properties": {"filePath": {"type": "string"}}}),
        )
    }

    #[test]
    fn tool_definitions_have_the_function_shape() {
        assert_eq!(
            tool_definitions(&[descriptor()]),
            [json!({"type": "function", "function": {
                "name": "read_local_file",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"filePath": {"type": "string"}}}
            }})]
        );
    }

    #[test]
    fn conversation_messages() {
        let call = ToolCall::new("call_1", "read_local_file", r#"{"filePath":"/a"}"#);
        let history = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("read /a"),
            ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![call.clone()],
            },
            ChatMessage::tool(ToolResult::success_json(
                "call_1",
                "read_local_file",
                json!({"content": "x"}),
            )),
            ChatMessage::assistant("It says x."),
        ];
        assert_eq!(
            messages(&history),
            [
                json!({"role": "system", "content": "be brief"}),
                json!({"role": "user", "content": "read /a"}),
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "read_local_file", "arguments": "{\"filePath\":\"/a\"}"}}
                ]}),
                json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"content\":\"x\"}"}),
                json!({"role": "assistant", "content": "It says x."}),
            ]
        );
    }

    #[test]
    fn whole_response_with_tool_calls() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": {"y": 2}}}
                ]}}]
        });
        let turn = parse_response(&body).unwrap();
        assert_eq!(turn.text, "");
        assert_eq!(turn.stop_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            turn.tool_calls,
            [
                ToolCall::new("call_a", "f", "{\"x\":1}"),
                ToolCall::new("call_b", "g", "{\"y\":2}")
            ]
        );
    }

    #[test]
    fn malformed_responses_are_format_errors() {
        for bad in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": [{}]}),
            json!({"choices": [{"message": {"content": 5}}]}),
            json!({"choices": [{"message": {"tool_calls": {}}}]}),
            json!({"choices": [{"message": {"tool_calls": [{"function": {"name": "f"}}]}}]}),
            json!({"choices": [{"message": {"tool_calls": [{"id": "x", "function": {}}]}}]}),
            json!({"choices": [{"message": {"tool_calls": [{"id": "x", "function": {"name": "f", "arguments": 3}}]}}]}),
        ] {
            assert!(
                matches!(parse_response(&bad), Err(Error::Format { .. })),
                "{bad}"
            );
        }
        let e = parse_response(
            &json!({"error": {"message": "bad key", "type": "invalid_request_error"}}),
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "openai reported an error: invalid_request_error: bad key"
        );
    }

    #[test]
    fn streamed_chunks_accumulate() {
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"look."},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"read_local_file","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"file"}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"Path\":\"/a\"}"}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"total_tokens":5}}"#,
            "[DONE]",
        ];
        let mut acc = TurnAccumulator::new();
        let mut shown = String::new();
        for c in chunks {
            for ev in parse_stream_data(c).unwrap() {
                if let Some(t) = acc.apply(ev).unwrap() {
                    shown.push_str(&t);
                }
            }
        }
        assert!(acc.is_done());
        assert_eq!(shown, "Let me look.");
        let turn = acc.finish().unwrap();
        assert_eq!(turn.text, "Let me look.");
        assert_eq!(turn.stop_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            turn.tool_calls,
            [ToolCall::new(
                "call_x",
                "read_local_file",
                r#"{"filePath":"/a"}"#
            )]
        );
    }

    #[test]
    fn bad_stream_data_is_an_error() {
        assert!(matches!(
            parse_stream_data("{not json"),
            Err(Error::Format { .. })
        ));
        assert!(matches!(
            parse_stream_data(r#"{"choices":[{"delta":{"tool_calls":[{"index":"0"}]}}]}"#),
            Err(Error::Format { .. })
        ));
        assert!(matches!(
            parse_stream_data(r#"{"error":{"message":"overloaded"}}"#),
            Err(Error::Provider { .. })
        ));
        assert!(parse_stream_data(r#"{"object":"x"}"#).unwrap().is_empty());
    }
}
