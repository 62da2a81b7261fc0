//! Audio between two peer connections in one process on loopback: an Opus track sent by
//! one arrives as a remote track at the other, named by its `a=msid`, with its packets'
//! payloads, order and the sender's SSRC and payload type; removing the track stops it;
//! a peer without audio rejects the section.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use outpost_webrtc::media::{OPUS_PAYLOAD_TYPE, sending_track_ids};
use outpost_webrtc::{Peer, PeerConfig, PeerEvent, RemoteTrack, RtpPacket};
use tokio::sync::mpsc::{self, UnboundedReceiver};

const PATIENCE: Duration = Duration::from_secs(20);

async fn peer(audio: bool) -> (Peer, UnboundedReceiver<PeerEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = PeerConfig {
        audio,
        ..PeerConfig::default()
    };
    let p = Peer::new(&config, move |ev| {
        let _ = tx.send(ev);
    })
    .await
    .unwrap();
    (p, rx)
}

/// Relays candidates until the answerer reports a remote track and both are connected.
async fn connect_and_get_track(
    a: &Peer,
    a_rx: &mut UnboundedReceiver<PeerEvent>,
    b: &Peer,
    b_rx: &mut UnboundedReceiver<PeerEvent>,
    send: impl AsyncFn(),
) -> RemoteTrack {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (mut a_up, mut b_up, mut track) = (false, false, None);
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while !(a_up && b_up && track.is_some()) {
        tokio::select! {
            Some(ev) = a_rx.recv() => match ev {
                PeerEvent::LocalCandidate(c) => b.add_candidate(&c).await.unwrap(),
                PeerEvent::Connected => a_up = true,
                other => panic!("sender: {other:?}"),
            },
            Some(ev) = b_rx.recv() => match ev {
                PeerEvent::LocalCandidate(c) => a.add_candidate(&c).await.unwrap(),
                PeerEvent::Connected => b_up = true,
                PeerEvent::RemoteTrack(t) => track = Some(t),
                other => panic!("receiver: {other:?}"),
            },
            // The remote track shows up with its first packet: keep sending.
            _ = tick.tick() => if a_up { send().await },
            _ = tokio::time::sleep_until(deadline) => panic!("no track in {PATIENCE:?}"),
        }
    }
    track.unwrap()
}

fn packet(seq: u16) -> RtpPacket {
    RtpPacket {
        payload_type: 96,
        sequence_number: seq,
        timestamp: u32::from(seq) * 960,
        ssrc: 1234,
        marker: false,
        payload: Bytes::from(vec![seq as u8; 40]),
        audio_level: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opus_track_arrives_with_its_packets_and_stops_when_removed() {
    let (sender, mut s_rx) = peer(true).await;
    let (receiver, mut r_rx) = peer(true).await;
    let local = sender.add_audio_track("PA_x|TR_y", "TR_y").await.unwrap();
    let offer = sender.offer(false).await.unwrap();
    assert!(offer.contains("opus/48000/2"), "{offer}");
    assert_eq!(sending_track_ids(&offer), vec!["TR_y".to_owned()]);
    let answer = receiver.answer(offer).await.unwrap();
    sender.apply_answer(answer).await.unwrap();

    let seq = std::sync::atomic::AtomicU16::new(100);
    let track = connect_and_get_track(&sender, &mut s_rx, &receiver, &mut r_rx, async || {
        let n = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = local.write(&packet(n)).await;
    })
    .await;
    assert_eq!(track.kind(), outpost_webrtc::MediaKind::Audio);
    assert_eq!(track.track_id(), "TR_y");
    assert_eq!(track.stream_id(), "PA_x|TR_y");

    // From here on, every packet arrives in order with its payload, carrying the
    // local track's SSRC and the Opus payload type.
    let first = seq.load(std::sync::atomic::Ordering::Relaxed) + 10;
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        while got.len() < 20 {
            let p = tokio::time::timeout(PATIENCE, track.recv())
                .await
                .expect("a packet in time")
                .expect("the track is open");
            if p.sequence_number >= first {
                got.push(p);
            }
        }
        (track, got)
    });
    for n in first - 10..first + 20 {
        local.write(&packet(n)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (track, got) = reader.await.unwrap();
    for (i, p) in got.iter().enumerate() {
        let n = first + u16::try_from(i).unwrap();
        assert_eq!(p.sequence_number, n);
        assert_eq!(p.payload, Bytes::from(vec![n as u8; 40]));
        assert_eq!(p.ssrc, local.ssrc());
        assert_eq!(p.payload_type, OPUS_PAYLOAD_TYPE);
    }

    // Removed and renegotiated: the offer no longer sends it.
    sender.remove_track(&local).await.unwrap();
    let offer = sender.offer(false).await.unwrap();
    assert!(sending_track_ids(&offer).is_empty(), "{offer}");
    let answer = receiver.answer(offer).await.unwrap();
    sender.apply_answer(answer).await.unwrap();
    drop(track);
    sender.close().await;
    receiver.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_audio_rejects_the_section() {
    let (sender, _s_rx) = peer(true).await;
    let (receiver, _r_rx) = peer(false).await;
    sender.add_audio_track("s", "t").await.unwrap();
    let offer = sender.offer(false).await.unwrap();
    let answer = receiver.answer(offer).await.unwrap();
    assert!(answer.contains("m=audio 0 "), "{answer}");
    sender.close().await;
    receiver.close().await;
}
