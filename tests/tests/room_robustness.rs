//! Robustness of `outpost-room` against bad clients, many clients and shutdown, with
//! the server in-process on loopback and bare Rust signaling clients. After each
//! scenario the server must be back to zero participants, zero rooms and zero tasks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use outpost_room::proto::{
    self, DisconnectReason, Ping, SessionDescription, participant_info, signal_request,
    signal_response,
};
use outpost_room::{Config, Keys, Server, Stats};
use outpost_tests::room::{ConnectFailure, SignalClient};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

async fn start(tweak: impl FnOnce(&mut Config)) -> Server {
    let mut config = Config {
        ping_interval: Duration::from_secs(1),
        ping_timeout: Duration::from_secs(10),
        empty_timeout: Duration::from_millis(200),
        connect_timeout: Duration::from_secs(30),
        ..Config::default()
    };
    tweak(&mut config);
    Server::bind("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap()
}

/// Waits until the server has no participants, no rooms and no tasks left.
async fn wait_empty(server: &Server) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = server.stats();
        if s == Stats::default() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "server did not drain: {s:?} rooms={:?}",
            server.rooms()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_participants(server: &Server, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while server.stats().participants != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "want {n} participants, have {:?}",
            server.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn http_get(server: &Server, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.unwrap();
    let status = buf
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, buf)
}

fn leave_reason(msg: &proto::SignalResponse) -> Option<i32> {
    match &msg.message {
        Some(signal_response::Message::Leave(l)) => Some(l.reason),
        _ => None,
    }
}

#[tokio::test]
async fn bad_tokens_get_401_with_a_reason_and_v1_is_404() {
    let server = start(|_| {}).await;
    let url = server.url();
    let wrong = Keys {
        key: "devkey".into(),
        secret: "other".into(),
    }
    .mint("r", "a", None, Duration::from_secs(60))
    .unwrap();
    for (token, want) in [
        (wrong.as_str(), "signature"),
        ("garbage", "malformed"),
        ("", "token"),
    ] {
        match SignalClient::connect(&url, token).await {
            Err(ConnectFailure::Http(401, body)) => assert!(body.contains(want), "{body}"),
            other => panic!("expected 401 for {token:?}, got {other:?}"),
        }
    }
    let (status, body) = http_get(&server, "/rtc/v1?access_token=x").await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("single peer connection"), "{body}");
    let good = server.token("r", "a").unwrap();
    assert_eq!(
        http_get(&server, &format!("/rtc/validate?access_token={good}"))
            .await
            .0,
        200
    );
    let (status, body) = http_get(&server, &format!("/rtc/validate?access_token={wrong}")).await;
    assert_eq!(status, 401);
    assert!(body.contains("signature"), "{body}");
    // A resume attempt is refused so the SDK falls back to a full rejoin.
    assert_eq!(
        http_get(&server, &format!("/rtc?reconnect=1&access_token={good}"))
            .await
            .0,
        404
    );
    assert_eq!(server.stats(), Stats::default());
    assert_eq!(server.shutdown().await, Stats::default());
}

#[tokio::test]
async fn malformed_and_oversized_frames_close_only_that_client() {
    let server = start(|_| {}).await;
    let url = server.url();
    let (mut watcher, _) = SignalClient::join(&url, &server.token("r", "watcher").unwrap())
        .await
        .unwrap();

    // Garbage that is not a SignalRequest.
    let (mut bad, join) = SignalClient::join(&url, &server.token("r", "bad").unwrap())
        .await
        .unwrap();
    let bad_sid = join.participant.unwrap().sid;
    bad.send_raw(vec![0xff, 0xff, 0xff, 0xff, 0x0f])
        .await
        .unwrap();
    let (_, close) = bad.drain_until_close(Duration::from_secs(5)).await.unwrap();
    let (code, reason) = close.expect("close frame");
    assert_eq!(code, 1007);
    assert!(reason.contains("malformed SignalRequest"), "{reason}");

    // A valid message type with a truncated body.
    let (mut trunc, _) = SignalClient::join(&url, &server.token("r", "trunc").unwrap())
        .await
        .unwrap();
    let mut bytes =
        proto::encode_signal_request(&proto::request(signal_request::Message::PingReq(Ping {
            timestamp: 1,
            rtt: 2,
        })));
    bytes.truncate(bytes.len() - 1);
    trunc.send_raw(bytes).await.unwrap();
    let (_, close) = trunc
        .drain_until_close(Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(close.expect("close frame").0, 1007);

    // A frame over the 256 KiB signaling limit.
    let (mut big, _) = SignalClient::join(&url, &server.token("r", "big").unwrap())
        .await
        .unwrap();
    let _ = big.send_raw(vec![0u8; 1024 * 1024]).await;
    let _ = big.drain_until_close(Duration::from_secs(5)).await;

    wait_participants(&server, 1).await;
    // The watcher saw "bad" join and then leave, and is still served.
    let mut bad_states = vec![];
    while let Ok(msg) = watcher.recv(Duration::from_millis(300)).await {
        if let Some(signal_response::Message::Update(u)) = msg.message {
            for p in u.participants.iter().filter(|p| p.sid == bad_sid) {
                bad_states.push(p.state);
            }
        }
    }
    assert_eq!(
        bad_states,
        vec![
            participant_info::State::Joined as i32,
            participant_info::State::Disconnected as i32
        ]
    );
    watcher
        .send(signal_request::Message::PingReq(Ping {
            timestamp: 7,
            rtt: 0,
        }))
        .await
        .unwrap();
    let pong = watcher.recv(Duration::from_secs(2)).await.unwrap();
    assert!(
        matches!(pong.message, Some(signal_response::Message::PongResp(p)) if p.last_ping_timestamp == 7)
    );
    watcher
        .send(signal_request::Message::Leave(Default::default()))
        .await
        .unwrap();
    wait_empty(&server).await;
    assert_eq!(server.shutdown().await, Stats::default());
}

#[tokio::test]
async fn fifty_participants_join_one_room_and_leave() {
    let server = start(|_| {}).await;
    let url = server.url();
    let mut clients = Vec::new();
    for i in 0..50 {
        let (c, join) =
            SignalClient::join(&url, &server.token("big", &format!("p{i:02}")).unwrap())
                .await
                .unwrap();
        assert_eq!(
            join.other_participants.len(),
            i,
            "p{i:02} sees the ones before it"
        );
        assert!(join.participant.unwrap().sid.starts_with("PA_"));
        assert!(join.ping_interval > 0 && join.ping_timeout > 0);
        assert_eq!(join.room.unwrap().name, "big");
        clients.push(c);
    }
    assert_eq!(server.stats().participants, 50);
    assert_eq!(server.stats().rooms, 1);
    // Everyone is still served: ping each one.
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(signal_request::Message::PingReq(Ping {
            timestamp: i as i64,
            rtt: 0,
        }))
        .await
        .unwrap();
        loop {
            let msg = c.recv(Duration::from_secs(5)).await.unwrap();
            if let Some(signal_response::Message::PongResp(p)) = msg.message {
                assert_eq!(p.last_ping_timestamp, i as i64);
                break;
            }
        }
    }
    for c in clients.iter_mut() {
        c.send(signal_request::Message::Leave(Default::default()))
            .await
            .unwrap();
    }
    wait_empty(&server).await;
    assert_eq!(server.shutdown().await, Stats::default());
}

/// A plausible data-only offer whose only candidate points at a port nobody answers.
fn dead_end_offer() -> String {
    [
        "v=0",
        "o=- 4215775240449105457 2 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0",
        "a=msid-semantic: WMS",
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
        "c=IN IP4 0.0.0.0",
        "a=candidate:1 1 udp 2122260223 127.0.0.1 9 typ host",
        "a=ice-ufrag:abcd",
        "a=ice-pwd:abcdefghijklmnopqrstuvwx",
        "a=ice-options:trickle",
        "a=fingerprint:sha-256 AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99",
        "a=setup:actpass",
        "a=mid:0",
        "a=sctp-port:5000",
        "a=max-message-size:262144",
        "",
    ]
    .join("\r\n")
}

#[tokio::test]
async fn client_that_never_completes_ice_is_cleaned_up() {
    let server = start(|c| c.connect_timeout = Duration::from_secs(2)).await;
    let (mut c, _) = SignalClient::join(&server.url(), &server.token("r", "stuck").unwrap())
        .await
        .unwrap();
    // A candidate before the offer is buffered, not refused.
    c.send(signal_request::Message::Trickle(proto::TrickleRequest {
        candidate_init: r#"{"candidate":"candidate:2 1 udp 2122260222 127.0.0.1 10 typ host","sdpMid":"0","sdpMLineIndex":0}"#.into(),
        target: proto::SignalTarget::Publisher as i32,
        r#final: false,
    }))
    .await
    .unwrap();
    c.send(signal_request::Message::Offer(SessionDescription {
        r#type: "offer".into(),
        sdp: dead_end_offer(),
        id: 1,
        ..Default::default()
    }))
    .await
    .unwrap();
    let (seen, _) = c.drain_until_close(Duration::from_secs(10)).await.unwrap();
    assert!(
        seen.iter().any(|m| matches!(&m.message, Some(signal_response::Message::Answer(a)) if a.sdp.contains("m=application"))),
        "no answer"
    );
    assert_eq!(
        seen.iter().find_map(leave_reason),
        Some(DisconnectReason::ConnectionTimeout as i32)
    );
    wait_empty(&server).await;
    assert_eq!(server.shutdown().await, Stats::default());
}

#[tokio::test]
async fn silent_client_is_removed_after_ping_timeout() {
    let server = start(|c| c.ping_timeout = Duration::from_secs(2)).await;
    let (mut c, _) = SignalClient::join(&server.url(), &server.token("r", "quiet").unwrap())
        .await
        .unwrap();
    let t0 = tokio::time::Instant::now();
    let _ = c.drain_until_close(Duration::from_secs(10)).await.unwrap();
    let after = t0.elapsed();
    assert!(
        after >= Duration::from_millis(1900) && after < Duration::from_secs(4),
        "{after:?}"
    );
    wait_empty(&server).await;
    assert_eq!(server.shutdown().await, Stats::default());
}

#[tokio::test]
async fn duplicate_identity_new_connection_wins() {
    let server = start(|_| {}).await;
    let url = server.url();
    let (mut old, _) = SignalClient::join(&url, &server.token("r", "dup").unwrap())
        .await
        .unwrap();
    let (mut new, join) = SignalClient::join(&url, &server.token("r", "dup").unwrap())
        .await
        .unwrap();
    assert!(
        join.other_participants.is_empty(),
        "the old connection is not a peer of the new one"
    );
    let (seen, _) = old.drain_until_close(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        seen.iter().find_map(leave_reason),
        Some(DisconnectReason::DuplicateIdentity as i32)
    );
    assert_eq!(
        server.rooms(),
        vec![("r".to_string(), vec!["dup".to_string()])]
    );
    new.send(signal_request::Message::PingReq(Ping {
        timestamp: 3,
        rtt: 0,
    }))
    .await
    .unwrap();
    assert!(new.recv(Duration::from_secs(2)).await.is_ok());
    new.send(signal_request::Message::Leave(Default::default()))
        .await
        .unwrap();
    wait_empty(&server).await;
    assert_eq!(server.shutdown().await, Stats::default());
}

#[tokio::test]
async fn shutdown_tells_connected_clients_to_leave() {
    let server = start(|_| {}).await;
    let url = server.url();
    let mut clients = Vec::new();
    for (room, id) in [("a", "x"), ("a", "y"), ("b", "z")] {
        clients.push(
            SignalClient::join(&url, &server.token(room, id).unwrap())
                .await
                .unwrap()
                .0,
        );
    }
    assert_eq!(server.stats().rooms, 2);
    let left = server.shutdown().await;
    assert_eq!(left, Stats::default(), "shutdown left something running");
    for c in clients.iter_mut() {
        let (seen, _) = c.drain_until_close(Duration::from_secs(5)).await.unwrap();
        assert_eq!(
            seen.iter().find_map(leave_reason),
            Some(DisconnectReason::ServerShutdown as i32)
        );
    }
}

/// Participant updates in `msgs`, as (identity, sid, state) triples.
fn updates(msgs: &[proto::SignalResponse]) -> Vec<(String, String, i32)> {
    msgs.iter()
        .filter_map(|m| match &m.message {
            Some(signal_response::Message::Update(u)) => Some(u.participants.clone()),
            _ => None,
        })
        .flatten()
        .map(|p| (p.identity, p.sid, p.state))
        .collect()
}

/// Reads messages until one matches `pred`; returns everything read, that one last.
async fn recv_until(
    c: &mut SignalClient,
    mut pred: impl FnMut(&proto::SignalResponse) -> bool,
) -> Vec<proto::SignalResponse> {
    let mut seen = Vec::new();
    loop {
        let m = c.recv(Duration::from_secs(5)).await.unwrap();
        let done = pred(&m);
        seen.push(m);
        if done {
            return seen;
        }
    }
}

fn is_leave_reconnect(m: &proto::SignalResponse) -> bool {
    matches!(&m.message, Some(signal_response::Message::Leave(l))
        if l.action == proto::leave_request::Action::Reconnect as i32
            && l.reason == DisconnectReason::StateMismatch as i32)
}

#[tokio::test]
async fn resume_reattaches_a_dropped_session_or_asks_for_a_full_reconnect() {
    // Without a resume window, reconnect=1 is a 404 and the SDKs rejoin.
    let plain = start(|_| {}).await;
    let token = plain.token("r", "a").unwrap();
    match SignalClient::connect_with(&plain.url(), &token, "&reconnect=1&sid=PA_x", None).await {
        Err(ConnectFailure::Http(404, _)) => {}
        other => panic!("expected 404, got {other:?}"),
    }
    assert_eq!(plain.shutdown().await, Stats::default());

    let server = start(|c| c.resume_window = Duration::from_secs(3)).await;
    let url = server.url();
    let token_a = server.token("r", "a").unwrap();
    let (a, join) = SignalClient::join(&url, &token_a).await.unwrap();
    let a_sid = join.participant.unwrap().sid;
    let (mut w, _) = SignalClient::join(&url, &server.token("r", "w").unwrap())
        .await
        .unwrap();
    // a's socket drops without a Leave; the session stays, so x's join is held for it.
    drop(a);
    let (x, _) = SignalClient::join(&url, &server.token("r", "x").unwrap())
        .await
        .unwrap();
    let x_sid = server.rooms();
    assert_eq!(
        x_sid,
        vec![(
            "r".to_string(),
            vec!["a".to_string(), "w".to_string(), "x".to_string()]
        )]
    );

    // Another sid, or another identity's session: a full reconnect is requested.
    let mut wrong = SignalClient::connect_with(&url, &token_a, "&reconnect=1&sid=PA_other", None)
        .await
        .unwrap();
    recv_until(&mut wrong, is_leave_reconnect).await;

    // The right sid: the same session, resumed.
    let query = format!("&reconnect=1&sid={a_sid}");
    let mut a2 = SignalClient::connect_with(&url, &token_a, &query, None)
        .await
        .unwrap();
    let first = a2.recv(Duration::from_secs(5)).await.unwrap();
    assert!(
        matches!(first.message, Some(signal_response::Message::Reconnect(_))),
        "{first:?}"
    );
    let seen = recv_until(&mut a2, |m| {
        matches!(m.message, Some(signal_response::Message::RoomUpdate(_)))
    })
    .await;
    let ups = updates(&seen);
    let joined = participant_info::State::Joined as i32;
    // First what was held while detached (x joined), then everyone, a included.
    assert_eq!(
        ups.first().map(|u| (u.0.as_str(), u.2)),
        Some(("x", joined))
    );
    let mut everyone: Vec<String> = ups[1..].iter().map(|u| u.0.clone()).collect();
    everyone.sort();
    assert_eq!(everyone, vec!["a", "w", "x"]);
    assert!(ups.iter().any(|u| u.0 == "a" && u.1 == a_sid));

    // w saw x join and nothing about a: a never left, so nothing to re-announce.
    let seen = recv_until(&mut w, |m| {
        updates(std::slice::from_ref(m)).iter().any(|u| u.0 == "x")
    })
    .await;
    assert!(
        updates(&seen).iter().all(|u| u.0 != "a"),
        "w saw a leave or rejoin: {:?}",
        updates(&seen)
    );

    // a drops again and does not come back: gone after the window, and w is told.
    drop(a2);
    let seen = recv_until(&mut w, |m| {
        updates(std::slice::from_ref(m))
            .iter()
            .any(|u| u.0 == "a" && u.2 == participant_info::State::Disconnected as i32)
    })
    .await;
    assert!(updates(&seen).iter().all(|u| u.0 != "a" || u.1 == a_sid));
    let mut late = SignalClient::connect_with(&url, &token_a, &query, None)
        .await
        .unwrap();
    recv_until(&mut late, is_leave_reconnect).await;

    drop((w, x, wrong, late));
    wait_empty(&server).await;
    assert_eq!(server.shutdown().await, Stats::default());
}

#[tokio::test]
async fn tls_listener_serves_wss_and_a_stalled_handshake_blocks_nobody() {
    use outpost_tests::pki::TestPki;
    use tokio_rustls::rustls;
    let pki = TestPki::new(&["127.0.0.1".to_string()]).unwrap();
    let identity =
        outpost_room::TlsIdentity::from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes())
            .unwrap();
    let server = start(|c| c.tls = Some(identity)).await;
    let url = server.url();
    assert!(url.starts_with("wss://127.0.0.1:"), "{url}");

    // A client that opens TCP and never says a word.
    let _stalled = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();

    let connector = |ca: &str| {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tokio_tungstenite::Connector::Rustls(std::sync::Arc::new(config))
    };
    let token = server.token("r", "tls").unwrap();
    let mut c = SignalClient::connect_with(&url, &token, "", Some(connector(&pki.ca_pem)))
        .await
        .unwrap();
    let join = c.recv(Duration::from_secs(5)).await.unwrap();
    assert!(matches!(
        join.message,
        Some(signal_response::Message::Join(_))
    ));

    // A client trusting another CA is refused during the handshake.
    let other = TestPki::new(&["127.0.0.1".to_string()]).unwrap();
    match SignalClient::connect_with(&url, &token, "", Some(connector(&other.ca_pem))).await {
        Err(ConnectFailure::Other(e)) => {
            assert!(e.to_string().to_lowercase().contains("certificate"), "{e}")
        }
        Err(ConnectFailure::Http(code, body)) => panic!("HTTP {code} {body}"),
        Ok(_) => panic!("an untrusted certificate was accepted"),
    }
    // Plain HTTP on the TLS port gets no WebSocket.
    let plain = url.replacen("wss://", "ws://", 1);
    assert!(SignalClient::connect(&plain, &token).await.is_err());

    c.send(signal_request::Message::Leave(Default::default()))
        .await
        .unwrap();
    wait_participants(&server, 0).await;
    // Shutdown also ends the stalled handshake's task.
    assert_eq!(server.shutdown().await, Stats::default());
}

/// The next message `pick` accepts (others, such as participant updates, are skipped).
async fn next_matching<T>(
    c: &mut SignalClient,
    mut pick: impl FnMut(signal_response::Message) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let msg = c.recv(left).await.expect("the expected message");
        if let Some(found) = msg.message.and_then(&mut pick) {
            return found;
        }
    }
}

/// Track requests at the signaling level: an audio track is confirmed (a `TR_` sid,
/// Opus), while video, a repeated cid and too many tracks awaiting media are refused
/// with a `RequestResponse` saying why; a mute for an unknown track and subscription
/// changes are harmless, and a track whose media never came is not announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn track_requests_are_confirmed_or_refused_with_a_reason() {
    use proto::request_response::{Reason, Request};
    let server = start(|_| {}).await;
    let url = server.url();
    let (mut c, _) = SignalClient::join(&url, &server.token("r", "pub").unwrap())
        .await
        .unwrap();
    let add = |cid: &str, kind: proto::TrackType| {
        signal_request::Message::AddTrack(proto::AddTrackRequest {
            cid: cid.into(),
            name: "mic".into(),
            r#type: kind as i32,
            source: proto::TrackSource::Microphone as i32,
            ..Default::default()
        })
    };
    let refusal = |m| match m {
        signal_response::Message::RequestResponse(r) => Some(r),
        _ => None,
    };

    c.send(add("c1", proto::TrackType::Audio)).await.unwrap();
    let published = next_matching(&mut c, |m| match m {
        signal_response::Message::TrackPublished(p) => Some(p),
        _ => None,
    })
    .await;
    assert_eq!(published.cid, "c1");
    let info = published.track.unwrap();
    assert!(info.sid.starts_with("TR_"), "{info:?}");
    assert_eq!(info.r#type, proto::TrackType::Audio as i32);
    assert_eq!(info.mime_type, "audio/opus");
    assert_eq!(info.source, proto::TrackSource::Microphone as i32);

    c.send(add("c1", proto::TrackType::Audio)).await.unwrap();
    let r = next_matching(&mut c, refusal).await;
    assert_eq!(r.reason, Reason::DuplicateHandle as i32, "{r:?}");
    assert!(matches!(r.request, Some(Request::AddTrack(ref a)) if a.cid == "c1"));

    c.send(add("v1", proto::TrackType::Video)).await.unwrap();
    let r = next_matching(&mut c, refusal).await;
    assert_eq!(r.reason, Reason::UnsupportedType as i32, "{r:?}");
    assert!(r.message.contains("audio only"), "{}", r.message);

    // Eight may await their media (c1 to c8); the ninth is one too many.
    for i in 2..=9 {
        c.send(add(&format!("c{i}"), proto::TrackType::Audio))
            .await
            .unwrap();
    }
    let r = next_matching(&mut c, |m| match m {
        signal_response::Message::TrackPublished(_) => None,
        other => refusal(other),
    })
    .await;
    assert_eq!(r.reason, Reason::LimitExceeded as i32, "{r:?}");

    c.send(signal_request::Message::Mute(proto::MuteTrackRequest {
        sid: "TR_nope".into(),
        muted: true,
    }))
    .await
    .unwrap();
    c.send(signal_request::Message::Subscription(
        proto::UpdateSubscription {
            track_sids: vec!["TR_nope".into()],
            subscribe: false,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    c.send(signal_request::Message::PingReq(Ping {
        timestamp: 7,
        rtt: 0,
    }))
    .await
    .unwrap();
    let pong = next_matching(&mut c, |m| match m {
        signal_response::Message::PongResp(p) => Some(p),
        _ => None,
    })
    .await;
    assert_eq!(pong.last_ping_timestamp, 7);

    // Announced tracks without media are not in what others see.
    let (mut other, join) = SignalClient::join(&url, &server.token("r", "other").unwrap())
        .await
        .unwrap();
    let publisher = join
        .other_participants
        .iter()
        .find(|p| p.identity == "pub")
        .unwrap();
    assert!(publisher.tracks.is_empty(), "{publisher:?}");

    for client in [&mut c, &mut other] {
        client
            .send(signal_request::Message::Leave(
                proto::LeaveRequest::default(),
            ))
            .await
            .unwrap();
    }
    wait_empty(&server).await;
    assert_eq!(server.shutdown().await, Stats::default());
}
