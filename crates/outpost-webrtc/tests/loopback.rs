//! Two peer connections in one process on loopback, signalled by hand: negotiation,
//! trickled candidates (and the section they name), LiveKit's two data channels in
//! both directions, an ICE restart, and bad remote input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use outpost_webrtc::{ChannelEvent, ChannelKind, DataChannel, Peer, PeerConfig, PeerEvent};
use tokio::sync::mpsc::{self, UnboundedReceiver};

const PATIENCE: Duration = Duration::from_secs(20);

async fn peer() -> (Peer, UnboundedReceiver<PeerEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let p = Peer::new(&PeerConfig::default(), move |ev| {
        let _ = tx.send(ev);
    })
    .await
    .unwrap();
    (p, rx)
}

/// What one side has seen so far.
#[derive(Default)]
struct Seen {
    connected: bool,
    candidates: Vec<String>,
    channels: Vec<DataChannel>,
}

/// Relays candidates between the two until `done` holds for what each has seen.
async fn pump(
    a: &Peer,
    a_rx: &mut UnboundedReceiver<PeerEvent>,
    b: &Peer,
    b_rx: &mut UnboundedReceiver<PeerEvent>,
    seen: &mut (Seen, Seen),
    done: impl Fn(&Seen, &Seen) -> bool,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done(&seen.0, &seen.1) {
        tokio::select! {
            Some(ev) = a_rx.recv() => match ev {
                PeerEvent::LocalCandidate(c) => {
                    b.add_candidate(&c).await.unwrap();
                    seen.0.candidates.push(c);
                }
                PeerEvent::Connected => seen.0.connected = true,
                PeerEvent::RemoteChannel(dc) => seen.0.channels.push(dc),
                other => panic!("offerer: {other:?}"),
            },
            Some(ev) = b_rx.recv() => match ev {
                PeerEvent::LocalCandidate(c) => {
                    a.add_candidate(&c).await.unwrap();
                    seen.1.candidates.push(c);
                }
                PeerEvent::Connected => seen.1.connected = true,
                PeerEvent::RemoteChannel(dc) => seen.1.channels.push(dc),
                other => panic!("answerer: {other:?}"),
            },
            _ = tokio::time::sleep_until(deadline) => panic!("the pair did not get there in {PATIENCE:?}"),
        }
    }
}

async fn next_message(dc: &DataChannel) -> Vec<u8> {
    match tokio::time::timeout(PATIENCE, dc.recv()).await {
        Ok(Some(m)) => m.to_vec(),
        other => panic!("no message: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_peers_open_livekit_channels_and_exchange_messages() {
    let (offerer, mut o_rx) = peer().await;
    let (answerer, mut a_rx) = peer().await;
    let reliable = offerer
        .create_data_channel(ChannelKind::Reliable)
        .await
        .unwrap();
    let lossy = offerer
        .create_data_channel(ChannelKind::Lossy)
        .await
        .unwrap();

    let offer = offerer.offer(false).await.unwrap();
    assert!(!answerer.has_remote_description().await);
    let answer = answerer.answer(offer).await.unwrap();
    assert!(answerer.has_remote_description().await);
    offerer.apply_answer(answer).await.unwrap();

    let mut seen = (Seen::default(), Seen::default());
    pump(
        &offerer,
        &mut o_rx,
        &answerer,
        &mut a_rx,
        &mut seen,
        |o, a| o.connected && a.connected && a.channels.len() == 2,
    )
    .await;

    // webrtc 0.21 itself labels every local candidate `sdpMid: ""`; ours name the
    // data section of the description (the only one, mid "0").
    let all: Vec<&String> = seen.0.candidates.iter().chain(&seen.1.candidates).collect();
    assert!(!all.is_empty());
    for c in all {
        let v: serde_json::Value = serde_json::from_str(c).unwrap();
        assert_eq!(v["sdpMid"], "0", "{c}");
        assert_eq!(v["sdpMLineIndex"], 0, "{c}");
        assert!(
            v["candidate"].as_str().unwrap().starts_with("candidate:"),
            "{c}"
        );
    }

    // Channels the offerer created report Open; the answerer's arrive open.
    assert!(reliable.opened().await);
    assert!(lossy.opened().await);
    let mut kinds: Vec<ChannelKind> = seen.1.channels.iter().map(DataChannel::kind).collect();
    kinds.sort_by_key(|k| k.label());
    assert_eq!(kinds, [ChannelKind::Lossy, ChannelKind::Reliable]);
    let remote = |kind| {
        seen.1
            .channels
            .iter()
            .find(|c| c.kind() == kind)
            .unwrap()
            .clone()
    };
    let remote_reliable = remote(ChannelKind::Reliable);

    reliable.send(b"hello from the offerer").await.unwrap();
    assert_eq!(
        next_message(&remote_reliable).await,
        b"hello from the offerer"
    );
    remote_reliable.send(b"and back").await.unwrap();
    assert_eq!(next_message(&reliable).await, b"and back");
    // The other side acknowledges what it got: nothing stays outstanding.
    let acked = tokio::time::timeout(PATIENCE, async {
        while reliable.outstanding_bytes().await.unwrap() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(acked.is_ok(), "the message was never acknowledged");

    // Lossy is unreliable by design, but loopback does not lose packets.
    let remote_lossy = remote(ChannelKind::Lossy);
    lossy.try_send(b"lossy").await.unwrap();
    assert_eq!(next_message(&remote_lossy).await, b"lossy");

    // An ICE restart renegotiates the same connection; the channels keep working.
    let offer = offerer.offer(true).await.unwrap();
    let answer = answerer.answer(offer).await.unwrap();
    offerer.apply_answer(answer).await.unwrap();
    reliable.send(b"after the restart").await.unwrap();
    let got = tokio::time::timeout(PATIENCE, async {
        loop {
            tokio::select! {
                m = remote_reliable.recv() => return m.unwrap().to_vec(),
                Some(PeerEvent::LocalCandidate(c)) = o_rx.recv() => answerer.add_candidate(&c).await.unwrap(),
                Some(PeerEvent::LocalCandidate(c)) = a_rx.recv() => offerer.add_candidate(&c).await.unwrap(),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(got, b"after the restart");

    offerer.close().await;
    answerer.close().await;
    // Closing ends the channels for their readers.
    let ended = tokio::time::timeout(PATIENCE, async {
        loop {
            if reliable.next_event().await == ChannelEvent::Closed {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the reader never saw the channel close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_remote_input_is_a_remote_error_not_a_panic() {
    let (p, _rx) = peer().await;
    let e = p.answer("not an SDP".into()).await.unwrap_err();
    assert!(e.is_remote(), "{e}");
    let e = p.apply_answer("v=0\r\n".into()).await.unwrap_err();
    assert!(e.is_remote(), "{e}");
    let e = p.add_candidate("{\"sdpMid\":\"0\"}").await.unwrap_err();
    assert!(
        e.is_remote() && e.to_string().contains("candidate JSON"),
        "{e}"
    );
    // The end-of-candidates marker and TCP candidates are accepted and skipped, even
    // before a remote description exists.
    p.add_candidate(r#"{"candidate":"","sdpMid":"0","sdpMLineIndex":0}"#)
        .await
        .unwrap();
    p.add_candidate(
        r#"{"candidate":"candidate:1 1 tcp 1518280447 10.0.0.2 9 typ host tcptype active"}"#,
    )
    .await
    .unwrap();
    p.close().await;
}
