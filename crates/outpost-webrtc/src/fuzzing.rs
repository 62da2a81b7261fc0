//! Entry points for the cargo-fuzz targets in `/fuzz`. Not part of the API: hidden from the
//! docs, and free to change with the code they exercise.
//!
//! The SDP rewrites work on text straight from the network (a publisher's offer) or on
//! what `webrtc` wrote: [`fuzz_sdp_rewrites`] runs them and checks that they only drop or
//! move lines, never make any up or glue two together, and runs the readers of which
//! media sections send.

use std::collections::HashMap;

use crate::sdp;

/// Runs the SDP rewrites and the candidate helpers on `text`. `Err` names a line a
/// rewrite produced that was not in its input (or produced more often than it was there).
#[doc(hidden)]
pub fn fuzz_sdp_rewrites(text: &str) -> Result<(), String> {
    let _ = sdp::candidate_section(text);
    let _ = sdp::is_tcp_candidate(text);
    let _ = sdp::parse_remote_candidate(text, true);
    let _ = sdp::tcp_type(text);
    // Which sections of a publisher's offer send: every track id named must be in the
    // input.
    for id in crate::media::sending_track_ids(text) {
        if id.is_empty() || !text.contains(id.as_str()) {
            return Err(format!("sending_track_ids made up {id:?}"));
        }
    }
    let _ = crate::media::sends_video(text);
    let lines = |t: &str| -> Vec<String> {
        t.split_inclusive('\n')
            .map(|l| l.trim_end_matches(['\r', '\n']).to_owned())
            .collect()
    };
    let dropped = sdp::drop_rejected_ice_credentials(text);
    let input = lines(text);
    let mut rest = input.iter();
    for line in lines(&dropped) {
        // What is left must be the input with some lines taken out, in order.
        if !rest.any(|l| *l == line) {
            return Err(format!(
                "drop_rejected_ice_credentials produced {line:?} out of order or from nowhere"
            ));
        }
    }
    let moved = sdp::move_candidates_out_of_rejected_sections(text);
    let mut count: HashMap<String, isize> = HashMap::new();
    for line in input {
        *count.entry(line).or_default() += 1;
    }
    for line in lines(&moved) {
        let n = count.entry(line.clone()).or_default();
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
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn an_ice_restart_offer_passes_and_garbage_is_no_error() {
        let offer = "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=ice-ufrag:old\r\n\
                     a=candidate:1 1 udp 1 192.0.2.1 5000 typ host\r\n\
                     m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\n";
        assert_eq!(fuzz_sdp_rewrites(offer), Ok(()));
        assert_eq!(fuzz_sdp_rewrites("m=\nm= 0\na=candidate:\r\n\u{0}"), Ok(()));
        assert_eq!(fuzz_sdp_rewrites(""), Ok(()));
    }

    /// Found by the `room_signal` fuzz target (2026-11-23, corpus file
    /// `finding-2026-11-23-sdp-last-line`): when the description's last line had no line
    /// ending, a candidate moved out of a rejected section was glued onto it
    /// (`a=sctp-port:5000a=candidate:…`).
    #[test]
    fn moved_candidates_never_join_a_last_line_without_a_line_ending() {
        let text = "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\n\
                    a=candidate:1 1 udp 1 192.0.2.1 5000 typ host\r\n\
                    m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=sctp-port:5000";
        let out = sdp::move_candidates_out_of_rejected_sections(text);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.contains(&"a=sctp-port:5000"), "{out:?}");
        assert!(
            lines.contains(&"a=candidate:1 1 udp 1 192.0.2.1 5000 typ host"),
            "{out:?}"
        );
        assert_eq!(fuzz_sdp_rewrites(text), Ok(()));
    }

    /// Found by a longer `room_signal` campaign (issue 30, finding 15; the inputs are
    /// `fuzz/corpus/room_signal/finding-2026-11-26-lone-cr-*`): the last line, in a
    /// rejected section and without a line ending (here ending in a lone CR and a vertical
    /// tab, which `trim_end` takes for whitespace), is moved into an earlier section and
    /// was then glued to the `m=` line that followed it.
    #[test]
    fn a_moved_last_line_without_a_line_ending_is_not_glued_to_the_next_section() {
        let text = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n\
                    m=audio 0 UDP/TLS/RTP/SAVPF 111\r\n\
                    a=candidate:5 1 udp 1 192.0.2.1 5000 typ host\rm=video 0 X\r\u{b}";
        let out = sdp::move_candidates_out_of_rejected_sections(text);
        assert!(
            out.contains("typ host\rm=video 0 X\r\u{b}\r\nm=audio 0 UDP"),
            "{out:?}"
        );
        assert_eq!(fuzz_sdp_rewrites(text), Ok(()));
    }
}
