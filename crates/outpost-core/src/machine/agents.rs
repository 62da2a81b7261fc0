//! LiveKit Agents mode: the assistant speaks LiveKit's frontend conventions instead of the
//! Outpost protocol (docs/AGENTS.md).
//!
//! - The mode is chosen when the assistant shows it speaks them (it sets `lk.agent.state`,
//!   sends an `lk.transcription` stream or calls one of our RPC methods), or when no welcome
//!   came within [`MachineConfig::agents_wait_ms`](super::MachineConfig::agents_wait_ms) of
//!   the hello. A ServerWelcome that arrives later still switches to the Outpost protocol.
//! - Outpost opens the conversation itself (the id is Outpost's: the one the user asked to
//!   continue, or a new NanoID).
//! - User messages go out as text streams on `lk.chat`; transcription segments come in as
//!   assistant text (interim text replaced by later text of the same segment, recorded when
//!   final); `lk.agent.state` drives the status.
//! - Tools are RPC methods named like the tools. A call goes through the same lifecycle as
//!   a ToolUseRequest (record, card, executor, consent, audit); its answer is an RPC reply:
//!   the result map as JSON, or an [`RpcFailure`] whose `data` carries the seed error code.
//!   `outpost.list_tools` returns the catalogue in pages; results over the RPC payload limit
//!   are cut with a note and read on with `outpost.read_result`.

use std::collections::VecDeque;

use outpost_protocol::{
    AssistantState, Execution, ToolErrorCode, ToolUseCancel, ToolUseRequest, ToolUseResult,
};
use outpost_store as store;
use outpost_store::Millis;
use serde_json::{Map, Value, json};

use super::io::{Effect, Record, RpcCall, RpcFailure};
use super::{Call, Fx, Machine, Phase};
use crate::events::{AssistantMode, UiEvent};

/// LiveKit's limit on an RPC request or response payload, in bytes.
pub const RPC_PAYLOAD_LIMIT: usize = 15 * 1024;
/// The RPC method that lists Outpost's tools.
pub const LIST_TOOLS: &str = "outpost.list_tools";
/// The RPC method that reads on in a result that was cut to fit [`RPC_PAYLOAD_LIMIT`].
pub const READ_RESULT: &str = "outpost.read_result";
/// The RPC method that returns the open conversation's stored messages (what an agent
/// can load into its chat context, e.g. after the user continued a stored conversation).
pub const CONVERSATION: &str = "outpost.conversation";
/// The byte-stream topic of images for the agent (LiveKit's documented convention: the
/// agent's handler adds them to its chat context).
pub const IMAGES_TOPIC: &str = "images";
/// The byte-stream topic of other files (LiveKit has no convention for them; an agent
/// registers its own handler).
pub const FILES_TOPIC: &str = "files";
/// Byte-stream header attribute with the file's SHA-256 (lower-case hex).
pub const SHA256_ATTRIBUTE: &str = "outpost.sha256";
/// Byte-stream header attribute naming the user message the file goes with.
pub const MESSAGE_ATTRIBUTE: &str = "outpost.message_id";

/// The text-stream topic on which Outpost tells the agent the id of the conversation it
/// opened (at the start, when the user starts a new one, and when the user continues a
/// stored one). A text stream needs no grant beyond publishing data (a participant
/// attribute would need `canUpdateOwnMetadata`, which many tokens lack).
pub const CONVERSATION_TOPIC: &str = "outpost.conversation";
/// The text-stream topic user messages go out on.
pub const CHAT_TOPIC: &str = "lk.chat";
/// LiveKit's RPC error code for an error raised by the method's handler.
pub const RPC_APPLICATION_ERROR: u32 = 1500;
/// Bytes of cut results held for `outpost.read_result`, newest kept.
pub const HELD_RPC_RESULT_BYTES: usize = 8 * 1024 * 1024;

/// Room of a page or chunk below the payload limit, for the JSON around it.
const ENVELOPE: usize = 1024;
/// Longest transcription segment kept, in bytes; what comes beyond it is dropped.
pub const MAX_SEGMENT_BYTES: usize = 256 * 1024;
/// Transcription segments assembled at once; a new one beyond it ends the oldest.
const MAX_OPEN_SEGMENTS: usize = 16;
/// Segment ids remembered after their end (an agent may send a segment again).
const KNOWN_SEGMENTS: usize = 256;
/// Refused RPC calls of one caller are recorded once at the first, then as one count per
/// this long.
pub const REFUSAL_WINDOW_MS: Millis = 60_000;
/// Callers whose refused calls are being counted; a new one beyond it flushes the oldest.
const MAX_REFUSING_CALLERS: usize = 64;
/// Method names a count of refused calls lists (the first ones).
const REFUSED_METHODS_LISTED: usize = 8;

impl RpcFailure {
    /// The answer to a caller that is not the assistant.
    pub fn not_the_assistant() -> Self {
        Self::tool_error(
            &ToolErrorCode::PermissionDenied,
            "Only the assistant Outpost is talking to may use its tools",
            None,
        )
    }

    fn tool_error(
        code: &ToolErrorCode,
        message: &str,
        result: Option<&Map<String, Value>>,
    ) -> Self {
        let code = code.as_str();
        let mut data = json!({"code": code, "message": message});
        if let Some(r) = result {
            data["result"] = Value::Object(r.clone());
        }
        let mut data = data.to_string();
        if data.len() > RPC_PAYLOAD_LIMIT - ENVELOPE {
            data = json!({"code": code, "message": message, "resultOmitted": true}).to_string();
        }
        Self {
            code: RPC_APPLICATION_ERROR,
            message: cut(message, RPC_PAYLOAD_LIMIT / 4),
            data: Some(data),
        }
    }
}

fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// Agents-mode state of the machine.
#[derive(Debug, Default)]
pub(super) struct AgentsState {
    /// The agent said it is up (`lk.agent.state` other than "initializing"), or we gave
    /// up waiting for that: chat goes out.
    pub(super) ready: bool,
    /// When LiveKit Agents mode began.
    pub(super) since: Option<Millis>,
    /// The user's messages sent on `lk.chat` that no final reply followed yet, oldest
    /// first: LiveKit's conventions do not say which message a reply answers, so a final
    /// transcript of the agent's is taken to answer the oldest.
    pub(super) awaiting_reply: VecDeque<String>,
    /// RPC calls in flight: request id → when the caller stops waiting.
    pub(super) waiting: Vec<(String, Millis)>,
    /// Results cut to fit, for `outpost.read_result`: (request id, JSON text).
    pub(super) held: VecDeque<(String, String)>,
    pub(super) held_bytes: usize,
    /// Transcription segments being assembled, oldest first.
    segments: VecDeque<(String, Segment)>,
    /// Ids of segments that ended (newest last): one sent again replaces its text.
    known_segments: VecDeque<String>,
    /// The sequence number of the last [`UiEvent::AssistantDelta`] of a transcript
    /// (one counter for all, so it grows within every segment).
    delta_seq: u32,
    /// Refused RPC calls counted since their caller's last record, oldest window first.
    refusals: VecDeque<Refusals>,
}

/// A caller's refused RPC calls in the current window, after the first (recorded).
#[derive(Debug)]
struct Refusals {
    caller: String,
    since: Millis,
    more: u64,
    methods: Vec<String>,
}

/// A transcription segment being assembled.
#[derive(Debug, Default)]
struct Segment {
    text: String,
    /// Bytes of `text` last shown whole (the user's speech).
    shown: usize,
    /// Sent again after it ended: its interim text is not shown piece by piece (the
    /// final replaces what was shown).
    again: bool,
}

/// One input of a transcription stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct Piece<'a> {
    pub segment_id: &'a str,
    pub text: &'a str,
    pub first: bool,
    pub is_final: bool,
}

impl AgentsState {
    /// Adds `piece` to its segment (a first piece starts the segment over): the segment
    /// and the text added (cut to [`MAX_SEGMENT_BYTES`]). A final piece's segment is
    /// taken out.
    fn assemble(&mut self, piece: Piece<'_>) -> (Segment, String, bool) {
        let at = self
            .segments
            .iter()
            .position(|(id, _)| id == piece.segment_id);
        let mut seg = match at {
            Some(i) if !piece.first => self.segments.remove(i).map(|(_, s)| s).unwrap_or_default(),
            at => {
                if let Some(i) = at {
                    self.segments.remove(i);
                }
                Segment {
                    again: self.known_segments.iter().any(|k| k == piece.segment_id),
                    ..Segment::default()
                }
            }
        };
        let room = MAX_SEGMENT_BYTES.saturating_sub(seg.text.len());
        let added = cut(piece.text, room);
        seg.text.push_str(&added);
        if !piece.is_final {
            return (seg, added, false);
        }
        self.known_segments.push_back(piece.segment_id.to_owned());
        if self.known_segments.len() > KNOWN_SEGMENTS {
            self.known_segments.pop_front();
        }
        (seg, added, true)
    }

    /// Puts a segment that goes on back, ending the oldest beyond the limit.
    fn keep(&mut self, segment_id: &str, seg: Segment) {
        self.segments.push_back((segment_id.to_owned(), seg));
        if self.segments.len() > MAX_OPEN_SEGMENTS {
            self.segments.pop_front();
        }
    }
}

/// The `lk.agent.state` values and how the status shows them.
fn status_of(state: &str) -> (AssistantState, Option<String>) {
    match state {
        "listening" => (AssistantState::Listening, None),
        "thinking" => (AssistantState::Thinking, None),
        "speaking" => (AssistantState::Speaking, None),
        "initializing" => (
            AssistantState::Idle,
            Some("the assistant is starting".into()),
        ),
        "idle" => (AssistantState::Idle, None),
        other => (
            AssistantState::Idle,
            Some(format!("assistant state '{}'", cut(other, 64))),
        ),
    }
}

impl Machine {
    /// The mode the assistant speaks, once known.
    pub fn mode(&self) -> Option<AssistantMode> {
        self.mode
    }

    pub(super) fn in_agents_mode(&self) -> bool {
        self.mode == Some(AssistantMode::LivekitAgents)
    }

    /// Switches to LiveKit Agents mode (once) and opens the conversation.
    pub(super) fn enter_agents_mode(&mut self, fx: &mut Fx, now: Millis, why: &str) {
        // Known already, or an Outpost-protocol assistant (its welcome decided).
        if self.mode.is_some() || self.phase == Phase::Ended || self.assistant.is_none() {
            return;
        }
        self.mode = Some(AssistantMode::LivekitAgents);
        self.agents.since = Some(now);
        fx.ui(UiEvent::AssistantMode {
            mode: AssistantMode::LivekitAgents,
            detail: why.to_owned(),
        });
        self.open_agents_conversation(fx, now, why);
    }

    /// Opens the conversation the user wants (or a new one) with a LiveKit agent: Outpost
    /// chooses the id, records it, tells the UI, and sends it to the agent on
    /// [`CONVERSATION_TOPIC`] so the agent can see the switch.
    pub(super) fn open_agents_conversation(&mut self, fx: &mut Fx, now: Millis, why: &str) {
        let Some(assistant) = self.assistant.clone() else {
            return;
        };
        let conversation = self.wanted.clone().unwrap_or_else(outpost_protocol::new_id);
        if self.conversation.as_ref() != Some(&conversation)
            || self.welcomed_by.as_ref() != Some(&assistant)
        {
            self.end_grants();
        }
        // The agent reads the earlier part itself (`outpost.conversation`) if it wants it.
        self.earlier.clear();
        self.welcomed_by = Some(assistant.clone());
        self.conversation = Some(conversation.clone());
        self.wanted = Some(conversation.clone());
        self.phase = Phase::Welcomed;
        fx.record(Record::Conversation(store::NewConversation {
            id: conversation.as_str().into(),
            title: None,
            room: self.config.room.clone(),
            assistant_identity: Some(assistant.clone()),
            started_at: now,
        }));
        self.record_status(
            fx,
            now,
            "session_started",
            Some(format!("LiveKit Agents mode with {assistant} ({why})")),
        );
        fx.0.push(Effect::SendText {
            to: assistant.clone(),
            topic: CONVERSATION_TOPIC.into(),
            text: conversation.clone(),
        });
        fx.ui(UiEvent::SessionStarted {
            conversation_id: conversation,
            session_id: String::new(),
            assistant_name: assistant,
            protocol_version: 0,
            mode: AssistantMode::LivekitAgents,
            attachments: true,
        });
        self.flush(fx, now);
    }

    /// The assistant's `lk.agent.state` changed.
    pub(super) fn agent_state(&mut self, fx: &mut Fx, now: Millis, identity: &str, state: &str) {
        if !self.is_assistant(identity) {
            return;
        }
        self.enter_agents_mode(fx, now, "it set lk.agent.state");
        if !self.in_agents_mode() {
            return;
        }
        let (shown, detail) = status_of(state);
        self.record_status(fx, now, shown.as_str(), detail.clone());
        fx.ui(UiEvent::Status {
            state: shown,
            tool_use_id: None,
            detail,
        });
        if state != "initializing" && !self.agents.ready {
            self.agents.ready = true;
            self.flush(fx, now);
        }
    }

    /// Whether chat may go out to the agent now (see [`AgentsState::ready`]).
    pub(super) fn agent_takes_chat(&mut self, now: Millis) -> bool {
        if !self.agents.ready
            && self
                .agents
                .since
                .is_some_and(|t| now - t >= self.config.agent_ready_wait_ms)
        {
            // An agent that never says its state (one without an AgentSession): chat
            // goes out anyway.
            self.agents.ready = true;
        }
        self.agents.ready
    }

    /// A piece of a transcription segment of the assistant's words: shown as it comes
    /// (each piece once, as an [`UiEvent::AssistantDelta`], so a long segment costs what
    /// it says, not its square), and whole, shown and recorded, when final.
    pub(super) fn transcript(&mut self, fx: &mut Fx, now: Millis, sender: &str, piece: Piece<'_>) {
        if !self.is_assistant(sender) {
            return;
        }
        self.enter_agents_mode(fx, now, "it sent a transcription");
        if !self.in_agents_mode() {
            return;
        }
        let (seg, added, done) = self.agents.assemble(piece);
        let id = piece.segment_id;
        if done && seg.text.is_empty() {
            // Nothing was said (its deltas, if any, were empty too): no empty bubble.
            return;
        }
        if !done {
            if !seg.again && !added.is_empty() {
                self.agents.delta_seq = self.agents.delta_seq.wrapping_add(1);
                fx.ui(UiEvent::AssistantDelta {
                    message_id: id.to_owned(),
                    seq: self.agents.delta_seq,
                    delta: added,
                });
            }
            self.agents.keep(id, seg);
            return;
        }
        fx.record(Record::Message(store::NewMessage {
            conversation_id: self.conv(),
            id: id.to_owned(),
            role: store::Role::Assistant,
            text: seg.text.clone(),
            created_at: now,
            completed_at: Some(now),
        }));
        fx.ui(UiEvent::AssistantMessage {
            id: id.to_owned(),
            text: seg.text,
            in_reply_to: self.agents.awaiting_reply.pop_front(),
        });
    }

    /// A piece of a transcription of the user's own speech (voice): shown as the user's
    /// words while they grow, recorded as a user message when final. It is the agent's
    /// own reading of what it heard, so nothing is sent back. The text so far is shown
    /// again only once it grew by a quarter (at least 64 bytes), so a long segment in
    /// small pieces costs a few times what it says, not its square.
    pub(super) fn user_transcript(
        &mut self,
        fx: &mut Fx,
        now: Millis,
        sender: &str,
        piece: Piece<'_>,
    ) {
        if !self.is_assistant(sender) {
            return;
        }
        self.enter_agents_mode(fx, now, "it sent a transcription");
        if !self.in_agents_mode() {
            return;
        }
        let (mut seg, _, done) = self.agents.assemble(piece);
        let id = piece.segment_id;
        if done && seg.text.is_empty() {
            // Nothing heard: no empty "said aloud" message is kept or shown.
            return;
        }
        if done {
            fx.record(Record::Message(store::NewMessage {
                conversation_id: self.conv(),
                id: id.to_owned(),
                role: store::Role::User,
                text: seg.text.clone(),
                created_at: now,
                completed_at: Some(now),
            }));
        } else if seg.text.len() >= seg.shown + (seg.shown / 4).max(64)
            || (seg.shown == 0 && !seg.text.is_empty())
        {
            seg.shown = seg.text.len();
        } else {
            self.agents.keep(id, seg);
            return;
        }
        fx.ui(UiEvent::UserTranscript {
            id: id.to_owned(),
            text: seg.text.clone(),
            is_final: done,
        });
        if !done {
            self.agents.keep(id, seg);
        }
    }

    /// An RPC call arrived.
    pub(super) fn rpc(&mut self, fx: &mut Fx, now: Millis, call: RpcCall) {
        let reply = |fx: &mut Fx, id: &str, r: Result<String, RpcFailure>| {
            fx.0.push(Effect::RpcReply {
                request_id: id.to_owned(),
                reply: r,
            });
        };
        if !self.is_assistant(&call.caller) {
            self.rpc_refused(fx, now, &call.caller, &call.method, Some(&call.request_id));
            reply(fx, &call.request_id, Err(RpcFailure::not_the_assistant()));
            return;
        }
        self.enter_agents_mode(fx, now, "it called a tool over RPC");
        match call.method.as_str() {
            LIST_TOOLS => {
                let r = self.list_tools(&call.payload);
                reply(fx, &call.request_id, r);
            }
            READ_RESULT => {
                let r = self.read_result(&call.payload);
                reply(fx, &call.request_id, r);
            }
            CONVERSATION => match &self.conversation {
                Some(c) => fx.0.push(Effect::ReadConversation {
                    request_id: call.request_id,
                    conversation_id: c.clone(),
                }),
                None => reply(
                    fx,
                    &call.request_id,
                    Err(RpcFailure::tool_error(
                        &ToolErrorCode::ExecutionError,
                        "No conversation is open yet",
                        None,
                    )),
                ),
            },
            _ => self.rpc_tool(fx, now, call),
        }
    }

    /// A call from `caller`, who is not the assistant, was refused (here, or by the room
    /// before its payload was read): the history's protocol log says so, once for the
    /// first call and then once per [`REFUSAL_WINDOW_MS`] with the count of the others,
    /// so a caller that keeps calling cannot fill the history.
    pub(super) fn rpc_refused(
        &mut self,
        fx: &mut Fx,
        now: Millis,
        caller: &str,
        method: &str,
        request_id: Option<&str>,
    ) {
        let caller = cut(caller, 128);
        let method = cut(method, 128);
        let at = self.agents.refusals.iter().position(|r| r.caller == caller);
        if let Some(i) = at {
            if now - self.agents.refusals[i].since < REFUSAL_WINDOW_MS {
                let r = &mut self.agents.refusals[i];
                r.more += 1;
                if r.methods.len() < REFUSED_METHODS_LISTED && !r.methods.contains(&method) {
                    r.methods.push(method);
                }
                return;
            }
            if let Some(r) = self.agents.refusals.remove(i) {
                self.record_refusals(fx, now, r);
            }
        }
        if self.agents.refusals.len() >= MAX_REFUSING_CALLERS {
            if let Some(r) = self.agents.refusals.pop_front() {
                self.record_refusals(fx, now, r);
            }
        }
        fx.record(Record::ProtocolError(store::NewProtocolError {
            conversation_id: self.conversation.as_deref().map(Into::into),
            at: now,
            code: "rpc_refused".into(),
            message: format!("{caller} called {method} but is not the assistant; refused"),
            detail: request_id.map(|id| format!("rpc request {}", cut(id, 128))),
        }));
        self.agents.refusals.push_back(Refusals {
            caller,
            since: now,
            more: 0,
            methods: Vec::new(),
        });
    }

    /// Records the refused calls counted in windows that are over (all of them with
    /// `all`, when the session ends).
    pub(super) fn flush_refusals(&mut self, fx: &mut Fx, now: Millis, all: bool) {
        while let Some(r) = self.agents.refusals.front() {
            if !all && now - r.since < REFUSAL_WINDOW_MS {
                // Windows end in the order they began.
                break;
            }
            if let Some(r) = self.agents.refusals.pop_front() {
                self.record_refusals(fx, now, r);
            }
        }
    }

    fn record_refusals(&self, fx: &mut Fx, now: Millis, r: Refusals) {
        if r.more == 0 {
            return;
        }
        fx.record(Record::ProtocolError(store::NewProtocolError {
            conversation_id: self.conversation.as_deref().map(Into::into),
            at: now,
            code: "rpc_refused".into(),
            message: format!(
                "{} made {} more calls in the {} s after its first refused call ({}); all \
                 refused, it is not the assistant",
                r.caller,
                r.more,
                (now - r.since).max(0) / 1000,
                r.methods.join(", ")
            ),
            detail: None,
        }));
    }

    fn list_tools(&self, payload: &str) -> Result<String, RpcFailure> {
        let cursor = if payload.trim().is_empty() {
            0
        } else {
            serde_json::from_str::<Value>(payload)
                .ok()
                .and_then(|v| v.get("cursor").and_then(Value::as_u64))
                .and_then(|c| usize::try_from(c).ok())
                .unwrap_or(0)
        };
        let tools = &self.config.tools;
        let mut page: Vec<Value> = Vec::new();
        let mut size = 0usize;
        let mut next = None;
        for (i, t) in tools.iter().enumerate().skip(cursor) {
            let v = serde_json::to_value(t).unwrap_or(Value::Null);
            let len = v.to_string().len();
            if !page.is_empty() && size + len > RPC_PAYLOAD_LIMIT - ENVELOPE {
                next = Some(i);
                break;
            }
            if len > RPC_PAYLOAD_LIMIT - ENVELOPE {
                // A descriptor too large for any page: listed without its schemas.
                let mut slim = v.clone();
                if let Some(o) = slim.as_object_mut() {
                    o.remove("parameters");
                    o.remove("resultSchema");
                    o.insert("schemaOmitted".into(), Value::Bool(true));
                }
                size += slim.to_string().len();
                page.push(slim);
                continue;
            }
            size += len;
            page.push(v);
        }
        let mut out = json!({ "tools": page });
        if let Some(n) = next {
            out["nextCursor"] = json!(n);
        }
        Ok(out.to_string())
    }

    fn read_result(&self, payload: &str) -> Result<String, RpcFailure> {
        let bad = |m: &str| RpcFailure::tool_error(&ToolErrorCode::InvalidParameters, m, None);
        let v: Value =
            serde_json::from_str(payload).map_err(|e| bad(&format!("payload: not JSON: {e}")))?;
        let id = v
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("id: missing (the request id of the cut result)"))?;
        let offset = v
            .get("offset")
            .and_then(Value::as_u64)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| bad("offset: missing or not a whole number"))?;
        let Some((_, text)) = self.agents.held.iter().find(|(h, _)| h == id) else {
            return Err(RpcFailure::tool_error(
                &ToolErrorCode::ExecutionError,
                "That result is no longer held (or was never cut); run the tool again",
                None,
            ));
        };
        let (chunk, next) = chunk_at(text, offset);
        let mut out = json!({"id": id, "offset": offset, "total": text.len(), "json": chunk});
        if let Some(n) = next {
            out["nextOffset"] = json!(n);
        }
        Ok(out.to_string())
    }

    fn rpc_tool(&mut self, fx: &mut Fx, now: Millis, call: RpcCall) {
        let parameters = if call.payload.trim().is_empty() {
            Ok(Map::new())
        } else {
            match serde_json::from_str::<Value>(&call.payload) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Err("the payload must be a JSON object of the tool's parameters".into()),
                Err(e) => Err(format!("the payload is not JSON: {e}")),
            }
        };
        let parameters = match parameters {
            Ok(p) => p,
            Err(why) => {
                fx.0.push(Effect::RpcReply {
                    request_id: call.request_id,
                    reply: Err(RpcFailure::tool_error(
                        &ToolErrorCode::InvalidParameters,
                        &format!("parameters: {why}"),
                        None,
                    )),
                });
                return;
            }
        };
        let deadline = now + i64::try_from(call.response_timeout_ms).unwrap_or(i64::MAX / 2);
        let req = ToolUseRequest {
            id: call.request_id.clone(),
            message_id: String::new(),
            tool_name: call.method,
            execution: Execution::Client,
            parameters,
            timeout_ms: None,
        };
        if let Some(known) = self.calls.get(&req.id) {
            if known.status.is_final() && known.via_rpc {
                // LiveKit never repeats a request id; treat it as the duplicate it is: the
                // executor resends the answer it has, and it goes back as an RPC reply.
                fx.0.push(Effect::RunTool {
                    conversation_id: self.conv().0,
                    grant_scope: self.grant_scope(),
                    request: req,
                });
            } else {
                // The id of a call still running, or of one the Outpost protocol asked for:
                // never run twice, and never left without an answer.
                fx.0.push(Effect::RpcReply {
                    request_id: req.id,
                    reply: Err(RpcFailure::tool_error(
                        &ToolErrorCode::InvalidParameters,
                        "this request id is already in use",
                        None,
                    )),
                });
            }
            return;
        }
        self.agents
            .waiting
            .push((call.request_id.clone(), deadline));
        self.request(fx, now, req);
        if let Some(c) = self.calls.get_mut(&call.request_id) {
            c.via_rpc = true;
        }
    }

    /// The answer to an RPC tool call (instead of sending a ToolUseResult).
    pub(super) fn rpc_result(&mut self, fx: &mut Fx, r: &ToolUseResult) {
        self.agents.waiting.retain(|(id, _)| *id != r.id);
        let reply = if r.success {
            let map = r.result.clone().unwrap_or_default();
            let text = Value::Object(map).to_string();
            if text.len() <= RPC_PAYLOAD_LIMIT {
                Ok(text)
            } else {
                Ok(self.cut_result(&r.id, text))
            }
        } else {
            let code = r
                .error_code
                .as_ref()
                .unwrap_or(&ToolErrorCode::ExecutionError);
            Err(RpcFailure::tool_error(
                code,
                r.error_message.as_deref().unwrap_or("the tool failed"),
                r.result.as_ref(),
            ))
        };
        fx.0.push(Effect::RpcReply {
            request_id: r.id.clone(),
            reply,
        });
    }

    /// A result too large for one RPC payload: the first chunk, a note saying so, and the
    /// rest held for `outpost.read_result`.
    fn cut_result(&mut self, id: &str, text: String) -> String {
        let (chunk, next) = chunk_at(&text, 0);
        let total = text.len();
        let out = json!({
            "truncated": true,
            "originalBytes": total,
            "note": format!(
                "This result is {total} bytes of JSON; LiveKit RPC carries {RPC_PAYLOAD_LIMIT} \
                 bytes. \"json\" holds its start. Call {READ_RESULT} with \
                 {{\"id\": \"{id}\", \"offset\": {}}} to read on.",
                next.unwrap_or(total)
            ),
            "json": chunk,
            "nextOffset": next,
        });
        let st = &mut self.agents;
        st.held_bytes += total;
        st.held.push_back((id.to_owned(), text));
        while st.held_bytes > HELD_RPC_RESULT_BYTES && st.held.len() > 1 {
            if let Some((_, t)) = st.held.pop_front() {
                st.held_bytes -= t.len();
            }
        }
        out.to_string()
    }

    /// Calls whose caller stopped waiting are cancelled (their consent question
    /// withdrawn); the late answer is dropped by the RPC layer.
    pub(super) fn rpc_deadlines(&mut self, fx: &mut Fx, now: Millis) {
        let (gone, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.agents.waiting)
            .into_iter()
            .partition(|(_, deadline)| now >= *deadline);
        self.agents.waiting = keep;
        for (id, _) in gone {
            let running = self.calls.get(&id).is_some_and(Call::open_here);
            if running {
                fx.0.push(Effect::CancelTool(ToolUseCancel {
                    id,
                    reason: Some("the assistant stopped waiting for the answer".into()),
                }));
            }
        }
    }
}

/// The chunk of `text` at `offset` that fits an RPC payload with its envelope (cut at a
/// character boundary), and where the next one starts.
fn chunk_at(text: &str, offset: usize) -> (String, Option<usize>) {
    let mut start = offset.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    // JSON-escaping can grow a chunk (quotes, control characters): leave room for it.
    let budget = (RPC_PAYLOAD_LIMIT - ENVELOPE) / 2;
    let mut end = (start + budget).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let next = (end < text.len()).then_some(end);
    (text[start..end].to_owned(), next)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use outpost_protocol::{Message, ToolDescriptor};

    use super::super::tests::uis;
    use super::super::{Command, ExecEvent, Input, MachineConfig};
    use super::*;

    const AGENT: &str = "agent-1";

    fn tool(name: &str, schema_bytes: usize) -> ToolDescriptor {
        let mut parameters = Map::new();
        parameters.insert("description".into(), json!("x".repeat(schema_bytes)));
        ToolDescriptor {
            name: name.into(),
            description: format!("{name} does things"),
            parameters,
            result_schema: None,
            read_only: true,
            destructive: false,
            open_world: false,
            server_name: None,
            timeout_ms: Some(5_000),
        }
    }

    fn joined() -> (Machine, Vec<Effect>) {
        let mut cfg =
            MachineConfig::new(vec![tool("read_local_file", 100), tool("calculator", 50)]);
        cfg.agents_wait_ms = 3_000;
        let mut m = Machine::new(cfg);
        let fx = m.handle(
            Input::Joined {
                assistant: Some(AGENT.into()),
            },
            0,
        );
        (m, fx)
    }

    fn rpc(id: &str, caller: &str, method: &str, payload: &str) -> Input {
        Input::Rpc(RpcCall {
            request_id: id.into(),
            caller: caller.into(),
            method: method.into(),
            payload: payload.into(),
            response_timeout_ms: 30_000,
        })
    }

    fn reply_of(fx: &[Effect], id: &str) -> Result<String, RpcFailure> {
        fx.iter()
            .find_map(|e| match e {
                Effect::RpcReply { request_id, reply } if request_id == id => Some(reply.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no reply to {id} in {fx:?}"))
    }

    fn data_code(f: &RpcFailure) -> String {
        let v: Value = serde_json::from_str(f.data.as_deref().unwrap()).unwrap();
        v["code"].as_str().unwrap().to_owned()
    }

    fn agents() -> Machine {
        let (mut m, _) = joined();
        m.handle(
            Input::AgentState {
                identity: AGENT.into(),
                state: "listening".into(),
            },
            10,
        );
        assert!(m.in_agents_mode());
        m
    }

    #[test]
    fn a_new_catalogue_is_what_list_tools_lists_and_no_message_is_sent() {
        let mut m = agents();
        let mut t = tool("mcp__srv__new", 10);
        t.server_name = Some("srv".into());
        let fx = m.handle(
            Input::ToolsChanged {
                tools: vec![t],
                claims: std::collections::BTreeMap::new(),
            },
            20,
        );
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::Send { .. })),
            "Agents mode has no ToolsChanged message: {fx:?}"
        );
        let fx = m.handle(rpc("l1", AGENT, LIST_TOOLS, ""), 30);
        let listed: Value = serde_json::from_str(&reply_of(&fx, "l1").unwrap()).unwrap();
        assert_eq!(listed["tools"][0]["name"], "mcp__srv__new");
        assert_eq!(listed["tools"][0]["serverName"], "srv");
        assert_eq!(listed["tools"].as_array().unwrap().len(), 1);
    }

    /// The conversation id sent on [`CONVERSATION_TOPIC`], if any.
    fn named(fx: &[Effect]) -> Option<String> {
        fx.iter().find_map(|e| match e {
            Effect::SendText { to, topic, text } if topic == CONVERSATION_TOPIC => {
                assert_eq!(to, AGENT);
                Some(text.clone())
            }
            _ => None,
        })
    }

    /// Outpost owns the conversation in Agents mode: a switch (new, or a stored one to
    /// continue) opens it at once, without a hello, and names it to the agent;
    /// `outpost.conversation` then reads that conversation.
    #[test]
    fn switching_conversations_opens_them_at_once_and_names_them_to_the_agent() {
        let (mut m, _) = joined();
        let fx = m.handle(
            Input::AgentState {
                identity: AGENT.into(),
                state: "listening".into(),
            },
            10,
        );
        let first = m.conversation_id().unwrap().to_owned();
        assert_eq!(named(&fx), Some(first.clone()));
        let fx = m.handle(
            Input::Command(Command::SwitchConversation {
                conversation_id: Some("stored".into()),
                history: vec![outpost_protocol::HistoryMessage {
                    role: outpost_protocol::HistoryRole::User,
                    text: "remember the otter".into(),
                }],
            }),
            20,
        );
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::Send { .. })),
            "no hello in Agents mode: {fx:?}"
        );
        assert!(m.is_ready(), "the conversation is open at once");
        assert_eq!(m.conversation_id(), Some("stored"));
        assert_eq!(named(&fx).as_deref(), Some("stored"));
        let ui = uis(&fx);
        assert!(
            ui.iter().any(|u| matches!(u, UiEvent::SessionStarted { conversation_id, .. } if conversation_id == "stored")),
            "{ui:?}"
        );
        let recorded = fx.iter().any(|e| {
            matches!(e, Effect::Record(Record::EndConversation { id, .. }) if id.as_str() == first)
        });
        assert!(recorded, "{fx:?}");
        // The next message goes to the agent at once, recorded in the stored conversation.
        let fx = m.handle(
            Input::Command(Command::SendUserMessage {
                id: "u1".into(),
                text: "and now?".into(),
                attachments: Vec::new(),
            }),
            30,
        );
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::SendText { topic, .. } if topic == CHAT_TOPIC)),
            "{fx:?}"
        );
        let in_stored = fx.iter().any(|e| {
            matches!(e, Effect::Record(Record::Message(msg)) if msg.conversation_id.as_str() == "stored")
        });
        assert!(in_stored, "{fx:?}");
        // The agent asks what was said: the caller reads the store for that conversation.
        let fx = m.handle(rpc("c1", AGENT, CONVERSATION, "{}"), 40);
        assert!(
            fx.contains(&Effect::ReadConversation {
                request_id: "c1".into(),
                conversation_id: "stored".into()
            }),
            "{fx:?}"
        );
        // A stranger may not.
        let fx = m.handle(rpc("c2", "stranger", CONVERSATION, "{}"), 50);
        assert_eq!(
            data_code(&reply_of(&fx, "c2").unwrap_err()),
            "permission_denied"
        );
        // A new conversation: a fresh id, named the same way.
        let fx = m.handle(
            Input::Command(Command::SwitchConversation {
                conversation_id: None,
                history: Vec::new(),
            }),
            60,
        );
        let fresh = m.conversation_id().unwrap().to_owned();
        assert_ne!(fresh, "stored");
        assert_eq!(named(&fx), Some(fresh));
    }

    /// LiveKit's convention: an image is a byte stream on `images` (name and MIME type in
    /// the header), sent before the words; another file goes on `files`.
    #[test]
    fn files_go_to_the_agent_as_byte_streams_before_the_words() {
        let mut m = agents();
        assert!(m.accepts_attachments());
        let png = b"\x89PNG\r\n\x1a\n....";
        let fx = m.handle(
            Input::Command(Command::SendUserMessage {
                id: "u1".into(),
                text: "what is this?".into(),
                attachments: vec![
                    outpost_protocol::Attachment::new("a1", "u1", "dot.png", "image/png", png),
                    outpost_protocol::Attachment::new("a2", "u1", "n.txt", "text/plain", b"hi"),
                ],
            }),
            20,
        );
        let out: Vec<(String, String)> = fx
            .iter()
            .filter_map(|e| match e {
                Effect::SendBytes(b) => Some((b.topic.clone(), b.name.clone())),
                Effect::SendText { topic, text, .. } => Some((topic.clone(), text.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            out,
            [
                (IMAGES_TOPIC.to_owned(), "dot.png".to_owned()),
                (FILES_TOPIC.to_owned(), "n.txt".to_owned()),
                (CHAT_TOPIC.to_owned(), "what is this?".to_owned()),
            ]
        );
        let bytes = fx.iter().find_map(|e| match e {
            Effect::SendBytes(b) if b.mime_type == "image/png" => {
                Some((b.bytes.clone(), b.attributes.clone()))
            }
            _ => None,
        });
        let (bytes, attributes) = bytes.unwrap();
        assert_eq!(bytes, png, "byte for byte");
        assert!(attributes.contains(&(
            SHA256_ATTRIBUTE.to_owned(),
            outpost_protocol::sha256_hex(png)
        )));
        let recorded = fx
            .iter()
            .filter(|e| matches!(e, Effect::Record(Record::Attachment(_))))
            .count();
        assert_eq!(recorded, 2);
    }

    #[test]
    fn the_agent_state_attribute_selects_agents_mode_and_drives_the_status() {
        let (mut m, _) = joined();
        assert_eq!(m.mode(), None);
        let fx = m.handle(
            Input::AgentState {
                identity: AGENT.into(),
                state: "thinking".into(),
            },
            10,
        );
        assert_eq!(m.mode(), Some(AssistantMode::LivekitAgents));
        assert!(m.is_ready());
        let ui = uis(&fx);
        assert!(ui.iter().any(|e| matches!(
            e,
            UiEvent::AssistantMode {
                mode: AssistantMode::LivekitAgents,
                ..
            }
        )));
        assert!(
            ui.iter()
                .any(|e| matches!(e, UiEvent::SessionStarted { .. }))
        );
        assert!(ui.iter().any(|e| matches!(
            e,
            UiEvent::Status {
                state: AssistantState::Thinking,
                ..
            }
        )));
        // Someone else's attribute does nothing.
        let fx = m.handle(
            Input::AgentState {
                identity: "bystander".into(),
                state: "speaking".into(),
            },
            11,
        );
        assert!(uis(&fx).is_empty());
    }

    #[test]
    fn no_welcome_within_the_wait_means_agents_mode_and_a_late_welcome_wins() {
        let (mut m, _) = joined();
        assert!(
            m.handle(Input::Tick, 2_000)
                .iter()
                .all(|e| !matches!(e, Effect::Ui(UiEvent::AssistantMode { .. })))
        );
        let fx = m.handle(Input::Tick, 3_000);
        assert!(uis(&fx).iter().any(|e| matches!(e, UiEvent::AssistantMode { mode: AssistantMode::LivekitAgents, detail } if detail.contains("no Outpost welcome"))));
        // An Outpost assistant that was only slow still gets the Outpost protocol.
        let w = outpost_protocol::ServerWelcome {
            protocol_version: 1,
            session_id: "s".into(),
            conversation_id: "c9".into(),
            assistant_name: "Slow".into(),
            capabilities: Vec::new(),
        };
        let fx = m.handle(
            Input::Received {
                sender: AGENT.into(),
                bytes: outpost_protocol::encode(&Message::ServerWelcome(w)).unwrap(),
            },
            4_000,
        );
        assert_eq!(m.mode(), Some(AssistantMode::Outpost));
        assert!(uis(&fx).iter().any(|e| matches!(
            e,
            UiEvent::AssistantMode {
                mode: AssistantMode::Outpost,
                ..
            }
        )));
    }

    #[test]
    fn user_messages_go_out_on_lk_chat_and_are_recorded() {
        let (mut m, _) = joined();
        // Typed before the mode is known: held, then sent on lk.chat.
        m.handle(
            Input::Command(Command::SendUserMessage {
                id: "u1".into(),
                text: "hello agent".into(),
                attachments: Vec::new(),
            }),
            1,
        );
        let fx = m.handle(
            Input::AgentState {
                identity: AGENT.into(),
                state: "listening".into(),
            },
            10,
        );
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::SendText { to, topic, text }
            if to == AGENT && topic == CHAT_TOPIC && text == "hello agent"))
        );
        assert!(fx.iter().any(
            |e| matches!(e, Effect::Record(Record::Message(msg)) if msg.text == "hello agent")
        ));
        assert!(!fx.iter().any(|e| matches!(
            e,
            Effect::Send {
                message: Message::UserMessage(_),
                ..
            }
        )));
    }

    #[test]
    fn chat_waits_until_the_agent_is_up_or_the_wait_is_over() {
        let sent = |fx: &[Effect]| {
            fx.iter()
                .filter(|e| matches!(e, Effect::SendText { topic, .. } if topic == CHAT_TOPIC))
                .count()
        };
        let state = |s: &str| Input::AgentState {
            identity: AGENT.into(),
            state: s.into(),
        };
        let say = |t: &str| {
            Input::Command(Command::SendUserMessage {
                id: t.into(),
                text: t.into(),
                attachments: Vec::new(),
            })
        };
        // A LiveKit Agents session drops lk.chat that comes before it reads it: while the
        // agent says "initializing", chat waits.
        let (mut m, _) = joined();
        assert_eq!(sent(&m.handle(state("initializing"), 1)), 0);
        let early = m.handle(say("early"), 2);
        assert_eq!(sent(&early), 0);
        // Held, yet in the history at once: a session that ends before the agent is up
        // keeps what the user typed.
        assert!(
            early
                .iter()
                .any(|e| matches!(e, Effect::Record(Record::Message(msg)) if msg.id == "early")),
            "{early:?}"
        );
        assert_eq!(sent(&m.handle(Input::Tick, 3_000)), 0);
        assert_eq!(sent(&m.handle(state("listening"), 4_000)), 1);
        assert_eq!(sent(&m.handle(say("later"), 4_001)), 1);
        // An agent that never says its state: chat goes out after the wait.
        let (mut m, _) = joined();
        let rpc_in = m.handle(rpc("r1", AGENT, LIST_TOOLS, "{}"), 10);
        assert_eq!(sent(&rpc_in), 0);
        assert_eq!(sent(&m.handle(say("hi"), 20)), 0);
        let wait = MachineConfig::new(Vec::new()).agent_ready_wait_ms;
        assert_eq!(sent(&m.handle(Input::Tick, 10 + wait - 1)), 0);
        assert_eq!(sent(&m.handle(Input::Tick, 10 + wait)), 1);
    }

    /// A transcription piece of segment `id` from `sender`.
    fn piece(sender: &str, id: &str, text: &str, first: bool, fin: bool, user: bool) -> Input {
        Input::Transcript {
            sender: sender.into(),
            segment_id: id.into(),
            text: text.into(),
            first,
            is_final: fin,
            user_speech: user,
        }
    }

    #[test]
    fn transcripts_stream_as_deltas_and_record_the_final() {
        let mut m = agents();
        let fx1 = m.handle(piece(AGENT, "SG_1", "Hel", true, false, false), 20);
        let fx2 = m.handle(piece(AGENT, "SG_1", "lo there", false, false, false), 21);
        let fx3 = m.handle(piece(AGENT, "SG_1", "", false, true, false), 22);
        let shown: Vec<String> = uis(&[fx1.clone(), fx2, fx3.clone()].concat())
            .into_iter()
            .filter_map(|e| match e {
                UiEvent::AssistantDelta {
                    message_id, delta, ..
                } if message_id == "SG_1" => Some(format!("+{delta}")),
                UiEvent::AssistantMessage { id, text, .. } if id == "SG_1" => Some(text),
                _ => None,
            })
            .collect();
        assert_eq!(shown, ["+Hel", "+lo there", "Hello there"]);
        assert!(
            !fx1.iter()
                .any(|e| matches!(e, Effect::Record(Record::Message(_))))
        );
        assert!(fx3.iter().any(
            |e| matches!(e, Effect::Record(Record::Message(msg)) if msg.text == "Hello there")
        ));
        // Sent again with the same id: the new text replaces the old one, shown whole
        // at its end.
        let again = [
            m.handle(piece(AGENT, "SG_1", "Hello", true, false, false), 23),
            m.handle(piece(AGENT, "SG_1", " world", false, true, false), 24),
        ]
        .concat();
        let shown: Vec<UiEvent> = uis(&again);
        assert!(
            matches!(&shown[..], [UiEvent::AssistantMessage { text, .. }] if text == "Hello world"),
            "{shown:?}"
        );
    }

    /// Issue 30, finding 9: a long segment in small pieces costs what it says, not its
    /// square (each piece was shown with the whole text so far), and stays within its cap.
    #[test]
    fn a_long_segment_in_small_pieces_costs_what_it_says() {
        let mut m = agents();
        let kib = "x".repeat(1024);
        let pieces = 2 * MAX_SEGMENT_BYTES / 1024;
        for user in [false, true] {
            let id = if user { "SG_user" } else { "SG_long" };
            let mut shown = 0usize;
            let mut last = String::new();
            for i in 0..=pieces {
                let fx = m.handle(
                    piece(
                        AGENT,
                        id,
                        if i < pieces { &kib } else { "" },
                        i == 0,
                        i == pieces,
                        user,
                    ),
                    20,
                );
                for e in uis(&fx) {
                    match e {
                        UiEvent::AssistantDelta { delta, .. } => shown += delta.len(),
                        UiEvent::AssistantMessage { text, .. }
                        | UiEvent::UserTranscript { text, .. } => {
                            shown += text.len();
                            last = text;
                        }
                        _ => {}
                    }
                }
            }
            assert_eq!(last.len(), MAX_SEGMENT_BYTES, "cut to the cap");
            assert!(
                shown <= 6 * MAX_SEGMENT_BYTES,
                "{shown} bytes shown for a {MAX_SEGMENT_BYTES}-byte segment (user speech: {user})"
            );
        }
    }

    #[test]
    fn a_final_reply_answers_the_oldest_message_waiting_for_one() {
        let mut m = agents();
        for id in ["u1", "u2"] {
            m.handle(
                Input::Command(Command::SendUserMessage {
                    id: id.into(),
                    text: id.into(),
                    attachments: Vec::new(),
                }),
                20,
            );
        }
        let replies = |fx: Vec<Effect>| -> Vec<Option<String>> {
            uis(&fx)
                .into_iter()
                .filter_map(|e| match e {
                    UiEvent::AssistantMessage { in_reply_to, .. } => Some(in_reply_to),
                    _ => None,
                })
                .collect()
        };
        assert!(replies(m.handle(piece(AGENT, "SG_1", "Hel", true, false, false), 21)).is_empty());
        assert_eq!(
            replies(m.handle(piece(AGENT, "SG_1", "lo", false, true, false), 22)),
            [Some("u1".to_string())]
        );
        assert_eq!(
            replies(m.handle(piece(AGENT, "SG_2", "Again", true, true, false), 23)),
            [Some("u2".to_string())]
        );
        assert_eq!(
            replies(m.handle(piece(AGENT, "SG_3", "More", true, true, false), 24)),
            [None]
        );
    }

    #[test]
    fn the_users_speech_shows_as_their_words_and_is_recorded_as_theirs() {
        let mut m = agents();
        let fx1 = m.handle(piece(AGENT, "SG_u", "what time", true, false, true), 20);
        let fx2 = m.handle(piece(AGENT, "SG_u", " is it?", false, true, true), 21);
        let shown: Vec<(String, bool)> = uis(&[fx1.clone(), fx2.clone()].concat())
            .into_iter()
            .filter_map(|e| match e {
                UiEvent::UserTranscript { id, text, is_final } if id == "SG_u" => {
                    Some((text, is_final))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("what time".to_string(), false),
                ("what time is it?".to_string(), true)
            ]
        );
        assert!(
            !uis(&fx2)
                .iter()
                .any(|e| matches!(e, UiEvent::AssistantMessage { .. }))
        );
        assert!(fx2.iter().any(|e| matches!(
            e,
            Effect::Record(Record::Message(msg))
                if msg.text == "what time is it?" && msg.role == store::Role::User
        )));
        // Nothing goes back to the agent: it heard the words itself.
        assert!(!fx2.iter().any(|e| matches!(e, Effect::SendText { .. })));
        // Someone else's transcription is ignored.
        let other = m.handle(piece("intruder", "SG_x", "hi", true, true, true), 22);
        assert!(uis(&other).is_empty());
    }

    /// A segment's later stream that brings no text (the reader then sends only its end,
    /// replacing nothing) keeps the words already heard; a segment with no words at
    /// all is neither shown nor recorded as an empty "said aloud" message.
    #[test]
    fn an_empty_stream_neither_erases_the_users_words_nor_makes_an_empty_message() {
        let mut m = agents();
        for user in [true, false] {
            let id = if user { "SG_u" } else { "SG_a" };
            let recorded = |fx: &[Effect]| -> Vec<String> {
                fx.iter()
                    .filter_map(|e| match e {
                        Effect::Record(Record::Message(msg)) => Some(msg.text.clone()),
                        _ => None,
                    })
                    .collect()
            };
            // A stream's text, then its end.
            m.handle(piece(AGENT, id, "Hello agent", true, false, user), 20);
            let fx = m.handle(piece(AGENT, id, "", false, true, user), 21);
            assert_eq!(recorded(&fx), ["Hello agent"], "user speech: {user}");
            // A later stream of the same segment that brought nothing.
            let again = m.handle(piece(AGENT, id, "", false, true, user), 22);
            assert!(recorded(&again).is_empty(), "{again:?}");
            assert!(uis(&again).is_empty(), "{again:?}");
            // A segment that never had words.
            let none = m.handle(piece(AGENT, "SG_none", "", false, true, user), 23);
            assert!(recorded(&none).is_empty(), "{none:?}");
            assert!(uis(&none).is_empty(), "{none:?}");
        }
    }

    #[test]
    fn an_rpc_tool_call_runs_through_the_executor_and_is_answered_by_rpc() {
        let mut m = agents();
        let fx = m.handle(
            rpc("r1", AGENT, "calculator", r#"{"expression":"6*7"}"#),
            20,
        );
        let run = fx
            .iter()
            .find_map(|e| match e {
                Effect::RunTool { request, .. } => Some(request.clone()),
                _ => None,
            })
            .expect("the call goes to the executor");
        assert_eq!(run.id, "r1");
        assert_eq!(run.tool_name, "calculator");
        assert_eq!(run.parameters["expression"], json!("6*7"));
        assert!(
            uis(&fx)
                .iter()
                .any(|e| matches!(e, UiEvent::ToolCallRequested { id, .. } if id == "r1"))
        );
        let mut result = Map::new();
        result.insert("answer".into(), json!(42));
        let fx = m.handle(
            Input::Exec(ExecEvent::Result(ToolUseResult::ok("r1", result))),
            21,
        );
        assert_eq!(reply_of(&fx, "r1").unwrap(), r#"{"answer":42}"#);
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::Send { .. })),
            "no protocol message in agents mode"
        );
        // A denial travels as an RPC error with the seed code in its data.
        m.handle(
            rpc("r2", AGENT, "read_local_file", r#"{"filePath":"/x"}"#),
            22,
        );
        let denied =
            ToolUseResult::permission_denied("r2", "the user", "the user declined this call");
        let fx = m.handle(Input::Exec(ExecEvent::Result(denied)), 23);
        let err = reply_of(&fx, "r2").unwrap_err();
        assert_eq!(err.code, RPC_APPLICATION_ERROR);
        assert_eq!(data_code(&err), "permission_denied");
        assert!(err.message.contains("declined"), "{err:?}");
    }

    #[test]
    fn bad_payloads_and_strangers_are_refused_without_running_anything() {
        let mut m = agents();
        let fx = m.handle(rpc("r1", AGENT, "calculator", "not json"), 20);
        assert_eq!(
            data_code(&reply_of(&fx, "r1").unwrap_err()),
            "invalid_parameters"
        );
        let fx = m.handle(rpc("r2", AGENT, "calculator", "[1,2]"), 21);
        assert_eq!(
            data_code(&reply_of(&fx, "r2").unwrap_err()),
            "invalid_parameters"
        );
        let fx = m.handle(
            rpc("r3", "bystander", "calculator", r#"{"expression":"1"}"#),
            22,
        );
        assert_eq!(
            data_code(&reply_of(&fx, "r3").unwrap_err()),
            "permission_denied"
        );
        assert!(
            fx.iter().any(
                |e| matches!(e, Effect::Record(Record::ProtocolError(p)) if p.code == "rpc_refused")
            ),
            "audited"
        );
        assert!(!fx.iter().any(|e| matches!(e, Effect::RunTool { .. })));
    }

    /// Issue 30, finding 13: 20,000 refused calls from one caller in 52 s (each refused
    /// by the room, or by the machine) make one record at the first and one count when
    /// the window ends; another caller has its own; the end of the session records what
    /// is still counted.
    #[test]
    fn refused_calls_are_recorded_once_then_counted_per_window() {
        let mut m = agents();
        let refusals = |fx: &[Effect]| -> Vec<String> {
            fx.iter()
                .filter_map(|e| match e {
                    Effect::Record(Record::ProtocolError(p)) if p.code == "rpc_refused" => {
                        Some(p.message.clone())
                    }
                    _ => None,
                })
                .collect()
        };
        let mut records = Vec::new();
        for i in 0..20_000i64 {
            let input = if i % 2 == 0 {
                Input::RpcRefused {
                    caller: "mallory".into(),
                    method: "outpost.list_tools".into(),
                }
            } else {
                rpc(&format!("r{i}"), "mallory", "calculator", "{}")
            };
            let at = 100 + i * 52_000 / 20_000;
            records.extend(refusals(&m.handle(input, at)));
            if i % 1000 == 0 {
                records.extend(refusals(&m.handle(Input::Tick, at)));
            }
        }
        assert_eq!(records.len(), 1, "{records:?}");
        records.extend(refusals(&m.handle(
            Input::RpcRefused {
                caller: "carol".into(),
                method: "x".into(),
            },
            55_000,
        )));
        assert_eq!(records.len(), 2, "another caller has its own first record");
        records.extend(refusals(&m.handle(Input::Tick, 100 + REFUSAL_WINDOW_MS)));
        assert_eq!(records.len(), 3, "{records:?}");
        assert!(
            records[2].contains("mallory made 19999 more calls")
                && records[2].contains("(calculator, outpost.list_tools)"),
            "{}",
            records[2]
        );
        // The session's end records carol's window (nothing more to count there) and a
        // new one of mallory's.
        records.extend(refusals(&m.handle(
            Input::RpcRefused {
                caller: "mallory".into(),
                method: "y".into(),
            },
            100 + REFUSAL_WINDOW_MS + 1,
        )));
        records.extend(refusals(&m.handle(
            Input::RpcRefused {
                caller: "mallory".into(),
                method: "y".into(),
            },
            100 + REFUSAL_WINDOW_MS + 2,
        )));
        records.extend(refusals(
            &m.handle(Input::Command(Command::Leave), 100 + REFUSAL_WINDOW_MS + 3),
        ));
        assert_eq!(records.len(), 5, "{records:?}");
        assert!(
            records[4].contains("mallory made 1 more calls"),
            "{}",
            records[4]
        );
    }

    #[test]
    fn the_catalogue_is_listed_in_pages_that_fit_an_rpc_payload() {
        let tools: Vec<ToolDescriptor> = (0..12).map(|i| tool(&format!("t{i}"), 3_000)).collect();
        let mut m = Machine::new(MachineConfig::new(tools));
        m.handle(
            Input::Joined {
                assistant: Some(AGENT.into()),
            },
            0,
        );
        let mut cursor: Option<u64> = Some(0);
        let mut names = Vec::new();
        let mut pages = 0;
        while let Some(c) = cursor {
            let fx = m.handle(
                rpc(
                    &format!("l{c}"),
                    AGENT,
                    LIST_TOOLS,
                    &json!({"cursor": c}).to_string(),
                ),
                1,
            );
            let text = reply_of(&fx, &format!("l{c}")).unwrap();
            assert!(text.len() <= RPC_PAYLOAD_LIMIT, "{}", text.len());
            let v: Value = serde_json::from_str(&text).unwrap();
            for t in v["tools"].as_array().unwrap() {
                names.push(t["name"].as_str().unwrap().to_owned());
            }
            cursor = v["nextCursor"].as_u64();
            pages += 1;
        }
        assert!(pages > 1);
        assert_eq!(names, (0..12).map(|i| format!("t{i}")).collect::<Vec<_>>());
        assert!(m.in_agents_mode());
    }

    #[test]
    fn a_result_over_the_rpc_limit_is_cut_with_a_note_and_read_on_to_the_end() {
        let mut m = agents();
        m.handle(
            rpc("big", AGENT, "read_local_file", r#"{"filePath":"/x"}"#),
            20,
        );
        let content: String = (0..40_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let mut result = Map::new();
        result.insert("content".into(), json!(content));
        let whole = Value::Object(result.clone()).to_string();
        let fx = m.handle(
            Input::Exec(ExecEvent::Result(ToolUseResult::ok("big", result))),
            21,
        );
        let first = reply_of(&fx, "big").unwrap();
        assert!(first.len() <= RPC_PAYLOAD_LIMIT);
        let v: Value = serde_json::from_str(&first).unwrap();
        assert_eq!(v["truncated"], json!(true));
        assert!(v["note"].as_str().unwrap().contains(READ_RESULT));
        let mut got = v["json"].as_str().unwrap().to_owned();
        let mut next = v["nextOffset"].as_u64();
        let mut n = 0;
        while let Some(off) = next {
            n += 1;
            let id = format!("rr{n}");
            let fx = m.handle(
                rpc(
                    &id,
                    AGENT,
                    READ_RESULT,
                    &json!({"id": "big", "offset": off}).to_string(),
                ),
                22,
            );
            let text = reply_of(&fx, &id).unwrap();
            assert!(text.len() <= RPC_PAYLOAD_LIMIT);
            let v: Value = serde_json::from_str(&text).unwrap();
            got.push_str(v["json"].as_str().unwrap());
            next = v["nextOffset"].as_u64();
        }
        assert_eq!(got, whole);
    }

    #[test]
    fn a_repeated_request_id_is_answered_without_running_twice() {
        let mut m = agents();
        m.handle(rpc("r1", AGENT, "calculator", r#"{"expression":"1"}"#), 20);
        let fx = m.handle(rpc("r1", AGENT, "calculator", r#"{"expression":"1"}"#), 21);
        assert!(!fx.iter().any(|e| matches!(e, Effect::RunTool { .. })));
        assert_eq!(
            data_code(&reply_of(&fx, "r1").unwrap_err()),
            "invalid_parameters"
        );
    }

    #[test]
    fn a_call_whose_caller_stopped_waiting_is_cancelled() {
        let mut m = agents();
        m.handle(
            Input::Rpc(RpcCall {
                request_id: "slow".into(),
                caller: AGENT.into(),
                method: "read_local_file".into(),
                payload: r#"{"filePath":"/x"}"#.into(),
                response_timeout_ms: 5_000,
            }),
            100,
        );
        assert!(
            !m.handle(Input::Tick, 4_000)
                .iter()
                .any(|e| matches!(e, Effect::CancelTool(_)))
        );
        let fx = m.handle(Input::Tick, 5_200);
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::CancelTool(c) if c.id == "slow"))
        );
    }
}
