//! LiveKit's protobuf types and their codec.
//!
//! The only module that imports `livekit_protocol` and `prost`: everything else names
//! LiveKit messages through the re-exports below (the signaling adapter included), so
//! a protocol upgrade touches one file. Conversions into the crate's public types live
//! here too, so no protobuf type leaks into the public API.

use std::collections::HashMap;

pub(crate) use livekit_protocol::{
    AddTrackRequest, DataPacket, DisconnectReason, JoinResponse, LeaveRequest, MuteTrackRequest,
    ParticipantInfo, ReconnectReason, ReconnectResponse, RequestResponse, RpcAck,
    RpcError as RpcErrorPacket, RpcRequest, RpcResponse, SessionDescription, SignalTarget,
    SubscriptionPermission, TrackPermission, TrackSource, TrackType, TrickleRequest,
    UpdateParticipantMetadata, UpdateSubscription, UserPacket, data_packet, data_stream,
    leave_request, participant_info, request_response, rpc_response, signal_request,
    signal_response,
};

use prost::Message as _;

use crate::types::{DataMessage, Participant, ParticipantKind, TrackInfo};

/// The tracks a participant publishes, as our public type.
pub(crate) fn tracks(info: &ParticipantInfo) -> Vec<TrackInfo> {
    info.tracks
        .iter()
        .map(|t| TrackInfo {
            sid: t.sid.clone(),
            name: t.name.clone(),
            muted: t.muted,
            audio: t.r#type == TrackType::Audio as i32,
        })
        .collect()
}

/// The request to publish a microphone audio track with client id `cid` (muted from the
/// start when `muted`).
#[allow(deprecated)]
pub(crate) fn add_audio_track(cid: &str, name: &str, stereo: bool, muted: bool) -> AddTrackRequest {
    AddTrackRequest {
        cid: cid.to_owned(),
        name: name.to_owned(),
        muted,
        r#type: TrackType::Audio as i32,
        source: TrackSource::Microphone as i32,
        // Deprecated for `audio_features`, but what older servers read; harmless to newer ones.
        stereo,
        ..Default::default()
    }
}

/// Who may subscribe to our tracks: everyone, or only `identity` (nobody when `None`).
pub(crate) fn subscription_permission(only: Option<Option<&str>>) -> SubscriptionPermission {
    match only {
        None => SubscriptionPermission {
            all_participants: true,
            track_permissions: Vec::new(),
        },
        Some(identity) => SubscriptionPermission {
            all_participants: false,
            track_permissions: identity
                .map(|id| TrackPermission {
                    participant_identity: id.to_owned(),
                    all_tracks: true,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
        },
    }
}

/// The request to mute or unmute our track `sid`.
/// An `UpdateSubscription` subscribing to (or leaving) these tracks.
pub(crate) fn subscription(track_sids: Vec<String>, subscribe: bool) -> UpdateSubscription {
    UpdateSubscription {
        track_sids,
        subscribe,
        ..Default::default()
    }
}

/// Our track `sid` muted or unmuted, as a signal request.
pub(crate) fn mute_track(sid: &str, muted: bool) -> signal_request::Message {
    signal_request::Message::Mute(MuteTrackRequest {
        sid: sid.to_owned(),
        muted,
    })
}

/// Our publisher offer `id` as a signal request.
pub(crate) fn offer(sdp: String, id: u32) -> signal_request::Message {
    signal_request::Message::Offer(session_description("offer", sdp, id))
}

/// Our answer to the server's subscriber offer `id` as a signal request.
pub(crate) fn answer(sdp: String, id: u32) -> signal_request::Message {
    signal_request::Message::Answer(session_description("answer", sdp, id))
}

fn session_description(kind: &str, sdp: String, id: u32) -> SessionDescription {
    SessionDescription {
        r#type: kind.into(),
        sdp,
        id,
        ..Default::default()
    }
}

/// Decodes a `DataPacket` from a data channel message.
pub(crate) fn decode_data_packet(bytes: &[u8]) -> Result<DataPacket, String> {
    DataPacket::decode(bytes).map_err(|e| e.to_string())
}

/// Encodes a `DataPacket` for a data channel.
pub(crate) fn encode_data_packet(packet: &DataPacket) -> Vec<u8> {
    packet.encode_to_vec()
}

/// Our public participant from the server's `ParticipantInfo`.
pub(crate) fn participant(info: &ParticipantInfo) -> Participant {
    let kind = match participant_info::Kind::try_from(info.kind) {
        Ok(participant_info::Kind::Standard) => ParticipantKind::Standard,
        Ok(participant_info::Kind::Agent) => ParticipantKind::Agent,
        _ => ParticipantKind::Other(info.kind),
    };
    Participant {
        sid: info.sid.clone(),
        identity: info.identity.clone(),
        name: info.name.clone(),
        kind,
        metadata: info.metadata.clone(),
        attributes: info.attributes.clone(),
        client_protocol: info.client_protocol,
    }
}

/// Whether a participant update says this participant is gone.
pub(crate) fn is_disconnected(info: &ParticipantInfo) -> bool {
    info.state == participant_info::State::Disconnected as i32
}

/// A user packet for sending. Destinations go in both the packet and the legacy
/// `UserPacket` field, which older servers read.
#[allow(deprecated)] // the legacy fields are what older servers and SDKs read
pub(crate) fn user_packet(
    payload: Vec<u8>,
    topic: Option<String>,
    destinations: Vec<String>,
    reliable: bool,
) -> DataPacket {
    DataPacket {
        kind: if reliable {
            data_packet::Kind::Reliable as i32
        } else {
            data_packet::Kind::Lossy as i32
        },
        destination_identities: destinations.clone(),
        value: Some(data_packet::Value::User(UserPacket {
            payload,
            topic,
            destination_identities: destinations,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// Wraps a stream header, chunk or trailer for the reliable channel.
#[allow(deprecated)]
pub(crate) fn stream_packet(value: data_packet::Value, destinations: Vec<String>) -> DataPacket {
    DataPacket {
        kind: data_packet::Kind::Reliable as i32,
        destination_identities: destinations,
        value: Some(value),
        ..Default::default()
    }
}

/// Wraps an RPC request, ack or response for the reliable channel, addressed to one
/// participant.
#[allow(deprecated)] // `kind` is what older servers read
pub(crate) fn rpc_packet(value: data_packet::Value, destination: &str) -> DataPacket {
    DataPacket {
        kind: data_packet::Kind::Reliable as i32,
        destination_identities: vec![destination.to_owned()],
        value: Some(value),
        ..Default::default()
    }
}

/// The name of a `RequestResponse` reason, for errors.
/// A room configuration that dispatches these LiveKit Agents agents by name.
pub(crate) fn dispatch_config(agent_names: &[String]) -> livekit_protocol::RoomConfiguration {
    livekit_protocol::RoomConfiguration {
        agents: agent_names
            .iter()
            .map(|name| livekit_protocol::RoomAgentDispatch {
                agent_name: name.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Whether the server lets a lost session resume (its `client_configuration` may
/// disable it, asking for full rejoins).
pub(crate) fn resume_allowed(join: &JoinResponse) -> bool {
    join.client_configuration.as_ref().is_none_or(|c| {
        c.resume_connection != livekit_protocol::ClientConfigSetting::Disabled as i32
    })
}

/// Whether the server asks for relayed (TURN) connections only.
pub(crate) fn force_relay(join: &JoinResponse) -> bool {
    join.client_configuration
        .as_ref()
        .is_some_and(|c| c.force_relay == livekit_protocol::ClientConfigSetting::Enabled as i32)
}

/// A participant's permissions (publish, publish data, subscribe), when the server sent
/// them.
pub(crate) fn permission(info: &ParticipantInfo) -> Option<(bool, bool, bool)> {
    info.permission
        .as_ref()
        .map(|p| (p.can_publish, p.can_publish_data, p.can_subscribe))
}

/// The client id of the track whose `AddTrackRequest` the server refused in this
/// response (livekit-server refuses with request id 0 and the request echoed), if so.
/// `QUEUED` is not a refusal.
pub(crate) fn refused_add_track(r: &RequestResponse) -> Option<&str> {
    match &r.request {
        Some(request_response::Request::AddTrack(a))
            if r.reason != request_response::Reason::Ok as i32
                && r.reason != request_response::Reason::Queued as i32 =>
        {
            Some(a.cid.as_str())
        }
        _ => None,
    }
}

/// A track as a participant update lists it (tests).
#[cfg(test)]
pub(crate) fn listed_track(sid: &str, muted: bool) -> livekit_protocol::TrackInfo {
    livekit_protocol::TrackInfo {
        sid: sid.to_owned(),
        muted,
        ..Default::default()
    }
}

/// The sid of the track whose `MuteTrackRequest` the server answered NOT_FOUND in this
/// response (livekit-server answers so, with request id 0, a mute of a track it has
/// neither pending nor published).
pub(crate) fn mute_not_found(r: &RequestResponse) -> Option<&str> {
    match &r.request {
        Some(request_response::Request::Mute(m))
            if r.reason == request_response::Reason::NotFound as i32 =>
        {
            Some(m.sid.as_str())
        }
        _ => None,
    }
}

pub(crate) fn request_reason_name(code: i32) -> String {
    request_response::Reason::try_from(code)
        .map(|r| r.as_str_name().to_owned())
        .unwrap_or_else(|_| format!("reason {code}"))
}

/// A received user packet as our public type. The sender identity comes from the
/// packet (stamped by the server), falling back to the legacy field.
#[allow(deprecated)]
pub(crate) fn data_message(packet: &DataPacket, user: UserPacket, reliable: bool) -> DataMessage {
    let sender_identity = if packet.participant_identity.is_empty() {
        user.participant_identity.clone()
    } else {
        packet.participant_identity.clone()
    };
    let sender_sid = if packet.participant_sid.is_empty() {
        user.participant_sid.clone()
    } else {
        packet.participant_sid.clone()
    };
    DataMessage {
        sender_identity,
        sender_sid,
        topic: user.topic,
        payload: user.payload,
        reliable,
    }
}

/// Header of a byte or text stream we send.
pub(crate) struct HeaderFields {
    pub stream_id: String,
    pub topic: String,
    pub mime_type: String,
    pub total_length: Option<u64>,
    pub attributes: HashMap<String, String>,
    /// `Some(name)` for a byte stream, `None` for a text stream.
    pub byte_name: Option<String>,
}

/// Builds a `data_stream::Header`.
pub(crate) fn stream_header(h: HeaderFields, now_ms: i64) -> data_packet::Value {
    let content_header = match h.byte_name {
        Some(name) => {
            data_stream::header::ContentHeader::ByteHeader(data_stream::ByteHeader { name })
        }
        None => data_stream::header::ContentHeader::TextHeader(data_stream::TextHeader {
            operation_type: data_stream::OperationType::Create as i32,
            ..Default::default()
        }),
    };
    data_packet::Value::StreamHeader(data_stream::Header {
        stream_id: h.stream_id,
        timestamp: now_ms,
        topic: h.topic,
        mime_type: h.mime_type,
        total_length: h.total_length,
        attributes: h.attributes,
        content_header: Some(content_header),
        ..Default::default()
    })
}

/// Builds a `data_stream::Chunk`.
pub(crate) fn stream_chunk(stream_id: String, index: u64, content: Vec<u8>) -> data_packet::Value {
    data_packet::Value::StreamChunk(data_stream::Chunk {
        stream_id,
        chunk_index: index,
        content,
        ..Default::default()
    })
}

/// Builds a `data_stream::Trailer`; a non-empty reason tells the receiver the stream
/// was cut short.
pub(crate) fn stream_trailer(stream_id: String, reason: String) -> data_packet::Value {
    data_packet::Value::StreamTrailer(data_stream::Trailer {
        stream_id,
        reason,
        ..Default::default()
    })
}

/// Name of a server `DisconnectReason` code, for messages.
pub(crate) fn disconnect_reason_name(code: i32) -> String {
    DisconnectReason::try_from(code)
        .map(|r| r.as_str_name().to_owned())
        .unwrap_or_else(|_| format!("reason {code}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn user_packet_round_trips_with_destinations_and_topic() {
        let p = user_packet(b"hi".to_vec(), Some("t".into()), vec!["bob".into()], true);
        let back = decode_data_packet(&encode_data_packet(&p)).unwrap();
        assert_eq!(back.destination_identities, vec!["bob".to_string()]);
        let Some(data_packet::Value::User(u)) = back.value.clone() else {
            panic!("user packet expected")
        };
        let msg = data_message(&back, u, true);
        assert_eq!(msg.payload, b"hi");
        assert_eq!(msg.topic.as_deref(), Some("t"));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode_data_packet(&[0x0a, 0x80]).is_err());
        assert!(decode_data_packet(&[0xff; 7]).is_err());
    }

    #[test]
    fn agent_kind_maps() {
        let info = ParticipantInfo {
            kind: participant_info::Kind::Agent as i32,
            identity: "a".into(),
            ..Default::default()
        };
        assert_eq!(participant(&info).kind, ParticipantKind::Agent);
        let info = ParticipantInfo {
            kind: 99,
            ..Default::default()
        };
        assert_eq!(participant(&info).kind, ParticipantKind::Other(99));
    }
}
