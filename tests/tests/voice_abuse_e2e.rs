//! End to end (issue 30): what other room participants can do to Outpost's voice, with
//! official-SDK participants (`tests/py/tone_peer.py`) through `outpost-room`.
//!
//! Outpost is the real session engine (`outpost_core::Core` with voice on, no audio
//! device: the test reads the session's voice events and feeds its microphone track),
//! run inside the client namespace of an [`lkclient::Env`]; the server and the
//! participants run in the server namespace. Needs root, iproute2 and the venv (see
//! `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use outpost_core::{ConnectOptions, Core, Credentials, PolicySource, ToolsConfig, VoiceEvent};
use outpost_tests::lkclient::{self, Env, spawn_tone};
use outpost_tests::proc::Proc;
use serde_json::Value;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "voice-abuse";
const WAIT: Duration = Duration::from_secs(90);

/// The command for `tests/py/tone_peer.py` as `identity` in the server namespace.
fn peer_command(env: &Env, identity: &str, vars: &[(&str, &str)]) -> std::process::Command {
    env.py_peer("tone_peer.py", ROOM, identity, vars).unwrap()
}

/// Starts a peer and waits until it has joined; its stdout lines follow.
fn start_peer(what: &str, cmd: std::process::Command) -> (Proc, Receiver<String>) {
    Proc::spawn_ready(what, cmd, WAIT).unwrap()
}

/// The next JSON line with `"event": event`.
fn event(p: &Proc, lines: &Receiver<String>, event: &str) -> Value {
    p.next_event(lines, event, WAIT).unwrap()
}

/// A core with an empty policy in `dir`, and options joining as "app" with voice on and
/// "assistant" as the assistant.
fn outpost(dir: &Path, env: &Env) -> (Core, ConnectOptions) {
    std::fs::write(dir.join("policy.toml"), "[tools]\n").unwrap();
    let tools = ToolsConfig {
        policy: PolicySource::File(dir.join("policy.toml")),
        home: dir.to_path_buf(),
        protected: Vec::new(),
    };
    let core = Core::open(Some(dir.join("data")), tools).unwrap();
    let token = lkclient::token(ROOM, "app", lkclient::DEV_SECRET).unwrap();
    let mut opts = ConnectOptions::new(Credentials::Token {
        url: env.server.url.clone(),
        token,
    });
    opts.assistant_identity = Some("assistant".into());
    opts.room_name = Some(ROOM.into());
    opts.voice = true;
    (core, opts)
}

/// Issue 30, finding 4: a participant with the `hidden` grant publishes audio while
/// Outpost is in a voice call with the assistant. The room offers its track without ever
/// announcing the participant; before the fix the track reached the session with an
/// empty identity, which it took for the assistant's, and played it as the assistant's
/// voice. Now only the assistant's track is handed out.
#[test]
fn a_hidden_participants_audio_is_never_played_as_the_assistants() {
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let dir = tempfile::tempdir().unwrap();
    let (assistant, lines) = start_peer(
        "assistant",
        peer_command(&env, "assistant", &[("LK_PUBLISH", "1")]),
    );
    let assistant_sid = event(&assistant, &lines, "published")["sid"]
        .as_str()
        .unwrap()
        .to_owned();
    let eve_cmd = peer_command(&env, "eve", &[("LK_PUBLISH", "1"), ("LK_HIDDEN", "1")]);
    let (core, opts) = outpost(dir.path(), &env);
    let (heard, eve) = lkclient::in_netns(&env.pair.client_ns.clone(), move || async move {
        let (session, _ui) = core.connect(opts).await?;
        let mut voice = session.take_voice_events().unwrap();
        // Eve joins and publishes once Outpost is in the room (the room offers a hidden
        // participant's new tracks to everyone present).
        let eve = tokio::task::spawn_blocking(move || {
            let (eve, lines) = start_peer("eve (hidden)", eve_cmd);
            let sid = event(&eve, &lines, "published")["sid"]
                .as_str()
                .unwrap()
                .to_owned();
            (eve, sid)
        })
        .await?;
        // Everything handed out as the assistant's audio for 8 s after Eve published.
        let mut heard = Vec::new();
        let until = tokio::time::Instant::now() + Duration::from_secs(8);
        while let Ok(Some(ev)) = tokio::time::timeout_at(until, voice.recv()).await {
            if let VoiceEvent::AssistantAudio { track_sid, .. } = ev {
                heard.push(track_sid);
            }
        }
        session.leave().await?;
        Ok((heard, eve))
    })
    .unwrap();
    let (eve, eve_sid) = eve;
    eprintln!("assistant {assistant_sid}, eve {eve_sid}; handed out as the assistant's: {heard:?}");
    assert!(
        !heard.contains(&eve_sid),
        "the hidden participant's track {eve_sid} was played as the assistant's voice"
    );
    assert_eq!(heard, vec![assistant_sid], "the assistant's track, once");
    drop(eve);
}

/// Issue 30, finding 5: Outpost publishes its microphone in a room with the assistant
/// and another participant, both official-SDK clients that subscribe to it. Before the fix
/// no subscription permissions were set and the other participant received the
/// microphone; now only the assistant may subscribe (LiveKit's subscription permissions,
/// enforced by outpost-room).
#[test]
fn only_the_assistant_can_hear_the_microphone() {
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let dir = tempfile::tempdir().unwrap();
    let listen = |seconds: &'static str| [("LK_LISTEN", "app"), ("LK_SECONDS", seconds)];
    let assistant = start_peer("assistant", peer_command(&env, "assistant", &listen("30")));
    let eve = start_peer("eve", peer_command(&env, "eve", &listen("15")));
    let (core, opts) = outpost(dir.path(), &env);
    let heard = lkclient::in_netns(&env.pair.client_ns.clone(), move || async move {
        let (session, _ui) = core.connect(opts).await?;
        let mic = session.publish_microphone(false).await?;
        let tone = spawn_tone(mic);
        let heard = tokio::task::spawn_blocking(move || {
            let by_assistant = event(&assistant.0, &assistant.1, "heard");
            let by_eve = event(&eve.0, &eve.1, "heard");
            (by_assistant, by_eve)
        })
        .await?;
        tone.abort();
        session.leave().await?;
        Ok(heard)
    })
    .unwrap();
    let (by_assistant, by_eve) = heard;
    eprintln!("the assistant: {by_assistant}\neve: {by_eve}");
    assert_eq!(
        by_eve["subscribed"], false,
        "another participant received the microphone: {by_eve}"
    );
    assert_eq!(by_assistant["subscribed"], true, "{by_assistant}");
    let freq = by_assistant["freq_hz"].as_f64().unwrap_or(0.0);
    assert!(
        (freq - 440.0).abs() < 10.0,
        "the assistant heard {by_assistant}"
    );
}

/// The UI events until an assistant message or a final user transcript containing
/// `needle` (or the wait runs out).
async fn until_text(
    ui: &mut outpost_core::SessionEvents,
    needle: &str,
) -> Vec<outpost_core::UiEvent> {
    let mut got = Vec::new();
    let until = tokio::time::Instant::now() + WAIT;
    while let Ok(Some(ev)) = tokio::time::timeout_at(until, ui.recv()).await {
        let done = matches!(&ev, outpost_core::UiEvent::AssistantMessage { text, .. }
            | outpost_core::UiEvent::UserTranscript { text, is_final: true, .. }
            if text.contains(needle));
        got.push(ev);
        if done {
            break;
        }
    }
    got
}

/// Runs `cmd` (a `tests/py/transcriber.py`) until it has sent its segment.
async fn transcribe(what: &'static str, cmd: std::process::Command) -> Proc {
    tokio::task::spawn_blocking(move || {
        let (p, lines) = Proc::spawn_ready(what, cmd, WAIT).unwrap();
        p.next_event(&lines, "sent", WAIT).unwrap();
        p
    })
    .await
    .unwrap()
}

/// Issue 30 ("also to check"): Outpost remembered the ids of its tracks for good, so after
/// voice was turned off a transcription naming the old microphone track still passed for
/// the user's own words (shown and recorded as theirs). Now only a track published now
/// makes a transcription the user's speech.
#[test]
fn a_transcription_of_a_microphone_no_longer_published_is_not_the_users_words() {
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let dir = tempfile::tempdir().unwrap();
    let (core, opts) = outpost(dir.path(), &env);
    let on = "words while the microphone is on";
    let off = "words after voice was turned off";
    let transcriber = |segment: &str, text: &str| {
        env.py_peer(
            "transcriber.py",
            ROOM,
            "assistant",
            &[("LK_SEGMENT", segment), ("LK_TEXT", text)],
        )
        .unwrap()
    };
    let (mut first, mut second) = (transcriber("SG_on", on), transcriber("SG_off", off));
    let seen = lkclient::in_netns(&env.pair.client_ns.clone(), move || async move {
        let (session, mut ui) = core.connect(opts).await?;
        let mic = session.publish_microphone(false).await?;
        // While the microphone is published: the user's words.
        first.env("LK_TRACK", mic.sid());
        let p1 = transcribe("transcriber 1", first).await;
        let mut seen = until_text(&mut ui, on).await;
        drop(p1);
        // Voice off: the track is unpublished; a transcription names it again.
        mic.unpublish().await?;
        second.env("LK_TRACK", mic.sid());
        let p2 = transcribe("transcriber 2", second).await;
        seen.extend(until_text(&mut ui, off).await);
        drop(p2);
        session.leave().await?;
        Ok(seen)
    })
    .unwrap();
    let user_words: Vec<&String> = seen
        .iter()
        .filter_map(|e| match e {
            outpost_core::UiEvent::UserTranscript {
                text,
                is_final: true,
                ..
            } => Some(text),
            _ => None,
        })
        .collect();
    eprintln!("the user's words: {user_words:?}");
    assert_eq!(user_words, [on]);
}
