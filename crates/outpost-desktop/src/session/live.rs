//! The live view: turns the core's [`UiEvent`]s into the UI contract's events and keeps
//! the state a freshly (re)loaded page needs (`session_subscribe`'s snapshot). Pure: the
//! time comes in with each event.

use std::collections::HashMap;

use outpost_core::{LinkState, Side, UiEvent};
use outpost_protocol::ToolDescriptor;
use serde_json::Value;

use crate::consent;
use crate::contract::{
    AppEvent, AssistantDelta, AssistantMessage, AssistantState, AttachmentView, ConnectionEvent,
    ConnectionStatus, ErrorEvent, ExecutedBy, Millis, SessionInfo, SessionSnapshot, SpeechText,
    StatusEvent, ToolCallRecord, ToolCallStatus, ToolInitiated, ToolProgress, ToolResult,
    TranscriptEntry, UserMessage, UserTranscript,
};

/// What a finished call means for notifications.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The tool.
    pub tool: String,
    /// How long it ran (from `running`, else from arrival), ms.
    pub took_ms: i64,
    /// Success.
    pub success: bool,
}

/// The live conversation as the UI sees it.
#[derive(Debug, Clone)]
pub struct LiveState {
    connection: ConnectionEvent,
    status: StatusEvent,
    session: Option<SessionInfo>,
    /// The conversation the transcript belongs to: the welcomed one, or the stored one the
    /// user continues while its welcome is on its way.
    conversation: Option<String>,
    transcript: Vec<TranscriptEntry>,
    /// Transcript index of each message / call id.
    index: HashMap<String, usize>,
    /// Highest delta seq applied per assistant message.
    seqs: HashMap<String, u32>,
    /// The consent questions open now.
    consents: consent::OpenQuestions,
    hints: HashMap<String, (bool, bool, bool)>,
    /// Images the transcript shows with the next user messages, by SHA-256 (small ones
    /// only, as the history keeps them); taken when their message is shown.
    images: HashMap<String, String>,
    attempts: u32,
}

impl Default for LiveState {
    fn default() -> Self {
        Self {
            connection: ConnectionEvent {
                state: ConnectionStatus::Disconnected,
                detail: None,
                attempt: None,
                path: None,
                relayed: None,
            },
            status: idle(),
            session: None,
            conversation: None,
            transcript: Vec::new(),
            index: HashMap::new(),
            seqs: HashMap::new(),
            consents: consent::OpenQuestions::default(),
            hints: HashMap::new(),
            images: HashMap::new(),
            attempts: 0,
        }
    }
}

fn idle() -> StatusEvent {
    StatusEvent {
        state: AssistantState::Idle,
        tool_use_id: None,
        detail: None,
    }
}

impl LiveState {
    /// Learns the hints (read-only, destructive, open-world) of the client's own tools.
    pub fn set_tools(&mut self, tools: &[ToolDescriptor]) {
        self.hints = tools
            .iter()
            .map(|t| (t.name.clone(), (t.read_only, t.destructive, t.open_world)))
            .collect();
    }

    /// The snapshot for `session_subscribe`.
    pub fn snapshot(&self, configured: bool) -> SessionSnapshot {
        SessionSnapshot {
            configured,
            connection: self.connection.clone(),
            status: self.status.clone(),
            session: self.session.clone(),
            transcript: self.transcript.clone(),
            pending_consents: self.consents.list(),
        }
    }

    /// Images (`data:` URLs by the SHA-256 of their bytes) to show with the files of the
    /// next user message.
    pub fn show_images(&mut self, images: impl IntoIterator<Item = (String, String)>) {
        self.images.extend(images);
    }

    /// The conversation on screen: the welcomed one, or one being continued.
    pub fn conversation_id(&self) -> Option<&str> {
        self.conversation.as_deref()
    }

    /// The user continues the stored conversation `id` (History → Continue): its
    /// `transcript` replaces the one on screen, and a welcome for it keeps it.
    pub fn continue_with(&mut self, id: String, transcript: Vec<TranscriptEntry>) -> AppEvent {
        self.transcript = transcript;
        self.index =
            self.transcript
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let id = match e {
                        TranscriptEntry::User { id, .. }
                        | TranscriptEntry::Assistant { id, .. } => id.clone(),
                        TranscriptEntry::Tool { call } => call.id.clone(),
                    };
                    (id, i)
                })
                .collect();
        self.seqs.clear();
        if let Some(s) = &mut self.session {
            s.conversation_id.clone_from(&id);
        }
        self.conversation = Some(id.clone());
        AppEvent::Conversation(crate::contract::ConversationOpened {
            conversation_id: id,
            transcript: self.transcript.clone(),
        })
    }

    /// Whether the assistant of the live session takes files and images, and its name.
    pub fn attachments_taken(&self) -> Option<(bool, &str)> {
        self.session
            .as_ref()
            .map(|s| (s.attachments, s.assistant_name.as_str()))
    }

    /// Whether the live conversation has a user message yet.
    pub fn has_user_message(&self) -> bool {
        self.transcript
            .iter()
            .any(|e| matches!(e, TranscriptEntry::User { .. }))
    }

    /// A connection attempt began (before the core has a session).
    pub fn connecting(&mut self, detail: Option<String>) -> AppEvent {
        self.set_connection(ConnectionStatus::Connecting, detail, None)
    }

    /// The attempt or the session failed for good.
    pub fn failed(&mut self, detail: String) -> AppEvent {
        self.consents.clear();
        self.status = idle();
        self.set_connection(ConnectionStatus::Failed, Some(detail), None)
    }

    /// Left on purpose.
    pub fn disconnected(&mut self, detail: Option<String>) -> AppEvent {
        self.consents.clear();
        self.status = idle();
        self.set_connection(ConnectionStatus::Disconnected, detail, None)
    }

    fn set_connection(
        &mut self,
        state: ConnectionStatus,
        detail: Option<String>,
        attempt: Option<u32>,
    ) -> AppEvent {
        // The path stays while connected; a loss makes it unknown until the link is
        // back (the core reports the new one then).
        let (path, relayed) = if state == ConnectionStatus::Connected {
            (self.connection.path.take(), self.connection.relayed.take())
        } else {
            (None, None)
        };
        self.connection = ConnectionEvent {
            state,
            detail,
            attempt,
            path,
            relayed,
        };
        AppEvent::Connection(self.connection.clone())
    }

    fn hints(&self, tool: &str) -> (Option<bool>, Option<bool>, Option<bool>) {
        match self.hints.get(tool) {
            Some(&(r, d, o)) => (Some(r), Some(d), Some(o)),
            None => (None, None, None),
        }
    }

    fn call_mut(&mut self, id: &str) -> Option<&mut ToolCallRecord> {
        let i = *self.index.get(id)?;
        match self.transcript.get_mut(i) {
            Some(TranscriptEntry::Tool { call }) => Some(call),
            _ => None,
        }
    }

    fn push(&mut self, id: String, entry: TranscriptEntry) {
        self.index.insert(id, self.transcript.len());
        self.transcript.push(entry);
    }

    /// Applies one core event at `now`. Returns the UI events to send and, for a call that
    /// just finished, what notifications need.
    pub fn apply(&mut self, ev: UiEvent, now: Millis) -> (Vec<AppEvent>, Option<Finished>) {
        let mut out = Vec::new();
        let mut finished = None;
        match ev {
            UiEvent::Connection { state, detail } => {
                let (status, attempt) = match state {
                    LinkState::Connected | LinkState::Reconnected => {
                        self.attempts = 0;
                        (ConnectionStatus::Connected, None)
                    }
                    LinkState::Reconnecting => {
                        self.attempts += 1;
                        (ConnectionStatus::Reconnecting, Some(self.attempts))
                    }
                    LinkState::Disconnected => (ConnectionStatus::Disconnected, None),
                };
                if status == ConnectionStatus::Disconnected {
                    out.push(self.disconnected(detail));
                } else {
                    out.push(self.set_connection(status, detail, attempt));
                }
            }
            UiEvent::NetworkPath { path, relayed } => {
                self.connection.path = Some(path);
                self.connection.relayed = Some(relayed);
                out.push(AppEvent::Connection(self.connection.clone()));
            }
            UiEvent::AssistantPresence { .. } => {}
            UiEvent::SessionStarted {
                conversation_id,
                session_id,
                assistant_name,
                mode,
                attachments,
                ..
            } => {
                if self.conversation_id() != Some(conversation_id.as_str()) {
                    self.transcript.clear();
                    self.index.clear();
                    self.seqs.clear();
                }
                self.conversation = Some(conversation_id.clone());
                let info = SessionInfo {
                    conversation_id,
                    session_id,
                    assistant_name,
                    mode,
                    attachments,
                };
                self.session = Some(info.clone());
                out.push(AppEvent::Session(info));
            }
            UiEvent::UserMessage {
                id,
                text,
                attachments,
                ..
            } if !self.index.contains_key(&id) => {
                let attachments: Vec<AttachmentView> = attachments
                    .into_iter()
                    .map(|a| AttachmentView {
                        image: self.images.remove(&a.sha256),
                        id: a.id,
                        name: a.name,
                        mime_type: a.mime_type,
                        size: a.size,
                        sha256: a.sha256,
                    })
                    .collect();
                self.push(
                    id.clone(),
                    TranscriptEntry::User {
                        id: id.clone(),
                        text: text.clone(),
                        at: now,
                        speech: None,
                        attachments: attachments.clone(),
                    },
                );
                out.push(AppEvent::UserMessage(UserMessage {
                    id,
                    text,
                    at: now,
                    attachments,
                }));
            }
            UiEvent::UserTranscript { id, text, is_final } => {
                let speech = if is_final {
                    SpeechText::Final
                } else {
                    SpeechText::Interim
                };
                let mut at = now;
                match self.index.get(&id).copied() {
                    Some(i) => {
                        if let Some(TranscriptEntry::User {
                            text: t,
                            at: a,
                            speech: s,
                            ..
                        }) = self.transcript.get_mut(i)
                        {
                            t.clone_from(&text);
                            *s = Some(speech);
                            at = *a;
                        }
                    }
                    None => self.push(
                        id.clone(),
                        TranscriptEntry::User {
                            id: id.clone(),
                            text: text.clone(),
                            at: now,
                            speech: Some(speech),
                            attachments: Vec::new(),
                        },
                    ),
                }
                out.push(AppEvent::UserTranscript(UserTranscript {
                    id,
                    text,
                    speech,
                    at,
                }));
            }
            UiEvent::AssistantDelta {
                message_id,
                seq,
                delta,
            } => {
                let applied = self.seqs.get(&message_id).copied();
                if applied.is_none_or(|s| seq > s) {
                    self.seqs.insert(message_id.clone(), seq);
                    match self.index.get(&message_id).copied() {
                        Some(i) => {
                            if let Some(TranscriptEntry::Assistant { text, .. }) =
                                self.transcript.get_mut(i)
                            {
                                text.push_str(&delta);
                            }
                        }
                        None => self.push(
                            message_id.clone(),
                            TranscriptEntry::Assistant {
                                id: message_id.clone(),
                                text: delta.clone(),
                                at: now,
                                in_reply_to: None,
                            },
                        ),
                    }
                    out.push(AppEvent::AssistantDelta(AssistantDelta {
                        message_id,
                        seq,
                        delta,
                    }));
                }
            }
            UiEvent::AssistantMessage {
                id,
                text,
                in_reply_to,
            } => {
                let mut at = now;
                match self.index.get(&id).copied() {
                    Some(i) => {
                        if let Some(TranscriptEntry::Assistant {
                            text: t,
                            at: a,
                            in_reply_to: r,
                            ..
                        }) = self.transcript.get_mut(i)
                        {
                            t.clone_from(&text);
                            r.clone_from(&in_reply_to);
                            at = *a;
                        }
                    }
                    None => self.push(
                        id.clone(),
                        TranscriptEntry::Assistant {
                            id: id.clone(),
                            text: text.clone(),
                            at: now,
                            in_reply_to: in_reply_to.clone(),
                        },
                    ),
                }
                out.push(AppEvent::AssistantMessage(AssistantMessage {
                    id,
                    text,
                    in_reply_to,
                    at,
                }));
            }
            UiEvent::Status {
                state,
                tool_use_id,
                detail,
            } => {
                self.status = StatusEvent {
                    state,
                    tool_use_id,
                    detail,
                };
                out.push(AppEvent::Status(self.status.clone()));
            }
            UiEvent::ToolCallRequested {
                id,
                message_id,
                tool_name,
                server_name,
                claims,
                execution,
                parameters,
                timeout_ms,
            } if !self.index.contains_key(&id) => {
                // An MCP tool's hints are its server's claims: shown as claims, not as
                // Outpost's own description of the tool.
                let (read_only, destructive, open_world) = if server_name.is_some() {
                    (None, None, None)
                } else {
                    self.hints(&tool_name)
                };
                let call = ToolCallRecord {
                    id: id.clone(),
                    message_id: message_id.clone(),
                    tool_name: tool_name.clone(),
                    execution,
                    parameters: parameters.clone(),
                    server_name: server_name.clone(),
                    claims,
                    timeout_ms,
                    status: ToolCallStatus::Initiated,
                    initiated_at: now,
                    awaiting_consent_at: None,
                    running_at: None,
                    finished_at: None,
                    result: None,
                    error_code: None,
                    error_message: None,
                    executed_by: None,
                    detail: None,
                    read_only,
                    destructive,
                    open_world,
                };
                self.push(
                    id.clone(),
                    TranscriptEntry::Tool {
                        call: Box::new(call),
                    },
                );
                out.push(AppEvent::ToolInitiated(ToolInitiated {
                    id,
                    message_id,
                    tool_name,
                    execution,
                    parameters,
                    server_name,
                    claims,
                    timeout_ms,
                    at: now,
                    read_only,
                    destructive,
                    open_world,
                }));
            }
            UiEvent::ToolCallProgress {
                id,
                state,
                status,
                detail,
                ..
            } => {
                if let Some(call) = self.call_mut(&id) {
                    if !call.status.is_final() {
                        if status != call.status {
                            match status {
                                ToolCallStatus::AwaitingConsent => {
                                    call.awaiting_consent_at = Some(now);
                                }
                                ToolCallStatus::Running => call.running_at = Some(now),
                                _ => {}
                            }
                        }
                        call.status = status;
                        call.detail.clone_from(&detail);
                    }
                }
                out.push(AppEvent::ToolProgress(ToolProgress {
                    id,
                    state,
                    status,
                    detail,
                    at: now,
                }));
            }
            UiEvent::ToolCallHandedToServer { id, .. } => {
                if let Some(call) = self.call_mut(&id) {
                    call.detail = Some("run by the assistant".into());
                }
            }
            UiEvent::ToolCallFinished {
                id,
                tool_name,
                success,
                status,
                result,
                error_code,
                error_message,
                executed_by,
            } => {
                let error_code = error_code.map(|c| c.as_str().to_owned());
                let result = result.map(|m| cap_result(Value::Object(m)));
                let by = match executed_by {
                    Side::Client => ExecutedBy::Client,
                    Side::Server => ExecutedBy::Server,
                };
                if let Some(call) = self.call_mut(&id) {
                    if !call.status.is_final() {
                        call.status = status;
                        call.finished_at = Some(now);
                        call.result.clone_from(&result);
                        call.error_code.clone_from(&error_code);
                        call.error_message.clone_from(&error_message);
                        call.executed_by = Some(by);
                        let from = call.running_at.unwrap_or(call.initiated_at);
                        finished = Some(Finished {
                            tool: tool_name.clone(),
                            took_ms: now.saturating_sub(from),
                            success,
                        });
                    }
                }
                out.push(AppEvent::ToolResult(ToolResult {
                    id,
                    success,
                    status,
                    result,
                    error_code,
                    error_message,
                    executed_by: Some(by),
                    at: now,
                }));
            }
            UiEvent::ToolCallCancelRequested { .. } => {}
            UiEvent::ConsentRequested(p) => {
                let hints = if p.server.is_some() {
                    (None, None, None)
                } else {
                    self.hints(&p.tool)
                };
                let execution =
                    self.index
                        .get(&p.request_id)
                        .and_then(|&i| match self.transcript.get(i) {
                            Some(TranscriptEntry::Tool { call }) => Some(call.execution),
                            _ => None,
                        });
                let known = consent::Known {
                    conversation_id: self.conversation_id().unwrap_or_default().to_owned(),
                    execution,
                    hints,
                };
                out.extend(self.consents.ask(consent::request(p, known)));
            }
            UiEvent::ConsentWithdrawn { consent_id, reason } => {
                out.push(self.consents.withdraw(consent_id, reason));
            }
            UiEvent::ProtocolError {
                code,
                message,
                fatal,
                ..
            } => out.push(AppEvent::Error(ErrorEvent {
                code,
                message,
                fatal: Some(fatal),
            })),
            UiEvent::Error { message } => out.push(AppEvent::Error(ErrorEvent {
                code: "internal_error".into(),
                message,
                fatal: None,
            })),
            UiEvent::Ended { reason, .. } => out.push(self.disconnected(Some(reason))),
            // `UiEvent` is non-exhaustive: what this version does not know is not shown.
            _ => {}
        }
        (out, finished)
    }
}

/// The most of one tool result the live transcript holds and sends to the page, in bytes of
/// JSON. The history store keeps the whole result (up to its own cap); the page only shows
/// it as text, and a session that reads many large files must not keep them all in memory.
pub const LIVE_RESULT_BYTES: usize = 64 * 1024;

/// `result` as is when its JSON fits in [`LIVE_RESULT_BYTES`]; otherwise a map that says so,
/// with the start of the JSON text (cut at a character boundary) and the full size.
pub fn cap_result(result: Value) -> Value {
    let text = match serde_json::to_string(&result) {
        Ok(t) if t.len() > LIVE_RESULT_BYTES => t,
        _ => return result,
    };
    let mut end = LIVE_RESULT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut m = serde_json::Map::new();
    m.insert("truncated".into(), Value::Bool(true));
    m.insert("originalBytes".into(), Value::from(text.len()));
    m.insert(
        "note".into(),
        Value::String(format!(
            "This result is {} bytes; the first {end} bytes of its JSON are shown here. The \
             whole result is in the conversation's history (History, or `outpost history \
             show`).",
            text.len()
        )),
    );
    m.insert("preview".into(), Value::String(text[..end].to_owned()));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::contract::{ExecutionMode, ToolProgressState};
    use outpost_core::{ConsentPrompt, ToolErrorCode, WithdrawReason};
    use serde_json::json;

    use crate::contract::Decision;

    /// A session that reads many large files must not keep them all: the live card and the
    /// event carry at most [`LIVE_RESULT_BYTES`] of each, and say so.
    #[test]
    fn large_results_are_capped_in_the_live_transcript() {
        let mut state = LiveState::default();
        let _ = state.apply(started("c1"), 1);
        let big = "x".repeat(4 * 1024 * 1024);
        for i in 0..10 {
            let id = format!("r{i}");
            let _ = state.apply(
                UiEvent::ToolCallRequested {
                    id: id.clone(),
                    message_id: "m1".into(),
                    tool_name: "read_local_file".into(),
                    server_name: None,
                    claims: None,
                    execution: ExecutionMode::Client,
                    parameters: serde_json::Map::new(),
                    timeout_ms: 30_000,
                },
                2,
            );
            let mut result = serde_json::Map::new();
            result.insert("content".into(), Value::String(big.clone()));
            let (out, _) = state.apply(
                UiEvent::ToolCallFinished {
                    id: id.clone(),
                    tool_name: "read_local_file".into(),
                    success: true,
                    status: ToolCallStatus::Completed,
                    result: Some(result),
                    error_code: None,
                    error_message: None,
                    executed_by: Side::Client,
                },
                3,
            );
            let sent = out
                .iter()
                .find_map(|e| match e {
                    AppEvent::ToolResult(r) => r.result.clone(),
                    _ => None,
                })
                .unwrap();
            let text = serde_json::to_string(&sent).unwrap();
            assert!(text.len() < LIVE_RESULT_BYTES + 1024, "{}", text.len());
            assert_eq!(sent["truncated"], json!(true));
            assert!(sent["originalBytes"].as_u64().unwrap() > 4 * 1024 * 1024);
        }
        let held = serde_json::to_string(&state.snapshot(true).transcript).unwrap();
        assert!(
            held.len() < 10 * (LIVE_RESULT_BYTES + 2048),
            "{}",
            held.len()
        );
        // Small results pass unchanged.
        let small = json!({"content": "hello"});
        assert_eq!(cap_result(small.clone()), small);
    }

    fn started(conv: &str) -> UiEvent {
        UiEvent::SessionStarted {
            conversation_id: conv.into(),
            session_id: "s1".into(),
            assistant_name: "Demo".into(),
            protocol_version: 1,
            mode: outpost_core::AssistantMode::Outpost,
            attachments: false,
        }
    }

    #[test]
    fn a_tool_call_goes_from_initiated_to_denied_and_events_match_the_contract() {
        let mut s = LiveState::default();
        s.apply(started("c1"), 1);
        let (ev, _) = s.apply(
            UiEvent::ToolCallRequested {
                id: "t1".into(),
                message_id: "m1".into(),
                tool_name: "read_local_file".into(),
                server_name: None,
                claims: None,
                execution: ExecutionMode::Client,
                parameters: json!({"path": "~/x"}).as_object().unwrap().clone(),
                timeout_ms: 30_000,
            },
            10,
        );
        assert_eq!(
            serde_json::to_value(&ev[0]).unwrap(),
            json!({"type": "tool_initiated", "data": {"id": "t1", "messageId": "m1",
                "toolName": "read_local_file", "execution": "client",
                "parameters": {"path": "~/x"}, "timeoutMs": 30000, "at": 10}})
        );
        s.apply(
            UiEvent::ToolCallProgress {
                id: "t1".into(),
                state: ToolProgressState::AwaitingConsent,
                status: ToolCallStatus::AwaitingConsent,
                detail: None,
                by: Side::Client,
            },
            11,
        );
        let (ev, _) = s.apply(
            UiEvent::ConsentRequested(ConsentPrompt {
                consent_id: "k1".into(),
                request_id: "t1".into(),
                tool: "read_local_file".into(),
                server: None,
                description: String::new(),
                claims: None,
                parameters: json!({"path": "~/x"}).as_object().unwrap().clone(),
                summary: "Read ~/x".into(),
                paths: vec!["/home/u/x".into()],
                folder: Some("/home/u".into()),
                reason: "outside".into(),
                destructive: false,
                options: vec![Decision::AllowOnce, Decision::DenyOnce],
                expires_in_ms: 60_000,
            }),
            12,
        );
        let v = serde_json::to_value(&ev[0]).unwrap();
        assert_eq!(v["type"], "consent_request");
        assert_eq!(v["data"]["conversationId"], "c1");
        assert_eq!(v["data"]["execution"], "client");
        assert_eq!(s.snapshot(true).pending_consents.len(), 1);
        // The broker closes an answered question through the core's events.
        let (ev, _) = s.apply(
            UiEvent::ConsentWithdrawn {
                consent_id: "k1".into(),
                reason: WithdrawReason::Answered,
            },
            13,
        );
        assert_eq!(
            serde_json::to_value(&ev[0]).unwrap(),
            json!({"type": "consent_withdrawn", "data": {"consentId": "k1", "reason": "answered"}})
        );
        assert!(s.snapshot(true).pending_consents.is_empty());
        let (_, fin) = s.apply(
            UiEvent::ToolCallFinished {
                id: "t1".into(),
                tool_name: "read_local_file".into(),
                success: false,
                status: ToolCallStatus::Denied,
                result: None,
                error_code: Some(ToolErrorCode::PermissionDenied),
                error_message: Some("The user declined.".into()),
                executed_by: Side::Client,
            },
            20,
        );
        assert_eq!(fin.unwrap().took_ms, 10);
        let snap = serde_json::to_value(s.snapshot(true)).unwrap();
        assert_eq!(snap["transcript"][0]["kind"], "tool");
        assert_eq!(snap["transcript"][0]["call"]["status"], "denied");
        assert_eq!(snap["transcript"][0]["call"]["awaitingConsentAt"], 11);
        // A late second result does not change a finished card.
        let (_, fin) = s.apply(
            UiEvent::ToolCallFinished {
                id: "t1".into(),
                tool_name: "read_local_file".into(),
                success: true,
                status: ToolCallStatus::Completed,
                result: None,
                error_code: None,
                error_message: None,
                executed_by: Side::Client,
            },
            30,
        );
        assert!(fin.is_none());
        let snap = serde_json::to_value(s.snapshot(true)).unwrap();
        assert_eq!(snap["transcript"][0]["call"]["status"], "denied");
    }

    #[test]
    fn deltas_assemble_repeats_are_ignored_and_a_new_conversation_clears() {
        let mut s = LiveState::default();
        s.apply(started("c1"), 1);
        for (seq, d) in [(0, "Hel"), (1, "lo"), (1, "lo")] {
            s.apply(
                UiEvent::AssistantDelta {
                    message_id: "a1".into(),
                    seq,
                    delta: d.into(),
                },
                2,
            );
        }
        let snap = s.snapshot(true);
        assert_eq!(
            snap.transcript,
            vec![TranscriptEntry::Assistant {
                id: "a1".into(),
                text: "Hello".into(),
                at: 2,
                in_reply_to: None
            }]
        );
        s.apply(started("c1"), 3);
        assert_eq!(s.snapshot(true).transcript.len(), 1, "a rejoin keeps it");
        s.apply(started("c2"), 4);
        assert!(s.snapshot(true).transcript.is_empty());
    }

    #[test]
    fn a_continued_conversation_shows_its_past_and_its_welcome_keeps_it() {
        let mut s = LiveState::default();
        s.apply(started("c1"), 1);
        s.apply(
            UiEvent::UserMessage {
                id: "u-now".into(),
                text: "today".into(),
                queued: false,
                attachments: Vec::new(),
            },
            2,
        );
        let past = vec![
            TranscriptEntry::User {
                id: "u-old".into(),
                text: "remember the otter".into(),
                at: 1,
                speech: None,
                attachments: Vec::new(),
            },
            TranscriptEntry::Assistant {
                id: "a-old".into(),
                text: "Noted.".into(),
                at: 1,
                in_reply_to: None,
            },
        ];
        let ev = s.continue_with("c0".into(), past.clone());
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["type"], "conversation");
        assert_eq!(v["data"]["conversationId"], "c0");
        assert_eq!(v["data"]["transcript"][0]["text"], "remember the otter");
        assert_eq!(s.conversation_id(), Some("c0"));
        let snap = s.snapshot(true);
        assert_eq!(snap.transcript, past);
        assert_eq!(snap.session.unwrap().conversation_id, "c0");
        // Its welcome keeps what is shown; the next message follows it.
        s.apply(started("c0"), 5);
        s.apply(
            UiEvent::AssistantMessage {
                id: "a-old".into(),
                text: "Noted, again.".into(),
                in_reply_to: None,
            },
            6,
        );
        let snap = s.snapshot(true);
        assert_eq!(
            snap.transcript.len(),
            2,
            "a repeated id replaces, never duplicates"
        );
        assert_eq!(
            snap.transcript[1],
            TranscriptEntry::Assistant {
                id: "a-old".into(),
                text: "Noted, again.".into(),
                at: 1,
                in_reply_to: None,
            }
        );
        // An assistant that opens another conversation instead: the view follows it.
        s.apply(started("c9"), 7);
        assert!(s.snapshot(true).transcript.is_empty());
    }

    #[test]
    fn reconnecting_counts_attempts_and_connected_resets() {
        let mut s = LiveState::default();
        let rec = |s: &mut LiveState| {
            s.apply(
                UiEvent::Connection {
                    state: LinkState::Reconnecting,
                    detail: Some("signal lost".into()),
                },
                1,
            )
            .0
        };
        rec(&mut s);
        let ev = rec(&mut s);
        assert_eq!(
            serde_json::to_value(&ev[0]).unwrap(),
            json!({"type": "connection", "data": {"state": "reconnecting",
                   "detail": "signal lost", "attempt": 2}})
        );
        s.apply(
            UiEvent::Connection {
                state: LinkState::Reconnected,
                detail: None,
            },
            2,
        );
        assert_eq!(
            s.snapshot(true).connection.state,
            ConnectionStatus::Connected
        );
    }

    #[test]
    fn the_network_path_shows_while_connected() {
        let mut s = LiveState::default();
        let link = |s: &mut LiveState, state| {
            s.apply(
                UiEvent::Connection {
                    state,
                    detail: None,
                },
                1,
            )
            .0
        };
        link(&mut s, LinkState::Connected);
        let (ev, _) = s.apply(
            UiEvent::NetworkPath {
                path: "relayed (TURN/TLS)".into(),
                relayed: true,
            },
            2,
        );
        assert_eq!(
            serde_json::to_value(&ev[0]).unwrap(),
            json!({"type": "connection", "data": {"state": "connected",
                   "path": "relayed (TURN/TLS)", "relayed": true}})
        );
        assert_eq!(
            s.snapshot(true).connection.path.as_deref(),
            Some("relayed (TURN/TLS)")
        );
        // Lost: the path is unknown until the core reports the new one.
        let ev = link(&mut s, LinkState::Reconnecting);
        assert_eq!(
            serde_json::to_value(&ev[0]).unwrap()["data"].get("path"),
            None
        );
        s.apply(
            UiEvent::NetworkPath {
                path: "direct (TCP)".into(),
                relayed: false,
            },
            3,
        );
        link(&mut s, LinkState::Reconnected);
        let conn = s.snapshot(true).connection;
        assert_eq!(
            (conn.state, conn.path.as_deref(), conn.relayed),
            (
                ConnectionStatus::Connected,
                Some("direct (TCP)"),
                Some(false)
            )
        );
    }
}
