//! Benchmark of `outpost-livekit` against two official-SDK peers (docs/BENCHMARKS.md):
//! `cargo run --release -p outpost-tests --bin livekit_bench`.
//!
//! One run, one `outpost-room` server, one echo peer (`tests/py/lk_peer.py` as
//! "assistant", official Python SDK) in the server namespace. Two clients take turns
//! doing the same steps against it from the client namespace (same veth path):
//! Outpost's Rust client and an official-SDK Python client (`tests/py/lk_bench.py`).
//! Steps: reliable data-packet round trips (200 after 20 warm-up), a 10 MiB byte
//! stream to the echo peer (until its checksum reply), and 10 MiB from it (until the
//! last byte). Rounds alternate (Rust, Python, Rust, …) and medians are reported.
//! `livekit_bench serve …` runs the room server itself (same build profile).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use outpost_livekit::{DataOptions, Room, RoomEvent, RoomOptions, StreamOptions};
use outpost_tests::lkclient::{self, Env, PyPeer, in_netns};
use outpost_tests::proc::Proc;
use outpost_tests::python;

const ROOM: &str = "lk-client";

#[derive(Debug, Clone, Copy)]
struct Sample {
    rtt_p50_ms: f64,
    rtt_p95_ms: f64,
    up_s: f64,
    down_s: f64,
}

async fn rust_round(url: String, size: usize, rounds: usize) -> anyhow::Result<Sample> {
    let token = lkclient::token(ROOM, "rustbench", lkclient::DEV_SECRET)?;
    let (room, mut events) =
        Room::connect(&url, &token, RoomOptions::default().assistant("assistant")).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while room.assistant().is_none() {
        if Instant::now() > deadline {
            bail!("assistant not in the room");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut next = async || -> anyhow::Result<RoomEvent> {
        tokio::time::timeout(Duration::from_secs(120), events.recv())
            .await
            .context("timed out")?
            .context("events closed")
    };
    let mut samples = Vec::new();
    for i in 0..rounds + 20 {
        let key = format!("{i:.<64}").into_bytes();
        let t0 = Instant::now();
        room.send_data(key.clone(), DataOptions::topic("rtt").to("assistant"))
            .await?;
        loop {
            if let RoomEvent::Data(m) = next().await? {
                if m.topic.as_deref() == Some("echo:rtt") && m.payload == key {
                    break;
                }
            }
        }
        if i >= 20 {
            samples.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
    }
    samples.sort_by(f64::total_cmp);

    let payload: Vec<u8> = (0..size).map(|i| (i * 31 + i / 997) as u8).collect();
    let t0 = Instant::now();
    room.send_bytes(
        &payload,
        StreamOptions {
            topic: "bytes".into(),
            destination_identities: vec!["assistant".into()],
            name: Some("bench.bin".into()),
            ..Default::default()
        },
    )
    .await?;
    loop {
        if let RoomEvent::Data(m) = next().await? {
            if m.topic.as_deref() == Some("reply") {
                let v: serde_json::Value = serde_json::from_slice(&m.payload)?;
                if v["op"] == "stream_sha" {
                    if v["size"] != size {
                        bail!("echo peer got {v}");
                    }
                    break;
                }
            }
        }
    }
    let up_s = t0.elapsed().as_secs_f64();

    let t0 = Instant::now();
    let cmd = serde_json::json!({"op": "stream_bytes", "size": size, "topic": "bytes"});
    room.send_data(
        cmd.to_string().into_bytes(),
        DataOptions::topic("cmd").to("assistant"),
    )
    .await?;
    let reader = loop {
        if let RoomEvent::StreamOpened(r) = next().await? {
            break r;
        }
    };
    let got = reader.read_all().await?;
    let down_s = t0.elapsed().as_secs_f64();
    if got.len() != size {
        bail!("got {} of {size} bytes", got.len());
    }
    room.leave().await?;
    Ok(Sample {
        rtt_p50_ms: samples[samples.len() / 2],
        rtt_p95_ms: samples[samples.len() * 95 / 100 - 1],
        up_s,
        down_s,
    })
}

fn python_round(env: &Env, size: usize, rounds: usize) -> anyhow::Result<Sample> {
    let py = python::python()?;
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &env.pair.client_ns])
        .arg(&py)
        .arg(python::scripts_dir().join("lk_bench.py"))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_IDENTITY", "pybench")
        .env("BENCH_BYTES", size.to_string())
        .env("BENCH_ROUNDS", rounds.to_string())
        .env("LK_TIMEOUT", "600")
        .env("PYTHONWARNINGS", "ignore");
    let (status, out, err) = Proc::spawn("lk_bench.py", cmd)?.finish(Duration::from_secs(600))?;
    if !status.success() {
        bail!("lk_bench.py failed: {out}\n{err}");
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("no result line")?;
    let v: serde_json::Value = serde_json::from_str(line)?;
    let f = |k: &str| v[k].as_f64().with_context(|| format!("{k} missing in {v}"));
    Ok(Sample {
        rtt_p50_ms: f("rtt_p50_ms")?,
        rtt_p95_ms: f("rtt_p95_ms")?,
        up_s: f("up_s")?,
        down_s: f("down_s")?,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("serve") {
        return outpost_room::cli::main().map_err(Into::into);
    }
    let env_num = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let size = env_num("BENCH_BYTES", 10 * 1024 * 1024);
    let rounds = env_num("BENCH_ROUNDS", 200);
    let turns = env_num("BENCH_TURNS", 3);
    let me = std::env::current_exe().context("locating myself")?;
    let (env, _pki) = outpost_tests::bench::bench_env(Path::new(&me))?;
    let _echo = PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant")?;
    let (mut rust, mut py) = (Vec::new(), Vec::new());
    for turn in 0..turns {
        let url = env.server.url.clone();
        let r = in_netns(&env.pair.client_ns.clone(), move || {
            rust_round(url, size, rounds)
        })?;
        #[allow(clippy::print_stderr)]
        {
            eprintln!("turn {turn}: rust {r:?}");
        }
        let p = python_round(&env, size, rounds)?;
        #[allow(clippy::print_stderr)]
        {
            eprintln!("        python {p:?}");
        }
        rust.push(r);
        py.push(p);
    }
    let m = |v: &[Sample], f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
    let row = |name: &str, f: fn(&Sample) -> f64, unit: &str, lower_better: bool| {
        let (a, b) = (m(&rust, f), m(&py, f));
        let ratio = if lower_better { b / a } else { a / b };
        format!("| {name} | {a:.2} {unit} | {b:.2} {unit} | {ratio:.2} |\n")
    };
    let report = format!(
        "| measure (median of {turns} alternating turns) | outpost-livekit ↔ official SDK | official SDK ↔ official SDK | ratio (≥ 1: Outpost no worse) |\n|---|---|---|---|\n{}{}{}{}",
        row("data packet round trip p50", |s| s.rtt_p50_ms, "ms", true),
        row("data packet round trip p95", |s| s.rtt_p95_ms, "ms", true),
        row(
            &format!("{} MiB byte stream to the peer", size >> 20),
            |s| mb_s(s.up_s),
            "MB/s",
            false
        ),
        row(
            &format!("{} MiB byte stream from the peer", size >> 20),
            |s| mb_s(s.down_s),
            "MB/s",
            false
        ),
    );
    #[allow(clippy::print_stdout)]
    {
        println!("{report}");
    }
    Ok(())
}

fn mb_s(secs: f64) -> f64 {
    let size = std::env::var("BENCH_BYTES")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(10.0 * 1024.0 * 1024.0);
    size / secs / 1e6
}
