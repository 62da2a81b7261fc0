//! Benchmark of an MCP tool call through Outpost against the same call made straight to the
//! same server by the official MCP Rust SDK's client (docs/BENCHMARKS.md):
//! `cargo run --release -p outpost-tests --bin mcp_bench`.
//!
//! The server is the pinned `@modelcontextprotocol/server-everything` (tests/mcp) over
//! stdio, its `echo` tool, auto-allowed by `[mcp_servers] everything = "allow"`. One run,
//! BENCH_TURNS turns, each with three parts timed round after round:
//!
//! * **direct**: rmcp's client (`rmcp` 3.11.0, the official Rust SDK, the one Outpost's host
//!   is built on, so the difference is Outpost's own work) calls `echo` on its own
//!   server-everything process.
//! * **Outpost, in process**: a `ToolUseRequest` for `mcp__everything__echo` handed to
//!   Outpost's executor (naming, policy, the MCP host, result mapping) until its
//!   `ToolUseResult` comes back; another server-everything process. Interleaved with
//!   *direct*, call for call, so both see the same moment of the machine.
//! * **Outpost, whole path**: an official-SDK assistant (`tests/py/rpc_bench.py`, LiveKit
//!   Agents mode, agent token) in the server namespace calls `mcp__everything__echo` and
//!   the built-in `calculator` (the same room path with a tool that does no IO) over
//!   LiveKit RPC on Outpost's session engine (`outpost_core::Core`, history and audit on)
//!   in the client namespace, through one `outpost-room` server.
//!
//! Prints a Markdown table of the medians over the turns. `mcp_bench serve …` runs the room
//! server itself (same build profile).
//!
//! `mcp_bench sandbox` measures the sandbox of stdio servers (issue 28) instead, in one
//! run: `echo` through the MCP host on a sandboxed server-everything and on an unsandboxed
//! one, interleaved call for call (p50 per turn, median of the turns), and the start of the
//! same server (plan, ruleset, spawn, `initialize`) sandboxed and not, alternating.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use outpost_core::executor::{DispatchEvent, Executor, Permissions};
use outpost_core::{ConnectOptions, Core, Credentials, PolicySource, ToolsConfig};
use outpost_mcp::{HostOptions, McpHost, MemorySecrets, ServerConfig};
use outpost_protocol::{Execution, ToolUseRequest};
use outpost_tests::bench::{self, env_num, median};
use outpost_tests::lkclient::{Env, in_netns};
use outpost_tests::python;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

const ROOM: &str = "mcp-bench";
const MESSAGE: &str = "hi from the bench";
const START: Duration = Duration::from_secs(60);

fn token(identity: &str, kind: &str) -> anyhow::Result<String> {
    outpost_tests::lkclient::dev_token(ROOM, identity, kind)
}

fn everything_js() -> anyhow::Result<PathBuf> {
    let js = python::workspace_root()
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !js.exists() {
        bail!(
            "{} is missing: run scripts/setup.sh (npm ci in tests/mcp)",
            js.display()
        );
    }
    Ok(js)
}

fn everything() -> anyhow::Result<ServerConfig> {
    Ok(ServerConfig::stdio(
        "node",
        vec![everything_js()?.display().to_string(), "stdio".into()],
    ))
}

fn host(logs: &Path) -> McpHost {
    McpHost::new(
        HostOptions::new(
            outpost_mcp::ConnectOptions {
                log_dir: Some(logs.to_path_buf()),
                ..outpost_mcp::ConnectOptions::default()
            },
            Arc::new(MemorySecrets::default()),
        ),
        Vec::new(),
    )
}

fn tools_config(dir: &Path) -> ToolsConfig {
    ToolsConfig {
        policy: PolicySource::File(dir.join("policy.toml")),
        home: dir.to_path_buf(),
        protected: Vec::new(),
    }
}

fn pct(samples: &[f64], p: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((s.len() as f64 * p) as usize).min(s.len() - 1);
    s[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The direct and in-process parts of one turn: p50/p95 of each, in milliseconds.
struct Local {
    direct: Vec<f64>,
    outpost: Vec<f64>,
}

async fn local_turn(dir: &Path, rounds: usize, warmup: usize) -> anyhow::Result<Local> {
    // Direct: the official SDK's client on its own server process.
    let mut child = tokio::process::Command::new("node")
        .arg(everything_js()?)
        .arg("stdio")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting node")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let stdin = child.stdin.take().context("no stdin")?;
    let client = ().serve((stdout, stdin)).await?;
    let args = json!({ "message": MESSAGE })
        .as_object()
        .cloned()
        .context("an object")?;

    // Outpost: its executor with its MCP host on a second server process.
    let host = host(&dir.join("mcp-logs-local"));
    host.start("everything", everything()?)?;
    host.wait_running("everything", START).await?;
    let perms = Permissions::new(&tools_config(dir))?;
    let (exec, mut rx) = Executor::new(&perms, &[], Some(host.clone()))?;
    let mut n = 0_u64;
    let mut through_outpost = async || -> anyhow::Result<Duration> {
        n += 1;
        let id = format!("r{n}");
        let t0 = Instant::now();
        exec.run(
            "bench",
            ToolUseRequest {
                id: id.clone(),
                message_id: "m".into(),
                tool_name: "mcp__everything__echo".into(),
                execution: Execution::Client,
                parameters: args.clone(),
                timeout_ms: Some(30_000),
            },
        );
        loop {
            match rx.recv().await.context("the executor ended")? {
                DispatchEvent::Result(r) if r.id == id => {
                    let took = t0.elapsed();
                    let text = r.result.as_ref().and_then(|m| m.get("text")).cloned();
                    if !r.success || text != Some(Value::from(format!("Echo: {MESSAGE}"))) {
                        bail!("Outpost answered {r:?}");
                    }
                    return Ok(took);
                }
                _ => {}
            }
        }
    };
    let direct = async || -> anyhow::Result<Duration> {
        let t0 = Instant::now();
        let out = client
            .call_tool(CallToolRequestParams::new("echo").with_arguments(args.clone()))
            .await?;
        let took = t0.elapsed();
        if out.is_error == Some(true) {
            bail!("the server answered an error: {out:?}");
        }
        Ok(took)
    };
    for _ in 0..warmup {
        direct().await?;
        through_outpost().await?;
    }
    let mut local = Local {
        direct: Vec::with_capacity(rounds),
        outpost: Vec::with_capacity(rounds),
    };
    for _ in 0..rounds {
        local.direct.push(ms(direct().await?));
        local.outpost.push(ms(through_outpost().await?));
    }
    drop(exec);
    host.shutdown();
    client.cancel().await?;
    Ok(local)
}

/// Outpost's session engine with server-everything in the client namespace until `stop`
/// fires (or is dropped).
fn start_outpost(
    env: &Env,
    dir: &Path,
) -> anyhow::Result<(
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<anyhow::Result<()>>,
)> {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let url = env.server.url.clone();
    let ns = env.pair.client_ns.clone();
    let tools = tools_config(dir);
    let data_dir = dir.join("data");
    let token = token("app", "")?;
    let server = everything()?;
    let handle = std::thread::spawn(move || {
        in_netns(&ns, move || async move {
            let core = Core::open(Some(data_dir.clone()), tools)?;
            let host = host(&data_dir.join("mcp-logs"));
            host.start("everything", server)?;
            host.wait_running("everything", START).await?;
            let mut opts = ConnectOptions::new(Credentials::Token { url, token });
            opts.room_name = Some(ROOM.into());
            opts.assistant_identity = Some("agent".into());
            opts.mcp = Some(host.clone());
            let (session, mut events) = core.connect(opts).await?;
            let _ = ready_tx.send(());
            // Read the UI events as the app would, until told to stop.
            let drain = async { while events.recv().await.is_some() {} };
            tokio::select! {
                _ = stop_rx => {}
                () = drain => {}
            }
            session.leave().await?;
            host.shutdown();
            Ok(())
        })
    });
    ready_rx
        .recv_timeout(Duration::from_secs(90))
        .context("Outpost did not join the room")?;
    Ok((stop_tx, handle))
}

fn caller(env: &Env, rounds: usize) -> anyhow::Result<Value> {
    let py = python::python()?;
    let mut cmd = env.pair.server_command(&py);
    cmd.env("KINDS", "calculator,mcp")
        .env("MCP_TOOL", "mcp__everything__echo")
        .env("MCP_MESSAGE", MESSAGE)
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_TOKEN", token("agent", "agent")?)
        .env("BENCH_ROUNDS", rounds.to_string());
    bench::rpc_bench_caller(cmd)
}

fn with_sandbox(mode: outpost_mcp::sandbox::SandboxMode) -> anyhow::Result<ServerConfig> {
    let mut c = everything()?;
    if let Some(s) = c.sandbox_mut() {
        s.mode = mode;
    }
    Ok(c)
}

/// `mcp_bench sandbox` (the module's doc).
fn sandbox_bench() -> anyhow::Result<()> {
    use outpost_mcp::sandbox::{SandboxMode, Support};
    let rounds = env_num("BENCH_ROUNDS", 500);
    let turns = env_num("BENCH_TURNS", 3);
    let warmup = env_num("BENCH_WARMUP", 50);
    let starts = env_num("BENCH_STARTS", 20);
    let support = Support::detect();
    if support.landlock == 0 {
        bail!("this kernel has no Landlock: there is no sandbox to measure");
    }
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let args = json!({ "message": MESSAGE })
        .as_object()
        .cloned()
        .context("an object")?;
    let (mut boxed_p50, mut open_p50) = (Vec::new(), Vec::new());
    let (mut boxed_start, mut open_start) = (Vec::new(), Vec::new());
    rt.block_on(async {
        let host = host(&dir.path().join("mcp-logs"));
        host.start("boxed", with_sandbox(SandboxMode::On)?)?;
        host.start("open", with_sandbox(SandboxMode::Off)?)?;
        host.wait_running("boxed", START).await?;
        host.wait_running("open", START).await?;
        if !host.snapshot()["boxed"]
            .reach
            .as_ref()
            .is_some_and(|r| r.sandboxed())
        {
            bail!("the sandboxed server is not sandboxed");
        }
        let call = |server: &'static str| {
            let (host, args) = (host.clone(), args.clone());
            async move {
                let t0 = Instant::now();
                let out = host
                    .call(
                        server,
                        "echo",
                        Some(args),
                        outpost_mcp::CallOptions::with_timeout(Duration::from_secs(30)),
                    )
                    .await?;
                let took = t0.elapsed();
                if out.is_error {
                    bail!("{server} answered an error: {:?}", out.result);
                }
                Ok::<_, anyhow::Error>(took)
            }
        };
        for _ in 0..warmup {
            call("boxed").await?;
            call("open").await?;
        }
        for turn in 0..turns {
            let (mut b, mut o) = (Vec::new(), Vec::new());
            for i in 0..rounds {
                // Alternate which goes first, so neither always follows the other.
                if (i + turn) % 2 == 0 {
                    b.push(ms(call("boxed").await?));
                    o.push(ms(call("open").await?));
                } else {
                    o.push(ms(call("open").await?));
                    b.push(ms(call("boxed").await?));
                }
            }
            boxed_p50.push(pct(&b, 0.5));
            open_p50.push(pct(&o, 0.5));
        }
        host.shutdown();
        // Starts: the same server sandboxed and not, alternating.
        let opts = outpost_mcp::ConnectOptions {
            log_dir: Some(dir.path().join("start-logs")),
            ..outpost_mcp::ConnectOptions::default()
        };
        let secrets = MemorySecrets::shared();
        for i in 0..starts * 2 {
            let boxed = i % 2 == 0;
            let mode = if boxed {
                SandboxMode::On
            } else {
                SandboxMode::Off
            };
            let config = with_sandbox(mode)?;
            let t0 = Instant::now();
            let conn = outpost_mcp::Connection::open("start", &config, &secrets, &opts).await?;
            let took = ms(t0.elapsed());
            conn.close();
            drop(conn);
            if boxed {
                boxed_start.push(took);
            } else {
                open_start.push(took);
            }
        }
        Ok::<_, anyhow::Error>(())
    })?;
    let (b, o) = (median(boxed_p50), median(open_p50));
    let (bs, os) = (pct(&boxed_start, 0.5), pct(&open_start, 0.5));
    let mut report = format!(
        "| server-everything (Landlock level {}, seccomp {}) | unsandboxed | sandboxed | sandboxed − unsandboxed | ratio |\n|---|---|---|---|---|\n",
        support.landlock, support.seccomp
    );
    report.push_str(&format!(
        "| `echo` through the host, p50 (median of {turns} turns × {rounds} calls) | {o:.3} ms | {b:.3} ms | {:.3} ms | {:.2} |\n",
        b - o,
        b / o
    ));
    report.push_str(&format!(
        "| start to `initialize` answered, median of {starts} each | {os:.1} ms | {bs:.1} ms | {:.1} ms | {:.2} |\n",
        bs - os,
        bs / os
    ));
    report.push_str(&format!(
        "\nGoals: the sandbox adds at most 0.2 ms to a call at p50 ({:.3} ms); a sandboxed start takes at most 1.2× an unsandboxed one ({:.2}×).\n",
        b - o,
        bs / os
    ));
    #[allow(clippy::print_stdout)]
    {
        println!("{report}");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("serve") => return outpost_room::cli::main().map_err(Into::into),
        Some("sandbox") => return sandbox_bench(),
        _ => {}
    }
    let rounds = env_num("BENCH_ROUNDS", 500);
    let turns = env_num("BENCH_TURNS", 3);
    let warmup = env_num("BENCH_WARMUP", 50);
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("policy.toml"),
        "[tools]\ncalculator = \"allow\"\n\n[mcp_servers]\neverything = \"allow\"\n",
    )?;

    let me = std::env::current_exe().context("locating myself")?;
    let env = Env::start(Path::new(&me))?;
    let (stop, outpost) = start_outpost(&env, dir.path())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // (name, p50 per turn, p95 per turn)
    let mut rows: Vec<(&str, Vec<f64>, Vec<f64>)> = [
        "direct",
        "outpost_local",
        "outpost_mcp_room",
        "outpost_calc_room",
    ]
    .into_iter()
    .map(|k| (k, Vec::new(), Vec::new()))
    .collect();
    for turn in 0..turns {
        let local = rt.block_on(local_turn(dir.path(), rounds, warmup))?;
        let room = caller(&env, rounds)?;
        let get = |k: &str| -> anyhow::Result<f64> {
            room[k]
                .as_f64()
                .with_context(|| format!("{k} missing in {room}"))
        };
        let turn_rows = [
            (pct(&local.direct, 0.5), pct(&local.direct, 0.95)),
            (pct(&local.outpost, 0.5), pct(&local.outpost, 0.95)),
            (get("mcp_p50_ms")?, get("mcp_p95_ms")?),
            (get("calculator_p50_ms")?, get("calculator_p95_ms")?),
        ];
        #[allow(clippy::print_stderr)]
        {
            eprintln!("turn {turn}: direct/local/room-mcp/room-calc p50 {turn_rows:?}");
        }
        for (row, (p50, p95)) in rows.iter_mut().zip(turn_rows) {
            row.1.push(p50);
            row.2.push(p95);
        }
    }
    let _ = stop.send(());
    outpost
        .join()
        .map_err(|_| anyhow::anyhow!("Outpost's thread panicked"))??;

    let m: Vec<(f64, f64)> = rows
        .into_iter()
        .map(|(_, p50, p95)| (median(p50), median(p95)))
        .collect();
    let (direct, local, room_mcp, room_calc) = (m[0], m[1], m[2], m[3]);
    let mut report = format!(
        "| server-everything `echo` (median of {turns} turns × {rounds} calls) | p50 | p95 | ratio to direct at p50 |\n|---|---|---|---|\n"
    );
    for (name, (p50, p95)) in [
        ("direct: rmcp client → server", direct),
        (
            "through Outpost, in process: executor → host → server",
            local,
        ),
        (
            "through Outpost, whole path: SDK assistant → room → Outpost → server",
            room_mcp,
        ),
        ("same whole path, built-in `calculator` (no MCP)", room_calc),
    ] {
        report.push_str(&format!(
            "| {name} | {p50:.3} ms | {p95:.3} ms | {:.2} |\n",
            p50 / direct.0
        ));
    }
    report.push_str(&format!(
        "\nOutpost's added time at p50 (goal ≤ 2 ms): in process {:.3} ms; on the whole path, over the built-in tool's room round trip, {:.3} ms; whole path over the direct call {:.3} ms.\n",
        local.0 - direct.0,
        room_mcp.0 - room_calc.0 - direct.0,
        room_mcp.0 - direct.0,
    ));
    #[allow(clippy::print_stdout)]
    {
        println!("{report}");
    }
    Ok(())
}
