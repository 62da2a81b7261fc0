//! Entry points for the cargo-fuzz targets in `/fuzz`. Not part of the API: hidden from the
//! docs, and free to change with the code they exercise.
//!
//! They run what this crate does with bytes from the network, without a network:
//! [`fuzz_data_packets`] feeds data-channel messages through the packet decoder and the
//! stream receivers the way the engine's data handler does, then reads every stream back
//! and checks what the receivers promise; [`fuzz_rpc`] feeds them to the RPC layer of a
//! room that answers only its assistant and checks who got answers and what took a slot;
//! [`fuzz_signal_response`] decodes a signaling message and converts what it carries
//! into this crate's public types.
//!
//! Besides `proto`, this is the one module that names `livekit_protocol` and `prost`: the
//! signaling client decodes `SignalResponse` inside `livekit-signaling`, so `proto` has no
//! decoder for it, and adding one there for the fuzzer alone would widen the real code.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use livekit_protocol::{SignalResponse, signal_response};
use prost::Message as _;

use crate::proto::{self, data_packet};
use crate::streams::{Limits, Receivers, StreamReader};

/// Feeds `messages` (each one data-channel message) to a fresh set of stream receivers
/// with a receive cap of `cap` bytes, as the engine does, then ends every open stream and
/// reads all of them. `Err` names a broken promise: a stream that delivered more than the
/// cap or than its header announced, ended normally short of its announced length, went
/// on after an error, or stayed open after every stream was aborted.
#[doc(hidden)]
pub fn fuzz_data_packets(messages: &[&[u8]], cap: u64) -> Result<(), String> {
    // The engine's limits, with the idle timeout off (the fuzzer has no clock to spare).
    let mut receivers = Receivers::new(Limits {
        cap,
        per_sender: 16,
        total: 64,
        idle: std::time::Duration::ZERO,
    });
    let now = tokio::time::Instant::now();
    let mut readers = Vec::new();
    for bytes in messages {
        let Ok(mut packet) = proto::decode_data_packet(bytes) else {
            continue;
        };
        let Some(value) = packet.value.take() else {
            continue;
        };
        match value {
            data_packet::Value::User(u) => {
                let _ = proto::data_message(&packet, u, true);
            }
            data_packet::Value::StreamHeader(h) => {
                // Every second sender counts as the assistant, so both paths are taken.
                let assistant = packet.participant_identity.len() % 2 == 0;
                readers.push(receivers.on_header(&packet.participant_identity, assistant, h, now));
            }
            data_packet::Value::StreamChunk(c) => {
                receivers.on_chunk(&packet.participant_identity, c, now);
            }
            data_packet::Value::StreamTrailer(t) => {
                receivers.on_trailer(&packet.participant_identity, t);
            }
            _ => {}
        }
    }
    receivers.abort_all("the fuzz input ended");
    for reader in readers {
        check_reader(reader, cap)?;
    }
    Ok(())
}

/// Reads a stream to its end without a runtime: every sender is gone by now, so each
/// poll is ready at once.
fn check_reader(mut reader: StreamReader, cap: u64) -> Result<(), String> {
    let id = reader.info.id.clone();
    let mut waker_cx = Context::from_waker(Waker::noop());
    let mut delivered: u64 = 0;
    let mut failed = false;
    loop {
        let next = pin!(reader.next_chunk()).poll(&mut waker_cx);
        match next {
            Poll::Pending => return Err(format!("stream {id:?} still open after abort_all")),
            Poll::Ready(None) => break,
            Poll::Ready(Some(item)) => {
                if failed {
                    return Err(format!("stream {id:?} delivered more after an error"));
                }
                match item {
                    Ok(bytes) => {
                        delivered = delivered
                            .saturating_add(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
                    }
                    Err(_) => failed = true,
                }
            }
        }
    }
    if delivered > cap {
        return Err(format!(
            "stream {id:?} delivered {delivered} bytes past the cap {cap}"
        ));
    }
    if let Some(total) = reader.info.total_length {
        if delivered > total {
            return Err(format!(
                "stream {id:?} delivered {delivered} bytes, more than the announced {total}"
            ));
        }
        if !failed && delivered != total {
            return Err(format!(
                "stream {id:?} ended normally after {delivered} of its announced {total} bytes"
            ));
        }
    }
    Ok(())
}

/// Splits a fuzz input into data-channel messages, each prefixed with its length (two
/// bytes, little-endian; a length past the end takes what is left).
#[doc(hidden)]
pub fn messages(mut rest: &[u8]) -> Vec<&[u8]> {
    let mut messages = Vec::new();
    while let [lo, hi, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(tail.len());
        let (message, next) = tail.split_at(len);
        messages.push(message);
        rest = next;
    }
    messages
}

/// The assistant of [`fuzz_rpc`]'s room: the one participant that may call.
const FUZZ_ASSISTANT: &str = "bot";

/// Feeds `messages` (each one data-channel message) to the RPC layer of a room that
/// answers only its assistant (`bot`), as the engine's data handler does: version 1
/// requests, acks and responses, and the headers, chunks and trailers of RPC streams (with
/// a version 2 payload cap of `cap` bytes), then ends every stream and lets the handlers
/// run. `Err` names a broken promise: a stream from anyone but the assistant took a slot,
/// an answer went to someone who did not call, a caller that may not call got more than
/// its budget of answers, or a request was answered more often than it was made.
#[doc(hidden)]
pub fn fuzz_rpc(messages: &[&[u8]], cap: usize) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(rpc_run(messages, cap))
}

async fn rpc_run(messages: &[&[u8]], cap: usize) -> Result<(), String> {
    use std::collections::{HashMap, HashSet};
    use std::sync::Arc;

    use crate::rpc::{self, RpcInvocation, RpcMethods};
    use crate::types::{ConnectionState, Participant, ParticipantKind, RpcCallers};

    let methods = RpcMethods::new();
    methods.register("echo", |inv: RpcInvocation| async move { Ok(inv.payload) });
    methods.register("outpost.list_tools", |_inv: RpcInvocation| async move {
        Ok("{}".to_owned())
    });
    let room = crate::shared::Shared::new(ConnectionState::Connected);
    let opts = crate::RoomOptions {
        rpc_methods: methods,
        rpc_callers: RpcCallers::Assistant,
        rpc_max_v2_payload: cap,
        ..crate::RoomOptions::default()
    };
    let rpc = Arc::new(rpc::Rpc::new(opts.rpc_settings(), room.clone()));
    let person = |identity: &str| Participant {
        sid: format!("PA_{identity}"),
        identity: identity.to_owned(),
        name: String::new(),
        kind: ParticipantKind::Agent,
        metadata: String::new(),
        attributes: HashMap::new(),
        client_protocol: 1,
    };
    {
        let mut roster = room.roster();
        roster.local = Some(person("me"));
        roster.assistant = Some(person(FUZZ_ASSISTANT));
    }
    let mut receivers = Receivers::new(Limits {
        cap: 1 << 20,
        per_sender: 16,
        total: 64,
        idle: std::time::Duration::ZERO,
    });
    let now = tokio::time::Instant::now();
    let mut callers: HashSet<String> = HashSet::new();
    // Requests made, by caller and request id (an id may come again).
    let mut made: HashMap<(String, String), usize> = HashMap::new();
    for bytes in messages {
        let Ok(mut packet) = proto::decode_data_packet(bytes) else {
            continue;
        };
        let Some(value) = packet.value.take() else {
            continue;
        };
        let sender = packet.participant_identity;
        match value {
            data_packet::Value::RpcRequest(r) => {
                callers.insert(sender.clone());
                *made.entry((sender.clone(), r.id.clone())).or_default() += 1;
                let _ = rpc::on_request(&rpc, &sender, r);
            }
            data_packet::Value::RpcAck(a) => rpc.on_ack(&sender, a),
            data_packet::Value::RpcResponse(r) => rpc.on_response(&sender, r),
            data_packet::Value::StreamHeader(h) => {
                if h.topic != rpc::REQUEST_TOPIC && h.topic != rpc::RESPONSE_TOPIC {
                    continue;
                }
                callers.insert(sender.clone());
                if let Some(id) = h.attributes.get("lk.rpc_request_id") {
                    *made.entry((sender.clone(), id.clone())).or_default() += 1;
                }
                let before = receivers.open_count();
                let assistant = sender == FUZZ_ASSISTANT;
                let _ = rpc::on_stream_header(&rpc, &mut receivers, &sender, assistant, h, now);
                if !assistant && receivers.open_count() > before {
                    return Err(format!(
                        "a stream from {sender:?}, who may not call, took a slot"
                    ));
                }
            }
            data_packet::Value::StreamChunk(c) => receivers.on_chunk(&sender, c, now),
            data_packet::Value::StreamTrailer(t) => receivers.on_trailer(&sender, t),
            _ => {}
        }
    }
    receivers.abort_all("the fuzz input ended");
    // Let the handlers read what came (every stream has ended now), run and answer.
    for _ in 0..256 {
        tokio::task::yield_now().await;
    }
    rpc.close();
    let mut to_others: HashMap<String, usize> = HashMap::new();
    let mut answered: HashMap<(String, String), usize> = HashMap::new();
    for bytes in room.outbox.take_pending() {
        let p = proto::decode_data_packet(&bytes)
            .map_err(|e| format!("we queued a packet that does not decode: {e}"))?;
        let [to] = p.destination_identities.as_slice() else {
            return Err(format!(
                "an RPC packet went to {:?}, not one caller",
                p.destination_identities
            ));
        };
        if !callers.contains(to) {
            return Err(format!("an RPC packet went to {to:?}, who never called"));
        }
        if to != FUZZ_ASSISTANT {
            *to_others.entry(to.clone()).or_default() += 1;
        }
        if let Some(data_packet::Value::RpcResponse(r)) = &p.value {
            let key = (to.clone(), r.request_id.clone());
            let n = answered.entry(key.clone()).or_default();
            *n += 1;
            if *n > made.get(&key).copied().unwrap_or(0) {
                return Err(format!(
                    "request {:?} of {to:?} was answered {n} times, more than it was made",
                    r.request_id
                ));
            }
        }
    }
    for (to, n) in to_others {
        // An ack and a refusal each, within the answers' budget.
        let budget = 2 * usize::try_from(rpc::REFUSAL_BURST_ANSWERS).unwrap_or(usize::MAX);
        if n > budget {
            return Err(format!(
                "{n} packets went to {to:?}, who may not call (budget {budget})"
            ));
        }
    }
    Ok(())
}

/// Decodes one signaling message and converts the participants, updates and leave reasons
/// it carries, as the engine does. `Err` when a decoded message changes through an encode
/// and a decode.
#[doc(hidden)]
pub fn fuzz_signal_response(bytes: &[u8]) -> Result<(), String> {
    let Ok(msg) = SignalResponse::decode(bytes) else {
        return Ok(());
    };
    let encoded = msg.encode_to_vec();
    let again = SignalResponse::decode(encoded.as_slice())
        .map_err(|e| format!("a re-encoded SignalResponse does not decode: {e}"))?;
    // Compared as messages, not bytes: map fields are encoded in hash order. A NaN float
    // is the one value unequal to itself.
    if again != msg && !format!("{again:?}").contains("NaN") {
        return Err("a SignalResponse changed through an encode and a decode".into());
    }
    use signal_response::Message as M;
    match msg.message {
        Some(M::Join(join)) => {
            for info in join.participant.iter().chain(&join.other_participants) {
                let _ = proto::participant(info);
                let _ = proto::is_disconnected(info);
            }
        }
        Some(M::Update(update)) => {
            for info in &update.participants {
                let _ = proto::participant(info);
                let _ = proto::is_disconnected(info);
            }
        }
        Some(M::Leave(leave)) => {
            let _ = proto::disconnect_reason_name(leave.reason);
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A data packet from `from` carrying `value`, as the server relays it.
    fn from(from: &str, value: data_packet::Value) -> Vec<u8> {
        let mut p = proto::stream_packet(value, vec!["me".into()]);
        p.participant_identity = from.into();
        proto::encode_data_packet(&p)
    }

    #[test]
    fn the_rpc_hook_holds_for_a_flood_of_strangers_and_the_assistants_calls() {
        let request = |id: &str| {
            data_packet::Value::RpcRequest(proto::RpcRequest {
                id: id.into(),
                method: "echo".into(),
                payload: "hi".into(),
                version: 1,
                ..Default::default()
            })
        };
        let header = |id: &str, total: Option<u64>| {
            let mut attributes = std::collections::HashMap::new();
            for (k, v) in [
                ("lk.rpc_request_id", id),
                ("lk.rpc_request_method", "outpost.list_tools"),
                ("lk.rpc_request_version", "2"),
            ] {
                attributes.insert(k.to_owned(), v.to_owned());
            }
            proto::stream_header(
                proto::HeaderFields {
                    stream_id: format!("S{id}"),
                    topic: crate::rpc::REQUEST_TOPIC.into(),
                    mime_type: "text/plain".into(),
                    total_length: total,
                    attributes,
                    byte_name: None,
                },
                0,
            )
        };
        let mut messages = Vec::new();
        for i in 0..40 {
            messages.push(from("mallory", request(&format!("m{i}"))));
            messages.push(from("mallory", header(&format!("h{i}"), None)));
            messages.push(from(
                "mallory",
                proto::stream_chunk(format!("Sh{i}"), 0, vec![b'x'; 1000]),
            ));
        }
        messages.push(from("bot", request("b1")));
        messages.push(from("bot", header("b2", Some(2))));
        messages.push(from(
            "bot",
            proto::stream_chunk("Sb2".into(), 0, b"{}".to_vec()),
        ));
        messages.push(from("bot", header("b3", Some(10_000))));
        let refs: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
        assert_eq!(fuzz_rpc(&refs, 1000), Ok(()));
        assert_eq!(fuzz_rpc(&[b"\xff\xff", b""], 0), Ok(()));
    }
    use crate::proto::{DataPacket, data_stream};

    fn bytes(value: data_packet::Value) -> Vec<u8> {
        proto::encode_data_packet(&DataPacket {
            participant_identity: "agent".into(),
            value: Some(value),
            ..Default::default()
        })
    }

    fn header(id: &str, total: Option<u64>) -> Vec<u8> {
        bytes(data_packet::Value::StreamHeader(data_stream::Header {
            stream_id: id.into(),
            total_length: total,
            ..Default::default()
        }))
    }

    fn chunk(id: &str, index: u64, content: &[u8]) -> Vec<u8> {
        bytes(data_packet::Value::StreamChunk(data_stream::Chunk {
            stream_id: id.into(),
            chunk_index: index,
            content: content.to_vec(),
            ..Default::default()
        }))
    }

    fn trailer(id: &str) -> Vec<u8> {
        bytes(data_packet::Value::StreamTrailer(data_stream::Trailer {
            stream_id: id.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn whole_broken_and_unfinished_streams_keep_the_receivers_promises() {
        let msgs = [
            header("a", Some(5)),
            chunk("a", 0, b"hello"),
            trailer("a"),
            header("b", Some(2)),
            chunk("b", 0, b"too long"),
            header("c", None),
            chunk("c", 0, b"cut off by the end of input"),
            vec![0xff, 0x00, 0x13],
        ];
        let refs: Vec<&[u8]> = msgs.iter().map(Vec::as_slice).collect();
        assert_eq!(fuzz_data_packets(&refs, 100), Ok(()));
        assert_eq!(fuzz_data_packets(&refs, 0), Ok(()));
    }

    #[test]
    fn signal_responses_decode_or_are_ignored() {
        assert_eq!(fuzz_signal_response(&[]), Ok(()));
        assert_eq!(fuzz_signal_response(&[0xff, 0xff, 0xff]), Ok(()));
    }

    /// The first campaign's `room_signal` run stopped on a request whose map field
    /// re-encoded in another order: maps are encoded in hash order, so messages are compared,
    /// not bytes. A participant with several attributes must pass however they are ordered.
    #[test]
    fn map_fields_in_any_order_are_the_same_message() {
        let info = proto::ParticipantInfo {
            identity: "agent".into(),
            attributes: (0..16)
                .map(|i| (format!("k{i}"), format!("v{i}")))
                .collect(),
            ..Default::default()
        };
        let msg = SignalResponse {
            message: Some(signal_response::Message::Update(
                livekit_protocol::ParticipantUpdate {
                    participants: vec![info.clone(), info],
                },
            )),
        };
        for _ in 0..20 {
            assert_eq!(fuzz_signal_response(&msg.encode_to_vec()), Ok(()));
        }
    }
}
