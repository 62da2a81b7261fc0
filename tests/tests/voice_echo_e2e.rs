//! End to end, echo cancellation: the desktop app's voice hub (real microphone and speaker
//! code: outpost-audio on cpal → ALSA → PulseAudio) in a call with an official-SDK far end
//! (`tests/py/echo_far_end.py`) through `outpost-room`, with a real echo path.
//!
//! The sound card is a private PulseAudio daemon ([`outpost_tests::pulse`]): Outpost
//! plays to the null sink `speaker`, and a module-loopback carries `speaker.monitor` into
//! the null sink `mic_in`, whose monitor is Outpost's microphone, so what Outpost plays
//! comes back into its microphone, as from loudspeakers. The far end talks (espeak-ng
//! speech, looped) and records Outpost's microphone track with each frame's arrival time.
//! Open mic, with the "Echo cancellation" setting switched while the call goes on: off
//! for 10 s, then on for 20 s; then a near-end talker (`paplay` into `mic_in`) speaks over
//! the far end (double talk). Checked on what the far end received: the echo (median RMS
//! of 0.5 s blocks) is at least 12 dB lower (18–56 dB measured; the canceller's
//! convergence varies run to run) in the last 10 s of the "on" stretch than in
//! the last 8 s of the "off" stretch, and the near-end speech is there during double talk
//! (10 ms loudness envelopes, normalised cross-correlation with the original ≥ 0.6).
//!
//! No test harness: `PULSE_SERVER` must be set before any thread starts. Needs root,
//! iproute2, pulseaudio, espeak-ng and the venv.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail, ensure};
use outpost_core::{ConnectOptions, Core, Credentials, ToolsConfig};
use outpost_desktop::contract::{AppEvent, DeviceState, VoiceControl, VoiceMode};
use outpost_desktop::voice::VoiceHub;
use outpost_tests::lkclient::Env;
use outpost_tests::proc::Proc;
use outpost_tests::pulse::Pulse;
use outpost_tests::python;
use outpost_tests::speech::{best_match, envelope, espeak, read_wav};

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "voice-echo-e2e";
const OUTPOST: &str = "outpost-user";
const FAR: &str = "far-end";
const RATE: f64 = 48_000.0;

fn token(identity: &str) -> String {
    outpost_tests::lkclient::dev_token(ROOM, identity, "").unwrap()
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn rms(x: &[f64]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64).sqrt()
}

/// The median RMS of the 0.5 s blocks of `x`.
fn median_block_rms(x: &[f64]) -> f64 {
    let mut b: Vec<f64> = x.chunks(24_000).map(rms).collect();
    b.sort_by(f64::total_cmp);
    b.get(b.len() / 2).copied().unwrap_or(0.0)
}

/// When things happened, on this machine's clock (Unix seconds).
#[derive(Debug, Default, Clone, Copy)]
struct Marks {
    off: f64,
    on: f64,
    near: f64,
}

fn scenario(pulse: &Pulse) -> anyhow::Result<()> {
    pulse.pactl(&[
        "load-module",
        "module-loopback",
        "source=speaker.monitor",
        "sink=mic_in",
        "latency_msec=30",
        "adjust_time=0",
    ])?;
    let dir = tempfile::tempdir()?;
    let far_wav = dir.path().join("far.wav");
    espeak(
        "The weather tomorrow will be mostly sunny, with a light breeze from the west and \
         temperatures around twenty degrees in the afternoon, rising slowly towards the \
         evening, when clouds coming in from the sea bring a chance of light rain over the \
         hills, although the valleys should stay dry and rather warm until late at night.",
        &far_wav,
    )?;
    let near_wav = dir.path().join("near.wav");
    espeak(
        "Please book a table for four people at seven o'clock.",
        &near_wav,
    )?;
    let (near, near_rate) = read_wav(&near_wav)?;
    ensure!(near_rate == 22_050, "espeak-ng wrote {near_rate} Hz");
    let out = dir.path().join("heard.raw");

    let env = Env::start(Path::new(ROOM_BIN))?;
    let py = python::python()?;
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(python::scripts_dir().join("echo_far_end.py"))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_IDENTITY", FAR)
        .env("OUTPOST_IDENTITY", OUTPOST)
        .env("FAR_WAV", &far_wav)
        .env("OUT", &out)
        .env("RECORD_SECONDS", "42")
        .env("LK_TIMEOUT", "150")
        .env("PYTHONWARNINGS", "ignore");
    let mut far = Proc::spawn("echo_far_end", cmd)?;
    let lines = Arc::new(Mutex::new(far.stdout_lines()?));
    let far_line = move |what: &str| -> anyhow::Result<String> {
        let rx = lines.lock().unwrap();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(150))
                .with_context(|| format!("waiting for the far end's {what}"))?;
            if line.contains(what) {
                return Ok(line);
            }
            println!("far end: {line}");
        }
    };
    far_line("\"ready\"")?;

    let data = tempfile::tempdir()?;
    let data_dir = data.path().to_path_buf();
    let url = env.server.url.clone();
    let server = pulse.server();
    let near_path = near_wav.clone();
    let waiter = far_line.clone();
    let outcome =
        outpost_tests::lkclient::in_netns(&env.pair.client_ns.clone(), move || async move {
            let core = Core::open(Some(data_dir), ToolsConfig::defaults())?;
            let mut opts = ConnectOptions::new(Credentials::Token {
                url,
                token: token(OUTPOST),
            });
            opts.voice = true;
            opts.assistant_identity = Some(FAR.into());
            opts.room_name = Some(ROOM.into());
            let (session, _events) = core.connect(opts).await?;
            let session = Arc::new(session);
            let levels: Arc<Mutex<(f32, f32)>> = Arc::default();
            let sink = Arc::clone(&levels);
            let hub = VoiceHub::new(
                Arc::new(move |e: AppEvent| {
                    if let AppEvent::VoiceLevel(l) = e {
                        let mut m = sink.lock().unwrap();
                        m.0 = m.0.max(l.input);
                        m.1 = m.1.max(l.output);
                    }
                }),
                true,
            );
            hub.attach(Arc::clone(&session));
            let st = hub.start(None, None).await;
            ensure!(st.input.state == DeviceState::Ready, "{st:?}");
            ensure!(st.output.state == DeviceState::Ready, "{st:?}");
            ensure!(st.echo_cancelling, "{st:?}");
            let st = hub.control(VoiceControl {
                muted: Some(false),
                mode: Some(VoiceMode::OpenMic),
                ..VoiceControl::default()
            });
            ensure!(st.transmitting, "{st:?}");
            tokio::task::spawn_blocking({
                let w = waiter.clone();
                move || w("\"recording\"")
            })
            .await??;
            // The far end's speech is on Outpost's speaker before the clock starts.
            let t0 = now();
            while levels.lock().unwrap().1 < 0.3 {
                ensure!(
                    now() - t0 < 20.0,
                    "Outpost's speaker played nothing of the far end's speech: {:?}",
                    hub.status()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let mut marks = Marks::default();
            let st = hub.control(VoiceControl {
                echo_cancellation: Some(false),
                ..VoiceControl::default()
            });
            ensure!(!st.echo_cancelling, "{st:?}");
            marks.off = now();
            tokio::time::sleep(Duration::from_secs(10)).await;
            let st = hub.control(VoiceControl {
                echo_cancellation: Some(true),
                ..VoiceControl::default()
            });
            ensure!(st.echo_cancelling, "{st:?}");
            marks.on = now();
            println!(
                "levels so far (input, output): {:?}",
                *levels.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_secs(20)).await;
            marks.near = now();
            let st = Command::new("paplay")
                .arg("--device=mic_in")
                .arg(&near_path)
                .env("PULSE_SERVER", &server)
                .stdout(Stdio::null())
                .status()?;
            ensure!(st.success(), "paplay: {st}");
            tokio::task::spawn_blocking(move || waiter("\"done\"")).await??;
            hub.stop().await;
            session.leave().await?;
            anyhow::Ok(marks)
        });
    let marks = match outcome {
        Ok(m) => m,
        Err(e) => bail!("{e:#}\nthe far end's stderr:\n{}", far.stderr()),
    };

    // What the far end received, placed on this machine's clock.
    let bytes = std::fs::read(&out)?;
    let heard: Vec<f64> = bytes
        .chunks_exact(2)
        .map(|c| f64::from(i16::from_le_bytes([c[0], c[1]])) / 32768.0)
        .collect();
    let times = std::fs::read_to_string(out.with_extension("raw.times"))?;
    let mut clock: Vec<(f64, usize)> = Vec::new();
    let mut at = 0usize;
    for line in times.lines() {
        let mut it = line.split_whitespace();
        let t: f64 = it.next().context("time")?.parse()?;
        let n: usize = it.next().context("count")?.parse()?;
        clock.push((t, at));
        at += n;
    }
    // The sample that arrived at `t`.
    let index = |t: f64| -> usize {
        clock
            .iter()
            .find(|(ft, _)| *ft >= t)
            .map_or(heard.len(), |(_, i)| *i)
    };
    let second = RATE as usize;
    let off = &heard[index(marks.off + 2.0)..index(marks.on)];
    let on = &heard[index(marks.on + 10.0)..index(marks.near)];
    let (e_on, e_off) = (median_block_rms(on), median_block_rms(off));
    let erle = 20.0 * (e_off / e_on.max(1e-9)).log10();
    println!(
        "echo at the far end (median of 0.5 s blocks): {e_off:.4} with cancellation off, \
         {e_on:.5} on: {erle:.1} dB (whole stretches: {:.4} off, {:.5} on)",
        rms(off),
        rms(on)
    );
    let from = index(marks.near).saturating_sub(second / 2);
    let to = (index(marks.near) + near.len() * 48_000 / 22_050 + 2 * second).min(heard.len());
    let near_env = envelope(&near, 22_050);
    let (m, _) = best_match(&envelope(&heard[from..to], 48_000), &near_env);
    let around: Vec<String> = heard[from..to]
        .chunks(second / 4)
        .map(|b| format!("{:.0}", 20.0 * rms(b).max(1e-5).log10()))
        .collect();
    println!(
        "double talk: envelope correlation with the near-end speech {m:.2}; dBFS per \
         0.25 s from 0.5 s before it: {}",
        around.join(" ")
    );
    ensure!(
        e_off > 0.01,
        "no echo reached the far end with cancellation off ({e_off:.4})"
    );
    ensure!(
        erle >= 12.0,
        "the echo was only {erle:.1} dB lower with cancellation on"
    );
    ensure!(
        m >= 0.6,
        "the near-end speech did not come through ({m:.2})"
    );
    Ok(())
}

fn main() {
    let pulse = Pulse::start_for_this_process();
    outpost_tests::server::run_one(
        "echo_cancellation_removes_the_far_end_and_keeps_the_near_end",
        || scenario(&pulse),
    );
}
