//! The IO of LiveKit Agents mode (the machine's side is `machine::agents`): Outpost's RPC
//! methods registered on the room, transcription streams read as they arrive, the
//! assistant's `lk.agent.state` attribute, and user text sent on `lk.chat`.
//!
//! Everything here turns room traffic into machine [`Input`]s on one channel, so the
//! session's loop stays the only place that drives the machine. An RPC handler waits for
//! the machine's answer on a oneshot; when LiveKit drops the handler (the caller's
//! deadline passed, or it left) the answer has nowhere to go and is dropped with it.

use std::collections::HashMap;

use outpost_livekit::{
    Participant, Room, RpcError, RpcInvocation, RpcMethods, StreamOptions, StreamReader,
};
use tokio::sync::{mpsc, oneshot};

use crate::events::UiEvent;
use crate::machine::{
    ByteStream, CONVERSATION, Input, LIST_TOOLS, MAX_SEGMENT_BYTES, READ_RESULT, RPC_PAYLOAD_LIMIT,
    RpcCall, RpcFailure,
};

/// The topic LiveKit Agents publish transcriptions on.
pub const TRANSCRIPTION_TOPIC: &str = "lk.transcription";
/// The participant attribute holding an agent's state.
pub const AGENT_STATE: &str = "lk.agent.state";

/// An RPC reply the machine will give.
pub type Reply = oneshot::Sender<Result<String, RpcFailure>>;

/// What reaches the session loop from the room in Agents mode.
#[derive(Debug)]
pub enum AgentsInput {
    /// Feed to the machine.
    Input(Input),
    /// An RPC call: feed it, and keep the reply channel for its answer.
    Rpc(RpcCall, Reply),
}

/// Registers `outpost.list_tools`, `outpost.read_result`, `outpost.conversation` and one
/// method per tool, on the set the room answers from the moment it joins.
pub fn register_methods(
    methods_out: &RpcMethods,
    tools: impl IntoIterator<Item = String>,
    tx: &mpsc::UnboundedSender<AgentsInput>,
) {
    let mut methods: Vec<String> = vec![LIST_TOOLS.into(), READ_RESULT.into(), CONVERSATION.into()];
    methods.extend(tools);
    register_tool_methods(methods_out, methods, tx);
}

/// Registers one method per name (tools that joined the catalogue later).
pub fn register_tool_methods(
    methods_out: &RpcMethods,
    methods: impl IntoIterator<Item = String>,
    tx: &mpsc::UnboundedSender<AgentsInput>,
) {
    for method in methods {
        let tx = tx.clone();
        methods_out.register(method, move |inv: RpcInvocation| {
            let tx = tx.clone();
            async move {
                let (reply, answer) = oneshot::channel();
                let call = RpcCall {
                    request_id: inv.request_id,
                    caller: inv.caller_identity,
                    method: inv.method,
                    payload: inv.payload,
                    response_timeout_ms: u64::try_from(inv.response_timeout.as_millis())
                        .unwrap_or(u64::MAX),
                };
                if tx.send(AgentsInput::Rpc(call, reply)).is_err() {
                    return Err(RpcError::new(
                        crate::machine::RPC_APPLICATION_ERROR,
                        "Outpost's session has ended",
                        None,
                    ));
                }
                match answer.await {
                    Ok(Ok(payload)) => Ok(payload),
                    Ok(Err(f)) => Err(RpcError::new(f.code, f.message, f.data)),
                    Err(_) => Err(RpcError::new(
                        crate::machine::RPC_APPLICATION_ERROR,
                        "Outpost's session ended before the call was answered",
                        None,
                    )),
                }
            }
        });
    }
}

/// The machine input for a participant's `lk.agent.state`, when it has one.
pub fn agent_state(p: &Participant) -> Option<Input> {
    p.attributes
        .get(AGENT_STATE)
        .map(|state| Input::AgentState {
            identity: p.identity.clone(),
            state: state.clone(),
        })
}

/// Whether a stream is a transcription from `assistant`: its own words, or its
/// transcript of ours sent on our behalf (`me`: LiveKit Agents names the user as the
/// sender). The sender is the session that sent it, so another agent's transcription in
/// our name is not the assistant's.
pub fn is_transcription(reader: &StreamReader, assistant: Option<&str>, me: Option<&str>) -> bool {
    let info = &reader.info;
    info.topic == TRANSCRIPTION_TOPIC
        && assistant.is_some_and(|a| a == info.sender_identity)
        && info.on_behalf_of.as_deref().is_none_or(|b| Some(b) == me)
}

/// The attribute naming the track a transcription segment transcribes.
pub const TRANSCRIBED_TRACK: &str = "lk.transcribed_track_id";

/// Reads a transcription stream as it arrives: every piece goes to the machine as it
/// comes (never the text so far again, which would cost the square of a long segment),
/// then the end. A segment that transcribes one of `local_tracks` (our microphone) is
/// the user's speech. Reading stops after [`MAX_SEGMENT_BYTES`]: the rest of the stream
/// is dropped unread.
/// A stream on our behalf (see [`is_transcription`]) counts only when it transcribes one
/// of our tracks.
pub fn spawn_transcript_reader(
    reader: StreamReader,
    tx: mpsc::UnboundedSender<AgentsInput>,
    local_tracks: &crate::voice::LocalTracks,
) {
    let user_speech = reader
        .info
        .attributes
        .get(TRANSCRIBED_TRACK)
        .is_some_and(|t| local_tracks.contains(t));
    // In our name, it can only be a transcript of our speech.
    if reader.info.on_behalf_of.is_some() && !user_speech {
        return;
    }
    tokio::spawn(async move {
        let info = reader.info.clone();
        let attrs: &HashMap<String, String> = &info.attributes;
        let segment_id = attrs
            .get("lk.segment_id")
            .cloned()
            .unwrap_or_else(|| info.id.clone());
        let mut reader = reader.into_text();
        // A stream's first text replaces the segment's text so far (agents send each
        // interim transcript as a new stream); until text has come, pieces replace
        // nothing, so a stream that brings none (ended empty, or cut off before its
        // first chunk) ends the segment with the text it had instead of erasing it.
        let mut replaced = false;
        let mut read = 0usize;
        // False once the session is gone.
        let mut send = |text: String, is_final: bool| {
            let first = !replaced && !text.is_empty();
            replaced |= first;
            tx.send(AgentsInput::Input(Input::Transcript {
                sender: info.sender_identity.clone(),
                segment_id: segment_id.clone(),
                text,
                first,
                is_final,
                user_speech,
            }))
            .is_ok()
        };
        while read < MAX_SEGMENT_BYTES {
            match reader.next_text().await {
                Some(Ok(p)) => {
                    read += p.len();
                    if !send(p, false) {
                        return;
                    }
                }
                // Ended, or cut off: what arrived is all there will be.
                Some(Err(_)) | None => break,
            }
        }
        if read >= MAX_SEGMENT_BYTES {
            tracing::warn!(segment = %segment_id, "transcription segment over {MAX_SEGMENT_BYTES} bytes; the rest is dropped");
        }
        // The stream's end: the segment says what it has now.
        send(String::new(), true);
    });
}

/// A text or byte stream for the agent.
#[derive(Debug)]
pub enum Outgoing {
    /// Text (`lk.chat`, `outpost.conversation`).
    Text {
        /// Destination identity.
        to: String,
        /// Topic.
        topic: String,
        /// The text.
        text: String,
    },
    /// A file.
    Bytes(ByteStream),
}

/// Sends streams in order, one at a time (a file before the words that refer to it); a
/// failure is told to the user.
pub async fn text_sender(
    room: Room,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    ui: mpsc::UnboundedSender<UiEvent>,
) {
    while let Some(out) = rx.recv().await {
        let sent = match out {
            Outgoing::Text { to, topic, text } => {
                let options = StreamOptions {
                    topic,
                    destination_identities: vec![to],
                    ..StreamOptions::default()
                };
                room.send_text(&text, options)
                    .await
                    .map_err(|e| format!("your message could not be sent to the assistant: {e}"))
            }
            Outgoing::Bytes(file) => {
                let name = file.name.clone();
                let options = StreamOptions {
                    topic: file.topic,
                    destination_identities: vec![file.to],
                    name: Some(file.name),
                    mime_type: Some(file.mime_type),
                    attributes: file.attributes.into_iter().collect(),
                    ..StreamOptions::default()
                };
                room.send_bytes(&file.bytes, options)
                    .await
                    .map_err(|e| format!("{name} could not be sent to the assistant: {e}"))
            }
        };
        if let Err(message) = sent {
            let _ = ui.send(UiEvent::Error { message });
        }
    }
}

/// Room left in an `outpost.conversation` answer for the JSON around the messages.
const CONVERSATION_ENVELOPE: usize = 1024;

/// The answer to `outpost.conversation`: `{"conversationId", "messages": [{"role", "text"}],
/// "omitted": N}` with the newest messages (`(role, text)`, oldest first) that fit one RPC
/// payload; `omitted` counts the older ones left out. A message too long for the payload
/// on its own is cut, and says so.
pub fn conversation_reply(conversation_id: &str, messages: &[(&str, &str)]) -> String {
    let budget = RPC_PAYLOAD_LIMIT - CONVERSATION_ENVELOPE - conversation_id.len();
    let mut kept: Vec<serde_json::Value> = Vec::new();
    let mut size = 0usize;
    for (role, text) in messages.iter().rev() {
        let mut item = serde_json::json!({"role": role, "text": text});
        let mut len = item.to_string().len();
        if len > budget && kept.is_empty() {
            // The newest message alone is too long: its beginning, marked.
            let mut end = budget / 2;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            item = serde_json::json!({"role": role, "text": &text[..end], "cut": true});
            len = item.to_string().len();
        }
        if size + len > budget {
            break;
        }
        size += len;
        kept.push(item);
    }
    let omitted = messages.len() - kept.len();
    kept.reverse();
    serde_json::json!({
        "conversationId": conversation_id,
        "messages": kept,
        "omitted": omitted,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_conversation_answer_keeps_the_newest_messages_within_one_payload() {
        let long = "w".repeat(4000);
        let messages: Vec<(&str, &str)> = (0..10)
            .map(|i| (if i % 2 == 0 { "user" } else { "assistant" }, long.as_str()))
            .collect();
        let reply = conversation_reply("c1", &messages);
        assert!(reply.len() <= RPC_PAYLOAD_LIMIT, "{}", reply.len());
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        let kept = v["messages"].as_array().unwrap();
        assert_eq!(kept.len() + v["omitted"].as_u64().unwrap() as usize, 10);
        assert!(kept.len() >= 3, "{}", kept.len());
        // The newest is last, and it is the assistant's (index 9).
        assert_eq!(kept.last().unwrap()["role"], "assistant");
        assert_eq!(v["conversationId"], "c1");

        let huge = "é".repeat(20_000);
        let reply = conversation_reply("c1", &[("user", "hi"), ("user", huge.as_str())]);
        assert!(reply.len() <= RPC_PAYLOAD_LIMIT, "{}", reply.len());
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(v["messages"][0]["text"], "hi");
        assert_eq!(v["messages"][1]["cut"], true);
        assert_eq!(v["omitted"], 0);

        let v: serde_json::Value = serde_json::from_str(&conversation_reply("c2", &[])).unwrap();
        assert_eq!(v["messages"], serde_json::json!([]));
        assert_eq!(v["omitted"], 0);
    }
}
