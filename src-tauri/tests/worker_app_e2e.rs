//! The real app as the frontend of a LiveKit Agents worker, as a new user meets it: the
//! real livekit-server, a worker registered with it (`tests/py/lk_worker.py`: `AgentServer`
//! in `start` mode, explicit dispatch by agent name, the framework's VAD, scripted STT and
//! LLM, espeak-ng TTS), and the app under Xvfb through tauri-driver with a private
//! PulseAudio daemon as its sound card.
//!
//! The user fills the first-run connection form (the server's URL, "API key (development)"
//! with the key pair, room, identity and the agent's name) and connects: the server
//! dispatches the named agent; a chat round trip; the agent reads a file outside the
//! allowed folders by RPC and the consent dialog shows the call before the answer quotes
//! the file; then push-to-talk: the agent's STT is handed the microphone's speech, the
//! user's own words come back as the user's transcript, and the agent's spoken reply plays
//! on the app's speaker.
//! Needs root, iproute2, Xvfb, tauri-driver, pulseaudio, espeak-ng, the venvs and
//! livekit-server (scripts/setup.sh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use common::{App, Assistant, Driver, Profile, RoomServer, wait_for};
use outpost_tests::lkclient::{self, NsPair, in_netns};
use outpost_tests::pulse::Pulse;
use outpost_tests::server::ServerKind;
use outpost_tests::speech::{assert_reply_played, espeak};

const ROOM: &str = "worker-app-e2e";
const AGENT_NAME: &str = "outpost-helper";
const NOTE: &str = "the kestrel hovers over the verge";
/// What the test says into the microphone, and what the scripted STT makes of it.
const SPOKEN: &str = "Hello agent, can you hear me?";
const TRANSCRIPT: &str = "Hello agent";
/// The scripted LLM's answer to the transcript (lk_agent.py: anything else is echoed).
const REPLY: &str = "You said: Hello agent";

/// The worker, registered with the server before the app starts.
fn start_worker(netns: &str, url: &str, dir: &std::path::Path) -> anyhow::Result<Assistant> {
    let py = outpost_tests::python::agents_python()?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns])
        .arg(py)
        .arg(outpost_tests::python::scripts_dir().join("lk_worker.py"))
        .arg("start")
        .current_dir(outpost_tests::python::scripts_dir())
        .env("LIVEKIT_URL", url)
        .env("LIVEKIT_API_KEY", lkclient::DEV_KEY)
        .env("LIVEKIT_API_SECRET", lkclient::DEV_SECRET)
        .env("LK_AGENT_NAME", AGENT_NAME)
        .env("LK_USER_TRANSCRIPT", TRANSCRIPT)
        .env("PYTHONWARNINGS", "ignore");
    Assistant::spawn(cmd, &dir.join("worker.stderr"))
}

#[test]
fn a_new_user_connects_the_app_to_a_dispatched_livekit_agents_worker() {
    let _one = common::serial();
    let pulse = Pulse::start().expect("pulseaudio");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let spoken = root.join("spoken.wav");
    let reply = root.join("reply.wav");
    espeak(SPOKEN, &spoken).unwrap();
    espeak(REPLY, &reply).unwrap();
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let notes = outside.join("kestrel-notes.txt");
    std::fs::write(&notes, format!("{NOTE}\n")).unwrap();
    let pair = NsPair::create().expect("network namespaces (run as root)");
    let server = RoomServer::start_on(ServerKind::LiveKit, &pair).unwrap();
    // No saved connection: the first-run screen.
    let profile = Profile::new(&root).unwrap();
    std::fs::write(
        profile.config.join("policy.toml"),
        "consent_timeout_secs = 600\n",
    )
    .unwrap();
    let mut env = profile.env(None);
    env.push(("PULSE_SERVER", pulse.server().into()));
    let config = profile.config.clone();
    let (mut rec, recorded) = pulse.record("speaker.monitor").unwrap();
    let server_ns = pair.server_ns.clone();
    let client_ns = pair.client_ns.clone();
    let url = server.url.clone();
    let logs = root.join("logs");
    let pulse_server = pulse.server();
    let notes = notes.display().to_string();
    let outcome = in_netns(&pair.client_ns.clone(), move || async move {
        let worker = start_worker(&server_ns, &url, &root)?;
        // It logs JSON lines on stdout: ready once the server registered it.
        wait_for("the worker to register", || async {
            Ok(worker
                .events()
                .into_iter()
                .find(|e| e["message"] == "registered worker"))
        })
        .await
        .with_context(|| worker.report())?;
        let driver = Driver::start(&client_ns, &logs, &env).await?;
        let r = scenario(&worker, &url, &notes, &spoken, &pulse_server).await;
        let r = App::quit_after(r, &driver, &config).await;
        driver.with_log(r, Some(&worker))
    });
    let _ = rec.kill();
    let _ = rec.wait();
    let server_log = server.log();
    drop(server);
    drop(pair);
    if let Err(e) = outcome {
        let parts: Vec<String> = e.chain().map(ToString::to_string).collect();
        panic!(
            "{}\n--- server log ---\n{server_log}",
            parts.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    // The agent's spoken reply on the app's speaker.
    assert_reply_played(&recorded.lock().unwrap(), &reply).unwrap();
    drop(dir);
}

/// Sets an input's value as typing would (Svelte's bindings listen for `input`).
fn fill(css: &str, value: &str) -> String {
    format!(
        "const e = document.querySelector({css:?}); if (!e) return 'missing {css}'; \
         e.value = {value:?}; e.dispatchEvent(new Event('input', {{bubbles: true}})); return 'ok';"
    )
}

async fn scenario(
    worker: &Assistant,
    url: &str,
    notes: &str,
    spoken: &std::path::Path,
    pulse_server: &str,
) -> anyhow::Result<App> {
    let app = App::launch().await?;
    // The first-run form: the user's own livekit-server, a development key pair, the room,
    // who they are and which agent to send.
    app.wait_css(".first-run .conn-form").await?;
    app.click(".first-run input[type=radio][value=api_key]")
        .await
        .context("choosing API key")?;
    for (css, value) in [
        (".first-run .conn-form input[type=url]", url),
        ("#conn-api-key", lkclient::DEV_KEY),
        ("#conn-api-secret", lkclient::DEV_SECRET),
        ("#conn-agent", AGENT_NAME),
    ] {
        let r = app.js(&fill(css, value)).await?;
        ensure!(r == "ok", "{r}");
    }
    let r = app
        .js(
            "const f = document.querySelectorAll('.first-run .conn-form .row input[type=text]'); \
             const set = (e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }; \
             const rows = Array.from(f).filter(e => e.id !== 'conn-api-key'); \
             if (rows.length < 2) return 'room/identity inputs missing: ' + rows.length; \
             set(rows[0], 'worker-app-e2e'); set(rows[1], 'outpost-app'); return 'ok';",
        )
        .await?;
    ensure!(r == "ok", "{r}");
    app.click_button(".first-run", "Save and connect").await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    // The status bar says how the link got through (issue 26): here straight over UDP.
    app.wait_text("[data-testid=connection-path]", "direct (UDP)")
        .await?;
    // The server dispatched the named agent; its session is up.
    let dispatched = worker.wait_event("dispatched").await?;
    ensure!(
        dispatched["agent_name"] == AGENT_NAME && dispatched["room"] == ROOM,
        "dispatched: {dispatched}"
    );
    worker.wait_event("ready").await?;

    // Chat.
    app.say("hello").await?;
    app.wait_assistant("Hello from the scripted agent.").await?;

    // A tool over RPC, outside the allowed folders: the user decides, with the full call.
    app.say(&format!("read {notes}")).await?;
    let (title, _args) = app.wait_consent().await?;
    ensure!(title.contains("read"), "consent title: {title}");
    app.answer_consent("Allow once").await?;
    app.wait_assistant(NOTE).await?;

    // Voice: hold to talk while the speech plays into the microphone.
    app.click("[data-testid=voice-toggle]")
        .await
        .context("clicking Voice")?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    let pressed = app.js(&common::press("pointerdown")).await?;
    ensure!(pressed == "ok", "pressing the talk button: {pressed}");
    app.wait_text("[data-testid=mic-state]", "Mic live").await?;
    wait_for("the agent to subscribe to the microphone", || async {
        Ok(worker.events().into_iter().find(|e| e["event"] == "mic"))
    })
    .await
    .with_context(|| worker.report())?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
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
    app.js(&common::press("pointerup")).await?;
    // The user's own speech, as the agent transcribed it, is the user's words.
    app.wait_text("[data-testid=user-message][data-speech=final]", TRANSCRIPT)
        .await?;
    app.wait_assistant(REPLY).await?;
    // Let the reply finish playing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    Ok(app)
}
