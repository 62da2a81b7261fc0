//! Entry points for the cargo-fuzz targets in `/fuzz`. Not part of the API: hidden from the
//! docs, and free to change with the code they exercise.
//!
//! They run what this crate does with bytes from the network, without a network:
//! [`fuzz_data_packets`] feeds data-channel messages through the packet decoder and the
//! stream receivers the way the engine's data handler does, then reads every stream back
//! and checks what the receivers promise; [`fuzz_signal_response`] decodes a signaling
//! message and converts what it carries into this crate's public types.
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
                readers.push(receivers.on_header(
                    &packet.participant_identity,
                    &packet.participant_identity,
                    assistant,
                    h,
                    now,
                ));
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
