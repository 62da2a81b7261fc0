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
//! CPU: each client process's own CPU time (all threads) over its bursts.
//! Knobs: BENCH_TURNS (3), BURSTS (15 per turn).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use outpost_livekit::{AudioSourceOptions, Room, RoomEvent, RoomOptions};
use outpost_tests::bench::{env_num, median};
use outpost_tests::lkclient::{self, Env, in_netns};
use outpost_tests::proc::Proc;
use outpost_tests::python;

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
    let stat = std::fs::read_to_string("/proc/self/stat")?;
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
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("no result line: {out}\n{err}"))?;
    let v: serde_json::Value = serde_json::from_str(line)?;
    let f = |k: &str| v[k].as_f64().with_context(|| format!("{k} missing in {v}"));
    Ok(Turn {
        latencies_ms: v["latencies_ms"]
            .as_array()
            .context("latencies")?
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .collect(),
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

fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("serve") {
        return outpost_room::cli::main().map_err(Into::into);
    }
    let turns = env_num("BENCH_TURNS", 3);
    let bursts = env_num("BURSTS", 15);
    let me = std::env::current_exe().context("locating myself")?;
    let env = Env::start(Path::new(&me))?;
    let _echo_rust = echo_agent(&env, RUST_ROOM)?;
    let _echo_py = echo_agent(&env, PY_ROOM)?;
    let (mut rust, mut py) = (Vec::new(), Vec::new());
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
        for (t, who) in [(&r, "outpost"), (&p, "sdk")] {
            if t.latencies_ms.len() + 2 < t.sent {
                bail!(
                    "{who}: only {} of {} bursts heard back",
                    t.latencies_ms.len(),
                    t.sent
                );
            }
        }
        rust.push(r);
        py.push(p);
    }
    let all = |v: &[Turn]| -> Vec<f64> { v.iter().flat_map(|t| t.latencies_ms.clone()).collect() };
    let (ra, pa) = (all(&rust), all(&py));
    let cpu = |v: &[Turn]| median(v.iter().map(Turn::cpu_percent).collect());
    let (rc, pc) = (cpu(&rust), cpu(&py));
    let report = format!(
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
    #[allow(clippy::print_stdout)]
    {
        println!("{report}");
    }
    Ok(())
}
