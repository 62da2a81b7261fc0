//! The writer thread: owns the only writing connection, drains its queue in batches, applies
//! each write inside a savepoint of one transaction per batch, commits, and only then
//! acknowledges every write of the batch.
//!
//! Why a dedicated thread rather than a tokio task: SQLite calls block (fsync in particular),
//! and the writer must keep going when no async runtime is around (CLI, tests, shutdown).
//! Callers never wait for it unless they choose to await the acknowledgement.

use crate::query::{RETENTION_KEY, retention_days};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use crate::error::{Error, Result, SqlContext};
use crate::model::{
    CallStatus, ConversationId, MAX_ATTACHMENT_DATA, MessageDelta, Millis, NewAttachment,
    NewConsent, NewConversation, NewMessage, NewProtocolError, NewStatusChange, RetentionReport,
    Role, ToolCallEvent, ToolCallState, column,
};

/// A queued unit of work.
// Writes vastly outnumber reads; boxing every op would add an allocation per write.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Job {
    /// A write, acknowledged through `done` after its batch commits (or fails).
    Write {
        op: Op,
        done: Box<dyn FnOnce(Result<Outcome>) + Send>,
    },
    /// A read to run on the writer's connection (used for `:memory:` stores, whose data
    /// only this connection can see). Runs between batches, so it sees every earlier write.
    Read(Box<dyn FnOnce(&Connection) + Send>),
}

/// A write operation.
#[derive(Debug)]
pub(crate) enum Op {
    BeginConversation(NewConversation),
    EndConversation {
        id: ConversationId,
        at: Millis,
    },
    SetTitle {
        id: ConversationId,
        title: Option<String>,
    },
    Message(NewMessage),
    Delta(MessageDelta),
    Status(NewStatusChange),
    Tool(ToolCallEvent),
    Consent(NewConsent),
    ProtocolError(NewProtocolError),
    Attachment(NewAttachment),
    DeleteConversation(ConversationId),
    SetRetention(Option<u32>),
    ApplyRetention {
        now: Millis,
    },
    Flush,
}

impl Op {
    /// True for writes that run more than one writing statement.
    fn needs_savepoint(&self) -> bool {
        matches!(self, Op::ApplyRetention { .. })
    }
}

/// What a write produced.
#[derive(Debug)]
pub(crate) enum Outcome {
    Done,
    Deleted(bool),
    Retention(RetentionReport),
}

/// Writer settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriterConfig {
    pub max_batch: usize,
    pub max_field_bytes: usize,
}

/// How often an idle writer wakes to apply the retention setting.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(3600);

struct Ctx {
    next_seq: i64,
    cfg: WriterConfig,
}

impl Ctx {
    fn seq(&mut self) -> i64 {
        self.next_seq += 1;
        self.next_seq
    }
}

/// Highest `seq` in use, so a reopened store keeps ordering after existing rows.
pub(crate) fn max_seq(conn: &Connection) -> Result<i64> {
    conn.query_row(
        "SELECT MAX(m) FROM (
            SELECT MAX(seq) AS m FROM conversations UNION ALL
            SELECT MAX(seq) FROM messages UNION ALL
            SELECT MAX(seq) FROM status_changes UNION ALL
            SELECT MAX(seq) FROM tool_calls UNION ALL
            SELECT MAX(seq) FROM consents UNION ALL
            SELECT MAX(seq) FROM protocol_errors)",
        [],
        |r| r.get::<_, Option<i64>>(0),
    )
    .ctx(|| "read the highest sequence number".to_owned())
    .map(|v| v.unwrap_or(0))
}

/// The writer thread's body. Returns when every sender is gone and the queue is drained.
pub(crate) fn run(mut conn: Connection, rx: Receiver<Job>, cfg: WriterConfig, start_seq: i64) {
    let mut ctx = Ctx {
        next_seq: start_seq,
        cfg,
    };
    let mut last_housekeeping = Instant::now();
    loop {
        let first = match rx.recv_timeout(HOUSEKEEPING_EVERY) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) => {
                last_housekeeping = Instant::now();
                housekeeping(&mut conn, &mut ctx);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut jobs = vec![first];
        while jobs.len() < ctx.cfg.max_batch.max(1) {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        run_batch(&mut conn, &mut ctx, jobs);
        if last_housekeeping.elapsed() >= HOUSEKEEPING_EVERY {
            last_housekeeping = Instant::now();
            housekeeping(&mut conn, &mut ctx);
        }
    }
    // Leave a tidy file: fold the WAL back into the database. Failure here loses nothing.
    let _ = conn.pragma_update(None, "wal_checkpoint", "TRUNCATE");
}

fn housekeeping(conn: &mut Connection, ctx: &mut Ctx) {
    let job = Job::Write {
        op: Op::ApplyRetention {
            now: crate::model::now_ms(),
        },
        done: Box::new(|_| {}),
    };
    run_batch(conn, ctx, vec![job]);
}

fn run_batch(conn: &mut Connection, ctx: &mut Ctx, jobs: Vec<Job>) {
    let mut segment: Vec<(Op, Done)> = Vec::new();
    for job in jobs {
        match job {
            Job::Write { op, done } => segment.push((op, done)),
            Job::Read(read) => {
                commit_segment(conn, ctx, std::mem::take(&mut segment));
                read(conn);
            }
        }
    }
    commit_segment(conn, ctx, segment);
}

type Done = Box<dyn FnOnce(Result<Outcome>) + Send>;

fn commit_segment(conn: &mut Connection, ctx: &mut Ctx, segment: Vec<(Op, Done)>) {
    if segment.is_empty() {
        return;
    }
    let seq_before = ctx.next_seq;
    let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => {
            for (_, done) in segment {
                done(Err(Error::CommitFailed(format!("begin transaction: {e}"))));
            }
            return;
        }
    };
    let mut results = Vec::with_capacity(segment.len());
    let mut aborted: Option<String> = None;
    for (op, done) in segment {
        if let Some(reason) = &aborted {
            results.push((done, Err(Error::CommitFailed(reason.clone()))));
            continue;
        }
        // Single-statement writes need no savepoint: SQLite undoes a failed statement by
        // itself and keeps the transaction. Savepoints cost two statements per write.
        let result = if op.needs_savepoint() {
            apply_in_savepoint(&tx, ctx, op)
        } else {
            apply(&tx, ctx, op)
        };
        if result.is_err() && tx.is_autocommit() {
            // SQLite rolled the whole transaction back (disk full, I/O error): nothing in
            // this batch is stored, and later writes must not run outside a transaction.
            let reason = match &result {
                Err(e) => format!("transaction rolled back by SQLite: {e}"),
                Ok(_) => String::new(),
            };
            aborted = Some(reason);
        }
        results.push((done, result));
    }
    if let Some(reason) = aborted {
        drop(tx);
        ctx.next_seq = seq_before;
        for (done, result) in results {
            done(match result {
                Ok(_) => Err(Error::CommitFailed(reason.clone())),
                Err(e) => Err(e),
            });
        }
        return;
    }
    match tx.commit() {
        Ok(()) => {
            for (done, result) in results {
                done(result);
            }
        }
        Err(e) => {
            ctx.next_seq = seq_before;
            let msg = e.to_string();
            for (done, result) in results {
                done(match result {
                    Ok(_) => Err(Error::CommitFailed(msg.clone())),
                    Err(err) => Err(err),
                });
            }
        }
    }
}

/// One failing write must not take the rest of its batch down: each runs in a savepoint.
fn apply_in_savepoint(conn: &Connection, ctx: &mut Ctx, op: Op) -> Result<Outcome> {
    conn.prepare_cached("SAVEPOINT op")
        .and_then(|mut s| s.execute([]))
        .ctx(|| "open savepoint".to_owned())?;
    match apply(conn, ctx, op) {
        Ok(outcome) => {
            conn.prepare_cached("RELEASE op")
                .and_then(|mut s| s.execute([]))
                .ctx(|| "release savepoint".to_owned())?;
            Ok(outcome)
        }
        Err(e) => {
            let _ = conn
                .prepare_cached("ROLLBACK TO op")
                .and_then(|mut s| s.execute([]));
            let _ = conn
                .prepare_cached("RELEASE op")
                .and_then(|mut s| s.execute([]));
            Err(e)
        }
    }
}

/// Cuts `text` to at most `cap` bytes on a character boundary. Returns the kept text and,
/// when it was cut, the original size.
pub(crate) fn cap_text(mut text: String, cap: usize) -> (String, Option<i64>) {
    if text.len() <= cap {
        return (text, None);
    }
    let original = i64::try_from(text.len()).unwrap_or(i64::MAX);
    let mut end = cap;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    (text, Some(original))
}

fn cap_json(value: &Value, cap: usize, what: &'static str) -> Result<(String, Option<i64>)> {
    let text = serde_json::to_string(value).map_err(|error| Error::Json {
        context: what,
        error,
    })?;
    Ok(cap_text(text, cap))
}

/// Turns a foreign-key failure into "conversation not found".
fn missing_conversation(e: rusqlite::Error, id: &ConversationId, context: String) -> Error {
    if let rusqlite::Error::SqliteFailure(f, _) = &e {
        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY {
            return Error::NotFound {
                what: "conversation",
                id: id.0.clone(),
            };
        }
    }
    Error::Sqlite { context, error: e }
}

fn apply(conn: &Connection, ctx: &mut Ctx, op: Op) -> Result<Outcome> {
    let cap = ctx.cfg.max_field_bytes;
    match op {
        Op::BeginConversation(c) => {
            let seq = ctx.seq();
            conn.prepare_cached(
                "INSERT INTO conversations (id, seq, title, room, assistant_identity, started_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    c.id.0,
                    seq,
                    c.title,
                    c.room,
                    c.assistant_identity,
                    c.started_at
                ])
            })
            .ctx(|| format!("start conversation {}", c.id))?;
        }
        Op::EndConversation { id, at } => {
            let n = conn
                .prepare_cached("UPDATE conversations SET ended_at = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id.0, at]))
                .ctx(|| format!("end conversation {id}"))?;
            if n == 0 {
                return Err(Error::NotFound {
                    what: "conversation",
                    id: id.0,
                });
            }
        }
        Op::SetTitle { id, title } => {
            let n = conn
                .prepare_cached("UPDATE conversations SET title = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id.0, title]))
                .ctx(|| format!("set title of conversation {id}"))?;
            if n == 0 {
                return Err(Error::NotFound {
                    what: "conversation",
                    id: id.0,
                });
            }
        }
        Op::Message(m) => {
            let seq = ctx.seq();
            let (text, original) = cap_text(m.text, cap);
            conn.prepare_cached(
                "INSERT INTO messages
                    (conversation_id, id, seq, role, text, original_bytes, created_at, completed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (conversation_id, id) DO UPDATE SET
                    text = excluded.text,
                    original_bytes = excluded.original_bytes,
                    completed_at = excluded.completed_at",
            )
            .and_then(|mut s| {
                s.execute(params![
                    m.conversation_id.0,
                    m.id,
                    seq,
                    m.role.as_str(),
                    text,
                    original,
                    m.created_at,
                    m.completed_at
                ])
            })
            .map_err(|e| {
                missing_conversation(e, &m.conversation_id, format!("log message {}", m.id))
            })?;
        }
        Op::Delta(d) => apply_delta(conn, ctx, d)?,
        Op::Status(s) => {
            let seq = ctx.seq();
            conn.prepare_cached(
                "INSERT INTO status_changes (conversation_id, seq, at, status, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut st| {
                st.execute(params![s.conversation_id.0, seq, s.at, s.status, s.detail])
            })
            .map_err(|e| {
                missing_conversation(e, &s.conversation_id, format!("log status {}", s.status))
            })?;
        }
        Op::Tool(event) => apply_tool_event(conn, ctx, event)?,
        Op::Consent(c) => {
            let seq = ctx.seq();
            conn.prepare_cached(
                "INSERT INTO consents (conversation_id, tool_call_id, seq, tool_name, asked,
                    decision, scope, decided_by, asked_at, decided_at, outcome)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    c.conversation_id.0,
                    c.tool_call_id,
                    seq,
                    c.tool_name,
                    c.asked,
                    c.decision.map(|d| d.as_str()),
                    c.scope,
                    c.decided_by.as_str(),
                    c.asked_at,
                    c.decided_at,
                    c.outcome.as_str()
                ])
            })
            .map_err(|e| {
                missing_conversation(
                    e,
                    &c.conversation_id,
                    format!("log consent for {}", c.tool_name),
                )
            })?;
        }
        Op::ProtocolError(p) => {
            let seq = ctx.seq();
            let conv = p.conversation_id.as_ref().map(|c| c.0.clone());
            conn.prepare_cached(
                "INSERT INTO protocol_errors (conversation_id, seq, at, code, message, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| s.execute(params![conv, seq, p.at, p.code, p.message, p.detail]))
            .map_err(|e| match &p.conversation_id {
                Some(id) => missing_conversation(e, id, format!("log protocol error {}", p.code)),
                None => Error::Sqlite {
                    context: format!("log protocol error {}", p.code),
                    error: e,
                },
            })?;
        }
        Op::Attachment(a) => {
            let seq = ctx.seq();
            let data = a.data.filter(|d| d.len() <= MAX_ATTACHMENT_DATA);
            conn.prepare_cached(
                "INSERT INTO attachments (conversation_id, id, message_id, seq, name, mime_type,
                    size, sha256, data, sent_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (conversation_id, id) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    a.conversation_id.0,
                    a.id,
                    a.message_id,
                    seq,
                    a.name,
                    a.mime_type,
                    i64::try_from(a.size).unwrap_or(i64::MAX),
                    a.sha256,
                    data,
                    a.sent_at
                ])
            })
            .map_err(|e| {
                missing_conversation(e, &a.conversation_id, format!("log attachment {}", a.id))
            })?;
        }
        Op::DeleteConversation(id) => {
            let n = conn
                .prepare_cached("DELETE FROM conversations WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id.0]))
                .ctx(|| format!("delete conversation {id}"))?;
            return Ok(Outcome::Deleted(n > 0));
        }
        Op::SetRetention(days) => {
            match days {
                Some(0) => {
                    return Err(Error::InvalidArgument {
                        name: "retention_days",
                        reason: "must be at least 1 (use None to keep everything)".to_owned(),
                    });
                }
                Some(d) => conn
                    .execute(
                        "INSERT INTO settings (key, value) VALUES (?1, ?2)
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        params![RETENTION_KEY, d.to_string()],
                    )
                    .ctx(|| "save retention setting".to_owned())?,
                None => conn
                    .execute(
                        "DELETE FROM settings WHERE key = ?1",
                        params![RETENTION_KEY],
                    )
                    .ctx(|| "clear retention setting".to_owned())?,
            };
        }
        Op::ApplyRetention { now } => {
            let days = retention_days(conn)?;
            let report = match days {
                Some(days) => apply_retention(conn, now, days)?,
                None => RetentionReport::default(),
            };
            return Ok(Outcome::Retention(report));
        }
        Op::Flush => {}
    }
    Ok(Outcome::Done)
}

fn apply_retention(conn: &Connection, now: Millis, days: u32) -> Result<RetentionReport> {
    let cutoff = now.saturating_sub(i64::from(days).saturating_mul(86_400_000));
    // A conversation goes only when nothing in it is newer than the cutoff.
    let conversations = conn
        .execute(
            "DELETE FROM conversations
             WHERE started_at < ?1 AND COALESCE(ended_at, started_at) < ?1
               AND NOT EXISTS (SELECT 1 FROM messages m
                               WHERE m.conversation_id = conversations.id
                                 AND MAX(m.created_at, COALESCE(m.completed_at, 0)) >= ?1)
               AND NOT EXISTS (SELECT 1 FROM tool_calls t
                               WHERE t.conversation_id = conversations.id
                                 AND MAX(t.initiated_at, COALESCE(t.finished_at, 0)) >= ?1)
               AND NOT EXISTS (SELECT 1 FROM status_changes s
                               WHERE s.conversation_id = conversations.id AND s.at >= ?1)
               AND NOT EXISTS (SELECT 1 FROM consents c
                               WHERE c.conversation_id = conversations.id AND c.decided_at >= ?1)
               AND NOT EXISTS (SELECT 1 FROM protocol_errors p
                               WHERE p.conversation_id = conversations.id AND p.at >= ?1)",
            params![cutoff],
        )
        .ctx(|| format!("apply retention of {days} days"))?;
    let protocol_errors = conn
        .execute(
            "DELETE FROM protocol_errors WHERE conversation_id IS NULL AND at < ?1",
            params![cutoff],
        )
        .ctx(|| format!("apply retention of {days} days to protocol errors"))?;
    Ok(RetentionReport {
        conversations: conversations as u64,
        protocol_errors: protocol_errors as u64,
    })
}

fn apply_delta(conn: &Connection, ctx: &mut Ctx, d: MessageDelta) -> Result<()> {
    let cap = ctx.cfg.max_field_bytes;
    let existing: Option<(i64, i64, Option<i64>)> = conn
        .prepare_cached(
            "SELECT pk, length(CAST(text AS BLOB)), original_bytes FROM messages
             WHERE conversation_id = ?1 AND id = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![d.conversation_id.0, d.id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()
        })
        .ctx(|| format!("look up message {}", d.id))?;
    let completed = d.done.then_some(d.at);
    let delta_len = i64::try_from(d.delta.len()).unwrap_or(i64::MAX);
    match existing {
        None => {
            let seq = ctx.seq();
            let (text, original) = cap_text(d.delta, cap);
            conn.prepare_cached(
                "INSERT INTO messages
                    (conversation_id, id, seq, role, text, original_bytes, created_at, completed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    d.conversation_id.0,
                    d.id,
                    seq,
                    Role::Assistant.as_str(),
                    text,
                    original,
                    d.at,
                    completed
                ])
            })
            .map_err(|e| {
                missing_conversation(e, &d.conversation_id, format!("log delta of {}", d.id))
            })?;
        }
        Some((pk, _, Some(_))) => {
            // Already over the cap: only the size grows.
            conn.prepare_cached(
                "UPDATE messages SET original_bytes = original_bytes + ?2,
                    completed_at = COALESCE(?3, completed_at) WHERE pk = ?1",
            )
            .and_then(|mut s| s.execute(params![pk, delta_len, completed]))
            .ctx(|| format!("append to message {}", d.id))?;
        }
        Some((pk, len, None)) if len.saturating_add(delta_len) <= cap as i64 => {
            conn.prepare_cached(
                "UPDATE messages SET text = text || ?2,
                    completed_at = COALESCE(?3, completed_at) WHERE pk = ?1",
            )
            .and_then(|mut s| s.execute(params![pk, d.delta, completed]))
            .ctx(|| format!("append to message {}", d.id))?;
        }
        Some((pk, _, None)) => {
            let mut text: String = conn
                .query_row("SELECT text FROM messages WHERE pk = ?1", [pk], |r| {
                    r.get(0)
                })
                .ctx(|| format!("read message {}", d.id))?;
            text.push_str(&d.delta);
            let (text, original) = cap_text(text, cap);
            conn.prepare_cached(
                "UPDATE messages SET text = ?2, original_bytes = ?3,
                    completed_at = COALESCE(?4, completed_at) WHERE pk = ?1",
            )
            .and_then(|mut s| s.execute(params![pk, text, original, completed]))
            .ctx(|| format!("append to message {}", d.id))?;
        }
    }
    Ok(())
}

fn load_call_state(conn: &Connection, conv: &ConversationId, id: &str) -> Result<ToolCallState> {
    let state: Option<String> = conn
        .prepare_cached("SELECT state FROM tool_calls WHERE conversation_id = ?1 AND id = ?2")
        .and_then(|mut s| s.query_row(params![conv.0, id], |r| r.get(0)).optional())
        .ctx(|| format!("look up tool call {id}"))?;
    state
        .ok_or_else(|| Error::NotFound {
            what: "tool call",
            id: id.to_owned(),
        })
        .and_then(|s| column(&s))
}

fn check_transition(id: &str, from: ToolCallState, to: ToolCallState) -> Result<()> {
    use ToolCallState::*;
    let ok = match to {
        AwaitingConsent => matches!(from, Initiated | AwaitingConsent),
        Running => matches!(from, Initiated | AwaitingConsent),
        Completed | Error => !from.is_final(),
        Initiated => false,
    };
    if ok {
        Ok(())
    } else {
        Err(crate::error::Error::InvalidTransition {
            id: id.to_owned(),
            from: from.to_string(),
            to: to.to_string(),
        })
    }
}

fn apply_tool_event(conn: &Connection, ctx: &mut Ctx, event: ToolCallEvent) -> Result<()> {
    let cap = ctx.cfg.max_field_bytes;
    match event {
        ToolCallEvent::Initiated {
            conversation_id,
            id,
            message_id,
            tool_name,
            server_name,
            execution,
            arguments,
            at,
        } => {
            let seq = ctx.seq();
            let (args, args_original) = cap_json(&arguments, cap, "encode tool arguments")?;
            conn.prepare_cached(
                "INSERT INTO tool_calls (conversation_id, id, message_id, seq, tool_name,
                    server_name, execution, arguments, arguments_original_bytes, state,
                    status, initiated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'initiated', 'initiated', ?10)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    conversation_id.0,
                    id,
                    message_id,
                    seq,
                    tool_name,
                    server_name,
                    execution.as_str(),
                    args,
                    args_original,
                    at
                ])
            })
            .map_err(|e| {
                missing_conversation(e, &conversation_id, format!("log tool call {id}"))
            })?;
        }
        ToolCallEvent::AwaitingConsent {
            conversation_id,
            id,
            at,
        } => {
            let n = conn
                .prepare_cached(
                    "UPDATE tool_calls SET state = 'awaiting_consent', status = 'awaiting_consent',
                        awaiting_consent_at = ?3
                     WHERE conversation_id = ?1 AND id = ?2
                       AND state IN ('initiated', 'awaiting_consent')",
                )
                .and_then(|mut s| s.execute(params![conversation_id.0, id, at]))
                .ctx(|| format!("update tool call {id}"))?;
            if n == 0 {
                return Err(explain_refusal(
                    conn,
                    &conversation_id,
                    &id,
                    ToolCallState::AwaitingConsent,
                ));
            }
        }
        ToolCallEvent::Running {
            conversation_id,
            id,
            executed_by,
            at,
        } => {
            let n = conn
                .prepare_cached(
                    "UPDATE tool_calls SET state = 'running', status = 'running', running_at = ?3,
                        executed_by = ?4
                     WHERE conversation_id = ?1 AND id = ?2
                       AND state IN ('initiated', 'awaiting_consent')",
                )
                .and_then(|mut s| {
                    s.execute(params![conversation_id.0, id, at, executed_by.as_str()])
                })
                .ctx(|| format!("update tool call {id}"))?;
            if n == 0 {
                return Err(explain_refusal(
                    conn,
                    &conversation_id,
                    &id,
                    ToolCallState::Running,
                ));
            }
        }
        ToolCallEvent::Completed {
            conversation_id,
            id,
            result,
            executed_by,
            at,
        } => finish(
            conn,
            &conversation_id,
            &id,
            (ToolCallState::Completed, CallStatus::Completed),
            result.as_ref(),
            None,
            executed_by,
            at,
            cap,
        )?,
        ToolCallEvent::Failed {
            conversation_id,
            id,
            code,
            status,
            message,
            result,
            executed_by,
            at,
        } => {
            if !status.is_failure() {
                return Err(Error::InvalidArgument {
                    name: "status",
                    reason: format!("a failed tool call cannot be {status}"),
                });
            }
            finish(
                conn,
                &conversation_id,
                &id,
                (ToolCallState::Error, status),
                result.as_ref(),
                Some((code, message)),
                executed_by,
                at,
                cap,
            )?;
        }
    }
    Ok(())
}

/// Why a lifecycle update matched no row: the call is unknown, or in a state that does not
/// allow the step.
fn explain_refusal(conn: &Connection, conv: &ConversationId, id: &str, to: ToolCallState) -> Error {
    match load_call_state(conn, conv, id) {
        Ok(from) => match check_transition(id, from, to) {
            Err(e) => e,
            // Matched no row yet allowed: only possible if the row changed in between.
            Ok(()) => Error::InvalidTransition {
                id: id.to_owned(),
                from: from.to_string(),
                to: to.to_string(),
            },
        },
        Err(e) => e,
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    conn: &Connection,
    conv: &ConversationId,
    id: &str,
    (state, status): (ToolCallState, CallStatus),
    result: Option<&Value>,
    error: Option<(String, String)>,
    executed_by: Option<crate::model::Executor>,
    at: Millis,
    cap: usize,
) -> Result<()> {
    let (result_text, result_original) = match result {
        Some(v) => {
            let (t, o) = cap_json(v, cap, "encode tool result")?;
            (Some(t), o)
        }
        None => (None, None),
    };
    let (code, message) = match error {
        Some((c, m)) => (Some(c), Some(cap_text(m, cap).0)),
        None => (None, None),
    };
    let n = conn
        .prepare_cached(
            "UPDATE tool_calls SET state = ?3, status = ?10, finished_at = ?4,
                duration_ms = ?4 - COALESCE(running_at, initiated_at),
                executed_by = COALESCE(executed_by, ?5), result = ?6, result_original_bytes = ?7,
                error_code = ?8, error_message = ?9
             WHERE conversation_id = ?1 AND id = ?2
               AND state NOT IN ('completed', 'error')",
        )
        .and_then(|mut s| {
            s.execute(params![
                conv.0,
                id,
                state.as_str(),
                at,
                executed_by.map(|e| e.as_str()),
                result_text,
                result_original,
                code,
                message,
                status.as_str()
            ])
        })
        .ctx(|| format!("finish tool call {id}"))?;
    if n == 0 {
        return Err(explain_refusal(conn, conv, id, state));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn cap_text_keeps_short_text() {
        assert_eq!(cap_text("hello".into(), 5), ("hello".into(), None));
    }

    #[test]
    fn cap_text_cuts_on_a_char_boundary() {
        // "é" is two bytes; a cap of 2 inside "aé" must not split it.
        let (t, o) = cap_text("aéb".into(), 2);
        assert_eq!(t, "a");
        assert_eq!(o, Some(4));
    }

    #[test]
    fn transitions_follow_the_lifecycle() {
        use ToolCallState::*;
        assert!(check_transition("t", Initiated, Running).is_ok());
        assert!(check_transition("t", AwaitingConsent, Running).is_ok());
        assert!(check_transition("t", Running, Completed).is_ok());
        assert!(check_transition("t", Initiated, Error).is_ok());
        assert!(check_transition("t", Completed, Running).is_err());
        assert!(check_transition("t", Error, Completed).is_err());
        assert!(check_transition("t", Running, AwaitingConsent).is_err());
    }
}
