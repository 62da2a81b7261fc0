//! End to end, voice, in the real app: `outpost-app` under Xvfb (the `app_e2e.rs`
//! harness) with its sound through a private PulseAudio daemon
//! ([`outpost_tests::pulse`]: a 440 Hz tone played into the `mic_in` null sink is the
//! microphone; the `speaker` sink is the output), talking to an official-SDK voice agent
//! (`tests/py/voice_agent.py`).
//!
//! The user turns voice on: the mic state reads "Hold to talk" and nothing is sent. Holding
//! the talk button makes it "Mic live", the level meter moves, and the agent hears 440 Hz.
//! The agent's transcript of that speech shows as the user's words (final), and its own
//! words as the assistant's. Releasing the button and muting are shown. The agent's voice
//! (a 660 Hz tone) comes out of the app's speaker: recorded from the `speaker` sink's
//! monitor, at least a second of it, at 660 Hz (±2 %), and still playing three seconds
//! later (2.5 s of them recorded, no silence over 1.5 s, sound in the last second).
//!
//! Further tests: a real `AgentSession`; no sound server at all; a headset unplugged mid-call
//! and plugged back (`pactl unload-module` of both null sinks); a full rejoin mid-call (the
//! microphone published again, the agent's voice played again).
//!
//! Needs what `app_e2e.rs` needs plus pulseaudio (scripts/setup.sh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::ffi::OsString;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use common::{App, Assistant, Driver, Profile, RoomServer, agent_command, press, wait_for};
use outpost_tests::lkclient::{NsPair, in_netns};
use outpost_tests::pulse::{Pulse, peak_hz};
use outpost_tests::server::ServerKind;

const ROOM: &str = "voice-app-e2e";

outpost_tests::both_servers!(
    push_to_talk_in_the_app_reaches_a_voice_agent_with_transcripts,
    push_to_talk_in_the_app_talks_with_a_livekit_agents_session,
    voice_comes_back_after_a_full_rejoin,
);

/// The app's profile under `root` (config, data and an empty home), its settings file
/// pointing at the room server `url`, and the environment the app is started with:
/// the token in place of the keyring, `pulse_server` as its sound server. Returns the
/// config folder and that environment.
fn app_profile(
    root: &std::path::Path,
    url: &str,
    token: String,
    pulse_server: OsString,
) -> (std::path::PathBuf, Vec<(&'static str, OsString)>) {
    let profile = Profile::new(root).unwrap();
    profile.save_settings(url, ROOM).unwrap();
    let mut env = profile.env(Some(&token));
    env.push(("PULSE_SERVER", pulse_server));
    (profile.config, env)
}

/// Which assistant a test of this file talks with.
#[derive(Clone, Copy)]
enum Peer {
    /// `voice_agent.py` (the agent kind: the app takes the first agent in the room as its
    /// assistant), talking for 20 s.
    Talking,
    /// `voice_agent.py` hearing the microphone all along and talking for 280 s.
    Listening,
    /// `lk_voice_agent.py`: a real `AgentSession` with scripted speech plugins.
    Session,
}

impl Peer {
    /// Starts the peer in namespace `netns` against `url`; its stderr goes under `dir`.
    fn start(self, netns: &str, url: &str, dir: &std::path::Path) -> anyhow::Result<Assistant> {
        let mut cmd = match self {
            Peer::Talking | Peer::Listening => {
                let py = outpost_tests::python::python()?;
                agent_command(&py, "voice_agent.py", netns, url, ROOM, "voice-agent")?
            }
            Peer::Session => {
                let py = outpost_tests::python::agents_python()?;
                let script = "lk_voice_agent.py";
                agent_command(&py, script, netns, url, ROOM, "voice-session-agent")?
            }
        };
        cmd.env("LK_TIMEOUT", "300");
        match self {
            Peer::Talking => cmd.env("LK_TALK_SECONDS", "20"),
            Peer::Listening => cmd
                .env("LK_KEEP_LISTENING", "1")
                .env("LK_TALK_SECONDS", "280"),
            Peer::Session => cmd
                .env("LK_USER_TRANSCRIPT", TRANSCRIPT)
                .env("LK_REPLY", REPLY)
                .env("PYTHONWARNINGS", "ignore"),
        };
        Assistant::spawn(cmd, &dir.join("agent.stderr"))
    }
}

/// What a scenario of [`with_call`] works with.
struct Call {
    agent: Arc<Assistant>,
    pulse: Option<Arc<Pulse>>,
    pair: Arc<NsPair>,
    /// The server's URL.
    url: String,
}

impl Call {
    /// The app's sound server (for a test that gave one).
    fn pulse(&self) -> &Pulse {
        self.pulse.as_deref().expect("this test's sound server")
    }
}

/// Runs `scenario` with the app and `peer` through a `kind` server. The app's sound server
/// is `pulse`; with none, one that is not there. The client's link is brought back up
/// afterwards, whatever happened. On failure it panics with the app's log, the peer's
/// report and livekit-server's lines about tracks and participants.
fn with_call<S, F>(kind: ServerKind, peer: Peer, pulse: Option<Arc<Pulse>>, scenario: S)
where
    S: FnOnce(Call) -> F + Send + 'static,
    F: Future<Output = anyhow::Result<App>> + 'static,
{
    let _one = common::serial();
    // The sound server lives until the app has quit.
    let _sound = pulse.clone();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let pair = Arc::new(NsPair::create().expect("network namespaces (run as root)"));
    let server = RoomServer::start_on(kind, &pair).unwrap();
    let token = server.token(ROOM, "outpost-app").unwrap();
    let sound_server = match &pulse {
        Some(p) => p.server().into(),
        None => root.join("no-pulse/native").into_os_string(),
    };
    let (config, env) = app_profile(&root, &server.url, token, sound_server);
    let client_ns = pair.client_ns.clone();
    let url = server.url.clone();
    let logs = root.join("logs");
    let link = Arc::clone(&pair);
    let outcome = in_netns(&pair.client_ns.clone(), move || async move {
        let driver = Driver::start(&client_ns, &logs, &env).await?;
        let agent = Arc::new(peer.start(&link.server_ns, &url, &root)?);
        let r = scenario(Call {
            agent: Arc::clone(&agent),
            pulse,
            pair: Arc::clone(&link),
            url,
        })
        .await;
        // The link must come back even if the scenario failed half way.
        let _ = link.set_client_link(true);
        let r = App::quit_after(r, &driver, &config).await;
        // The app's own account of its devices and its call, for the record.
        for l in driver.log().lines().filter(|l| {
            [
                "microphone",
                "speaker",
                "assistant audio",
                "outpost_audio",
                "rejoin",
                "reconnect",
                "muted",
            ]
            .iter()
            .any(|w| l.contains(w))
        }) {
            eprintln!("app: {l}");
        }
        driver.with_log(r, Some(&agent))
    });
    // livekit-server's own account of the tracks and the rejoin, when it failed.
    let server_log = match &outcome {
        Err(_) => server
            .log()
            .lines()
            .filter(|l| {
                ["outpost-app", "track", "mute", "participant", "subscri"]
                    .iter()
                    .any(|w| l.contains(w))
            })
            .map(|l| l.chars().take(600).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n"),
        Ok(()) => String::new(),
    };
    drop(server);
    drop(pair);
    if let Err(e) = outcome {
        let parts: Vec<String> = e.chain().map(ToString::to_string).collect();
        panic!(
            "{}\n--- the server's log (tracks, participants) ---\n{server_log}",
            parts.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    drop(dir);
}

fn push_to_talk_in_the_app_reaches_a_voice_agent_with_transcripts(kind: ServerKind) {
    let pulse = Arc::new(Pulse::start().expect("pulseaudio"));
    let mut mic = pulse.play_tone("mic_in", 440.0, 300).unwrap();
    let (mut rec, recorded) = pulse.record("speaker.monitor").unwrap();
    let speaker = Speaker {
        recorded: Arc::clone(&recorded),
        pulse: pulse.server(),
    };
    with_call(kind, Peer::Talking, Some(pulse), move |c| async move {
        scenario(&c.agent, &speaker).await
    });
    let _ = mic.kill();
    let _ = rec.kill();
    let _ = (mic.wait(), rec.wait());
}

fn agent_said(agent: &Assistant, op: &str) -> Option<serde_json::Value> {
    agent.events().into_iter().find(|e| e["op"] == op)
}

/// The app's speaker: the `speaker` sink's monitor as recorded so far.
struct Speaker {
    recorded: Arc<Mutex<Vec<i16>>>,
    pulse: String,
}

impl Speaker {
    /// The recorded 20 ms blocks that carry sound (RMS above about -30 dBFS), joined.
    fn loud(&self) -> Vec<f64> {
        let rec = self.recorded.lock().unwrap();
        rec.chunks(960)
            .filter(|w| {
                let e: f64 = w.iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
                (e / w.len() as f64).sqrt() > 1000.0
            })
            .flatten()
            .map(|v| f64::from(*v))
            .collect()
    }

    /// Milliseconds since the first block with sound, and the longest run of silent
    /// blocks after it.
    fn since_first_sound(&self) -> (usize, usize) {
        let rec = self.recorded.lock().unwrap();
        let loud: Vec<bool> = rec
            .chunks(960)
            .map(|w| {
                let e: f64 = w.iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
                (e / w.len() as f64).sqrt() > 1000.0
            })
            .collect();
        let Some(first) = loud.iter().position(|l| *l) else {
            return (0, 0);
        };
        let (mut run, mut longest) = (0, 0);
        for l in &loud[first..] {
            run = if *l { 0 } else { run + 1 };
            longest = longest.max(run);
        }
        ((loud.len() - first) * 20, longest * 20)
    }

    /// Samples with sound (in loud 20 ms blocks) from sample `from` on.
    fn loud_since(&self, from: usize) -> usize {
        let rec = self.recorded.lock().unwrap();
        rec.get(from..)
            .unwrap_or_default()
            .chunks(960)
            .filter(|w| {
                let e: f64 = w.iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
                (e / w.len() as f64).sqrt() > 1000.0
            })
            .map(<[i16]>::len)
            .sum()
    }

    fn recorded_ms(&self) -> usize {
        self.recorded.lock().unwrap().len() / 48
    }

    /// What the sound server says about who plays where (for a failure's report).
    fn sound_server(&self) -> String {
        let out = Command::new("pactl")
            .args(["list", "sink-inputs"])
            .env("PULSE_SERVER", &self.pulse)
            .output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
            Err(e) => format!("pactl: {e}"),
        }
    }
}

async fn scenario(agent: &Assistant, speaker: &Speaker) -> anyhow::Result<App> {
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    wait_for("the agent to be ready", || async {
        Ok(agent_said(agent, "ready"))
    })
    .await
    .with_context(|| agent.report())?;

    app.click("[data-testid=voice-toggle]")
        .await
        .context("clicking Voice")?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    app.wait_css("[data-testid=input-level]")
        .await
        .context("the level meter")?;

    // Hold to talk (a pointer held on the button).
    let pressed = app
        .js(&press("pointerdown"))
        .await
        .context("pressing the talk button")?;
    ensure!(pressed == "ok", "pressing the talk button: {pressed}");
    app.wait_text("[data-testid=mic-state]", "Mic live").await?;
    let heard = wait_for("the agent to hear the microphone", || async {
        Ok(agent_said(agent, "heard"))
    })
    .await
    .with_context(|| agent.report())?;
    let f = heard["freq_hz"].as_f64().unwrap_or(0.0);
    ensure!((f - 440.0).abs() <= 8.8, "the agent heard {f} Hz");
    let level = app
        .js("return document.querySelector('[data-testid=input-level]').value;")
        .await
        .context("reading the meter")?;
    ensure!(
        level.as_f64().is_some_and(|l| l > 0.5),
        "the meter shows {level} while a loud tone plays"
    );
    app.js(&press("pointerup"))
        .await
        .context("releasing the talk button")?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;

    // The transcripts: the user's speech as their words, the agent's as its words.
    app.wait_text(
        "[data-testid=user-message][data-speech=final]",
        "Hello agent",
    )
    .await?;
    app.wait_assistant("I hear you.").await?;

    // Mute is always visible.
    app.click("[data-testid=mute]")
        .await
        .context("clicking Mute")?;
    app.wait_text("[data-testid=mic-state]", "Muted").await?;

    // The agent's voice (660 Hz, talking since it joined) on the app's speaker: at least a
    // second of sound, the last half second at 660 Hz.
    let heard = wait_for("the agent's voice on the speaker", || async {
        let loud = speaker.loud();
        Ok((loud.len() >= 48_000).then_some(loud))
    })
    .await;
    let loud = match heard {
        Ok(l) => l,
        Err(e) => {
            let bar = app
                .js("return document.querySelector('[data-testid=voice-bar]').innerText;")
                .await
                .unwrap_or_default();
            return Err(e.context(format!(
                "the speaker's monitor: {} ms recorded, {} ms with sound; the voice bar: {bar}\n\
                 --- pactl list sink-inputs ---\n{}",
                speaker.recorded_ms(),
                speaker.loud().len() / 48,
                speaker.sound_server()
            )));
        }
    };
    // And it keeps playing: three seconds more, of which the speaker's monitor records
    // at least 2.5 s (a null sink that nothing plays on records nothing, so a speaker
    // stream that stopped shows as a recording that stops growing), no silence over
    // 1.5 s (this loaded 2-core machine has shown glitches near a second that recover),
    // and sound in the last second.
    let at_ms = speaker.recorded_ms();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (since_ms, gap_ms) = speaker.since_first_sound();
    if let Ok(path) = std::env::var("VOICE_APP_E2E_RAW") {
        // The monitor's recording (s16le, 48 kHz, mono), to look at by ear or in a tool.
        let rec = speaker.recorded.lock().unwrap();
        let bytes: Vec<u8> = rec.iter().flat_map(|v| v.to_le_bytes()).collect();
        let _ = std::fs::write(path, bytes);
    }
    let f = peak_hz(&loud[loud.len() - 24_000..]);
    eprintln!(
        "speaker: {} ms recorded, {} ms with sound over the {since_ms} ms since it began \
         (longest silence {gap_ms} ms), peak {f} Hz",
        speaker.recorded_ms(),
        speaker.loud().len() / 48
    );
    ensure!(
        (f - 660.0).abs() <= 660.0 * 0.02,
        "the app's speaker played {f} Hz, not the agent's 660 Hz"
    );
    let tail = speaker
        .recorded
        .lock()
        .unwrap()
        .len()
        .saturating_sub(48_000);
    let end_ms = speaker.loud_since(tail) / 48;
    let grown_ms = speaker.recorded_ms() - at_ms;
    ensure!(
        grown_ms >= 2500 && gap_ms <= 1500 && end_ms >= 800,
        "the app's speaker played {grown_ms} ms in 3 s (the longest silence {gap_ms} ms, \
         {end_ms} ms of sound in the last second); the voice bar: {}\n\
         --- pactl list sink-inputs ---\n{}",
        app.js("return document.querySelector('[data-testid=voice-bar]').innerText;")
            .await
            .unwrap_or_default(),
        speaker.sound_server()
    );
    Ok(app)
}

// --- A real LiveKit Agents AgentSession ---------------------------------------------------

/// The user's speech, played into the app's microphone; what the agent's scripted STT
/// answers for it, and its scripted reply (spoken with espeak-ng).
const SPOKEN: &str = "Hello agent, can you hear me?";
const TRANSCRIPT: &str = "Hello agent";
const REPLY: &str = "I hear you loud and clear.";

/// The app with a real `AgentSession` (`tests/py/lk_voice_agent.py`: the framework's VAD,
/// scripted STT and LLM, espeak-ng TTS). Holding the talk button while espeak-ng's speech
/// plays into the microphone: the agent's STT is handed it, the chat shows the user's
/// words and the agent's reply, and the reply plays on the app's speaker (its loudness
/// envelope matches espeak-ng's audio of it).
fn push_to_talk_in_the_app_talks_with_a_livekit_agents_session(kind: ServerKind) {
    use outpost_tests::speech::{assert_reply_played, espeak};
    let pulse = Arc::new(Pulse::start().expect("pulseaudio"));
    let dir = tempfile::tempdir().unwrap();
    let spoken = dir.path().join("spoken.wav");
    let reply = dir.path().join("reply.wav");
    espeak(SPOKEN, &spoken).unwrap();
    espeak(REPLY, &reply).unwrap();
    let (mut rec, recorded) = pulse.record("speaker.monitor").unwrap();
    let pulse_server = pulse.server();
    with_call(kind, Peer::Session, Some(pulse), move |c| async move {
        session_scenario(&c.agent, &spoken, &pulse_server).await
    });
    let _ = rec.kill();
    let _ = rec.wait();
    // The reply on the app's speaker.
    assert_reply_played(&recorded.lock().unwrap(), &reply).unwrap();
}

fn session_event(agent: &Assistant, event: &str) -> Option<serde_json::Value> {
    agent.events().into_iter().find(|e| e["event"] == event)
}

async fn session_scenario(
    agent: &Assistant,
    spoken: &std::path::Path,
    pulse_server: &str,
) -> anyhow::Result<App> {
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    wait_for("the agent to be ready", || async {
        Ok(session_event(agent, "ready"))
    })
    .await
    .with_context(|| agent.report())?;
    app.click("[data-testid=voice-toggle]")
        .await
        .context("clicking Voice")?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    let pressed = app
        .js(&press("pointerdown"))
        .await
        .context("pressing the talk button")?;
    ensure!(pressed == "ok", "pressing the talk button: {pressed}");
    app.wait_text("[data-testid=mic-state]", "Mic live").await?;
    // The agent subscribes to the microphone (announced when its offer is answered).
    wait_for("the agent to subscribe to the microphone", || async {
        Ok(session_event(agent, "mic"))
    })
    .await
    .with_context(|| agent.report())?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Speak (paplay returns when the speech has played), then keep holding a moment of
    // silence so the agent's VAD hears the speech end.
    let wav = spoken.to_path_buf();
    let server = pulse_server.to_owned();
    let played = tokio::task::spawn_blocking(move || {
        Command::new("paplay")
            .arg("--device=mic_in")
            .arg(&wav)
            .env("PULSE_SERVER", &server)
            .status()
    })
    .await??;
    ensure!(played.success(), "paplay: {played}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    app.js(&press("pointerup"))
        .await
        .context("releasing the talk button")?;

    let heard = wait_for("the agent's STT to be handed speech", || async {
        Ok(session_event(agent, "stt"))
    })
    .await
    .with_context(|| agent.report())?;
    let secs = heard["seconds"].as_f64().unwrap_or(0.0);
    let rms = heard["rms"].as_f64().unwrap_or(0.0);
    ensure!(
        secs >= 0.5 && rms > 300.0,
        "the agent's STT got {secs} s at RMS {rms}: not the speech played"
    );
    app.wait_text("[data-testid=user-message][data-speech=final]", TRANSCRIPT)
        .await?;
    app.wait_assistant(REPLY).await?;
    // Let the reply finish playing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(app)
}

// --- No sound at all ----------------------------------------------------------------------

/// No sound server (and no sound card): Voice on shows both devices unavailable with a
/// reason, and the text chat with the `AgentSession` goes on.
#[test]
fn without_audio_devices_voice_says_so_and_the_text_chat_goes_on() {
    with_call(ServerKind::Room, Peer::Session, None, |c| async move {
        no_device_scenario(&c.agent).await
    });
}

async fn no_device_scenario(agent: &Assistant) -> anyhow::Result<App> {
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    wait_for("the agent to be ready", || async {
        Ok(session_event(agent, "ready"))
    })
    .await
    .with_context(|| agent.report())?;
    app.click("[data-testid=voice-toggle]")
        .await
        .context("clicking Voice")?;
    app.wait_text("[data-testid=mic-state]", "Microphone unavailable")
        .await?;
    let bar = app
        .js("return document.querySelector('[data-testid=voice-bar]').innerText;")
        .await?;
    let bar = bar.as_str().unwrap_or_default().to_owned();
    eprintln!("the voice bar without devices: {bar:?}");
    ensure!(
        bar.contains("No microphone was found") && bar.contains("The speaker could not be opened"),
        "the voice bar does not say why: {bar:?}"
    );
    // Typing still works, and the agent answers in text.
    app.say("hello").await?;
    app.wait_assistant(REPLY).await?;
    Ok(app)
}

// --- A headset unplugged mid-call ---------------------------------------------------------

/// The hearing reports of the agent so far (LK_KEEP_LISTENING): the highest count, and the
/// frequency of the last one.
fn hearing(agent: &Assistant) -> (u64, f64) {
    agent
        .events()
        .into_iter()
        .filter(|e| e["op"] == "hearing")
        .map(|e| {
            (
                e["n"].as_u64().unwrap_or(0),
                e["freq_hz"].as_f64().unwrap_or(0.0),
            )
        })
        .max_by_key(|(n, _)| *n)
        .unwrap_or((0, 0.0))
}

/// Mid-call, the headset goes (`pactl unload-module` of both null sinks: the microphone's
/// `mic_in`, whose monitor is the input, and the `speaker`; with neither there PulseAudio
/// has nowhere to move the app's streams and ends them): the voice bar says both are
/// disconnected, naming them, and a typed message still gets its answer. Plugged back in,
/// voice resumes without leaving the call: the agent's voice is heard again on the new
/// `speaker`'s monitor and, holding the talk button, the agent hears the microphone again
/// on the same published track.
#[test]
fn a_headset_unplugged_mid_call_is_shown_and_voice_resumes_when_it_is_back() {
    let pulse = Arc::new(Pulse::start().expect("pulseaudio"));
    with_call(
        ServerKind::Room,
        Peer::Listening,
        Some(pulse),
        |c| async move { unplug_scenario(&c.agent, c.pulse()).await },
    );
}

/// Waits until the recording `recorded` holds a second of sound, and checks its last half
/// second is the agent's 660 Hz.
async fn agent_voice_on(recorded: &Arc<Mutex<Vec<i16>>>, when: &str) -> anyhow::Result<()> {
    let speaker = Speaker {
        recorded: Arc::clone(recorded),
        pulse: String::new(),
    };
    let loud = wait_for(
        &format!("the agent's voice on the speaker {when}"),
        || async {
            let loud = speaker.loud();
            Ok((loud.len() >= 48_000).then_some(loud))
        },
    )
    .await?;
    let f = peak_hz(&loud[loud.len() - 24_000..]);
    eprintln!("speaker {when}: peak {f} Hz");
    ensure!(
        (f - 660.0).abs() <= 660.0 * 0.02,
        "the app's speaker played {f} Hz {when}, not the agent's 660 Hz"
    );
    Ok(())
}

/// Holds the talk button until the agent reports hearing more than `before` seconds, at
/// 440 Hz.
async fn agent_hears_the_mic(app: &App, agent: &Assistant, when: &str) -> anyhow::Result<()> {
    let (before, _) = hearing(agent);
    let pressed = app.js(&press("pointerdown")).await?;
    ensure!(
        pressed == "ok",
        "pressing the talk button {when}: {pressed}"
    );
    app.wait_text("[data-testid=mic-state]", "Mic live").await?;
    let f = wait_for(
        &format!("the agent to hear the microphone {when}"),
        || async {
            let (n, f) = hearing(agent);
            Ok((n > before).then_some(f))
        },
    )
    .await
    .with_context(|| agent.report())?;
    app.js(&press("pointerup")).await?;
    eprintln!("the agent heard {f} Hz {when}");
    ensure!((f - 440.0).abs() <= 8.8, "the agent heard {f} Hz {when}");
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    Ok(())
}

/// Launches the app, waits until it is connected and the agent ready, and turns voice on
/// (push to talk: "Hold to talk").
async fn launch_with_voice(agent: &Assistant) -> anyhow::Result<App> {
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    wait_for("the agent to be ready", || async {
        Ok(agent_said(agent, "ready"))
    })
    .await
    .with_context(|| agent.report())?;
    app.click("[data-testid=voice-toggle]")
        .await
        .context("clicking Voice")?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    Ok(app)
}

async fn unplug_scenario(agent: &Assistant, pulse: &Pulse) -> anyhow::Result<App> {
    let mut mic = pulse.play_tone("mic_in", 440.0, 300)?;
    let (mut rec, recorded) = pulse.record("speaker.monitor")?;
    let app = launch_with_voice(agent).await?;
    agent_hears_the_mic(&app, agent, "before the unplug").await?;
    agent_voice_on(&recorded, "before the unplug").await?;

    // The headset goes: the microphone first, then the speaker.
    pulse.unplug("mic_in")?;
    pulse.unplug("speaker")?;
    let _ = (mic.kill(), rec.kill());
    let _ = (mic.wait(), rec.wait());
    app.wait_text("[data-testid=mic-state]", "Microphone unavailable")
        .await?;
    let bar = wait_for("both devices shown disconnected", || async {
        let bar = app
            .js("return document.querySelector('[data-testid=voice-bar]').innerText;")
            .await?;
        let bar = bar.as_str().unwrap_or_default().to_owned();
        let both = bar.contains("The microphone \"") && bar.contains("The speaker \"");
        Ok((both && bar.matches("was disconnected").count() == 2).then_some(bar))
    })
    .await?;
    eprintln!("the voice bar unplugged: {bar:?}");
    // The text chat goes on.
    app.say("still here").await?;
    app.wait_assistant("You typed: still here").await?;

    // Plugged back in: voice resumes in the same call.
    pulse.plug("speaker")?;
    pulse.plug("mic_in")?;
    let mut mic = pulse.play_tone("mic_in", 440.0, 300)?;
    let (mut rec, recorded) = pulse.record("speaker.monitor")?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    wait_for("the speaker's error to go", || async {
        let gone = app
            .js("return document.querySelector('[data-testid=output-error]') === null;")
            .await?;
        Ok((gone == true).then_some(()))
    })
    .await?;
    let r = async {
        agent_voice_on(&recorded, "after the replug").await?;
        agent_hears_the_mic(&app, agent, "after the replug").await?;
        let subscribed = agent
            .events()
            .into_iter()
            .filter(|e| e["op"] == "subscribed")
            .count();
        ensure!(
            subscribed == 1,
            "the microphone track was published {subscribed} times: the call should keep it"
        );
        anyhow::Ok(())
    }
    .await;
    let _ = (mic.kill(), rec.kill());
    let _ = (mic.wait(), rec.wait());
    r?;
    Ok(app)
}

// --- A full rejoin mid-call -----------------------------------------------------------------

/// The app's connection state as shown.
async fn connection(app: &App) -> anyhow::Result<String> {
    let v = app
        .js("return document.querySelector('[data-testid=connection-state]').innerText;")
        .await?;
    Ok(v.as_str().unwrap_or_default().trim().to_owned())
}

/// The app's link goes down mid-call for longer than the server's ping timeout: the room
/// server drops it and, without resume (the server's default), the client rejoins in full,
/// which ends its microphone track and the assistant's audio. Voice on all along: the app
/// publishes its microphone again (holding the talk button, the agent subscribes to a
/// second track and hears the microphone on it) and plays the agent's voice again on the
/// speaker.
fn voice_comes_back_after_a_full_rejoin(kind: ServerKind) {
    let pulse = Arc::new(Pulse::start().expect("pulseaudio"));
    with_call(kind, Peer::Listening, Some(pulse), |c| async move {
        rejoin_scenario(&c.agent, c.pulse(), &c.pair).await
    });
}

async fn rejoin_scenario(agent: &Assistant, pulse: &Pulse, link: &NsPair) -> anyhow::Result<App> {
    let mut mic = pulse.play_tone("mic_in", 440.0, 300)?;
    let (mut rec, recorded) = pulse.record("speaker.monitor")?;
    let r = async {
        let app = launch_with_voice(agent).await?;
        agent_hears_the_mic(&app, agent, "before the rejoin").await?;
        agent_voice_on(&recorded, "before the rejoin").await?;

        link.set_client_link(false)?;
        let down = std::time::Instant::now();
        wait_for("the app to notice the link is gone", || async {
            Ok((connection(&app).await? != "Connected").then_some(()))
        })
        .await?;
        // Past the server's 15 s ping timeout: the server has dropped the app.
        let left = Duration::from_secs(17).saturating_sub(down.elapsed());
        tokio::time::sleep(left).await;
        link.set_client_link(true)?;
        let at = recorded.lock().unwrap().len();
        wait_for("the app to be connected again", || async {
            Ok((connection(&app).await? == "Connected").then_some(()))
        })
        .await?;
        eprintln!(
            "connected again {} ms after the link went down",
            down.elapsed().as_millis()
        );
        app.wait_text("[data-testid=mic-state]", "Hold to talk")
            .await?;
        // The agent subscribes to the new microphone track; holding the talk button
        // makes it hear it.
        agent_hears_the_mic(&app, agent, "after the rejoin").await?;
        let subscribed = agent
            .events()
            .into_iter()
            .filter(|e| e["op"] == "subscribed")
            .count();
        ensure!(
            subscribed == 2,
            "the agent subscribed to {subscribed} microphone tracks"
        );
        // Which of the agent's listeners reports it is the SDK's business: its receiver
        // for the first track was seen to carry the second one's audio (the same
        // transceiver reused), so only the count of subscriptions is checked.
        let speaker = Speaker {
            recorded: Arc::clone(&recorded),
            pulse: pulse.server(),
        };
        wait_for(
            "the agent's voice on the speaker after the rejoin",
            || async { Ok((speaker.loud_since(at) >= 48_000).then_some(())) },
        )
        .await
        .with_context(|| speaker.sound_server())?;
        anyhow::Ok(app)
    }
    .await;
    let _ = (mic.kill(), rec.kill());
    let _ = (mic.wait(), rec.wait());
    r
}

// --- The room's operator mutes the user -------------------------------------------------------

/// livekit-server only (outpost-room has no room service API): the room's operator mutes
/// the app's microphone through the server's API. The app shows it muted; the user's
/// unmute lifts it, and holding the talk button reaches the agent again.
#[test]
fn the_rooms_mute_is_shown_and_the_users_unmute_lifts_it() {
    let pulse = Arc::new(Pulse::start().expect("pulseaudio"));
    with_call(
        ServerKind::LiveKit,
        Peer::Listening,
        Some(pulse),
        |c| async move { operator_mute_scenario(&c.agent, c.pulse(), &c.pair, &c.url).await },
    );
}

async fn operator_mute_scenario(
    agent: &Assistant,
    pulse: &Pulse,
    pair: &NsPair,
    url: &str,
) -> anyhow::Result<App> {
    let mut mic = pulse.play_tone("mic_in", 440.0, 300)?;
    let r = async {
        let app = launch_with_voice(agent).await?;
        agent_hears_the_mic(&app, agent, "before the room's mute").await?;
        let sid = agent_said(agent, "subscribed")
            .and_then(|e| e["track"].as_str().map(str::to_owned))
            .context("the agent names the microphone track")?;
        // The operator mutes while the user holds the talk button (so the agent's
        // "muted" below can only be the operator's).
        let mutes = || {
            agent
                .events()
                .into_iter()
                .filter(|e| e["op"] == "muted" && e["track"] == sid.as_str())
                .count()
        };
        ensure!(
            app.js(&press("pointerdown")).await? == "ok",
            "pressing talk"
        );
        app.wait_text("[data-testid=mic-state]", "Mic live").await?;
        let before = mutes();
        let py = outpost_tests::python::python()?;
        let out = pair
            .server_command(&py)
            .arg(outpost_tests::python::scripts_dir().join("room_admin.py"))
            .args(["mute_track", ROOM, "outpost-app", &sid])
            .current_dir(outpost_tests::python::scripts_dir())
            .env("LK_URL", url)
            .env("PYTHONWARNINGS", "ignore")
            .output()?;
        ensure!(
            out.status.success(),
            "room_admin.py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        app.wait_text("[data-testid=mic-state]", "Muted").await?;
        wait_for("the agent to see the microphone muted", || async {
            Ok((mutes() > before).then_some(()))
        })
        .await
        .with_context(|| agent.report())?;
        app.js(&press("pointerup")).await?;
        app.wait_text("[data-testid=mic-state]", "Muted").await?;
        app.click("[data-testid=mute]")
            .await
            .context("clicking Mute to unmute")?;
        app.wait_text("[data-testid=mic-state]", "Hold to talk")
            .await?;
        agent_hears_the_mic(&app, agent, "after the user's unmute").await?;
        anyhow::Ok(app)
    }
    .await;
    let _ = mic.kill();
    let _ = mic.wait();
    r
}
