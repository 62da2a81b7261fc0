//! Streaming: the provider-neutral [`StreamEvent`]s that the [`crate::openai`] and
//! [`crate::anthropic`] chunk parsers produce, the [`ToolCallAccumulator`] that joins
//! tool-call fragments (seed 002), and the [`TurnAccumulator`] that assembles a whole
//! [`ModelTurn`] from a stream.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::call::ToolCall;
use crate::chat::ModelTurn;
use crate::error::{Error, Result};

/// A fragment of a streamed tool call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCallDelta {
    /// Which call (OpenAI: `tool_calls[].index`; Anthropic: the content block index).
    pub index: usize,
    /// The call id, when this fragment carries it.
    pub id: Option<String>,
    /// The tool name, when this fragment carries it.
    pub name: Option<String>,
    /// More argument text to append.
    pub arguments_delta: String,
}

/// One thing learned from a stream chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// Text to append to the answer.
    Text(String),
    /// A tool-call fragment.
    ToolCall(ToolCallDelta),
    /// The tool call at this index is complete (Anthropic `content_block_stop`).
    ToolCallEnd(usize),
    /// Why the model stopped.
    Stop(String),
    /// The stream is over (OpenAI `[DONE]`, Anthropic `message_stop`).
    Done,
}

#[derive(Debug, Default)]
struct PendingToolCall {
    id: String,
    name: String,
    arguments: String,
    /// Arguments given whole at the start (Anthropic `content_block_start.input`), used
    /// when no fragments follow.
    initial: Option<String>,
}

/// Joins streamed tool-call fragments into complete [`ToolCall`]s.
#[derive(Debug, Default)]
pub struct ToolCallAccumulator {
    pending: BTreeMap<usize, PendingToolCall>,
    completed: Vec<ToolCall>,
}

impl ToolCallAccumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a fragment. The id and name are taken from the first fragment that carries
    /// them (later non-empty ones replace them); arguments are appended.
    pub fn process_delta(&mut self, delta: ToolCallDelta) {
        let p = self.pending.entry(delta.index).or_default();
        if let Some(id) = delta.id.filter(|s| !s.is_empty()) {
            p.id = id;
        }
        if let Some(name) = delta.name.filter(|s| !s.is_empty()) {
            p.name = name;
        }
        p.arguments.push_str(&delta.arguments_delta);
    }

    /// Records whole arguments given when a call starts (used if no fragments follow).
    pub fn set_initial_arguments(&mut self, index: usize, arguments: String) {
        self.pending.entry(index).or_default().initial = Some(arguments);
    }

    /// Completes the call at `index`. A call without an id or a name is an error (and is
    /// dropped). Unknown indexes are ignored: providers close text blocks too.
    pub fn complete(&mut self, index: usize) -> Result<()> {
        let Some(p) = self.pending.remove(&index) else {
            return Ok(());
        };
        if p.id.is_empty() {
            return Err(Error::IncompleteToolCall {
                index,
                missing: "id",
            });
        }
        if p.name.is_empty() {
            return Err(Error::IncompleteToolCall {
                index,
                missing: "name",
            });
        }
        let arguments = if p.arguments.trim().is_empty() {
            p.initial.unwrap_or_else(|| "{}".to_owned())
        } else {
            p.arguments
        };
        self.completed.push(ToolCall {
            id: p.id,
            name: p.name,
            arguments,
        });
        Ok(())
    }

    /// Completes every pending call, in index order. The first incomplete call is
    /// reported; the others are still completed.
    pub fn finalize(&mut self) -> Result<()> {
        let indexes: Vec<usize> = self.pending.keys().copied().collect();
        let mut first_err = None;
        for i in indexes {
            if let Err(e) = self.complete(i) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The completed calls.
    pub fn completed(&self) -> &[ToolCall] {
        &self.completed
    }

    /// Takes the completed calls.
    pub fn take_completed(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.completed)
    }

    /// Whether calls are still open.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// How many calls are open.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }
}

/// Assembles a [`ModelTurn`] from [`StreamEvent`]s.
#[derive(Debug, Default)]
pub struct TurnAccumulator {
    text: String,
    tools: ToolCallAccumulator,
    stop_reason: Option<String>,
    done: bool,
}

impl TurnAccumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one event; returns the text delta it carried, if any, for live display.
    pub fn apply(&mut self, event: StreamEvent) -> Result<Option<String>> {
        match event {
            StreamEvent::Text(t) => {
                self.text.push_str(&t);
                return Ok(Some(t));
            }
            StreamEvent::ToolCall(d) => self.tools.process_delta(d),
            StreamEvent::ToolCallEnd(i) => self.tools.complete(i)?,
            StreamEvent::Stop(r) => self.stop_reason = Some(r),
            StreamEvent::Done => self.done = true,
        }
        Ok(None)
    }

    /// Records arguments given whole when a tool call starts.
    pub fn set_initial_arguments(&mut self, index: usize, arguments: &Value) {
        self.tools
            .set_initial_arguments(index, arguments.to_string());
    }

    /// Whether the stream said it is over.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Completes open tool calls and returns the turn.
    pub fn finish(mut self) -> Result<ModelTurn> {
        self.tools.finalize()?;
        Ok(ModelTurn {
            text: self.text,
            tool_calls: self.tools.take_completed(),
            stop_reason: self.stop_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn d(index: usize, id: Option<&str>, name: Option<&str>, args: &str) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments_delta: args.into(),
        }
    }

    #[test]
    fn accumulates_fragments() {
        let mut acc = ToolCallAccumulator::new();
        acc.process_delta(d(0, Some("call_123"), Some("read_file"), r#"{"pa"#));
        acc.process_delta(d(0, None, None, r#"th": "/tmp/test"}"#));
        assert!(acc.has_pending());
        assert_eq!(acc.pending_count(), 1);
        acc.finalize().unwrap();
        assert_eq!(
            acc.completed(),
            [ToolCall::new(
                "call_123",
                "read_file",
                r#"{"path": "/tmp/test"}"#
            )]
        );
        assert_eq!(acc.take_completed().len(), 1);
        assert!(acc.completed().is_empty());
    }

    #[test]
    fn interleaved_calls_come_out_in_index_order() {
        let mut acc = ToolCallAccumulator::new();
        acc.process_delta(d(1, Some("b"), Some("two"), "{\"y\""));
        acc.process_delta(d(0, Some("a"), Some("one"), ""));
        acc.process_delta(d(1, None, None, ":2}"));
        acc.finalize().unwrap();
        let c = acc.take_completed();
        assert_eq!(
            c[0],
            ToolCall::new("a", "one", "{}"),
            "no arguments means {{}}"
        );
        assert_eq!(c[1], ToolCall::new("b", "two", "{\"y\":2}"));
    }

    #[test]
    fn incomplete_calls_are_errors() {
        let mut acc = ToolCallAccumulator::new();
        acc.process_delta(d(0, None, Some("x"), "{}"));
        acc.process_delta(d(1, Some("id"), None, "{}"));
        acc.process_delta(d(2, Some("ok"), Some("fine"), "{}"));
        assert_eq!(
            acc.finalize().unwrap_err(),
            Error::IncompleteToolCall {
                index: 0,
                missing: "id"
            }
        );
        assert_eq!(acc.completed().len(), 1, "the good call survives");
        assert!(!acc.has_pending());
        acc.complete(99).unwrap();
    }

    #[test]
    fn initial_arguments_are_used_without_fragments() {
        let mut t = TurnAccumulator::new();
        t.apply(StreamEvent::ToolCall(d(3, Some("t"), Some("n"), "")))
            .unwrap();
        t.set_initial_arguments(3, &serde_json::json!({"k": 1}));
        t.apply(StreamEvent::ToolCallEnd(3)).unwrap();
        assert_eq!(
            t.apply(StreamEvent::Text("hi".into())).unwrap().as_deref(),
            Some("hi")
        );
        t.apply(StreamEvent::Stop("tool_use".into())).unwrap();
        t.apply(StreamEvent::Done).unwrap();
        assert!(t.is_done());
        assert_eq!(t.text(), "hi");
        let turn = t.finish().unwrap();
        assert_eq!(turn.tool_calls, [ToolCall::new("t", "n", r#"{"k":1}"#)]);
        assert_eq!(turn.stop_reason.as_deref(), Some("tool_use"));
    }
}
