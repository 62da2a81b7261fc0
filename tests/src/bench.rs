//! What the bench binaries share: their environment knobs, the median of a run, the
//! server and network path they run through, and running `py/rpc_bench.py` as the
//! official-SDK caller and reading its one result line.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::proc::Proc;
use crate::python;

/// A numeric knob from the environment (`BENCH_ROUNDS`, …), or `default` when unset or
/// not a number.
pub fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The namespaces and server a bench runs through: `BENCH_SERVER=livekit` for
/// livekit-server (else outpost-room, `room_bin`), and with it `BENCH_PATH=turn-udp` for
/// its TURN server on, where the client namespace lets out only the signal connection
/// (TCP 7880) and UDP to the TURN port (3478): every client there, Outpost's and the
/// official SDK's alike, relays through TURN/UDP. The PKI (for the TURN/TLS listener
/// livekit-server wants beside it) lives as long as the environment.
pub fn bench_env(
    room_bin: &std::path::Path,
) -> anyhow::Result<(crate::lkclient::Env, Option<crate::pki::TestPki>)> {
    use crate::server::ServerKind;
    let kind = ServerKind::from_bench_env();
    let relay = std::env::var("BENCH_PATH").as_deref() == Ok("turn-udp");
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "server: {}{}",
            kind.name(),
            if relay {
                ", clients relayed over TURN/UDP"
            } else {
                ""
            }
        );
    }
    if !relay {
        return Ok((crate::lkclient::Env::on(kind, room_bin)?, None));
    }
    if kind != ServerKind::LiveKit {
        bail!("BENCH_PATH=turn-udp needs BENCH_SERVER=livekit (outpost-room has no TURN)");
    }
    let (env, pki) = crate::lkclient::Env::livekit_with_turn(room_bin)?;
    crate::lkclient::allow_only(
        &env.pair.client_ns,
        "tcp dport 7880 accept\n  udp dport 3478 accept",
    )?;
    Ok((env, Some(pki)))
}

/// The median of `v` (the upper one of an even count); NaN when `v` is empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `rpc_bench.py` as the caller, started with `cmd` (a Python command the bench has
/// placed in its namespace): the script and its working folder are set here, the room,
/// token and what to call by the bench. Returns the script's last JSON line.
pub fn rpc_bench_caller(mut cmd: Command) -> anyhow::Result<Value> {
    cmd.arg(python::scripts_dir().join("rpc_bench.py"))
        .current_dir(python::scripts_dir())
        .env("ROLE", "caller")
        .env("LK_TIMEOUT", "900")
        .env("PYTHONWARNINGS", "ignore");
    let (status, out, err) =
        Proc::spawn("rpc_bench caller", cmd)?.finish(Duration::from_secs(900))?;
    if !status.success() {
        bail!("rpc_bench.py caller failed: {out}\n{err}");
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("no result line")?;
    Ok(serde_json::from_str(line)?)
}
