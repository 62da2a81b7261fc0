//! The history in the app: store records → the UI contract's history types here, and
//! [`crate::Desktop`]'s `history_*` commands in `commands`.

mod commands;

use outpost_store::{Executor, Role, TimelineItem};

use std::collections::HashMap;

use crate::contract::{
    AttachmentView, ConversationSummary, ExecutedBy, ExecutionMode, ToolCallRecord, ToolCallStatus,
    TranscriptEntry,
};

/// A conversation's title for lists: its own, else the start time.
pub fn title(c: &outpost_store::Conversation) -> String {
    match &c.title {
        Some(t) if !t.trim().is_empty() => t.clone(),
        _ => format!(
            "Conversation of {}",
            outpost_store::export::format_time(c.started_at)
        ),
    }
}

/// One list row.
pub fn summary(s: &outpost_store::ConversationSummary) -> ConversationSummary {
    let c = &s.conversation;
    ConversationSummary {
        id: c.id.as_str().to_owned(),
        title: title(c),
        assistant_name: c.assistant_identity.clone().unwrap_or_default(),
        started_at: c.started_at,
        updated_at: c.ended_at.unwrap_or(c.started_at),
        message_count: s.message_count,
        tool_call_count: s.tool_call_count,
    }
}

/// The transcript of a stored conversation (its files shown with the user message they
/// went with; small images with their bytes).
pub fn transcript(items: &[TimelineItem]) -> Vec<TranscriptEntry> {
    let mut files: HashMap<&str, Vec<AttachmentView>> = HashMap::new();
    for item in items {
        if let TimelineItem::Attachment(stored) = item {
            let a = &stored.sent;
            files
                .entry(a.message_id.as_str())
                .or_default()
                .push(AttachmentView {
                    id: a.id.clone(),
                    name: a.name.clone(),
                    mime_type: a.mime_type.clone(),
                    size: a.size,
                    sha256: a.sha256.clone(),
                    image: a
                        .data
                        .as_deref()
                        .and_then(|d| crate::attachments::kept_image_url(&a.mime_type, d)),
                });
        }
    }
    items
        .iter()
        .filter_map(|item| match item {
            TimelineItem::Message(m) => Some(match m.role {
                Role::User => TranscriptEntry::User {
                    id: m.id.clone(),
                    text: m.text.clone(),
                    at: m.created_at,
                    speech: None,
                    attachments: files.remove(m.id.as_str()).unwrap_or_default(),
                },
                Role::Assistant => TranscriptEntry::Assistant {
                    id: m.id.clone(),
                    text: m.text.clone(),
                    at: m.created_at,
                    in_reply_to: None,
                },
            }),
            TimelineItem::ToolCall(t) => Some(TranscriptEntry::Tool {
                call: Box::new(tool_call(t)),
            }),
            _ => None,
        })
        .collect()
}

fn tool_call(t: &outpost_store::ToolCall) -> ToolCallRecord {
    // The status the machine gave the call, as the store kept it.
    let status = ToolCallStatus::from(t.status);
    let parameters = match t.arguments.value() {
        Some(serde_json::Value::Object(m)) => m.clone(),
        _ => {
            let mut m = serde_json::Map::new();
            m.insert(
                "_stored".into(),
                serde_json::Value::String(t.arguments.display_text()),
            );
            m
        }
    };
    ToolCallRecord {
        id: t.id.clone(),
        message_id: t.message_id.clone().unwrap_or_default(),
        tool_name: t.tool_name.clone(),
        execution: match t.execution {
            outpost_store::Execution::Server => ExecutionMode::Server,
            outpost_store::Execution::Client => ExecutionMode::Client,
            outpost_store::Execution::Either => ExecutionMode::Either,
        },
        parameters,
        server_name: (!t.server_name.is_empty()).then(|| t.server_name.clone()),
        claims: None,
        timeout_ms: 0,
        status,
        initiated_at: t.initiated_at,
        awaiting_consent_at: t.awaiting_consent_at,
        running_at: t.running_at,
        finished_at: t.finished_at,
        result: t.result.as_ref().map(|r| match r.value() {
            Some(v) => v.clone(),
            None => serde_json::Value::String(r.display_text()),
        }),
        error_code: t.error_code.clone(),
        error_message: t.error_message.clone(),
        executed_by: t.executed_by.map(|e| match e {
            Executor::Client => ExecutedBy::Client,
            Executor::Server => ExecutedBy::Server,
        }),
        detail: None,
        read_only: None,
        destructive: None,
        open_world: None,
    }
}
