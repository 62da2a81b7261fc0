//! Many headless Outpost clients in one process, for the load test (tests/tests/load.rs):
//! each is an outpost-core `Core` (its own store in `DATA_DIR/<n>`, the default policy,
//! which runs the calculator without asking) with one `Session` in room `PREFIX<n>`.
//!
//! `load_clients URL PREFIX COUNT DATA_DIR MAX_SECS`: joins `COUNT` rooms (identity
//! `client-<n>`, dev keys), prints `ready COUNT` once every session has joined, runs until
//! stdin closes or `MAX_SECS` pass (so it always stops by itself), then leaves every room
//! and prints `left`. Each session's UI events are read and dropped, as an app would read
//! them.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use outpost_core::{ConnectOptions, Core, Credentials, Session, ToolsConfig};

/// How many joins run at once: enough to be quick, few enough for a 2-core machine.
const JOINS_AT_ONCE: usize = 5;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("load_clients: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, prefix, count, data_dir, max_secs] = args.as_slice() else {
        anyhow::bail!("usage: load_clients URL PREFIX COUNT DATA_DIR MAX_SECS");
    };
    let count: usize = count.parse().context("COUNT")?;
    let max_secs: u64 = max_secs.parse().context("MAX_SECS")?;
    let data_dir = PathBuf::from(data_dir);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let joins = futures::stream::iter(0..count)
            .map(|n| join(url, prefix, n, &data_dir))
            .buffer_unordered(JOINS_AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        let sessions = joins.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
        println!("ready {}", sessions.len());
        // stdin on a plain thread: its end (EOF) is the signal to leave.
        let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            let _ = eof_tx.send(());
        });
        let _ = tokio::time::timeout(Duration::from_secs(max_secs), eof_rx).await;
        futures::future::join_all(sessions.iter().map(|(s, _)| s.leave())).await;
        for (_, core) in &sessions {
            let _ = core.store().flush().await;
        }
        println!("left");
        anyhow::Ok(())
    })
}

async fn join(
    url: &str,
    prefix: &str,
    n: usize,
    data_dir: &std::path::Path,
) -> anyhow::Result<(Session, Core)> {
    let core = Core::open(Some(data_dir.join(n.to_string())), ToolsConfig::defaults())?;
    let room = format!("{prefix}{n}");
    let token = outpost_tests::lkclient::token(
        &room,
        &format!("client-{n}"),
        outpost_tests::lkclient::DEV_SECRET,
    )?;
    let mut opts = ConnectOptions::new(Credentials::Token {
        url: url.to_owned(),
        token,
    });
    opts.room_name = Some(room);
    let (session, mut events) = core
        .connect(opts)
        .await
        .with_context(|| format!("client {n} joining"))?;
    tokio::spawn(async move { while events.recv().await.is_some() {} });
    Ok((session, core))
}
