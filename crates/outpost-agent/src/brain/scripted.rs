//! The scripted brain: not a language model. It shows every capability of the protocol
//! deterministically, picked from the user's words, for the offline demo and the tests.
//!
//! | the user says (case-insensitive) | what happens |
//! |---|---|
//! | `help` (or anything unrecognised) | lists these phrases |
//! | `read PATH` | `read_local_file {"filePath": PATH}`, run by the app (`client`) |
//! | `list PATH` | `list_directory {"path": PATH}`, run by the app (`client`) |
//! | `calculate EXPR` | `server_calculator`, run by the agent (`server`) |
//! | `compute EXPR` | `calculator`: `either` when the app has a calculator, else `server` |
//! | `time` / `clock` | `current_time`, run by the agent (`server`) |
//! | `timeout` / `slow` | `search_files` over `~` with `timeoutMs: 1`: the app (or, if it never answers, the agent) gives up |
//! | `ssh` / `secret` / `denied` | `read_local_file ~/.ssh/id_rsa`, which the app's secrets list refuses |
//! | an attachment (the app sent a file) | no tool: names each file with its type, size and SHA-256 |
//! | `recall` | no tool: quotes the first thing the user said in this conversation (memory, also of a conversation the app continued from its history) |
//!
//! The checks run in the order of the table from `ssh` up: the first match wins. After
//! the tool's result comes back, the brain describes it in plain words.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use outpost_llm::{ChatMessage, ModelTurn, ToolCall, ToolResult, ToolResultContent};

use super::{Brain, BrainRequest, Deltas};
use crate::error::Result;

/// The name the app shows: it must never pass for an AI.
pub const DEMO_NAME: &str = "Outpost demo (scripted, not an AI)";

/// The `timeoutMs` of the timeout demo.
pub const TIMEOUT_DEMO_MS: u32 = 1;

/// The help text, also the answer to anything unrecognised.
pub const HELP: &str = "I am a scripted demo, not an AI. Try one of these:\n\
- `read /path/to/file` — the app reads a file (you may be asked to allow it)\n\
- `list /path/to/folder` — the app lists a folder\n\
- `calculate 6 * 7` — I calculate on the server\n\
- `compute 2 ^ 10` — a tool either side may run (the app if it can)\n\
- `time` — I read the server's clock\n\
- `timeout` — a tool call that runs out of time\n\
- `ssh` — a request the app refuses (your SSH key is off limits)\n\
- `recall` — I quote the first thing you said in this conversation";

/// The scripted demo brain.
#[derive(Debug)]
pub struct ScriptedBrain {
    delay: Duration,
    next: AtomicU64,
}

impl ScriptedBrain {
    /// A brain that pauses `delay` between streamed words (so the UI visibly streams).
    pub fn new(delay: Duration) -> Self {
        Self {
            delay,
            next: AtomicU64::new(1),
        }
    }

    fn call(&self, prefix: &str, name: &str, args: Value) -> ToolCall {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        ToolCall::from_value(format!("{prefix}_{n}"), name, &args)
    }

    /// What to do for `text`: the words to say and the tool to call, if any.
    pub fn plan(&self, text: &str) -> (String, Option<ToolCall>) {
        let lower = text.to_ascii_lowercase();
        let has = |w: &str| word_at(&lower, w).is_some();
        if has("ssh") || has("secret") || has("denied") || has("deny") {
            let c = self.call(
                "scripted",
                "read_local_file",
                json!({"filePath": "~/.ssh/id_rsa"}),
            );
            return (
                "I'll ask the app for your SSH private key — it should refuse.".into(),
                Some(c),
            );
        }
        if has("timeout") || has("slow") {
            let c = self.call(
                "timeout",
                "search_files",
                json!({"root": "~", "contains": "outpost-timeout-demo"}),
            );
            return (
                format!(
                    "I'll start a search with a {TIMEOUT_DEMO_MS} ms limit; it cannot finish in time."
                ),
                Some(c),
            );
        }
        if let Some(path) = argument(text, &lower, "read", &["the file ", "file "]) {
            let c = self.call("scripted", "read_local_file", json!({"filePath": path}));
            return (format!("I'll ask the app to read `{path}`."), Some(c));
        }
        if let Some(path) = argument(
            text,
            &lower,
            "list",
            &["the folder ", "folder ", "directory "],
        ) {
            let c = self.call("scripted", "list_directory", json!({"path": path}));
            return (format!("I'll ask the app to list `{path}`."), Some(c));
        }
        if let Some(expr) = argument(text, &lower, "calculate", &[]) {
            let c = self.call("scripted", "server_calculator", json!({"expression": expr}));
            return (format!("Calculating `{expr}` on the server."), Some(c));
        }
        if let Some(expr) = argument(text, &lower, "compute", &[]) {
            let c = self.call("scripted", "calculator", json!({"expression": expr}));
            return (
                format!("Computing `{expr}` with whichever side can."),
                Some(c),
            );
        }
        if has("time") || has("clock") {
            let c = self.call("scripted", "current_time", json!({}));
            return ("Reading the server's clock.".into(), Some(c));
        }
        (HELP.to_owned(), None)
    }

    async fn say(&self, text: &str, deltas: &Deltas) {
        let mut piece = String::new();
        for ch in text.chars() {
            piece.push(ch);
            if ch == ' ' || ch == '\n' {
                let _ = deltas.send(std::mem::take(&mut piece));
                if !self.delay.is_zero() {
                    tokio::time::sleep(self.delay).await;
                }
            }
        }
        if !piece.is_empty() {
            let _ = deltas.send(piece);
        }
    }
}

/// The answer to `recall`: the first user message of what came before.
fn recall(before: &[ChatMessage]) -> String {
    match before.iter().find_map(|m| match m {
        ChatMessage::User { text } => Some(text.as_str()),
        _ => None,
    }) {
        Some(first) => format!("The first thing you said in this conversation was: “{first}”"),
        None => "This conversation has nothing earlier to recall.".to_owned(),
    }
}

/// Byte offset of `word` as a whole word in `lower`.
fn word_at(lower: &str, word: &str) -> Option<usize> {
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(i) = lower[from..].find(word).map(|i| i + from) {
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let end = i + word.len();
        let after_ok = end == lower.len() || !bytes[end].is_ascii_alphanumeric();
        if before_ok && after_ok {
            return Some(i);
        }
        from = end;
    }
    None
}

/// The text after `keyword` (original case), without filler words, quotes and a final
/// question mark; `None` when the keyword is absent or nothing follows it.
fn argument(text: &str, lower: &str, keyword: &str, fillers: &[&str]) -> Option<String> {
    let at = word_at(lower, keyword)? + keyword.len();
    // ASCII lowercasing keeps byte offsets, so `at` is valid in `text` too.
    let mut rest = text.get(at..)?.trim();
    for f in fillers {
        if rest.to_ascii_lowercase().starts_with(f) {
            rest = rest[f.len()..].trim();
        }
    }
    let rest = rest
        .trim_end_matches(['?', '!'])
        .trim_matches(|c| c == '"' || c == '\'' || c == '`')
        .trim();
    (!rest.is_empty()).then(|| rest.to_owned())
}

/// Describes a tool's result in plain words.
pub fn describe(call: &ToolCall, result: &ToolResult) -> String {
    let name = &call.name;
    if !result.success {
        let text = match &result.content {
            ToolResultContent::Error(e) | ToolResultContent::Text(e) => e.clone(),
            ToolResultContent::Json(v) => v.to_string(),
        };
        let (code, message) = text.split_once(": ").unwrap_or(("execution_error", &text));
        return match code {
            "timeout" => format!("The `{name}` call timed out: {message}"),
            "permission_denied" => format!("The app refused the `{name}` call: {message}"),
            "unknown_tool" => format!("The app does not offer `{name}`: {message}"),
            "cancelled" => format!("The `{name}` call was cancelled: {message}"),
            _ => format!("The `{name}` call failed: {message}"),
        };
    }
    let v = match &result.content {
        ToolResultContent::Json(v) => v.clone(),
        other => Value::String(other.as_text()),
    };
    let arg = |k: &str| call.get_string(k).unwrap_or_default();
    match name.as_str() {
        "read_local_file" => {
            let content = v
                .get("content")
                .and_then(Value::as_str)
                .map_or_else(|| v.to_string(), str::to_owned);
            format!(
                "Here is what `{}` contains:\n\n```\n{content}\n```",
                arg("filePath")
            )
        }
        "list_directory" => {
            let names: Vec<&str> = v
                .get("entries")
                .and_then(Value::as_array)
                .map(|e| {
                    e.iter()
                        .filter_map(|x| x.get("name").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            let shown: Vec<&str> = names.iter().take(20).copied().collect();
            format!(
                "`{}` holds {} entries: {}{}",
                arg("path"),
                names.len(),
                shown.join(", "),
                if names.len() > shown.len() {
                    ", …"
                } else {
                    ""
                }
            )
        }
        "calculator" | "server_calculator" => {
            let by = if v.get("evaluatedBy").and_then(Value::as_str) == Some("server") {
                "the assistant's server"
            } else {
                "the Outpost app"
            };
            let answer = v
                .get("answer")
                .map_or_else(|| v.to_string(), Value::to_string);
            format!("`{}` = {answer} (worked out by {by}).", arg("expression"))
        }
        "current_time" => format!(
            "On the assistant's server it is {}.",
            v.get("iso").and_then(Value::as_str).unwrap_or("unknown")
        ),
        _ => format!("`{name}` returned {v}"),
    }
}

#[async_trait]
impl Brain for ScriptedBrain {
    fn assistant_name(&self) -> String {
        DEMO_NAME.to_owned()
    }

    async fn respond(&self, request: BrainRequest<'_>, deltas: &Deltas) -> Result<ModelTurn> {
        let history = request.history;
        let last_user = history
            .iter()
            .rposition(|m| matches!(m, ChatMessage::User { .. }));
        let since = last_user.map_or(history, |i| &history[i + 1..]);
        let calls: Vec<&ToolCall> = since
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Assistant { tool_calls, .. } => Some(tool_calls.iter()),
                _ => None,
            })
            .flatten()
            .collect();
        let results: Vec<&ToolResult> = since
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { result } => Some(result),
                _ => None,
            })
            .collect();
        if !results.is_empty() {
            let text = results
                .iter()
                .map(|r| match calls.iter().find(|c| c.id == r.tool_call_id) {
                    Some(c) => describe(c, r),
                    None => r.text(),
                })
                .collect::<Vec<_>>()
                .join("\n\n");
            self.say(&text, deltas).await;
            return Ok(ModelTurn {
                text,
                ..ModelTurn::default()
            });
        }
        let said = match last_user.map(|i| &history[i]) {
            Some(ChatMessage::User { text }) => text.as_str(),
            _ => "",
        };
        let attached: Vec<&str> = said
            .lines()
            .filter_map(|l| l.strip_prefix("[attachment: ")?.strip_suffix(']'))
            .collect();
        let (text, call) = if !attached.is_empty() {
            (format!("You gave me: {}.", attached.join("; ")), None)
        } else if word_at(&said.to_ascii_lowercase(), "recall").is_some() {
            (recall(&history[..last_user.unwrap_or(0)]), None)
        } else {
            self.plan(said)
        };
        self.say(&text, deltas).await;
        Ok(ModelTurn {
            text,
            tool_calls: call.into_iter().collect(),
            stop_reason: None,
        })
    }

    fn timeout_hint(&self, call: &ToolCall) -> Option<u32> {
        call.id.starts_with("timeout_").then_some(TIMEOUT_DEMO_MS)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn plan(text: &str) -> (String, Option<ToolCall>) {
        ScriptedBrain::new(Duration::ZERO).plan(text)
    }

    #[test]
    fn trigger_phrases_pick_tools() {
        let cases = [
            (
                "read /tmp/notes.txt",
                "read_local_file",
                json!({"filePath": "/tmp/notes.txt"}),
            ),
            (
                "Please READ the file '/tmp/a b.txt'?",
                "read_local_file",
                json!({"filePath": "/tmp/a b.txt"}),
            ),
            (
                "list ~/Documents",
                "list_directory",
                json!({"path": "~/Documents"}),
            ),
            (
                "calculate 6 * 7",
                "server_calculator",
                json!({"expression": "6 * 7"}),
            ),
            (
                "compute 2 ^ 10",
                "calculator",
                json!({"expression": "2 ^ 10"}),
            ),
            ("what time is it?", "current_time", json!({})),
            (
                "show the timeout demo",
                "search_files",
                json!({"root": "~", "contains": "outpost-timeout-demo"}),
            ),
            (
                "read my ssh key",
                "read_local_file",
                json!({"filePath": "~/.ssh/id_rsa"}),
            ),
        ];
        for (text, tool, args) in cases {
            let (_, call) = plan(text);
            let call = call.unwrap_or_else(|| panic!("no tool for {text}"));
            assert_eq!(call.name, tool, "{text}");
            assert_eq!(call.parse_arguments().unwrap(), args, "{text}");
        }
        for text in ["help", "", "hello there", "read", "already"] {
            let (said, call) = plan(text);
            assert!(call.is_none(), "{text}");
            assert_eq!(said, HELP);
        }
    }

    #[test]
    fn timeout_demo_gets_its_hint() {
        let b = ScriptedBrain::new(Duration::ZERO);
        let (_, call) = b.plan("timeout");
        assert_eq!(b.timeout_hint(&call.unwrap()), Some(TIMEOUT_DEMO_MS));
        let (_, call) = b.plan("read /a");
        assert_eq!(b.timeout_hint(&call.unwrap()), None);
    }

    #[tokio::test]
    async fn answers_from_results_and_streams_every_word() {
        let b = ScriptedBrain::new(Duration::ZERO);
        let call = ToolCall::from_value(
            "scripted_1",
            "read_local_file",
            &json!({"filePath": "/n.txt"}),
        );
        let history = vec![
            ChatMessage::user("read /n.txt"),
            ChatMessage::Assistant {
                text: "I'll ask the app to read `/n.txt`.".into(),
                tool_calls: vec![call],
            },
            ChatMessage::tool(ToolResult::success_json(
                "scripted_1",
                "read_local_file",
                json!({"content": "hello world"}),
            )),
        ];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let turn = b
            .respond(
                BrainRequest {
                    history: &history,
                    tools: &[],
                },
                &tx,
            )
            .await
            .unwrap();
        assert!(turn.tool_calls.is_empty());
        assert_eq!(
            turn.text,
            "Here is what `/n.txt` contains:\n\n```\nhello world\n```"
        );
        drop(tx);
        let mut streamed = String::new();
        while let Some(d) = rx.recv().await {
            streamed.push_str(&d);
        }
        assert_eq!(streamed, turn.text);
    }

    #[tokio::test]
    async fn recall_quotes_the_first_thing_said_before() {
        let b = ScriptedBrain::new(Duration::ZERO);
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let earlier = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("remember the otter"),
            ChatMessage::Assistant {
                text: "Noted.".into(),
                tool_calls: Vec::new(),
            },
            ChatMessage::user("and the heron"),
            ChatMessage::user("recall please"),
        ];
        let mut answers = Vec::new();
        for history in [earlier, vec![ChatMessage::user("recall")]] {
            let request = BrainRequest {
                history: &history,
                tools: &[],
            };
            answers.push(b.respond(request, &tx).await.unwrap().text);
        }
        assert_eq!(
            answers,
            [
                "The first thing you said in this conversation was: “remember the otter”",
                "This conversation has nothing earlier to recall."
            ]
        );
    }

    #[test]
    fn failures_are_described_by_code() {
        let call = ToolCall::from_value(
            "c",
            "read_local_file",
            &json!({"filePath": "~/.ssh/id_rsa"}),
        );
        let denied = ToolResult::error(
            "c",
            "read_local_file",
            "permission_denied: Permission denied by your policy: secrets",
        );
        assert_eq!(
            describe(&call, &denied),
            "The app refused the `read_local_file` call: Permission denied by your policy: secrets"
        );
        let late = ToolResult::error(
            "c",
            "read_local_file",
            "timeout: Tool execution exceeded timeout of 1ms",
        );
        assert!(describe(&call, &late).starts_with("The `read_local_file` call timed out"));
        let calc = ToolCall::from_value("d", "calculator", &json!({"expression": "6*7"}));
        let by_app = ToolResult::success_json("d", "calculator", json!({"answer": 42}));
        assert_eq!(
            describe(&calc, &by_app),
            "`6*7` = 42 (worked out by the Outpost app)."
        );
        let by_server = ToolResult::success_json(
            "d",
            "calculator",
            json!({"answer": 42, "evaluatedBy": "server"}),
        );
        assert!(describe(&calc, &by_server).ends_with("(worked out by the assistant's server)."));
    }
}
