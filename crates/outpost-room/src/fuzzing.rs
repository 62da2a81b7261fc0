//! Entry points for the cargo-fuzz targets in `/fuzz`. Not part of the API: hidden from the
//! docs, and free to change with the code they exercise.
//!
//! The signaling and data-channel decoders are public in [`crate::proto`]; what is private
//! is the rewriting of a client's SDP offer before `webrtc` reads it (`wire`), which works
//! on text straight from the network. [`fuzz_offer_sdp`] runs it and checks that it only
//! drops or moves lines, never makes any up.

use std::collections::HashMap;

use crate::wire;

/// Runs the SDP rewrites a publisher offer and our answer go through, and the TCP test a
/// trickled candidate goes through. `Err` names a line a rewrite produced that was not in
/// its input (or produced more often than it was there).
#[doc(hidden)]
pub fn fuzz_offer_sdp(sdp: &str) -> Result<(), String> {
    let _ = wire::application_mid(sdp);
    let _ = wire::is_tcp_candidate(sdp);
    let dropped = wire::drop_rejected_ice_credentials(sdp);
    let mut rest = sdp.split_inclusive('\n');
    for line in dropped.split_inclusive('\n') {
        // What is left must be the input with some lines taken out, in order.
        if !rest.any(|l| l == line) {
            return Err(format!(
                "drop_rejected_ice_credentials produced {line:?} out of order or from nowhere"
            ));
        }
    }
    let moved = wire::move_candidates_out_of_rejected_sections(sdp);
    let mut count: HashMap<&str, isize> = HashMap::new();
    for line in sdp.split_inclusive('\n') {
        *count.entry(line).or_default() += 1;
    }
    for line in moved.split_inclusive('\n') {
        let n = count.entry(line).or_default();
        *n -= 1;
        if *n < 0 {
            return Err(format!(
                "move_candidates_out_of_rejected_sections produced {line:?} more often than \
                 the input had it"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ice_restart_offer_passes_and_garbage_is_no_error() {
        let offer = "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=ice-ufrag:old\r\n\
                     a=candidate:1 1 udp 1 192.0.2.1 5000 typ host\r\n\
                     m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\n";
        assert_eq!(fuzz_offer_sdp(offer), Ok(()));
        assert_eq!(fuzz_offer_sdp("m=\nm= 0\na=candidate:\r\n\u{0}"), Ok(()));
        assert_eq!(fuzz_offer_sdp(""), Ok(()));
    }
}
