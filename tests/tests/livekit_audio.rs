//! `outpost-livekit` audio tracks against the official Python SDK (`tests/py/lk_peer.py`)
//! through both servers (`outpost-room` and livekit-server), in network namespaces like `livekit_client.rs`: a tone we
//! publish is heard by the SDK at 440 Hz (its FFT), continuous, muted and unpublished
//! as it sees them; a tone the SDK publishes is decoded by us at 440 Hz (a Goertzel
//! scan), with its mute and unpublish seen as events. Speech from espeak-ng goes both
//! ways and is compared with the original (normalised cross-correlation, see
//! `SPEECH_NCC`), with the same speech between two SDK peers reported alongside; and
//! with 5 % of the UDP packets to the client dropped on the veth, the SDK's tone still
//! decodes without a gap.
//! Needs root, iproute2, nftables, espeak-ng, libopus and the venv (see
//! `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::time::Duration;

use outpost_livekit::{
    AudioSourceOptions, AudioStream, LocalAudioTrack, Room, RoomEvent, RoomOptions,
};
use outpost_tests::lkclient::{self, Env, PyPeer, in_netns, spawn_level, spawn_tone};
use outpost_tests::server::ServerKind;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "lk-audio";
const RATE: f64 = 48_000.0;
/// Rounds of [`an_unmute_sent_right_after_the_publish_is_not_lost`].
const UNMUTE_ROUNDS: usize = 12;
/// Rounds of [`a_track_published_again_and_again_is_heard_each_time`].
const REPUBLISH_ROUNDS: usize = 15;
/// Rounds of either against outpost-room. The races they repeat are livekit-server's (a
/// mute request lost while it applies an offer, a section reused); outpost-room has
/// neither, so a few rounds check the client's side of the same path (each round costs
/// about 2 s of CI).
const ROOM_ROUNDS: usize = 4;

outpost_tests::both_servers!(
    our_tone_is_heard_by_the_sdk_with_mute_unpublish_and_leave,
    a_track_is_announced_and_subscribed_before_its_first_packet,
    the_sdks_tone_is_decoded_with_mute_and_unpublish_events,
    a_full_rejoin_tears_audio_down_and_allows_publishing_again,
    speech_round_trips_both_ways_with_high_correlation,
    five_percent_loss_on_the_veth_still_decodes_without_gaps,
    tracks_published_and_unpublished_in_a_burst_need_no_rejoin,
    a_track_the_server_refuses_fails_at_once_with_its_reason,
    an_unmute_sent_right_after_the_publish_is_not_lost,
    a_track_published_again_and_again_is_heard_each_time,
);

/// Issue 25, finding 6: livekit-server computes active speakers from RFC 6464's audio
/// level header extension (it never decodes audio), which Outpost did not send, so the
/// user never showed as speaking. Now the official SDK in the room sees Outpost become
/// an active speaker while its tone plays and stop being one when it sends silence.
/// livekit-server only: outpost-room sends no active-speaker updates.
#[test]
fn our_microphone_makes_us_an_active_speaker_on_livekit_server() {
    let (env, _peer) = with_listener(ServerKind::LiveKit);
    let url = env.server.url.clone();
    let res = in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app").await;
        let track = c
            .room
            .publish_audio(AudioSourceOptions::default())
            .await
            .expect("publish");
        let has_us = |sets: &[Vec<String>]| sets.iter().flatten().any(|who| who == "app");
        // Silence first: never a speaker.
        let quiet = spawn_level(track.clone(), 0.0);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let before = speaker_changes(&mut c).await;
        eprintln!("while silent: {before:?}");
        assert!(!has_us(&before), "silence made us a speaker: {before:?}");
        quiet.abort();
        // The tone: a speaker within a few seconds.
        let tone = spawn_tone(track.clone());
        let mut heard = Vec::new();
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            heard = speaker_changes(&mut c).await;
            if has_us(&heard) {
                break;
            }
        }
        eprintln!("while the tone plays: {heard:?}");
        assert!(has_us(&heard), "the SDK never saw us speak: {heard:?}");
        tone.abort();
        // Silence again: the server says we stopped (an update without us).
        let _quiet = spawn_level(track.clone(), 0.0);
        let mut last = None;
        for _ in 0..16 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if let Some(set) = speaker_changes(&mut c).await.pop() {
                let stopped = !set.iter().any(|who| who == "app");
                last = Some(set);
                if stopped {
                    break;
                }
            }
        }
        eprintln!("after the tone: {last:?}");
        assert!(
            last.as_ref()
                .is_some_and(|set| !set.iter().any(|who| who == "app")),
            "still a speaker in silence: {last:?}"
        );
        c.room.leave().await.unwrap();
        anyhow::Ok(())
    });
    if let Err(e) = res {
        panic!("{e:#}\n--- server log ---\n{}", env.server.proc.stderr());
    }
}

/// Runs `make`'s future in `env`'s client namespace; when it fails, prints the server's
/// log and panics.
fn in_client_ns<F, Fut>(env: &Env, make: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let res = in_netns(&env.pair.client_ns, make);
    if res.is_err() {
        eprintln!("server log:\n{}", env.server.proc.stderr());
    }
    res.unwrap();
}

struct Client {
    room: Room,
    events: lkclient::Events,
}

impl Client {
    async fn connect(url: &str, identity: &str) -> Client {
        let mut opts = RoomOptions::default();
        opts.auto_subscribe = true;
        let (room, events) = lkclient::join(url, ROOM, identity, opts).await;
        Client { room, events }
    }

    async fn cmd(&self, to: &str, cmd: Value) {
        lkclient::send_cmd(&self.room, to, &cmd).await;
    }

    async fn ask(&mut self, to: &str, cmd: Value, op: &str, timeout: Duration) -> Value {
        self.cmd(to, cmd).await;
        self.events.reply(to, op, timeout).await
    }

    /// Asks the SDK peer to record our track `sid` for `seconds` and requires it to hear
    /// our 440 Hz tone (±3 %) on that track; its report.
    async fn sdk_hears(&mut self, sid: &str, seconds: f64) -> Value {
        let heard = self
            .ask(
                "assistant",
                json!({"op": "hear_tone", "from": "app", "sid": sid, "seconds": seconds}),
                "heard",
                Duration::from_secs(30),
            )
            .await;
        assert!(heard["error"].is_null(), "{heard}");
        assert_eq!(heard["sid"], sid, "{heard}");
        let f = heard["freq_hz"].as_f64().unwrap();
        assert!((f - 440.0).abs() <= 440.0 * 0.03, "{heard}");
        heard
    }

    /// Polls the peer's track events until `[what, identity, sid]` is among them. A
    /// question unanswered within 5 s is asked again: a client that has just joined can
    /// send it before the peer's SDK knows the sender (seen once: the observer's first
    /// question after joining went unanswered).
    async fn peer_sees(&mut self, peer: &str, what: &str, identity: &str, sid: &str) {
        let want = json!([what, identity, sid]);
        for _ in 0..50 {
            self.cmd(peer, json!({"op": "track_events"})).await;
            let reply = self
                .events
                .reply(peer, "track_events", Duration::from_secs(600));
            if let Ok(r) = tokio::time::timeout(Duration::from_secs(5), reply).await {
                if r["events"].as_array().unwrap().contains(&want) {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("{peer} never saw {want}");
    }
}

/// The active-speaker sets the SDK peer was sent since the last ask, oldest first.
async fn speaker_changes(c: &mut Client) -> Vec<Vec<String>> {
    let r = c
        .ask(
            "assistant",
            json!({"op": "speakers"}),
            "speakers",
            Duration::from_secs(10),
        )
        .await;
    serde_json::from_value(r["changes"].clone()).unwrap_or_else(|e| panic!("{r}: {e}"))
}

/// Namespaces, a server of `kind`, and the official-SDK peer "assistant" that subscribes
/// to every track (`lk_peer.py` with auto-subscribe): what the tests of our tracks start
/// with.
fn with_listener(kind: ServerKind) -> (Env, PyPeer) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let peer = PyPeer::start_with_env(
        &env.pair,
        &env.server.url,
        ROOM,
        "assistant",
        &[("LK_AUTO_SUBSCRIBE", "1")],
    )
    .expect("peer");
    (env, peer)
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
        // Time the sender skipped (DTX) is silence on the stream's timeline.
        samples.extend(std::iter::repeat_n(0.0, f.skipped_before));
        samples.extend(f.samples.iter().map(|&s| f64::from(s)));
    }
    (samples, frames, concealed)
}

/// livekit-server's operator takes away our permission to publish mid-call (RoomService
/// `UpdateParticipant`, which outpost-room does not have): the server unpublishes our
/// track, we stop sending it and say so (`LocalTrackUnpublished { by_server: true }`),
/// and publishing again is refused at once.
#[test]
fn a_track_the_server_unpublishes_stops_and_is_reported() {
    operator_acts(
        &["revoke_publish", ROOM, "app"],
        |url, published| async move {
            let mut c = Client::connect(&url, "app").await;
            let track = c.room.publish_audio(AudioSourceOptions::default()).await?;
            let tone = spawn_tone(track.clone());
            c.peer_sees("assistant", "published", "app", track.sid())
                .await;
            let sid = track.sid().to_owned();
            published.send(sid.clone())?;
            let ev = c
                .events
                .wait_for(
                    "the server's unpublish",
                    Duration::from_secs(20),
                    |e| matches!(e, RoomEvent::LocalTrackUnpublished { sid: s, .. } if *s == sid),
                )
                .await;
            assert!(
                matches!(
                    ev,
                    RoomEvent::LocalTrackUnpublished {
                        by_server: true,
                        ..
                    }
                ),
                "{ev:?}"
            );
            c.events
                .wait_for("our new permissions", Duration::from_secs(5), |e| {
                    matches!(
                        e,
                        RoomEvent::LocalPermissionsChanged {
                            can_publish: false,
                            ..
                        }
                    )
                })
                .await;
            assert!(!track.is_published());
            // The tone task ends: pushing into an unpublished track fails.
            tokio::time::timeout(Duration::from_secs(3), tone).await??;
            c.peer_sees("assistant", "unpublished", "app", &sid).await;
            let err = c
                .room
                .publish_audio(AudioSourceOptions::default())
                .await
                .expect_err("no permission to publish any more");
            assert!(
                matches!(&err, outpost_livekit::Error::Refused { reason, .. } if reason == "NOT_ALLOWED"),
                "{err:?}"
            );
            c.room.leave().await?;
            Ok(())
        },
    );
}

/// livekit-server with the SDK listener: runs `client` in the client namespace and, once
/// it sends the sid of the track it published, has the room's operator act on it
/// (`room_admin.py` with `admin`, where `SID` stands for that sid).
fn operator_acts<F, Fut>(admin: &[&str], client: F)
where
    F: FnOnce(String, std::sync::mpsc::Sender<String>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let (env, _peer) = with_listener(ServerKind::LiveKit);
    let url = env.server.url.clone();
    let pair = &env.pair;
    let res = std::thread::scope(|scope| {
        let (published_tx, published_rx) = std::sync::mpsc::channel::<String>();
        let ns = pair.client_ns.clone();
        let handle = scope.spawn(move || in_netns(&ns, move || client(url, published_tx)));
        let sid = published_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the track was published");
        let args: Vec<&str> = admin
            .iter()
            .map(|a| if *a == "SID" { sid.as_str() } else { a })
            .collect();
        room_admin(pair, &env.server.url, &args);
        handle.join().expect("client thread")
    });
    if res.is_err() {
        eprintln!("server log:\n{}", env.server.proc.stderr());
    }
    res.unwrap();
}

/// Runs `tests/py/room_admin.py` with `args` (what a room's operator does through
/// livekit-server's API) in the server's namespace; it must succeed.
fn room_admin(pair: &lkclient::NsPair, server_url: &str, args: &[&str]) {
    let py = outpost_tests::python::python().unwrap();
    let out = pair
        .server_command(&py)
        .arg(outpost_tests::python::scripts_dir().join("room_admin.py"))
        .args(args)
        .current_dir(outpost_tests::python::scripts_dir())
        .env("LK_URL", server_url)
        .env("PYTHONWARNINGS", "ignore")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "room_admin.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// livekit-server only (outpost-room has no room service API): the room's operator mutes
/// our track. We follow it (`LocalTrackMutedByServer`, the track muted here and nothing
/// sent), the SDK sees it muted, and our own unmute brings the tone back.
#[test]
fn a_mute_by_the_rooms_operator_is_followed_until_we_unmute() {
    operator_acts(
        &["mute_track", ROOM, "app", "SID"],
        |url, published| async move {
            let mut c = Client::connect(&url, "app").await;
            let track = c.room.publish_audio(AudioSourceOptions::default()).await?;
            let tone = spawn_tone(track.clone());
            c.peer_sees("assistant", "published", "app", track.sid())
                .await;
            let sid = track.sid().to_owned();
            published.send(sid.clone())?;
            c.events
                .wait_for(
                    "the server's mute",
                    Duration::from_secs(20),
                    |e| matches!(e, RoomEvent::LocalTrackMutedByServer { sid: s } if *s == sid),
                )
                .await;
            assert!(track.is_muted());
            c.peer_sees("assistant", "muted", "app", &sid).await;
            track.set_muted(false).await?;
            c.peer_sees("assistant", "unmuted", "app", &sid).await;
            c.sdk_hears(&sid, 2.0).await;
            tone.abort();
            c.room.leave().await?;
            Ok(())
        },
    );
}

/// A token that may not publish: the server refuses our track (livekit-server with a
/// `RequestResponse` of request id 0 naming the track) and `publish_audio` says so at
/// once, instead of waiting out its timeout.
fn a_track_the_server_refuses_fails_at_once_with_its_reason(kind: ServerKind) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let url = env.server.url.clone();
    in_client_ns(&env, move || async move {
        let token =
            livekit_token::AccessToken::with_api_key(lkclient::DEV_KEY, lkclient::DEV_SECRET)
                .with_identity("listener")
                .with_ttl(Duration::from_secs(600))
                .with_grants(livekit_token::VideoGrants {
                    room_join: true,
                    room: ROOM.to_owned(),
                    can_publish: Some(false),
                    ..Default::default()
                })
                .to_jwt()?;
        let (room, _events) = Room::connect(&url, &token, RoomOptions::default()).await?;
        let started = std::time::Instant::now();
        let err = room
            .publish_audio(AudioSourceOptions::default())
            .await
            .expect_err("a listener cannot publish");
        eprintln!("refused after {:?}: {err}", started.elapsed());
        assert!(
            matches!(&err, outpost_livekit::Error::Refused { reason, .. } if reason == "NOT_ALLOWED"),
            "{err:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        room.leave().await?;
        Ok(())
    });
}

/// Three tracks published and two unpublished back to back: five renegotiations of the
/// publisher, each asked for before the last answer is in. They are sent one at a time
/// (an offer waits for the previous answer; a stale answer is ignored), so the link
/// stays up, nothing rejoins, and the SDK hears the track that is left.
fn tracks_published_and_unpublished_in_a_burst_need_no_rejoin(kind: ServerKind) {
    let (env, _peer) = with_listener(kind);
    let url = env.server.url.clone();
    in_client_ns(&env, move || async move {
        let mut c = Client::connect(&url, "app").await;
        let room = c.room.clone();
        let publish = |name: &str| {
            let room = room.clone();
            let name = name.to_owned();
            async move {
                room.publish_audio(AudioSourceOptions {
                    name,
                    channels: 1,
                    muted: false,
                })
                .await
            }
        };
        let (a, b, d) = tokio::join!(publish("a"), publish("b"), publish("d"));
        let (a, b, d) = (a.expect("a"), b.expect("b"), d.expect("d"));
        let (ua, ub) = tokio::join!(a.unpublish(), b.unpublish());
        ua.expect("unpublish a");
        ub.expect("unpublish b");
        let tone = spawn_tone(d.clone());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let heard = c
            .ask(
                "assistant",
                json!({"op": "hear_tone", "from": "app", "sid": d.sid(), "seconds": 3}),
                "heard",
                Duration::from_secs(30),
            )
            .await;
        eprintln!("the SDK heard: {heard}");
        assert!(heard["error"].is_null(), "{heard}");
        assert_eq!(heard["sid"], d.sid());
        let f = heard["freq_hz"].as_f64().unwrap();
        assert!((f - 440.0).abs() <= 440.0 * 0.02, "{heard}");
        let rejoins: Vec<&RoomEvent> = c
            .events
            .backlog
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    RoomEvent::Reconnecting { .. } | RoomEvent::Reconnected { .. }
                )
            })
            .collect();
        assert!(rejoins.is_empty(), "the link went down: {rejoins:?}");
        assert!(d.is_published() && !a.is_published() && !b.is_published());
        tone.abort();
        c.room.leave().await.unwrap();
        Ok(())
    });
}

fn our_tone_is_heard_by_the_sdk_with_mute_unpublish_and_leave(kind: ServerKind) {
    let (env, _peer) = with_listener(kind);
    let url = env.server.url.clone();
    in_client_ns(&env, move || async move {
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
                muted: false,
            })
            .await
            .expect("publish again");
        assert_ne!(again.sid(), track.sid());
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
}

/// The voice hub publishes the microphone again after a full rejoin and, with the talk
/// key held, mutes and unmutes it at once: both requests reach the server as it applies
/// the offer that carries the track. livekit-server v1.13.5 can lose such a request (it
/// answers NOT_FOUND while it moves the track from pending to published), which left the
/// track muted at the server and nothing of it forwarded (CI, the app's voice rejoin
/// test). Each round publishes a track, mutes and unmutes it at once, then plays a tone:
/// the SDK must hear every one. The server loses one of the two requests rarely (once
/// in 14 rounds on a loaded machine, once in none of 40 with the single unmute a track
/// published muted needs), so this seldom fails without the repair; the engine's unit
/// test `a_mute_state_the_server_lost_is_told_again_once` pins the rule itself
/// (docs/LIVEKIT_CLIENT.md, "Mute").
fn an_unmute_sent_right_after_the_publish_is_not_lost(kind: ServerKind) {
    // Kept published (muted) after each round: publishing again and again after
    // unpublishing is the next test's business.
    publish_rounds(
        kind,
        "OUTPOST_UNMUTE_ROUNDS",
        UNMUTE_ROUNDS,
        Round::MuteUnmute,
    );
}

/// Voice switched off and on: a track unpublished, then a new one published, again and
/// again on one connection. Each must be announced and heard. When the publisher reused
/// the section an unpublished track left (webrtc-rs's `add_track`), livekit-server lost
/// one new track in about fourteen ("could not get mid for track"): never announced,
/// never heard.
fn a_track_published_again_and_again_is_heard_each_time(kind: ServerKind) {
    publish_rounds(
        kind,
        "OUTPOST_REPUBLISH_ROUNDS",
        REPUBLISH_ROUNDS,
        Round::Unpublish,
    );
}

/// What a round of [`publish_rounds`] does around its tone.
#[derive(Clone, Copy, PartialEq)]
enum Round {
    /// Mute and unmute the new track at once (as the voice hub did before it published
    /// muted), and mute it once heard.
    MuteUnmute,
    /// Unpublish the track once heard.
    Unpublish,
}

/// `default` rounds against livekit-server, [`ROOM_ROUNDS`] against outpost-room (the
/// environment variable `var` may say how many) on one connection: publish a track, play
/// a tone into it, and require the SDK to hear it at 440 Hz on that track.
fn publish_rounds(kind: ServerKind, var: &'static str, default: usize, round_kind: Round) {
    let default = match kind {
        ServerKind::LiveKit => default,
        ServerKind::Room => ROOM_ROUNDS,
    };
    let (env, _peer) = with_listener(kind);
    let url = env.server.url.clone();
    in_client_ns(&env, move || async move {
        let mut c = Client::connect(&url, "app").await;
        let rounds: usize = std::env::var(var)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(default);
        for round in 0..rounds {
            let track = c
                .room
                .publish_audio(AudioSourceOptions {
                    name: format!("mic-{round}"),
                    channels: 1,
                    muted: false,
                })
                .await
                .expect("publish");
            if round_kind == Round::MuteUnmute {
                // Both requests reach the server as it applies the offer.
                track.set_muted(true).await.unwrap();
                track.set_muted(false).await.unwrap();
            }
            let tone = spawn_tone(track.clone());
            let heard = c.sdk_hears(track.sid(), 1.5).await;
            eprintln!("round {round}: the SDK heard {heard}");
            tone.abort();
            match round_kind {
                Round::MuteUnmute => track.set_muted(true).await.unwrap(),
                Round::Unpublish => track.unpublish().await.unwrap(),
            }
        }
        c.room.leave().await.unwrap();
        Ok(())
    });
}

/// A track is announced when the offer carrying it is applied, before any of its audio,
/// as livekit-server does: our track, with no frame pushed yet (so not one RTP packet
/// sent), is seen published and subscribed by the SDK; the tone pushed afterwards is
/// heard on that subscription.
fn a_track_is_announced_and_subscribed_before_its_first_packet(kind: ServerKind) {
    let (env, _peer) = with_listener(kind);
    let url = env.server.url.clone();
    in_client_ns(&env, move || async move {
        let mut c = Client::connect(&url, "app").await;
        let track = c
            .room
            .publish_audio(AudioSourceOptions::default())
            .await
            .expect("publish");
        c.peer_sees("assistant", "published", "app", track.sid())
            .await;
        c.peer_sees("assistant", "subscribed", "app", track.sid())
            .await;
        let tone = spawn_tone(track.clone());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let heard = c
            .ask(
                "assistant",
                json!({"op": "hear_tone", "from": "app", "seconds": 3}),
                "heard",
                Duration::from_secs(30),
            )
            .await;
        eprintln!("the SDK heard: {heard}");
        assert!(heard["error"].is_null(), "{heard}");
        assert_eq!(heard["sid"], track.sid());
        let f = heard["freq_hz"].as_f64().unwrap();
        assert!((f - 440.0).abs() <= 440.0 * 0.02, "{heard}");
        assert!(heard["longest_gap_ms"].as_f64().unwrap() < 100.0, "{heard}");
        tone.abort();
        c.room.leave().await.unwrap();
        Ok(())
    });
}

fn the_sdks_tone_is_decoded_with_mute_and_unpublish_events(kind: ServerKind) {
    let (env, _peer) = with_listener(kind);
    let url = env.server.url.clone();
    in_client_ns(&env, move || async move {
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
            .events
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
            .events
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
        c.events.wait_for(
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
        c.events
            .wait_for(
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
}

/// A full rejoin (the server restarts): our track is reported unpublished and stops
/// taking frames, the remote stream ends, and publishing again works.
fn a_full_rejoin_tears_audio_down_and_allows_publishing_again(kind: ServerKind) {
    let mut env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
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
            .events
            .wait_for("AudioTrackSubscribed", Duration::from_secs(10), |e| {
                matches!(e, RoomEvent::AudioTrackSubscribed { .. })
            })
            .await;
        let RoomEvent::AudioTrackSubscribed { mut stream, .. } = ev else {
            unreachable!()
        };
        record(&mut stream, 0.5).await;

        // Kill the server and start a new one: no resume is possible.
        env.restart_server(Path::new(BIN))?;
        let sid = track.sid().to_owned();
        c.events.wait_for(
            "LocalTrackUnpublished",
            Duration::from_secs(20),
            |e| matches!(e, RoomEvent::LocalTrackUnpublished { sid: s, by_server: false } if *s == sid),
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
        c.events
            .wait_for("Reconnected", Duration::from_secs(40), |e| {
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

// --- Speech, and loss -------------------------------------------------------------------

/// How closely received speech must match the espeak-ng original (tests/py/speech.py
/// computes the figures: normalised cross-correlation, NCC, 1.0 = the same waveform).
///
/// Our receiver plays packets out as they come (no time-stretching), so the whole
/// utterance is judged at one lag: at least 0.9. Opus keeps this speech's waveform at
/// 0.98–0.99 on a clean link; the wrong audio scores ~0.0, a 200 ms gap in the 5 s
/// utterance ~0.97 (hence also the segment check below), and a sample-rate slip or a
/// time stretch of even 1 % falls far below.
const SPEECH_NCC: f64 = 0.9;
/// libwebrtc's NetEq (the SDK's receiver) time-stretches by whole pitch periods to
/// steer its delay, which no single lag survives (the SDK pair itself scores 0.5–0.7
/// globally); so on its side each voiced 100 ms segment is tracked along the recording
/// (speech.py's `tracked_segments`): median at least 0.9 (measured 0.95–0.96 for our
/// sender, 0.99 for the SDK's own in the same run) and mean at least 0.8 (measured
/// 0.86–0.92; a stretch of wrong, missing or garbled speech pulls it down). Our figure
/// is our encoder's own: Opus in VoIP mode scores 0.957 / 0.921 on this utterance
/// offline, encoder to decoder with nothing between (in Audio mode 0.994 / 0.964, like
/// the SDK's), so the path through the server and the SDK loses nothing measurable.
const SEGMENT_NCC_MEDIAN: f64 = 0.9;
const SEGMENT_NCC_MEAN: f64 = 0.8;
/// Our receiver: the worst voiced 100 ms segment (a gap or a burst of concealment
/// shows here even when the global figure stays high). Measured 0.64–0.66: the
/// segments where espeak-ng's voice starts a word.
const SEGMENT_NCC_WORST: f64 = 0.5;

/// espeak-ng's reference utterance at 48 kHz (tests/py/speech.py), written into `dir`.
fn speech_reference(dir: &Path) -> (std::path::PathBuf, Vec<i16>) {
    let path = dir.join("reference.wav");
    let py = outpost_tests::python::python().unwrap();
    let out = std::process::Command::new(&py)
        .arg(outpost_tests::python::scripts_dir().join("speech.py"))
        .arg("reference")
        .arg(&path)
        .output()
        .expect("running speech.py (needs espeak-ng)");
    assert!(
        out.status.success(),
        "speech.py reference: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wav = std::fs::read(&path).unwrap();
    // speech.py writes a plain 44-byte header before the samples.
    assert_eq!(&wav[36..40], b"data");
    let samples = wav[44..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    (path, samples)
}

/// speech.py's comparison of `rec` (48 kHz mono) with the reference WAV `reference`.
fn compare_speech(reference: &Path, rec: &[i16], dir: &Path) -> Value {
    let raw = dir.join("received.raw");
    let bytes: Vec<u8> = rec.iter().flat_map(|s| s.to_le_bytes()).collect();
    std::fs::write(&raw, bytes).unwrap();
    let py = outpost_tests::python::python().unwrap();
    let out = std::process::Command::new(&py)
        .arg(outpost_tests::python::scripts_dir().join("speech.py"))
        .arg("compare")
        .arg(reference)
        .arg(&raw)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "speech.py compare: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Pushes silence into `track` in real time (20 ms every 20 ms), replaced by each clip
/// sent on the returned channel until the clip has gone out.
fn spawn_player(
    track: LocalAudioTrack,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::mpsc::UnboundedSender<Vec<i16>>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<i16>>();
    let task = tokio::spawn(async move {
        let mut clip: std::collections::VecDeque<i16> = Default::default();
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        loop {
            tick.tick().await;
            while let Ok(c) = rx.try_recv() {
                clip.extend(c);
            }
            let frame: Vec<i16> = (0..960).map(|_| clip.pop_front().unwrap_or(0)).collect();
            if track.push_frame(&frame).await.is_err() {
                return;
            }
        }
    });
    (task, tx)
}

/// Reads `seconds` of `stream` with each frame's arrival time.
async fn record_timed(
    stream: &mut AudioStream,
    seconds: f64,
) -> (Vec<i16>, Vec<std::time::Instant>, usize) {
    let mut samples = Vec::new();
    let mut arrivals = Vec::new();
    let mut concealed = 0;
    while (samples.len() as f64) < seconds * RATE {
        let f = tokio::time::timeout(Duration::from_secs(2), stream.recv())
            .await
            .expect("audio stalled for 2 s")
            .expect("the audio stream ended");
        arrivals.push(std::time::Instant::now());
        concealed += usize::from(f.concealed);
        // Time the sender skipped (DTX) is silence on the stream's timeline.
        samples.extend(std::iter::repeat_n(0, f.skipped_before));
        samples.extend_from_slice(&f.samples);
    }
    (samples, arrivals, concealed)
}

/// The SDK's track `sid`, subscribed: its decoded stream.
async fn subscribed_stream(c: &mut Client, sid: &str) -> AudioStream {
    let sid = sid.to_owned();
    let ev = c
        .events
        .wait_for(
            "AudioTrackSubscribed",
            Duration::from_secs(10),
            |e| matches!(e, RoomEvent::AudioTrackSubscribed { track_sid, .. } if *track_sid == sid),
        )
        .await;
    let RoomEvent::AudioTrackSubscribed { stream, .. } = ev else {
        unreachable!()
    };
    stream
}

/// Has the SDK play the reference into its speech track while we record it; returns
/// speech.py's comparison and how many frames were concealed.
async fn hear_sdk_speech(
    c: &mut Client,
    stream: AudioStream,
    reference: &Path,
    seconds: f64,
    dir: &Path,
) -> (Value, usize, usize) {
    let rec = tokio::spawn(async move {
        let mut stream = stream;
        record_timed(&mut stream, seconds).await
    });
    let r = c
        .ask(
            "assistant",
            json!({"op": "play_speech", "ref": reference}),
            "playing",
            Duration::from_secs(10),
        )
        .await;
    assert!(r["error"].is_null(), "{r}");
    let (samples, _, concealed) = rec.await.unwrap();
    let frames = samples.len() / 960;
    (compare_speech(reference, &samples, dir), concealed, frames)
}

fn speech_round_trips_both_ways_with_high_correlation(kind: ServerKind) {
    let dir = tempfile::tempdir().unwrap();
    let (reference, clip) = speech_reference(dir.path());
    let clip_s = clip.len() as f64 / RATE;
    let (env, _peer) = with_listener(kind);
    let _bob = PyPeer::start_with_env(
        &env.pair,
        &env.server.url,
        ROOM,
        "bob",
        &[("LK_AUTO_SUBSCRIBE", "1")],
    )
    .expect("peer");
    let url = env.server.url.clone();
    let dir_path = dir.path().to_owned();
    in_client_ns(&env, move || async move {
        let mut c = Client::connect(&url, "app").await;
        // Outpost speaks, the SDK listens.
        let track = c
            .room
            .publish_audio(AudioSourceOptions::default())
            .await
            .expect("publish");
        let (player, play) = spawn_player(track.clone());
        c.cmd(
            "assistant",
            json!({"op": "hear_speech", "from": "app", "ref": reference,
                   "seconds": clip_s + 5.0}),
        )
        .await;
        c.events
            .wait_for("the SDK to listen", Duration::from_secs(20), |e| {
                matches!(e, RoomEvent::Data(m) if m.topic.as_deref() == Some("reply")
                    && m.payload.windows(11).any(|w| w == b"\"listening\"" || w == b"heard_speech"))
            })
            .await;
        // Silence first: the SDK's playout settles.
        tokio::time::sleep(Duration::from_millis(2000)).await;
        play.send(clip.clone()).unwrap();
        let ev = c
            .events
            .wait_for("the SDK's verdict", Duration::from_secs(30), |e| {
                matches!(e, RoomEvent::Data(m) if m.topic.as_deref() == Some("reply")
                    && serde_json::from_slice::<Value>(&m.payload)
                        .is_ok_and(|v| v["op"] == "heard_speech"))
            })
            .await;
        let RoomEvent::Data(m) = ev else {
            unreachable!()
        };
        let heard: Value = serde_json::from_slice(&m.payload).unwrap();
        eprintln!("the SDK heard our speech: {heard}");
        assert!(heard["error"].is_null(), "{heard}");
        player.abort();

        // For comparison, in the same run: the same speech between two official-SDK
        // peers through the same server (reported, not judged).
        {
            let r = c
                .ask(
                    "bob",
                    json!({"op": "publish_speech"}),
                    "speech_published",
                    Duration::from_secs(15),
                )
                .await;
            let sid = r["sid"].as_str().unwrap().to_owned();
            tokio::time::sleep(Duration::from_secs(1)).await;
            c.cmd(
                "assistant",
                json!({"op": "hear_speech", "from": "bob", "sid": sid, "ref": reference,
                       "seconds": clip_s + 5.0}),
            )
            .await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            c.cmd("bob", json!({"op": "play_speech", "ref": reference}))
                .await;
            let ev = c
                .events
                .wait_for("the SDK's verdict", Duration::from_secs(30), |e| {
                    matches!(e, RoomEvent::Data(m) if m.topic.as_deref() == Some("reply")
                        && serde_json::from_slice::<Value>(&m.payload)
                            .is_ok_and(|v| v["op"] == "heard_speech"))
                })
                .await;
            let RoomEvent::Data(m) = ev else {
                unreachable!()
            };
            eprintln!(
                "the SDK heard the SDK: {}",
                String::from_utf8_lossy(&m.payload)
            );
        }

        // The SDK speaks, Outpost listens.
        let r = c
            .ask(
                "assistant",
                json!({"op": "publish_speech"}),
                "speech_published",
                Duration::from_secs(15),
            )
            .await;
        let stream = subscribed_stream(&mut c, r["sid"].as_str().unwrap()).await;
        let (ours, concealed, frames) =
            hear_sdk_speech(&mut c, stream, &reference, clip_s + 4.0, &dir_path).await;
        eprintln!("we heard the SDK's speech: {ours} ({concealed} of {frames} concealed)");
        let f = |v: &Value, k: &str| v[k].as_f64().unwrap();
        assert!(
            f(&heard, "segment_ncc_median") >= SEGMENT_NCC_MEDIAN,
            "{heard}"
        );
        assert!(f(&heard, "segment_ncc_mean") >= SEGMENT_NCC_MEAN, "{heard}");
        // outpost-room once sent a new subscription its queued second of packets in
        // one burst; the SDK then time-compressed our speech for seconds (1.2 s of
        // samples removed by acceleration in a 5 s utterance). A few ms is normal.
        let accelerated = f(&heard["receiver"], "removed_samples_for_acceleration");
        assert!(accelerated < 0.25 * RATE, "{heard}");
        assert!(f(&ours, "ncc") >= SPEECH_NCC, "{ours}");
        assert!(f(&ours, "segment_ncc_worst") >= SEGMENT_NCC_WORST, "{ours}");
        assert_eq!(concealed, 0, "nothing is lost on a clean link");
        c.room.leave().await.unwrap();
        Ok(())
    });
}

/// Drops `percent` % of the UDP packets arriving on the client's end of the veth
/// (nftables, netdev ingress on `v1`: the kernel here has no netem). Returns how many
/// it dropped when asked again with `None`.
fn veth_loss(client_ns: &str, percent: Option<u32>) -> u64 {
    let nft = |args: &[&str], stdin: Option<&str>| {
        let mut cmd = std::process::Command::new("ip");
        cmd.args(["netns", "exec", client_ns, "nft"]).args(args);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("running nft (Debian's nftables)");
        if let Some(text) = stdin {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    if let Some(p) = percent {
        nft(
            &["-f", "-"],
            Some(&format!(
                "table netdev outpost_loss {{\n chain ingress {{\n  type filter hook ingress device \"v1\" priority 0; policy accept;\n  ip protocol udp numgen random mod 100 < {p} counter drop\n }}\n}}\n"
            )),
        );
        return 0;
    }
    let listing = nft(&["list", "table", "netdev", "outpost_loss"], None);
    listing
        .split("counter packets ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("the loss rule's counter")
}

/// Power of `x` at `freq` over its total energy (1.0 = a pure tone at `freq`).
fn tone_share(x: &[f64], freq: f64) -> f64 {
    let energy: f64 = x.iter().map(|v| v * v).sum();
    if energy < 1.0 {
        return 0.0;
    }
    // Goertzel power of an N-sample window is about (N/2)² A² / ... normalise by
    // N/2 × energy so a full-scale pure tone gives ~1.
    goertzel(x, freq) / (x.len() as f64 / 2.0 * energy)
}

/// 5 % of the UDP packets to the client are dropped on the veth (real loss in the
/// kernel, netdev ingress); the SDK's 440 Hz tone still decodes without a gap over
/// 100 ms: the jitter buffer reports each lost packet and Opus conceals it (from the
/// next packet's in-band FEC when it carries some), so every 20 ms of the recording
/// still carries the tone and frames keep coming in real time.
fn five_percent_loss_on_the_veth_still_decodes_without_gaps(kind: ServerKind) {
    const STALL_MS: f64 = 150.0;
    let (env, _peer) = with_listener(kind);
    let url = env.server.url.clone();
    let ns = env.pair.client_ns.clone();
    in_client_ns(&env, move || async move {
        let mut c = Client::connect(&url, "app").await;
        let r = c
            .ask(
                "assistant",
                json!({"op": "publish_tone"}),
                "tone_published",
                Duration::from_secs(15),
            )
            .await;
        let mut stream = subscribed_stream(&mut c, r["sid"].as_str().unwrap()).await;
        record(&mut stream, 1.0).await;
        veth_loss(&ns, Some(5));
        let started = std::time::Instant::now();
        let (samples, arrivals, concealed) = record_timed(&mut stream, 10.0).await;
        let took = started.elapsed().as_secs_f64();
        let dropped = veth_loss(&ns, None);
        let frames = arrivals.len();
        let arrival_gaps: Vec<f64> = arrivals
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64() * 1000.0)
            .collect();
        let max_arrival_gap = arrival_gaps.iter().copied().fold(0.0, f64::max);
        let stalls = arrival_gaps.iter().filter(|&&g| g >= STALL_MS).count();
        let x: Vec<f64> = samples.iter().map(|&s| f64::from(s)).collect();
        let (mut longest, mut run, mut bad) = (0, 0, 0);
        for w in x.chunks_exact(960) {
            if tone_share(w, 440.0) > 0.5 {
                run = 0;
            } else {
                run += 1;
                bad += 1;
            }
            longest = longest.max(run);
        }
        eprintln!(
            "5 % loss: {dropped} UDP packets dropped on the veth; {concealed} of {frames} \
             frames concealed; {bad} of {} 20 ms windows without the tone, longest run \
             {} ms; longest wait between frames {max_arrival_gap:.0} ms; 10 s of audio \
             in {took:.2} s ({stalls} waits of {STALL_MS} ms or more); peak {} Hz",
            x.len() / 960,
            longest * 20,
            peak_hz(&x)
        );
        assert!(dropped > 0, "nothing was dropped");
        assert!(
            (frames / 100..=frames / 7).contains(&concealed),
            "{concealed} of {frames} concealed (5 % loss)"
        );
        assert!(longest * 20 < 100, "a gap of {} ms", longest * 20);
        // Frames keep coming in real time. A jitter buffer that waited on a lost packet
        // would stall at most of the 30 or so losses; one pause of the test process on the
        // loaded 2-core machine is not that (CI's lanes, 2026-11-28: one wait of 164 ms,
        // every 20 ms window still carrying the tone). So: at most two waits of
        // STALL_MS or more, and none of half a second.
        assert!(
            stalls <= 2 && max_arrival_gap < 500.0,
            "frames stalled: {stalls} waits of {STALL_MS} ms or more, the longest \
             {max_arrival_gap:.0} ms"
        );
        assert!((took - 10.0).abs() < 0.5, "10 s of audio took {took} s");
        assert!((peak_hz(&x) - 440.0).abs() <= 440.0 * 0.02);
        c.room.leave().await.unwrap();
        Ok(())
    });
}
