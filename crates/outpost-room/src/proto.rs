//! The LiveKit protocol types this crate speaks, and their binary codec.
//!
//! This is the only module that imports `livekit_protocol` and `prost`: everything else
//! names LiveKit messages through the re-exports below, so a protocol upgrade touches
//! one file.

pub use livekit_protocol::{
    AddTrackRequest, ClientConfiguration, DataPacket, DisconnectReason, JoinResponse, LeaveRequest,
    MuteTrackRequest, ParticipantInfo, ParticipantPermission, ParticipantUpdate, Ping, Pong,
    ReconnectResponse, RequestResponse, Room as RoomInfo, RoomUpdate, ServerInfo,
    SessionDescription, SignalRequest, SignalResponse, SignalTarget, SubscriptionPermission,
    SubscriptionPermissionUpdate, TrackInfo, TrackPermission, TrackPublishedResponse, TrackSource,
    TrackSubscribed, TrackType, TrackUnpublishedResponse, TrickleRequest,
    UpdateParticipantMetadata, UpdateSubscription, UserPacket, data_packet, data_stream,
    leave_request, participant_info, request_response, server_info, signal_request,
    signal_response,
};

use prost::Message as _;

/// LiveKit server version we report. The official SDKs refuse RPC below 1.8.0.
pub const SERVER_VERSION: &str = "1.9.0";
/// Signaling protocol version we report in `ServerInfo.protocol`.
pub const PROTOCOL_VERSION: i32 = 15;

/// The `ParticipantInfo.kind` for a token's `kind` claim, as livekit-server maps it; unknown
/// or empty claims are standard participants.
pub fn participant_kind(claim: &str) -> i32 {
    use participant_info::Kind;
    let kind = match claim {
        "ingress" => Kind::Ingress,
        "egress" => Kind::Egress,
        "sip" => Kind::Sip,
        "agent" => Kind::Agent,
        "connector" => Kind::Connector,
        "bridge" => Kind::Bridge,
        _ => Kind::Standard,
    };
    kind as i32
}

/// Decodes one binary WebSocket frame as a `SignalRequest`.
pub fn decode_signal_request(bytes: &[u8]) -> Result<SignalRequest, prost::DecodeError> {
    SignalRequest::decode(bytes)
}

/// Encodes a `SignalResponse` for a binary WebSocket frame.
pub fn encode_signal_response(msg: &SignalResponse) -> Vec<u8> {
    msg.encode_to_vec()
}

/// Encodes a `SignalRequest` (used by test clients and benches that speak the client side).
pub fn encode_signal_request(msg: &SignalRequest) -> Vec<u8> {
    msg.encode_to_vec()
}

/// Decodes a `SignalResponse` (used by test clients).
pub fn decode_signal_response(bytes: &[u8]) -> Result<SignalResponse, prost::DecodeError> {
    SignalResponse::decode(bytes)
}

/// Decodes a `DataPacket` received on a data channel.
pub fn decode_data_packet(bytes: &[u8]) -> Result<DataPacket, prost::DecodeError> {
    DataPacket::decode(bytes)
}

/// Encodes a `DataPacket` for a data channel.
pub fn encode_data_packet(packet: &DataPacket) -> Vec<u8> {
    packet.encode_to_vec()
}

/// Wraps a response message.
pub fn response(message: signal_response::Message) -> SignalResponse {
    SignalResponse {
        message: Some(message),
    }
}

/// Wraps a request message.
pub fn request(message: signal_request::Message) -> SignalRequest {
    SignalRequest {
        message: Some(message),
    }
}

/// A `LeaveRequest` telling the client to disconnect for good.
pub fn leave(reason: DisconnectReason) -> SignalResponse {
    response(signal_response::Message::Leave(LeaveRequest {
        can_reconnect: false,
        reason: reason as i32,
        action: leave_request::Action::Disconnect as i32,
        regions: None,
    }))
}

/// Our offer of the subscriber connection, numbered `id`.
pub fn offer(sdp: String, id: u32) -> SignalResponse {
    description("offer", signal_response::Message::Offer, sdp, id)
}

/// Our answer to the client's publisher offer `id`.
pub fn answer(sdp: String, id: u32) -> SignalResponse {
    description("answer", signal_response::Message::Answer, sdp, id)
}

fn description(
    r#type: &str,
    message: fn(SessionDescription) -> signal_response::Message,
    sdp: String,
    id: u32,
) -> SignalResponse {
    response(message(SessionDescription {
        r#type: r#type.to_owned(),
        sdp,
        id,
        ..Default::default()
    }))
}

/// Short human-readable name of a request, for logs.
pub fn request_kind(msg: &signal_request::Message) -> &'static str {
    use signal_request::Message as M;
    match msg {
        M::Offer(_) => "offer",
        M::Answer(_) => "answer",
        M::Trickle(_) => "trickle",
        M::Leave(_) => "leave",
        M::Ping(_) | M::PingReq(_) => "ping",
        M::AddTrack(_) => "add_track",
        M::Mute(_) => "mute",
        M::Subscription(_) => "subscription",
        M::SubscriptionPermission(_) => "subscription_permission",
        M::TrackSetting(_) => "track_setting",
        _ => "other",
    }
}

/// Kind of data channel a packet travels on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Ordered and retransmitted (`_reliable`).
    Reliable,
    /// Unordered, no retransmission (`_lossy`).
    Lossy,
}

/// Rewrites a data packet for relay: stamps the sender's identity and sid (in the
/// packet and, for user packets, in the legacy fields too) and returns the
/// destination identities the sender asked for (empty = everyone else).
///
/// As livekit-server does, an `agent` may send a text stream on another participant's
/// behalf (LiveKit Agents' transcript of a user's speech): the header keeps the identity
/// the agent put there and is marked generated, while its chunks and trailer, like every
/// packet, carry the agent's identity, and the sid is always the sender's own.
#[allow(deprecated)] // the legacy UserPacket fields are still what older SDKs read
pub fn stamp_sender(
    packet: &mut DataPacket,
    identity: &str,
    sid: &str,
    agent: bool,
) -> Vec<String> {
    let mut destinations = std::mem::take(&mut packet.destination_identities);
    let on_behalf =
        agent && !packet.participant_identity.is_empty() && packet.participant_identity != identity;
    let mut keep_identity = false;
    if let Some(data_packet::Value::StreamHeader(h)) = packet.value.as_mut() {
        if let Some(data_stream::header::ContentHeader::TextHeader(t)) = h.content_header.as_mut() {
            if on_behalf {
                t.generated = true;
                keep_identity = true;
            }
        }
    }
    if !keep_identity {
        packet.participant_identity = identity.to_owned();
    }
    packet.participant_sid = sid.to_owned();
    if let Some(data_packet::Value::User(user)) = packet.value.as_mut() {
        if destinations.is_empty() {
            destinations = user.destination_identities.clone();
        }
        user.participant_identity = identity.to_owned();
        user.participant_sid = sid.to_owned();
    }
    // The receiving SDK does not need the list; keep it so a client can still see
    // whether a packet was addressed, as livekit-server does.
    packet.destination_identities.clone_from(&destinations);
    destinations
}

/// Short name of the packet's payload, for logs and stats.
pub fn packet_kind(packet: &DataPacket) -> &'static str {
    use data_packet::Value as V;
    match packet.value.as_ref() {
        Some(V::User(_)) => "user",
        Some(V::RpcRequest(_)) => "rpc_request",
        Some(V::RpcAck(_)) => "rpc_ack",
        Some(V::RpcResponse(_)) => "rpc_response",
        Some(V::StreamHeader(_)) => "stream_header",
        Some(V::StreamChunk(_)) => "stream_chunk",
        Some(V::StreamTrailer(_)) => "stream_trailer",
        Some(_) => "other",
        None => "empty",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn stamp_sets_identity_and_reads_legacy_destinations() {
        let mut p = DataPacket {
            participant_identity: "forged".into(),
            value: Some(data_packet::Value::User(UserPacket {
                payload: b"hi".to_vec(),
                destination_identities: vec!["bob".into()],
                participant_identity: "forged".into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        let dest = stamp_sender(&mut p, "alice", "PA_a", true);
        assert_eq!(dest, vec!["bob".to_string()]);
        assert_eq!(p.participant_identity, "alice");
        assert_eq!(p.participant_sid, "PA_a");
        let Some(data_packet::Value::User(u)) = &p.value else {
            panic!("user packet expected")
        };
        assert_eq!(u.participant_identity, "alice");
        assert_eq!(u.participant_sid, "PA_a");
    }

    #[test]
    fn garbage_is_a_decode_error_not_a_panic() {
        assert!(decode_signal_request(&[0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode_data_packet(&[0x0a, 0x80]).is_err());
    }

    #[test]
    fn signal_round_trip() {
        let req = request(signal_request::Message::PingReq(Ping {
            timestamp: 42,
            rtt: 1,
        }));
        let bytes = encode_signal_request(&req);
        assert_eq!(decode_signal_request(&bytes).unwrap(), req);
    }
}
