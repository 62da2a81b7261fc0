//! Export as JSON (an [`ExportDocument`], which parses back with serde) or Markdown (for
//! people).

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{
    Consent, ConversationId, Millis, ProtocolError, Role, StatusChange, StoredJson, Timeline,
    TimelineItem, ToolCallState,
};
use crate::query;

/// Value of [`ExportDocument::format`].
pub const EXPORT_FORMAT: &str = "outpost-store-export";
/// Value of [`ExportDocument::version`].
pub const EXPORT_VERSION: u32 = 1;

/// What to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportScope {
    /// One conversation.
    Conversation(ConversationId),
    /// Every conversation, and protocol errors outside any conversation.
    All,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// An [`ExportDocument`] as pretty JSON.
    Json,
    /// A readable Markdown transcript.
    Markdown,
}

/// The JSON export: parse it back with `serde_json::from_str::<ExportDocument>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportDocument {
    /// Always [`EXPORT_FORMAT`].
    pub format: String,
    /// Always [`EXPORT_VERSION`] for this build.
    pub version: u32,
    /// When it was made.
    pub exported_at: Millis,
    /// Conversations, oldest first, each with its full timeline.
    pub conversations: Vec<Timeline>,
    /// Protocol errors outside any conversation (only in whole-store exports).
    pub unattached_protocol_errors: Vec<ProtocolError>,
}

/// Collects the data to export.
pub fn document(conn: &Connection, scope: &ExportScope, now: Millis) -> Result<ExportDocument> {
    let (conversations, unattached) = match scope {
        ExportScope::Conversation(id) => (vec![query::timeline(conn, id)?], Vec::new()),
        ExportScope::All => {
            let ids = query::all_conversation_ids(conn)?;
            let timelines = ids
                .iter()
                .map(|id| query::timeline(conn, id))
                .collect::<Result<Vec<_>>>()?;
            (timelines, query::unattached_protocol_errors(conn)?)
        }
    };
    Ok(ExportDocument {
        format: EXPORT_FORMAT.to_owned(),
        version: EXPORT_VERSION,
        exported_at: now,
        conversations,
        unattached_protocol_errors: unattached,
    })
}

/// Renders a document in `format`.
pub fn render(doc: &ExportDocument, format: ExportFormat) -> Result<String> {
    match format {
        ExportFormat::Json => serde_json::to_string_pretty(doc).map_err(|error| Error::Json {
            context: "encode export",
            error,
        }),
        ExportFormat::Markdown => Ok(markdown(doc)),
    }
}

/// RFC 3339 time in UTC, to the millisecond.
pub fn format_time(ms: Millis) -> String {
    match u64::try_from(ms) {
        Ok(ms) => {
            humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        }
        Err(_) => format!("{ms} ms"),
    }
}

/// A code fence longer than any run of backticks in `body`.
fn fenced(out: &mut String, lang: &str, body: &str) {
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat((longest + 1).max(3));
    let _ = writeln!(out, "{fence}{lang}\n{body}\n{fence}");
}

fn markdown(doc: &ExportDocument) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- Outpost export, {} -->\n",
        format_time(doc.exported_at)
    );
    for t in &doc.conversations {
        timeline_markdown(&mut out, t);
    }
    if !doc.unattached_protocol_errors.is_empty() {
        out.push_str("# Protocol errors outside conversations\n\n");
        for ProtocolError { logged: e, .. } in &doc.unattached_protocol_errors {
            let _ = writeln!(
                out,
                "- {} `{}`: {}",
                format_time(e.at),
                e.code,
                one_line(&e.message)
            );
        }
        out.push('\n');
    }
    out
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

fn timeline_markdown(out: &mut String, t: &Timeline) {
    let c = &t.conversation;
    let title = c.title.as_deref().unwrap_or("Untitled conversation");
    let _ = writeln!(out, "# {}\n", one_line(title));
    let _ = writeln!(out, "- Conversation: `{}`", c.id);
    if let Some(room) = &c.room {
        let _ = writeln!(out, "- Room: `{room}`");
    }
    if let Some(who) = &c.assistant_identity {
        let _ = writeln!(out, "- Assistant: `{who}`");
    }
    let _ = writeln!(out, "- Started: {}", format_time(c.started_at));
    if let Some(end) = c.ended_at {
        let _ = writeln!(out, "- Ended: {}", format_time(end));
    }
    out.push('\n');
    for item in &t.items {
        match item {
            TimelineItem::Message(m) => {
                let who = match m.role {
                    Role::User => "You",
                    Role::Assistant => "Assistant",
                };
                let _ = writeln!(out, "### {who} · {}\n", format_time(m.created_at));
                out.push_str(&m.text);
                out.push_str("\n\n");
            }
            TimelineItem::Status(StatusChange { change: s, .. }) => {
                let _ = write!(
                    out,
                    "*{} · status: {}",
                    format_time(s.at),
                    one_line(&s.status)
                );
                if let Some(d) = &s.detail {
                    let _ = write!(out, " ({})", one_line(d));
                }
                out.push_str("*\n\n");
            }
            TimelineItem::ToolCall(tc) => {
                let server = if tc.server_name.is_empty() {
                    String::new()
                } else {
                    format!(" on `{}`", tc.server_name)
                };
                let _ = writeln!(
                    out,
                    "#### Tool `{}`{server} · {} · {}\n",
                    tc.tool_name,
                    format_time(tc.initiated_at),
                    tc.state
                );
                let _ = writeln!(
                    out,
                    "- Call id: `{}`; execution: {}; executed by: {}",
                    tc.id,
                    tc.execution,
                    tc.executed_by.map_or("nobody", |e| e.as_str())
                );
                if let Some(d) = tc.duration_ms {
                    let _ = writeln!(out, "- Duration: {d} ms");
                }
                if tc.state == ToolCallState::Error {
                    let _ = writeln!(
                        out,
                        "- Error `{}`: {}",
                        tc.error_code.as_deref().unwrap_or("unknown"),
                        one_line(tc.error_message.as_deref().unwrap_or(""))
                    );
                }
                out.push_str("\nArguments:\n\n");
                fenced(out, json_lang(&tc.arguments), &tc.arguments.display_text());
                if let Some(r) = &tc.result {
                    out.push_str("\nResult:\n\n");
                    fenced(out, json_lang(r), &r.display_text());
                }
                out.push('\n');
            }
            TimelineItem::Consent(Consent { decided: cn, .. }) => {
                let _ = write!(
                    out,
                    "> Consent for `{}`: **{}** by {}{} at {}",
                    cn.tool_name,
                    cn.outcome,
                    cn.decided_by,
                    cn.decision.map(|d| format!(" ({d})")).unwrap_or_default(),
                    format_time(cn.decided_at)
                );
                if let Some(scope) = &cn.scope {
                    let _ = write!(out, " (scope: {})", one_line(scope));
                }
                let _ = writeln!(out, "\n> Asked: {}\n", one_line(&cn.asked));
            }
            TimelineItem::Attachment(a) => {
                let a = &a.sent;
                let _ = writeln!(
                    out,
                    "> Attachment `{}` ({}, {} bytes, SHA-256 `{}`) sent at {}\n",
                    one_line(&a.name),
                    one_line(&a.mime_type),
                    a.size,
                    a.sha256,
                    format_time(a.sent_at)
                );
            }
            TimelineItem::ProtocolError(ProtocolError { logged: e, .. }) => {
                let _ = writeln!(
                    out,
                    "> Protocol error `{}` at {}: {}\n",
                    e.code,
                    format_time(e.at),
                    one_line(&e.message)
                );
            }
        }
    }
}

fn json_lang(v: &StoredJson) -> &'static str {
    match v {
        StoredJson::Json { .. } => "json",
        StoredJson::Truncated { .. } => "text",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn fence_outgrows_backticks_in_the_body() {
        let mut out = String::new();
        fenced(&mut out, "text", "a ```` b");
        assert!(out.starts_with("`````text\n"), "{out}");
        assert!(out.ends_with("\n`````\n"), "{out}");
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time(-5), "-5 ms");
    }
}
