//! Outpost connects wherever the official SDK connects (issue 26): the real
//! livekit-server in one namespace, the client's namespace behind nftables rules that
//! leave only some paths open (see `outpost_tests::lkclient::NsPair`).
//!
//! Each test first shows the official Python SDK connecting through the same
//! restrictions (the baseline), then runs Outpost's session engine (`outpost_core::Core`,
//! in the client namespace) against `tests/py/net_assistant.py`: an Outpost-protocol
//! tool call, a LiveKit RPC tool call, and voice both ways.
//!
//! livekit-server only: outpost-room offers no ICE/TCP candidates (`webrtc` 0.21 has no
//! shared TCP listener to advertise) and runs no TURN server, so with UDP blocked there
//! is nothing there for any client to fall back to.
//! Needs root, iproute2, nftables, the venv and livekit-server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use outpost_core::{ConnectOptions, Core, Credentials, PolicySource, ToolsConfig, UiEvent};
use outpost_livekit::{AudioStream, LocalAudioTrack};
use outpost_tests::lkclient::{self, Env, in_netns};
use outpost_tests::proc::Proc;
use outpost_tests::python;
use outpost_tests::server::ServerKind;
use serde_json::Value;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "net";
const OUTPOST: &str = "app";
const ASSISTANT: &str = "assistant";
/// Generous: two Python processes with libwebrtc and the Rust client share 2 busy cores.
const WAIT: Duration = Duration::from_secs(90);
/// What the assistant publishes; what we publish is 660 Hz.
const ASSISTANT_TONE_HZ: f64 = 440.0;
const OUR_TONE_HZ: f64 = 660.0;

/// An official-SDK scenario (`tests/py/<script>`, two participants in one process) run
/// in the client namespace, so both go through the client's restrictions; its verdict.
fn sdk_baseline(env: &Env, script: &str, extra: &[(&str, &str)]) -> Value {
    let py = python::python().unwrap();
    let mut cmd = env.pair.client_command(&py);
    cmd.arg(python::scripts_dir().join(script))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", format!("{ROOM}-sdk"))
        .env("LK_TIMEOUT", "100")
        .env("PYTHONWARNINGS", "ignore");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let proc = Proc::spawn(&format!("sdk baseline {script}"), cmd).unwrap();
    let (status, out, err) = proc.finish(Duration::from_secs(120)).unwrap();
    assert!(
        status.success(),
        "the official SDK did not get through ({script}, {status}):\n{out}\n{err}\n--- server ---\n{}",
        env.server.proc.stderr()
    );
    let verdict: Value = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .next_back()
        .unwrap_or_else(|| panic!("{script} printed no verdict:\n{out}"));
    assert_eq!(verdict["ok"], true, "{script}: {verdict}");
    eprintln!("official SDK baseline, {script}: {verdict}");
    verdict
}

/// The assistant, in the server namespace.
fn start_assistant(env: &Env) -> (Proc, std::sync::mpsc::Receiver<String>) {
    let py = python::python().unwrap();
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(python::scripts_dir().join("net_assistant.py"))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_IDENTITY", ASSISTANT)
        .env("OUTPOST_IDENTITY", OUTPOST)
        .env("LK_TIMEOUT", "150")
        .env("PYTHONWARNINGS", "ignore");
    let mut proc = Proc::spawn("net_assistant", cmd).unwrap();
    let lines = proc.stdout_lines().unwrap();
    (proc, lines)
}

/// Pushes a phase-continuous sine at `hz` into `track` in real time until aborted.
fn sine_into(track: LocalAudioTrack, hz: f64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let step = 2.0 * std::f64::consts::PI * hz / 48_000.0;
        let mut phase = 0.0f64;
        let mut pace = tokio::time::interval(Duration::from_millis(10));
        loop {
            pace.tick().await;
            let mut frame = [0i16; 480];
            for s in &mut frame {
                *s = (phase.sin() * 12_000.0) as i16;
                phase = (phase + step) % (2.0 * std::f64::consts::PI);
            }
            if track.push_frame(&frame).await.is_err() {
                return;
            }
        }
    })
}

/// `seconds` of `stream` on its timeline (skipped time as silence).
async fn listen(stream: &mut AudioStream, seconds: f64) -> anyhow::Result<Vec<f64>> {
    let want = (seconds * 48_000.0) as usize;
    let mut out = Vec::with_capacity(want);
    while out.len() < want {
        let frame = tokio::time::timeout(Duration::from_secs(3), stream.recv())
            .await
            .context("the assistant's audio stalled for 3 s")?
            .context("the assistant's audio ended")?;
        out.extend(std::iter::repeat_n(0.0, frame.skipped_before));
        out.extend(frame.samples.iter().map(|&s| f64::from(s)));
    }
    Ok(out)
}

/// What Outpost's session saw.
#[derive(Debug)]
struct Seen {
    /// Tool calls that finished, with their success.
    tools: Vec<(String, bool)>,
    /// The strongest frequency of the assistant's audio, and the share of 20 ms
    /// windows that carried sound.
    heard_hz: f64,
    sounding: f64,
}

/// Outpost's session engine in the client namespace against net_assistant.py.
fn outpost_session(env: &Env, dir: &Path) -> anyhow::Result<Seen> {
    let url = env.server.url.clone();
    let data_dir = dir.join("data");
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "consent_timeout_secs = 5\n[tools]\n")?;
    let home = dir.to_path_buf();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let core = Core::open(
            Some(data_dir),
            ToolsConfig {
                policy: PolicySource::File(policy),
                home,
                protected: Vec::new(),
            },
        )?;
        let mut opts = ConnectOptions::new(Credentials::Token {
            url,
            token: lkclient::token(ROOM, OUTPOST, lkclient::DEV_SECRET)?,
        });
        opts.assistant_identity = Some(ASSISTANT.into());
        opts.voice = true;
        opts.room_name = Some(ROOM.into());
        let (session, mut events) = core.connect(opts).await?;
        let mut voice = session.take_voice_events().context("voice events")?;
        let mic = session.publish_microphone().await?;
        let tone = sine_into(mic, OUR_TONE_HZ);

        let mut stream = loop {
            match tokio::time::timeout(WAIT, voice.recv()).await {
                Ok(Some(outpost_core::VoiceEvent::AssistantAudio { stream, .. })) => break stream,
                Ok(Some(_)) => {}
                Ok(None) => bail!("the session ended before the assistant's audio"),
                Err(_) => bail!("no audio from the assistant within {WAIT:?}"),
            }
        };
        let heard = listen(&mut stream, 3.0).await?;
        // From the first sound on: the track starts with whatever the SFU sent first.
        let windows: Vec<bool> = heard
            .chunks(960)
            .map(|w| (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt() > 1000.0)
            .collect();
        let first = windows.iter().position(|&w| w).unwrap_or(windows.len());
        let sounding = windows[first..].iter().filter(|&&w| w).count() as f64
            / (windows.len() - first).max(1) as f64;
        let tail = &heard[heard.len() - 24_000..];
        let heard_hz = outpost_tests::pulse::peak_hz(tail);

        let mut tools = Vec::new();
        loop {
            let ev = tokio::time::timeout(WAIT, events.recv())
                .await
                .with_context(|| format!("no 'network checks done' within {WAIT:?}: {tools:?}"))?
                .context("the session ended early")?;
            match ev {
                UiEvent::ToolCallFinished {
                    tool_name, success, ..
                } => tools.push((tool_name, success)),
                UiEvent::AssistantMessage { text, .. } if text == "network checks done" => break,
                _ => {}
            }
        }
        // The assistant listens to us for 4 s after it published: keep talking until
        // it says it is done (above), then leave.
        tone.abort();
        session.leave().await?;
        Ok(Seen {
            tools,
            heard_hz,
            sounding,
        })
    })
}

/// Checks what both sides of the session saw.
fn judge(env: &Env, assistant: Proc, lines: &std::sync::mpsc::Receiver<String>, seen: &Seen) {
    let (status, _, err) = assistant.finish(Duration::from_secs(30)).unwrap();
    let steps: Vec<Value> = lines
        .try_iter()
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    eprintln!("assistant: {steps:?}\noutpost: {seen:?}");
    assert!(
        status.success(),
        "the assistant's checks failed ({status}): {steps:#?}\n{err}\n--- server ---\n{}",
        env.server.proc.stderr()
    );
    for name in ["protocol_tool", "rpc_tool", "hear_client"] {
        assert!(
            steps.iter().any(|s| s["step"] == name && s["ok"] == true),
            "{name} did not pass: {steps:#?}"
        );
    }
    assert_eq!(
        seen.tools,
        vec![
            ("calculator".to_owned(), true),
            ("calculator".to_owned(), true)
        ],
        "one call by the protocol, one by RPC"
    );
    assert!(
        (seen.heard_hz - ASSISTANT_TONE_HZ).abs() < 10.0,
        "we heard {} Hz",
        seen.heard_hz
    );
    assert!(
        seen.sounding > 0.95,
        "gaps in the assistant's tone: {seen:?}"
    );
}

/// All UDP dropped in the client's namespace (the signal connection is TCP): the
/// official SDK gets through over ICE/TCP to the server's port 7881, and so does
/// Outpost: both tool-call paths and voice both ways.
#[test]
fn with_udp_blocked_outpost_connects_over_ice_tcp_like_the_sdk() {
    let env = Env::on(ServerKind::LiveKit, Path::new(ROOM_BIN)).expect("namespaces and server");
    env.pair.set_client_udp_blocked(true).unwrap();
    sdk_baseline(&env, "streams_rpc.py", &[]);
    sdk_baseline(
        &env,
        "audio_tone.py",
        &[
            ("LK_TONE_SECONDS", "3"),
            ("LK_TONE_MIMES", "audio/opus,audio/red"),
        ],
    );

    let dir = tempfile::tempdir().unwrap();
    let (assistant, lines) = start_assistant(&env);
    let seen = outpost_session(&env, dir.path())
        .unwrap_or_else(|e| panic!("{e:#}\n--- server ---\n{}", env.server.proc.stderr()));
    judge(&env, assistant, &lines, &seen);
}
