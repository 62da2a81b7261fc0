//! Read queries over a connection: conversation list, timeline, audit log, settings.
//! Every function here is synchronous; [`crate::Store`] runs them off the caller's thread.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{Error, Result, SqlContext};
use crate::model::{
    Attachment, AuditEntry, AuditPage, Consent, Conversation, ConversationId, ConversationPage,
    ConversationSummary, Cursor, Decision, Message, Millis, NewAttachment, NewConsent,
    NewProtocolError, NewStatusChange, ProtocolError, StatusChange, StoredJson, Timeline,
    TimelineItem, ToolCall, ToolCallState, Truncation, column,
};

/// Largest page a query returns, whatever the caller asks for.
pub const MAX_PAGE: u32 = 1000;

/// Filters for the tool-call audit log. Every filter is optional; they combine with AND.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditQuery {
    /// Only calls of this tool.
    pub tool_name: Option<String>,
    /// Only calls with at least one consent decision of this kind.
    pub decision: Option<Decision>,
    /// Only calls in this state.
    pub state: Option<ToolCallState>,
    /// Only calls initiated at or after this time.
    pub from: Option<Millis>,
    /// Only calls initiated before this time.
    pub until: Option<Millis>,
    /// Page size (capped at [`MAX_PAGE`]; 0 means 50).
    pub limit: u32,
    /// Continue after this cursor (from a previous page's `next`).
    pub before: Option<Cursor>,
}

fn page_size(limit: u32) -> u32 {
    match limit {
        0 => 50,
        n => n.min(MAX_PAGE),
    }
}

fn truncation(stored: &str, original: Option<i64>) -> Option<Truncation> {
    original.map(|o| Truncation {
        original_bytes: u64::try_from(o).unwrap_or(0),
        stored_bytes: stored.len() as u64,
    })
}

/// Stored prefix plus the visible note.
fn with_note(mut stored: String, t: &Truncation) -> String {
    stored.push('\n');
    stored.push_str(&t.note());
    stored
}

fn stored_json(text: String, original: Option<i64>, column: &'static str) -> Result<StoredJson> {
    match truncation(&text, original) {
        Some(t) => Ok(StoredJson::Truncated {
            text: with_note(text, &t),
            truncation: t,
        }),
        None => serde_json::from_str(&text)
            .map(|value| StoredJson::Json { value })
            .map_err(|_| Error::Corrupt {
                column,
                value: text.chars().take(80).collect(),
            }),
    }
}

const CONVERSATION_COLS: &str = "id, title, room, assistant_identity, started_at, ended_at, seq";

fn conversation_row(r: &Row<'_>) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: ConversationId(r.get(0)?),
        title: r.get(1)?,
        room: r.get(2)?,
        assistant_identity: r.get(3)?,
        started_at: r.get(4)?,
        ended_at: r.get(5)?,
        seq: r.get(6)?,
    })
}

const MESSAGE_COLS: &str =
    "conversation_id, id, role, text, original_bytes, created_at, completed_at, seq";

fn message_row(r: &Row<'_>) -> rusqlite::Result<(Message, String)> {
    let text: String = r.get(3)?;
    let original: Option<i64> = r.get(4)?;
    let t = truncation(&text, original);
    let text = match &t {
        Some(t) => with_note(text, t),
        None => text,
    };
    Ok((
        Message {
            conversation_id: ConversationId(r.get(0)?),
            id: r.get(1)?,
            role: crate::model::Role::User, // replaced by the caller after parsing
            text,
            truncation: t,
            created_at: r.get(5)?,
            completed_at: r.get(6)?,
            seq: r.get(7)?,
        },
        r.get(2)?,
    ))
}

fn finish_message((mut m, role): (Message, String)) -> Result<Message> {
    m.role = column(&role)?;
    Ok(m)
}

pub(crate) const TOOL_COLS: &str = "conversation_id, id, message_id, tool_name, server_name, \
    execution, arguments, arguments_original_bytes, state, initiated_at, awaiting_consent_at, \
    running_at, finished_at, duration_ms, executed_by, result, result_original_bytes, \
    error_code, error_message, seq, status";

/// Raw tool-call row; parsed into [`ToolCall`] outside the rusqlite callback so parse
/// errors keep their own type.
pub(crate) struct RawToolCall {
    conversation_id: String,
    id: String,
    message_id: Option<String>,
    tool_name: String,
    server_name: String,
    execution: String,
    arguments: String,
    arguments_original: Option<i64>,
    state: String,
    initiated_at: i64,
    awaiting_consent_at: Option<i64>,
    running_at: Option<i64>,
    finished_at: Option<i64>,
    duration_ms: Option<i64>,
    executed_by: Option<String>,
    result: Option<String>,
    result_original: Option<i64>,
    error_code: Option<String>,
    error_message: Option<String>,
    seq: i64,
    status: Option<String>,
}

pub(crate) fn tool_row(r: &Row<'_>) -> rusqlite::Result<RawToolCall> {
    Ok(RawToolCall {
        conversation_id: r.get(0)?,
        id: r.get(1)?,
        message_id: r.get(2)?,
        tool_name: r.get(3)?,
        server_name: r.get(4)?,
        execution: r.get(5)?,
        arguments: r.get(6)?,
        arguments_original: r.get(7)?,
        state: r.get(8)?,
        initiated_at: r.get(9)?,
        awaiting_consent_at: r.get(10)?,
        running_at: r.get(11)?,
        finished_at: r.get(12)?,
        duration_ms: r.get(13)?,
        executed_by: r.get(14)?,
        result: r.get(15)?,
        result_original: r.get(16)?,
        error_code: r.get(17)?,
        error_message: r.get(18)?,
        seq: r.get(19)?,
        status: r.get(20)?,
    })
}

impl RawToolCall {
    pub(crate) fn parse(self) -> Result<ToolCall> {
        Ok(ToolCall {
            conversation_id: ConversationId(self.conversation_id),
            id: self.id,
            message_id: self.message_id,
            tool_name: self.tool_name,
            server_name: self.server_name,
            execution: column(&self.execution)?,
            arguments: stored_json(self.arguments, self.arguments_original, "arguments")?,
            // Every write sets `status`, and migration 4 filled it in for older rows.
            status: column(self.status.as_deref().unwrap_or_default())?,
            state: column(&self.state)?,
            initiated_at: self.initiated_at,
            awaiting_consent_at: self.awaiting_consent_at,
            running_at: self.running_at,
            finished_at: self.finished_at,
            duration_ms: self.duration_ms,
            executed_by: self.executed_by.map(|e| column(&e)).transpose()?,
            result: self
                .result
                .map(|r| stored_json(r, self.result_original, "result"))
                .transpose()?,
            error_code: self.error_code,
            error_message: self.error_message,
            seq: self.seq,
        })
    }
}

const CONSENT_COLS: &str = "conversation_id, tool_call_id, tool_name, asked, decision, scope, \
    decided_by, asked_at, decided_at, seq, outcome";

type RawConsent = (Consent, Option<String>, String, String);

fn consent_row(r: &Row<'_>) -> rusqlite::Result<RawConsent> {
    Ok((
        Consent {
            decided: NewConsent {
                conversation_id: ConversationId(r.get(0)?),
                tool_call_id: r.get(1)?,
                tool_name: r.get(2)?,
                asked: r.get(3)?,
                outcome: crate::model::Outcome::Denied, // replaced after parsing
                decision: None,                         // replaced after parsing
                scope: r.get(5)?,
                decided_by: crate::model::DecidedBy::User, // replaced after parsing
                asked_at: r.get(7)?,
                decided_at: r.get(8)?,
            },
            seq: r.get(9)?,
        },
        r.get(4)?,
        r.get(6)?,
        r.get(10)?,
    ))
}

fn finish_consent((mut c, decision, by, outcome): RawConsent) -> Result<Consent> {
    c.decided.decision = decision.map(|d| column(&d)).transpose()?;
    c.decided.decided_by = column(&by)?;
    c.decided.outcome = column(&outcome)?;
    Ok(c)
}

fn status_row(r: &Row<'_>) -> rusqlite::Result<StatusChange> {
    Ok(StatusChange {
        change: NewStatusChange {
            conversation_id: ConversationId(r.get(0)?),
            at: r.get(1)?,
            status: r.get(2)?,
            detail: r.get(3)?,
        },
        seq: r.get(4)?,
    })
}

fn error_row(r: &Row<'_>) -> rusqlite::Result<ProtocolError> {
    Ok(ProtocolError {
        logged: NewProtocolError {
            conversation_id: r.get::<_, Option<String>>(0)?.map(ConversationId),
            at: r.get(1)?,
            code: r.get(2)?,
            message: r.get(3)?,
            detail: r.get(4)?,
        },
        seq: r.get(5)?,
    })
}

fn attachment_row(r: &Row<'_>) -> rusqlite::Result<Attachment> {
    Ok(Attachment {
        sent: NewAttachment {
            conversation_id: ConversationId(r.get(0)?),
            id: r.get(1)?,
            message_id: r.get(2)?,
            name: r.get(3)?,
            mime_type: r.get(4)?,
            size: u64::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
            sha256: r.get(6)?,
            data: r.get(7)?,
            sent_at: r.get(8)?,
        },
        seq: r.get(9)?,
    })
}

/// One conversation's header, if it exists.
pub fn conversation(conn: &Connection, id: &ConversationId) -> Result<Option<Conversation>> {
    conn.prepare_cached(&format!(
        "SELECT {CONVERSATION_COLS} FROM conversations WHERE id = ?1"
    ))
    .and_then(|mut s| s.query_row([&id.0], conversation_row).optional())
    .ctx(|| format!("read conversation {id}"))
}

/// Conversations, newest first, `limit` at a time (capped at [`MAX_PAGE`]; 0 means 50).
pub fn list_conversations(
    conn: &Connection,
    limit: u32,
    before: Option<Cursor>,
) -> Result<ConversationPage> {
    let limit = page_size(limit);
    let (at, seq) = before.map_or((i64::MAX, i64::MAX), |c| (c.at, c.seq));
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {CONVERSATION_COLS},
                (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id),
                (SELECT COUNT(*) FROM tool_calls t WHERE t.conversation_id = c.id)
             FROM conversations c
             WHERE (started_at, seq) < (?1, ?2)
             ORDER BY started_at DESC, seq DESC
             LIMIT ?3"
        ))
        .ctx(|| "prepare conversation list".to_owned())?;
    let items = stmt
        .query_map(params![at, seq, limit], |r| {
            Ok(ConversationSummary {
                conversation: conversation_row(r)?,
                message_count: r.get::<_, i64>(7)?.try_into().unwrap_or(0),
                tool_call_count: r.get::<_, i64>(8)?.try_into().unwrap_or(0),
            })
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .ctx(|| "list conversations".to_owned())?;
    let next = if items.len() as u32 == limit {
        items.last().map(|s| Cursor {
            at: s.conversation.started_at,
            seq: s.conversation.seq,
        })
    } else {
        None
    };
    Ok(ConversationPage { items, next })
}

/// Every conversation id, oldest first (for export).
pub(crate) fn all_conversation_ids(conn: &Connection) -> Result<Vec<ConversationId>> {
    conn.prepare_cached("SELECT id FROM conversations ORDER BY started_at, seq")
        .and_then(|mut s| {
            s.query_map([], |r| Ok(ConversationId(r.get(0)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx(|| "list conversation ids".to_owned())
}

/// One conversation with everything in it, merged by time then insertion order.
pub fn timeline(conn: &Connection, id: &ConversationId) -> Result<Timeline> {
    let conversation = conversation(conn, id)?.ok_or_else(|| Error::NotFound {
        what: "conversation",
        id: id.0.clone(),
    })?;
    let ctx = || format!("read timeline of {id}");
    let mut items = Vec::new();

    let raw_messages = conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLS} FROM messages WHERE conversation_id = ?1"
        ))
        .and_then(|mut s| {
            s.query_map([&id.0], message_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx(ctx)?;
    for m in raw_messages {
        items.push(TimelineItem::Message(finish_message(m)?));
    }

    let statuses = conn
        .prepare_cached(
            "SELECT conversation_id, at, status, detail, seq FROM status_changes
             WHERE conversation_id = ?1",
        )
        .and_then(|mut s| {
            s.query_map([&id.0], status_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx(ctx)?;
    items.extend(statuses.into_iter().map(TimelineItem::Status));

    let calls = conn
        .prepare_cached(&format!(
            "SELECT {TOOL_COLS} FROM tool_calls WHERE conversation_id = ?1"
        ))
        .and_then(|mut s| {
            s.query_map([&id.0], tool_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx(ctx)?;
    for c in calls {
        items.push(TimelineItem::ToolCall(c.parse()?));
    }

    let consents = conn
        .prepare_cached(&format!(
            "SELECT {CONSENT_COLS} FROM consents WHERE conversation_id = ?1"
        ))
        .and_then(|mut s| {
            s.query_map([&id.0], consent_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx(ctx)?;
    for c in consents {
        items.push(TimelineItem::Consent(finish_consent(c)?));
    }

    let errors = conn
        .prepare_cached(
            "SELECT conversation_id, at, code, message, detail, seq FROM protocol_errors
             WHERE conversation_id = ?1",
        )
        .and_then(|mut s| {
            s.query_map([&id.0], error_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx(ctx)?;
    items.extend(errors.into_iter().map(TimelineItem::ProtocolError));

    let attachments = conn
        .prepare_cached(
            "SELECT conversation_id, id, message_id, name, mime_type, size, sha256, data,
                    sent_at, seq
             FROM attachments WHERE conversation_id = ?1",
        )
        .and_then(|mut s| {
            s.query_map([&id.0], attachment_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx(ctx)?;
    items.extend(attachments.into_iter().map(TimelineItem::Attachment));

    items.sort_by_key(|i| (i.at(), i.seq()));
    Ok(Timeline {
        conversation,
        items,
    })
}

/// Protocol errors that happened outside any conversation, oldest first.
pub fn unattached_protocol_errors(conn: &Connection) -> Result<Vec<ProtocolError>> {
    conn.prepare_cached(
        "SELECT conversation_id, at, code, message, detail, seq FROM protocol_errors
         WHERE conversation_id IS NULL ORDER BY at, seq",
    )
    .and_then(|mut s| {
        s.query_map([], error_row)?
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .ctx(|| "read protocol errors".to_owned())
}

/// The tool-call audit log, newest first, with each call's consent decisions.
pub fn audit(conn: &Connection, q: &AuditQuery) -> Result<AuditPage> {
    if let (Some(from), Some(until)) = (q.from, q.until) {
        if from > until {
            return Err(Error::InvalidArgument {
                name: "audit date range",
                reason: format!("from ({from}) is after until ({until})"),
            });
        }
    }
    let limit = page_size(q.limit);
    let (at, seq) = q.before.map_or((i64::MAX, i64::MAX), |c| (c.at, c.seq));
    let sql = format!(
        "SELECT {TOOL_COLS} FROM tool_calls t
         WHERE (t.initiated_at, t.seq) < (?1, ?2)
           AND (?3 IS NULL OR t.tool_name = ?3)
           AND (?4 IS NULL OR t.state = ?4)
           AND (?5 IS NULL OR t.initiated_at >= ?5)
           AND (?6 IS NULL OR t.initiated_at < ?6)
           AND (?7 IS NULL OR EXISTS (SELECT 1 FROM consents c
                 WHERE c.conversation_id = t.conversation_id AND c.tool_call_id = t.id
                   AND c.decision = ?7))
         ORDER BY t.initiated_at DESC, t.seq DESC
         LIMIT ?8"
    );
    let raw = conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_map(
                params![
                    at,
                    seq,
                    q.tool_name,
                    q.state.map(|s| s.as_str()),
                    q.from,
                    q.until,
                    q.decision.map(|d| d.as_str()),
                    limit
                ],
                tool_row,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .ctx(|| "read audit log".to_owned())?;
    let mut consent_stmt = conn
        .prepare_cached(&format!(
            "SELECT {CONSENT_COLS} FROM consents
             WHERE conversation_id = ?1 AND tool_call_id = ?2 ORDER BY decided_at, seq"
        ))
        .ctx(|| "prepare consent lookup".to_owned())?;
    let mut entries = Vec::with_capacity(raw.len());
    for r in raw {
        let tool_call = r.parse()?;
        let consents = consent_stmt
            .query_map(
                params![tool_call.conversation_id.0, tool_call.id],
                consent_row,
            )
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .ctx(|| format!("read consents of {}", tool_call.id))?
            .into_iter()
            .map(finish_consent)
            .collect::<Result<Vec<_>>>()?;
        entries.push(AuditEntry {
            tool_call,
            consents,
        });
    }
    let next = if entries.len() as u32 == limit {
        entries.last().map(|e| Cursor {
            at: e.tool_call.initiated_at,
            seq: e.tool_call.seq,
        })
    } else {
        None
    };
    Ok(AuditPage { entries, next })
}

/// Settings key for the retention period in days (written by the writer).
pub(crate) const RETENTION_KEY: &str = "retention_days";

/// The retention setting in days (None: keep everything).
pub fn retention_days(conn: &Connection) -> Result<Option<u32>> {
    let v: Option<String> = conn
        .query_row(
            "SELECT value FROM settings WHERE key = ?1",
            [RETENTION_KEY],
            |r| r.get(0),
        )
        .optional()
        .ctx(|| "read retention setting".to_owned())?;
    v.map(|s| {
        s.parse::<u32>().map_err(|_| Error::Corrupt {
            column: "settings.retention_days",
            value: s,
        })
    })
    .transpose()
}
