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
