//! Which ICE paths a peer connection offers. ICE over TCP (RFC 6544) between two peer
//! connections on loopback: one side listens on TCP only (its passive candidate stands in
//! for livekit-server's port 7881), the other dials it; without [`PeerConfig::ice_tcp`]
//! on the dialling side there is no path at all. A relay-only connection
//! ([`PeerConfig::relay_only`], livekit-server's `force_relay`) signals no direct
//! candidate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use outpost_webrtc::{ChannelKind, IceServer, PathKind, Peer, PeerConfig, PeerEvent};
use tokio::sync::mpsc::{self, UnboundedReceiver};

const PATIENCE: Duration = Duration::from_secs(20);

async fn peer(config: PeerConfig) -> (Peer, UnboundedReceiver<PeerEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let p = Peer::new(&config, move |ev| {
        let _ = tx.send(ev);
    })
    .await
    .unwrap();
    (p, rx)
}

/// The listening side: TCP only, no UDP socket at all.
fn tcp_only() -> PeerConfig {
    PeerConfig {
        ice_udp: false,
        ice_tcp: true,
        ..PeerConfig::default()
    }
}

/// The offerer creates `_reliable` and negotiates with the answerer; returns the channel.
async fn negotiate(offerer: &Peer, answerer: &Peer) -> outpost_webrtc::DataChannel {
    let reliable = offerer
        .create_data_channel(ChannelKind::Reliable)
        .await
        .unwrap();
    let offer = offerer.offer(false).await.unwrap();
    let answer = answerer.answer(offer).await.unwrap();
    offerer.apply_answer(answer).await.unwrap();
    reliable
}

/// Trickles candidates both ways for up to `within`; returns whether both sides
/// reported `Connected`, and every candidate line each side signalled.
async fn pump(
    a: &Peer,
    a_rx: &mut UnboundedReceiver<PeerEvent>,
    b: &Peer,
    b_rx: &mut UnboundedReceiver<PeerEvent>,
    within: Duration,
) -> (bool, Vec<String>, Vec<String>) {
    let (mut a_up, mut b_up) = (false, false);
    let (mut a_cands, mut b_cands) = (Vec::new(), Vec::new());
    let deadline = tokio::time::Instant::now() + within;
    while !(a_up && b_up) {
        tokio::select! {
            Some(ev) = a_rx.recv() => match ev {
                PeerEvent::LocalCandidate(c) => {
                    b.add_candidate(&c).await.unwrap();
                    a_cands.push(c);
                }
                PeerEvent::Connected => a_up = true,
                _ => {}
            },
            Some(ev) = b_rx.recv() => match ev {
                PeerEvent::LocalCandidate(c) => {
                    a.add_candidate(&c).await.unwrap();
                    b_cands.push(c);
                }
                PeerEvent::Connected => b_up = true,
                _ => {}
            },
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    (a_up && b_up, a_cands, b_cands)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_only_peer_is_reached_over_ice_tcp() {
    let (offerer, mut o_rx) = peer(PeerConfig {
        ice_tcp: true,
        ..PeerConfig::default()
    })
    .await;
    let (answerer, mut a_rx) = peer(tcp_only()).await;
    let reliable = negotiate(&offerer, &answerer).await;

    let (up, _, answerer_cands) = pump(&offerer, &mut o_rx, &answerer, &mut a_rx, PATIENCE).await;
    assert!(up, "no ICE/TCP connection within {PATIENCE:?}");
    assert!(
        answerer_cands
            .iter()
            .all(|c| c.contains(" tcp ") && !c.contains(" udp ")),
        "the answerer signalled a UDP candidate: {answerer_cands:?}"
    );
    assert!(
        answerer_cands.iter().any(|c| c.contains("tcptype passive")),
        "{answerer_cands:?}"
    );

    let report = offerer.path_report().await;
    assert!(
        report
            .iter()
            .any(|p| p.kind == PathKind::Tcp && p.worked && p.outcome == "connected"),
        "{report:?}"
    );
    for side in [&offerer, &answerer] {
        let path = side.selected_path().await.expect("a selected pair");
        assert_eq!(path.kind, PathKind::Tcp, "{path:?}");
        assert!(!path.kind.is_relayed());
    }

    // Data both ways over the TCP path, a message larger than one RFC 4571 frame's
    // worth of a TCP read (4 KiB) included.
    assert!(reliable.opened().await);
    let remote = loop {
        match tokio::time::timeout(PATIENCE, a_rx.recv()).await {
            Ok(Some(PeerEvent::RemoteChannel(dc))) => break dc,
            Ok(Some(_)) => {}
            other => panic!("no remote channel: {other:?}"),
        }
    };
    let big: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
    reliable.send(b"over tcp").await.unwrap();
    reliable.send(&big).await.unwrap();
    let got = tokio::time::timeout(PATIENCE, remote.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got[..], b"over tcp");
    let got = tokio::time::timeout(PATIENCE, remote.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.to_vec(), big);
    remote.send(b"and back").await.unwrap();
    let got = tokio::time::timeout(PATIENCE, reliable.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got[..], b"and back");

    offerer.close().await;
    answerer.close().await;
}

/// The old behaviour, kept as the control: a UDP-only peer skips the TCP candidates
/// and never reaches a TCP-only one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ice_tcp_a_tcp_only_peer_is_unreachable() {
    let (offerer, mut o_rx) = peer(PeerConfig::default()).await;
    let (answerer, mut a_rx) = peer(tcp_only()).await;
    let _reliable = negotiate(&offerer, &answerer).await;
    let (up, _, _) = pump(
        &offerer,
        &mut o_rx,
        &answerer,
        &mut a_rx,
        Duration::from_secs(4),
    )
    .await;
    assert!(!up, "connected without any common transport");
    assert!(offerer.selected_path().await.is_none());
    offerer.close().await;
    answerer.close().await;
}

/// The candidates `config` signals within `within` of its first offer.
async fn gathered(config: PeerConfig, within: Duration) -> Vec<String> {
    let (p, mut rx) = peer(config).await;
    let _dc = p.create_data_channel(ChannelKind::Reliable).await.unwrap();
    p.offer(false).await.unwrap();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        if let PeerEvent::LocalCandidate(c) = ev {
            out.push(c);
        }
    }
    p.close().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_only_connection_signals_no_direct_candidate() {
    let both = PeerConfig {
        ice_tcp: true,
        ..PeerConfig::default()
    };
    let direct = gathered(both.clone(), Duration::from_secs(2)).await;
    assert!(
        direct.iter().any(|c| c.contains(" udp ")) && direct.iter().any(|c| c.contains(" tcp ")),
        "the control gathers host candidates over UDP and TCP: {direct:?}"
    );
    // `webrtc` refuses relay-only without a TURN server; this one is a loopback port
    // nothing listens on (no traffic leaves the machine), so no relay candidate either.
    let relay = gathered(
        PeerConfig {
            relay_only: true,
            ice_servers: vec![IceServer {
                urls: vec!["turn:127.0.0.1:9?transport=udp".into()],
                username: "u".into(),
                credential: "c".into(),
            }],
            ..both
        },
        Duration::from_secs(2),
    )
    .await;
    assert!(relay.is_empty(), "relay only: {relay:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ice_servers_can_be_replaced_on_a_live_connection() {
    let (p, _rx) = peer(PeerConfig::default()).await;
    let turn = IceServer {
        urls: vec![
            "turn:10.0.0.1:3478?transport=udp".into(),
            "turns:turn.example:443?transport=tcp".into(),
        ],
        username: "u".into(),
        credential: "c".into(),
    };
    p.set_ice_servers(&[turn]).await.unwrap();
    let bad = IceServer {
        urls: vec!["turn:10.0.0.1:3478".into()],
        ..IceServer::default()
    };
    assert!(
        p.set_ice_servers(&[bad]).await.is_err(),
        "a TURN server without credentials is refused"
    );
    p.close().await;
}
