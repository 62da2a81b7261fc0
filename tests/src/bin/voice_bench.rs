//! Mouth-to-ear latency and CPU of a voice call through `outpost-room`
//! (docs/BENCHMARKS.md): `cargo run --release -p outpost-tests --bin voice_bench`.
//!
//! One run, one `outpost-room` server (this binary's `serve`, same build profile) and
//! two echo agents (`tests/py/voice_bench.py` ROLE=echo, official Python SDK: each
//! re-publishes what it hears) in the server namespace, each in its own room. Two
//! clients take turns from the client namespace (same veth path), each alone with its
//! echo agent: Outpost's (`outpost-livekit`, here) and an official-SDK one
//! (`voice_bench.py` ROLE=client). Each plays silence with tone bursts (60 ms of 1 kHz
//! at half scale, every 500 ms) in 10 ms frames paced by the wall clock, and times
//! each burst from its first input frame to its first loud sample heard back.
//!
//! Input and output are the clients' audio frame boundary, not sound devices: in is
//! `LocalAudioTrack::push_frame` (where the app's capture hands its PCM over) or the
//! SDK's `AudioSource.capture_frame`; out is `AudioStream::recv` (what the app hands to
//! playback) or the SDK's `AudioStream`. A heard sample's time is its frame's arrival
//! plus its offset in the frame. Both clients' device paths would add the same sound
//! card buffers; leaving them out keeps the comparison about the clients.
//!
//! Through the devices (on by default; `BENCH_DEVICES=0` leaves it out): a private
//! PulseAudio daemon with two null sinks, and per configuration of Outpost's devices
//! (`BENCH_DEVICE_VARIANTS`, see [`device_variants`]) a child process of this binary
//! (`device-turn`) that opens outpost-audio's microphone and speaker and runs the bursts
//! twice: the devices alone (microphone → speaker) and the call with the echo agent.
//! Mouth and ear are the bursts' onsets in the two null sinks' monitors, recorded alike.
//! CPU: each client process's own CPU time (all threads) over its bursts.
//! Knobs: BENCH_TURNS (3), BURSTS (15 per turn).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use outpost_audio::{Capture, CaptureOptions, Playback, PlaybackOptions};
use outpost_livekit::{AudioSourceOptions, Room, RoomEvent, RoomOptions};
use outpost_tests::bench::{env_num, median};
use outpost_tests::lkclient::{self, Env, in_netns};
use outpost_tests::proc::Proc;
use outpost_tests::pulse::Pulse;
use outpost_tests::python;
use tokio::sync::mpsc;

const RUST_ROOM: &str = "voice-outpost";
const PY_ROOM: &str = "voice-sdk";
const RATE: f64 = 48_000.0;
/// Samples in one 10 ms frame.
const FRAME: usize = 480;
const BURST_FRAMES: usize = 6;
const SPACING_FRAMES: usize = 50;
const SETTLE_FRAMES: usize = 200;
const AMP: f64 = 0.5 * 32767.0;
const THRESHOLD: f64 = 0.2 * AMP;

#[derive(Debug, Clone)]
struct Turn {
    latencies_ms: Vec<f64>,
    sent: usize,
    cpu_s: f64,
    wall_s: f64,
    /// The SDK client's NetEq playout delay (average over the turn), when known.
    receiver_delay_ms: Option<f64>,
}

impl Turn {
    fn cpu_percent(&self) -> f64 {
        self.cpu_s / self.wall_s * 100.0
    }
}

/// User + system CPU time of this process (all threads), from /proc/self/stat.
fn cpu_seconds() -> anyhow::Result<f64> {
    cpu_seconds_of("self")
}

/// User + system CPU time of each of this process's threads, summed by thread name.
fn thread_cpu() -> std::collections::BTreeMap<String, f64> {
    let mut by = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return by;
    };
    for t in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some((head, rest)), Some(open)) = (stat.rsplit_once(") "), stat.find('(')) else {
            continue;
        };
        let name = head[open + 1..].to_owned();
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        *by.entry(name).or_insert(0.0) += ticks / 100.0;
    }
    by
}

/// User + system CPU time of process `pid` ("self" for this one).
fn cpu_seconds_of(pid: &str) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(") ").context("odd /proc/self/stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    // Clock ticks: USER_HZ, 100 per second on Linux.
    Ok(ticks / 100.0)
}

async fn rust_turn(url: String, bursts: usize) -> anyhow::Result<Turn> {
    let token = lkclient::token(RUST_ROOM, "outpost", lkclient::DEV_SECRET)?;
    let mut opts = RoomOptions::default();
    opts.auto_subscribe = true;
    let (room, mut events) = Room::connect(&url, &token, opts).await?;
    let mic = room.publish_audio(AudioSourceOptions::default()).await?;
    let mut stream = loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .context("no echo track within 20 s")?
            .context("events closed")?;
        if let RoomEvent::AudioTrackSubscribed { stream, .. } = ev {
            break stream;
        }
    };
    // Drain the room's other events meanwhile.
    let drain = tokio::spawn(async move { while events.recv().await.is_some() {} });
    let listener = tokio::spawn(async move {
        let mut onsets = Vec::new();
        let (mut loud, mut quiet_since) = (false, None::<Instant>);
        while let Some(f) = stream.recv().await {
            let now = Instant::now();
            let first = f
                .samples
                .iter()
                .position(|&s| f64::from(s).abs() > THRESHOLD);
            if let Some(i) = first {
                if !loud {
                    onsets.push(now + Duration::from_secs_f64(i as f64 / RATE));
                    loud = true;
                }
                quiet_since = None;
            } else if loud {
                let since = *quiet_since.get_or_insert(now);
                if now - since > Duration::from_millis(100) {
                    loud = false;
                }
            }
        }
        onsets
    });
    let total = SETTLE_FRAMES + bursts * SPACING_FRAMES + 100;
    let start = Instant::now();
    let mut onsets_in = Vec::new();
    let (mut cpu0, mut wall0) = (0.0, start);
    let mut frame = vec![0i16; FRAME];
    for n in 0..total {
        tokio::time::sleep_until((start + Duration::from_millis(10 * n as u64)).into()).await;
        if n == SETTLE_FRAMES {
            cpu0 = cpu_seconds()?;
            wall0 = Instant::now();
        }
        let k = n.wrapping_sub(SETTLE_FRAMES);
        if n >= SETTLE_FRAMES && k < bursts * SPACING_FRAMES && k % SPACING_FRAMES < BURST_FRAMES {
            let base = (k % SPACING_FRAMES) * FRAME;
            for (i, s) in frame.iter_mut().enumerate() {
                let t = (base + i) as f64 / RATE;
                *s = (AMP * (2.0 * std::f64::consts::PI * 1000.0 * t).sin()) as i16;
            }
            if k % SPACING_FRAMES == 0 {
                onsets_in.push(Instant::now());
            }
        } else {
            frame.fill(0);
        }
        mic.push_frame(&frame).await?;
    }
    let cpu_s = cpu_seconds()? - cpu0;
    let wall_s = wall0.elapsed().as_secs_f64();
    room.leave().await?;
    let onsets_out = tokio::time::timeout(Duration::from_secs(10), listener)
        .await
        .context("the echo stream did not end after leaving")??;
    drain.abort();
    let latencies_ms = onsets_out
        .iter()
        .filter_map(|o| {
            onsets_in
                .iter()
                .rev()
                .find(|i| *i <= o)
                .map(|i| (*o - *i).as_secs_f64() * 1000.0)
        })
        .collect();
    Ok(Turn {
        latencies_ms,
        sent: onsets_in.len(),
        cpu_s,
        wall_s,
        receiver_delay_ms: None,
    })
}

fn python_turn(env: &Env, bursts: usize) -> anyhow::Result<Turn> {
    let py = python::python()?;
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &env.pair.client_ns])
        .arg(&py)
        .arg(python::scripts_dir().join("voice_bench.py"))
        .current_dir(python::scripts_dir())
        .env("ROLE", "client")
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", PY_ROOM)
        .env("LK_IDENTITY", "sdk")
        .env("BURSTS", bursts.to_string())
        .env("PYTHONWARNINGS", "ignore");
    let (status, out, err) =
        Proc::spawn("voice_bench.py client", cmd)?.finish(Duration::from_secs(120))?;
    if !status.success() {
        bail!("voice_bench.py client failed: {out}\n{err}");
    }
    turn_from_json(&result_line(&out, &err)?)
}

/// A child's last JSON line.
fn result_line(out: &str, err: &str) -> anyhow::Result<serde_json::Value> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("no result line: {out}\n{err}"))?;
    Ok(serde_json::from_str(line)?)
}

/// The numbers in `v[k]`.
fn nums(v: &serde_json::Value, k: &str) -> Vec<f64> {
    v[k].as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default()
}

fn turn_from_json(v: &serde_json::Value) -> anyhow::Result<Turn> {
    let f = |k: &str| v[k].as_f64().with_context(|| format!("{k} missing in {v}"));
    Ok(Turn {
        latencies_ms: nums(v, "latencies_ms"),
        sent: f("sent")? as usize,
        cpu_s: f("cpu_s")?,
        wall_s: f("wall_s")?,
        receiver_delay_ms: v["receiver_delay_ms"].as_f64(),
    })
}

fn echo_agent(env: &Env, room: &str) -> anyhow::Result<Proc> {
    let py = python::python()?;
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(python::scripts_dir().join("voice_bench.py"))
        .current_dir(python::scripts_dir())
        .env("ROLE", "echo")
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", room)
        .env("LK_IDENTITY", "echo")
        .env("PYTHONWARNINGS", "ignore");
    let mut p = Proc::spawn(&format!("echo agent in {room}"), cmd)?;
    p.wait_for_line("ready", Duration::from_secs(30))?;
    Ok(p)
}

// ---- The device path -------------------------------------------------------------

/// pacat / parec latency for the bench's own player and recorders (not Outpost's).
const HARNESS_LATENCY_MS: &str = "20";

/// A PulseAudio tool (`pacat` / `parec`) started with `-v`, once it says its stream is
/// created: writing into a player before that would leave a standing backlog in its pipe.
fn pa_tool(server: &str, args: &[&str]) -> anyhow::Result<Child> {
    let mut child = Command::new(args[0])
        .args(&args[1..])
        .args(["-v", "--format=s16le", "--rate=48000", "--channels=1"])
        .arg(format!("--latency-msec={HARNESS_LATENCY_MS}"))
        .env("PULSE_SERVER", server)
        // The tuning knob is for Outpost's streams, never for the measuring ones.
        .env_remove("PULSE_LATENCY_MSEC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {} (Debian's pulseaudio-utils)", args[0]))?;
    let err = child.stderr.take().context("stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("Stream successfully created") {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(10))
        .with_context(|| format!("{} did not create its stream in 10 s", args[0]))?;
    Ok(child)
}

/// Samples, and (samples so far, arrival) after each read.
type Timeline = (Vec<i16>, Vec<(usize, Instant)>);

/// What the player reports: when each burst was written, and the CPU and wall clocks
/// when the bursts started.
type Played = (Vec<Instant>, f64, Instant);

/// A recording of a source, with when each chunk arrived.
struct Recording {
    child: Child,
    data: Arc<Mutex<Timeline>>,
}

impl Recording {
    fn start(server: &str, source: &str) -> anyhow::Result<Self> {
        let mut child = pa_tool(server, &["parec", &format!("--device={source}"), "--raw"])?;
        let mut out = child.stdout.take().context("parec's stdout")?;
        let data = Arc::new(Mutex::new((Vec::new(), Vec::new())));
        let sink = Arc::clone(&data);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 960];
            let mut odd: Option<u8> = None;
            while let Ok(n) = out.read(&mut chunk) {
                if n == 0 {
                    return;
                }
                let now = Instant::now();
                let mut bytes: Vec<u8> = odd.take().into_iter().collect();
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() % 2 == 1 {
                    odd = bytes.pop();
                }
                let mut d = outpost_sync::lock(&sink);
                d.0.extend(
                    bytes
                        .chunks_exact(2)
                        .map(|c| i16::from_le_bytes([c[0], c[1]])),
                );
                let len = d.0.len();
                d.1.push((len, now));
            }
        });
        Ok(Self { child, data })
    }

    /// When each burst started in the recording: a sample above the threshold after
    /// 100 ms of quiet. A sample's time is its chunk's arrival less the samples after it.
    fn onsets(mut self) -> Vec<Instant> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let d = outpost_sync::lock(&self.data);
        let (samples, marks) = (&d.0, &d.1);
        let quiet = (RATE * 0.1) as usize;
        let mut out = Vec::new();
        let mut last_loud: Option<usize> = None;
        let mut m = 0;
        for (i, s) in samples.iter().enumerate() {
            if f64::from(*s).abs() <= THRESHOLD {
                continue;
            }
            if last_loud.is_none_or(|l| i - l > quiet) {
                while m < marks.len() && marks[m].0 <= i {
                    m += 1;
                }
                if let Some((end, at)) = marks.get(m) {
                    out.push(*at - Duration::from_secs_f64((end - i) as f64 / RATE));
                }
            }
            last_loud = Some(i);
        }
        out
    }
}

/// Plays silence with the bursts into `sink` through pacat, 10 ms frames paced by the
/// wall clock, from a thread; returns when each burst's first frame was written. The
/// CPU clock starts (`cpu0`) when the bursts do.
fn play_bursts(
    server: &str,
    sink: &str,
    bursts: usize,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<Played>>> {
    let mut child = pa_tool(
        server,
        &["pacat", "--playback", &format!("--device={sink}")],
    )?;
    let mut stdin = child.stdin.take().context("pacat's stdin")?;
    Ok(std::thread::spawn(move || {
        let total = SETTLE_FRAMES + bursts * SPACING_FRAMES + 100;
        let start = Instant::now();
        let mut onsets = Vec::new();
        let (mut cpu0, mut wall0) = (0.0, start);
        let mut bytes = Vec::with_capacity(FRAME * 2);
        for n in 0..total {
            let due = start + Duration::from_millis(10 * n as u64);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if n == SETTLE_FRAMES {
                cpu0 = cpu_seconds()?;
                wall0 = Instant::now();
            }
            let k = n.wrapping_sub(SETTLE_FRAMES);
            let loud = n >= SETTLE_FRAMES
                && k < bursts * SPACING_FRAMES
                && k % SPACING_FRAMES < BURST_FRAMES;
            bytes.clear();
            for i in 0..FRAME {
                let v = if loud {
                    let t = ((k % SPACING_FRAMES) * FRAME + i) as f64 / RATE;
                    (AMP * (2.0 * std::f64::consts::PI * 1000.0 * t).sin()) as i16
                } else {
                    0
                };
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            if loud && k % SPACING_FRAMES == 0 {
                onsets.push(Instant::now());
            }
            stdin.write_all(&bytes).context("writing to pacat")?;
        }
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        Ok((onsets, cpu0, wall0))
    }))
}

/// Each heard onset less the latest input onset before it, in ms.
fn latencies(onsets_in: &[Instant], onsets_out: &[Instant]) -> Vec<f64> {
    onsets_out
        .iter()
        .filter_map(|o| {
            onsets_in
                .iter()
                .rev()
                .find(|i| *i <= o)
                .map(|i| (*o - *i).as_secs_f64() * 1000.0)
        })
        .collect()
}

/// What [`device_bursts`] returns.
type Bursts = (Vec<f64>, Vec<f64>, usize, f64, Instant);

/// Bursts through the devices: played into `mic_in` (its monitor is the default source:
/// Outpost's microphone) while both monitors are recorded by the same recorder, so the
/// bench's own player and recorder latency cancel out. Returns the mouth → ear
/// latencies (onset in `mic_in.monitor` → onset in `speaker.monitor`), the player
/// write → `mic_in.monitor` lags, the burst count, and the CPU and wall clocks at the
/// first burst.
fn device_bursts(server: &str, bursts: usize) -> anyhow::Result<Bursts> {
    let mouth = Recording::start(server, "mic_in.monitor")?;
    let ear = Recording::start(server, "speaker.monitor")?;
    let (onsets_in, cpu0, wall0) = play_bursts(server, "mic_in", bursts)?
        .join()
        .map_err(|_| anyhow::anyhow!("the player panicked"))??;
    let (mouth, ear) = (mouth.onsets(), ear.onsets());
    Ok((
        latencies(&mouth, &ear),
        latencies(&onsets_in, &mouth),
        onsets_in.len(),
        cpu0,
        wall0,
    ))
}

/// `voice_bench device-turn` (a child process, so that each configuration of Outpost's
/// devices has its own environment, e.g. `PULSE_LATENCY_MSEC`, and its own CPU clock):
/// Outpost's microphone and speaker (outpost-audio on cpal → ALSA → PulseAudio, the
/// defaults: `mic_in.monitor` and `speaker`), opened once, in two phases with the same
/// bursts ([`device_bursts`]):
/// 1. the devices alone: the microphone's frames go straight to the speaker (no
///    network, no room): what the devices' buffers add;
/// 2. the call: the microphone's frames go to the published track and the echo agent's
///    stream to the speaker, as outpost-desktop's voice hub wires them.
///
/// Prints one JSON line.
fn device_turn() -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).with_context(|| format!("{k} not set"));
    let (server, url, ns) = (var("PULSE_SERVER")?, var("LK_URL")?, var("CLIENT_NS")?);
    let bursts = env_num("BURSTS", 15);
    let v = in_netns(&ns, move || async move {
        let token = lkclient::token(RUST_ROOM, "outpost-devices", lkclient::DEV_SECRET)?;
        let mut opts = RoomOptions::default();
        opts.auto_subscribe = true;
        let (room, mut events) = Room::connect(&url, &token, opts).await?;
        let mic = room.publish_audio(AudioSourceOptions::default()).await?;
        let mut stream = loop {
            let ev = tokio::time::timeout(Duration::from_secs(20), events.recv())
                .await
                .context("no echo track within 20 s")?
                .context("events closed")?;
            if let RoomEvent::AudioTrackSubscribed { stream, .. } = ev {
                break stream;
            }
        };
        let drain = tokio::spawn(async move { while events.recv().await.is_some() {} });
        // The devices, opened as outpost-desktop's VoiceHub opens them.
        let (tx, mut rx) = mpsc::channel::<Vec<f32>>(50);
        let (play, cap) = tokio::task::spawn_blocking(move || {
            let play = Playback::start(&PlaybackOptions::default());
            let cap = Capture::start(&CaptureOptions::default(), tx);
            (play, cap)
        })
        .await?;
        let (play, cap) = (Arc::new(play?), cap?);
        // Phase 1 (`direct`): microphone → speaker. Phase 2: microphone → track, echo → speaker.
        let direct = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (speaker, is_direct) = (Arc::clone(&play), Arc::clone(&direct));
        let pump = tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if is_direct.load(std::sync::atomic::Ordering::Relaxed) {
                    speaker.push(&frame);
                    // The track's clock keeps running on silence meanwhile.
                    let _ = mic.push_frame_f32(&[0.0; FRAME]).await;
                } else {
                    let _ = mic.push_frame_f32(&frame).await;
                }
            }
        });
        let (speaker, is_direct) = (Arc::clone(&play), Arc::clone(&direct));
        let listener = tokio::spawn(async move {
            let mut queued = Vec::new();
            while let Some(frame) = stream.recv().await {
                if !is_direct.load(std::sync::atomic::Ordering::Relaxed) {
                    speaker.push_i16(&frame.samples);
                    queued.push(speaker.queued_ms() as f64);
                }
            }
            queued
        });
        let server2 = server.clone();
        let alone = tokio::task::spawn_blocking(move || device_bursts(&server2, bursts)).await??;
        direct.store(false, std::sync::atomic::Ordering::Relaxed);
        let threads0 = thread_cpu();
        let call = tokio::task::spawn_blocking(move || device_bursts(&server, bursts)).await??;
        let threads: serde_json::Map<String, serde_json::Value> = thread_cpu()
            .into_iter()
            .map(|(k, v)| {
                let d = v - threads0.get(&k).copied().unwrap_or(0.0);
                (k, serde_json::json!(d))
            })
            .filter(|(_, v)| v.as_f64().is_some_and(|d| d > 0.0))
            .collect();
        let (lat, mouth_lag, sent, cpu0, wall0) = call;
        let cpu_s = cpu_seconds()? - cpu0;
        let wall_s = wall0.elapsed().as_secs_f64();
        let dropped = cap.dropped_frames();
        let (rate_in, rate_out) = (cap.device_rate(), play.device_rate());
        let speaker_cut_ms = play.cut_ms();
        drop(cap);
        pump.abort();
        room.leave().await?;
        let queued = tokio::time::timeout(Duration::from_secs(10), listener)
            .await
            .context("the echo stream did not end after leaving")??;
        drain.abort();
        anyhow::Ok(serde_json::json!({
            "latencies_ms": lat,
            "mouth_lag_ms": mouth_lag,
            "devices_alone_ms": alone.0,
            "devices_alone_sent": alone.2,
            "sent": sent,
            "cpu_s": cpu_s,
            "wall_s": wall_s,
            "speaker_queue_ms": if queued.is_empty() { 0.0 } else { median(queued) },
            "capture_dropped": dropped,
            "speaker_cut_ms": speaker_cut_ms,
            "thread_cpu_s": threads,
            "device_rates": [rate_in, rate_out],
        }))
    })?;
    #[allow(clippy::print_stdout)]
    {
        println!("{v}");
    }
    Ok(())
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// One run of Outpost's devices (`device-turn`) as the parent saw it.
#[derive(Debug, Clone)]
struct DeviceTurn {
    /// The call through the devices.
    turn: Turn,
    /// Phase 1: microphone → speaker, no network.
    alone_ms: Vec<f64>,
    alone_sent: usize,
    /// From the write into the player to the onset in `mic_in.monitor` (the bench's
    /// player, cancelled out of the figures).
    mouth_lag_ms: Vec<f64>,
    speaker_queue_ms: f64,
    /// Standing delay the speaker's playout target cut over the call.
    speaker_cut_ms: u64,
    capture_dropped: u64,
    /// CPU seconds by thread name over the call (diagnostics).
    threads: String,
    /// The PulseAudio daemon's CPU over the child's run, % of one core.
    pulse_cpu_percent: f64,
}

/// Outpost's device configurations compared in one run: a label and the environment of
/// the `device-turn` child. `BENCH_DEVICE_VARIANTS`: configurations separated by `;`,
/// each a space-separated list of `KEY=VALUE` (empty: as shipped); by default the
/// shipped configuration (device periods: microphone 20 ms, speaker 10 ms), the former
/// 20 ms for both, 10 ms for both, and libpulse's own latency request
/// (`PULSE_LATENCY_MSEC`) on top of the shipped one.
fn device_variants() -> Vec<(String, Vec<(String, String)>)> {
    let spec = std::env::var("BENCH_DEVICE_VARIANTS").unwrap_or_else(|_| {
        ";OUTPOST_AUDIO_PERIOD_MS=20;OUTPOST_AUDIO_PERIOD_MS=10;PULSE_LATENCY_MSEC=10".to_owned()
    });
    spec.split(';')
        .map(|v| {
            let kv: Vec<(String, String)> = v
                .split_whitespace()
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let label = if kv.is_empty() {
                "as shipped".to_owned()
            } else {
                v.split_whitespace().collect::<Vec<_>>().join(" ")
            };
            (label, kv)
        })
        .collect()
}

fn run_device_turn(
    env: &Env,
    pulse: &Pulse,
    me: &Path,
    bursts: usize,
    extra: &[(String, String)],
) -> anyhow::Result<DeviceTurn> {
    let mut cmd = Command::new(me);
    cmd.arg("device-turn")
        .env("PULSE_SERVER", pulse.server())
        .env("LK_URL", &env.server.url)
        .env("CLIENT_NS", &env.pair.client_ns)
        .env("BURSTS", bursts.to_string())
        .env_remove("PULSE_LATENCY_MSEC")
        .env_remove("OUTPOST_AUDIO_PERIOD_MS");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let pid = pulse.pid().to_string();
    let (p0, t0) = (cpu_seconds_of(&pid)?, Instant::now());
    let (status, out, err) =
        Proc::spawn("voice_bench device-turn", cmd)?.finish(Duration::from_secs(120))?;
    let pulse_cpu_percent = (cpu_seconds_of(&pid)? - p0) / t0.elapsed().as_secs_f64() * 100.0;
    if !status.success() {
        bail!("device-turn failed: {out}\n{err}");
    }
    let v = result_line(&out, &err)?;
    let mut turn = turn_from_json(&v)?;
    let speaker_queue_ms = v["speaker_queue_ms"].as_f64().unwrap_or(0.0);
    // Bursts are 500 ms apart: an echo later than that is paired with the next burst.
    // A speaker queue that long makes every figure of the turn ambiguous: none counts.
    if speaker_queue_ms > f64::from(SPACING_FRAMES as u32 * 10) / 2.0 {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "        warning: the speaker queue held {speaker_queue_ms:.0} ms: \
                 this turn's echoes cannot be paired with their bursts; not counted"
            );
        }
        turn.latencies_ms.clear();
    }
    Ok(DeviceTurn {
        turn,
        alone_ms: nums(&v, "devices_alone_ms"),
        alone_sent: v["devices_alone_sent"].as_u64().unwrap_or(0) as usize,
        mouth_lag_ms: nums(&v, "mouth_lag_ms"),
        speaker_queue_ms,
        speaker_cut_ms: v["speaker_cut_ms"].as_u64().unwrap_or(0),
        capture_dropped: v["capture_dropped"].as_u64().unwrap_or(0),
        threads: v["thread_cpu_s"].to_string(),
        pulse_cpu_percent,
    })
}

fn all(v: &[Turn]) -> Vec<f64> {
    v.iter().flat_map(|t| t.latencies_ms.clone()).collect()
}

/// Says so when a turn lost more than two bursts (under other builds' load the SDK
/// client's pacing slips); the tables count what was heard.
fn heard_enough(t: &Turn, who: &str) -> anyhow::Result<()> {
    if t.latencies_ms.is_empty() {
        bail!("{who}: none of {} bursts heard back", t.sent);
    }
    if t.latencies_ms.len() + 2 < t.sent {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "        warning: {who}: only {} of {} bursts heard back",
                t.latencies_ms.len(),
                t.sent
            );
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("serve") => return outpost_room::cli::main().map_err(Into::into),
        Some("device-turn") => return device_turn(),
        _ => {}
    }
    let turns = env_num("BENCH_TURNS", 3);
    let bursts = env_num("BURSTS", 15);
    let devices = env_num("BENCH_DEVICES", 1) != 0;
    let me = std::env::current_exe().context("locating myself")?;
    let pulse = if devices { Some(Pulse::start()?) } else { None };
    let variants = device_variants();
    let (env, _pki) = outpost_tests::bench::bench_env(Path::new(&me))?;
    let _echo_rust = echo_agent(&env, RUST_ROOM)?;
    let _echo_py = echo_agent(&env, PY_ROOM)?;
    let (mut rust, mut py) = (Vec::new(), Vec::new());
    let mut dev: Vec<Vec<DeviceTurn>> = vec![Vec::new(); variants.len()];
    for turn in 0..turns {
        let url = env.server.url.clone();
        let r = in_netns(&env.pair.client_ns.clone(), move || rust_turn(url, bursts))?;
        let p = python_turn(&env, bursts)?;
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "turn {turn}: outpost {} of {} bursts heard, median {:.1} ms, cpu {:.1} %\n        \
                 sdk     {} of {} bursts heard, median {:.1} ms, cpu {:.1} %",
                r.latencies_ms.len(),
                r.sent,
                median(r.latencies_ms.clone()),
                r.cpu_percent(),
                p.latencies_ms.len(),
                p.sent,
                median(p.latencies_ms.clone()),
                p.cpu_percent(),
            );
        }
        heard_enough(&r, "outpost")?;
        heard_enough(&p, "sdk")?;
        rust.push(r);
        py.push(p);
        let Some(pulse) = &pulse else { continue };
        for (i, (label, extra)) in variants.iter().enumerate() {
            let d = run_device_turn(&env, pulse, &me, bursts, extra)?;
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "        devices ({label}) {} of {} bursts heard, median {:.1} ms \
                     (devices alone {} of {}, median {:.1} ms), cpu {:.1} %, \
                     speaker queue {:.0} ms ({} ms cut), player lag {:.1} ms, {} capture frames dropped\n          \
                     thread CPU s: {}",
                    d.turn.latencies_ms.len(),
                    d.turn.sent,
                    median(d.turn.latencies_ms.clone()),
                    d.alone_ms.len(),
                    d.alone_sent,
                    median(d.alone_ms.clone()),
                    d.turn.cpu_percent(),
                    d.speaker_queue_ms,
                    d.speaker_cut_ms,
                    median(d.mouth_lag_ms.clone()),
                    d.capture_dropped,
                    d.threads,
                );
            }
            // A configuration that loses bursts is reported as it is (its row says how
            // many were heard), not a failure of the run: trying such knobs is the point.
            dev[i].push(d);
        }
    }
    let (ra, pa) = (all(&rust), all(&py));
    let cpu = |v: &[Turn]| median(v.iter().map(Turn::cpu_percent).collect());
    let (rc, pc) = (cpu(&rust), cpu(&py));
    let mut report = format!(
        "| measure ({turns} alternating turns, {} bursts each) | Outpost (outpost-livekit) ↔ SDK echo agent | official SDK ↔ SDK echo agent | ratio Outpost / SDK (goal ≤ 1.1) |\n|---|---|---|---|\n\
         | mouth-to-ear p50 | {:.1} ms | {:.1} ms | {:.2} |\n\
         | mouth-to-ear p90 | {:.1} ms | {:.1} ms | {:.2} |\n\
         | mouth-to-ear max | {:.1} ms | {:.1} ms | {:.2} |\n\
         | bursts heard back | {} of {} | {} of {} | |\n\
         | client CPU during the call (median of turns, % of one core) | {rc:.1} % | {pc:.1} % | {:.2} |\n\n\
         The SDK client's own receiver (NetEq) held the echo {} on average before its \
         AudioStream played it; outpost-livekit's stream has no playout delay (frames come \
         out as packets arrive; the app's speaker queue paces them).\n",
        bursts,
        median(ra.clone()),
        median(pa.clone()),
        median(ra.clone()) / median(pa.clone()),
        pct(&ra, 0.9),
        pct(&pa, 0.9),
        pct(&ra, 0.9) / pct(&pa, 0.9),
        pct(&ra, 1.0),
        pct(&pa, 1.0),
        pct(&ra, 1.0) / pct(&pa, 1.0),
        ra.len(),
        rust.iter().map(|t| t.sent).sum::<usize>(),
        pa.len(),
        py.iter().map(|t| t.sent).sum::<usize>(),
        rc / pc,
        {
            let d: Vec<f64> = py.iter().filter_map(|t| t.receiver_delay_ms).collect();
            if d.is_empty() {
                "(not reported)".to_owned()
            } else {
                format!("{:.0} ms", median(d))
            }
        },
    );
    if pulse.is_some() {
        report.push_str(&device_report(&variants, &dev, &ra, &pa, pc));
    }
    #[allow(clippy::print_stdout)]
    {
        println!("{report}");
    }
    Ok(())
}

/// The device-path table: each of Outpost's device configurations, and the frame-path
/// figures of the same run beside them.
fn device_report(
    variants: &[(String, Vec<(String, String)>)],
    dev: &[Vec<DeviceTurn>],
    frame_outpost: &[f64],
    frame_sdk: &[f64],
    sdk_cpu: f64,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::from(
        "\nThrough sound devices (PulseAudio null sinks; mouth = the burst's onset in \
         `mic_in.monitor`, Outpost's microphone; ear = its echo's onset in `speaker.monitor`, \
         what Outpost's speaker played):\n\n| measure |",
    );
    for (label, _) in variants {
        let _ = write!(s, " Outpost through its devices ({label}) |");
    }
    s.push_str(" Outpost frame path (above) | SDK pair frame path (above) |\n|---|");
    s.push_str(&"---|".repeat(variants.len() + 2));
    s.push('\n');
    let per =
        |f: &dyn Fn(&[DeviceTurn]) -> String| -> Vec<String> { dev.iter().map(|d| f(d)).collect() };
    let call = |d: &[DeviceTurn]| -> Vec<f64> {
        d.iter().flat_map(|t| t.turn.latencies_ms.clone()).collect()
    };
    let alone =
        |d: &[DeviceTurn]| -> Vec<f64> { d.iter().flat_map(|t| t.alone_ms.clone()).collect() };
    let row = |s: &mut String, name: &str, mut cells: Vec<String>, frame: [String; 2]| {
        cells.extend(frame);
        let _ = writeln!(s, "| {name} | {} |", cells.join(" | "));
    };
    let none = || [String::new(), String::new()];
    for (name, p) in [("p50", 0.5), ("p90", 0.9), ("max", 1.0)] {
        row(
            &mut s,
            &format!("mouth-to-ear {name}"),
            per(&|d| format!("{:.1} ms", pct(&call(d), p))),
            [
                format!("{:.1} ms", pct(frame_outpost, p)),
                format!("{:.1} ms", pct(frame_sdk, p)),
            ],
        );
    }
    row(
        &mut s,
        "mouth-to-ear p50 / the SDK pair's frame-path p50 (goal ≤ 1.1)",
        per(&|d| format!("{:.2}", pct(&call(d), 0.5) / pct(frame_sdk, 0.5))),
        [
            format!("{:.2}", pct(frame_outpost, 0.5) / pct(frame_sdk, 0.5)),
            "1".into(),
        ],
    );
    row(
        &mut s,
        "bursts heard back",
        per(&|d| {
            let heard: usize = d.iter().map(|t| t.turn.latencies_ms.len()).sum();
            let sent: usize = d.iter().map(|t| t.turn.sent).sum();
            format!("{heard} of {sent}")
        }),
        none(),
    );
    for (name, p) in [("p50", 0.5), ("max", 1.0)] {
        row(
            &mut s,
            &format!("the devices alone (microphone → speaker, no network), {name}"),
            per(&|d| format!("{:.1} ms", pct(&alone(d), p))),
            none(),
        );
    }
    row(
        &mut s,
        "the devices alone: bursts through",
        per(&|d| {
            let heard: usize = d.iter().map(|t| t.alone_ms.len()).sum();
            let sent: usize = d.iter().map(|t| t.alone_sent).sum();
            format!("{heard} of {sent}")
        }),
        none(),
    );
    row(
        &mut s,
        "the call through the devices less the devices alone, p50 (the network part)",
        per(&|d| format!("{:.1} ms", pct(&call(d), 0.5) - pct(&alone(d), 0.5))),
        none(),
    );
    row(
        &mut s,
        "Outpost's speaker queue while the echo plays (median)",
        per(&|d| {
            format!(
                "{:.0} ms",
                median(d.iter().map(|t| t.speaker_queue_ms).collect())
            )
        }),
        none(),
    );
    row(
        &mut s,
        "client CPU during the call (median of turns, % of one core)",
        per(&|d| {
            format!(
                "{:.1} %",
                median(d.iter().map(|t| t.turn.cpu_percent()).collect())
            )
        }),
        [String::new(), format!("{sdk_cpu:.1} %")],
    );
    row(
        &mut s,
        "client CPU / the SDK pair's (frame path)",
        per(&|d| {
            format!(
                "{:.2}",
                median(d.iter().map(|t| t.turn.cpu_percent()).collect()) / sdk_cpu
            )
        }),
        [String::new(), "1".into()],
    );
    row(
        &mut s,
        "PulseAudio daemon CPU over the device turn (median, % of one core)",
        per(&|d| {
            format!(
                "{:.1} %",
                median(d.iter().map(|t| t.pulse_cpu_percent).collect())
            )
        }),
        none(),
    );
    s
}
