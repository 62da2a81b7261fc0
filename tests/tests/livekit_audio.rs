//! `outpost-livekit` audio tracks against the official Python SDK (`tests/py/lk_peer.py`)
//! through `outpost-room`, in network namespaces like `livekit_client.rs`: a tone we
//! publish is heard by the SDK at 440 Hz (its FFT), continuous, muted and unpublished
//! as it sees them; a tone the SDK publishes is decoded by us at 440 Hz (a Goertzel
//! scan), with its mute and unpublish seen as events.
//! Needs root, iproute2, libopus and the venv (see `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::time::Duration;

use outpost_livekit::{
    AudioSourceOptions, AudioStream, DataOptions, LocalAudioTrack, Room, RoomEvent, RoomEvents,
    RoomOptions,
};
use outpost_tests::lkclient::{self, Env, PyPeer, in_netns};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "lk-audio";
const RATE: f64 = 48_000.0;

struct Client {
    room: Room,
    events: RoomEvents,
    backlog: Vec<RoomEvent>,
}

impl Client {
    async fn connect(url: &str, identity: &str) -> Client {
        let token = lkclient::token(ROOM, identity, lkclient::DEV_SECRET).unwrap();
        let mut opts = RoomOptions::default();
        opts.auto_subscribe = true;
        let (room, events) = Room::connect(url, &token, opts)
            .await
            .unwrap_or_else(|e| panic!("connect {url}: {e}"));
        Client {
            room,
            events,
            backlog: Vec::new(),
        }
    }

    async fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&RoomEvent) -> bool,
    ) -> RoomEvent {
        if let Some(i) = self.backlog.iter().position(&mut pred) {
            return self.backlog.remove(i);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let ev = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out after {timeout:?} waiting for {what}"))
                .unwrap_or_else(|| panic!("event channel closed waiting for {what}"));
            if pred(&ev) {
                return ev;
            }
            self.backlog.push(ev);
        }
    }

    async fn cmd(&self, to: &str, cmd: Value) {
        self.room
            .send_data(
                cmd.to_string().into_bytes(),
                DataOptions::topic("cmd").to(to),
            )
            .await
            .unwrap();
    }

    async fn ask(&mut self, to: &str, cmd: Value, op: &str, timeout: Duration) -> Value {
        self.cmd(to, cmd).await;
        let from = to.to_owned();
        let ev = self
            .wait_for(&format!("{op} from {from}"), timeout, |ev| match ev {
                RoomEvent::Data(m)
                    if m.topic.as_deref() == Some("reply") && m.sender_identity == from =>
                {
                    serde_json::from_slice::<Value>(&m.payload)
                        .map(|v| v["op"] == op)
                        .unwrap_or(false)
                }
                _ => false,
            })
            .await;
        let RoomEvent::Data(m) = ev else {
            unreachable!()
        };
        serde_json::from_slice(&m.payload).unwrap()
    }

    /// Polls the peer's track events until `[what, identity, sid]` is among them.
    async fn peer_sees(&mut self, peer: &str, what: &str, identity: &str, sid: &str) {
        let want = json!([what, identity, sid]);
        for _ in 0..50 {
            let r = self
                .ask(
                    peer,
                    json!({"op": "track_events"}),
                    "track_events",
                    Duration::from_secs(5),
                )
                .await;
            if r["events"].as_array().unwrap().contains(&want) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("{peer} never saw {want}");
    }
}

/// Pushes a phase-continuous 440 Hz sine into `track`, 20 ms every 20 ms, until aborted.
fn spawn_tone(track: LocalAudioTrack) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n: u64 = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        loop {
            tick.tick().await;
            let frame: Vec<i16> = (0..960u64)
                .map(|i| {
                    let t = (n + i) as f64 / RATE;
                    (0.5 * 32767.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16
                })
                .collect();
            n += 960;
            if track.push_frame(&frame).await.is_err() {
                return;
            }
        }
    })
}

/// Power of `x` at `freq` (Goertzel).
fn goertzel(x: &[f64], freq: f64) -> f64 {
    let w = 2.0 * std::f64::consts::PI * freq / RATE;
    let c = 2.0 * w.cos();
    let (mut s1, mut s2) = (0.0, 0.0);
    for &v in x {
        let s = v + c * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    s1 * s1 + s2 * s2 - c * s1 * s2
}

/// The strongest frequency between 100 and 2000 Hz, in 1 Hz steps.
fn peak_hz(x: &[f64]) -> f64 {
    (100..2000)
        .map(f64::from)
        .map(|f| (f, goertzel(x, f)))
        .fold(
            (0.0, f64::MIN),
            |best, cur| if cur.1 > best.1 { cur } else { best },
        )
        .0
}

/// Reads `seconds` of audio from `stream`: the samples and how many frames were
/// concealed.
async fn record(stream: &mut AudioStream, seconds: f64) -> (Vec<f64>, usize, usize) {
    let mut samples = Vec::new();
    let (mut frames, mut concealed) = (0, 0);
    while (samples.len() as f64) < seconds * RATE {
        let f = tokio::time::timeout(Duration::from_secs(2), stream.recv())
            .await
            .expect("audio stalled for 2 s")
            .expect("the audio stream ended");
        assert_eq!((f.sample_rate, f.channels), (48_000, 1));
        frames += 1;
        concealed += usize::from(f.concealed);
        samples.extend(f.samples.iter().map(|&s| f64::from(s)));
    }
    (samples, frames, concealed)
}

#[test]
fn our_tone_is_heard_by_the_sdk_with_mute_unpublish_and_leave() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let env = Env::start(Path::new(BIN)).expect("namespaces and server");
    let _peer = PyPeer::start_with_env(
        &env.pair,
        &env.server.url,
        ROOM,
        "assistant",
        &[("LK_AUTO_SUBSCRIBE", "1")],
    )
    .expect("peer");
    let url = env.server.url.clone();
    let res = in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app").await;
        let track = c
            .room
            .publish_audio(AudioSourceOptions::default())
            .await
            .expect("publish");
        assert!(track.sid().starts_with("TR_"), "sid {}", track.sid());
        let tone = spawn_tone(track.clone());
        // Judge the steady state: the SDK subscribes at once (auto-subscribe), and its
        // first second or two of playout may be silence while the path settles.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let heard = c
            .ask(
                "assistant",
                json!({"op": "hear_tone", "from": "app", "seconds": 5}),
                "heard",
                Duration::from_secs(30),
            )
            .await;
        eprintln!("the SDK heard: {heard}");
        assert!(heard["error"].is_null(), "{heard}");
        assert_eq!(heard["sid"], track.sid());
        assert_eq!(heard["mime"], "audio/opus");
        let f = heard["freq_hz"].as_f64().unwrap();
        assert!((f - 440.0).abs() <= 440.0 * 0.02, "{heard}");
        assert!(heard["longest_gap_ms"].as_f64().unwrap() < 100.0, "{heard}");
        assert!(
            heard["max_arrival_gap_ms"].as_f64().unwrap() < 100.0,
            "{heard}"
        );
        assert!(heard["heard_s"].as_f64().unwrap() >= 4.0, "{heard}");

        track.set_muted(true).await.unwrap();
        assert!(track.is_muted());
        c.peer_sees("assistant", "muted", "app", track.sid()).await;
        track.set_muted(false).await.unwrap();
        c.peer_sees("assistant", "unmuted", "app", track.sid())
            .await;

        track.unpublish().await.unwrap();
        assert!(!track.is_published());
        c.peer_sees("assistant", "unpublished", "app", track.sid())
            .await;
        tone.await.unwrap(); // push_frame fails once unpublished: the task ends.
        assert!(track.unpublish().await.is_err());

        // Publish again, then leave: the SDK sees the track go with us.
        let again = c
            .room
            .publish_audio(AudioSourceOptions {
                name: "again".into(),
                channels: 2,
            })
            .await
            .expect("publish again");
        assert_ne!(again.sid(), track.sid());
        // The server announces a track once its first packets arrive.
        let stereo = again.clone();
        let tone2 = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tick.tick().await;
                if stereo.push_frame_f32(&[0.1; 1920]).await.is_err() {
                    return;
                }
            }
        });
        c.peer_sees("assistant", "published", "app", again.sid())
            .await;
        assert!(again.push_frame(&[0; 3]).await.is_err(), "odd stereo frame");
        // A second client asks the peer what it saw after we left.
        c.room.leave().await.unwrap();
        // Leaving unpublished the track: pushing fails, and the tone task ends.
        assert!(!again.is_published());
        assert!(again.push_frame(&[0; 1920]).await.is_err());
        tokio::time::timeout(Duration::from_secs(2), tone2)
            .await
            .expect("the tone task ends after leave")
            .unwrap();
        let mut d = Client::connect(&url, "observer").await;
        d.peer_sees("assistant", "unpublished", "app", again.sid())
            .await;
        d.room.leave().await.unwrap();
        Ok(())
    });
    if res.is_err() {
        eprintln!("server log:\n{}", env.server.proc.stderr());
    }
    res.unwrap();
}

#[test]
fn the_sdks_tone_is_decoded_with_mute_and_unpublish_events() {
    let env = Env::start(Path::new(BIN)).expect("namespaces and server");
    let _peer = PyPeer::start_with_env(
        &env.pair,
        &env.server.url,
        ROOM,
        "assistant",
        &[("LK_AUTO_SUBSCRIBE", "1")],
    )
    .expect("peer");
    let url = env.server.url.clone();
    let res = in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app").await;
        let r = c
            .ask(
                "assistant",
                json!({"op": "publish_tone"}),
                "tone_published",
                Duration::from_secs(15),
            )
            .await;
        let sid = r["sid"].as_str().unwrap().to_owned();
        let ev = c
            .wait_for(
                "TrackPublished",
                Duration::from_secs(10),
                |e| matches!(e, RoomEvent::TrackPublished { track, .. } if track.sid == sid),
            )
            .await;
        let RoomEvent::TrackPublished { participant, track } = ev else {
            unreachable!()
        };
        assert_eq!(participant.identity, "assistant");
        assert!(track.audio && !track.muted, "{track:?}");
        let ev = c
            .wait_for("AudioTrackSubscribed", Duration::from_secs(10), |e| {
                matches!(e, RoomEvent::AudioTrackSubscribed { track_sid, .. } if *track_sid == sid)
            })
            .await;
        let RoomEvent::AudioTrackSubscribed {
            participant,
            mut stream,
            ..
        } = ev
        else {
            unreachable!()
        };
        assert_eq!(participant.identity, "assistant");
        // Skip the first half second (the sender's start), then judge 3 s.
        record(&mut stream, 0.5).await;
        let (samples, frames, concealed) = record(&mut stream, 3.0).await;
        let f = peak_hz(&samples);
        let rms = (samples.iter().map(|v| v * v).sum::<f64>() / samples.len() as f64).sqrt();
        eprintln!("decoded: peak {f} Hz, rms {rms:.0}, {frames} frames, {concealed} concealed");
        assert!((f - 440.0).abs() <= 440.0 * 0.02, "peak at {f} Hz");
        assert!(rms > 5000.0, "too quiet: rms {rms}");
        assert!(
            concealed * 20 <= frames,
            "{concealed} of {frames} concealed"
        );

        c.ask(
            "assistant",
            json!({"op": "mute_tone"}),
            "tone_muted",
            Duration::from_secs(5),
        )
        .await;
        c.wait_for(
            "TrackMuted",
            Duration::from_secs(10),
            |e| matches!(e, RoomEvent::TrackMuted { track, .. } if track.sid == sid && track.muted),
        )
        .await;
        c.ask(
            "assistant",
            json!({"op": "stop_tone"}),
            "tone_stopped",
            Duration::from_secs(10),
        )
        .await;
        c.wait_for(
            "TrackUnpublished",
            Duration::from_secs(10),
            |e| matches!(e, RoomEvent::TrackUnpublished { track, .. } if track.sid == sid),
        )
        .await;
        // The stream ends with the track.
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            while stream.recv().await.is_some() {}
        })
        .await;
        assert!(ended.is_ok(), "the audio stream did not end");
        c.room.leave().await.unwrap();
        Ok(())
    });
    if res.is_err() {
        eprintln!("server log:\n{}", env.server.proc.stderr());
    }
    res.unwrap();
}

/// A full rejoin (the server restarts): our track is reported unpublished and stops
/// taking frames, the remote stream ends, and publishing again works.
#[test]
fn a_full_rejoin_tears_audio_down_and_allows_publishing_again() {
    let mut env = Env::start(Path::new(BIN)).expect("namespaces and server");
    let peer = PyPeer::start_with_env(
        &env.pair,
        &env.server.url,
        ROOM,
        "assistant",
        &[("LK_AUTO_SUBSCRIBE", "1")],
    )
    .expect("peer");
    let url = env.server.url.clone();
    let res = in_netns(&env.pair.client_ns.clone(), move || async move {
        let _peer = peer;
        let mut c = Client::connect(&url, "app").await;
        let track = c
            .room
            .publish_audio(AudioSourceOptions::default())
            .await
            .expect("publish");
        let tone = spawn_tone(track.clone());
        c.ask(
            "assistant",
            json!({"op": "publish_tone"}),
            "tone_published",
            Duration::from_secs(15),
        )
        .await;
        let ev = c
            .wait_for("AudioTrackSubscribed", Duration::from_secs(10), |e| {
                matches!(e, RoomEvent::AudioTrackSubscribed { .. })
            })
            .await;
        let RoomEvent::AudioTrackSubscribed { mut stream, .. } = ev else {
            unreachable!()
        };
        record(&mut stream, 0.5).await;

        // Kill the server and start a new one: no resume is possible.
        drop(std::mem::replace(
            &mut env.server.proc,
            outpost_tests::proc::Proc::spawn("placeholder", std::process::Command::new("true"))?,
        ));
        env.server = lkclient::Server::start(&env.pair, Path::new(BIN))?;
        let sid = track.sid().to_owned();
        c.wait_for(
            "LocalTrackUnpublished",
            Duration::from_secs(20),
            |e| matches!(e, RoomEvent::LocalTrackUnpublished { sid: s } if *s == sid),
        )
        .await;
        assert!(!track.is_published());
        tokio::time::timeout(Duration::from_secs(2), tone)
            .await
            .expect("the tone task ends once the track is gone")
            .unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            while stream.recv().await.is_some() {}
        })
        .await;
        assert!(ended.is_ok(), "the remote audio stream did not end");
        c.wait_for("Reconnected", Duration::from_secs(40), |e| {
            matches!(e, RoomEvent::Reconnected { resumed: false })
        })
        .await;
        let again = c
            .room
            .publish_audio(AudioSourceOptions::default())
            .await
            .expect("publish after the rejoin");
        assert!(again.is_published());
        c.room.leave().await.unwrap();
        drop(env); // the restarted server lives until here
        Ok(())
    });
    res.unwrap();
}
