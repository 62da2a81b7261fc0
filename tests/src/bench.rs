//! What the bench binaries share: their environment knobs, the median of a run, and
//! running `py/rpc_bench.py` as the official-SDK caller and reading its one result line.

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
