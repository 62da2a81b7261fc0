//! Unit tests of the engine: roster, data dispatch and holding, audio adoption.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::transports::host_is_loopback;
use super::*;
use crate::proto::{ParticipantInfo, data_packet};

#[test]
fn backoff_grows_to_seven_seconds() {
    assert_eq!(backoff(0), Duration::from_millis(300));
    assert_eq!(backoff(1), Duration::from_millis(600));
    assert_eq!(backoff(5), Duration::from_millis(7000));
    assert_eq!(backoff(40), Duration::from_millis(7000));
}

fn engine(opts: RoomOptions) -> (Engine, mpsc::UnboundedReceiver<RoomEvent>) {
    let (events, rx) = mpsc::unbounded_channel();
    let (_cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let rpc = Arc::new(crate::rpc::Rpc::new(
        opts.rpc_settings(),
        Shared::for_tests(),
    ));
    let e = Engine::new("ws://x".into(), "t".into(), opts, rpc, events, cmd_rx);
    (e, rx)
}

fn info(identity: &str, sid: &str, agent: bool, gone: bool) -> ParticipantInfo {
    use crate::proto::participant_info::{Kind, State};
    ParticipantInfo {
        identity: identity.into(),
        sid: sid.into(),
        kind: if agent {
            Kind::Agent as i32
        } else {
            Kind::Standard as i32
        },
        state: if gone {
            State::Disconnected as i32
        } else {
            State::Active as i32
        },
        ..Default::default()
    }
}

fn drain(rx: &mut mpsc::UnboundedReceiver<RoomEvent>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        out.push(match ev {
            RoomEvent::ParticipantJoined(p) => format!("joined {}", p.identity),
            RoomEvent::ParticipantLeft(p) => format!("left {}", p.identity),
            RoomEvent::AssistantJoined(p) => format!("assistant {}", p.identity),
            RoomEvent::AssistantLeft(p) => format!("assistant gone {}", p.identity),
            other => format!("{other:?}"),
        });
    }
    out
}

#[test]
fn first_agent_is_the_assistant_until_it_leaves() {
    let (mut e, mut rx) = engine(RoomOptions::default());
    e.update_roster(&[
        info("me", "PA_me", false, false),
        info("user", "PA_u", false, false),
    ]);
    assert_eq!(drain(&mut rx), vec!["joined user"]);
    e.update_roster(&[
        info("bot1", "PA_1", true, false),
        info("bot2", "PA_2", true, false),
    ]);
    assert_eq!(
        drain(&mut rx),
        vec!["joined bot1", "joined bot2", "assistant bot1"]
    );
    // A stale disconnect for an older sid of bot1 changes nothing.
    e.update_roster(&[info("bot1", "PA_old", true, true)]);
    assert!(drain(&mut rx).is_empty());
    e.update_roster(&[info("bot1", "PA_1", true, true)]);
    assert_eq!(
        drain(&mut rx),
        vec!["left bot1", "assistant gone bot1", "assistant bot2"]
    );
    // A rejoin's participant list: bot2 stays (no events), user is gone.
    e.replace_roster(&[info("bot2", "PA_2b", true, false)]);
    assert_eq!(drain(&mut rx), vec!["left user"]);
}

#[test]
fn configured_identity_wins_over_kind() {
    let (mut e, mut rx) = engine(RoomOptions::default().assistant("helper"));
    e.update_roster(&[info("bot", "PA_b", true, false)]);
    assert_eq!(drain(&mut rx), vec!["joined bot"]);
    e.update_roster(&[info("helper", "PA_h", false, false)]);
    assert_eq!(drain(&mut rx), vec!["joined helper", "assistant helper"]);
}

#[test]
fn malformed_and_replayed_packets_are_dropped() {
    let (mut e, mut rx) = engine(RoomOptions::default());
    e.on_data(true, &[0xff, 0xff, 0xff]);
    let mut p = proto::user_packet(b"x".to_vec(), None, Vec::new(), true);
    p.sequence = 5;
    p.participant_sid = "PA_b".into();
    p.participant_identity = "bob".into();
    let bytes = proto::encode_data_packet(&p);
    e.on_data(true, &bytes);
    e.on_data(true, &bytes);
    let events = drain(&mut rx);
    assert_eq!(events.len(), 1, "{events:?}");
}

/// A stream packet from `from` as the server relays it.
fn stream_bytes(from: &str, value: data_packet::Value) -> Vec<u8> {
    let mut p = proto::stream_packet(value, Vec::new());
    p.participant_identity = from.into();
    proto::encode_data_packet(&p)
}

fn header_from(from: &str, id: &str) -> Vec<u8> {
    let h = proto::stream_header(
        proto::HeaderFields {
            stream_id: id.into(),
            topic: "t".into(),
            mime_type: "application/octet-stream".into(),
            total_length: None,
            attributes: HashMap::new(),
            byte_name: Some("f".into()),
        },
        0,
    );
    stream_bytes(from, h)
}

fn opened(rx: &mut mpsc::UnboundedReceiver<RoomEvent>) -> Vec<crate::StreamReader> {
    let mut out = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        if let RoomEvent::StreamOpened(r) = ev {
            out.push(r);
        }
    }
    out
}

#[tokio::test]
async fn streams_are_tied_to_their_sender_and_filtered_to_the_assistant() {
    // Default: everyone's streams, but a chunk or trailer with the id of another
    // sender's stream does not touch it.
    let (mut e, mut rx) = engine(RoomOptions::default());
    e.update_roster(&[info("bot", "PA_b", true, false)]);
    e.on_data(true, &header_from("bot", "s"));
    e.on_data(
        true,
        &stream_bytes(
            "mallory",
            proto::stream_chunk("s".into(), 0, b"evil".to_vec()),
        ),
    );
    e.on_data(
        true,
        &stream_bytes("mallory", proto::stream_trailer("s".into(), String::new())),
    );
    e.on_data(
        true,
        &stream_bytes("bot", proto::stream_chunk("s".into(), 0, b"good".to_vec())),
    );
    e.on_data(
        true,
        &stream_bytes("bot", proto::stream_trailer("s".into(), String::new())),
    );
    let mut readers = opened(&mut rx);
    assert_eq!(readers.len(), 1);
    assert_eq!(readers.remove(0).read_all().await.unwrap(), b"good");

    // Assistant only: another participant's stream is dropped at its header.
    let (mut e, mut rx) = engine(RoomOptions::default().streams_from_assistant_only());
    e.update_roster(&[
        info("bot", "PA_b", true, false),
        info("carol", "PA_c", false, false),
    ]);
    for i in 0..100 {
        e.on_data(true, &header_from("carol", &format!("c{i}")));
        e.on_data(
            true,
            &stream_bytes(
                "carol",
                proto::stream_chunk(format!("c{i}"), 0, vec![0; 1000]),
            ),
        );
    }
    assert!(opened(&mut rx).is_empty());
    assert_eq!(e.receivers.open_count(), 0, "no slot, no buffering");
    e.on_data(true, &header_from("bot", "b"));
    e.on_data(
        true,
        &stream_bytes("bot", proto::stream_trailer("b".into(), String::new())),
    );
    let readers = opened(&mut rx);
    assert_eq!(readers.len(), 1);
    assert_eq!(readers[0].info.sender_identity, "bot");
}

/// The callers of the refused RPC calls reported so far.
fn refused_callers(rx: &mut mpsc::UnboundedReceiver<RoomEvent>) -> Vec<String> {
    std::iter::from_fn(|| rx.try_recv().ok())
        .filter_map(|ev| match ev {
            RoomEvent::RpcRefused { caller, .. } => Some(caller),
            _ => None,
        })
        .collect()
}

/// A text stream header as livekit-server relays one an agent sent in `claimed`'s name:
/// the identity it put there, the session id of whoever really sent it.
fn header_in_name(claimed: &str, sid: &str, id: &str, topic: &str) -> Vec<u8> {
    let h = proto::stream_header(
        proto::HeaderFields {
            stream_id: id.into(),
            topic: topic.into(),
            mime_type: "text/plain".into(),
            total_length: None,
            attributes: HashMap::from([
                ("lk.rpc_request_id".to_owned(), format!("R{id}")),
                (
                    "lk.rpc_request_method".to_owned(),
                    "outpost.list_tools".to_owned(),
                ),
                ("lk.rpc_request_version".to_owned(), "2".to_owned()),
            ]),
            byte_name: None,
        },
        0,
    );
    let mut p = proto::stream_packet(h, Vec::new());
    p.participant_identity = claimed.into();
    p.participant_sid = sid.into();
    proto::encode_data_packet(&p)
}

/// Issue 30 ("also to check"): on livekit-server any agent may send a text stream
/// header in another participant's name; only the session id tells who sent it. A
/// transcript in our name counts as the assistant's only when the assistant sent it,
/// and nobody passes for the assistant by naming it.
#[test]
fn a_stream_in_someone_elses_name_is_its_real_senders() {
    let (mut e, mut rx) = engine(
        RoomOptions::default()
            .streams_from_assistant_only()
            .rpc_from_assistant_only(),
    );
    e.update_roster(&[
        info("bot", "PA_b", true, false),
        info("eve", "PA_e", true, false),
    ]);
    drain(&mut rx);
    // The assistant's transcript of our speech: the assistant's, in our name; its
    // chunks carry the assistant's identity.
    e.on_data(
        true,
        &header_in_name("me", "PA_b", "t1", "lk.transcription"),
    );
    e.on_data(
        true,
        &stream_bytes(
            "bot",
            proto::stream_chunk("t1".into(), 0, b"hello".to_vec()),
        ),
    );
    let readers = opened(&mut rx);
    assert_eq!(readers.len(), 1);
    assert_eq!(readers[0].info.sender_identity, "bot");
    assert_eq!(readers[0].info.on_behalf_of.as_deref(), Some("me"));
    // Another agent in our name, or in the assistant's; a session we do not know.
    e.on_data(
        true,
        &header_in_name("me", "PA_e", "t2", "lk.transcription"),
    );
    e.on_data(
        true,
        &header_in_name("bot", "PA_e", "t3", "lk.transcription"),
    );
    e.on_data(
        true,
        &header_in_name("me", "PA_x", "t4", "lk.transcription"),
    );
    assert!(opened(&mut rx).is_empty());
    assert_eq!(
        e.receivers.open_count(),
        1,
        "only the assistant's took a slot"
    );
    // An RPC request stream in the assistant's name is eve's, and refused.
    e.on_data(
        true,
        &header_in_name("bot", "PA_e", "r1", crate::rpc::REQUEST_TOPIC),
    );
    assert_eq!(refused_callers(&mut rx), ["eve"]);
}

/// A packet as the server relays it from session `sid` of `identity`.
fn from_session(identity: &str, sid: &str, value: data_packet::Value) -> Vec<u8> {
    let mut p = proto::stream_packet(value, Vec::new());
    p.participant_identity = identity.into();
    p.participant_sid = sid.into();
    proto::encode_data_packet(&p)
}

/// Answers `outpost.list_tools` on `e` and returns a version 1 request calling it.
fn list_tools_call(e: &Engine) -> proto::RpcRequest {
    e.rpc.register(
        "outpost.list_tools".into(),
        crate::rpc::handler(|_inv: crate::RpcInvocation| async move { Ok("{}".into()) }),
    );
    proto::RpcRequest {
        id: "r1".into(),
        method: "outpost.list_tools".into(),
        payload: "{}".into(),
        version: 1,
        ..Default::default()
    }
}

/// livekit-server announced a newcomer 1.4 s after its first data (seen against
/// v1.13.5): an agent that speaks or calls at once is not taken for a stranger. Its
/// packets wait until the update names it; a session never named is handled as it is
/// once the wait is over.
#[tokio::test]
async fn packets_of_a_session_not_announced_yet_wait_for_the_update() {
    let (mut e, mut rx) = engine(
        RoomOptions::default()
            .streams_from_assistant_only()
            .rpc_from_assistant_only(),
    );
    e.on_data(
        true,
        &header_in_name("bot", "PA_b", "t1", "lk.transcription"),
    );
    e.on_data(
        true,
        &from_session(
            "bot",
            "PA_b",
            proto::stream_chunk("t1".into(), 0, b"hi".to_vec()),
        ),
    );
    let call = list_tools_call(&e);
    e.on_data(
        true,
        &from_session("bot", "PA_b", data_packet::Value::RpcRequest(call.clone())),
    );
    e.on_data(
        true,
        &from_session("eve", "PA_e", data_packet::Value::RpcRequest(call)),
    );
    assert!(drain(&mut rx).is_empty(), "nothing before the update");
    assert_eq!(e.shared.outbox.pending_len(), 0, "no answer yet");
    e.update_roster(&[info("bot", "PA_b", true, false)]);
    let events: Vec<RoomEvent> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    let stream = events.iter().find_map(|ev| match ev {
        RoomEvent::StreamOpened(r) => Some(r.info.sender_identity.clone()),
        _ => None,
    });
    assert_eq!(stream.as_deref(), Some("bot"), "{events:?}");
    assert!(
        !events
            .iter()
            .any(|ev| matches!(ev, RoomEvent::RpcRefused { .. })),
        "the assistant's call is not refused: {events:?}"
    );
    assert_eq!(
        e.shared.outbox.pending_len(),
        1,
        "the assistant's call is acked"
    );
    // Eve is never announced: after the wait her call is handled, and refused.
    e.release_held(Instant::now() + HOLD_FOR);
    assert_eq!(refused_callers(&mut rx), ["eve"]);
    assert!(e.held.is_empty());
}

/// Reliable packet `seq` of session `sid` of `identity`, as the server relays it.
fn numbered(identity: &str, sid: &str, seq: u32, mut p: proto::DataPacket) -> Vec<u8> {
    p.sequence = seq;
    p.participant_identity = identity.into();
    p.participant_sid = sid.into();
    proto::encode_data_packet(&p)
}

/// While a session's RPC call waits for the update that names it, its later packets of
/// any kind wait behind it: one let through first would raise the session's last
/// reliable sequence, and the held call, numbered lower, would be dropped as replayed.
#[tokio::test]
async fn packets_behind_a_held_one_wait_in_order() {
    let (mut e, mut rx) = engine(RoomOptions::default().rpc_from_assistant_only());
    let call = list_tools_call(&e);
    let call = proto::rpc_packet(data_packet::Value::RpcRequest(call), "me");
    e.on_data(true, &numbered("bot", "PA_b", 1, call));
    let hello = proto::user_packet(b"hello".to_vec(), None, Vec::new(), true);
    e.on_data(true, &numbered("bot", "PA_b", 2, hello));
    let before = drain(&mut rx);
    e.update_roster(&[info("bot", "PA_b", true, false)]);
    let events: Vec<RoomEvent> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert!(
        events.iter().any(|ev| matches!(ev, RoomEvent::Data(_))),
        "the user packet arrives: {events:?}"
    );
    assert_eq!(
        e.shared.outbox.pending_len(),
        1,
        "the held call is acked, not dropped as replayed"
    );
    assert!(
        before.is_empty(),
        "the user packet waited behind the call: {before:?}"
    );
    assert!(e.held.is_empty());
}

/// What waits behind a held packet is bounded, and never lost for it: past the session's
/// held bytes the held packets go first, in order, then the new one, as at the timeout.
#[tokio::test]
async fn data_behind_a_held_packet_past_the_cap_is_let_go_in_order_not_dropped() {
    let (mut e, mut rx) = engine(RoomOptions::default().rpc_from_assistant_only());
    let call = list_tools_call(&e);
    let call = proto::rpc_packet(data_packet::Value::RpcRequest(call), "me");
    e.on_data(true, &numbered("bot", "PA_b", 1, call));
    for seq in 2..=4 {
        let big = proto::user_packet(vec![seq as u8; 100 * 1024], None, Vec::new(), true);
        e.on_data(true, &numbered("bot", "PA_b", seq, big));
    }
    let got: Vec<u8> = std::iter::from_fn(|| rx.try_recv().ok())
        .filter_map(|ev| match ev {
            RoomEvent::Data(m) => m.payload.first().copied(),
            _ => None,
        })
        .collect();
    assert_eq!(got, [2, 3, 4], "every user packet, in order");
    assert!(e.held.is_empty(), "nothing stays held past the cap");
}

/// Issue 30, finding 4: audio whose publisher no participant update names (a hidden
/// participant's) is never reported, so nobody can take it for the assistant's; audio
/// that merely came before the update is reported once the update names its owner.
#[test]
fn audio_is_reported_only_once_its_publisher_is_named() {
    let (mut e, mut rx) = engine(RoomOptions::default());
    e.update_roster(&[info("bot", "PA_b", true, false)]);
    drain(&mut rx);
    for (sid, owner) in [("TR_hidden", "PA_eve"), ("TR_early", "PA_c")] {
        let (_tx, stream) = crate::audio::AudioStream::for_tests();
        e.unowned_audio.push(UnownedAudio {
            sid: sid.into(),
            stream_sid: owner.into(),
            stream,
        });
    }
    e.adopt_audio();
    e.update_roster(&[info("bot", "PA_b", true, false)]);
    let subscribed = |rx: &mut mpsc::UnboundedReceiver<RoomEvent>| -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Ok(ev) = rx.try_recv() {
            if let RoomEvent::AudioTrackSubscribed {
                participant,
                track_sid,
                ..
            } = ev
            {
                out.push((participant.identity, track_sid));
            }
        }
        out
    };
    assert!(subscribed(&mut rx).is_empty());
    e.update_roster(&[info("carol", "PA_c", false, false)]);
    assert_eq!(
        subscribed(&mut rx),
        vec![("carol".to_owned(), "TR_early".to_owned())]
    );
    assert_eq!(
        e.unowned_audio.len(),
        1,
        "the hidden publisher's stays held"
    );
}

#[test]
fn loopback_hosts() {
    assert!(host_is_loopback("ws://127.0.0.1:7880"));
    assert!(host_is_loopback("ws://localhost:7880/x"));
    assert!(host_is_loopback("wss://[::1]:443"));
    assert!(!host_is_loopback("wss://example.livekit.cloud"));
    assert!(!host_is_loopback("ws://10.1.2.3:7880"));
}

#[test]
fn a_mute_state_the_server_lost_is_told_again_once() {
    let (mut e, _rx) = engine(RoomOptions::default());
    let me = info("me", "PA_me", false, false);
    e.shared.roster().local = Some(proto::participant(&me));
    let ours = Arc::new(LocalShared::new(1, false).unwrap());
    e.local_tracks.insert("TR_mic".into(), Arc::clone(&ours));
    let listed = |muted: bool| {
        let mut p = me.clone();
        p.tracks = vec![proto::listed_track("TR_mic", muted)];
        p
    };
    // We unmuted (a new track is unmuted); the server's first listing of the track says
    // muted (the unmute was lost as its first media came in): told again, once.
    assert!(!ours.is_muted());
    e.update_roster(&[listed(true)]);
    assert_eq!(e.mute_again, vec![("TR_mic".to_owned(), false)]);
    e.mute_again.clear();
    e.update_roster(&[listed(true)]);
    assert!(
        e.mute_again.is_empty(),
        "a later listing is the server's own doing (an operator's mute)"
    );
    // The server could not find it to unmute: its next listing is compared again.
    e.mute_not_found("TR_mic");
    e.update_roster(&[listed(true)]);
    assert_eq!(e.mute_again, vec![("TR_mic".to_owned(), false)]);
    e.mute_again.clear();
    // A first listing that agrees with us, and tracks that are not ours, ask nothing.
    e.tracks_listed.clear();
    e.update_roster(&[listed(false)]);
    e.mute_not_found("TR_someone_elses");
    let mut other = info("bob", "PA_b", false, false);
    other.tracks = listed(true).tracks;
    e.update_roster(&[other]);
    assert!(e.mute_again.is_empty());
}
