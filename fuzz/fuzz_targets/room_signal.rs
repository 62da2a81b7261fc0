//! Fuzzes what outpost-room does with bytes from the network, without a network:
//!
//! - byte 0 even: the rest is a WebSocket frame, decoded as a `SignalRequest` the way a
//!   session does; an offer's or answer's SDP and a trickled candidate then go through the
//!   SDP rewrites and the TCP-candidate test (`outpost_room::fuzzing::fuzz_offer_sdp`).
//! - byte 0 odd: the rest is a data-channel message, decoded as a `DataPacket` and stamped
//!   with the sender for relay: after stamping, the packet (and a user packet's legacy
//!   fields) must name the real sender, whatever identity the bytes claimed, and must
//!   survive an encode and a decode unchanged.
//!
//! Nothing may panic; decode errors are answers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outpost_room::proto::{self, data_packet, signal_request};

const SENDER: &str = "fuzz-sender";
const SENDER_SID: &str = "PA_fuzz";

fuzz_target!(|data: &[u8]| {
    let [mode, bytes @ ..] = data else {
        return;
    };
    if mode % 2 == 0 {
        let Ok(req) = proto::decode_signal_request(bytes) else {
            return;
        };
        let encoded = proto::encode_signal_request(&req);
        let again = proto::decode_signal_request(&encoded).expect("a re-encoded request decodes");
        // Compared as messages, not bytes: map fields are encoded in hash order. A NaN
        // float is the one value unequal to itself.
        assert!(
            again == req || format!("{again:?}").contains("NaN"),
            "a request changed through an encode and a decode"
        );
        let Some(msg) = req.message else {
            return;
        };
        let _ = proto::request_kind(&msg);
        let text = match &msg {
            signal_request::Message::Offer(sd) | signal_request::Message::Answer(sd) => &sd.sdp,
            signal_request::Message::Trickle(t) => &t.candidate_init,
            _ => return,
        };
        if let Err(e) = outpost_room::fuzzing::fuzz_offer_sdp(text) {
            panic!("{e}");
        }
    } else {
        let Ok(mut packet) = proto::decode_data_packet(bytes) else {
            return;
        };
        let _ = proto::stamp_sender(&mut packet, SENDER, SENDER_SID);
        let _ = proto::packet_kind(&packet);
        let relayed = proto::encode_data_packet(&packet);
        let received = proto::decode_data_packet(&relayed).expect("a relayed packet decodes");
        assert_eq!(
            received.participant_identity, SENDER,
            "a forged sender survived the relay"
        );
        assert_eq!(received.participant_sid, SENDER_SID);
        #[allow(deprecated)] // the legacy fields are what older SDKs read
        if let Some(data_packet::Value::User(user)) = &received.value {
            assert_eq!(
                user.participant_identity, SENDER,
                "a forged legacy sender survived"
            );
            assert_eq!(user.participant_sid, SENDER_SID);
        }
        assert!(
            received == packet || format!("{received:?}").contains("NaN"),
            "a packet changed through the relay's encode and decode"
        );
    }
});
