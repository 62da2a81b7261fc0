//! Benchmark of a tool call over LiveKit RPC through Outpost (LiveKit Agents mode) against
//! a plain official-SDK RPC echo through the same room server (docs/BENCHMARKS.md):
//! `cargo run --release -p outpost-tests --bin agents_bench`.
//!
//! One run, one `outpost-room` server. In the client namespace: Outpost's session engine
//! (`outpost_core::Core`, identity "app", with its SQLite history and audit) and an
//! official-SDK echo peer (`tests/py/rpc_bench.py`, ROLE=echo, identity "echo"). In the
//! server namespace: an official-SDK caller with an agent token (`rpc_bench.py`,
//! ROLE=caller) that times, round after round, `echo` against Outpost's `calculator`
//! (auto-allowed) with the same payload, and `echo4k` (a fixed 4 KiB answer) against
//! Outpost's `read_local_file` of a 4 KiB file in an allowed folder. Both sides of each
//! comparison take the same path through the server and the veth pair; what differs is
//! what answers: the official SDK's handler, or Outpost's dispatcher, policy, tool and
//! history. Prints a Markdown table of the medians over BENCH_TURNS callers.
//!
//! Then the same for Outpost's own protocol: Outpost joins again with the caller as its
//! assistant ("proto", a plain participant), the caller answers its ClientHello with a
//! ServerWelcome and times, round after round, the SDK `echo` against a `calculator`
//! ToolUseRequest (type 6, execution "client") answered by Outpost's ToolUseResult, both
//! with the same expression (`rpc_bench.py`, KINDS=echo,proto).
//! `agents_bench serve …` runs the room server itself (same build profile).

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use outpost_core::{ConnectOptions, Core, Credentials, PolicySource, ToolsConfig};
use outpost_tests::bench::{self, env_num, median};
use outpost_tests::lkclient::{Env, in_netns};
use outpost_tests::proc::Proc;
use outpost_tests::python;
use serde_json::Value;

const ROOM: &str = "agents-bench";

fn token(identity: &str, kind: &str) -> anyhow::Result<String> {
    outpost_tests::lkclient::dev_token(ROOM, identity, kind)
}

/// Outpost in the client namespace, with `assistant` as its assistant, until `stop`
/// fires (or is dropped).
fn start_outpost(
    env: &Env,
    dir: &Path,
    assistant: &'static str,
) -> anyhow::Result<(
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<anyhow::Result<()>>,
)> {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let url = env.server.url.clone();
    let ns = env.pair.client_ns.clone();
    let tools = ToolsConfig {
        policy: PolicySource::File(dir.join("policy.toml")),
        home: dir.to_path_buf(),
        protected: Vec::new(),
    };
    let data_dir = dir.join("data");
    let token = token("app", "")?;
    let handle = std::thread::spawn(move || {
        in_netns(&ns, move || async move {
            let core = Core::open(Some(data_dir), tools)?;
            let mut opts = ConnectOptions::new(Credentials::Token { url, token });
            opts.room_name = Some(ROOM.into());
            opts.assistant_identity = Some(assistant.into());
            let (session, mut events) = core.connect(opts).await?;
            let _ = ready_tx.send(());
            // Read the UI events as the app would, until told to stop.
            let drain = async { while events.recv().await.is_some() {} };
            tokio::select! {
                _ = stop_rx => {}
                () = drain => {}
            }
            session.leave().await?;
            Ok(())
        })
    });
    ready_rx
        .recv_timeout(Duration::from_secs(60))
        .context("Outpost did not join the room")?;
    Ok((stop_tx, handle))
}

fn start_echo(env: &Env) -> anyhow::Result<Proc> {
    let py = python::python()?;
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &env.pair.client_ns])
        .arg(&py)
        .arg(python::scripts_dir().join("rpc_bench.py"))
        .current_dir(python::scripts_dir())
        .env("ROLE", "echo")
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_IDENTITY", "echo")
        .env("PYTHONWARNINGS", "ignore");
    let mut proc = Proc::spawn("rpc_bench echo", cmd)?;
    proc.wait_for_line("ready", Duration::from_secs(60))?;
    Ok(proc)
}

fn caller(env: &Env, read_path: &Path, rounds: usize) -> anyhow::Result<Value> {
    let py = python::python()?;
    let mut cmd = env.pair.server_command(&py);
    cmd.env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_TOKEN", token("agent", "agent")?)
        .env("READ_PATH", read_path)
        .env("BENCH_ROUNDS", rounds.to_string());
    bench::rpc_bench_caller(cmd)
}

/// The caller as Outpost's protocol assistant ("proto"): `echo` against the protocol's
/// `calculator` tool call.
fn proto_caller(env: &Env, rounds: usize) -> anyhow::Result<Value> {
    let py = python::python()?;
    let mut cmd = env.pair.server_command(&py);
    cmd.env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_TOKEN", token("proto", "")?)
        .env("KINDS", "echo,proto")
        .env("BENCH_ROUNDS", rounds.to_string());
    bench::rpc_bench_caller(cmd)
}

/// The medians of `key` over the turns' results.
fn median_of(runs: &[Value], key: &str) -> anyhow::Result<f64> {
    let v = runs
        .iter()
        .map(|r| {
            r[key]
                .as_f64()
                .with_context(|| format!("{key} missing in {r}"))
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    Ok(median(v))
}

fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("serve") {
        return outpost_room::cli::main().map_err(Into::into);
    }
    let rounds = env_num("BENCH_ROUNDS", 200);
    let turns = env_num("BENCH_TURNS", 3);
    let dir = tempfile::tempdir()?;
    let allowed = dir.path().join("allowed");
    std::fs::create_dir_all(&allowed)?;
    let read_path = allowed.join("four-k.txt");
    std::fs::write(&read_path, "y".repeat(4096))?;
    std::fs::write(
        dir.path().join("policy.toml"),
        format!(
            "[tools]\ncalculator = \"allow\"\n\n[[folders]]\npath = \"{}\"\naccess = \"allow\"\n",
            allowed.display()
        ),
    )?;

    let me = std::env::current_exe().context("locating myself")?;
    let (env, _pki) = outpost_tests::bench::bench_env(Path::new(&me))?;
    let _echo = start_echo(&env)?;
    let mut runs = Vec::new();
    let mut proto_runs = Vec::new();
    for (assistant, runs) in [("agent", &mut runs), ("proto", &mut proto_runs)] {
        let (stop, outpost) = start_outpost(&env, dir.path(), assistant)?;
        for turn in 0..turns {
            let v = if assistant == "agent" {
                caller(&env, &read_path, rounds)?
            } else {
                proto_caller(&env, rounds)?
            };
            #[allow(clippy::print_stderr)]
            {
                eprintln!("{assistant} turn {turn}: {v}");
            }
            runs.push(v);
        }
        let _ = stop.send(());
        outpost
            .join()
            .map_err(|_| anyhow::anyhow!("Outpost's thread panicked"))??;
    }

    let m = |k: &str| median_of(&runs, k);
    let mut report = format!(
        "| RPC round trip (median of {turns} callers × {rounds} rounds) | plain SDK echo | through Outpost | ratio (goal ≤ 1.1 at p50) |\n|---|---|---|---|\n"
    );
    for (name, echo, outpost) in [
        ("calculator, p50", "echo_p50_ms", "calculator_p50_ms"),
        ("calculator, p95", "echo_p95_ms", "calculator_p95_ms"),
        ("4 KiB file read, p50", "echo4k_p50_ms", "read4k_p50_ms"),
        ("4 KiB file read, p95", "echo4k_p95_ms", "read4k_p95_ms"),
    ] {
        let (a, b) = (m(echo)?, m(outpost)?);
        report.push_str(&format!(
            "| {name} | {a:.2} ms | {b:.2} ms | {:.2} |\n",
            b / a
        ));
    }
    report.push_str(&format!(
        "\n| Outpost protocol tool round trip (median of {turns} callers × {rounds} rounds) | plain SDK RPC echo | ToolUseRequest → ToolUseResult | ratio (goal ≤ 0.9) |\n|---|---|---|---|\n"
    ));
    for (name, echo, outpost) in [
        ("calculator, p50", "echo_p50_ms", "proto_p50_ms"),
        ("calculator, p95", "echo_p95_ms", "proto_p95_ms"),
    ] {
        let (a, b) = (
            median_of(&proto_runs, echo)?,
            median_of(&proto_runs, outpost)?,
        );
        report.push_str(&format!(
            "| {name} | {a:.2} ms | {b:.2} ms | {:.2} |\n",
            b / a
        ));
    }
    #[allow(clippy::print_stdout)]
    {
        println!("{report}");
    }
    Ok(())
}
