//! Record types: what callers write (`New*`, [`ToolCallEvent`]) and what queries return.
//!
//! These types are the store's own, independent of the wire protocol crate: arguments and
//! results are `serde_json::Value`, modes and decisions are small enums whose string forms
//! match the protocol's (`"server"`, `"client"`, `"either"`, `allow_once`, ...).

use std::fmt;

use outpost_enum::closed_enum;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// A closed enum stored in a column: reading it back names the column when the value is
/// not one this build knows.
pub(crate) trait Column: std::str::FromStr<Err = outpost_enum::Unknown> {
    /// The column's name, for [`Error::Corrupt`].
    const COLUMN: &'static str;
}

/// Reads a stored [`Column`] value.
pub(crate) fn column<T: Column>(s: &str) -> Result<T> {
    s.parse()
        .map_err(|e: outpost_enum::Unknown| Error::Corrupt {
            column: T::COLUMN,
            value: e.value,
        })
}

/// Milliseconds since the Unix epoch (UTC).
pub type Millis = i64;

/// The current time in [`Millis`].
pub fn now_ms() -> Millis {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// Identifies a conversation. Chosen by the caller (usually [`ConversationId::generate`]) so
/// it is known before the write is committed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConversationId(pub String);

impl ConversationId {
    /// A fresh random id (NanoID, 21 characters).
    pub fn generate() -> Self {
        Self(nanoid::nanoid!())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ConversationId {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<String> for ConversationId {
    fn from(s: String) -> Self {
        Self(s)
    }
}

closed_enum! {
    /// Who wrote a message.
    pub enum Role {
        /// The person using Outpost.
        User => "user",
        /// The AI assistant (deltas folded into the final text).
        Assistant => "assistant",
    }
}

impl Column for Role {
    const COLUMN: &'static str = "role";
}

closed_enum! {
    /// Who may execute a tool call (the protocol's `execution` field).
    pub enum Execution {
        /// The assistant's server executes; the client only observes.
        Server => "server",
        /// The client (Outpost) must execute.
        Client => "client",
        /// Whoever can.
        Either => "either",
    }
}

impl Column for Execution {
    const COLUMN: &'static str = "execution";
}

closed_enum! {
    /// Who actually executed a tool call.
    pub enum Executor {
        /// Outpost, on this machine.
        Client => "client",
        /// The assistant's server.
        Server => "server",
    }
}

impl Column for Executor {
    const COLUMN: &'static str = "executed_by";
}

closed_enum! {
    /// Lifecycle state of a tool call.
    pub enum ToolCallState {
        /// The request was received.
        Initiated => "initiated",
        /// Waiting for the user to allow or deny it.
        AwaitingConsent => "awaiting_consent",
        /// Executing.
        Running => "running",
        /// Finished successfully.
        Completed => "completed",
        /// Finished with an error (including denial, timeout, unknown tool).
        Error => "error",
    }
}

impl Column for ToolCallState {
    const COLUMN: &'static str = "state";
}

closed_enum! {
    /// A tool call's status as the session's state machine (outpost-core's
    /// `ToolCallStatus`) decided it: the store copies it and never works it out.
    pub enum CallStatus {
        /// Arrived; nothing decided yet.
        Initiated => "initiated",
        /// Waiting for the user's answer.
        AwaitingConsent => "awaiting_consent",
        /// Running.
        Running => "running",
        /// Succeeded.
        Completed => "completed",
        /// Failed while running, or was refused for a reason other than permission.
        Error => "error",
        /// Ran out of time.
        Timeout => "timeout",
        /// Refused by the policy or the user.
        Denied => "denied",
        /// Cancelled.
        Cancelled => "cancelled",
    }
}

impl Column for CallStatus {
    const COLUMN: &'static str = "status";
}

impl CallStatus {
    /// True for the statuses a failed call ends in.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            CallStatus::Error | CallStatus::Timeout | CallStatus::Denied | CallStatus::Cancelled
        )
    }
}

impl ToolCallState {
    /// True for `completed` and `error`.
    pub fn is_final(self) -> bool {
        matches!(self, ToolCallState::Completed | ToolCallState::Error)
    }
}

closed_enum! {
    /// The user's answer to a consent prompt.
    pub enum Decision {
        /// Allow this one call.
        AllowOnce => "allow_once",
        /// Allow this tool (for this scope) for the rest of the conversation.
        AllowForConversation => "allow_for_conversation",
        /// Allow from now on.
        AlwaysAllow => "always_allow",
        /// Deny this one call.
        DenyOnce => "deny_once",
        /// Deny from now on.
        AlwaysDeny => "always_deny",
    }
}

impl Column for Decision {
    const COLUMN: &'static str = "decision";
}

impl Decision {
    /// True for the allow decisions.
    pub fn allows(self) -> bool {
        matches!(
            self,
            Decision::AllowOnce | Decision::AllowForConversation | Decision::AlwaysAllow
        )
    }
}

closed_enum! {
    /// Who decided whether a tool call runs.
    pub enum DecidedBy {
        /// The user answered a prompt.
        User => "user",
        /// A rule of the user's policy decided without asking.
        Policy => "policy",
        /// The built-in secrets deny list.
        SecretsList => "secrets_list",
        /// The user's earlier "allow for this conversation" answer.
        ConversationGrant => "conversation_grant",
        /// Nobody answered the prompt before it expired.
        ConsentTimeout => "consent_timeout",
        /// The call needed consent and no prompt was available (a headless client).
        NoConsentUi => "no_consent_ui",
    }
}

impl Column for DecidedBy {
    const COLUMN: &'static str = "decided_by";
}

closed_enum! {
    /// Whether a call was allowed to run.
    pub enum Outcome {
        /// It may run.
        Allowed => "allowed",
        /// It may not.
        Denied => "denied",
    }
}

impl Column for Outcome {
    const COLUMN: &'static str = "outcome";
}

// ---------------------------------------------------------------------------------------------
// What callers write.

/// Starts a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewConversation {
    /// Its id (see [`ConversationId::generate`]).
    pub id: ConversationId,
    /// Title shown in history (may be set later with `set_conversation_title`).
    pub title: Option<String>,
    /// LiveKit room name.
    pub room: Option<String>,
    /// The assistant participant's identity.
    pub assistant_identity: Option<String>,
    /// When it started.
    pub started_at: Millis,
}

impl NewConversation {
    /// Conversation `id`, started at `started_at`, with no title, room or assistant yet.
    pub fn new(id: ConversationId, started_at: Millis) -> Self {
        NewConversation {
            id,
            title: None,
            room: None,
            assistant_identity: None,
            started_at,
        }
    }
}

/// A whole message (user message, or an assistant message's final text). Logging a message
/// whose id already exists in the conversation replaces its text and completion time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMessage {
    /// Conversation it belongs to.
    pub conversation_id: ConversationId,
    /// Message id (the protocol's NanoID); unique within the conversation.
    pub id: String,
    /// Author.
    pub role: Role,
    /// Full text.
    pub text: String,
    /// When it was started (first delta) or sent.
    pub created_at: Millis,
    /// When it was complete (final delta), if it is.
    pub completed_at: Option<Millis>,
}

/// A streamed piece of an assistant message, appended to the stored text. The first delta
/// of an unknown message id creates the message (role assistant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageDelta {
    /// Conversation it belongs to.
    pub conversation_id: ConversationId,
    /// Message id.
    pub id: String,
    /// Text to append.
    pub delta: String,
    /// When it arrived.
    pub at: Millis,
    /// True on the last delta: sets `completed_at`.
    pub done: bool,
}

/// A status change worth keeping (connected, reconnecting, assistant thinking, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewStatusChange {
    /// Conversation it belongs to.
    pub conversation_id: ConversationId,
    /// When.
    pub at: Millis,
    /// Short machine-friendly status ("connected", "reconnecting", ...).
    pub status: String,
    /// Optional human-readable detail.
    pub detail: Option<String>,
}

/// A step in a tool call's life. `Initiated` must come first; the others update the row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallEvent {
    /// The request arrived (ToolUseRequest).
    Initiated {
        /// Conversation it belongs to.
        conversation_id: ConversationId,
        /// Tool-call id (the request's `id`).
        id: String,
        /// The assistant message that asked for it.
        message_id: Option<String>,
        /// Tool name.
        tool_name: String,
        /// MCP server providing the tool; empty for built-in tools.
        server_name: String,
        /// The request's execution mode.
        execution: Execution,
        /// The request's parameters.
        arguments: Value,
        /// When it arrived.
        at: Millis,
    },
    /// A consent prompt was shown.
    AwaitingConsent {
        /// Conversation it belongs to.
        conversation_id: ConversationId,
        /// Tool-call id.
        id: String,
        /// When the prompt appeared.
        at: Millis,
    },
    /// Execution started.
    Running {
        /// Conversation it belongs to.
        conversation_id: ConversationId,
        /// Tool-call id.
        id: String,
        /// Who is executing it.
        executed_by: Executor,
        /// When it started.
        at: Millis,
    },
    /// Finished successfully (ToolUseResult with `success: true`).
    Completed {
        /// Conversation it belongs to.
        conversation_id: ConversationId,
        /// Tool-call id.
        id: String,
        /// The result the user saw.
        result: Option<Value>,
        /// Who executed it, if not already recorded by `Running`.
        executed_by: Option<Executor>,
        /// When it finished.
        at: Millis,
    },
    /// Finished with an error (ToolUseResult with `success: false`, a denial, a timeout).
    Failed {
        /// Conversation it belongs to.
        conversation_id: ConversationId,
        /// Tool-call id.
        id: String,
        /// Machine-readable code (`unknown_tool`, `timeout`, `execution_error`, ...).
        code: String,
        /// The status the machine gave the call: one of the failures
        /// ([`CallStatus::is_failure`]).
        status: CallStatus,
        /// Human-readable message.
        message: String,
        /// Partial result or diagnostics, if any.
        result: Option<Value>,
        /// Who executed it, if anyone did and it is not already recorded.
        executed_by: Option<Executor>,
        /// When it finished.
        at: Millis,
    },
}

impl ToolCallEvent {
    /// The conversation this event belongs to.
    pub fn conversation_id(&self) -> &ConversationId {
        match self {
            ToolCallEvent::Initiated {
                conversation_id, ..
            }
            | ToolCallEvent::AwaitingConsent {
                conversation_id, ..
            }
            | ToolCallEvent::Running {
                conversation_id, ..
            }
            | ToolCallEvent::Completed {
                conversation_id, ..
            }
            | ToolCallEvent::Failed {
                conversation_id, ..
            } => conversation_id,
        }
    }

    /// The tool-call id.
    pub fn id(&self) -> &str {
        match self {
            ToolCallEvent::Initiated { id, .. }
            | ToolCallEvent::AwaitingConsent { id, .. }
            | ToolCallEvent::Running { id, .. }
            | ToolCallEvent::Completed { id, .. }
            | ToolCallEvent::Failed { id, .. } => id,
        }
    }
}

/// A consent decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewConsent {
    /// Conversation it belongs to.
    pub conversation_id: ConversationId,
    /// The tool call it was asked for, if any.
    pub tool_call_id: Option<String>,
    /// Tool name.
    pub tool_name: String,
    /// What the user was asked, or the rule's reason.
    pub asked: String,
    /// Allowed or denied.
    pub outcome: Outcome,
    /// The user's answer, when `decided_by` is [`DecidedBy::User`].
    pub decision: Option<Decision>,
    /// What the decision covers beyond its kind (a path pattern, a server name, ...).
    pub scope: Option<String>,
    /// Who decided.
    pub decided_by: DecidedBy,
    /// When the prompt appeared (None when a rule decided without asking).
    pub asked_at: Option<Millis>,
    /// When it was decided.
    pub decided_at: Millis,
}

/// A protocol-level error (malformed message, unknown type, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewProtocolError {
    /// Conversation it happened in, if one was active.
    pub conversation_id: Option<ConversationId>,
    /// When.
    pub at: Millis,
    /// Machine-readable code.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Extra detail (e.g. a hex excerpt of the offending bytes).
    pub detail: Option<String>,
}

/// Most bytes of an attachment the store keeps (small images, to show them again); the
/// bytes of a larger one are not kept, only what describes it.
pub const MAX_ATTACHMENT_DATA: usize = 256 * 1024;

/// A file the user gave the assistant with a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewAttachment {
    /// Conversation it belongs to.
    pub conversation_id: ConversationId,
    /// Attachment id (a NanoID); unique within the conversation.
    pub id: String,
    /// The user message it went with.
    pub message_id: String,
    /// The file's name.
    pub name: String,
    /// Its media type.
    pub mime_type: String,
    /// Its length in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
    /// The bytes, when they are to be kept (at most [`MAX_ATTACHMENT_DATA`]; larger ones
    /// are dropped by the writer).
    #[serde(skip)]
    pub data: Option<Vec<u8>>,
    /// When it was sent.
    pub sent_at: Millis,
}

// ---------------------------------------------------------------------------------------------
// What queries return.

/// A stored text that may have been cut at the per-row cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// Size of the full value in bytes.
    pub original_bytes: u64,
    /// Bytes kept.
    pub stored_bytes: u64,
}

impl Truncation {
    /// The note shown wherever the value is displayed.
    pub fn note(&self) -> String {
        format!(
            "[truncated: {} bytes, stored first {}]",
            self.original_bytes, self.stored_bytes
        )
    }
}

/// A JSON value as stored: whole, or (over the cap) the first bytes of its JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoredJson {
    /// The value, complete.
    Json {
        /// The value.
        value: Value,
    },
    /// The value was larger than the cap: its JSON text's first bytes followed by the note.
    Truncated {
        /// Stored prefix, then a newline and the truncation note.
        text: String,
        /// Sizes.
        truncation: Truncation,
    },
}

impl StoredJson {
    /// The complete value, if it was not truncated.
    pub fn value(&self) -> Option<&Value> {
        match self {
            StoredJson::Json { value } => Some(value),
            StoredJson::Truncated { .. } => None,
        }
    }

    /// Text for display: pretty JSON, or the truncated text with its note.
    pub fn display_text(&self) -> String {
        match self {
            StoredJson::Json { value } => {
                serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
            }
            StoredJson::Truncated { text, .. } => text.clone(),
        }
    }
}

/// A conversation's header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// Id.
    pub id: ConversationId,
    /// Title.
    pub title: Option<String>,
    /// LiveKit room name.
    pub room: Option<String>,
    /// Assistant identity.
    pub assistant_identity: Option<String>,
    /// When it started.
    pub started_at: Millis,
    /// When it ended, if it has.
    pub ended_at: Option<Millis>,
    /// Store-wide insertion order.
    pub seq: i64,
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Conversation.
    pub conversation_id: ConversationId,
    /// Message id.
    pub id: String,
    /// Author.
    pub role: Role,
    /// Text (when truncated: the stored prefix, a newline and the note).
    pub text: String,
    /// Set when the text was over the cap.
    pub truncation: Option<Truncation>,
    /// When it started.
    pub created_at: Millis,
    /// When it was complete.
    pub completed_at: Option<Millis>,
    /// Store-wide insertion order.
    pub seq: i64,
}

/// A stored status change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusChange {
    /// What was logged.
    #[serde(flatten)]
    pub change: NewStatusChange,
    /// Store-wide insertion order.
    pub seq: i64,
}

/// A stored tool call with its whole lifecycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Conversation.
    pub conversation_id: ConversationId,
    /// Tool-call id.
    pub id: String,
    /// Message that asked for it.
    pub message_id: Option<String>,
    /// Tool name.
    pub tool_name: String,
    /// MCP server name; empty for built-in tools.
    pub server_name: String,
    /// Requested execution mode.
    pub execution: Execution,
    /// Arguments.
    pub arguments: StoredJson,
    /// Current state.
    pub state: ToolCallState,
    /// The status the session's state machine gave it.
    pub status: CallStatus,
    /// When the request arrived.
    pub initiated_at: Millis,
    /// When consent was asked.
    pub awaiting_consent_at: Option<Millis>,
    /// When execution started.
    pub running_at: Option<Millis>,
    /// When it completed or failed.
    pub finished_at: Option<Millis>,
    /// `finished_at` minus `running_at` (or `initiated_at` when it never ran here).
    pub duration_ms: Option<i64>,
    /// Who executed it.
    pub executed_by: Option<Executor>,
    /// Result, if any.
    pub result: Option<StoredJson>,
    /// Error code, when it failed.
    pub error_code: Option<String>,
    /// Error message, when it failed.
    pub error_message: Option<String>,
    /// Store-wide insertion order.
    pub seq: i64,
}

/// A stored consent decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Consent {
    /// What was logged.
    #[serde(flatten)]
    pub decided: NewConsent,
    /// Store-wide insertion order.
    pub seq: i64,
}

/// A stored protocol error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProtocolError {
    /// What was logged.
    #[serde(flatten)]
    pub logged: NewProtocolError,
    /// Store-wide insertion order.
    pub seq: i64,
}

/// A stored attachment: what was logged (the bytes only when kept), and its place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    /// What was sent.
    #[serde(flatten)]
    pub sent: NewAttachment,
    /// Store-wide insertion order.
    pub seq: i64,
}

/// One entry of a conversation's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
// Items live in one Vec per timeline; boxing the tool call would only add allocations.
#[allow(clippy::large_enum_variant)]
pub enum TimelineItem {
    /// A message.
    Message(Message),
    /// A status change.
    Status(StatusChange),
    /// A tool call (placed at its `initiated_at`).
    ToolCall(ToolCall),
    /// A consent decision (placed at its `decided_at`).
    Consent(Consent),
    /// A protocol error.
    ProtocolError(ProtocolError),
    /// A file the user gave the assistant (placed at its `sent_at`).
    Attachment(Attachment),
}

impl TimelineItem {
    /// The time the item is placed at.
    pub fn at(&self) -> Millis {
        match self {
            TimelineItem::Message(m) => m.created_at,
            TimelineItem::Status(s) => s.change.at,
            TimelineItem::ToolCall(t) => t.initiated_at,
            TimelineItem::Consent(c) => c.decided.decided_at,
            TimelineItem::ProtocolError(e) => e.logged.at,
            TimelineItem::Attachment(a) => a.sent.sent_at,
        }
    }

    /// Store-wide insertion order (tie-breaker for equal times).
    pub fn seq(&self) -> i64 {
        match self {
            TimelineItem::Message(m) => m.seq,
            TimelineItem::Status(s) => s.seq,
            TimelineItem::ToolCall(t) => t.seq,
            TimelineItem::Consent(c) => c.seq,
            TimelineItem::ProtocolError(e) => e.seq,
            TimelineItem::Attachment(a) => a.seq,
        }
    }
}

/// A conversation with everything in it, merged by time (then insertion order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Header.
    pub conversation: Conversation,
    /// Entries, oldest first.
    pub items: Vec<TimelineItem>,
}

/// A row of the conversation list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationSummary {
    /// Header.
    pub conversation: Conversation,
    /// Number of messages.
    pub message_count: u64,
    /// Number of tool calls.
    pub tool_call_count: u64,
}

/// Position in a newest-first listing; pass `next` back to get the following page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Time of the last row returned.
    pub at: Millis,
    /// Its insertion order.
    pub seq: i64,
}

/// A page of conversations, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationPage {
    /// Rows.
    pub items: Vec<ConversationSummary>,
    /// Cursor for the next (older) page; None at the end.
    pub next: Option<Cursor>,
}

/// What a search hit points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HitKind {
    /// A message (`id` is the message id).
    Message,
    /// A tool call (`id` is the tool-call id).
    ToolCall,
}

/// A full-text search hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// Message or tool call.
    pub kind: HitKind,
    /// Conversation.
    pub conversation_id: ConversationId,
    /// Message id or tool-call id.
    pub id: String,
    /// Message time or tool-call initiation time.
    pub at: Millis,
    /// Tool name for tool-call hits.
    pub tool_name: Option<String>,
    /// Excerpt with the matches wrapped in the query's markers.
    pub snippet: String,
    /// BM25 score (lower is better, as SQLite reports it).
    pub score: f64,
}

/// A tool call with the consent decisions made about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// The call.
    pub tool_call: ToolCall,
    /// Decisions recorded for it, oldest first.
    pub consents: Vec<Consent>,
}

/// A page of the audit log, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    /// Rows.
    pub entries: Vec<AuditEntry>,
    /// Cursor for the next (older) page; None at the end.
    pub next: Option<Cursor>,
}

/// What a retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionReport {
    /// Conversations deleted (with everything in them).
    pub conversations: u64,
    /// Protocol errors outside any conversation deleted.
    pub protocol_errors: u64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn enum_strings_round_trip() {
        for d in Decision::ALL {
            assert_eq!(d.as_str().parse::<Decision>().unwrap(), *d);
            assert_eq!(
                serde_json::to_string(d).unwrap(),
                format!("\"{}\"", d.as_str())
            );
        }
        for s in ToolCallState::ALL {
            assert_eq!(s.as_str().parse::<ToolCallState>().unwrap(), *s);
        }
        for e in Execution::ALL {
            assert_eq!(e.as_str().parse::<Execution>().unwrap(), *e);
        }
    }

    #[test]
    fn unknown_enum_string_is_a_clear_error() {
        let err = column::<Decision>("maybe").unwrap_err();
        assert!(err.to_string().contains("maybe"), "{err}");
        assert!(err.to_string().contains("decision"), "{err}");
    }

    #[test]
    fn truncation_note_names_both_sizes() {
        let t = Truncation {
            original_bytes: 5_242_880,
            stored_bytes: 1_048_576,
        };
        assert_eq!(t.note(), "[truncated: 5242880 bytes, stored first 1048576]");
    }
}
