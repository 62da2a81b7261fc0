//! Entry points for the cargo-fuzz targets in `/fuzz`. Not part of the API: hidden from the
//! docs, and free to change with the code they exercise.
//!
//! The signaling and data-channel decoders are public in [`crate::proto`]; the SDP rewrites
//! a publisher's offer and our answer go through live in `outpost-webrtc`, whose own
//! fuzzing entry point this forwards to (the fuzz target's name stays the room's).

/// Runs the SDP rewrites and the candidate helpers an offer from the network goes through.
/// `Err` names a line a rewrite produced that was not in its input.
#[doc(hidden)]
pub fn fuzz_offer_sdp(sdp: &str) -> Result<(), String> {
    outpost_webrtc::fuzzing::fuzz_sdp_rewrites(sdp)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::proto::{self, signal_request};

    /// The `room_signal` target's own steps for one input: a WebSocket frame (byte 0
    /// even) whose offer, answer or trickled candidate goes through the SDP rewrites.
    fn run_room_signal(input: &[u8]) -> Result<(), String> {
        let [mode, bytes @ ..] = input else {
            return Ok(());
        };
        assert_eq!(mode % 2, 0, "a signaling input");
        let req = proto::decode_signal_request(bytes).map_err(|e| e.to_string())?;
        match req.message {
            Some(signal_request::Message::Offer(sd) | signal_request::Message::Answer(sd)) => {
                fuzz_offer_sdp(&sd.sdp)
            }
            Some(signal_request::Message::Trickle(t)) => fuzz_offer_sdp(&t.candidate_init),
            _ => Ok(()),
        }
    }

    /// Issue 30, finding 15: two inputs of a longer `room_signal` campaign (16 processes,
    /// about 6 minutes), committed to the corpus. Their offers end in a line without a line
    /// ending, holding lone CRs, inside a rejected section: moved out, it was glued to the
    /// next section's `m=` line.
    #[test]
    fn the_lone_cr_findings_of_the_longer_campaign_keep_their_lines() {
        for input in [
            &include_bytes!("../../../fuzz/corpus/room_signal/finding-2026-11-26-lone-cr-1")[..],
            &include_bytes!("../../../fuzz/corpus/room_signal/finding-2026-11-26-lone-cr-2")[..],
            &include_bytes!("../../../fuzz/corpus/room_signal/finding-2026-11-23-sdp-last-line")[..],
        ] {
            assert_eq!(run_room_signal(input), Ok(()));
        }
    }
}
