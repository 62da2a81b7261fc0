//! Benchmark of `outpost-room` with two official-SDK peers (see docs/BENCHMARKS.md):
//! `cargo run --release -p outpost-tests --bin room_bench`.
//!
//! In one run it measures, side by side: (1) reliable data-packet round trips and a
//! 10 MiB byte stream between two Python-SDK peers through the server, in a fresh
//! network namespace; (2) a raw TCP copy over the same veth (link ceiling); (3) the same
//! 10 MiB pushed over one `webrtc` data channel straight into a server-configured peer
//! connection, without SDK or relay (the pure-Rust stack's own ceiling).
//! `room_bench serve …` runs the server itself (the bench spawns itself that way, so
//! the server is always built with the same profile as the bench).

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use outpost_tests::netns::NetNs;
use outpost_tests::room::{RoomProcess, run_script};

fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("serve") {
        return outpost_room::cli::main().map_err(Into::into);
    }
    let total: usize = std::env::var("BENCH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10 * 1024 * 1024);
    let me = std::env::current_exe().context("locating myself")?;
    let ns = NetNs::create()?;
    let server = RoomProcess::start(&ns, Path::new(&me), &[])?;
    let ip = ns.server_ip.to_string();
    let sdk = run_script(
        &ns,
        &server,
        "bench.py",
        &[
            ("BENCH_TCP_HOST", ip.as_str()),
            ("BENCH_BYTES", &total.to_string()),
        ],
        Duration::from_secs(900),
    )?;
    let rt = tokio::runtime::Runtime::new()?;
    let direct = rt.block_on(outpost_room::direct_pair_seconds(
        &outpost_room::Config::default().wire,
        total,
        15_000,
    ))?;
    let r = &sdk[0];
    let direct_mb_s = total as f64 / direct / 1e6;
    let stream_mb_s = r["stream_mb_s"].as_f64().unwrap_or(0.0);
    let report = format!(
        "| measure | value |\n|---|---|\n\
         | data packet RTT p50 / p95 (SDK → room → SDK → room → SDK) | {} ms / {} ms ({} rounds) |\n\
         | 10 MiB byte stream, SDK → room → SDK (separate processes) | {stream_mb_s:.2} MB/s ({} s) |\n\
         | 10 MiB byte stream, SDK → room, discarded (how fast the SDK pushes) | {} MB/s |\n\
         | baseline: 10 MiB over one webrtc-rs data channel, no SDK, no relay (loopback) | {direct_mb_s:.2} MB/s |\n\
         | baseline: 10 MiB TCP copy over the same veth (Python asyncio) | {} MB/s |\n\
         | ratio: byte stream / webrtc-rs direct | {:.3} |\n",
        r["rtt_ms_p50"],
        r["rtt_ms_p95"],
        r["rtt_rounds"],
        r["stream_s"],
        r["sdk_push_mb_s"],
        r["tcp_mb_s"],
        stream_mb_s / direct_mb_s,
    );
    #[allow(clippy::print_stdout)]
    {
        println!("{report}");
    }
    Ok(())
}
