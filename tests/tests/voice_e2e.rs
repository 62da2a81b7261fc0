//! End to end, voice: Outpost's session engine and the desktop app's voice hub (real
//! microphone and speaker code: outpost-audio on cpal → ALSA → PulseAudio) talking to an
//! official-SDK voice agent (`tests/py/voice_agent.py`) through `outpost-room`.
//!
//! The sound card is a private PulseAudio daemon ([`outpost_tests::pulse`]): a 440 Hz
//! tone is played into the null sink `mic_in`, whose monitor is the default source, so
//! it is what Outpost's microphone hears; Outpost's output goes to the null sink
//! `speaker`, recorded from its monitor. Checked: the agent hears 440 Hz on Outpost's
//! microphone track (open mic); the agent's 660 Hz voice comes out of Outpost's speaker;
//! the agent's transcript of the user's speech (its `lk.transcribed_track_id` is
//! Outpost's track) arrives as the user's words, interim then final, and is in the
//! history as a user message, next to the agent's own words; push-to-talk not held and
//! mute keep the track muted; another microphone chosen in Settings mid-call is switched
//! to at once and the agent keeps hearing the same track; when the sound server dies
//! mid-call both devices show as failed with a reason and a typed message still goes out.
//!
//! This is the library level (`outpost_desktop::voice::VoiceHub` over
//! `outpost_core::Session`), not the app under Xvfb. No test harness: `PULSE_SERVER`
//! must be set before any thread starts, so `main` sets it and runs the one scenario,
//! printing `N passed, N failed`. Needs root, iproute2, pulseaudio and the venv.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use outpost_core::store::{ConversationId, Role, TimelineItem};
use outpost_core::{ConnectOptions, Core, Credentials, ToolsConfig, UiEvent};
use outpost_desktop::contract::{AppEvent, DeviceState, VoiceControl, VoiceMode};
use outpost_desktop::voice::VoiceHub;
use outpost_tests::lkclient::Env;
use outpost_tests::proc::Proc;
use outpost_tests::pulse::{Pulse, peak_hz};
use outpost_tests::python;
use outpost_tests::server::ServerKind;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "voice-e2e";
const OUTPOST: &str = "outpost-user";
const AGENT: &str = "voice-agent";
const WAIT: Duration = Duration::from_secs(90);

fn token(identity: &str) -> String {
    outpost_tests::lkclient::dev_token(ROOM, identity, "").unwrap()
}

async fn next_ui(
    events: &mut outpost_core::SessionEvents,
    seen: &mut Vec<UiEvent>,
) -> anyhow::Result<()> {
    match tokio::time::timeout(WAIT, events.recv()).await {
        Ok(Some(e)) => {
            seen.push(e);
            Ok(())
        }
        Ok(None) => bail!("the session ended; saw {seen:#?}"),
        Err(_) => bail!("no UI event for {WAIT:?}; saw {seen:#?}"),
    }
}

fn scenario(pulse: &Pulse, kind: ServerKind) -> anyhow::Result<()> {
    let pulse_pid = pulse.pid();
    let env = Env::on(kind, Path::new(ROOM_BIN))?;
    let py = python::python()?;
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(python::scripts_dir().join("voice_agent.py"))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_IDENTITY", AGENT)
        .env("OUTPOST_IDENTITY", OUTPOST)
        .env("LK_TIMEOUT", "150")
        .env("LK_KEEP_LISTENING", "1")
        .env("PYTHONWARNINGS", "ignore");
    let mut agent = Proc::spawn("voice_agent", cmd)?;
    let lines = Arc::new(Mutex::new(agent.stdout_lines()?));
    let all_lines = Arc::clone(&lines);
    // The agent's lines so far, without waiting.
    let drain = move || -> Vec<String> {
        let rx = all_lines.lock().unwrap();
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    };
    // The next line of the agent's that contains `what` (its progress reports).
    let agent_line = move |what: &str| -> anyhow::Result<String> {
        let rx = lines.lock().unwrap();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(150))
                .with_context(|| format!("waiting for the agent's {what} (its stderr follows)"))?;
            if line.contains(what) {
                return Ok(line);
            }
            println!("agent: {line}");
        }
    };
    agent_line("\"ready\"")?;
    let mut mic = pulse.play_tone("mic_in", 440.0, 120)?;
    let (mut rec, recorded) = pulse.record("speaker.monitor")?;

    let data = tempfile::tempdir()?;
    let data_dir = data.path().to_path_buf();
    let url = env.server.url.clone();
    let after = agent_line.clone();
    let outcome = outpost_tests::lkclient::in_netns(
        &env.pair.client_ns.clone(),
        move || async move {
            let core = Core::open(Some(data_dir), ToolsConfig::defaults())?;
            let mut opts = ConnectOptions::new(Credentials::Token {
                url,
                token: token(OUTPOST),
            });
            opts.voice = true;
            opts.assistant_identity = Some(AGENT.into());
            opts.room_name = Some(ROOM.into());
            let (session, mut events) = core.connect(opts).await?;
            let session = Arc::new(session);
            let app_events: Arc<Mutex<Vec<AppEvent>>> = Arc::default();
            let sink = Arc::clone(&app_events);
            let hub = VoiceHub::new(Arc::new(move |e| sink.lock().unwrap().push(e)), true);
            hub.attach(Arc::clone(&session));

            // Voice on: both devices open; push-to-talk not held sends nothing.
            let st = hub.start(None, None).await;
            println!("voice on: {st:?}");
            assert_eq!(st.input.state, DeviceState::Ready, "{st:?}");
            assert_eq!(st.output.state, DeviceState::Ready, "{st:?}");
            assert!(!st.transmitting);
            // Muted wins over the talk key.
            let st = hub.control(VoiceControl {
                muted: Some(true),
                mode: None,
                talking: Some(true),
                echo_cancellation: None,
            });
            assert!(!st.transmitting, "{st:?}");
            tokio::time::sleep(Duration::from_millis(500)).await;
            // Open mic, unmuted: the agent hears the tone.
            let st = hub.control(VoiceControl {
                muted: Some(false),
                mode: Some(VoiceMode::OpenMic),
                talking: Some(false),
                echo_cancellation: None,
            });
            assert!(st.transmitting, "{st:?}");
            // The agent saw the microphone track when it was published (outpost-room
            // announces a track at the offer that carries it, as livekit-server does).
            let mic_line = tokio::task::spawn_blocking({
                let agent_line = agent_line.clone();
                move || agent_line("\"mic\"")
            })
            .await??;
            println!("agent: {mic_line}");

            let heard = tokio::task::spawn_blocking({
                let agent_line = agent_line.clone();
                move || agent_line("\"heard\"")
            })
            .await??;
            println!("agent: {heard}");

            // The transcripts: the user's words (interim pieces, then final), the agent's.
            let mut seen = Vec::new();
            let mut user_final = None;
            let mut agent_said = false;
            while user_final.is_none() || !agent_said {
                next_ui(&mut events, &mut seen).await?;
                match seen.last() {
                    Some(UiEvent::UserTranscript {
                        id,
                        text,
                        is_final: true,
                    }) => {
                        user_final = Some((id.clone(), text.clone()));
                    }
                    Some(UiEvent::AssistantMessage { text, .. }) if text == "I hear you." => {
                        agent_said = true;
                    }
                    _ => {}
                }
            }
            let interim: Vec<&str> = seen
                .iter()
                .filter_map(|e| match e {
                    UiEvent::UserTranscript {
                        text,
                        is_final: false,
                        ..
                    } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert!(interim.contains(&"Hello"), "interim: {interim:?}");
            assert_eq!(
                user_final.as_ref().map(|(_, t)| t.as_str()),
                Some("Hello agent")
            );

            // Wait until the agent's voice plays (the output level shows it: its track is
            // subscribed after it heard us, which takes a while on a loaded machine), then let
            // it play a few seconds.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
            loop {
                let playing = app_events
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|e| matches!(e, AppEvent::VoiceLevel(l) if l.output > 0.3));
                if playing {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the agent's voice never played; voice: {:?}",
                    hub.status()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
            let levels: Vec<f32> = app_events
                .lock()
                .unwrap()
                .iter()
                .filter_map(|e| match e {
                    AppEvent::VoiceLevel(l) => Some(l.input),
                    _ => None,
                })
                .collect();
            let top = levels.iter().copied().fold(0.0f32, f32::max);
            assert!(top > 0.7, "the input meter showed at most {top}");

            // Another microphone chosen in Settings while voice is on: switched at once,
            // the same track goes on (the agent subscribes to nothing new) and the agent
            // keeps hearing the tone through it.
            let hearing_n = |line: &str| -> Option<u64> {
                let v: serde_json::Value = serde_json::from_str(line).ok()?;
                (v["op"] == "hearing").then(|| v["n"].as_u64()).flatten()
            };
            let so_far: Vec<String> = drain();
            let before = so_far
                .iter()
                .filter_map(|l| hearing_n(l))
                .max()
                .unwrap_or(0);
            let now = hub.status();
            let listed = outpost_desktop::voice::devices(None, None).await;
            let other = listed
                .inputs
                .iter()
                .map(|d| d.id.clone())
                .find(|id| {
                    Some(id.as_str()) != now.input.device.as_deref() && id.ends_with(":pulse")
                })
                .with_context(|| format!("no other input to switch to: {listed:#?}"))?;
            hub.use_devices(Some(other.clone()), None);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
            loop {
                let st = hub.status();
                if st.input.state == DeviceState::Ready
                    && st.input.device.as_deref() == Some(other.as_str())
                {
                    println!("microphone switched to {other}");
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "not switched: {st:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            let mut after = Vec::new();
            loop {
                after.extend(drain());
                // Two more seconds heard: at least one after the switch.
                if after
                    .iter()
                    .filter_map(|l| hearing_n(l))
                    .any(|n| n >= before + 2)
                {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the agent did not hear the switched microphone (heard {before} s before): {after:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(
                !after.iter().any(|l| l.contains("\"subscribed\"")),
                "a new microphone track was published: {after:?}"
            );
            let f = after
                .iter()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v["op"] == "hearing")
                .filter_map(|v| v["freq_hz"].as_f64())
                .next_back()
                .unwrap_or(0.0);
            assert!(
                (f - 440.0).abs() <= 8.8,
                "the agent heard {f} Hz after the switch"
            );
            // The sound goes away mid-call (the sound server dies, as when a headset is
            // unplugged): both devices show as failed with a reason, the session goes on
            // and a typed message still goes out.
            let killed = std::process::Command::new("kill")
                .args(["-9", &pulse_pid.to_string()])
                .status()?;
            assert!(killed.success());
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            loop {
                let st = hub.status();
                if st.input.state == DeviceState::Failed && st.output.state == DeviceState::Failed {
                    println!(
                        "after the sound server died: {:?} / {:?}",
                        st.input.error, st.output.error
                    );
                    assert!(st.on && !st.transmitting, "{st:?}");
                    assert!(
                        st.input
                            .error
                            .as_deref()
                            .is_some_and(|e| e.contains("microphone")),
                        "{st:?}"
                    );
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "devices still not failed: {st:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(
                app_events.lock().unwrap().iter().any(
                    |e| matches!(e, AppEvent::Voice(v) if v.input.state == DeviceState::Failed)
                ),
                "no voice event told the UI"
            );
            session.send_message("typed after the sound went away")?;
            loop {
                next_ui(&mut events, &mut seen).await?;
                if matches!(seen.last(), Some(UiEvent::UserMessage { text, .. }) if text == "typed after the sound went away")
                {
                    break;
                }
            }
            let st = hub.stop().await;
            assert!(!st.on && !st.transmitting);

            // The history holds both sides.
            let conversation = session.conversation_id().context("no conversation")?;
            session.leave().await?;
            core.store().flush().await?;
            let timeline = core.store().timeline(ConversationId(conversation)).await?;
            let said = |role: Role, text: &str| {
                timeline.items.iter().any(
                    |i| matches!(i, TimelineItem::Message(m) if m.role == role && m.text == text),
                )
            };
            assert!(said(Role::User, "Hello agent"), "{timeline:#?}");
            assert!(said(Role::Assistant, "I hear you."), "{timeline:#?}");
            assert!(
                said(Role::User, "typed after the sound went away"),
                "{timeline:#?}"
            );
            anyhow::Ok(())
        },
    );
    let _ = mic.kill();
    let _ = rec.kill();
    let _ = rec.wait();
    let _ = mic.wait();
    if let Err(e) = outcome {
        if let Ok(path) = std::env::var("VOICE_E2E_ROOM_LOG") {
            let _ = std::fs::write(path, env.server.proc.stderr());
        }
        bail!(
            "{e:#}\nthe agent's stderr:\n{}\nthe room server's stderr (tail):\n{}",
            agent.stderr(),
            tail(&env.server.proc.stderr(), 40)
        );
    }
    if let Ok(line) = after("\"transcribed\"") {
        println!("agent: {line}");
    }

    // Outpost's speaker played the agent's 660 Hz voice.
    let samples: Vec<f64> = recorded
        .lock()
        .unwrap()
        .iter()
        .map(|s| f64::from(*s))
        .collect();
    let loud: Vec<f64> = samples
        .chunks(960)
        .filter(|w| (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt() > 1000.0)
        .flatten()
        .copied()
        .collect();
    println!(
        "speaker: {} ms recorded, {} ms with sound",
        samples.len() / 48,
        loud.len() / 48
    );
    if loud.len() < 48_000 {
        bail!(
            "Outpost's speaker played only {} ms of sound",
            loud.len() / 48
        );
    }
    let window = &loud[loud.len() - 24_000..];
    let f = peak_hz(window);
    println!("speaker: peak at {f} Hz");
    if (f - 660.0).abs() > 660.0 * 0.02 {
        bail!("Outpost's speaker played {f} Hz, not the agent's 660 Hz");
    }
    Ok(())
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn main() {
    let mut pulse = Pulse::start_for_this_process();
    outpost_tests::server::run_each_kind(
        "agent_hears_the_microphone_and_outpost_plays_the_agent_with_transcripts",
        |kind| {
            // A fresh sound server for each run (a scenario may kill it).
            pulse.restart()?;
            scenario(&pulse, kind)
        },
    );
}
