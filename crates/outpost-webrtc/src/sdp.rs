//! SDP and candidate text: which m-section our trickled candidates name, LiveKit's
//! candidate JSON in both directions, and the two rewrites that work around `webrtc`
//! 0.21 when the other side is libwebrtc (the official SDKs).
//!
//! Everything here is plain string work on SDP lines, so it is unit-tested without a
//! peer connection.

use webrtc::peer_connection::RTCIceCandidateInit;

use crate::error::{Error, Result};

/// The m-section our local candidates are signalled for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CandidateSection {
    /// Its `a=mid`.
    pub mid: String,
    /// Its position among the m-sections (`sdpMLineIndex`).
    pub index: u16,
}

impl Default for CandidateSection {
    fn default() -> Self {
        Self {
            mid: "0".to_owned(),
            index: 0,
        }
    }
}

/// The section our candidates belong to in a local description: the first mid of the
/// `a=group:BUNDLE` line (all bundled sections share its transport, and libwebrtc
/// signals its own candidates with that mid), else the first `m=application` section,
/// else the first section that is not rejected. `None` when no section has a mid.
///
/// `webrtc` 0.21 hands out every local candidate with `sdpMid: ""` and
/// `sdpMLineIndex: 0` (it does not know the section), so the caller has to fill both
/// in from the SDP.
pub(crate) fn candidate_section(sdp: &str) -> Option<CandidateSection> {
    struct Section {
        mid: Option<String>,
        application: bool,
        rejected: bool,
    }
    let mut bundle: Option<String> = None;
    let mut sections: Vec<Section> = Vec::new();
    for line in sdp.lines() {
        let line = line.trim_end();
        if let Some(m) = line.strip_prefix("m=") {
            sections.push(Section {
                mid: None,
                application: m.starts_with("application"),
                rejected: m.split_whitespace().nth(1) == Some("0"),
            });
        } else if let Some(mid) = line.strip_prefix("a=mid:") {
            if let Some(s) = sections.last_mut() {
                if s.mid.is_none() {
                    s.mid = Some(mid.to_owned());
                }
            }
        } else if let Some(tags) = line.strip_prefix("a=group:BUNDLE") {
            if sections.is_empty() && bundle.is_none() {
                bundle = tags.split_whitespace().next().map(str::to_owned);
            }
        }
    }
    let pick = |pred: &dyn Fn(&Section) -> bool| {
        sections.iter().enumerate().find_map(|(i, s)| {
            let mid = s.mid.as_ref()?;
            if !pred(s) {
                return None;
            }
            Some(CandidateSection {
                mid: mid.clone(),
                index: u16::try_from(i).unwrap_or(u16::MAX),
            })
        })
    };
    if let Some(tag) = &bundle {
        if let Some(found) = pick(&|s| s.mid.as_deref() == Some(tag.as_str())) {
            return Some(found);
        }
    }
    pick(&|s| s.application && !s.rejected).or_else(|| pick(&|s| !s.rejected))
}

/// One local candidate as the JSON LiveKit's `TrickleRequest.candidateInit` carries:
/// `{candidate, sdpMid, sdpMLineIndex}`.
pub(crate) fn candidate_json(candidate: &str, section: &CandidateSection) -> String {
    serde_json::json!({
        "candidate": candidate,
        "sdpMid": section.mid,
        "sdpMLineIndex": section.index,
    })
    .to_string()
}

/// A remote candidate from LiveKit's candidate JSON. `Ok(None)` when there is nothing
/// to add: the end-of-candidates marker (an empty candidate), a TCP candidate when
/// `tcp` is off (nothing local to pair it with; `webrtc` would still dial it), or an
/// active TCP candidate (it dials us and has no port to dial; `rtc-ice` ignores it).
/// `sdpMid` and `sdpMLineIndex` may be absent or null: `webrtc` 0.21 adds every
/// candidate to its one bundled transport and never reads them.
pub(crate) fn parse_remote_candidate(json: &str, tcp: bool) -> Result<Option<RTCIceCandidateInit>> {
    let init: RTCIceCandidateInit = serde_json::from_str(json)
        .map_err(|e| Error::BadRemote(format!("candidate JSON {:?}: {e}", clip(json))))?;
    if init.candidate.is_empty() {
        return Ok(None);
    }
    let passive = tcp_type(&init.candidate).is_some_and(|t| t.eq_ignore_ascii_case("passive"));
    if is_tcp_candidate(&init.candidate) && !(tcp && passive) {
        return Ok(None);
    }
    Ok(Some(init))
}

/// At most 200 characters of remote input, for error messages.
fn clip(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Whether an ICE candidate line uses TCP (`candidate:<foundation> <component> tcp …`).
pub(crate) fn is_tcp_candidate(candidate: &str) -> bool {
    candidate
        .split_whitespace()
        .nth(2)
        .is_some_and(|t| t.eq_ignore_ascii_case("tcp"))
}

/// The `tcptype` of a TCP candidate line (`active`, `passive`, `so`) as written;
/// `None` when the line has none.
pub(crate) fn tcp_type(candidate: &str) -> Option<&str> {
    let mut words = candidate.split_whitespace();
    while let Some(w) = words.next() {
        if w.eq_ignore_ascii_case("tcptype") {
            return words.next();
        }
    }
    None
}

/// Removes `a=ice-ufrag` / `a=ice-pwd` from rejected (port 0) media sections of a
/// remote description.
///
/// In an ICE-restart offer libwebrtc (the official SDKs) gives each rejected section
/// credentials of its own, while only the bundled sections carry the new ones.
/// `webrtc` 0.21 compares the credentials of every section that is not `inactive`
/// (rtc's `extract_ice_details`, for offers and answers alike) and refuses the
/// description as conflicting, although rejected sections take no part in ICE.
/// Without their credentials it reads the bundle's.
pub(crate) fn drop_rejected_ice_credentials(sdp: &str) -> String {
    let mut out = String::with_capacity(sdp.len());
    let mut rejected = false;
    for line in sdp.split_inclusive('\n') {
        let bare = line.trim_end();
        if let Some(m) = bare.strip_prefix("m=") {
            rejected = m.split_whitespace().nth(1) == Some("0");
        } else if rejected && (bare.starts_with("a=ice-ufrag:") || bare.starts_with("a=ice-pwd:")) {
            continue;
        }
        out.push_str(line);
    }
    out
}

/// Moves `a=candidate` lines out of rejected (port 0) media sections of a local answer
/// into the first accepted one.
///
/// After an ICE restart `webrtc` 0.21 writes the candidates it already gathered into
/// the answer's first media section, which is a rejected audio section when the offer
/// came from libwebrtc. libwebrtc then ignores them, and the restarted session has no
/// candidates from us.
pub(crate) fn move_candidates_out_of_rejected_sections(sdp: &str) -> String {
    let mut sections: Vec<(bool, Vec<&str>)> = vec![(false, Vec::new())];
    let mut moved = Vec::new();
    for line in sdp.split_inclusive('\n') {
        let bare = line.trim_end();
        if let Some(m) = bare.strip_prefix("m=") {
            sections.push((m.split_whitespace().nth(1) == Some("0"), vec![line]));
            continue;
        }
        let Some((rejected, lines)) = sections.last_mut() else {
            continue;
        };
        if *rejected && bare.starts_with("a=candidate:") {
            moved.push(line);
        } else {
            lines.push(line);
        }
    }
    if moved.is_empty() {
        return sdp.to_owned();
    }
    // Found by fuzzing (twice): the input's last line may have no line ending, and once
    // moved it is no longer last; whatever follows a line without one gets one first,
    // so no two lines are ever glued together.
    let mut out = String::with_capacity(sdp.len() + 2);
    let mut push = |line: &str| {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push_str("\r\n");
        }
        out.push_str(line);
    };
    let mut placed = false;
    for (i, (rejected, lines)) in sections.iter().enumerate() {
        for line in lines {
            push(line);
        }
        // Index 0 is the session part before the first m= line.
        if i > 0 && !rejected && !placed {
            for line in &moved {
                push(line);
            }
            placed = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tcp_candidates_are_recognised() {
        assert!(is_tcp_candidate(
            "candidate:1 1 tcp 1518280447 10.0.0.2 9 typ host tcptype active"
        ));
        assert!(!is_tcp_candidate(
            "candidate:1 1 udp 2122260223 10.0.0.2 5000 typ host"
        ));
        assert!(!is_tcp_candidate("garbage"));
    }

    #[test]
    fn remote_candidates_parse_with_and_without_sdp_mid() {
        let line = "candidate:1 1 udp 2122260223 10.0.0.2 5000 typ host";
        let with = format!(r#"{{"candidate":"{line}","sdpMid":"1","sdpMLineIndex":1}}"#);
        let init = parse_remote_candidate(&with, false).unwrap().unwrap();
        assert_eq!(init.candidate, line);
        assert_eq!(init.sdp_mid.as_deref(), Some("1"));
        assert_eq!(init.sdp_mline_index, Some(1));

        let without = format!(r#"{{"candidate":"{line}"}}"#);
        let init = parse_remote_candidate(&without, false).unwrap().unwrap();
        assert_eq!(init.candidate, line);
        assert_eq!(init.sdp_mid, None);
        assert_eq!(init.sdp_mline_index, None);

        let nulls = format!(r#"{{"candidate":"{line}","sdpMid":null,"sdpMLineIndex":null}}"#);
        assert!(parse_remote_candidate(&nulls, false).unwrap().is_some());
    }

    #[test]
    fn end_of_candidates_and_unusable_tcp_candidates_add_nothing() {
        assert!(
            parse_remote_candidate(r#"{"candidate":"","sdpMid":"0"}"#, true)
                .unwrap()
                .is_none()
        );
        let tcp = r#"{"candidate":"candidate:1 1 tcp 1518280447 10.0.0.2 9 typ host tcptype active","sdpMid":"0"}"#;
        assert!(parse_remote_candidate(tcp, false).unwrap().is_none());
        // With ICE/TCP on, a passive candidate (what livekit-server's port 7881 is) is
        // dialled; an active one dials us and stays skipped.
        assert!(parse_remote_candidate(tcp, true).unwrap().is_none());
        let passive = r#"{"candidate":"candidate:2 1 tcp 1518280447 10.0.0.1 7881 typ host tcptype passive","sdpMid":"0"}"#;
        assert!(parse_remote_candidate(passive, false).unwrap().is_none());
        assert!(parse_remote_candidate(passive, true).unwrap().is_some());
        let upper = r#"{"candidate":"candidate:2 1 TCP 1518280447 10.0.0.1 7881 typ host tcptype PASSIVE"}"#;
        assert!(parse_remote_candidate(upper, true).unwrap().is_some());
        let untyped = r#"{"candidate":"candidate:2 1 tcp 1518280447 10.0.0.1 7881 typ host"}"#;
        assert!(parse_remote_candidate(untyped, true).unwrap().is_none());
        assert_eq!(
            tcp_type("candidate:2 1 tcp 1 10.0.0.1 7881 typ host tcptype so"),
            Some("so")
        );
        assert_eq!(
            tcp_type("candidate:2 1 tcp 1 10.0.0.1 7881 typ host tcptype"),
            None
        );
    }

    #[test]
    fn bad_candidate_json_is_a_remote_error_naming_the_input() {
        for bad in ["", "{", "[]", r#"{"sdpMid":"0"}"#, r#"{"candidate":5}"#] {
            let e = parse_remote_candidate(bad, true).unwrap_err();
            assert!(e.is_remote(), "{bad}: {e}");
            assert!(e.to_string().contains("candidate JSON"), "{e}");
        }
        let long = format!(r#"{{"candidate":{}}}"#, "9".repeat(10_000));
        let e = parse_remote_candidate(&long, true).unwrap_err().to_string();
        assert!(
            e.len() < 600,
            "the error quotes a clipped input: {} bytes",
            e.len()
        );
    }

    #[test]
    fn local_candidates_name_the_bundle_section() {
        // Data only: the application section is the bundle.
        let sdp = "v=0\r\na=group:BUNDLE 0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:0\r\n";
        assert_eq!(
            candidate_section(sdp),
            Some(CandidateSection {
                mid: "0".into(),
                index: 0
            })
        );
        // A libwebrtc ICE restart: a rejected audio section first, bundle on the second.
        let sdp = "v=0\r\na=group:BUNDLE 1\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\n";
        assert_eq!(
            candidate_section(sdp),
            Some(CandidateSection {
                mid: "1".into(),
                index: 1
            })
        );
        // Audio and data bundled: the bundle's first tag, as libwebrtc signals it.
        let sdp = "v=0\r\na=group:BUNDLE 0 1\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\n";
        assert_eq!(candidate_section(sdp).unwrap().mid, "0");
        // No bundle line: the application section, skipping a rejected one.
        let sdp = "v=0\r\nm=audio 0 UDP 0\r\na=mid:a\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:d\r\n";
        assert_eq!(
            candidate_section(sdp),
            Some(CandidateSection {
                mid: "d".into(),
                index: 1
            })
        );
        assert_eq!(candidate_section("v=0\r\n"), None);
    }

    #[test]
    fn candidate_json_carries_the_section() {
        let json = candidate_json(
            "candidate:1 1 udp 1 127.0.0.1 5 typ host",
            &CandidateSection {
                mid: "1".into(),
                index: 1,
            },
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["sdpMid"], "1");
        assert_eq!(v["sdpMLineIndex"], 1);
        assert_eq!(v["candidate"], "candidate:1 1 udp 1 127.0.0.1 5 typ host");
        // It parses back as a remote candidate.
        assert!(parse_remote_candidate(&json, false).unwrap().is_some());
    }

    #[test]
    fn rejected_sections_lose_their_ice_credentials() {
        let sdp = "v=0\r\na=group:BUNDLE 1\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=ice-ufrag:old\r\na=ice-pwd:oldpwd\r\na=mid:0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=ice-ufrag:new\r\na=ice-pwd:newpwd\r\na=mid:1\r\n";
        let out = drop_rejected_ice_credentials(sdp);
        assert!(!out.contains("old"), "{out}");
        assert!(out.contains("a=ice-ufrag:new\r\n") && out.contains("a=ice-pwd:newpwd\r\n"));
        assert!(out.contains("m=audio 0 ") && out.contains("a=mid:0\r\n"));
        // Nothing rejected: unchanged.
        let plain = "v=0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=ice-ufrag:x\r\n";
        assert_eq!(drop_rejected_ice_credentials(plain), plain);
    }

    #[test]
    fn candidates_leave_rejected_sections() {
        let sdp = "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 0\r\na=mid:7\r\na=candidate:1 1 udp 1 10.0.0.1 5 typ host\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:13\r\na=ice-ufrag:u\r\n";
        let out = move_candidates_out_of_rejected_sections(sdp);
        assert_eq!(
            out,
            "v=0\r\nm=audio 0 UDP/TLS/RTP/SAVPF 0\r\na=mid:7\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:13\r\na=ice-ufrag:u\r\na=candidate:1 1 udp 1 10.0.0.1 5 typ host\r\n"
        );
        let plain = "v=0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=candidate:1 1 udp 1 10.0.0.1 5 typ host\r\n";
        assert_eq!(move_candidates_out_of_rejected_sections(plain), plain);
    }
}
