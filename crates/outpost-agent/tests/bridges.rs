//! The provider brains against a local HTTP server (127.0.0.1:0) that replays recorded
//! provider answers from `tests/fixtures/` (written from the providers' documented
//! formats), asserting the exact requests sent: method, path, headers and JSON body.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use outpost_agent::Error;
use outpost_agent::brain::anthropic::{AnthropicBrain, AnthropicConfig};
use outpost_agent::brain::json::JsonBrain;
use outpost_agent::brain::openai::{OpenAiBrain, OpenAiConfig};
use outpost_agent::brain::{Brain, BrainRequest};
use outpost_llm::{ChatMessage, ModelTurn, ToolCall, ToolResult};
use outpost_protocol::{Map, ToolDescriptor};

#[derive(Debug, Clone)]
struct Recorded {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Value,
}

/// A recorded answer: status, content type, body.
type Answer = (u16, &'static str, String);

#[derive(Clone, Default)]
struct Replay {
    answers: Arc<Mutex<Vec<Answer>>>,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl Replay {
    /// Starts the server; each request gets the next answer (status, content type, fixture).
    async fn start(answers: &[(u16, &'static str, &str)]) -> (Self, String) {
        let replay = Replay::default();
        *replay.answers.lock().unwrap() = answers
            .iter()
            .rev()
            .map(|(s, ct, f)| (*s, *ct, fixture(f)))
            .collect();
        let r = replay.clone();
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let r = r.clone();
                async move {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    r.seen.lock().unwrap().push(Recorded {
                        method,
                        path: uri.path().to_owned(),
                        headers,
                        body,
                    });
                    let (status, ct, text) = r.answers.lock().unwrap().pop().unwrap_or((
                        500,
                        "text/plain",
                        "no more recorded answers".into(),
                    ));
                    (
                        StatusCode::from_u16(status).unwrap(),
                        [(header::CONTENT_TYPE, ct)],
                        text,
                    )
                        .into_response()
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (replay, format!("http://{addr}"))
    }

    fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }
}

const SSE: &str = "text/event-stream";
const JSON: &str = "application/json";

fn tools() -> Vec<ToolDescriptor> {
    let mut params = Map::new();
    params.insert("type".into(), json!("object"));
    params.insert("properties".into(), json!({"filePath": {"type": "string"}}));
    params.insert("required".into(), json!(["filePath"]));
    vec![ToolDescriptor {
        name: "read_local_file".into(),
        description: "Read a file on the user's computer.".into(),
        parameters: params,
        result_schema: None,
        read_only: true,
        destructive: false,
        open_world: false,
        server_name: None,
        timeout_ms: Some(10_000),
    }]
}

fn history() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("Be brief."),
        ChatMessage::user("What is in ~/notes.txt?"),
    ]
}

async fn ask(
    brain: &dyn Brain,
    history: &[ChatMessage],
    tools: &[ToolDescriptor],
) -> (Result<ModelTurn, Error>, String) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let r = brain.respond(BrainRequest { history, tools }, &tx).await;
    drop(tx);
    let mut shown = String::new();
    while let Some(d) = rx.recv().await {
        shown.push_str(&d);
    }
    (r, shown)
}

fn openai(base: &str, key: Option<&str>, stream: bool) -> OpenAiConfig {
    OpenAiConfig {
        base_url: format!("{base}/v1"),
        model: "gpt-4o-mini".into(),
        api_key: key.map(Into::into),
        stream,
    }
}

fn header_str<'a>(r: &'a Recorded, name: &str) -> Option<&'a str> {
    r.headers.get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn openai_whole_response_with_a_tool_call() {
    let (replay, base) = Replay::start(&[(200, JSON, "openai_tool_call.json")]).await;
    let brain = OpenAiBrain::new(openai(&base, Some("sk-test"), false));
    let (turn, shown) = ask(&brain, &history(), &tools()).await;
    let turn = turn.unwrap();
    assert_eq!(shown, "");
    assert_eq!(turn.stop_reason.as_deref(), Some("tool_calls"));
    assert_eq!(
        turn.tool_calls,
        [ToolCall::new(
            "call_Xy12",
            "read_local_file",
            r#"{"filePath":"/home/u/notes.txt"}"#
        )]
    );
    let reqs = replay.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, Method::POST);
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(header_str(r, "authorization"), Some("Bearer sk-test"));
    assert_eq!(header_str(r, "content-type"), Some("application/json"));
    assert_eq!(
        r.body,
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is in ~/notes.txt?"}
            ],
            "stream": false,
            "tools": [{"type": "function", "function": {
                "name": "read_local_file",
                "description": "Read a file on the user's computer.",
                "parameters": {"type": "object", "properties": {"filePath": {"type": "string"}}, "required": ["filePath"]}
            }}]
        })
    );
}

#[tokio::test]
async fn openai_stream_with_text_and_two_tool_calls() {
    let (replay, base) = Replay::start(&[(200, SSE, "openai_stream_tool_call.sse")]).await;
    let brain = OpenAiBrain::new(openai(&base, Some("sk-test"), true));
    let (turn, shown) = ask(&brain, &history(), &[]).await;
    let turn = turn.unwrap();
    assert_eq!(shown, "Let me check.");
    assert_eq!(turn.text, "Let me check.");
    assert_eq!(
        turn.tool_calls,
        [
            ToolCall::new("call_Ab34", "calculator", r#"{"expression": "6*7"}"#),
            ToolCall::new("call_Cd56", "current_time", "{}"),
        ]
    );
    let r = &replay.requests()[0];
    assert_eq!(r.body["stream"], true);
    assert!(r.body.get("tools").is_none(), "no tools key without tools");
}

#[tokio::test]
async fn openai_second_round_sends_tool_results_and_no_key_for_local_servers() {
    let (replay, base) = Replay::start(&[(200, SSE, "openai_stream_text.sse")]).await;
    let brain = OpenAiBrain::new(openai(&base, None, true));
    let mut h = history();
    h.push(ChatMessage::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCall::new(
            "call_1",
            "read_local_file",
            r#"{"filePath":"~/notes.txt"}"#,
        )],
    });
    h.push(ChatMessage::tool(ToolResult::success_json(
        "call_1",
        "read_local_file",
        json!({"content": "hello"}),
    )));
    let (turn, shown) = ask(&brain, &h, &tools()).await;
    assert_eq!(turn.unwrap().text, "The file says hello.");
    assert_eq!(shown, "The file says hello.");
    let r = &replay.requests()[0];
    assert_eq!(
        header_str(r, "authorization"),
        None,
        "Ollama and llama.cpp need no key"
    );
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is in ~/notes.txt?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_local_file", "arguments": "{\"filePath\":\"~/notes.txt\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"content\":\"hello\"}"}
        ])
    );
}

#[tokio::test]
async fn openai_errors_are_reported() {
    let (_, base) = Replay::start(&[(401, JSON, "openai_error_401.json")]).await;
    let brain = OpenAiBrain::new(openai(&base, Some("sk-bad"), true));
    let (r, _) = ask(&brain, &history(), &[]).await;
    match r.unwrap_err() {
        Error::Status { status, body, url } => {
            assert_eq!(status, 401);
            assert!(body.contains("invalid_api_key"), "{body}");
            assert!(url.ends_with("/v1/chat/completions"));
        }
        other => panic!("{other}"),
    }

    let (_, base) = Replay::start(&[(200, SSE, "openai_stream_truncated.sse")]).await;
    let brain = OpenAiBrain::new(openai(&base, None, true));
    let (r, shown) = ask(&brain, &history(), &[]).await;
    assert!(matches!(r, Err(Error::Truncated(_))), "{r:?}");
    assert_eq!(
        shown, "The file says hello.",
        "what arrived was still shown"
    );

    let (_, base) = Replay::start(&[(200, JSON, "openai_stream_text.sse")]).await;
    let brain = OpenAiBrain::new(openai(&base, None, false));
    let (r, _) = ask(&brain, &history(), &[]).await;
    assert!(
        matches!(r, Err(Error::Stream { .. })),
        "SSE where JSON was expected: {r:?}"
    );

    // Nothing listens on this port any more.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let brain = OpenAiBrain::new(openai(&format!("http://127.0.0.1:{port}"), None, true));
    let (r, _) = ask(&brain, &history(), &[]).await;
    assert!(matches!(r, Err(Error::Http { .. })), "{r:?}");
}

fn anthropic(base: &str, stream: bool) -> AnthropicBrain {
    AnthropicBrain::new(AnthropicConfig {
        base_url: base.into(),
        model: "claude-sonnet-4-5".into(),
        api_key: "sk-ant-test".into(),
        max_tokens: 1024,
        stream,
    })
}

#[tokio::test]
async fn anthropic_whole_response() {
    let (replay, base) = Replay::start(&[(200, JSON, "anthropic_tool_use.json")]).await;
    let (turn, shown) = ask(&anthropic(&base, false), &history(), &tools()).await;
    let turn = turn.unwrap();
    assert_eq!(shown, "I'll read that file.");
    assert_eq!(turn.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        turn.tool_calls,
        [ToolCall::new(
            "toolu_01XyZ",
            "read_local_file",
            r#"{"filePath":"/home/u/notes.txt"}"#
        )]
    );
    let r = &replay.requests()[0];
    assert_eq!(r.method, Method::POST);
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(header_str(r, "x-api-key"), Some("sk-ant-test"));
    assert_eq!(header_str(r, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header_str(r, "content-type"), Some("application/json"));
    assert_eq!(header_str(r, "authorization"), None);
    assert_eq!(
        r.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": "What is in ~/notes.txt?"}],
            "stream": false,
            "system": "Be brief.",
            "tools": [{
                "name": "read_local_file",
                "description": "Read a file on the user's computer.",
                "input_schema": {"type": "object", "properties": {"filePath": {"type": "string"}}, "required": ["filePath"]}
            }]
        })
    );
}

#[tokio::test]
async fn anthropic_stream_and_results_round() {
    let (replay, base) = Replay::start(&[(200, SSE, "anthropic_stream_tool_use.sse")]).await;
    let mut h = history();
    h.push(ChatMessage::Assistant {
        text: "Reading.".into(),
        tool_calls: vec![ToolCall::new(
            "toolu_0",
            "read_local_file",
            r#"{"filePath":"~/notes.txt"}"#,
        )],
    });
    h.push(ChatMessage::tool(ToolResult::error(
        "toolu_0",
        "read_local_file",
        "permission_denied: Permission denied by the user: no",
    )));
    let (turn, shown) = ask(&anthropic(&base, true), &h, &tools()).await;
    let turn = turn.unwrap();
    assert_eq!(shown, "Let me look.");
    assert_eq!(
        turn.tool_calls,
        [ToolCall::new(
            "toolu_02IjK",
            "list_directory",
            r#"{"path": "~/Documents"}"#
        )]
    );
    let r = &replay.requests()[0];
    assert_eq!(r.body["stream"], true);
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "user", "content": "What is in ~/notes.txt?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_0", "name": "read_local_file", "input": {"filePath": "~/notes.txt"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_0", "is_error": true,
                 "content": "Error: permission_denied: Permission denied by the user: no"}
            ]}
        ])
    );
}

#[tokio::test]
async fn anthropic_stream_error_event() {
    let (_, base) = Replay::start(&[(200, SSE, "anthropic_stream_error.sse")]).await;
    let (r, _) = ask(&anthropic(&base, true), &history(), &[]).await;
    let e = r.unwrap_err();
    assert_eq!(
        e.to_string(),
        "anthropic reported an error: overloaded_error: Overloaded"
    );
}

#[tokio::test]
async fn json_mode_parses_a_streamed_tool_request_without_showing_it() {
    let (replay, base) = Replay::start(&[(200, SSE, "json_stream_tool_request.sse")]).await;
    let brain = JsonBrain::new(openai(&base, None, true));
    let (turn, shown) = ask(&brain, &history(), &tools()).await;
    let turn = turn.unwrap();
    assert_eq!(shown, "", "the JSON request is not shown to the user");
    assert_eq!(turn.text, "");
    assert_eq!(turn.tool_calls.len(), 1);
    assert_eq!(turn.tool_calls[0].name, "list_directory");
    assert_eq!(
        turn.tool_calls[0].get_string("path").unwrap(),
        "~/Documents"
    );
    let r = &replay.requests()[0];
    assert!(
        r.body.get("tools").is_none(),
        "plain models get no tools array"
    );
    let system = r.body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("Be brief.\n\nYou can use tools."),
        "{system}"
    );
    assert!(system.contains("- read_local_file: Read a file on the user's computer."));
    assert_eq!(
        r.body["messages"][1],
        json!({"role": "user", "content": "What is in ~/notes.txt?"})
    );
}

#[tokio::test]
async fn json_mode_rejects_a_fenced_request_and_asks_again() {
    let (replay, base) = Replay::start(&[
        (200, JSON, "json_fenced.json"),
        (200, JSON, "json_plain.json"),
    ])
    .await;
    let brain = JsonBrain::new(openai(&base, None, false));
    let (turn, shown) = ask(&brain, &history(), &tools()).await;
    let turn = turn.unwrap();
    assert!(
        turn.tool_calls.is_empty(),
        "a fenced request is never executed"
    );
    assert_eq!(turn.text, "Your Documents folder holds 3 files.");
    assert_eq!(shown, "Your Documents folder holds 3 files.");
    let reqs = replay.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let n = msgs.len();
    assert_eq!(msgs[n - 2]["role"], "assistant");
    assert!(
        msgs[n - 2]["content"]
            .as_str()
            .unwrap()
            .starts_with("```json")
    );
    assert_eq!(msgs[n - 1]["role"], "user");
    let correction = msgs[n - 1]["content"].as_str().unwrap();
    assert!(correction.contains("Markdown code fence"), "{correction}");
}
