//! End to end, voice with a real LiveKit Agents `AgentSession` (PyPI `livekit-agents`,
//! `tests/py/lk_voice_agent.py`): the framework's own VAD (Silero, offline) and speech
//! pipeline, with scripted plugins written against its STT, LLM and TTS interfaces (the
//! STT answers a fixed transcript for each stretch of speech the VAD cut; the TTS speaks
//! with `espeak-ng`). Outpost is the session engine and the desktop app's voice hub
//! (`outpost_core::Session` + `outpost_desktop::voice::VoiceHub`, with the real device
//! code: outpost-audio on cpal → ALSA → a private PulseAudio daemon), through
//! `outpost-room`.
//!
//! Outpost's microphone is the `mic_in` null sink's monitor, into which the test plays a
//! WAV of `espeak-ng` saying a sentence; its speaker is the `speaker` null sink, recorded
//! from its monitor. Checked:
//! - the agent's STT is handed that speech (over half a second, loud), so Outpost's
//!   microphone reached the agent through its VAD;
//! - the user's transcript comes back to Outpost as the user's words (final), and the
//!   agent's reply as the assistant's message;
//! - the agent's speech plays on Outpost's speaker: the recording's loudness envelope
//!   (10 ms RMS) matches espeak-ng's audio of the reply (normalised cross-correlation
//!   of each 400 ms piece, each allowed 300 ms of drift for a jitter-buffer underrun,
//!   ≥ 0.8 on average; the whole ≥ 0.5) and has about as much sound (±30 %);
//! - the reply's transcript is in step with its audio: its first words arrive at most
//!   1.5 s before Outpost begins playing it (the agent paces the text by its own playout,
//!   which is ahead of Outpost's by the network, the jitter buffer and the speaker's queue), the text is complete only after that, and no later
//!   than 2 s after the sound stopped;
//! - the history holds both.
//!
//! No test harness: `PULSE_SERVER` must be set before any thread starts (as in
//! `voice_e2e.rs`). Needs root, iproute2, pulseaudio, espeak-ng and `.venv-agents`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use outpost_core::store::{ConversationId, Role, TimelineItem};
use outpost_core::{ConnectOptions, Core, Credentials, ToolsConfig, UiEvent};
use outpost_desktop::contract::{AppEvent, DeviceState, VoiceControl, VoiceMode};
use outpost_desktop::voice::VoiceHub;
use outpost_tests::lkclient::Env;
use outpost_tests::proc::Proc;
use outpost_tests::pulse::Pulse;
use outpost_tests::python;
use outpost_tests::server::ServerKind;
use outpost_tests::speech::{best_match, envelope, espeak, piecewise_match, read_wav};
use serde_json::Value;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "voice-agents-e2e";
const OUTPOST: &str = "outpost-user";
const AGENT: &str = "voice-session-agent";
const WAIT: Duration = Duration::from_secs(90);
/// What the test "says" into Outpost's microphone.
const SPOKEN: &str = "Hello agent, can you hear me?";
/// The scripted STT's transcript of any speech, and the scripted LLM's answer.
const TRANSCRIPT: &str = "Hello agent";
const REPLY: &str = "I hear you loud and clear.";

fn token(identity: &str, kind: &str) -> String {
    outpost_tests::lkclient::dev_token(ROOM, identity, kind).unwrap()
}

/// The agent's JSON lines, each with when it arrived.
type Lines = Arc<Mutex<Vec<(Instant, Value)>>>;

fn agent_event(lines: &Lines, event: &str) -> Option<Value> {
    lines
        .lock()
        .unwrap()
        .iter()
        .find(|(_, v)| v["event"] == event)
        .map(|(_, v)| v.clone())
}

async fn wait_agent(lines: &Lines, event: &str, agent: &Proc) -> anyhow::Result<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = agent_event(lines, event) {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!(
                "the agent never reported {event:?}; it said {:?}\nits stderr:\n{}",
                lines
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|(_, v)| v.to_string())
                    .collect::<Vec<_>>(),
                agent.stderr()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn scenario(pulse: &Pulse, kind: ServerKind) -> anyhow::Result<()> {
    let files = tempfile::tempdir()?;
    let spoken_wav = files.path().join("spoken.wav");
    let reply_wav = files.path().join("reply.wav");
    espeak(SPOKEN, &spoken_wav)?;
    espeak(REPLY, &reply_wav)?;

    let env = Env::on(kind, Path::new(ROOM_BIN))?;
    let py = python::agents_python()?;
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(python::scripts_dir().join("lk_voice_agent.py"))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_TOKEN", token(AGENT, "agent"))
        .env("OUTPOST_IDENTITY", OUTPOST)
        .env("LK_USER_TRANSCRIPT", TRANSCRIPT)
        .env("LK_REPLY", REPLY)
        .env("LK_TIMEOUT", "180")
        .env("PYTHONWARNINGS", "ignore");
    let mut agent = Proc::spawn("lk_voice_agent", cmd)?;
    let rx = agent.stdout_lines()?;
    let lines: Lines = Arc::default();
    {
        let lines = Arc::clone(&lines);
        std::thread::spawn(move || {
            while let Ok(l) = rx.recv() {
                match serde_json::from_str::<Value>(&l) {
                    Ok(v) => lines.lock().unwrap().push((Instant::now(), v)),
                    Err(_) => println!("agent: {l}"),
                }
            }
        });
    }
    let (mut rec, recorded) = pulse.record("speaker.monitor")?;
    let rec_started = Instant::now();

    let data = tempfile::tempdir()?;
    let data_dir = data.path().to_path_buf();
    let url = env.server.url.clone();
    let server = pulse.server();
    let agent = Arc::new(agent);
    let agent_in = Arc::clone(&agent);
    let lines_in = Arc::clone(&lines);
    let outcome = outpost_tests::lkclient::in_netns(
        &env.pair.client_ns.clone(),
        move || async move {
            let agent = agent_in;
            let lines = lines_in;
            wait_agent(&lines, "ready", &agent).await?;
            let core = Core::open(Some(data_dir), ToolsConfig::defaults())?;
            let mut opts = ConnectOptions::new(Credentials::Token {
                url,
                token: token(OUTPOST, ""),
            });
            opts.voice = true;
            opts.assistant_identity = Some(AGENT.into());
            opts.room_name = Some(ROOM.into());
            let (session, mut events) = core.connect(opts).await?;
            let session = Arc::new(session);
            // The app's events with when they came (the output level says when Outpost
            // played sound).
            let app_events: Arc<Mutex<Vec<(Instant, AppEvent)>>> = Arc::default();
            let sink = Arc::clone(&app_events);
            let hub = VoiceHub::new(
                Arc::new(move |e| {
                    sink.lock().unwrap().push((Instant::now(), e));
                }),
                true,
            );
            hub.attach(Arc::clone(&session));
            let st = hub.start(None, None).await;
            ensure!(st.input.state == DeviceState::Ready, "{st:?}");
            ensure!(st.output.state == DeviceState::Ready, "{st:?}");
            // Open mic: outpost-room announces the track with its first audio, and the
            // agent's room_io subscribes to it.
            let st = hub.control(VoiceControl {
                muted: Some(false),
                mode: Some(VoiceMode::OpenMic),
                talking: None,
                echo_cancellation: None,
            });
            ensure!(st.transmitting, "{st:?}");
            wait_agent(&lines, "mic", &agent).await?;
            // Give the agent's audio input a moment to start reading the track.
            tokio::time::sleep(Duration::from_millis(1500)).await;

            // Speak into the microphone.
            let played = Command::new("paplay")
                .arg("--device=mic_in")
                .arg(&spoken_wav)
                .env("PULSE_SERVER", &server)
                .stdout(Stdio::null())
                .status()
                .context("running paplay")?;
            ensure!(played.success(), "paplay: {played}");

            // The agent's STT was handed that speech.
            let heard = wait_agent(&lines, "stt", &agent).await?;
            println!("the agent's STT was handed: {heard}");
            let secs = heard["seconds"].as_f64().unwrap_or(0.0);
            let rms = heard["rms"].as_f64().unwrap_or(0.0);
            ensure!(
                secs >= 0.5 && rms > 300.0,
                "the agent's STT got {secs} s at RMS {rms}: not the speech played"
            );

            // Outpost: the user's words (final), then the agent's reply.
            let mut seen: Vec<(Instant, UiEvent)> = Vec::new();
            let (mut user_final, mut reply_at) = (None, None);
            while user_final.is_none() || reply_at.is_none() {
                let ev = match tokio::time::timeout(WAIT, events.recv()).await {
                    Ok(Some(e)) => e,
                    Ok(None) => bail!("the session ended; saw {seen:#?}"),
                    Err(_) => bail!(
                        "no UI event for {WAIT:?}; saw {seen:#?}\nthe agent said {:?}",
                        lines.lock().unwrap()
                    ),
                };
                let now = Instant::now();
                match &ev {
                    UiEvent::UserTranscript {
                        text,
                        is_final: true,
                        ..
                    } => user_final = Some(text.clone()),
                    UiEvent::AssistantMessage { text, .. } if text.trim() == REPLY => {
                        reply_at = Some(now);
                    }
                    _ => {}
                }
                seen.push((now, ev));
            }
            ensure!(
                user_final.as_deref() == Some(TRANSCRIPT),
                "the user's words: {user_final:?}"
            );
            let reply_at = reply_at.unwrap();
            // Let the reply finish playing.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let _ = wait_agent(&lines, "tts", &agent).await?;

            // When Outpost played sound (its output level), against the reply's text.
            let levels: Vec<(Instant, f32)> = app_events
                .lock()
                .unwrap()
                .iter()
                .filter_map(|(t, e)| match e {
                    AppEvent::VoiceLevel(l) => Some((*t, l.output)),
                    _ => None,
                })
                .collect();
            let loud: Vec<Instant> = levels
                .iter()
                .filter(|(_, l)| *l > 0.05)
                .map(|(t, _)| *t)
                .collect();
            let (Some(first), Some(last)) = (loud.first(), loud.last()) else {
                bail!(
                    "Outpost's output level never moved; voice: {:?}",
                    hub.status()
                );
            };
            let first_text = seen
                .iter()
                .find(|(_, e)| match e {
                    UiEvent::AssistantDelta { .. } => true,
                    UiEvent::AssistantMessage { text, .. } => {
                        !text.trim().is_empty() && REPLY.starts_with(text.trim())
                    }
                    _ => false,
                })
                .map(|(t, _)| *t)
                .unwrap_or(reply_at);
            let ms = |a: Instant, b: Instant| {
                if a >= b {
                    a.duration_since(b).as_millis() as i64
                } else {
                    -(b.duration_since(a).as_millis() as i64)
                }
            };
            println!(
                "sync: sound from +0 to +{} ms; the reply's first text at {:+} ms, complete at {:+} ms",
                ms(*last, *first),
                ms(first_text, *first),
                ms(reply_at, *first)
            );
            let pieces: Vec<String> = seen
                .iter()
                .filter_map(|(t, e)| match e {
                    UiEvent::AssistantMessage { text, .. } => {
                        Some(format!("{:+} ms {text:?}", ms(*t, *first)))
                    }
                    _ => None,
                })
                .collect();
            println!("the reply's text as it came: {pieces:?}");
            ensure!(
                first_text + Duration::from_millis(1500) >= *first,
                "the reply's text began {} ms before Outpost played its voice",
                ms(*first, first_text)
            );
            ensure!(
                reply_at >= *first,
                "the reply's text was complete {} ms before Outpost played its voice",
                ms(*first, reply_at)
            );
            ensure!(
                reply_at <= *last + Duration::from_secs(2),
                "the reply's text came {} ms after its voice ended",
                ms(reply_at, *last)
            );

            hub.stop().await;
            let conversation = session.conversation_id().context("no conversation")?;
            session.leave().await?;
            core.store().flush().await?;
            let timeline = core.store().timeline(ConversationId(conversation)).await?;
            let said = |role: Role, text: &str| {
                timeline.items.iter().any(
                    |i| matches!(i, TimelineItem::Message(m) if m.role == role && m.text.trim() == text),
                )
            };
            ensure!(said(Role::User, TRANSCRIPT), "{timeline:#?}");
            ensure!(said(Role::Assistant, REPLY), "{timeline:#?}");
            anyhow::Ok(())
        },
    );
    let _ = rec.kill();
    let _ = rec.wait();
    if let Err(e) = outcome {
        bail!(
            "{e:#}\nthe agent's stderr:\n{}\nthe room server's log:\n{}",
            agent.stderr(),
            env.server.proc.stderr()
        );
    }

    // The agent's speech on Outpost's speaker: its loudness envelope matches espeak-ng's
    // audio of the reply.
    let samples: Vec<f64> = recorded
        .lock()
        .unwrap()
        .iter()
        .map(|s| f64::from(*s))
        .collect();
    if let Ok(path) = std::env::var("VOICE_AGENTS_E2E_RAW") {
        // The speaker's recording (s16le, 48 kHz, mono), to look at.
        let bytes: Vec<u8> = samples
            .iter()
            .flat_map(|v| (*v as i16).to_le_bytes())
            .collect();
        let _ = std::fs::write(path, bytes);
    }
    let heard = envelope(&samples, 48_000);
    let (reference, rate) = read_wav(&reply_wav)?;
    let want = envelope(&reference, rate);
    let (corr, at) = best_match(&heard, &want);
    let pieces = piecewise_match(&heard, &want, at);
    let loud_ms = heard.iter().filter(|v| **v > 300.0).count() * 10;
    let ref_ms = want.iter().filter(|v| **v > 300.0).count() * 10;
    println!(
        "speaker: {} ms recorded (from {:?} after the agent started), {loud_ms} ms with sound \
         (the reply has {ref_ms} ms); envelope correlation {corr:.3} at {} ms, piece by piece \
         {pieces:.3}",
        samples.len() / 48,
        rec_started.elapsed(),
        at * 10
    );
    let verdict = if pieces < 0.8 || corr < 0.5 {
        Some(format!(
            "Outpost's speaker did not play the agent's speech (envelope correlation {corr:.3}, \
             piece by piece {pieces:.3})"
        ))
    } else if loud_ms * 10 < ref_ms * 7 || loud_ms * 10 > ref_ms * 13 {
        Some(format!(
            "Outpost's speaker played {loud_ms} ms of sound for a reply of {ref_ms} ms"
        ))
    } else {
        None
    };
    if let Some(why) = verdict {
        // What the room server saw (subscriptions, forwarding) and the agent's side.
        bail!(
            "{why}\nthe agent's stderr:\n{}\nthe room server's log:\n{}",
            agent.stderr(),
            env.server.proc.stderr()
        );
    }
    drop(files);
    Ok(())
}

fn main() {
    let mut pulse = Pulse::start_for_this_process();
    outpost_tests::server::run_each_kind(
        "a_livekit_agents_session_hears_outposts_microphone_and_speaks_through_its_speaker",
        |kind| {
            // A fresh sound server for each run (a scenario may kill it).
            pulse.restart()?;
            scenario(&pulse, kind)
        },
    );
}
